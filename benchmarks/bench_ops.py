"""Benchmark the emulator's device-op kernels: C++ (tttv2._native) vs numpy reference vs torch CPU.

Run from the project root:  python benchmarks/bench_ops.py [--shapes 32x4096,1024x4096] [--no-doc]
Prints the machine, the command and a table, and writes the same into docs/performance.md under
"## Device-op kernels (benchmarks/bench_ops.py)" (other sections of that file are kept).
Times are medians of several runs of the full Python call (native includes the dispatcher and output
allocation); GB/s is bytes read + written divided by the native time.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tttv2.ttnn import _kernels  # noqa: E402
from tttv2.ttnn._kernels import reference  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None

# 32 rows × 2048 … 8192: the decode path (a batch of 32 users, one token each, across the model widths)
SHAPES = [(32, 2048), (32, 4096), (32, 8192), (1024, 4096), (2048, 8192)]
SECTION = "## Device-op kernels (benchmarks/bench_ops.py)"
DOC = ROOT / "docs" / "performance.md"
EPS = 1e-5
TORCH_THREADS = 2
TORCH_1T = "torch, 1 thread"
ROUNDS = 5  # alternating blocks of runs per implementation (see median_times)


def time_once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_times(
    impls: dict[str, Callable[[], object]], budget: float, max_repeats: int, rounds: int = ROUNDS
) -> dict[str, float]:
    """Median wall time of each callable over back-to-back runs (warm caches and threads).

    The runs are taken in ``rounds`` alternating blocks (native's block, then the reference's, then torch's, and
    again), each block opened by one untimed warm-up call, so that a change in the machine's load during the
    measurement (it is shared) weighs on every implementation alike instead of on whichever ran at that moment.
    Each callable gets as many runs (at most max_repeats) as fit in ~budget seconds; one slower than the budget
    (the numpy reference on big shapes) is timed twice and the faster run kept.
    """
    samples: dict[str, list[float]] = {name: [] for name in impls}
    per_block: dict[str, int] = {}
    for name, fn in impls.items():
        with _torch_threads(1 if name == TORCH_1T else TORCH_THREADS):
            first = time_once(fn)  # warm-up, and how long one call takes
            if first > budget:
                samples[name].append(min(first, time_once(fn)))
                continue
            once = time_once(fn)
        repeats = int(min(max_repeats, max(3, budget / max(once, 1e-9))))
        per_block[name] = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for name, count in per_block.items():
            fn = impls[name]
            with _torch_threads(1 if name == TORCH_1T else TORCH_THREADS):
                fn()  # warm-up: the other implementations ran in between
                samples[name].extend(time_once(fn) for _ in range(count))
    return {name: statistics.median(times) for name, times in samples.items()}


@contextlib.contextmanager
def _torch_threads(n: int):
    """torch's intra-op threads for a block of runs (torch ignores a setting equal to its current one)."""
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if before != n:
            torch.set_num_threads(before)


