"""``names="hta"``: the tables in HTA 0.5's column names, for users moving from HTA (issue 37,
item 10). The figures under HTA's names are the ones HTA computes the same way: checked here
against HTA's own numbers on the shared DLRM traces (tests/oracle, hta_expectations.json)."""

from __future__ import annotations

import pandas as pd
import pytest

import rankscope
from rankscope._analysis import HTA_COLUMNS

from conftest import oracle


@pytest.fixture(scope="module")
def a_dlrm(dlrm):
    return rankscope.analyze(dlrm, progress=False)


@pytest.fixture(scope="module")
def hta():
    return oracle("hta_expectations.json")["sets"]["param-dlrm-8rank"]


def test_ranks_are_htas_temporal_breakdown_and_overlap_by_name(a_dlrm, hta):
    df = a_dlrm.ranks(names="hta")
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["rank", "compute_time(us)", "comp_comm_overlap_pctg"]
    assert sorted(df["rank"]) == list(range(8))
    for row in df.to_dict("records"):
        r = str(row["rank"])
        assert abs(row["compute_time(us)"] - hta["temporal_breakdown"][r]["compute_time_us"]) <= 1.0, r
        assert abs(row["comp_comm_overlap_pctg"] - hta["comm_comp_overlap"][r]["comp_comm_overlap_pct"]) <= 0.006, r
    # The same figures as our names, in HTA's units.
    ours = a_dlrm.ranks().set_index("rank")
    for row in df.to_dict("records"):
        assert row["compute_time(us)"] == ours.loc[row["rank"], "compute_ns"] / 1e3
        assert row["comp_comm_overlap_pctg"] == ours.loc[row["rank"], "overlap_pct_hta"]


def test_gpu_idle_is_htas_long_idle_time_breakdown(a_dlrm, hta):
    df = a_dlrm.gpu_idle(names="hta")
    assert list(df.columns) == HTA_COLUMNS["gpu_idle"]
    wide = a_dlrm.gpu_idle()
    assert len(df) == 3 * len(wide)
    assert set(df["idle_category"]) == {"host_wait", "kernel_wait", "other"}
    want = hta["idle_time_breakdown"]["ranks"]
    for (rank, stream), g in df.groupby(["rank", "stream"]):
        x = want[str(rank)][str(stream)]
        us = lambda k: x.get(k, {}).get("idle_time_us") or 0.0  # noqa: E731
        by = dict(zip(g["idle_category"], g["idle_time"]))
        # HTA's kernel_wait and each stream's total idle time are equal (docs/python.md).
        assert by["kernel_wait"] == us("kernel_wait"), (rank, stream)
        assert sum(by.values()) == us("host_wait") + us("kernel_wait") + us("other"), (rank, stream)
        total = sum(by.values())
        if total:
            assert abs(g["idle_time_ratio"].sum() - 1.0) < 1e-12
            if rank not in (1, 3):  # where HTA keeps every kernel, the shares are HTA's too
                for cat in ("host_wait", "other"):
                    got = g[g["idle_category"] == cat]["idle_time_ratio"].iloc[0]
                    assert abs(got - (x.get(cat, {}).get("idle_time_ratio") or 0.0)) < 0.01, (rank, stream, cat)


def test_other_forms_and_names(a_dlrm):
    assert a_dlrm.ranks(form="records", names="hta") == a_dlrm.ranks(names="hta").to_dict("records")
    assert a_dlrm.gpu_idle(form="arrow", names="hta").column_names == HTA_COLUMNS["gpu_idle"]
    with pytest.raises(ValueError):
        a_dlrm.ranks(names="nsight")
    # The tables whose figures HTA computes otherwise (or per kernel) have no HTA names.
    from rankscope._analysis import _names

    with pytest.raises(ValueError, match="no HTA counterpart"):
        _names("hta", "launches")
