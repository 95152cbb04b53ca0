"""Writing the tools' output files: one policy for trace-deps, tttv2-refactor and collect-cases.

Why one module: the project promises that nothing is lost or half-written. Every output file is written
atomically (a temporary file in the same folder, ``fsync``, ``os.replace``; the temporary file is removed on
failure), with the mode a plain ``open()`` would leave (an existing file's, else ``0o666 & ~umask``). Before
anything is written, every output of a run is checked: it may not be one of the run's inputs (compared resolved
and with ``os.path.samefile``, so symlinks and hard links count), two outputs may not share a file, an existing
Python file is never replaced by a report, and an existing file is replaced only when it is recognisably an
earlier output of the same tool and kind (its ``Kind.recognise``: a JSON ``"schema"`` key or a marker line the
tool writes), it already holds exactly the bytes to be written (nothing can be lost), or the user passed
``--force``. ``-`` (stdout) and character devices or FIFOs (``/dev/null``) are always accepted; a device is
written in place, never replaced. A refusal is one ``OutputError`` line naming the
file and the reason; the tools turn it into exit status 2. Temporary files are named as every writer of the
project names them (``tttv2/_tempfiles.py``: target, host, pid); after a successful write, the stale ones a
killed run left in the folders written to are removed (never a live writer's, never another file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tttv2._tempfiles import remove_stale_temps, temp_name

STDOUT = "-"
_MARKER_LINES = 3  # a marker line is looked for among a file's first lines only
_PYTHON = (".py", ".pyi")


INTERRUPTED = 130  # the exit status of a run stopped by Ctrl-C (128 + SIGINT), as a shell reports it


class OutputError(Exception):
    """An output that may not or could not be written (one line: the file and the reason)."""


class WriteInterrupted(KeyboardInterrupt):
    """Ctrl-C after ``write`` had already replaced some of a run's files (``written``): each of them is whole,
    the new version; the others are as they were."""

    def __init__(self, written: list[Path]):
        super().__init__(written)
        self.written = written


def interrupted(tool: str, exc: KeyboardInterrupt, nothing: str = "nothing written") -> str:
    """The one line a tool prints on Ctrl-C (then exits ``INTERRUPTED``): ``nothing`` (what was kept) unless
    ``write`` was interrupted after replacing files, which are then named."""
    written = getattr(exc, "written", None)
    if written:
        return f"{tool}: interrupted; already written: {', '.join(map(str, written))}"
    return f"{tool}: interrupted; {nothing}"


@dataclass(frozen=True)
class Kind:
    """One kind of output of one tool, and how to recognise a file it wrote earlier."""

    tool: str
    name: str
    recognise: Callable[[str], bool]
    costly: bool = (
        False  # recognise reads the whole text (a JSON object): an early check may leave it for later
    )

    def __str__(self) -> str:
        return f"{self.tool} {self.name}"


def marker(tool: str, name: str, start: str, end: str = "") -> str:
    """The comment line a tool writes into a ``name`` output so a later run recognises the file as its own."""
    return f"{start} written by {tool} ({name}){(' ' + end) if end else ''}"


def marked(tool: str, name: str, start: str, end: str = "") -> Kind:
    """A kind recognised by its marker line (see ``marker``; indenting allowed) among the file's first lines."""
    line = marker(tool, name, start, end)
    return Kind(
        tool, name, lambda text: line in [x.strip() for x in text.split("\n", _MARKER_LINES)[:_MARKER_LINES]]
    )


def json_schema(tool: str, name: str, schema: str) -> Kind:
    """A kind recognised as one JSON object whose ``"schema"`` is ``schema``, judged from the whole text: a file
    that merely opens like ours is not enough (``trace-deps --json >> runs.json`` collects several outputs in one
    file, a user's file may repeat the key; both open with ``{"schema": "<tool>"``). The verdict is exactly
    ``json.loads``' (see ``schema_of``), reached with less memory. ``check`` parses a file once per run (the
    verdict is kept for the unchanged file, see ``_recognised``)."""
    return Kind(tool, name, lambda text: schema_of(text) == schema, costly=True)


