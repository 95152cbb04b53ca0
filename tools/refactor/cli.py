"""Command line: ``tttv2-refactor MODULE.py [CONFIG.py] --out DIR [options]``.

Exit codes: **0** done (files written, or already up to date; ``--check``: nothing would change); **1** something
needs a look: a spot could not be transformed (nothing written, or written with markers under ``--partial``),
``--check`` found files that would change, or an existing generated module may not be overwritten (not ours, or
edited since: ``--force``); **2** bad input or usage (a missing or unparsable file, no suitable class, an output
that is a folder or an input, a ``--report`` / ``--json`` file that exists and is not a report this tool wrote
(``--force``), an existing generated module of another class or source file (``--force``), bad options);
**3** internal error; **130** interrupted (Ctrl-C, one line). Nothing ever ends in a traceback without
``--debug``.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from tttv2_tools._output import (
    INTERRUPTED,
    OnlyOnce,
    Output,
    OutputError,
    check,
    file_argument,
    interrupted,
    same_file,
    write,
)
from tttv2_tools._recursion import deeper_recursion, too_deep

from .cases import case_notes
from .errors import RefactorError, UsageError
from .files import check_sources, check_targets, write_all
from .report import KINDS

EXIT_OK, EXIT_ATTENTION, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tttv2-refactor",
        allow_abbrev=False,
        description="Turn a TTTv1 module into TTTv2 <name>_1d.py / <name>_2d.py modules (flat decode / prefill "
        "paths, static choices made at construction, explicit config, from_model_args), with tests that prove "
        "the outputs unchanged.",
        epilog="Exit codes: 0 done, 1 not everything transformed / --check found changes / refused to overwrite, "
        "2 bad input or usage, 3 internal error.",
    )
    p.add_argument("module", help="the TTTv1 module (e.g. tttv1/tt/mlp.py)")
    p.add_argument("config", nargs="?", help="its model_config.py (default: model_config.py next to MODULE)")
    p.add_argument(
        "--class",
        dest="class_name",
        metavar="NAME",
        help="the class to transform (default: the first with forward)",
    )
    p.add_argument(
        "--out",
        required=True,
        type=Path,
        action=OnlyOnce,
        metavar="DIR",
        help="folder of the generated modules",
    )
    p.add_argument(
        "--tests-out", type=Path, action=OnlyOnce, metavar="DIR", help="folder of the generated tests"
    )
    p.add_argument(
        "--name",
        action=OnlyOnce,
        help="file stem of the outputs (default: MODULE's stem): NAME_1d.py, NAME_2d.py",
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="write the files (the default)")
    action.add_argument("--diff", action="store_true", help="print a unified diff, write nothing")
    action.add_argument("--check", action="store_true", help="exit 1 when files would change, write nothing")
    report = p.add_mutually_exclusive_group()
    report.add_argument("--report", action=OnlyOnce, metavar="FILE.md", help="write the report as Markdown")
    report.add_argument("--json", action=OnlyOnce, metavar="FILE", help="write the report as JSON")
    p.add_argument(
        "--cases",
        type=Path,
        metavar="STORE",
        help="parametrise the equivalence tests by a collect-cases store",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite files (modules, reports) not written by the tool, or edited since",
    )
    p.add_argument(
        "--partial", action="store_true", help="write even when a spot was not transformed (marked); exits 1"
    )
    p.add_argument(
        "--formatter",
        metavar="CMD",
        help='pipe each output through CMD (stdin to stdout), e.g. "ruff format -"',
    )
    p.add_argument("--quiet", action="store_true", help="no summary on stderr")
    p.add_argument("--debug", action="store_true", help="tracebacks for internal errors")
    return p


def _progress(enabled: bool):
    """A rich status line on stderr for the steps of a run (only on a terminal)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from rich.console import Console

    return Console(stderr=True).status("tttv2-refactor: analysing")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        with deeper_recursion():  # libcst's visitors recurse per operand of a long expression
            return _main(args)
    except RecursionError:
        print(f"tttv2-refactor: {too_deep('refactor')}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"tttv2-refactor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RefactorError as exc:
        print(f"tttv2-refactor: {exc}", file=sys.stderr)
        return EXIT_ATTENTION
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback; files are whole or untouched
        print(interrupted("tttv2-refactor", exc), file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # a bug: one line, never a bare traceback unless asked
        if args.debug:
            traceback.print_exc()
        print(
            f"tttv2-refactor: internal error: {type(exc).__name__}: {exc} (run with --debug)", file=sys.stderr
        )
        return EXIT_INTERNAL


def _main(args) -> int:
    from .run import check_python, plan_run

    module = Path(args.module)
    config = Path(args.config) if args.config else None
    for flag, path in (("--out", args.out), ("--tests-out", args.tests_out)):
        if path is not None and path.exists() and not path.is_dir():
            raise UsageError(f"{flag}: {path} is a file, not a folder")
    if args.name is not None:
        _check_stem(args.name)
    report_paths = {}
    for flag, text in (("--report", args.report), ("--json", args.json)):
        if text is not None:
            try:
                report_paths[flag] = file_argument(flag, text)
            except OutputError as exc:
                raise UsageError(str(exc)) from None
    if args.cases is not None:
        _check_store(args.cases, args.tests_out)
    status = _progress(not args.quiet)
    if status is not None:
        status.start()
    try:
        run = plan_run(
            module,
            config,
            out=args.out,
            tests_out=args.tests_out,
            class_name=args.class_name,
            name=args.name,
            formatter=args.formatter,
            cases_store=args.cases,
            partial=args.partial,
        )
    finally:
        if status is not None:
            status.stop()
    check_python(run.planned)
    notes = config_notes(run.result.inputs.analysis, module, config)
    if args.cases is not None:
        modes = tuple(dict.fromkeys(m for g in run.result.modules for m in g.plan.modes))
        notes += case_notes(args.cases, module, run.result.inputs.class_name, modes)
    for note in notes:
        print(f"tttv2-refactor: note: {note}", file=sys.stderr)
        run.report.notes.append(note)
    # every file the run read: the module, the config (given, or found next to the module), the helper files
    # the analysis followed and the --cases store; no output may land on one of them, even with --force
    inputs = [module, *([config] if config else []), *run.result.inputs.analysis.input_paths]
    inputs += [p.path for p in run.result.inputs.files.values()]
    inputs += [args.cases] if args.cases is not None else []
    refusals = check_targets(run.planned, inputs, args.force)
    gaps = run.gaps
    reports = []
    if "--report" in report_paths:
        reports.append(
            Output(report_paths["--report"], run.report.to_markdown(), KINDS["markdown"], "--report", True)
        )
    if "--json" in report_paths:
        reports.append(Output(report_paths["--json"], run.report.to_json(), KINDS["json"], "--json", True))
    try:  # the reports obey the shared policy: checked before any file of the run is written
        check(reports, inputs, args.force)
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    for report in reports:
        for item in run.planned:
            if same_file(report.path, item.path):
                raise UsageError(f"{report.label} and a generated file would both write {item.path}")
    if args.diff:
        for item in run.planned:
            text = item.diff()
            if text:
                sys.stdout.write(text)
        code = EXIT_ATTENTION if gaps else EXIT_OK
    elif args.check:
        stale = [item.path for item in run.planned if item.changed()]
        for path in stale:
            print(f"tttv2-refactor: would change {path}", file=sys.stderr)
        code = EXIT_ATTENTION if stale or gaps else EXIT_OK
    else:
        if not args.force:
            check_sources(run.planned)
        if refusals:
            for line in refusals:
                print(f"tttv2-refactor: {line}", file=sys.stderr)
            return EXIT_ATTENTION
        if gaps and not args.partial:
            _print_gaps(gaps)
            print("tttv2-refactor: nothing written (use --partial to write with markers)", file=sys.stderr)
            _write_reports(reports)
            return EXIT_ATTENTION
        written = write_all(run.planned)
        if not args.quiet:
            for path in written:
                print(f"tttv2-refactor: wrote {path}", file=sys.stderr)
            if not written:
                print("tttv2-refactor: everything up to date", file=sys.stderr)
        code = EXIT_ATTENTION if gaps else EXIT_OK
        if gaps:
            _print_gaps(gaps)
    _write_reports(reports)
    return code


def _check_stem(stem: str) -> None:
    """``--name`` is a file stem: the outputs are ``STEM_1d.py`` in ``--out`` (never somewhere else), and the
    generated tests are functions ``test_STEM_1d_...``: letters, digits and underscores only."""
    if not stem or not ("x" + stem).isidentifier():
        raise UsageError(
            f"--name: expected a file stem of letters, digits and underscores (the outputs are STEM_1d.py and "
            f"test functions test_STEM_1d_...; no folder, not empty), got {stem!r}"
        )


def config_notes(analysis, module: Path, config: Path | None) -> list[str]:
    """What trace-deps says about a missing or unusable config, said loudly: without ModelArgs, facts such as
    ``is_galaxy`` rest on attribute names alone."""
    notes = [
        f"{s.loc}: {s.reason}"
        for s in analysis.skipped
        if s.severity == "warning" and s.what in ("model_config.py", "ModelArgs")
    ]
    if config is not None and same_file(config, module):
        notes.append(
            f"CONFIG {config} is MODULE itself, so no config was analysed: ModelArgs members (is_galaxy, ...) "
            "are not resolved and galaxy facts rest on attribute names alone"
        )
    return notes


def _check_store(store: Path, tests_out: Path | None) -> None:
    """``--cases``: a readable collect-cases store, for generated tests (checked before any work)."""
    from tttv2_tools.collect_cases import CaseStore, CollectCasesError

    if tests_out is None:
        raise UsageError("--cases: the recorded cases parametrise generated tests; give --tests-out DIR too")
    if not store.is_file():
        raise UsageError(f"--cases: {store} is not a file (expected a collect-cases store)")
    try:
        with CaseStore(store):
            pass
    except CollectCasesError as exc:
        raise UsageError(f"--cases: {exc}") from None


def _write_reports(reports: list[Output]) -> None:
    try:
        write(reports)
    except OutputError as exc:
        raise UsageError(str(exc)) from None


def _print_gaps(gaps) -> None:
    for gap in gaps:
        print(f"tttv2-refactor: not transformed: {gap.describe()}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
