"""Command line: ``tttv2-refactor MODULE[:CLASS] [CONFIG.py] --out DIR [options]`` (MODULE a file or a dotted module).

Exit codes (the toolkit's one table, ``tools/_cli.py``): **0** done (files written, or already up to date;
``--check``: nothing would change); **1** something needs a look: a spot could not be transformed (nothing
written, or written with markers under ``--partial``), or ``--check`` found files that would change; **2** bad
input, usage or a refusal (a missing or unparsable file, no suitable class, an output that is a folder or an
input, an existing file this tool did not write or that was edited since: a module or a ``--report`` / ``--json``
file, ``--force`` replaces it; an existing generated module of another class or source file, bad options);
**3** internal error; **130** interrupted (Ctrl-C, one line). Nothing ever ends in a traceback without
``--debug``.

Reports are ``--report[=FILE]`` (Markdown) and ``--json[=FILE]``: stdout without FILE or with ``-``. The old
spelling with a separate FILE (``--json out.json``) still works when FILE is not a MODULE (a ``.py`` file, ``X:CLASS``, a dotted module that exists), with a warning.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tttv2_tools._cli import (
    EXIT_ATTENTION,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    STDOUT,
    ArgumentParser,
    HelpFormatter,
    add_common,
    add_output,
    config_is_module,
    internal_error,
    missing_file,
    module_file,
    names_module,
    normalise_argv,
    say,
    split_target,
)
from tttv2_tools._output import (
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
from .report import JSON_SCHEMA, KINDS

TOOL = "tttv2-refactor"
REPORT_FLAGS = ("--report", "--json")
__all__ = ["EXIT_ATTENTION", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "main", "parser"]


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog=TOOL,
        allow_abbrev=False,
        formatter_class=HelpFormatter,
        description="Turn a TTTv1 module into TTTv2 <name>_1d.py / <name>_2d.py modules (flat decode / prefill "
        "paths, static choices made at construction, explicit config, from_model_args), with tests that prove "
        "the outputs unchanged.",
        epilog="Exit codes: 0 done, 1 not everything transformed / --check found changes, 2 bad input, usage or "
        "a refusal to replace a file (--force), 3 internal error, 130 interrupted.",
    )
    p.add_argument(
        "module",
        metavar="MODULE[:CLASS]",
        help="the TTTv1 module, a file or a dotted module, and the class to transform (e.g. tttv1/tt/mlp.py, "
        "tttv1.tt.mlp:MLP; default class: the main class, see docs/trace_deps.md)",
    )
    p.add_argument("config", nargs="?", help="its model_config.py (default: model_config.py next to MODULE)")
    p.add_argument("--class", dest="class_name", help=argparse.SUPPRESS)  # the old spelling of MODULE:CLASS
    p.add_argument(
        "--topology",
        choices=("2d",),
        help="2d: the module runs only on a galaxy, generate its 2D module alone (default: from the code, "
        "docs/refactor.md)",
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
    add_output(report, "--report", "the report as Markdown, to stdout (no FILE, or -) or to FILE")
    add_output(report, "--json", "the report as JSON, to stdout (no FILE, or -) or to FILE")
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
        "--no-verify",
        action="store_true",
        help="with --tests-out: do not run the generated equivalence tests after writing (shadow verification)",
    )
    p.add_argument(
        "--formatter",
        metavar="CMD",
        help='pipe each output through CMD (stdin to stdout), e.g. "ruff format -"',
    )
    add_common(p, version=f"report schema {JSON_SCHEMA}", quiet_help="no summary on stderr")
    return p


def _old_spelling(flag: str, word: str) -> None:
    say(
        TOOL,
        f"'{flag} {word}' is the old spelling; write {flag}={word} (a bare {flag} means stdout)",
        "warning",
    )


def _progress(enabled: bool):
    """A rich status line on stderr for the steps of a run (only on a terminal)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from rich.console import Console

    return Console(stderr=True).status("tttv2-refactor: analysing")


