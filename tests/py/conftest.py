"""Shared fixtures of the Python tier (run by `./x test` / `./x pytest` with the wheel installed
in a fresh venv). The real traces are in ../shared (RANKSCOPE_SHARED); the reference is the
CLI (RANKSCOPE_BIN; `./x test` builds it with the `ci` profile). Nothing here skips: a missing input fails."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("RANKSCOPE_SHARED", REPO.parent / "shared"))
BIN = Path(os.environ.get("RANKSCOPE_BIN", REPO / "target" / "release" / "rankscope"))
DATA = REPO / "crates" / "rankscope-core" / "tests" / "data"

DLRM = SHARED / "traces" / "param-dlrm-8rank"
GLOO = SHARED / "traces" / "ddp-gloo-cpu-4rank"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"missing {path} (set RANKSCOPE_SHARED / RANKSCOPE_BIN; ./x pytest does)")
    return path


def cli(*args: str) -> str:
    """stdout of the CLI (exit status 0 or 1: 1 says an input had a problem)."""
    p = subprocess.run([str(need(BIN)), *args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        pytest.fail(f"rankscope {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p.stdout


def oracle(name: str) -> dict:
    return json.loads(need(DATA / name).read_text())


@pytest.fixture(scope="session")
def dlrm() -> Path:
    return need(DLRM)


@pytest.fixture(scope="session")
def gloo() -> Path:
    return need(GLOO)


@pytest.fixture(scope="session")
def synth64(tmp_path_factory) -> Path:
    """A 64-rank synthetic job (the CLI's generator), small steps so the tier stays quick."""
    d = tmp_path_factory.mktemp("synth64")
    subprocess.run(
        [str(need(BIN)), "synth", "--ranks", "64", "--steps", "3", "--kernels-per-step", "120", "--out", str(d)],
        check=True,
        capture_output=True,
    )
    return d
