"""`rankscope.runs` on the zoo's scaling runs (one MLP at world sizes 1, 2 and 4, strong and
weak): the ``rankscope.runs/1`` document is the CLI's ``runs --json`` exactly, the record table
has one row per run with the document's figures, and the scaling table the document's points."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

import rankscope
from rankscope._runs import RUNS_COLUMNS, SCALING_COLUMNS

from conftest import BIN, REPO, need

SCALING = REPO / "tests" / "zoo" / "scaling"
NAMES = ["strong_w1", "strong_w2", "strong_w4", "weak_w1", "weak_w2", "weak_w4"]


def cli_runs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(need(BIN)), "runs", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def paths():
    return [str(need(SCALING / n)) for n in NAMES]


@pytest.fixture(scope="module")
def r(paths):
    return rankscope.runs(paths)


def test_json_and_outputs_are_the_clis(paths, r):
    p = cli_runs("--json", *paths)
    assert p.returncode == 0, p.stderr
    assert r.json() == p.stdout
    assert r.report == json.loads(p.stdout) == r.to_dict()
    assert r.report["schema"] == "rankscope.runs/1"
    assert r.markdown() == cli_runs("--md", *paths).stdout
    assert r.text() == cli_runs(*paths).stdout
    assert r.csv() == cli_runs("--csv", *paths).stdout
    assert r.failed == []


def test_a_folder_of_runs_stands_for_its_subfolders(r):
    # As `rankscope runs tests/zoo/scaling`: the subfolders, sorted, named by their paths.
    whole = rankscope.runs(str(SCALING))
    p = cli_runs("--json", str(SCALING))
    assert whole.report == json.loads(p.stdout)
    assert [x["run"] for x in whole.report["runs"]] == [str(SCALING / n) for n in NAMES]


def test_the_table_has_one_row_per_run(r, paths):
    t = r.table()
    assert isinstance(t, pd.DataFrame)
    assert list(t.columns) == RUNS_COLUMNS
    assert list(t["run"]) == paths
    doc = r.report["runs"]
    assert list(t["ranks"]) == [x["ranks"] for x in doc] == [1, 2, 4, 1, 2, 4]
    assert list(t["samples_per_step"]) == [x["samples_per_step"]["value"] for x in doc]
    # The zoo's scenario.json files say the global batch (README: 128 strong; 48 × ranks weak).
    for n, got in zip(NAMES, t["samples_per_step"]):
        want = json.loads((SCALING / n / "scenario.json").read_text())["samples_per_step"]
        assert got == want, n
    assert list(t["step_p50_ns"]) == [x["step_p50_ns"] for x in doc]
    assert all(f == "trace" for f in t["samples_per_step_from"])
    records = r.table(form="records")
    assert [x["lead_id"] for x in records] == [(x["lead"] or {}).get("id") for x in doc]
    assert [x["flops_per_step"] for x in records] == [x["flops_per_step"] for x in doc]


def test_the_scaling_table_is_the_documents_points(r):
    s = r.scaling()
    assert list(s.columns) == SCALING_COLUMNS
    points = [(g["model"], p) for g in r.report["scaling"] for p in g["points"]]
    assert len(s) == len(points) == 6
    # Each series' one-rank run is its base; the others are strong or weak by their batches.
    assert list(s["mode"]) == ["base", "strong", "strong", "base", "weak", "weak"]
    assert list(s["base"]) == [str(SCALING / n) for n in ["strong_w1"] * 3 + ["weak_w1"] * 3]
    for (_, row), (model, p) in zip(s.iterrows(), points):
        assert row["model"] == model and row["run"] == p["run"]
        assert row["loss_ns"] == row["compute_ns"] + row["exposed_transfer_ns"] + row["exposed_wait_ns"] + row["other_ns"]


def test_stated_figures_and_analyses(paths, r):
    given = rankscope.runs(paths[:2], samples_per_step=256, peak_tflops=100.0)
    p = cli_runs("--json", "--samples-per-step", "256", "--peak-tflops", "100", *paths[:2])
    assert given.report == json.loads(p.stdout)
    assert [x["samples_per_step"] for x in given.report["runs"]] == [{"value": 256, "from": "given"}] * 2
    # Analyses made already, under names given.
    a = rankscope.analyze(paths[0], progress=False)
    named = rankscope.runs([("one", a), ("two", paths[1])])
    assert [x["run"] for x in named.report["runs"]] == ["one", "two"]
    assert named.report["runs"][0]["step_p50_ns"] == r.report["runs"][0]["step_p50_ns"]
    with pytest.raises(ValueError):
        rankscope.runs(paths[:1], peak_tflops=-1.0)


def test_a_run_that_is_no_trace_is_left_out(tmp_path, paths):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.json").write_text("not json")
    with pytest.warns(RuntimeWarning):
        out = rankscope.runs([str(bad), paths[0]])
    assert [x["run"] for x in out.report["runs"]] == [paths[0]]
    assert [n for n, _ in out.failed] == [str(bad)]