def cpu_busy_seconds() -> float | None:
    """CPU seconds spent busy by the whole machine so far (Linux /proc/stat), or None."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:  # pragma: no cover - not Linux
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def make_cases(shape: tuple[int, int]) -> list[tuple[str, dict[str, Callable[[], object] | None], int]]:
    """(op name, {"native"/"reference"/"torch": callable or None}, bytes read + written) for a shape."""
    rows, d = shape
    n = rows * d
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    y = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal(d, dtype=np.float32)
    b = rng.standard_normal(d, dtype=np.float32)
    angles = rng.uniform(0, 2 * np.pi, size=shape).astype(np.float32)
    cos, sin = np.cos(angles), np.sin(angles)

    def both(name: str, *args: object) -> dict[str, Callable[[], object]]:
        native, ref = getattr(_kernels, name), getattr(reference, name)
        return {"native": lambda: native(*args), "reference": lambda: ref(*args)}

    def bfp8_roundtrip(mod: object) -> Callable[[], object]:
        return lambda: mod.bfp_unpack(*mod.bfp_pack(x, 7), 7)

    cases = [
        ("rms_norm", both("rms_norm", x, w, EPS), 2 * n * 4 + d * 4),
        ("layer_norm", both("layer_norm", x, w, b, EPS), 2 * n * 4 + 2 * d * 4),
        ("softmax", both("softmax", x), 2 * n * 4),
        ("silu_mul", both("silu_mul", x, y), 3 * n * 4),
        ("rotary (interleaved)", both("rotary_interleaved", x, cos, sin, 1), 4 * n * 4),
        ("bfloat16 rounding", both("round_bfloat16", x), 2 * n * 4),
        # pack reads 4n and writes n + n/16 bytes; unpack reads n + n/16 and writes 4n
        (
            "bfp8 pack+unpack",
            {"native": bfp8_roundtrip(_kernels), "reference": bfp8_roundtrip(reference)},
            10 * n + n // 8,
        ),
        ("bfp8 quantize (fused)", both("bfp_quantize", x, 7), 2 * n * 4),
    ]
    if torch is not None:
        tx, ty, tw, tb = (torch.from_numpy(a) for a in (x, y, w, b))
        tcos, tsin = torch.from_numpy(cos), torch.from_numpy(sin)

        def torch_rotary() -> object:
            pairs = tx.view(rows, d // 2, 2)
            swapped = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).view(rows, d)
            return tx * tcos + swapped * tsin

        torch_ops = {
            "rms_norm": lambda: F.rms_norm(tx, (d,), tw, EPS),
            "layer_norm": lambda: F.layer_norm(tx, (d,), tw, tb, EPS),
            "softmax": lambda: F.softmax(tx, dim=-1),
            "silu_mul": lambda: F.silu(tx) * ty,
            "rotary (interleaved)": torch_rotary,
            "bfloat16 rounding": lambda: tx.to(torch.bfloat16).float(),
        }
        for name, impls, _ in cases:
            impls["torch"] = torch_ops.get(name)
            impls[TORCH_1T] = torch_ops.get(name)  # the same call, its blocks run with one torch thread
    return cases


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def machine_info() -> tuple[str, int]:
    model = platform.processor() or platform.machine()
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        if match:
            model = match.group(1).strip()
    except OSError:  # pragma: no cover - not Linux
        pass
    return model, os.cpu_count() or 1


def run(budget: float, max_repeats: int, shapes: list[tuple[int, int]]) -> list[list[str]]:
    table = []
    for shape in shapes:
        for name, impls, nbytes in make_cases(shape):
            present = {key: fn for key, fn in impls.items() if fn is not None}
            times = median_times(present, budget, max_repeats)
            native, torch_time, torch_1t = times["native"], times.get("torch"), times.get(TORCH_1T)
            speedup = f"{torch_time / native:.2f}×" if torch_time is not None else "n/a"
            speedup_1t = f"{torch_1t / native:.2f}×" if torch_1t is not None else "n/a"
            row = [
                name,
                f"{shape[0]}×{shape[1]}",
                fmt_time(native),
                fmt_time(times.get("reference")),
                fmt_time(torch_time),
                speedup,
                fmt_time(torch_1t),
                speedup_1t,
                f"{nbytes / native / 1e9:.1f}",
            ]
            table.append(row)
            print("  ".join(row), flush=True)
    return table


HEADER = [
    "op",
    "shape",
    "native",
    "numpy reference",
    "torch CPU (2 threads)",
    "torch / native",
    "torch CPU (1 thread)",
    "torch 1 thread / native",
    "native GB/s",
]


def markdown_table(table: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join(["---"] + ["---:"] * (len(HEADER) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    return "\n".join(lines)


def write_doc(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Performance\n\nMeasured numbers for the emulator.\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = re.search(r"^## ", text[start + len(SECTION) :], re.M)
        end = start + len(SECTION) + nxt.start() if nxt else len(text)
        text = text[:start] + section + ("\n" + text[end:] if nxt else "")
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text.rstrip("\n") + "\n")


def parse_shapes(text: str) -> list[tuple[int, int]]:
    try:
        shapes = [tuple(int(v) for v in item.lower().split("x")) for item in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(shape) != 2 or min(shape) < 1 for shape in shapes):
        raise argparse.ArgumentTypeError(f"expected ROWSxCOLS[,ROWSxCOLS...], got {text!r}")
    return shapes  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=0.3, help="seconds per measurement (default 0.3)")
    parser.add_argument("--max-repeats", type=int, default=50, help="repeats per measurement at most")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md")
    parser.add_argument(
        "--shapes", type=parse_shapes, default=SHAPES, help="ROWSxCOLS,... (default: all of SHAPES)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest shape, one run per block, docs left alone: a smoke test (its figures mean nothing)",
    )
    args = parser.parse_args()
    if args.quick:
        args.budget, args.max_repeats, args.shapes, args.no_doc = 0.0, 1, SHAPES[:1], True

    if torch is not None:
        torch.set_num_threads(TORCH_THREADS)
    model, cores = machine_info()
    command = "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
    versions = f"numpy {np.__version__}, torch {torch.__version__ if torch is not None else 'not installed'}"
    print(f"machine: {model}, {cores} cores (torch threads: 2); {versions}; kernels: {_kernels.BACKEND}")
    print(f"command: {command}")
    if _kernels.BACKEND != "native":
        sys.exit("unset TTTV2_KERNELS: this benchmark compares the native kernels against the others")
    busy_before, own_before, wall_before = cpu_busy_seconds(), os.times(), time.perf_counter()
    table = run(args.budget, args.max_repeats, args.shapes)
    busy_after, own_after, wall = cpu_busy_seconds(), os.times(), time.perf_counter() - wall_before
    md = markdown_table(table)
    load = "unknown"
    if busy_before is not None and busy_after is not None:
        own = (own_after.user + own_after.system) - (own_before.user + own_before.system)
        load = f"{max(0.0, busy_after - busy_before - own) / wall:.2f} cores busy with other work on average"
    print(f"\nbackground load during the run: {load}")
    print()
    print(md)

    if not args.no_doc:
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        section = (
            f"{SECTION}\n\n"
            f"- machine: {model}, {cores} cores; {platform.python_implementation()} {platform.python_version()}, "
            f"{versions} (torch.set_num_threads(2); the 1-thread column: set to 1 for its blocks)\n"
            f"- command: `{command}`\n"
            f"- date: {date}; background load during the run: {load}\n\n"
            "Median wall time of back-to-back Python calls, taken in 5 alternating blocks per implementation "
            "(native includes the dispatcher and allocating "
            "the output; bfp8 pack+unpack is two calls). GB/s = bytes read + written / native time. "
            "torch has no block-float format, hence n/a. torch with 2 threads needs both cores at once at every "
            "call: on the busy machine its medians jump to 15-70 ms in some rows (a thread waiting for a core), "
            "which the 1-thread column does not suffer. The machine is shared: numbers from runs with "
            "background load are noisy, and a kernel called cold (worker threads parked) runs closer to "
            "single-threaded speed.\n\n"
            f"{md}\n"
        )
        write_doc(section)
        print(f"\nwrote {os.path.relpath(DOC, ROOT)}")


if __name__ == "__main__":
    main()
