#!/usr/bin/env python3
"""Writes one hostile shape of issue 39 at size N (the rows of BENCHMARKS.md "Hostile shapes").

    python3 tests/hostile/shapes.py SHAPE N OUT

SHAPE is one of: nested (N slices each inside the one before), alternating (the same, regions
and operators alternating), names (N kernels of distinct names k0…), alike (N kernels named
`void gemm_kernel<i>`), crafted (N kernels whose names share one value of a fixed
multiply-rotate hash: N is rounded down to a power of two), deep_member (a member nested N deep
before traceEvents), pg_config (a Flight Recorder dump whose pg_config lists N ranks), entries
(a Flight Recorder dump of N entries). The same shapes as crates/rankscope-memtest/tests/work.rs.
Traces go to `rankscope analyze OUT`, dumps to `rankscope fr OUT`.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = os.path.join(HERE, "../../crates/rankscope-core/tests/fixtures/fr/healthy/json/fr_trace_rank_0.json")


def step(dur):
    return {"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": dur, "pid": 1, "tid": 1, "cat": "user_annotation"}


def nested(n, alternate):
    ev = [step(10 * n + 10)]
    for i in range(n):
        cat = "user_annotation" if alternate and i % 2 == 1 else "cpu_op"
        ev.append({"ph": "X", "name": "f", "ts": 1 + i, "dur": 10 * n - 2 * i, "pid": 1, "tid": 1, "cat": cat})
    return json.dumps({"traceEvents": ev}).encode()


def kernels(names):
    out = [b'{"traceEvents":[', json.dumps(step(10 * len(names) + 10)).encode()]
    for i, name in enumerate(names):
        out.append(b',{"ph":"X","name":"' + name + b'","ts":%d,"dur":5,"pid":0,"tid":7,"cat":"kernel"}' % (1 + 10 * i))
    out.append(b"]}")
    return b"".join(out)


def crafted(i, blocks):
    # A top-bit flip in one 8-byte word and a bit-4 flip in the next cancel in an FxHash-style
    # `(rotl(h, 5) ^ w) * K` whatever h: 2^blocks names, one hash.
    name = bytearray()
    for b in range(blocks):
        block = bytearray(b"kernel_gemm_xyz_")
        if i >> b & 1:
            block[7] ^= 0x80
            block[8] ^= 0x10
        name += block
    return bytes(name)


def dump(n, what):
    d = json.load(open(DUMP))
    if what == "pg_config":
        d["pg_config"] = {"0": {"desc": "default_pg", "name": "0", "ranks": "[" + ", ".join(map(str, range(n))) + "]"}}
    else:
        first = d["entries"][0]
        d["entries"] = [dict(first, record_id=i, collective_seq_id=i + 1, op_id=i + 1, profiling_name="gloo:all_reduce") for i in range(n)]
    return json.dumps(d).encode()


def main():
    shape, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if shape in ("nested", "alternating"):
        data = nested(n, shape == "alternating")
    elif shape == "names":
        data = kernels([b"k%d" % i for i in range(n)])
    elif shape == "alike":
        data = kernels([b"void gemm_kernel<%d>" % i for i in range(n)])
    elif shape == "crafted":
        blocks = max(1, n.bit_length() - 1)
        data = kernels([crafted(i, blocks) for i in range(1 << blocks)])
    elif shape == "deep_member":
        data = b'{"deep": ' + b"[" * n + b"1" + b"]" * n + b', "traceEvents":[' + json.dumps(step(10)).encode() + b"]}"
    elif shape in ("pg_config", "entries"):
        data = dump(n, shape)
    else:
        sys.exit(f"unknown shape {shape}")
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
