"""What the reliability checks cost, measured side by side in one run.

Run from the project root:  python benchmarks/bench_reliability.py [--steps 5]

1. Creation ops: peak host memory (each case in a fresh child process, ``ru_maxrss``) of the issue's example —
   ``ttnn.ones`` of a 256 MiB bfloat16 tensor on a 1×1 mesh — and of ``ttnn.rand`` of the same size, against
   the former method reproduced here (a float64 array of the full shape, quantised to the dtype).
2. Autograd version checks: the median NanoGPT training step (the model of ``bench_train.py`` at batch 2)
   with the checks, and with the check replaced by a no-op, runs interleaved.
3. Tensor-file verification (issue 22): loading a 256 MiB float32 tensor file with ``ttnn.load_tensor`` (every
   ``.npy`` header checked against its member, every member read to its end so the zip CRC is checked) against
   the former reader (``np.lib.format.read_array`` on the member, never read to the end), interleaved, from the
   page cache.
4. BLAS thread pinning per op (issue 22): the median time of a small ``ttnn.matmul`` (64x256 by 256x128) with
   the pinning and with it replaced by a no-op, while the caller's BLAS uses 2 threads (so each op sets and
   restores the count), from the main thread and from a worker thread.
5. ``--demo``: the T3K demo (``tttv1.demo.simple_text_demo --mesh T3K --max-new-tokens 16``) twice in this
   process (the first run pays for the imports); the second run's ops and the cache bytes it verified (none: the
   demo's random weights are not cached), with 3 and 4, give the checks' share of its CPU time.

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
from tttv2.ttnn import _threads, distribution  # noqa: E402
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


GPT = dict(block_size=128, n_layer=6, n_head=6, n_embd=384)  # bench_train.py's NanoGPT


def training_step_ms(steps: int) -> tuple[float, float]:
    """Median step time with the version checks and with them disabled, interleaved."""
    ttnn.nn.manual_seed(0)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    ttnn.SetDefaultDevice(mesh)
    config = ttnn.nn.GPTConfig(vocab_size=65, dropout=0.2, **GPT)
    model = ttnn.nn.GPT(config)
    opt = ttnn.optim.AdamW(model.named_parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    batch = (2, GPT["block_size"])
    ids = ttnn.from_numpy(rng.integers(0, 65, batch).astype(np.uint32), dtype=ttnn.uint32, device=mesh)
    targets = ttnn.from_numpy(rng.integers(0, 65, batch).astype(np.uint32), dtype=ttnn.uint32, device=mesh)

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


CACHE_SHAPE = (1, 1, 8192, 8192)  # 64 Mi float32 elements: 256 MiB


def _former_read_npy(zf, name):
    """The reader before issue 22: the array streamed from its member, the member never read to its end (so
    zipfile never compared the CRC)."""
    with zf.open(name) as member:
        return np.lib.format.read_array(member)


def cache_load_ms(repeats: int, folder: Path) -> tuple[float, float]:
    """Median ``load_tensor`` time of a 256 MiB float32 file: verified, and with the former member reader."""
    path = folder / "bench_reliability_256mib.tensorbin"
    values = np.random.default_rng(0).standard_normal(CACHE_SHAPE, dtype=np.float32)
    ttnn.dump_tensor(path, ttnn.from_numpy(values, dtype=ttnn.float32))
    del values
    verified, former = [], []
    real = distribution._read_npy
    try:
        ttnn.load_tensor(path)  # warm the page cache
        for _ in range(repeats):
            distribution._read_npy = real
            start = time.perf_counter()
            ttnn.load_tensor(path)
            verified.append(time.perf_counter() - start)
            distribution._read_npy = _former_read_npy
            start = time.perf_counter()
            ttnn.load_tensor(path)
            former.append(time.perf_counter() - start)
    finally:
        distribution._read_npy = real
        path.unlink()
    return 1e3 * statistics.median(verified), 1e3 * statistics.median(former)


class _NoPinning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def op_us(calls: int, in_thread: bool, caller_threads: int) -> tuple[float, float]:
    """Median µs of one small matmul with the BLAS pinning and with a no-op in its place, interleaved in
    blocks. With the caller's BLAS at 1 thread the pinning only keeps its books; at 2 it sets the count to 1 and
    back every op, and without it the product runs on 2 BLAS threads (results then depend on the thread)."""
    import threading

    from threadpoolctl import threadpool_limits

    from tttv2.ttnn.ops import _common

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    rng = np.random.default_rng(0)
    a = ttnn.from_numpy(
        rng.standard_normal((1, 1, 64, 256)).astype(np.float32), layout=ttnn.TILE_LAYOUT, device=mesh
    )
    b = ttnn.from_numpy(
        rng.standard_normal((256, 128)).astype(np.float32), layout=ttnn.TILE_LAYOUT, device=mesh
    )
    pinned, free = [], []
    real = _common.single_threaded_blas

    def block(samples: list) -> None:
        start = time.perf_counter()
        for _ in range(calls):
            ttnn.matmul(a, b, dtype=ttnn.float32)
        samples.append((time.perf_counter() - start) / calls)

    def run() -> None:
        with threadpool_limits(limits=caller_threads, user_api="blas"):
            block([])  # warm-up
            for _ in range(7):
                _common.single_threaded_blas = real
                block(pinned)
                _common.single_threaded_blas = _NoPinning()
                block(free)

    try:
        if in_thread:
            worker = threading.Thread(target=run)
            worker.start()
            worker.join()
        else:
            run()
    finally:
        _common.single_threaded_blas = real
        ttnn.close_mesh_device(mesh)
    return 1e6 * statistics.median(pinned), 1e6 * statistics.median(free)


def pinning_alone_us(caller_threads: int) -> float:
    """Best-of-5 µs of entering and leaving the pinning with nothing inside: its cost per op, free of the
    op's own noise (with the caller at 2 threads it sets the count to 1 and back)."""
    import timeit

    from threadpoolctl import threadpool_limits

    def enter_exit() -> None:
        with _threads.single_threaded_blas:
            pass

    with threadpool_limits(limits=caller_threads, user_api="blas"):
        return 1e6 * min(timeit.repeat(enter_exit, number=20_000, repeat=5)) / 20_000


