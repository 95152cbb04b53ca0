"""pytest plugin: ``pytest --collect-cases=STORE --collect-target=module:Class [--collect-field NAME=EXPR]``.

Records the targets' calls while any test suite runs, into STORE, with ``pytest <args>`` as the first command.
Without ``--collect-cases`` it does nothing (the options are only registered).
"""

from __future__ import annotations

import shlex

import pytest

_RECORDER_KEY = pytest.StashKey()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("collect-cases", "record module configurations (tttv2_tools.collect_cases)")
    group.addoption("--collect-cases", metavar="STORE", default=None, help="record into this case store")
    group.addoption(
        "--collect-target",
        metavar="MODULE[:CLASS]",
        action="append",
        default=[],
        help="class whose calls are recorded (repeatable)",
    )
    group.addoption(
        "--collect-field",
        metavar="NAME=EXPR",
        action="append",
        default=[],
        help="extra field evaluated on every call (repeatable)",
    )


def pytest_configure(config) -> None:
    store = config.getoption("--collect-cases")
    targets = config.getoption("--collect-target")
    if store is None:
        if targets:
            raise pytest.UsageError("--collect-target: needs --collect-cases=STORE")
        return
    from .errors import CollectCasesError
    from .fields import parse_user_field
    from .recorder import Recorder
    from .targets import parse_target

    if not targets:
        raise pytest.UsageError("--collect-cases: needs at least one --collect-target=module:Class")
    try:
        recorder = Recorder(
            store,
            [parse_target(t) for t in targets],
            [parse_user_field(f) for f in config.getoption("--collect-field")],
            command=shlex.join(["pytest", *config.invocation_params.args]),
        )
    except CollectCasesError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        recorder.install()
        recorder.import_targets()
    except CollectCasesError as exc:
        recorder.close()
        raise pytest.UsageError(str(exc)) from None
    config.stash[_RECORDER_KEY] = recorder


def pytest_unconfigure(config) -> None:
    recorder = config.stash.get(_RECORDER_KEY, None)
    if recorder is not None:
        del config.stash[_RECORDER_KEY]
        recorder.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    recorder = config.stash.get(_RECORDER_KEY, None)
    if recorder is not None:
        recorder.flush()
        terminalreporter.write_line(
            f"collect-cases: {recorder.calls} calls, {recorder.distinct_cases} distinct cases "
            f"({recorder.new_cases} new) recorded into {config.getoption('--collect-cases')}"
        )