_SPACE = re.compile(r"[ \t\n\r]*")  # the white space JSON allows between tokens (json's own set)
_NOT_OURS = object()  # schema_of's answer for a text that is not one JSON object


def schema_of(text: str) -> object:
    """``json.loads(text)["schema"]`` when ``text`` is one JSON object (the last ``"schema"`` key, None without
    one), else an object equal to nothing. Exactly ``json.loads``' verdict (same decoder, same rules: white space,
    escapes in keys, a repeated key, extra data after the object, NaN), but the object's members are decoded one at
    a time and each dropped at once: parsing an earlier megabyte output no longer builds its whole tree (~1,500 page
    faults on tt-metal's attention.py, docs/performance.md). Nesting too deep for the decoder is not ours either."""
    scan = _DECODER.scan_once
    space = _SPACE.match
    found = None
    try:
        at = space(text).end()
        if text[at : at + 1] != "{":
            return _NOT_OURS
        at = space(text, at + 1).end()
        if text[at : at + 1] == "}":
            return found if space(text, at + 1).end() == len(text) else _NOT_OURS
        while True:
            if text[at : at + 1] != '"':  # a member's key is a string (scan_once would take any value)
                return _NOT_OURS
            key, at = scan(text, at)
            at = space(text, at).end()
            if text[at : at + 1] != ":":
                return _NOT_OURS
            value, at = scan(text, space(text, at + 1).end())
            if key == "schema":
                found = value
            del value  # each member's tree is freed before the next is built
            at = space(text, at).end()
            if text[at : at + 1] == "}":
                return found if space(text, at + 1).end() == len(text) else _NOT_OURS
            if text[at : at + 1] != ",":
                return _NOT_OURS
            at = space(text, at + 1).end()
    except (StopIteration, ValueError, RecursionError):  # no value there, a bad one, or nested too deep
        return _NOT_OURS


_DECODER = json.JSONDecoder()


def first_line(tool: str, name: str, prefix: str) -> Kind:
    """A kind recognised by how its first line starts (a CSV header that cannot carry a comment)."""
    return Kind(tool, name, lambda text: text.startswith(prefix))


@dataclass
class Output:
    """One file a run wants to write: ``label`` names it in messages (``--json``, ``report``)."""

    path: Path
    text: str
    kind: Kind
    label: str
    make_folders: bool = False  # create a missing parent folder (else it is an error)


def file_argument(flag: str, text: str) -> Path:
    """An output FILE as the user typed it: ``sub/`` (or ``.``, ``..``) names a folder, which ``Path`` would
    hide by dropping the trailing slash (``sub/`` would become a file named ``sub``)."""
    if text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        raise OutputError(f"{flag}: {text} is a folder path; expected a file")
    return Path(text)


class OnlyOnce(argparse.Action):
    """An option naming one output (a file, a folder, a stem): giving it twice is a usage error, not "the last
    one wins" (which would silently ignore the first)."""

    def __call__(self, parser, namespace, values, option_string=None):
        earlier = getattr(namespace, self.dest, None)
        if earlier is not None:
            parser.error(f"{option_string} given twice ({earlier} and {values}); give it once")
        setattr(namespace, self.dest, values)


def _is_device(path: Path) -> bool:
    """A character device or FIFO (``/dev/null``, a pipe): written in place, nothing in it can be lost."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def same_file(a: Path, b: Path) -> bool:
    """The same file: equal resolved paths (symlinks), or one inode (hard links)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def _is_python(path: Path) -> bool:
    """A Python file by its name or by the file a symlink resolves to (``notes.md -> model_config.py``)."""
    return path.suffix in _PYTHON or path.resolve().suffix in _PYTHON


def _shown(path: Path) -> str:
    """``path``, and the file it really is when it is a symlink (messages name what would be lost)."""
    return f"{path} (a link to {path.resolve()})" if path.is_symlink() else str(path)


