"""`rankscope.ray.analyze` on a local Ray cluster (`ray.init(num_cpus=2)`): one task per file,
parts back to the driver, equal to the single-process answer on a 64-rank synthetic job. Ray is
required here: without it this fails, it does not skip."""

from __future__ import annotations

import json
import pickle

import pytest
import ray  # a missing Ray fails here: the Ray path is tested or the run fails

import rankscope
import rankscope.ray

from conftest import cli


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_equals_local_on_64_ranks(cluster, synth64):
    local = rankscope.analyze(synth64, progress=False)
    assert len(local.report["ranks"]) == 64
    seen = []
    remote = rankscope.ray.analyze(synth64, progress=lambda d, t: seen.append((d, t)))
    assert remote.json() == local.json()
    assert remote.report == json.loads(cli("analyze", "--json", str(synth64)))
    total = sum(p.stat().st_size for p in synth64.glob("*.json"))
    assert seen[-1] == (total, total)


def test_ray_reads_fsspec_urls(cluster, synth64):
    files = sorted(str(p) for p in synth64.glob("rank*.json"))[:8]
    local = rankscope.analyze(files, progress=False).report
    remote = rankscope.ray.analyze([f"file://{f}" for f in files], max_in_flight=3)
    # The same analysis; the files are named by their URLs.
    assert f'"file://{synth64}' in remote.json()
    assert json.loads(remote.json().replace(f"file://{synth64}", str(synth64))) == local
    folder = rankscope.ray.inputs(f"file://{synth64}")[0]
    assert len([p for p, walked in folder if walked and p.endswith(".json")]) >= 64


def test_ray_errors_are_the_local_ones(cluster, tmp_path, synth64):
    bad = tmp_path / "bad.json"
    bad.write_text("not a trace")
    with pytest.raises(rankscope.TraceError) as e:
        rankscope.ray.analyze([str(bad)])
    assert e.value.file == str(bad) and e.value.offset is not None


def test_combine_takes_what_ray_parts_returns(cluster, tmp_path, synth64):
    # docs/python.md: `rankscope.ray.parts(paths)` returns the parts "to keep or combine later";
    # `rankscope.combine` takes them as they are (it took only a list of bytes, and parts()
    # returned a 4-tuple).
    files = sorted(str(p) for p in synth64.glob("rank*.json"))[:8]
    local = rankscope.analyze(files, progress=False)
    made = rankscope.ray.parts(files)
    assert isinstance(made, rankscope.Parts)
    assert made.names == files and made.notes == [] and made.failed == []
    assert rankscope.combine(made).json() == local.json()
    # Kept and read back, as docs/python.md shows.
    assert rankscope.combine(pickle.loads(pickle.dumps(made))).json() == local.json()
    assert rankscope.combine(made, offsets={2: -4000}).report == rankscope.analyze(files, offsets={2: -4000}, progress=False).report
    # Still a tuple, as before.
    blobs, names, notes, failed = made
    assert rankscope.combine(blobs, names=names).json() == local.json()
    with pytest.raises(ValueError, match="names="):
        rankscope.combine(made, names=names)

    # A file that is not a trace: the parts say so, and combine carries it as analyze(strict=False) does.
    bad = tmp_path / "bad.json"
    bad.write_text("not a trace")
    made = rankscope.ray.parts(files + [str(bad)])
    assert [f for f, _ in made.failed] == [str(bad)]
    with pytest.warns(RuntimeWarning, match="bad.json"):
        a = rankscope.combine(made)
    assert [f["file"] for f in a.failed] == [str(bad)]
    with pytest.warns(RuntimeWarning, match="bad.json"):
        assert a.failed == rankscope.ray.analyze(files + [str(bad)], strict=False).failed
    assert a.report == local.report and not a.clean
    with pytest.raises(rankscope.TraceError):
        rankscope.combine(rankscope.ray.parts([str(bad)]))