def demo_counts() -> tuple[float, int, int]:
    """CPU seconds of one T3K demo run in this process, the ops it ran (pinning entries) and the cache bytes
    it verified."""
    import runpy

    counts = {"ops": 0, "bytes": 0}
    pin, read = type(_threads.single_threaded_blas).__enter__, distribution._read_npy

    def counting_enter(self):
        counts["ops"] += 1
        return pin(self)

    def counting_read(zf, name):
        counts["bytes"] += zf.getinfo(name).file_size
        return read(zf, name)

    type(_threads.single_threaded_blas).__enter__ = counting_enter
    distribution._read_npy = counting_read
    argv = sys.argv
    sys.argv = ["simple_text_demo", "--mesh", "T3K", "--max-new-tokens", "16"]
    start = time.process_time()
    try:
        runpy.run_module("tttv1.demo.simple_text_demo", run_name="__main__")
    except SystemExit:
        pass
    finally:
        cpu = time.process_time() - start
        sys.argv = argv
        type(_threads.single_threaded_blas).__enter__ = pin
        distribution._read_npy = read
    return cpu, counts["ops"], counts["bytes"]


def _mib(shape: tuple[int, ...], itemsize: int) -> float:
    """The size of a tensor of ``shape`` in MiB (256 at the default shapes)."""
    return float(np.prod(shape)) * itemsize / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument(
        "--only", nargs="+", choices=["creation", "autograd", "cache", "pinning"], default=None
    )
    parser.add_argument("--repeats", type=int, default=5, help="cache loads per side")
    parser.add_argument("--calls", type=int, default=200, help="matmuls per timed block")
    parser.add_argument("--demo", action="store_true", help="also run the T3K demo once (minutes)")
    parser.add_argument(
        "--quick", action="store_true", help="the smallest size, for a smoke test (its figures mean nothing)"
    )
    args = parser.parse_args()
    if args.quick:  # one step of a one-layer NanoGPT, one load, a few calls, tensors of 2-4 MiB (not 256)
        global SHAPE, CACHE_SHAPE, GPT
        SHAPE, CACHE_SHAPE = (1, 1, 1024, 2048), (1, 1, 512, 1024)
        GPT = dict(block_size=32, n_layer=1, n_head=2, n_embd=64)
        args.steps, args.repeats, args.calls = 1, 1, 2
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    if args.only is None or "creation" in args.only:
        print(
            f"\n1. creation of a {SHAPE} bfloat16 tensor ({_mib(SHAPE, 2):g} MiB on the device): host peak added, MiB"
        )
        figures = {name: peak_mib(expr) for name, expr in CREATION.items()}
        for name, mib in figures.items():
            print(f"   {name:24s} {mib:8.0f}")
        for op in ("ones", "rand"):
            now, before = figures[f"ttnn.{op} (now)"], figures[f"{op}, former method"]
            ratio = f"{before / now:.2f}" if now > 0 else "n/a (nothing added to the peak)"
            print(f"   {op}: former / now = {ratio}")
    if args.only is None or "autograd" in args.only:
        checked, unchecked = training_step_ms(args.steps)
        print(f"\n2. NanoGPT training step (batch 2, {GPT}), median of {args.steps}, ms")
        print(f"   with version checks {checked:8.1f}\n   checks disabled     {unchecked:8.1f}")
        print(f"   overhead: {100 * (checked / unchecked - 1):+.1f} %")
    per_byte_ns = per_op_us = None
    if args.only is None or "cache" in args.only:
        import tempfile

        with tempfile.TemporaryDirectory(dir=ROOT) as folder:
            verified, former = cache_load_ms(args.repeats, Path(folder))
        per_byte_ns = 1e6 * (verified - former) / (_mib(CACHE_SHAPE, 4) * 2**20)
        print(
            f"\n3. load_tensor of a {CACHE_SHAPE} float32 file ({_mib(CACHE_SHAPE, 4):g} MiB), median of {args.repeats}, ms"
        )
        print(f"   verified (header + CRC)  {verified:8.1f}\n   former reader            {former:8.1f}")
        print(f"   verified / former = {verified / former:.2f} ({per_byte_ns:+.2f} ns per byte)")
    if args.only is None or "pinning" in args.only:
        print(f"\n4. one ttnn.matmul 64x256 @ 256x128, median of 7 blocks of {args.calls} calls, µs")
        for caller in (1, 2):
            for label, in_thread in (("main thread", False), ("worker thread", True)):
                pinned, free = op_us(args.calls, in_thread, caller)
                print(
                    f"   caller's BLAS {caller} thread(s), {label:13s} pinned {pinned:7.1f}   no pinning "
                    f"{free:7.1f}   difference {pinned - free:+6.1f}"
                )
        alone = {caller: pinning_alone_us(caller) for caller in (1, 2)}
        per_op_us = max(alone.values())
        print(
            f"   the pinning alone (enter + exit, nothing inside): {alone[1]:.1f} µs with the caller's BLAS at 1 "
            f"thread, {alone[2]:.1f} µs at 2 (set to 1 and back)"
        )
    if args.demo:
        demo_counts()  # the first run pays for the imports
        cpu, ops, nbytes = demo_counts()
        print(
            f"\n5. T3K demo (16 new tokens), second run in this process: {cpu:.1f} s CPU, {ops} ops, "
            f"{nbytes / 2**20:.1f} MiB of cache verified"
        )
        if per_op_us is not None:
            verify = nbytes * max(per_byte_ns or 0.0, 0.0) * 1e-9
            share = (ops * per_op_us * 1e-6 + verify) / cpu
            print(
                f"   checks' share of the demo's CPU time: {100 * share:.2f} % ({ops} ops x {per_op_us:.1f} µs of "
                f"pinning + {verify * 1e3:.1f} ms of cache verification; goal <= 5 %)"
            )


if __name__ == "__main__":
    main()
