"""`rankscope.part` / `rankscope.combine`: one file at a time, anywhere, then combined, equals the
whole job analysed at once; the bytes are versioned and checked."""

from __future__ import annotations

import gzip
import random

import pytest

import rankscope
from rankscope import _native

from conftest import REPO, SHARED, cli, need


def parts_of(d):
    files, _ = rankscope._expand([str(d)])
    return [rankscope.part(p) for p, _ in files], [p for p, _ in files]


@pytest.mark.parametrize("which", ["dlrm", "gloo"])
def test_combine_of_parts_equals_analyze(which, request):
    d = request.getfixturevalue(which)
    whole = rankscope.analyze(d, progress=False)
    blobs, names = parts_of(d)
    assert all(b.startswith(b"RSPART") for b in blobs)
    assert [rankscope.part_info(b) for b in blobs] == [("trace", n) for n in names]
    combined = rankscope.combine(blobs, names=names)
    assert combined.json() == whole.json()
    assert combined.markdown() == whole.markdown()
    assert combined.csv() == whole.csv()


def test_a_part_is_small_against_its_trace(dlrm):
    sizes = []
    for p in sorted(dlrm.iterdir()):
        b = rankscope.part(p)
        assert len(b) < p.stat().st_size / 5, (p.name, len(b), p.stat().st_size)
        sizes.append(len(b))
    # docs/python.md says how big a DLRM rank's part is: it stays what the parts measure.
    import re

    said = re.search(r"a DLRM rank: about ([0-9.]+) kB", (REPO / "docs" / "python.md").read_text())
    assert said, "docs/python.md no longer says the size of a DLRM rank's part"
    mean_kb = sum(sizes) / len(sizes) / 1000
    assert abs(mean_kb - float(said.group(1))) <= 0.1 * mean_kb, (said.group(0), f"measured {mean_kb:.1f} kB")


def test_options_apply_at_combine(dlrm):
    blobs, names = parts_of(dlrm)
    opts = dict(offsets={2: -4000}, thresholds={"straggler_consistency": 0.9})
    assert (
        rankscope.combine(blobs, names=names, **opts).report
        == rankscope.analyze(dlrm, progress=False, **opts).report
    )
    files = names[:3]
    ranks = {files[0]: 7}
    assert (
        rankscope.combine([rankscope.part(f) for f in files], names=files, ranks=ranks).report
        == rankscope.analyze(files, ranks=ranks, progress=False).report
    )


def test_text_inputs_travel_whole(dlrm):
    # nccl-tests output beside the traces, and Flight Recorder dumps alone.
    tests = need(SHARED / "nccl-tests" / "xxrjun_h100_1node-8gpu_multi-collective.txt")
    b = rankscope.part(tests)
    assert rankscope.part_info(b) == ("nccl_tests", str(tests))
    files, _ = rankscope._expand([str(dlrm)])
    names = [p for p, _ in files] + [str(tests)]
    combined = rankscope.combine([rankscope.part(p) for p in names], names=names)
    assert combined.json() == rankscope.analyze([str(dlrm), str(tests)], progress=False).json()
    dumps = REPO / "crates" / "rankscope-core" / "tests" / "fixtures" / "fr" / "skip_allreduce"
    files, _ = rankscope._expand([str(dumps)])
    blobs = [rankscope.part(p) for p, _ in files]
    assert {rankscope.part_info(x)[0] for x in blobs} == {"flight_recorder"}
    whole = rankscope.analyze(dumps, progress=False)
    assert whole.report["schema"] == "rankscope.fr"
    combined = rankscope.combine(blobs, names=[p for p, _ in files])
    assert combined.json() == whole.json()
    assert combined.markdown() == whole.markdown()


def test_a_reader_fed_in_chunks_equals_part(dlrm):
    p = sorted(dlrm.iterdir())[3]
    data = p.read_bytes()
    rng = random.Random(7)
    r = _native.PartReader(str(p))
    i = 0
    while i < len(data):
        n = rng.choice([1, 13, 4096, 1 << 20])
        assert r.feed(data[i : i + n])
        i += n
    assert r.finish() == rankscope.part(p)
    with pytest.raises(ValueError):
        r.finish()
    gz = gzip.compress(data)
    r = _native.PartReader(str(p))
    r.feed(gz)
    assert r.finish() == rankscope.part(p)


def test_bad_parts_are_errors_with_offsets(dlrm):
    b = rankscope.part(sorted(dlrm.iterdir())[0])
    with pytest.raises(rankscope.PartError, match="not a rankscope part") as e:
        rankscope.combine([b"{}"], names=["x.part"])
    assert e.value.file == "x.part"
    newer = b[:6] + bytes([9, 0]) + b[8:]
    with pytest.raises(rankscope.PartError, match="version 9"):
        rankscope.combine([newer])
    with pytest.raises(rankscope.PartError, match=r"parts\[1\]: damaged") as e:
        rankscope.combine([b, b[: len(b) // 2]])
    assert isinstance(e.value.offset, int) and 8 <= e.value.offset <= len(b)
    rng = random.Random(3)
    for _ in range(200):
        m = bytearray(b)
        i = rng.randrange(len(m))
        m[i] ^= 1 << rng.randrange(8)
        try:
            rankscope.combine([bytes(m)])
        except rankscope.PartError:
            pass
    with pytest.raises(rankscope.RankscopeError, match="no parts"):
        rankscope.combine([])


def test_part_of_a_non_trace_names_file_and_offset(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"traceEvents": 5')
    with pytest.raises(rankscope.TraceError) as e:
        rankscope.part(p)
    assert e.value.file == str(p) and isinstance(e.value.offset, int)
    with pytest.raises(OSError):
        rankscope.part(tmp_path / "missing.json")


def test_the_clis_part_and_combine_are_the_same_split(tmp_path, dlrm):
    files, _ = rankscope._expand([str(dlrm)])
    outs = []
    for i, (p, _) in enumerate(files):
        out = tmp_path / f"{i:04}.part"
        cli("part", p, "-o", str(out))
        # The CLI and the package write the same bytes (one encoder, in the core).
        assert out.read_bytes() == rankscope.part(p)
        outs.append(str(out))
    assert cli("combine", "--json", *outs) == cli("analyze", "--json", str(dlrm))
    assert cli("combine", *outs) == cli("analyze", str(dlrm))
    assert cli("combine", "--csv", "--offset", "1=500", *outs) == cli("analyze", "--csv", "--offset", "1=500", str(dlrm))


def test_a_job_digest_opens_as_the_job(dlrm, tmp_path):
    # combine(..., digest=) writes the job digest; analyze() of it alone, and the CLI's
    # `analyze --json` of it, are the combined job byte for byte (docs/digest.md).
    blobs, names = parts_of(dlrm)
    path = tmp_path / "job.rsdigest"
    combined = rankscope.combine(blobs, names=names, digest=path)
    assert path.read_bytes().startswith(b"RSDIGEST")
    assert rankscope._native.sniff(path.read_bytes()[:64]) == "digest"
    assert rankscope.analyze(path, progress=False).json() == combined.json()
    assert cli("analyze", "--json", str(path)) == combined.json()
