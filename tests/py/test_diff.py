"""`rankscope.diff` on the zoo's pair (a host stall injected on rank 2 of the baseline job): the
``rankscope.diff/1`` document is the CLI's ``diff --json`` exactly, the verdict names the
stalled rank, a run against itself changes nothing beyond noise, and the tables hold the
document's rows."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

import rankscope
from rankscope._diff import DIFF_COLUMNS

from conftest import BIN, REPO, need

ZOO = REPO / "tests" / "zoo"


def cli_diff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(need(BIN)), "diff", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def pair():
    return need(ZOO / "baseline"), need(ZOO / "host_stall")


@pytest.fixture(scope="module")
def d(pair):
    base, new = pair
    # scenario.json beside the traces is skipped by the folder walk (a note), as in the CLI.
    return rankscope.diff(base, new, progress=False)


def test_json_is_the_clis(pair, d):
    base, new = pair
    p = cli_diff("--json", str(base), str(new))
    assert p.returncode == 0, p.stderr
    assert d.json().rstrip("\n") == p.stdout.rstrip("\n")
    assert d.report == json.loads(p.stdout) == d.to_dict()
    assert d.report["schema"] == "rankscope.diff/1"
    assert d.markdown().strip() == cli_diff("--md", str(base), str(new)).stdout.strip()
    assert d.text().strip() == cli_diff(str(base), str(new)).stdout.strip()
    assert d.csv().strip() == cli_diff("--csv", str(base), str(new)).stdout.strip()


def test_the_verdict_names_the_stalled_rank(d):
    assert d.change == "slower"
    assert d.beyond_noise
    assert d.verdict.startswith("step time +")
    assert "rank 2's forward > straggler_sleep" in d.verdict
    cause = d.report["verdict"]["cause"]
    assert cause["ranks"] == [2] and cause["region"] == ["forward", "straggler_sleep"]
    assert d.verdict == d.text().splitlines()[0]
    assert repr(d) == f"<rankscope.Diff: {d.verdict}>"


def test_a_run_against_itself_is_no_change(pair):
    base, _ = pair
    same = rankscope.diff(base, base, progress=False)
    assert same.change == "no_change"
    assert same.verdict.startswith("no change beyond noise")
    assert not same.beyond_noise
    assert same.fail_on("step_time>+5%", "new_findings>0") == []


def test_analyses_and_saved_json_are_runs(pair, d, tmp_path):
    base, new = pair
    a_base = rankscope.analyze(base, progress=False)
    a_new = rankscope.analyze(new, progress=False)
    assert rankscope.diff(a_base, a_new).json() == d.json()
    saved = tmp_path / "baseline.json"
    saved.write_text(a_base.json())
    assert rankscope.diff(saved, a_new).json() == d.json()
    # The CLI takes the same saved baseline.
    assert rankscope.diff(str(saved), new, progress=False).report == json.loads(
        cli_diff("--json", str(saved), str(new)).stdout
    )


def test_gates(pair, d):
    base, new = pair
    failed = d.fail_on("step_time>+5%", "step_time>+50%", "new_high_findings>0")
    assert [g for g, _ in failed] == ["step_time>+5%", "new_high_findings>0"]
    assert failed[0][1] == pytest.approx(d.report["step_time"]["ratio"])
    assert failed[1][1] >= 1
    # The CLI fails on the same gates (exit 3).
    p = cli_diff("--fail-on", "step_time>+5%", "--fail-on", "step_time>+50%", str(base), str(new))
    assert p.returncode == 3
    assert "gate failed: step_time>+5%" in p.stderr and "step_time>+50%" not in p.stderr
    with pytest.raises(ValueError, match="unknown metric"):
        d.fail_on("speed>1")


def test_tables_hold_the_documents_rows(d):
    r = d.report
    figures = d.figures()
    assert isinstance(figures, pd.DataFrame)
    assert list(figures.columns) == DIFF_COLUMNS["figures"]
    assert len(figures) == len(r["figures"]) > 0
    wall = figures[figures["rank"].isna() & (figures["figure"] == "wall")].iloc[0]
    assert wall["delta_ns"] == r["step_time"]["shift"]["delta_ns"]
    per_rank = figures[figures["rank"].notna()]
    assert sorted(per_rank["rank"].unique()) == [0, 1, 2, 3]

    regions = d.regions()
    assert list(regions.columns) == DIFF_COLUMNS["regions"]
    assert len(regions) == len(r["regions"])
    stall = regions[(regions["rank"] == 2) & (regions["name"] == "straggler_sleep")].iloc[0]
    assert stall["presence"] == "new" and stall["beyond_noise"]

    coll = d.collectives()
    assert list(coll.columns) == DIFF_COLUMNS["collectives"]
    assert len(coll) == len(r["collectives"]) > 0
    first = r["collectives"][0]
    assert coll.iloc[0]["new_wait_mean_ns"] == first["new"]["wait_mean_ns"]
    assert coll.iloc[0]["base_dur_p50_ns"] == first["base"]["dur_p50_ns"]

    findings = d.findings()
    assert list(findings.columns) == DIFF_COLUMNS["findings"]
    assert len(findings) == len(r["findings"])
    appeared = findings[findings["change"] == "appeared"]
    assert "host_stall" in set(appeared["id"])

    ops = d.operators()
    assert list(ops.columns) == DIFF_COLUMNS["operators"]
    assert len(ops) == len(r["operators"]) > 0
    sleep = ops[(ops["kind"] == "annotation") & (ops["name"] == "straggler_sleep")].iloc[0]
    assert sleep["presence"] == "new" and sleep["beyond_noise"] and sleep["top_new_rank"] == 2

    assert list(d.config().columns) == DIFF_COLUMNS["config"]
    assert len(d.config()) == len(r["config"])
    # Every field of the document's rows is a listed column (a field added fails here first).
    for key in ("figures", "regions", "findings", "config"):
        seen = {k for row in r[key] for k in row}
        assert seen <= set(DIFF_COLUMNS[key]), (key, seen - set(DIFF_COLUMNS[key]))
    recs = d.figures(form="records")
    assert isinstance(recs, list) and recs[0]["figure"] == "wall"
