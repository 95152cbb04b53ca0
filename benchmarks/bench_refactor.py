"""tttv2-refactor throughput: lines of input per second per core, end to end (trace-deps analysis, the
specialisation passes, rendering, generated tests and report; nothing written), next to LibCST's own no-op
codemod (parse, a transformer that changes nothing, render) over the same files in the same run.

The input lines of one run are those of every file it reads: the module, its model_config.py and the helper
files the analysis follows (ccl.py, ...). Both sides are timed with process CPU time (the runs are
single-threaded, so that is per core); the best of ``--repeats`` runs is kept per module.

    python benchmarks/bench_refactor.py [--repeats N] [--only mlp attention ...]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import libcst as cst

from tttv2_tools.refactor.run import plan_run

ROOT = Path(__file__).resolve().parents[1]
TTTV1 = ROOT / "tttv1" / "tt"
MODULES = ("mlp", "mlp_legacy", "rmsnorm", "distributed_norm", "embedding", "lm_head", "attention", "decoder")


class _NoOp(cst.CSTTransformer):
    """LibCST's baseline: visit every node, change nothing."""


def _noop_codemod(paths: list[Path]) -> None:
    for path in paths:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        module.visit(_NoOp()).code  # noqa: B018 - rendering is part of a codemod


def _input_paths(module: Path, analysis) -> list[Path]:
    """The files the analysis read: where ``analysis.sources`` says (a file outside the module's folder, such as
    the package's ``__init__.py``), else next to the module."""
    paths = [analysis.sources.get(name) or module.parent / name for name in analysis.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"bench_refactor: cannot find the input files {missing}")
    return paths


def _best(repeats: int, work) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per module and side (best kept)")
    parser.add_argument("--only", nargs="+", choices=MODULES, metavar="NAME", help=f"a subset of {MODULES}")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats: expected at least 1, got {args.repeats}")
    names = args.only or MODULES
    print(
        f"python {platform.python_version()} on {platform.machine()}, {args.repeats} runs per side, best kept"
    )
    print(
        f"{'module':<18}{'lines':>7}{'ours s':>9}{'ours l/s':>10}{'libcst s':>10}{'libcst l/s':>12}{'ratio':>7}"
    )
    total_lines = total_ours = total_base = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        plan_run(TTTV1 / "embedding.py", None, out=out)  # imports and first-use costs out of the figures
        for name in names:
            module = TTTV1 / f"{name}.py"
            run = plan_run(module, None, out=out, tests_out=out / "tests")
            paths = _input_paths(module, run.result.inputs.analysis)
            lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)
            ours = _best(args.repeats, lambda m=module: plan_run(m, None, out=out, tests_out=out / "tests"))
            base = _best(args.repeats, lambda p=paths: _noop_codemod(p))
            total_lines, total_ours, total_base = total_lines + lines, total_ours + ours, total_base + base
            print(
                f"{name:<18}{lines:>7}{ours:>9.2f}{lines / ours:>10.0f}{base:>10.3f}{lines / base:>12.0f}"
                f"{(lines / ours) / (lines / base):>7.3f}"
            )
    print(
        f"{'all':<18}{int(total_lines):>7}{total_ours:>9.2f}{total_lines / total_ours:>10.0f}{total_base:>10.3f}"
        f"{total_lines / total_base:>12.0f}{total_base / total_ours:>7.3f}"
    )
    print("l/s = lines of input per CPU second (one core); ratio = ours / libcst no-op (goal: 4,000 l/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
