"""Writing generated files safely.

Every generated file starts with a header naming its source and a hash of the rest of the file. A file is
overwritten only when it carries such a header and its content still matches the hash (nobody edited it), or
with ``--force``. Writes are atomic (a temporary file in the same folder, then ``os.replace``), and all files of a
run are checked before any is written, so a run never leaves half of its output behind.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shlex
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

HEADER_TAG = "# tttv2-refactor:"
_HEADER_RE = re.compile(r"^# tttv2-refactor: generated from (?P<source>.+?); sha256=(?P<hash>[0-9a-f]{16})$")


def content_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def with_header(body: str, source_label: str) -> str:
    """``body`` behind the one-line header (``source_label`` says which TTTv1 file and class it came from)."""
    return f"{HEADER_TAG} generated from {source_label}; sha256={content_hash(body)}\n{body}"


def header_state(text: str) -> str:
    """ "ours" (our header, content unchanged), "edited" (our header, content changed) or "foreign"."""
    first, _, body = text.partition("\n")
    match = _HEADER_RE.match(first)
    if match is None:
        return "foreign"
    return "ours" if content_hash(body) == match.group("hash") else "edited"


def run_formatter(command: str, text: str, path: Path) -> str:
    """Pipe ``text`` through ``command`` (e.g. ``ruff format -``); ``{path}`` in the command is the target."""
    argv = shlex.split(command.replace("{path}", str(path)))
    try:
        done = subprocess.run(argv, input=text, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--formatter: cannot run {command!r}: {exc}") from exc
    if done.returncode != 0:
        raise UsageError(f"--formatter: {command!r} failed on {path.name}: {done.stderr.strip()[:300]}")
    return done.stdout


@dataclass
class Planned:
    path: Path
    text: str  # with header

    def current(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def changed(self) -> bool:
        return self.current() != self.text

    def diff(self) -> str:
        old = self.current()
        before = [] if old is None else old.splitlines(keepends=True)
        name = self.path.as_posix()
        return "".join(
            difflib.unified_diff(
                before,
                self.text.splitlines(keepends=True),
                fromfile=name if old is not None else "/dev/null",
                tofile=name,
            )
        )


def check_targets(planned: list[Planned], inputs: list[Path], force: bool) -> list[str]:
    """Refusals (one line each) for outputs that would overwrite an input or a file we may not overwrite."""
    problems: list[str] = []
    input_set = {p.resolve() for p in inputs}
    seen: set[Path] = set()
    for item in planned:
        target = item.path.resolve()
        if target in input_set:
            raise UsageError(f"{item.path}: an output would overwrite an input file")
        if target in seen:
            raise UsageError(f"{item.path}: two outputs would be written to the same file")
        seen.add(target)
        if target.parent.exists() and not target.parent.is_dir():
            raise UsageError(f"{target.parent}: the output folder is a file")
        if target.is_dir():
            raise UsageError(f"{item.path}: the output path is a folder")
        old = item.current()
        if old is None or old == item.text or force:
            continue
        state = header_state(old)
        if state == "foreign":
            problems.append(
                f"{item.path}: exists and was not written by tttv2-refactor (use --force to replace it)"
            )
        elif state == "edited":
            problems.append(
                f"{item.path}: was edited since tttv2-refactor wrote it (use --force to replace it)"
            )
    return problems


def write_all(planned: list[Planned]) -> list[Path]:
    """Write every changed file atomically; returns the paths written."""
    staged: list[tuple[Path, Path]] = []
    try:
        for item in planned:
            if not item.changed():
                continue
            item.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{item.path.name}.", suffix=".tmp", dir=item.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(item.text)
            os.chmod(tmp, _mode_for(item.path))
            staged.append((Path(tmp), item.path))
        for tmp, target in staged:
            os.replace(tmp, target)
    finally:
        for tmp, _ in staged:
            if tmp.exists():
                tmp.unlink()
    return [target for _, target in staged]


def _mode_for(path: Path) -> int:
    """The permissions the written file gets: the replaced file's, else what a plain ``open`` would give (the
    temporary file is private to the user until it is renamed)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
