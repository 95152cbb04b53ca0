"""``record``: run a command in a child process with the recorder active, pass its exit code through."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

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
    return Recording(process, status_path, text, tmpdir)


def exit_status(code: int) -> int:
    """A child's return code as a shell exit status (killed by signal N → 128 + N)."""
    return 128 - code if code < 0 else code