def check_place(path: Path, label: str, inputs: Iterable[Path], make_folders: bool = False) -> None:
    """Refuse an output onto an input, onto a folder or a non-regular file, or into a missing folder."""
    for source in inputs:
        if same_file(path, Path(source)):
            raise OutputError(f"refusing to write {label} onto the input file {_shown(path)}")
    if _is_device(path):
        return
    if path.is_dir():
        raise OutputError(f"cannot write {label} to {path}: it is a folder")
    if path.exists() and not path.is_file():
        raise OutputError(f"cannot write {label} to {path}: it is not a regular file")
    parent = path.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"cannot write {label} to {path}: {parent} is not a folder")
    if not parent.exists() and not make_folders:
        raise OutputError(f"cannot write {label} to {path}: folder {parent} does not exist")


def check(outputs: list[Output], inputs: Iterable[Path], force: bool, early: bool = False) -> None:
    """Every refusal for ``outputs`` (the first raises ``OutputError``); call it before writing anything.

    ``early=True`` is the check a tool makes before its work, when its texts are not known yet (``check`` is then
    called again with them): an existing file larger than ``EARLY_LIMIT`` that opens like a JSON object is left to
    that second check when its kind is ``costly`` to recognise. Everything else is refused early as late, and
    nothing is written before the second check, which decides with the whole text."""
    inputs = list(inputs)
    seen: list[Output] = []
    for item in outputs:
        check_place(item.path, item.label, inputs, item.make_folders)
        for other in seen:
            if same_file(item.path, other.path):
                raise OutputError(f"{other.label} and {item.label} would both write {item.path}")
        seen.append(item)
        if _is_device(item.path) or not item.path.exists():
            continue
        if _is_python(item.path):
            raise OutputError(f"refusing to overwrite the Python file {_shown(item.path)} with {item.label}")
        if force or _recognised(item, early):
            continue
        raise OutputError(
            f"refusing to overwrite {item.path}: it exists and is not a {item.kind} written earlier "
            f"(pass --force to replace it)"
        )


#: files above this size whose kind is costly to recognise are judged after the work (``check(early=True)``)
EARLY_LIMIT = 64 << 10

# verdicts of _recognised for files unchanged since (device, inode, size, mtime in ns, kind): the tools check their
# outputs twice a run (before and after the work), and parsing a megabyte of earlier JSON costs ~6 ms
_VERDICTS: dict[tuple, bool] = {}


def _recognised(item: Output, early: bool = False) -> bool:
    """Whether the existing file ``item.path`` may be replaced by ``item``: it holds exactly ``item.text`` (the
    bytes this run writes: nothing can be lost, and a rerun of the same command needs no parse), or it is an
    earlier output of ``item.kind`` from its whole text. A second question about the same unchanged file is
    answered without reading it again. ``early`` (see ``check``): a large file opening like a JSON object, of a
    costly kind, passes for now, unremembered."""
    try:
        info = os.stat(item.path)
    except OSError:
        return False
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, item.kind)
    if key in _VERDICTS:
        return _VERDICTS[key]
    if early and item.kind.costly and info.st_size > EARLY_LIMIT and _opens_an_object(item.path):
        return True
    if item.text and _may_hold(info.st_size, item.text) and _holds(item.path, item.text):
        return True  # not remembered: it depends on this run's text
    _VERDICTS[key] = item.kind.recognise(_text(_read_bytes(item.path)))
    return _VERDICTS[key]


def _may_hold(size: int, text: str) -> bool:
    """Whether a file of ``size`` bytes can hold ``text`` in UTF-8 (exact for ASCII; 2 to 4 bytes a character
    otherwise), without encoding it."""
    return size == len(text) if text.isascii() else len(text) < size <= 4 * len(text)


_PIECE = 1 << 16  # characters compared at a time by _holds


