"""The benchmarks are not part of the suite's timing, but they must run: a benchmark that fails on main is a
figure nobody can reproduce (``bench_refactor`` once stopped at "cannot find the input files" when the analysis
began to read the package's ``__init__.py`` from outside the module's folder). Each runs here in its cheapest
form (``--quick``: the smallest size), in a subprocess as a user runs it, and must print its table; nothing is
timed or compared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_bench_refactor_runs_on_one_module():
    out = _run("benchmarks/bench_refactor.py", "--repeats", "1", "--only", "embedding")
    assert "embedding" in out and "ratio" in out


# each benchmark's --quick run, and lines of the table (or figures) it must print
QUICK = {
    "bench_collect": ["median wall: plain", "per call (toy forward, case already seen)"],
    "bench_decode_ops": ["row (b) on 1x8, matmul replay, 1 steps", "decode step: median"],
    "bench_library": ["ours CPU ms", "from_spec vs tttv1 (Llama-3.2-1B-tiny)", "read a "],
    "bench_modules": ["| MLP1D |", "MLP1D construction + load_device_weights"],
    "bench_ops": ["| op | shape | native |", "| rms_norm | 32×2048 |"],
    "bench_ranks": ["medians of 1", "one process", "2 ranks"],
    "bench_reliability": [
        "1. creation of a",
        "2. NanoGPT training step",
        "3. load_tensor",
        "4. one ttnn.matmul",
    ],
    "bench_scale": ["side ", "decode/token", "emulator "],
    "bench_threads": ["| kernel | shape | 1 thread | 2 threads |", "| rms_norm | 32x64 |"],
    "bench_trace": ["built-in tttv1/tt/mlp.py + model_config.py", "generated model_config (50 lines)"],
    "bench_train": ["Thread settings", "NanoGPT training step (2 layers, 192 wide", "Fused training ops"],
    "bench_verify": ["median wall: plain", "twins: 2 generated files (mlp_1d, mlp_2d)"],
}


@pytest.mark.parametrize("name", sorted(QUICK))
def test_every_benchmark_runs_at_its_smallest_size(name):
    out = _run(f"benchmarks/{name}.py", "--quick")
    missing = [line for line in QUICK[name] if line not in out]
    assert not missing, f"{name} --quick did not print {missing}:\n{out[-3000:]}"


def test_every_benchmark_has_a_smoke_test():
    """A new benchmark gets a --quick run here too."""
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts == set(QUICK) | {"bench_refactor"}
