"""Child-process entry point: ``python -m tttv2_tools.collect_cases.bootstrap (-m MOD | -c CODE | SCRIPT) ...``.

It reads the recording settings from the ``COLLECT_CASES_CONFIG`` environment variable (JSON written by
``collect-cases record`` / ``sweep``), installs the recorder (with a shadow for
``collect-cases verify``), imports the targets (a bad target stops here, before the command runs, with exit code 2), then runs the command exactly as ``python`` would, in this process.
The status file it names receives ``{"ready": ...}`` and, at exit, the call and case counts.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
from pathlib import Path

from tttv2_tools._output import OutputError, write_text

from .errors import CollectCasesError
from .fields import UserField
from .recorder import Recorder
from .targets import parse_target
from .verify import Shadow

CONFIG_ENV = "COLLECT_CASES_CONFIG"
TARGET_ERROR_EXIT = 2


def write_status(path: str | None, status: dict) -> None:
    if not path:
        return
    write_text(Path(path), json.dumps(status), "the status file")


def _start(config: dict) -> Recorder:
    shadow = Shadow(config["verify"]) if config.get("verify") else None
    recorder = Recorder(
        config["store"],
        [parse_target(t) for t in config["targets"]],
        [UserField(n, e) for n, e in config.get("fields", [])],
        command=config.get("command", ""),
        shadow=shadow,
    )
    recorder.install()
    try:
        recorder.import_targets()
        if shadow is not None:
            shadow.prepare()
    except BaseException:
        recorder.close()
        raise
    return recorder


def main(argv: list[str], at_exit=atexit.register) -> None:
    raw = os.environ.pop(CONFIG_ENV, None)
    if raw is None:
        sys.exit(f"collect-cases bootstrap: {CONFIG_ENV} is not set (run it through `collect-cases record`)")
    config = json.loads(raw)
    status = config.get("status")
    if not argv or (argv[0] in ("-m", "-c") and len(argv) < 2):
        sys.exit("collect-cases bootstrap: expected -m MODULE, -c CODE or SCRIPT")

    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
    elif argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))

    try:
        recorder = _start(config)
    except CollectCasesError as exc:
        try:  # `collect-cases record` reads the status file and prints the error itself: said once
            write_status(status, {"ready": False, "error": str(exc)})
            told = bool(status)
        except OutputError:
            told = False
        if not told:
            print(f"collect-cases: {exc}", file=sys.stderr)
        sys.exit(TARGET_ERROR_EXIT)
    write_status(status, {"ready": True})

    def finish():
        recorder.close()
        write_status(
            status,
            {
                "ready": True,
                "calls": recorder.calls,
                "distinct": recorder.distinct_cases,
                "new": recorder.new_cases,
                **({"verify": recorder.shadow.status()} if recorder.shadow is not None else {}),
            },
        )

    at_exit(finish)
    if argv[0] == "-m":
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
