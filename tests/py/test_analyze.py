"""`rankscope.analyze` on the shared real traces: exactly the CLI's outputs; the HTA-named tables
hold the numbers HTA 0.5.0 and the TensorBoard plugin committed in tests/oracle (where their
definitions are ours; tests/oracle/HTA_TB.md, docs/metrics.md)."""

from __future__ import annotations

import json
import threading
import time

import pandas as pd
import pyarrow as pa
import pytest

import rankscope
from rankscope._analysis import COLUMNS, RANK_INFO, RANK_TOTALS

from conftest import cli, oracle


@pytest.fixture(scope="module")
def a_dlrm(dlrm):
    return rankscope.analyze(dlrm, progress=False)


@pytest.fixture(scope="module")
def a_gloo(gloo):
    return rankscope.analyze(str(gloo), progress=False)


@pytest.mark.parametrize("which", ["dlrm", "gloo"])
def test_outputs_are_the_clis_byte_for_byte(which, request):
    d = request.getfixturevalue(which)
    a = request.getfixturevalue(f"a_{which}")
    out = cli("analyze", "--json", str(d))
    assert a.json() + "\n" == out or a.json() == out
    assert a.report == json.loads(out)
    assert a.report["schema"] == "rankscope.analysis"
    assert a.markdown().strip() == cli("analyze", "--md", str(d)).strip()
    assert a.csv().strip() == cli("analyze", "--csv", str(d)).strip()
    assert a.clean and a.failed == []


def test_a_list_of_files_is_the_folder(dlrm, a_dlrm):
    files = sorted(dlrm.glob("*.json*"))
    assert len(files) == 8
    assert rankscope.analyze(files, progress=False).report == a_dlrm.report


def test_tables_hold_the_reports_rows(a_dlrm, a_gloo):
    for a in (a_dlrm, a_gloo):
        r = a.report
        steps = a.steps()
        assert isinstance(steps, pd.DataFrame)
        assert len(steps) == sum(len(s["per_rank"]) for s in r["steps"])
        assert list(steps.columns) == COLUMNS["steps"]
        first = r["steps"][0]["per_rank"][0]
        assert steps.iloc[0].to_dict() == dict(step=r["steps"][0]["step"], **first)
        for name in ["collectives", "stragglers", "findings", "alignment", "gpu_idle", "launches", "diagnostics"]:
            rows = r[name]
            t = getattr(a, name)(form="records")
            assert t == rows, name
            df = getattr(a, name)()
            assert list(df.columns) == COLUMNS[name], name
            assert len(df) == len(rows), name
            # Every field the report has for this table is a listed column.
            for row in rows:
                assert list(row) == COLUMNS[name], name
        ranks = a.ranks()
        assert list(ranks["rank"]) == [t["rank"] for t in r["rank_totals"]]
        assert list(ranks.columns[: len(RANK_INFO) + len(RANK_TOTALS)]) == RANK_INFO + RANK_TOTALS
        for t, row in zip(r["rank_totals"], a.ranks(form="records")):
            assert row["compute_ns"] == t["compute_ns"]
            assert row["step_time_p50_ns"] == t["step_time"]["p50_ns"]
            info = next(x for x in r["ranks"] if x["rank"] == t["rank"])
            assert row["source"] == info["source"]


def test_whatif_is_the_replay_step_by_step(a_gloo):
    """The what-if replay (docs/metrics.md, "What-if"): one row per step of the report's
    ``whatif.steps``, its relative error computed from the two times."""
    w = a_gloo.report["whatif"]
    rows = a_gloo.whatif(form="records")
    assert [r["step"] for r in rows] == [s["step"] for s in w["steps"]]
    for r, s in zip(rows, w["steps"]):
        assert (r["recorded_ns"], r["replayed_ns"]) == (s["recorded_ns"], s["replayed_ns"])
        assert abs(r["error"] - (s["replayed_ns"] - s["recorded_ns"]) / s["recorded_ns"]) < 1e-12
    assert max(abs(r["error"]) for r in rows) == pytest.approx(w["max_error"])
    assert list(a_gloo.whatif().columns) == ["step", "recorded_ns", "replayed_ns", "error"]


def test_whatif_timeline_is_every_span(a_gloo):
    """The replayed timeline, one row per span: every rank's three versions, each in order."""
    t = a_gloo.report["whatif"]["timeline"]
    rows = a_gloo.whatif_timeline(form="records")
    assert len(rows) == sum(len(r[v]) for r in t["rows"] for v in ("recorded", "replayed", "fixed"))
    assert {r["rank"] for r in rows} == {r["rank"] for r in t["rows"]}
    for rank in {r["rank"] for r in rows}:
        for v in ("recorded", "replayed", "fixed"):
            mine = [r for r in rows if r["rank"] == rank and r["version"] == v]
            assert mine and all(r["step"] == t["step"] and r["kind"] in ("own", "wait") for r in mine)
            assert all(a["end_ns"] <= b["start_ns"] for a, b in zip(mine, mine[1:]))
    assert list(a_gloo.whatif_timeline().columns) == ["step", "rank", "version", "kind", "start_ns", "end_ns"]


