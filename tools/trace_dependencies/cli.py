"""Command line: ``trace-deps [MODULE] [CONFIG] [options]``.

Output design (one rule, no ambiguity): an output flag is ``--FORMAT`` (stdout) or ``--FORMAT=FILE``. A flag
never takes the next argument as its file, so ``trace-deps --json mlp.py model_config.py`` analyses ``mlp.py``
and writes JSON to stdout. The tool refuses to send two outputs to stdout; every output file goes through the
shared policy of ``tttv2_tools._output``: never onto an input file or an existing Python file, never two
outputs to one file, an existing file only when trace-deps wrote it (its JSON schema key or marker line) or
with ``--force``, always atomically.

Exit codes: 0 analysed; 1 ``--strict`` and something was not understood; 2 usage or I/O error (bad arguments,
a missing or unreadable file, a file that does not parse, a module with no entry class, an output that cannot
be written); 3 internal error; 130 interrupted (Ctrl-C, one line).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import itertools
import sys
import time
from pathlib import Path

from tttv2_tools._cli import (
    EXIT_ATTENTION,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    ArgumentParser,
    HelpFormatter,
    add_common,
    add_output,
    config_is_module,
    internal_error,
    module_file,
    names_module,
    say,
    split_target,
    table_width,
    terminal_columns,  # noqa: F401  (re-exported: the help width, tested here)
)
from tttv2_tools._cli import normalise_argv as _normalise
from tttv2_tools._output import (
    Output,
    OutputError,
    WriteInterrupted,
    check,
    file_argument,
    interrupted,
    same_file,
    write,
)
from tttv2_tools._recursion import deeper_recursion, too_deep

from .errors import TraceError, UsageError
from .model import SCHEMA_VERSION
from .outputs import KINDS

FORMATS = ("json", "dot", "graphml", "mermaid", "html", "svg")
STDOUT = "-"


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
    p = ArgumentParser(
        prog="trace-deps",
        formatter_class=HelpFormatter,
        usage="trace-deps [MODULE[:CLASS]] [CONFIG] [--json[=FILE]] [--dot[=FILE]] [--graphml[=FILE]] "
        "[--mermaid[=FILE]] [--html[=FILE]] [--svg[=FILE]] [options]",
        allow_abbrev=False,  # an abbreviated output flag must not take the next argument as its file
        description="Static dependency tracer for TTTv1 modules: which config keys, ModelArgs members, branches "
        "and ttnn ops depend on which root parameters. Never imports or runs the analysed code.",
        epilog="Without MODULE the built-in tttv1/tt/mlp.py + tttv1/tt/model_config.py is analysed. "
        "Outputs: --FORMAT writes to stdout, --FORMAT=FILE to FILE (the flag never takes the next argument).",
    )
    p.add_argument(
        "module",
        nargs="?",
        metavar="MODULE[:CLASS]",
        help="the TTTv1 module, a file or a dotted module, and its class (e.g. mlp.py, tttv1.tt.mlp:MLP; default "
        "class: the main class)",
    )
    p.add_argument("config", nargs="?", help="its model_config.py (default: model_config.py next to MODULE)")
    p.add_argument("extra", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--class", dest="class_name", help=argparse.SUPPRESS)  # the old spelling of MODULE:CLASS
    p.add_argument(
        "--entry",
        default=None,
        metavar="METHOD",
        help="per-call entry method (default: forward, else __call__)",
    )
    for fmt in FORMATS:
        add_output(p, f"--{fmt}", f"{fmt} output to stdout (no FILE, or -), or to FILE")
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
    p.add_argument(
        "--force", action="store_true", help="overwrite existing output files trace-deps did not write"
    )
    p.add_argument("--strict", action="store_true", help="exit 1 if anything was not understood")
    p.add_argument(
        "--report",
        action="store_true",
        help="print the whole terminal report when the outputs go to files (they print its summary alone; without "
        "an output the report is the default)",
    )
    p.add_argument("--progress", action="store_true", help="print progress lines to stderr")
    add_common(p, version=f"JSON schema {SCHEMA_VERSION}", width=True, quiet_help="no report and no progress")
    return p


def normalise_argv(argv: list[str]) -> list[str]:
    """A bare ``--FORMAT`` means stdout: spelled ``--FORMAT=-`` so argparse never gives it the next argument."""
    return _normalise(argv, [f"--{fmt}" for fmt in FORMATS])


def _bare_flags(argv: list[str]) -> dict[str, str]:
    """``{word: flag}`` for each bare output flag followed by a word: the word is then a positional, and the
    hint for it names the flag that was meant (``--html out.html`` → ``--html=out.html``)."""
    flags = {f"--{fmt}" for fmt in FORMATS}
    return {b: a for a, b in itertools.pairwise(argv) if a in flags and not b.startswith("-")}


def _console(width: int | None = None):
    """The terminal report's console (rich is imported only for the report and --why)."""
    from rich.console import Console

    # user text (keys, file names, source excerpts) is never markup or :emoji: codes
    return Console(width=width, highlight=False, soft_wrap=False, markup=False, emoji=False)


