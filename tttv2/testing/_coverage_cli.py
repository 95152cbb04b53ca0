"""``tttv2-coverage --store cases.sqlite --tests tests/modules``: run a test suite with every building block's
forwards recorded, then compare the parameter values the tests ran with the cases collect-cases recorded from
real TTTv1 runs, and print the untested values and combinations (``--json PATH`` also writes them).

Exit status: 0 when the report was made, 1 when tests failed (the report still counts what ran) or, with
``--fail-on-gaps``, when a recorded combination was never tested; 2 for bad arguments or an unreadable store
(a damaged row included: every row is verified before the tests run); 3 for a bug in the tool (one line;
``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console

from tttv2.testing._coverage import COVERAGE, CoverageRecorder, coverage_report

JSON_SCHEMA = "tttv2-coverage"  # the "schema" key of --json files: how a later run recognises its own


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tttv2-coverage",
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
    p.add_argument(
        "--json",
        dest="json_path",
        help="also write the report as JSON (an existing file only if tttv2-coverage wrote it, or with --force)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --json: replace an existing file tttv2-coverage did not write",
    )
    p.add_argument(
        "--fail-on-gaps", action="store_true", help="exit 1 when a recorded combination was never tested"
    )
    p.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
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
    print(f"tttv2-coverage: {message}", file=sys.stderr)


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
    if args.json_path is not None:
        from tttv2_tools._output import OutputError, check

        try:
            check([_json_output(args, "")], [Path(args.store), *map(Path, args.tests)], args.force)
        except OutputError as exc:
            _error(str(exc))
            return False
    missing = [t for t in args.tests if not os.path.exists(t.split("::")[0])]
    if missing:
        _error(f"--tests: no such file or folder: {', '.join(missing)}")
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return _main(args)
    except Exception as exc:  # a bug: one line, never a traceback unless asked
        if args.debug:
            import traceback

            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc} (run with --debug)")
        return 3


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
    status = pytest.main(pytest_args, plugins=[_RecordingPlugin(recorder)])
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        _error(f"pytest stopped with {pytest.ExitCode(status).name}; no report")
        return 2
    selected = set(args.module or COVERAGE)
    records = [r for r in recorder.records if r.module in selected]
    report = coverage_report(records, args.store, modules=selected)
    report.print(Console())
    if args.json_path is not None:
        from tttv2_tools._output import OutputError, write

        try:
            write(
                [_json_output(args, json.dumps({"schema": JSON_SCHEMA, **report.to_dict()}, indent=2) + "\n")]
            )
        except OutputError as exc:
            _error(str(exc))
            return 2
    if status == pytest.ExitCode.TESTS_FAILED:
        _error("some tests failed; the report counts the configurations that ran")
        return 1
    return 1 if args.fail_on_gaps and report.gaps else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
