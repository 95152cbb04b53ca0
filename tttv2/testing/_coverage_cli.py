"""``tttv2-coverage --store cases.sqlite --tests tests/modules``: run a test suite with every building block's
forwards recorded, then compare the parameter values the tests ran with the cases collect-cases recorded from
real TTTv1 runs, and print the untested values and combinations (``--json=FILE`` also writes them; ``--json``
alone or ``--json=-`` prints the JSON on stdout instead of the tables, pytest's lines then going to stderr).

Exit status (the toolkit's one table, ``tools/_cli.py``): 0 when the report was made, 1 when tests failed (the
report still counts what ran) or, with ``--fail-on-gaps``, when a recorded combination was never tested; 2 for bad
arguments, an unreadable store (a damaged row included: every row is verified before the tests run) or a refusal
to replace a file; 3 for a bug in the tool (one line; ``--debug`` shows the traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from rich.console import Console

from tttv2.testing._coverage import COVERAGE, CoverageRecorder, coverage_report
from tttv2_tools._cli import (
    EXIT_INTERRUPTED,
    STDOUT,
    ArgumentParser,
    HelpFormatter,
    add_common,
    add_output,
    internal_error,
    missing_file,
    normalise_argv,
    say,
    table_width,
)

TOOL = "tttv2-coverage"

JSON_SCHEMA = "tttv2-coverage"  # the "schema" key of --json files: how a later run recognises its own


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog=TOOL,
        formatter_class=HelpFormatter,
        description="Building-block parameter coverage of a test suite against a collect-cases store.",
    )
    p.add_argument("--store", required=True, help="the collect-cases SQLite store (read only)")
    p.add_argument(
        "--tests", nargs="+", required=True, help="test files or folders to run (e.g. tests/modules)"
    )
    p.add_argument("-k", dest="keyword", help="pytest -k expression selecting the tests")
    p.add_argument(
        "--module",
        action="append",
        choices=sorted(COVERAGE),
        help="report only these block classes (repeatable)",
    )
    add_output(
        p,
        "--json",
        "the report as JSON: to stdout instead of the tables (no FILE, or -), or also to FILE (an existing file "
        "only if tttv2-coverage wrote it, or with --force)",
        dest="json_path",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --json: replace an existing file tttv2-coverage did not write",
    )
    p.add_argument(
        "--fail-on-gaps", action="store_true", help="exit 1 when a recorded combination was never tested"
    )
    add_common(
        p,
        version=f"JSON schema {JSON_SCHEMA}",
        width=True,
        quiet_help="no tables (the exit status and --json only)",
    )
    return p


class _RecordingPlugin:
    """A pytest plugin: the recorder is active from the first to the last test."""

    def __init__(self, recorder: CoverageRecorder) -> None:
        self.recorder = recorder

    def pytest_sessionstart(self, session) -> None:
        self.recorder.__enter__()

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self.recorder.__exit__(None, None, None)


def _error(message: str) -> None:
    say(TOOL, message)


def _json_output(args, text: str):
    """The ``--json`` file under the tools' one output policy (``tttv2_tools._output``): never onto an input, an
    existing file only when an earlier ``tttv2-coverage --json`` wrote it (its ``"schema"``) or with ``--force``."""
    from tttv2_tools._output import Output, json_schema

    return Output(
        Path(args.json_path), text, json_schema("tttv2-coverage", "json report", JSON_SCHEMA), "--json"
    )


def _check_arguments(args) -> bool:
    from tttv2_tools.collect_cases import CaseStore, StoreError

    try:
        with CaseStore(args.store) as store:
            store.cases()  # every row verified now, not after the whole test run
    except StoreError as exc:
        _error(f"--store: {exc}")
        return False
    if args.json_path not in (None, STDOUT):
        from tttv2_tools._output import OutputError, check

        try:
            check([_json_output(args, "")], [Path(args.store), *map(Path, args.tests)], args.force)
        except OutputError as exc:
            _error(str(exc))
            return False
    missing = [t for t in args.tests if not os.path.exists(t.split("::")[0])]
    if missing:
        _error(missing_file(", ".join(missing), "--tests") + " or folder")
        return False
    return True


def parse_args(argv) -> argparse.Namespace:
    """The command line as ``main`` reads it (argparse only). No positional argument: a word after --json is its
    FILE (the old spelling); alone or with -, stdout."""
    return parser().parse_args(normalise_argv([str(a) for a in argv], ["--json"], lambda word: True))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback (the JSON file is written last, atomically)
        print(f"{TOOL}: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: one line, never a traceback unless asked
        return internal_error(TOOL, exc, args.debug)


def _main(args) -> int:
    if not _check_arguments(args):
        return 2
    try:
        import pytest
    except ImportError:  # pragma: no cover - the test extra is installed wherever this runs in CI
        _error("needs pytest to run the tests (pip install 'tttv2[test]')")
        return 2
    recorder = CoverageRecorder()
    pytest_args = [
        *args.tests,
        "-q",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    to_stdout = args.json_path == STDOUT
    with contextlib.redirect_stdout(sys.stderr) if to_stdout else contextlib.nullcontext():
        status = pytest.main(pytest_args, plugins=[_RecordingPlugin(recorder)])
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        _error(f"pytest stopped with {pytest.ExitCode(status).name}; no report")
        return 2
    selected = set(args.module or COVERAGE)
    records = [r for r in recorder.records if r.module in selected]
    report = coverage_report(records, args.store, modules=selected)
    text = json.dumps({"schema": JSON_SCHEMA, **report.to_dict()}, indent=2) + "\n"
    if to_stdout:  # the JSON is the output: no tables around it
        sys.stdout.write(text)
    elif not args.quiet:
        report.print(Console(width=table_width(args.width)))
    if args.json_path not in (None, STDOUT):
        from tttv2_tools._output import OutputError, write

        try:
            write([_json_output(args, text)])
        except OutputError as exc:
            _error(str(exc))
            return 2
    if status == pytest.ExitCode.TESTS_FAILED:
        _error("some tests failed; the report counts the configurations that ran")
        return 1
    return 1 if args.fail_on_gaps and report.gaps else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
