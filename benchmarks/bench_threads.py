"""Tune the device-op kernels' thread threshold (kOpMinElemsPerThread in native/src/kernels.hpp).

Times every device-op kernel of tttv2._native at each shape in fresh processes with TTTV2_NUM_THREADS=1 and =2 (the
pool size is read once per process), the two alternating, and prints the median of each and their ratio: a ratio
below 1 means a second thread pays off at that size. The threshold in kernels.hpp decides which shapes get a second
thread at all, so to see what two threads would do below it, build with a lower threshold first.

Run from the project root:  python benchmarks/bench_threads.py [--shapes 32x2048,32x4096,...] [--pairs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_ops import parse_shapes  # the benchmarks folder is on sys.path when a benchmark runs as a script

SHAPES = "32x2048,32x4096,32x8192,64x4096,128x4096,256x4096"

CHILD = r"""
import json, statistics, sys, time
import numpy as np
from tttv2.ttnn import _kernels

def median(fn, budget=0.15):
    fn(); fn()
    times, end = [], time.perf_counter() + budget
    while time.perf_counter() < end or len(times) < 15:
        start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
    return statistics.median(times)

out = {}
rng = np.random.default_rng(0)
for rows, d in json.loads(sys.argv[1]):
    x = rng.standard_normal((rows, d), dtype=np.float32)
    y = rng.standard_normal((rows, d), dtype=np.float32)
    w = rng.standard_normal(d, dtype=np.float32)
    cos, sin = np.cos(x), np.sin(x)
    ops = {
        "round_bfloat16": lambda: _kernels.round_bfloat16(x),
        "silu_mul": lambda: _kernels.silu_mul(x, y),
        "rms_norm": lambda: _kernels.rms_norm(x, w, 1e-5),
        "layer_norm": lambda: _kernels.layer_norm(x, w, w, 1e-5),
        "softmax": lambda: _kernels.softmax(x),
        "rotary": lambda: _kernels.rotary_interleaved(x, cos, sin, 1),
        "bfp_quantize": lambda: _kernels.bfp_quantize(x, 7),
        "bfp_pack": lambda: _kernels.bfp_pack(x, 7),
    }
    for name, fn in ops.items():
        out[f"{name} {rows}x{d}"] = median(fn)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", type=parse_shapes, default=parse_shapes(SHAPES), help=f"default {SHAPES}")
    parser.add_argument(
        "--pairs", type=int, default=4, help="processes per thread count, alternating (default 4)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one 32x64 shape, one process each: a smoke test (figures mean nothing)",
    )
    args = parser.parse_args()
    if args.quick:
        args.shapes, args.pairs = parse_shapes("32x64"), 1
    load = os.getloadavg()[0]
    print(f"command: python {' '.join(sys.argv)}; load average at start: {load:.2f}", flush=True)
    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    started = time.perf_counter()
    for i in range(args.pairs):
        for threads in (1, 2) if i % 2 == 0 else (2, 1):
            env = {**os.environ, "TTTV2_NUM_THREADS": str(threads)}
            env.pop("TTTV2_KERNELS", None)
            done = subprocess.run(
                [sys.executable, "-c", CHILD, json.dumps(args.shapes)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs[threads].append(json.loads(done.stdout))
    print(f"{args.pairs} processes per thread count in {time.perf_counter() - started:.0f} s")
    print("| kernel | shape | 1 thread | 2 threads | 2 threads / 1 thread |")
    print("|---|---:|---:|---:|---:|")
    for key in runs[1][0]:
        one = statistics.median(run[key] for run in runs[1])
        two = statistics.median(run[key] for run in runs[2])
        name, shape = key.split(" ")
        print(f"| {name} | {shape} | {one * 1e6:.1f} µs | {two * 1e6:.1f} µs | {two / one:.2f} |")


if __name__ == "__main__":
    main()