def test_forms(a_dlrm):
    arrow = a_dlrm.gpu_idle(form="arrow")
    assert isinstance(arrow, pa.Table)
    assert arrow.column_names == COLUMNS["gpu_idle"]
    assert arrow.to_pylist() == a_dlrm.report["gpu_idle"]
    empty = a_dlrm.table("fabric")  # no nccl-tests input: no rows, still a frame
    assert isinstance(empty, pd.DataFrame) and len(empty) == 0
    with pytest.raises(ValueError):
        a_dlrm.steps(form="excel")


# -- the oracles (tests/oracle/HTA_TB.md; the same pins as crates/rankscope-core/tests/oracles.rs)


def test_ranks_are_htas_temporal_breakdown_and_overlap(a_dlrm):
    hta = oracle("hta_expectations.json")["sets"]["param-dlrm-8rank"]
    ranks = a_dlrm.ranks().set_index("rank")
    assert len(ranks) == 8
    for r, row in ranks.iterrows():
        want = hta["comm_comp_overlap"][str(r)]["comp_comm_overlap_pct"]
        assert abs(row["overlap_pct_hta"] - want) <= 0.006, r
        want = hta["temporal_breakdown"][str(r)]["compute_time_us"]
        assert abs(row["compute_ns"] / 1e3 - want) <= 1.0, r


def test_launches_are_htas_launch_stats(a_dlrm):
    hta = oracle("hta_expectations.json")["sets"]["param-dlrm-8rank"]["cuda_kernel_launch_stats"]
    launches = a_dlrm.launches()
    assert len(launches) == 8
    for row in launches.to_dict("records"):
        s = hta[str(row["rank"])]
        assert row["launches"] == s["events_count"]
        assert row["delay_p50_ns"] / 1e3 == s["launch_delay"]["p50_us"]
        assert row["runtime_p50_ns"] / 1e3 == s["cpu_duration"]["p50_us"]


def test_gpu_idle_is_htas_idle_time_breakdown(a_dlrm):
    hta = oracle("hta_expectations.json")["sets"]["param-dlrm-8rank"]["idle_time_breakdown"]["ranks"]
    idle = a_dlrm.gpu_idle()
    assert len(idle) == 32
    for row in idle.to_dict("records"):
        x = hta[str(row["rank"])][str(row["stream"])]
        us = lambda k: x.get(k, {}).get("idle_time_us") or 0.0  # noqa: E731
        hw, kw, ot = row["host_wait_ns"] / 1e3, row["kernel_wait_ns"] / 1e3, row["other_ns"] / 1e3
        assert hw + kw + ot == us("host_wait") + us("kernel_wait") + us("other")
        assert kw == us("kernel_wait")
        # HTA drops GPU events whose launch is not in the trace (ranks 1 and 3): there the gaps
        # around them move between host wait and other; elsewhere each category is equal.
        if row["rank"] not in (1, 3):
            assert (hw, ot) == (us("host_wait"), us("other"))


def test_steps_are_the_tb_plugins_kernel_time_and_gloo_bars(a_dlrm, a_gloo):
    tb = oracle("tb_expectations.json")["sets"]
    steps = a_dlrm.steps()
    for name, w in tb["param-dlrm-8rank"]["workers"].items():
        src = a_dlrm.ranks()
        rank = int(src[src["source"].str.contains(name, regex=False)]["rank"].iloc[0])
        row = steps[steps["rank"] == rank].iloc[0]
        ov = w["overview_steps"][0]
        assert row["wall_ns"] / 1e3 == ov["total_us"]
        assert (row["compute_ns"] + row["comm_ns"] - row["overlap_ns"]) / 1e3 == ov["kernel_us"]
    dist = tb["ddp-gloo-cpu-4rank"]["distributed"]
    for row in a_gloo.steps().to_dict("records"):
        w = dist["overlap_by_step"][str(row["step"])][f"rank{row['rank']}"]
        for col, key in [
            ("tb_computation_ns", "computation_minus_overlap_us"),
            ("overlap_ns", "overlap_us"),
            ("tb_communication_ns", "communication_minus_overlap_us"),
            ("tb_other_ns", "other_us"),
        ]:
            assert abs(row[col] / 1e3 - w[key]) < 0.05, (row["step"], row["rank"], col)
    c = a_gloo.collectives().iloc[0]
    want = dist["comm_ops"]["rank0"]["gloo:all_reduce"]["data_transfer_us"] / 6.0
    assert abs(c["transfer_mean_ns"] / 1e3 - want) < 1.0


