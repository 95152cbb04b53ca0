"""Command line: ``trace-deps [MODULE] [CONFIG] [options]``.

Exit codes: 0 analysed; 1 ``--strict`` and something was not understood; 2 usage error (bad arguments, a
missing file, a file that does not parse, a module with no class that has ``forward``); 3 internal error.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import traceback
from pathlib import Path

from rich.console import Console

from .api import analyze
from .errors import TraceError, UsageError
from .export import WRITERS, focus
from .model import SCHEMA_VERSION
from .report import render, render_why

FORMATS = ("json", "dot", "graphml", "mermaid", "html", "svg")


def builtin_paths() -> tuple[Path, Path]:
    """The built-in input: tttv1/tt/mlp.py with tttv1/tt/model_config.py (found without importing tttv1)."""
    spec = importlib.util.find_spec("tttv1")
    roots = []
    if spec is not None and spec.submodule_search_locations:
        roots.extend(Path(p) for p in spec.submodule_search_locations)
    roots.append(Path(__file__).resolve().parents[2] / "tttv1")
    for root in roots:
        mlp = root / "tt" / "mlp.py"
        if mlp.is_file():
            return mlp, root / "tt" / "model_config.py"
    raise UsageError(
        "the built-in input tttv1/tt/mlp.py is not available", hint="pass MODULE [CONFIG] explicitly"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trace-deps",
        description="Static dependency tracer for TTTv1 modules: which config keys, ModelArgs members, branches "
        "and ttnn ops depend on which root parameters. Never imports or runs the analysed code.",
        epilog="Without MODULE the built-in tttv1/tt/mlp.py + tttv1/tt/model_config.py is analysed. "
        "Each output flag takes an optional FILE (default: stdout).",
    )
    p.add_argument("module", nargs="?", help="the TTTv1 module (e.g. mlp.py)")
    p.add_argument("config", nargs="?", help="its model_config.py (default: model_config.py next to MODULE)")
    p.add_argument(
        "--class", dest="class_name", metavar="NAME", help="class to analyse (default: first with forward)"
    )
    p.add_argument(
        "--entry", default="forward", metavar="METHOD", help="per-call entry method (default: forward)"
    )
    for fmt in FORMATS:
        p.add_argument(f"--{fmt}", nargs="?", const="-", metavar="FILE", help=f"write {fmt.upper()} output")
    p.add_argument(
        "--why", metavar="NAME", help="paths from root parameters to a key, args.attr, op or file:line"
    )
    p.add_argument("--focus", metavar="NAME", help="limit graph outputs to NAME and what it depends on")
    p.add_argument("--mode", choices=("decode", "prefill"), help="keep only what can run in this mode")
    p.add_argument(
        "--topology", choices=("1d", "2d"), help="keep only what can run on 1D meshes or galaxy (2D)"
    )
    p.add_argument("--no-helpers", action="store_true", help="do not follow calls into other files")
    p.add_argument(
        "--verbose", "-v", action="store_true", help="longer report (all helper boolean operators)"
    )
    p.add_argument("--strict", action="store_true", help="exit 1 if anything was not understood")
    p.add_argument("--quiet", "-q", action="store_true", help="no report and no progress")
    p.add_argument("--progress", action="store_true", help="print progress lines to stderr")
    p.add_argument("--width", type=int, default=None, help="report width (default: terminal, or 140)")
    p.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    p.add_argument("--version", action="version", version=f"trace-deps (JSON schema {SCHEMA_VERSION})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        return _run(args, err)
    except TraceError as exc:
        err.print(f"trace-deps: error: {exc}", markup=False)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        err.print("trace-deps: interrupted", markup=False)
        return 130
    except Exception as exc:  # never show a traceback unless asked
        if args.debug:
            traceback.print_exc()
        err.print(f"trace-deps: internal error: {type(exc).__name__}: {exc} (run with --debug)", markup=False)
        return 3


def _run(args: argparse.Namespace, err: Console) -> int:
    if args.module is None:
        if args.config is not None:  # pragma: no cover - argparse fills module first
            raise UsageError("CONFIG given without MODULE")
        module, config = builtin_paths()
        config = config if config.is_file() else None
    else:
        module = Path(args.module)
        config = Path(args.config) if args.config else None
    stdout_formats = [f for f in FORMATS if getattr(args, f) == "-"]
    if len(stdout_formats) > 1:
        raise UsageError(
            f"only one output can go to stdout, got --{' --'.join(stdout_formats)}",
            hint="give FILE names to the others",
        )
    show_progress = args.progress and not args.quiet
    # on a terminal, long runs (huge config modules) report progress by themselves after a second
    auto_progress = not args.quiet and sys.stderr.isatty()
    started = time.perf_counter()

    def progress(message: str) -> None:
        elapsed = time.perf_counter() - started
        if show_progress or (auto_progress and elapsed > 1.0):
            err.print(f"[trace-deps +{elapsed:.2f}s] {message}", markup=False)

    if show_progress:
        progress(f"parsing {module}" + (f" and {config}" if config else ""))
    analysis = analyze(
        module,
        config,
        class_name=args.class_name,
        entry=args.entry,
        follow_helpers=not args.no_helpers,
        progress=progress,
    )
    progress(f"analysed {analysis.stats.get('lines')} lines in {analysis.stats.get('seconds')}s")
    view = analysis.restrict(mode=args.mode, topology=args.topology)
    graph_view = view
    if args.focus:
        graph_view = focus(view, args.focus)
        if graph_view.graph.number_of_nodes() == 0:
            raise UsageError(f"--focus {args.focus!r} matches nothing in the graph")
    width = args.width or (None if sys.stdout.isatty() else 140)
    out = Console(width=width, highlight=False, soft_wrap=False, markup=False)
    for fmt in FORMATS:
        target = getattr(args, fmt)
        if target is None:
            continue
        text = WRITERS[fmt](view if fmt == "json" and not args.focus else graph_view)
        if target == "-":
            sys.stdout.write(text)
        else:
            path = Path(target)
            if path.parent and not path.parent.is_dir():
                raise UsageError(f"cannot write {fmt} output: folder {path.parent} does not exist")
            path.write_text(text, encoding="utf-8")
            if not args.quiet:
                err.print(f"wrote {path} ({fmt})", markup=False)
    ok = True
    if args.why:
        ok = render_why(view, args.why, out)
    elif not stdout_formats and not args.quiet:
        render(view, out, verbose=args.verbose)
    if not ok:
        return 2
    if args.strict:
        unknown = any(d.get("category") == "unknown" for _, d in analysis.graph.nodes(data=True))
        if unknown or analysis.skipped:
            err.print(
                "trace-deps: --strict: some constructs were not understood (see the report)", markup=False
            )
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
