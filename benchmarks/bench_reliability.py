"""What the reliability checks cost, measured side by side in one run.

Run from the project root:  python benchmarks/bench_reliability.py [--steps 5]

1. Creation ops: peak host memory (each case in a fresh child process, ``ru_maxrss``) of the issue's example —
   ``ttnn.ones`` of a 256 MiB bfloat16 tensor on a 1×1 mesh — and of ``ttnn.rand`` of the same size, against
   the former method reproduced here (a float64 array of the full shape, quantised to the dtype).
2. Autograd version checks: the median NanoGPT training step (the model of ``bench_train.py`` at batch 2)
   with the checks, and with the check replaced by a no-op, runs interleaved.

Prints the machine and the figures; times are wall-clock medians in milliseconds. The machine is shared:
quote ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import platform
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tttv2 import ttnn  # noqa: E402
from tttv2.ttnn.autograd import engine  # noqa: E402

SHAPE = (1, 1, 8192, 16384)  # 128 Mi elements: 256 MiB as bfloat16 on the device

CREATION = {
    "ttnn.ones (now)": "ttnn.ones(SHAPE, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)",
    "ones, former method": (
        "ttnn.Tensor([quantize(np.ones(SHAPE), ttnn.bfloat16)], ttnn.bfloat16, ttnn.TILE_LAYOUT, mesh, quantized=True)"
    ),
    "ttnn.rand (now)": "ttnn.rand(SHAPE, dtype=ttnn.bfloat16, device=mesh)",
    "rand, former method": (
        "ttnn.Tensor([quantize(np.random.default_rng(0).uniform(0.0, 1.0, size=SHAPE).astype(np.float32),"
        " ttnn.bfloat16)], ttnn.bfloat16, ttnn.TILE_LAYOUT, mesh, quantized=True)"
    ),
}


def peak_mib(expression: str) -> float:
    """Peak resident memory of a fresh process that opens a mesh and evaluates ``expression``."""
    code = textwrap.dedent(
        f"""
        import resource, numpy as np
        from tttv2 import ttnn
        from tttv2.ttnn.numerics import quantize
        SHAPE = {SHAPE!r}
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = {expression}
        print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    before, after = (int(v) for v in out.stdout.split())
    return (after - before) / 1024  # KiB → MiB: what the creation added to the peak


def training_step_ms(steps: int) -> tuple[float, float]:
    """Median step time with the version checks and with them disabled, interleaved."""
    ttnn.nn.manual_seed(0)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    ttnn.SetDefaultDevice(mesh)
    config = ttnn.nn.GPTConfig(vocab_size=65, block_size=128, n_layer=6, n_head=6, n_embd=384, dropout=0.2)
    model = ttnn.nn.GPT(config)
    opt = ttnn.optim.AdamW(model.named_parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    ids = ttnn.from_numpy(rng.integers(0, 65, (2, 128)).astype(np.uint32), dtype=ttnn.uint32, device=mesh)
    targets = ttnn.from_numpy(rng.integers(0, 65, (2, 128)).astype(np.uint32), dtype=ttnn.uint32, device=mesh)

    def step() -> float:
        start = time.perf_counter()
        loss = ttnn.cross_entropy_loss(model(ids), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - start

    checked, unchecked = [], []
    real = engine._check_saved
    step()  # warm-up
    try:
        for _ in range(steps):
            engine._check_saved = real
            checked.append(step())
            engine._check_saved = lambda node: None
            unchecked.append(step())
    finally:
        engine._check_saved = real
        ttnn.close_mesh_device(mesh)
    return 1e3 * statistics.median(checked), 1e3 * statistics.median(unchecked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--only", choices=["creation", "autograd"], default=None)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    if args.only != "autograd":
        print(f"\n1. creation of a {SHAPE} bfloat16 tensor (256 MiB on the device): host peak added, MiB")
        figures = {name: peak_mib(expr) for name, expr in CREATION.items()}
        for name, mib in figures.items():
            print(f"   {name:24s} {mib:8.0f}")
        for op in ("ones", "rand"):
            now, before = figures[f"ttnn.{op} (now)"], figures[f"{op}, former method"]
            print(f"   {op}: former / now = {before / now:.2f}")
    if args.only == "creation":
        return
    checked, unchecked = training_step_ms(args.steps)
    print(f"\n2. NanoGPT training step (batch 2), median of {args.steps}, ms")
    print(f"   with version checks {checked:8.1f}\n   checks disabled     {unchecked:8.1f}")
    print(f"   overhead: {100 * (checked / unchecked - 1):+.1f} %")


if __name__ == "__main__":
    main()