def test_where_hta_fails_on_cpu_only_traces_there_are_numbers(a_gloo):
    hta = oracle("hta_expectations.json")["sets"]["ddp-gloo-cpu-4rank"]
    assert all(v["comp_comm_overlap_pct"] is None for v in hta["comm_comp_overlap"].values())
    assert all(0 < v < 100 for v in a_gloo.ranks()["overlap_pct_hta"])


# -- options, errors, progress, the GIL


def test_options_are_the_clis(dlrm):
    a = rankscope.analyze(dlrm, offsets={3: 12345}, thresholds={"exposed_comm_ratio": 0.5}, progress=False)
    out = cli("analyze", "--json", "--offset", "3=12345", "--threshold", "exposed_comm_ratio=0.5", str(dlrm))
    assert a.report == json.loads(out)
    al = a.alignment().set_index("rank")
    assert al.loc[3, "offset_ns"] == 12345 and al.loc[3, "method"] == "user"
    files = sorted(dlrm.glob("*.json*"))
    b = rankscope.analyze(files[:2], ranks={str(files[0]): 5}, progress=False)
    out = cli("analyze", "--json", "--rank", f"{files[0]}=5", str(files[0]), str(files[1]))
    assert b.report == json.loads(out)


def test_errors_name_the_file_and_offset(tmp_path, dlrm):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"traceEvents": [ {"ph": "X"}, ] ] garbage \x00\x01')
    notes = tmp_path / "notes.json"
    notes.write_text("hello, not json")
    with pytest.raises(rankscope.TraceError) as e:
        rankscope.analyze(notes, progress=False)
    assert e.value.file == str(notes)
    assert isinstance(e.value.offset, int)
    assert str(notes) in str(e.value) and f"at byte {e.value.offset}" in str(e.value)
    # Not strict: the rest is analysed, the failure is data (and a warning).
    one = sorted(dlrm.glob("*.json*"))[0]
    with pytest.warns(RuntimeWarning, match="notes.json"):
        a = rankscope.analyze([one, notes], strict=False, progress=False)
    assert [f["file"] for f in a.failed] == [str(notes)]
    assert not a.clean and len(a.report["ranks"]) == 1
    # A folder's file that is not a trace is skipped with a note, as the CLI does.
    d = tmp_path / "job"
    d.mkdir()
    (d / "config.json").write_text('[{"lr": 0.1}]')
    (d / "rank0.json").write_bytes(one.read_bytes())
    a = rankscope.analyze(d, progress=False)
    assert any("config.json" in n for n in a.notes) and a.clean
    with pytest.raises(rankscope.RankscopeError, match="cannot read"):
        rankscope.analyze(tmp_path / "job" / "missing", progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(rankscope.RankscopeError, match="no input files"):
        rankscope.analyze(empty, progress=False)
    with pytest.raises(ValueError, match="unknown threshold"):
        rankscope.analyze(dlrm, thresholds={"nope": 1}, progress=False)
    with pytest.raises(rankscope.RankscopeError, match="no input file is called"):
        rankscope.analyze(dlrm, ranks={"nothing.json": 1}, progress=False)


def test_progress_counts_every_byte(dlrm):
    calls = []
    rankscope.analyze(dlrm, progress=lambda d, t: calls.append((d, t)))
    total = sum(p.stat().st_size for p in dlrm.iterdir() if p.is_file())
    assert calls, "never called"
    assert all(t == total for _, t in calls)
    assert calls[-1][0] == total
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)

    def boom(d, t):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        rankscope.analyze(dlrm, progress=boom)


def test_the_gil_is_released_while_rust_works(dlrm):
    # While another thread analyses, this one keeps running Python. Were the GIL held, this
    # loop would stand still for a whole native call; released, its longest pause is a
    # scheduler slice. A held GIL fails every attempt; a loaded machine may spoil one.
    _, single = _timed(lambda: rankscope.analyze(dlrm, progress=False))
    pauses = []
    for _ in range(3):
        done = threading.Event()

        def work():
            for _ in range(3):
                rankscope.analyze(dlrm, progress=False)
            done.set()

        t = threading.Thread(target=work)
        t.start()
        longest = 0.0
        last = time.perf_counter()
        while not done.is_set():
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now
        t.join()
        pauses.append(longest)
        if longest < single / 2:
            return
    pytest.fail(f"this thread stood still for {pauses} s while a {single:.3f} s analysis ran")


def _timed(f):
    t = time.perf_counter()
    v = f()
    return v, time.perf_counter() - t
