"""``record``: run a command in a child process with the recorder active, pass its exit code through."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tttv2_tools._cli import on_stop_signals

from .bootstrap import CONFIG_ENV, TARGET_ERROR_EXIT
from .command import checked
from .errors import TargetError
from .fields import UserField
from .store import CaseStore
from .targets import Target


@dataclass
class Recording:
    """A started child: its process and where it reports."""

    process: subprocess.Popen
    status_path: Path
    command: str
    _tmpdir: tempfile.TemporaryDirectory = field(repr=False)

    def status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def finish(self) -> tuple[int, dict]:
        """Wait; ``(exit code, status)``. A target error becomes a TargetError (the command never ran)."""
        code = self.process.wait()
        _LIVE.discard(self.process)
        status = self.status()
        self._tmpdir.cleanup()
        if not status.get("ready", True) and code == TARGET_ERROR_EXIT:
            raise TargetError(status.get("error", "a target could not be imported"))
        if not status:
            status = {"ready": False}
        return code, status


def start(
    store: str | os.PathLike,
    targets: list[Target],
    command: list[str],
    fields: tuple[UserField, ...] = (),
    *,
    stdout=None,
    stderr=None,
    env: dict | None = None,
    cwd: str | None = None,
    verify: dict | None = None,
) -> Recording:
    """Check the store (created if missing), then start ``command`` with the recorder in it (and a shadow with
    ``verify``'s settings: ``collect-cases verify``)."""
    argv = checked(command, cwd)  # before the store is created: a bad command leaves no empty store
    CaseStore(store, create=True).close()
    tmpdir = tempfile.TemporaryDirectory(prefix="collect-cases-")
    status_path = Path(tmpdir.name) / "status.json"
    text = shlex.join(command)
    config = {
        "store": str(Path(store).resolve()),
        "targets": [t.name for t in targets],
        "fields": [[f.name, f.expression] for f in fields],
        "command": text,
        "status": str(status_path),
    }
    if verify is not None:
        config["verify"] = {**verify, "command": text}
    child_env = dict(os.environ if env is None else env)
    child_env[CONFIG_ENV] = json.dumps(config)
    process = subprocess.Popen(argv, env=child_env, stdout=stdout, stderr=stderr, cwd=cwd)
    _LIVE.add(process)
    return Recording(process, status_path, text, tmpdir)


_LIVE: set[subprocess.Popen] = set()  # the recorded commands started and not yet waited for


def _forward(signum, frame) -> None:
    """SIGTERM / SIGHUP to collect-cases while commands run: passed on to them (as a wrapper does), so that none
    outlives collect-cases; their exit status (128 + N) then comes through as usual. With no command running,
    the signal does what it would have done."""
    live = [p for p in list(_LIVE) if p.poll() is None]  # a snapshot: a sweep's threads add and remove
    if not live:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    for process in live:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


def forwarding_stop_signals():
    """While a verb runs, SIGTERM and SIGHUP reach the commands it started (see ``_forward``; Ctrl-C reaches them
    through the terminal's process group); in a thread other than the main one nothing changes."""
    return on_stop_signals(_forward)


def exit_status(code: int) -> int:
    """A child's return code as a shell exit status (killed by signal N → 128 + N)."""
    return 128 - code if code < 0 else code