def parse_args(argv) -> argparse.Namespace:
    """The command line as ``main`` reads it (argparse only: nothing is read or run). A bare --json / --report
    means stdout; a next word that is not a MODULE[:CLASS] or a .py file (MODULE and CONFIG are) is the old
    spelling's separate FILE, still accepted with a warning."""
    argv = [str(a) for a in argv]
    return parser().parse_args(
        normalise_argv(argv, REPORT_FLAGS, lambda word: not names_module(word), _old_spelling)
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        with deeper_recursion():  # libcst's visitors recurse per operand of a long expression
            return _main(args)
    except RecursionError:
        say(TOOL, too_deep("refactor"))
        return EXIT_USAGE
    except UsageError as exc:
        say(TOOL, str(exc))
        return EXIT_USAGE
    except RefactorError as exc:
        say(TOOL, str(exc))
        return EXIT_ATTENTION
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback; files are whole or untouched
        print(interrupted(TOOL, exc), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: one line, never a bare traceback unless asked
        return internal_error(TOOL, exc, args.debug)


def _main(args) -> int:
    from .run import check_python, plan_run

    module, class_name = _target(args.module, args.class_name)
    config = Path(args.config) if args.config else None
    for flag, path in (("--out", args.out), ("--tests-out", args.tests_out)):
        if path is not None and path.exists() and not path.is_dir():
            raise UsageError(f"{flag}: {path} is a file, not a folder")
    if args.name is not None:
        _check_stem(args.name)
    report_paths = {}
    for flag, text in (("--report", args.report), ("--json", args.json)):
        if text == STDOUT:
            if args.diff:
                raise UsageError(f"only one output can go to stdout, got --diff and {flag}; give {flag}=FILE")
            report_paths[flag] = None
        elif text is not None:
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
            class_name=class_name,
            name=args.name,
            formatter=args.formatter,
            cases_store=args.cases,
            partial=args.partial,
            topology=args.topology,
        )
    finally:
        if status is not None:
            status.stop()
    check_python(run.planned)
    # which class among several, and a 2D module alone: in the report always, on stderr unless --quiet
    choice = run.result.inputs.class_choice
    run.report.notes[:0] = [choice] if choice else []
    for note in ([choice] if choice else []) + run.result.notes if not args.quiet else []:
        print(f"tttv2-refactor: note: {note}", file=sys.stderr)
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
    on_stdout = []
    for flag, text, kind in (
        ("--report", run.report.to_markdown, "markdown"),
        ("--json", run.report.to_json, "json"),
    ):
        if flag not in report_paths:
            continue
        if report_paths[flag] is None:
            on_stdout.append(text)
        else:
            reports.append(Output(report_paths[flag], text(), KINDS[kind], flag, True))
    try:  # the reports obey the shared policy: checked before any file of the run is written
        check(reports, inputs, args.force)
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    folders = {parent for item in run.planned for parent in Path(item.path).resolve().parents}
    for report in reports:
        for item in run.planned:
            if same_file(report.path, item.path):
                raise UsageError(f"{report.label} and a generated file would both write {item.path}")
        # a folder the run creates: refused before anything is written
        if Path(report.path).resolve() in folders:
            raise UsageError(
                f"{report.label} {report.path}: is a folder the generated files go to; expected a file"
            )
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
        if refusals:  # a refusal to replace a user's file: exit 2, as for the reports (docs/cli.md)
            for line in refusals:
                say(TOOL, line)
            return EXIT_USAGE
        if gaps and not args.partial:
            _print_gaps(gaps)
            print("tttv2-refactor: nothing written (use --partial to write with markers)", file=sys.stderr)
            _write_reports(reports, on_stdout)
            return EXIT_ATTENTION
        previous = {item.path: item.current() for item in run.planned}
        previous[_NEW_FOLDERS] = _missing_folders(item.path for item in run.planned)
        written = write_all(run.planned)
        try:
            proof_gaps = _shadow_verify(args, run, module)
        except KeyboardInterrupt:  # the run did not finish: its files go back to what they were
            _restore(previous, written)
            raise
        for report in reports:  # the reports say what the verification found
            report.text = {"--report": run.report.to_markdown, "--json": run.report.to_json}[report.label]()
        if proof_gaps:
            _print_gaps(proof_gaps, "verify failed")
            if not args.partial:
                _restore(previous, written)
                why = (
                    "a generated module differs from TTTv1"
                    if any(_compared(gap) for gap in proof_gaps)
                    else "the generated tests could not run, so nothing was compared"
                )
                print(
                    f"tttv2-refactor: nothing written: {why} (use --partial to keep the files)",
                    file=sys.stderr,
                )
                _write_reports(reports, on_stdout)
                return EXIT_ATTENTION
        try:  # before "wrote": a report that cannot be written (a read-only folder) leaves the run unwritten
            _write_reports(reports, on_stdout)
        except UsageError as exc:
            if not written:
                raise
            _restore(previous, written)
            raise UsageError(f"{exc}; nothing written (the generated files were put back)") from None
        reports, on_stdout = [], []  # written
        if not args.quiet:
            for path in written:
                print(f"tttv2-refactor: wrote {path}", file=sys.stderr)
            if not written:
                print("tttv2-refactor: everything up to date", file=sys.stderr)
        code = EXIT_ATTENTION if gaps or proof_gaps else EXIT_OK
        if gaps:
            _print_gaps(gaps)
    _write_reports(reports, on_stdout)
    return code


def _target(word: str, old_class: str | None) -> tuple[Path, str | None]:
    """MODULE[:CLASS] (a file or a dotted module, docs/cli.md); the old ``--class NAME`` still names the class,
    with a warning."""
    try:
        text, name = split_target(word)
    except ValueError as exc:
        raise UsageError(f"MODULE {exc}") from None
    if old_class is not None:
        if name is not None and name != old_class:
            raise UsageError(
                f"MODULE names class {name} and --class {old_class}; name it once, as MODULE:CLASS"
            )
        say(TOOL, f"'--class {old_class}' is the old spelling; write {text}:{old_class}", "warning")
        name = old_class
    return module_file(text), name


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
        notes.append(config_is_module(config))
    return notes


def _check_store(store: Path, tests_out: Path | None) -> None:
    """``--cases``: a readable collect-cases store, for generated tests (checked before any work)."""
    from tttv2_tools.collect_cases import CaseStore, CollectCasesError

    if tests_out is None:
        raise UsageError("--cases: the recorded cases parametrise generated tests; give --tests-out DIR too")
    if not store.exists():
        raise UsageError(missing_file(store, "--cases"))
    if not store.is_file():
        raise UsageError(f"--cases {store}: is not a file (expected a collect-cases store)")
    try:
        with CaseStore(store):
            pass
    except CollectCasesError as exc:
        raise UsageError(f"--cases: {exc}") from None


def _write_reports(reports: list[Output], on_stdout: list) -> None:
    try:
        write(reports)
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    for text in on_stdout:  # --json / --report with no FILE, or -
        sys.stdout.write(text())


def _print_gaps(gaps, label: str = "not transformed") -> None:
    for gap in gaps:
        print(f"tttv2-refactor: {label}: {gap.describe()}", file=sys.stderr)


def _shadow_verify(args, run, module: Path) -> list:
    """With ``--tests-out`` (and no ``--no-verify``): run the written equivalence and topology tests
    (:mod:`proof`); the gaps of the cases that differ or raise. Summary and notes on stderr, in the report."""
    from .helpers import dotted_module_of, first_party_folder
    from .proof import plugins_for, verify_tests

    tests = [
        item.path for item in run.planned if args.tests_out is not None and item.path.parent == args.tests_out
    ]
    if not tests or args.no_verify:
        return []
    modules = [item.path for item in run.planned if item.path.parent == args.out]
    proof = verify_tests(
        tests,
        modules,
        plugins=plugins_for(dotted_module_of(module)),
        roots=[first_party_folder(module)],
    )
    summary = proof.summary()
    run.report.notes += [summary, *proof.notes()]
    run.report.gaps += [{"loc": g.loc, "what": g.what, "reason": g.reason} for g in proof.gaps]
    for note in ([] if args.quiet else [summary]) + proof.notes():  # a case not run is said even with --quiet
        print(f"tttv2-refactor: note: {note}", file=sys.stderr)
    return proof.gaps


_NEW_FOLDERS = "folders this run creates"


def _compared(gap) -> bool:
    """Whether a verification gap is a case that ran and differed (not a test file that could not be collected,
    nor a run that did not start or was stopped)."""
    return gap.reason.startswith("case ") and not gap.loc.endswith("::collecting")


def _missing_folders(paths) -> list[Path]:
    """The folders above ``paths`` that do not exist yet (writing creates them), deepest first."""
    missing: set[Path] = set()
    for path in paths:
        folder = Path(path).absolute().parent
        while not folder.exists():
            missing.add(folder)
            folder = folder.parent
    return sorted(missing, key=lambda f: len(f.parts), reverse=True)


def _restore(previous: dict, written: list[Path]) -> None:
    """Put back what the files written by this run held before it (a new file is removed, and so is a folder the
    run created once it is empty again)."""
    from tttv2_tools._output import write_text

    for path in written:
        old = previous.get(path)
        if old is None:
            path.unlink(missing_ok=True)
        else:
            write_text(path, old, "a restored output")
    for folder in previous.get(_NEW_FOLDERS, []):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