class _Stderr:
    """Messages on stderr: plain lines (no rich needed for them)."""

    @staticmethod
    def print(text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def console(*, exiting: bool = True) -> int:
    """The ``trace-deps`` command (console script and ``python -m``): one run of :func:`main` on ``sys.argv``.

    ``exiting=True`` (what the console script calls) is for a process that exits right after the run, so nothing
    is spent on memory the exit gives back anyway:

    - the C allocator keeps the memory it frees for the next allocations (:func:`keep_freed_memory`);
    - the cyclic garbage collector is off for the run (``analyze()`` pauses it anyway; with it on, its first
      collections after the analysis walked every object the analysis had allocated, for nothing to free);
    - the analysis' engine, the analysis and its views are kept (``api.retained``, a list in a reference cycle)
      instead of being freed one by one when ``main`` returns (~10 ms);
    - then every object still alive is moved out of the collector's reach (``gc.freeze``), so the interpreter's
      last collection does not walk them either, and the kept cycle is never freed before the process ends.

    Together ~10 % of a ``--json=OUT`` run on tt-metal's attention.py (docs/performance.md). Nothing is written
    after ``main`` returns, and exit handlers (``atexit``) still run.

    ``exiting=False`` is for a caller that goes on running (a test, an embedding program): the same run, and the
    process is left as it was found: no ``mallopt``, no ``gc.freeze``, the collector untouched, nothing kept."""
    if not exiting:
        return main()
    from . import api

    keep_freed_memory()
    kept: list = []
    kept.append(kept)  # a cycle: freed only by a collection, and the collector never sees it again (freeze)
    api.retained = kept
    gc.disable()
    try:
        return main()
    finally:
        gc.freeze()


#: glibc's mallopt parameters (malloc.h) and the values the trace-deps process sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEPT_FREE, _MMAP_FROM = 256 << 20, 32 << 20


def keep_freed_memory() -> bool:
    """Have glibc's allocator keep what the process frees for its next allocations instead of giving it back to the
    system at once, and serve blocks below 32 MiB from that kept memory instead of a fresh mapping each. By default
    every block of 128 KiB or more (the parser's buffers, each JSON field's text, the output's bytes) is a new
    mapping, and memory freed at the top of the heap is returned: each page touched again is a page fault, which
    this machine pays in kernel time (docs/performance.md: ~1,900 of a run's ~10,800 faults on tt-metal's
    attention.py). Only the ``trace-deps`` process does this (``console()``, which exits right after its run; never
    ``console(exiting=False)``). True when set; False where the C library has no ``mallopt`` (not Linux, or a libc
    without it): nothing changes there."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, _KEPT_FREE)) and bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_FROM))


def parse_args(argv) -> argparse.Namespace:
    """The command line as ``main`` reads it (argparse only: nothing is read or run)."""
    argv = [str(a) for a in argv]
    args = parser().parse_intermixed_args(normalise_argv(argv))
    args.bare_flags = _bare_flags(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    err = _Stderr()
    written: list[Path] = []  # files already in place, named if Ctrl-C comes after them
    try:
        with deeper_recursion():  # room for ast walks over very long expressions (tools/_recursion.py)
            return _run(args, err, written)
    except (TraceError, OutputError) as exc:
        say("trace-deps", str(exc))
        return EXIT_USAGE
    except RecursionError:
        say("trace-deps", too_deep("analyse"))
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback; files are whole or untouched
        if written and not getattr(exc, "written", None):
            exc = WriteInterrupted(written)
        err.print(interrupted("trace-deps", exc))
        return EXIT_INTERRUPTED
    except OSError as exc:  # an I/O error anywhere (e.g. the terminal report on a closed stdout): exit 2
        where = f" ({exc.filename})" if exc.filename else ""
        say("trace-deps", f"I/O error{where}: {exc.strerror or exc}")
        return EXIT_USAGE
    except Exception as exc:  # never show a traceback unless asked
        return internal_error("trace-deps", exc, args.debug)


def _inputs(args: argparse.Namespace) -> tuple[Path, Path | None]:
    if args.extra:
        flag = args.bare_flags.get(args.extra[0], "--json")
        raise UsageError(
            f"too many positional arguments: {' '.join(args.extra)} (expected MODULE [CONFIG]); "
            f"an output file is given as --FORMAT=FILE, e.g. {flag}={args.extra[0]}"
        )
    if args.module is None:
        module, config = builtin_paths()
        _class(args, None, None)
        return module, (config if config.is_file() else None)
    try:
        text, name = split_target(args.module)
    except ValueError as exc:
        raise UsageError(f"MODULE {exc}") from None
    _class(args, text, name)
    module = module_file(text)
    config = Path(args.config) if args.config else None
    if args.module in args.bare_flags and not names_module(args.module) and not module.is_file():
        flag = args.bare_flags[args.module]
        raise UsageError(
            f"MODULE {args.module!r} is not a Python file; an output file is given as --FORMAT=FILE, "
            f"e.g. {flag}={args.module}"
        )
    if config is not None and config.suffix != ".py" and not config.is_file():
        flag = args.bare_flags.get(args.config, "--json")
        raise UsageError(
            f"CONFIG {args.config!r} is not a Python file; an output file is given as --FORMAT=FILE, "
            f"e.g. {flag}={args.config}"
        )
    return module, config


def _class(args: argparse.Namespace, module: str | None, name: str | None) -> None:
    """The class named by MODULE:CLASS, or by the old ``--class NAME`` (still read, with a warning)."""
    if args.class_name is not None:
        if name is not None and name != args.class_name:
            raise UsageError(
                f"MODULE names class {name} and --class {args.class_name}; name it once, as MODULE:CLASS"
            )
        say(
            "trace-deps",
            f"'--class {args.class_name}' is the old spelling; write {module or 'MODULE'}:{args.class_name}",
            "warning",
        )
    else:
        args.class_name = name


def _targets(args: argparse.Namespace, inputs: list[Path]) -> dict[str, str]:
    """Check every output before anything is analysed: at most one on stdout, and every file output through the
    shared policy (not an input, no two on one file, an existing file only if trace-deps wrote it or --force). A
    large existing file that opens like JSON is judged by the second check, after the analysis (``check(early=)``):
    in a rerun it then holds exactly the new text and is not parsed at all."""
    targets = {fmt: getattr(args, fmt) for fmt in FORMATS if getattr(args, fmt) is not None}
    for fmt, target in targets.items():
        if target != STDOUT:
            file_argument(f"--{fmt}", target)
    on_stdout = [f"--{fmt}" for fmt, target in targets.items() if target == STDOUT]
    if args.why and on_stdout and on_stdout != ["--json"]:
        on_stdout.append("--why")
    if args.report and on_stdout:  # the report goes to stdout too
        on_stdout.append("--report")
    if len(on_stdout) > 1:
        raise UsageError(
            f"only one output can go to stdout, got {' '.join(on_stdout)}; give the others as --FORMAT=FILE"
        )
    check(_outputs(targets, {}), inputs, args.force, early=True)
    return targets


def _outputs(targets: dict[str, str], texts: dict[str, str]) -> list[Output]:
    return [
        Output(Path(target), texts.get(fmt, ""), KINDS[fmt], f"{fmt} output")
        for fmt, target in targets.items()
        if target != STDOUT
    ]


def _run(args: argparse.Namespace, err, written: list[Path]) -> int:
    module, config = _inputs(args)
    targets = _targets(args, [module] + ([config] if config else []))
    show_progress = args.progress and not args.quiet
    # on a terminal, long runs (huge config modules) report progress by themselves after a second
    auto_progress = not args.quiet and sys.stderr.isatty()
    started = time.perf_counter()

    def progress(message: str) -> None:
        elapsed = time.perf_counter() - started
        if show_progress or (auto_progress and elapsed > 1.0):
            err.print(f"[trace-deps +{elapsed:.2f}s] {message}")

    if show_progress:
        progress(f"parsing {module}" + (f" and {config}" if config else ""))
    from .api import analyze

    analysis = analyze(
        module,
        config,
        class_name=args.class_name,
        entry=args.entry,
        follow_helpers=not args.no_helpers,
        progress=progress,
    )
    progress(f"analysed {analysis.stats.get('lines')} lines in {analysis.seconds}s")
    if analysis.class_choice and not args.quiet:
        say("trace-deps", analysis.class_choice, "note")
    if config is not None and not args.quiet and same_file(config, module):
        say("trace-deps", config_is_module(config), "note")
    view = analysis.restrict(mode=args.mode, topology=args.topology)
    graph_view = view
    if args.focus:
        graph_view = view.focus(args.focus)
        if graph_view.dependencies.number_of_nodes() == 0:
            raise UsageError(f"--focus {args.focus!r} matches nothing in the graph")
    width = table_width(args.width)
    if args.why:
        from .query import resolve_name

        if not resolve_name(view, args.why):  # the same line with and without --json, before any output
            raise UsageError(
                f"--why {args.why!r}: nothing by that name in the graph (try a key, args.<attr>, an op, file:line)"
            )
    why_json = bool(args.why) and targets.get("json") == STDOUT
    texts = {
        fmt: _render(
            fmt, view if fmt == "json" and not args.focus else graph_view, args.why if why_json else None
        )
        for fmt in targets
    }
    outputs = _outputs(targets, texts)
    from . import api

    if api.retained is not None:  # the trace-deps command: not freed before the process exits (see console)
        api.retained.append((analysis, view, graph_view))
    # checked again with every file the analysis read (the config found next to the module, helper files)
    check(outputs, [module, *([config] if config else []), *analysis.input_paths], args.force)
    for fmt, target in targets.items():
        if target == STDOUT:
            _stdout(texts[fmt])
    written.extend(write(outputs))
    for output in outputs if not args.quiet else []:
        err.print(f"wrote {output.path} ({output.label.removesuffix(' output')})")
    if args.why and not why_json:
        from .report import render_why

        render_why(view, args.why, _console(width))
    elif (args.report or args.verbose or not targets) and STDOUT not in targets.values() and not args.quiet:
        # the report is the output when no other is chosen: with --FORMAT=FILE only if asked (--report or -v), so
        # that writing JSON or a drawing never loads rich nor spends time rendering a report nobody asked for; it
        # opens with its summary (the answer first)
        from .report import render

        render(view, _console(width), verbose=args.verbose)
    elif STDOUT not in targets.values() and not args.quiet:  # files written: the answer alone, as plain lines
        from .summary import summary_lines

        _stdout("".join(line + "\n" for line in summary_lines(view)))
    if args.strict and (analysis.unknowns() or analysis.skipped):
        say(
            "trace-deps",
            "--strict: some constructs were not understood (listed in the report, and in the JSON's unknowns and skipped)",
        )
        return EXIT_ATTENTION
    return EXIT_OK


def _render(fmt: str, analysis, why: str | None) -> str:
    if fmt == "json":  # the drawing writers (export.py) and what they import are not needed for JSON
        if why is None:
            return analysis.to_json()
        from .serial import dumps

        data = analysis.to_dict()
        data["why"] = why_dict(analysis, why)
        return dumps(data)
    from .export import WRITERS

    return WRITERS[fmt](analysis)


def why_dict(analysis, name: str) -> dict:
    """``--why NAME`` as JSON: the nodes NAME resolved to and one path per root (each hop: node, label, loc)."""
    from .query import resolve_name

    targets = resolve_name(analysis, name)
    paths = analysis.why(name) if targets else []
    return {
        "name": name,
        "targets": targets,
        "paths": [[{"node": h.node, "label": h.label, "loc": h.loc} for h in path] for path in paths],
    }


def _stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to do
        pass
    except OSError as exc:
        raise UsageError(f"cannot write to stdout: {exc.strerror or exc}") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console())
