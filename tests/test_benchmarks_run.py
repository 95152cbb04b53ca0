"""The benchmarks are not part of the suite's timing, but they must run: a benchmark that fails on main is a
figure nobody can reproduce (``bench_refactor`` once stopped at "cannot find the input files" when the analysis
began to read the package's ``__init__.py`` from outside the module's folder). Each runs here in its cheapest
form, in a subprocess as a user runs it; nothing is timed or compared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_bench_refactor_runs_on_one_module():
    out = _run("benchmarks/bench_refactor.py", "--repeats", "1", "--only", "embedding")
    assert "embedding" in out and "ratio" in out