def _holds(path: Path, text: str) -> bool:
    """The file's bytes are exactly ``text`` in UTF-8, compared piece by piece (UTF-8 encodes each character on
    its own, so the pieces' bytes follow each other as the whole text's): neither the file nor the encoded text is
    held whole (a megabyte each, ~460 page faults)."""
    try:
        with open(path, "rb") as handle:
            for at in range(0, len(text), _PIECE):
                piece = text[at : at + _PIECE].encode("utf-8")
                if handle.read(len(piece)) != piece:
                    return False
            return handle.read(1) == b""
    except (OSError, UnicodeEncodeError):  # unreadable, or a text no file can hold (a lone surrogate)
        return False


def _opens_an_object(path: Path) -> bool:
    """The file's first bytes, after JSON white space, are ``{`` (a file that cannot be one JSON object is
    refused at once, however large)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.lstrip(b" \t\n\r")[:1] == b"{"


def _read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, or b"" when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _text(data: bytes) -> str:
    """``data`` as ``open(path, encoding="utf-8")`` reads it (line ends ``\\r\\n`` and ``\\r`` read as ``\\n``), or ""
    when it is not UTF-8 text (not recognisably ours)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def write(outputs: list[Output]) -> list[Path]:
    """Write ``outputs`` (already ``check``-ed): all temporary files first, then every rename, so a failure
    leaves every target as it was (and the folders made for them are removed again). A file that already holds
    exactly its text is left alone (a rerun keeps its modification time: build tools and editors see no change).
    Returns the paths of ``outputs``, each now holding its text."""
    staged: list[tuple[str, Path, Output]] = []
    created: list[Path] = []  # folders this call made: removed again, when empty, if the write fails
    done = False
    try:
        for item in outputs:
            if _is_device(item.path):
                continue
            if item.make_folders:
                folder = item.path.parent.absolute()
                while not folder.exists() and folder not in created:
                    created.append(folder)
                    folder = folder.parent
                _guard(item, lambda item=item: item.path.parent.mkdir(parents=True, exist_ok=True))
            target = item.path.resolve()  # a symlink stays a symlink: the file it points to is replaced
            if target.is_file() and _holds(target, item.text):
                continue
            staged.append(
                (_guard(item, lambda target=target, item=item: _stage(target, item.text)), target, item)
            )
        devices: list[Path] = []  # written in place
        try:
            for tmp, target, item in staged:
                _guard(item, lambda tmp=tmp, target=target: os.replace(tmp, target))
                _sync_folder(target.parent)
            for item in outputs:
                if _is_device(item.path):
                    devices.append(item.path)
                    _guard(item, lambda item=item: _write_in_place(item.path, item.text))
            for folder in dict.fromkeys(target.parent for _, target, _ in staged):
                remove_stale_temps(folder)  # litter of killed runs; the files just written are in place
        except KeyboardInterrupt:  # a temporary file that is gone was renamed: that target is replaced
            replaced = [item.path for tmp, _, item in staged if not os.path.lexists(tmp)] + devices
            if replaced:
                raise WriteInterrupted(replaced) from None
            raise
        done = True
    finally:
        for tmp, _, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if not done:  # deepest first; a folder that holds anything (a file already replaced) stays
            for folder in sorted(created, key=lambda f: len(f.parts), reverse=True):
                with contextlib.suppress(OSError):
                    folder.rmdir()
    return [item.path for item in outputs]


def write_text(path: Path, text: str, label: str = "output") -> None:
    """Write one file atomically with no overwrite policy: for files a tool edits in place on purpose
    (``collect-cases emit --into``) or keeps to itself (a status file)."""
    write([Output(Path(path), text, Kind("", "", lambda _: True), label)])


def _guard(item: Output, action: Callable[[], object]):
    try:
        return action()
    except OSError as exc:
        raise OutputError(f"cannot write {item.label} to {item.path}: {exc.strerror or exc}") from None


def _stage(target: Path, text: str) -> str:
    """``text`` in a new temporary file next to ``target``, flushed to disk, with the mode ``open()`` gives."""
    tmp = str(temp_name(target))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(target))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _mode_for(target: Path) -> int:
    """An existing file's permissions, else what a plain ``open()`` gives (the temporary file is made 0600)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system lets a folder be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_in_place(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
