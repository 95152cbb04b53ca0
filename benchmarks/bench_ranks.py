"""One mesh over MPI ranks vs one process: the tttv1 demo on a Galaxy 8x4 mesh, plain and under ``tttv2-run --np 2``
and ``--np 4`` (the same program; every rank emulates its share of the 32 devices, docs/distributed.md).

Runs alternate (one process, 2 ranks, 4 ranks, again) so that the load of a shared machine hits all alike. Prints,
per setting, the medians of the whole command's wall time, the CPU time of its process tree, and the demo's own
prefill time and decode time per token (rank 0's output), then the ratios to one process.

    python benchmarks/bench_ranks.py [--repeats 3] [--max-new-tokens 8] [--model Llama-3.2-1B-tiny]
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import time

from _overhead import ROOT

SPEED = re.compile(r"prefill: \d+ tokens in ([\d.]+) s .* decode: ([\d.]+) tok/s/user")


def run(argv: list[str]) -> tuple[float, float, float, float]:
    """(wall s, CPU s of the process tree, prefill s, decode s per token) of one demo run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... exited with {done.returncode}:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    match = SPEED.search(done.stdout)
    if match is None:
        raise SystemExit(f"no speed line in the demo's output:\n{done.stdout[-2000:]}")
    return wall, cpu, float(match.group(1)), 1.0 / float(match.group(2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--model", default="Llama-3.2-1B-tiny")
    p.add_argument("--quick", action="store_true", help="one run of one process and of 2 ranks, 2 new tokens")
    args = p.parse_args()
    if args.quick:
        args.repeats, args.max_new_tokens = 1, 2
    if args.max_new_tokens < 2:  # one new token is prefill alone: no decode step to time
        p.error(f"--max-new-tokens: expected at least 2 (one decode step), got {args.max_new_tokens}")
    demo = [
        *(sys.executable, "-m", "tttv1.demo.simple_text_demo", "--mesh", "TG", "--model", args.model),
        *("--max-new-tokens", str(args.max_new_tokens)),
    ]
    launcher = [sys.executable, "-m", "tttv2.distributed.run"]
    settings = {
        "one process": demo,
        "2 ranks": [*launcher, "--np", "2", "--", *demo],
        "4 ranks": [*launcher, "--np", "4", "--", *demo],
    }
    if args.quick:
        del settings["4 ranks"]
    times: dict[str, list] = {name: [] for name in settings}
    for i in range(args.repeats):
        for name, argv in settings.items():
            times[name].append(run(argv))
            wall, cpu, prefill, decode = times[name][-1]
            print(
                f"run {i + 1} {name}: wall {wall:.2f} s, CPU {cpu:.2f} s, prefill {prefill:.3f} s, "
                f"decode {decode * 1e3:.0f} ms/token",
                flush=True,
            )
    medians = {
        name: [statistics.median(t[k] for t in runs) for k in range(4)] for name, runs in times.items()
    }
    base = medians["one process"]
    print(f"\nmedians of {args.repeats} ({args.model} on TG, {args.max_new_tokens} new tokens):")
    for name, (wall, cpu, prefill, decode) in medians.items():
        print(
            f"  {name:12s} wall {wall:6.2f} s ({wall / base[0]:.2f}x)  CPU {cpu:6.2f} s ({cpu / base[1]:.2f}x)  "
            f"prefill {prefill:.3f} s ({prefill / base[2]:.2f}x)  decode {decode * 1e3:5.0f} ms/token "
            f"({decode / base[3]:.2f}x)"
        )


if __name__ == "__main__":
    main()
