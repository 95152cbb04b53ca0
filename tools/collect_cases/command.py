"""Turning the user's command into one that starts the recorder first (``python -m ...bootstrap``).

Only Python commands can be recorded: ``python [opts] -m MODULE ...``, ``python [opts] SCRIPT ...``,
``python [opts] -c CODE ...`` and Python console scripts (``pytest ...``: a file on PATH whose ``#!`` line names
a Python). The interpreter the command names is kept, with its options.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

from tttv2_tools._cli import missing_file

from .errors import CollectCasesError

BOOTSTRAP = "tttv2_tools.collect_cases.bootstrap"
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")
# interpreter options that take a value as the next argument
_OPTIONS_WITH_VALUE = {"-W", "-X", "--check-hash-based-pycs"}


def _is_python(executable: str) -> bool:
    return bool(_PYTHON_NAME.match(os.path.basename(executable))) or (
        os.path.abspath(executable) == os.path.abspath(sys.executable)
    )


def _python_of_script(path: str) -> str | None:
    """The interpreter named by a script's ``#!`` line, when it is a Python; else None."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        words = words[1:]
    if words and _is_python(words[0]):
        found = shutil.which(words[0]) if not os.path.isabs(words[0]) else words[0]
        return found if found and os.path.exists(found) else sys.executable
    return None


def bootstrapped(command: list[str]) -> list[str]:
    """``command`` with the bootstrap inserted; a CollectCasesError says why a command cannot be recorded."""
    if not command:
        raise CollectCasesError("expected a command after '--', got nothing")
    first, rest = command[0], command[1:]
    if _is_python(first):
        options = []
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("-m", "-c", "-"):
            options.append(rest[i])
            if rest[i] in _OPTIONS_WITH_VALUE and i + 1 < len(rest):
                i += 1
                options.append(rest[i])
            i += 1
        program = rest[i:]
        if not program or program[0] == "-" or (program[0] in ("-m", "-c") and len(program) < 2):
            raise CollectCasesError(
                f"the command must run a module, a script or code (python -m MOD / SCRIPT / -c CODE), "
                f"got {' '.join(command)!r}"
            )
        return [first, *options, "-m", BOOTSTRAP, *program]
    path = first if os.sep in first else shutil.which(first)
    python = _python_of_script(path) if path else None
    if python is None:
        raise CollectCasesError(
            f"can only run Python commands (python -m MODULE, python SCRIPT, python -c CODE or a Python "
            f"console script such as pytest), got {first!r}"
        )
    return [python, "-m", BOOTSTRAP, path, *rest]


def checked(command: list[str], cwd: str | os.PathLike | None = None) -> list[str]:
    """:func:`bootstrapped`, after checking that a script the command names exists (``python nosuch.py``: one
    line, before a store is created, as Python itself says it in one line and exit status 2)."""
    argv = bootstrapped(command)
    program = argv[argv.index(BOOTSTRAP) + 1 :]
    if program and program[0] not in ("-m", "-c"):
        script = program[0]
        where = os.path.join(cwd, script) if cwd is not None else script
        if not os.path.isfile(where):
            raise CollectCasesError(missing_file(script, "SCRIPT"))
    return argv
