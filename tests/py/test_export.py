"""`rankscope export` and `Analysis.arrow` / `Analysis.export`: the Parquet and Arrow IPC files
rankscope writes itself (docs/columnar.md), read by pyarrow, hold the values of the JSON
analysis (`rankscope analyze --json`) and of `rankscope inspect --json`: pyarrow is the oracle
that the formats are right."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import rankscope
from rankscope._analysis import COLUMNAR_TABLES

from conftest import REPO, cli, need

ZOO = REPO / "tests" / "zoo" / "fsdp_straggler"


def jobs():
    return [pytest.param(ZOO, id="zoo-fsdp_straggler"), pytest.param("gloo", id="ddp-gloo-cpu-4rank")]


@pytest.fixture(params=jobs())
def job(request) -> Path:
    p = request.param
    return need(request.getfixturevalue(p) if isinstance(p, str) else p)


def export(job: Path, out: Path, fmt: str) -> dict:
    cli("export", str(job), "--format", fmt, "--out", str(out))
    read = (lambda f: pq.read_table(f)) if fmt == "parquet" else (lambda f: ipc.open_file(f).read_all())
    return {t: read(out / f"{t}.{fmt}") for t in COLUMNAR_TABLES}


def test_the_files_hold_the_analysis(job, tmp_path):
    a = json.loads(cli("analyze", "--json", str(job)))
    pqt = export(job, tmp_path / "pq", "parquet")
    art = export(job, tmp_path / "arrow", "arrow")
    for t in COLUMNAR_TABLES:
        assert pqt[t].equals(art[t]), t
    offset = {x["rank"]: x["offset_ns"] for x in a["alignment"]}

    # steps: every rank × step row, every figure, start on the aligned clock.
    rows = {(r["step"], r["rank"]): r for r in pqt["steps"].to_pylist()}
    want = [(s["step"], r) for s in a["steps"] for r in s["per_rank"]]
    assert len(rows) == len(want) > 0
    for step, r in want:
        got = rows[(step, r["rank"])]
        for k in ["wall_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "comm_wait_ns", "exposed_transfer_ns"]:
            assert got[k] == r[k], (step, r["rank"], k)
        assert got["start_ns"] == r["start_ns"] - offset.get(r["rank"], 0)
        assert got["source"] == r["source"]

    # collective statistics and the matched collectives' members.
    stats = pqt["collective_stats"].to_pylist()
    assert [(s["kind"], s["group"], s["count"], s["instances"], s["bytes_total"]) for s in stats] == [
        (c["kind"], c["pg"], c["count"], c["instances"], c["bytes_total"]) for c in a["collectives"]
    ]
    members = pqt["collectives"].to_pylist()
    by_group = Counter()
    ids = {}
    for m in members:
        ids.setdefault((m["kind"], m["group"]), set()).add(m["collective"])
        by_group[(m["kind"], m["group"])] += 1
        assert m["end_ns"] == m["start_ns"] + m["dur_ns"]
        assert 0 <= m["wait_ns"] <= m["dur_ns"]
    for c in a["collectives"]:
        # These jobs match every collective on every member.
        assert len(ids.get((c["kind"], c["pg"]), ())) == c["count"]
        assert by_group[(c["kind"], c["pg"])] == c["instances"]

    # findings, in their ranked order.
    f = pqt["findings"].to_pylist()
    assert [(x["kind"], x["severity"], x["gain_ns"], x["message"]) for x in f] == [
        (x["id"], x["severity"], x["impact_ns"], x["message"]) for x in a["findings"]
    ]
    assert [x["ranks"] for x in f] == [",".join(map(str, x["ranks"])) or None for x in a["findings"]]

    # groups: every (group, member).
    g = {(x["group"], x["rank"], x["role"]) for x in pqt["groups"].to_pylist()}
    layout = a.get("layout") or {"groups": []}
    assert g == {(x["name"], r, x["role"]) for x in layout["groups"] for r in x["ranks"]}

    # operators: calls per operator and step.
    ops = a.get("operators") or {"rows": [], "steps": []}
    got = Counter()
    for x in pqt["operators"].to_pylist():
        got[(x["kind"], x["name"], x["shapes"], x["step"])] += x["count"]
    want_ops = Counter()
    for r in ops["rows"]:
        for s, n in zip(ops["steps"], r["count"]):
            want_ops[(r["kind"], r["name"], r.get("shapes"), s)] += n
    assert got == want_ops

    # events: per rank the rows, instants and classes `inspect` counts.
    files = json.loads(cli("inspect", "--json", str(job)))["files"]
    ev = pqt["events"]
    per_rank = Counter(ev.column("rank").to_pylist())
    classes = Counter(zip(ev.column("rank").to_pylist(), ev.column("class").to_pylist()))
    instants = Counter(r for r, i in zip(ev.column("rank").to_pylist(), ev.column("instant").to_pylist()) if i)
    assert set(per_rank) == {x["rank"] for x in files}
    for x in files:
        assert per_rank[x["rank"]] == x["events"]["rows"]
        assert instants[x["rank"]] == x["events"]["instants"]
        for c, n in x["events"]["by_class"].items():
            assert classes[(x["rank"], c)] == n, (x["rank"], c)
    # An instant has no duration; a slice has one.
    assert all((d is None) == i for d, i in zip(ev.column("dur_ns").to_pylist(), ev.column("instant").to_pylist()))


def test_the_package_gives_the_same_tables(tmp_path):
    job = need(ZOO)
    a = rankscope.analyze(job, progress=False, events=True)
    cli_tables = export(job, tmp_path / "cli", "arrow")
    for t in COLUMNAR_TABLES:
        assert a.arrow(t).equals(cli_tables[t]), t
    paths = a.export(tmp_path / "py", "parquet")
    assert sorted(Path(p).name for p in paths) == sorted(f"{t}.parquet" for t in COLUMNAR_TABLES)
    for p in paths:
        assert pq.read_table(p).equals(cli_tables[Path(p).stem])
    # Without the events kept: the tables of the analysis, and a clear error for the others.
    lean = rankscope.analyze(job, progress=False)
    assert lean.arrow("steps").equals(cli_tables["steps"])
    assert sorted(Path(p).stem for p in lean.export(tmp_path / "lean")) == sorted(
        t for t in COLUMNAR_TABLES if t not in ("collectives", "events")
    )
    with pytest.raises(rankscope.RankscopeError, match="events=True"):
        lean.arrow("events")
    with pytest.raises(ValueError, match="the tables"):
        lean.arrow("nope")


def test_a_job_digest_gives_its_analysis_tables(tmp_path):
    job = need(ZOO)
    parts = []
    for r in range(3):
        p = tmp_path / f"r{r}.part"
        cli("part", str(job / f"rank{r}.pt.trace.json.gz"), "--out", str(p))
        parts.append(str(p))
    digest = tmp_path / "job.rsdigest"
    cli("combine", *parts, "--digest", str(digest), "--json")
    a = rankscope.analyze(digest, progress=False, events=True)
    traces = rankscope.analyze(job, progress=False)
    # The digest's analysis is the traces': the same tables, and no events to give.
    for t in ("steps", "findings", "collective_stats", "groups", "operators"):
        assert a.arrow(t).equals(traces.arrow(t)), t
    with pytest.raises(rankscope.RankscopeError, match="events=True"):
        a.arrow("events")
