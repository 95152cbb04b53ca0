"""Whole-process timing shared by the benchmarks that compare a demo run plain and under a tool (record, verify):
wall and CPU time of a child process tree, and the medians side by side."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of ``argv`` run from the project root; a failing run ends the
    benchmark with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... exited with {done.returncode}:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def print_ratios(plain: list, other: list, name: str, goal: str) -> None:
    """The median wall and CPU times of the plain runs and of the ``name`` runs, their ratio and the pairwise
    range (runs alternate, so pairs saw the same load)."""
    for what, k in (("wall", 0), ("CPU", 1)):
        p_med = statistics.median(t[k] for t in plain)
        o_med = statistics.median(t[k] for t in other)
        ratios = [o[k] / p[k] for p, o in zip(plain, other)]
        print(
            f"median {what}: plain {p_med:.2f} s, {name} {o_med:.2f} s, ratio {o_med / p_med:.3f}x "
            f"(pairwise {min(ratios):.2f}-{max(ratios):.2f}x; {goal})"
        )
