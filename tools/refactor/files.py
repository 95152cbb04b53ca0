"""Writing generated files safely.

Every generated file starts with a header naming its source and a hash of the rest of the file. A file is
overwritten only when it carries such a header and its content still matches the hash (nobody edited it), or
with ``--force``. Where outputs may go (never onto an input, a folder or each other) and how they are written
(atomically, all of a run's files checked before any is written) is the shared policy of
``tttv2_tools._output``; only the header hash is this tool's own.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tttv2_tools._output import Kind, Output, OutputError, check_place, write

from .errors import UsageError

HEADER_TAG = "# tttv2-refactor:"
# ``source=`` (the TTTv1 file's hash when the file was generated) is optional: files written before it existed
# still parse, and shadow verification refuses them as of unknown age
_HEADER_RE = re.compile(
    r"^# tttv2-refactor: generated from (?P<source>.+?)(?:; source=(?P<source_hash>[0-9a-f]{16}))?"
    r"; sha256=(?P<hash>[0-9a-f]{16})$"
)


def content_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def source_hash(data: bytes) -> str:
    """The hash of a TTTv1 source file's bytes, as the header's ``source=`` records it."""
    return hashlib.sha256(data).hexdigest()[:16]


def with_header(body: str, source_label: str, source_digest: str | None = None) -> str:
    """``body`` behind the one-line header (``source_label`` says which TTTv1 file and class it came from,
    ``source_digest`` is ``source_hash`` of that file, so that a reader can tell the file changed since)."""
    source = f"; source={source_digest}" if source_digest else ""
    return f"{HEADER_TAG} generated from {source_label}{source}; sha256={content_hash(body)}\n{body}"


def header_source(text: str) -> str | None:
    """The source label (``../tt/mlp.py (class MLP)``) of a file that carries our header, else None."""
    match = _HEADER_RE.match(text.partition("\n")[0])
    return match.group("source") if match else None


def parse_header(text: str) -> dict | None:
    """``{"source": label, "source_hash": hash or None, "hash": hash}`` of a file's header, None without one."""
    match = _HEADER_RE.match(text.partition("\n")[0])
    return match.groupdict() if match else None


def header_state(text: str) -> str:
    """ "ours" (our header, content unchanged), "edited" (our header, content changed) or "foreign"."""
    first, _, body = text.partition("\n")
    match = _HEADER_RE.match(first)
    if match is None:
        return "foreign"
    return "ours" if content_hash(body) == match.group("hash") else "edited"


def run_formatter(command: str, text: str, path: Path) -> str:
    """Pipe ``text`` through ``command`` (e.g. ``ruff format -``); ``{path}`` in the command is the target.

    The command is split first (``shlex``), then ``{path}`` is replaced inside each argument, so a target with a
    quote or a space stays one argument. What comes back must still be the module (it parses and defines every
    top-level class and function ``text`` defines), else it is a failing formatter (``UsageError``)."""
    try:
        argv = [part.replace("{path}", str(path)) for part in shlex.split(command)]
    except ValueError as exc:
        raise UsageError(f"--formatter: cannot split {command!r} into arguments: {exc}") from None
    if not argv:
        raise UsageError("--formatter: expected a command, got an empty string")
    try:
        done = subprocess.run(argv, input=text, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--formatter: cannot run {command!r}: {exc}") from exc
    if done.returncode != 0:
        raise UsageError(f"--formatter: {command!r} failed on {path.name}: {done.stderr.strip()[:300]}")
    _check_formatted(command, text, done.stdout, path)
    return done.stdout


def _check_formatted(command: str, before: str, after: str, path: Path) -> None:
    try:
        tree = ast.parse(after)
    except SyntaxError as exc:
        reason = f"its output does not parse ({exc.msg}, line {exc.lineno})"
    else:
        missing = _definitions(ast.parse(before)) - _definitions(tree)
        if not missing:
            return
        reason = f"its output no longer defines {', '.join(sorted(missing))}"
    raise UsageError(f"--formatter: {command!r} did not return the module {path.name}: {reason}")


def _definitions(tree: ast.Module) -> set[str]:
    kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


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


MODULE_KIND = Kind("tttv2-refactor", "generated module", lambda text: header_state(text) == "ours")


def check_targets(planned: list[Planned], inputs: list[Path], force: bool) -> list[str]:
    """Refusals (one line each) for outputs that would overwrite an input or a file we may not overwrite."""
    problems: list[str] = []
    seen: set[Path] = set()
    for item in planned:
        try:
            check_place(item.path, "an output", inputs, make_folders=True)
        except OutputError as exc:
            raise UsageError(str(exc)) from None
        target = item.path.resolve()
        if target in seen:
            raise UsageError(f"{item.path}: two outputs would be written to the same file")
        seen.add(target)
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


def check_sources(planned: list[Planned]) -> None:
    """Refuse (``UsageError``) to replace a module or test this tool generated from another class or source file:
    ``--class Second`` with the default ``--name`` would otherwise silently replace the modules of ``First``."""
    for item in planned:
        old = item.current()
        before = header_source(old) if old is not None else None
        now = header_source(item.text)
        if before is not None and before != now:
            raise UsageError(
                f"{item.path}: was generated from {before}, not from {now}; give --name to write it under "
                f"another name (or --force to replace it)"
            )


def write_all(planned: list[Planned]) -> list[Path]:
    """Write every changed file atomically (folders created as needed); returns the paths written."""
    changed = [
        Output(item.path, item.text, MODULE_KIND, "an output", True) for item in planned if item.changed()
    ]
    try:
        write(changed)
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    return [item.path for item in changed]
