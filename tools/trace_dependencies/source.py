"""Reading and parsing the analysed files (never importing them) and resolving imports between them."""

from __future__ import annotations

import ast
import io
import os
import tokenize
import warnings
from pathlib import Path

from tttv2_tools._cli import missing_file

from .errors import TraceError, UsageError


class SourceFile:
    """One parsed Python file. ``name`` is the display name used in every location (stable across machines). (A
    plain class, compared by identity: see scan.ByValue.)"""

    __slots__ = ("_blines", "ascii", "imports", "lines", "name", "path", "text", "tree")

    def __init__(
        self,
        path: Path,
        name: str,
        text: str,
        tree: ast.Module,
        lines: int,
        imports: dict[str, tuple[str, str | None, int]] | None = None,
        ascii: bool = True,  # the whole text is ASCII: byte and character columns agree
        _blines: list[bytes] | None = None,
    ) -> None:
        self.path = path
        self.name = name
        self.text = text
        self.tree = tree
        self.lines = lines
        self.imports: dict[str, tuple[str, str | None, int]] = {} if imports is None else imports
        self.ascii = ascii
        self._blines = _blines

    def char_col(self, line: int, byte_col: int) -> int:
        """``ast`` columns count UTF-8 bytes; every location trace-deps reports counts characters (as libcst and
        editors do), so a line with a non-ASCII character before the node does not shift it."""
        if self.ascii:
            return byte_col
        if self._blines is None:
            self._blines = self.text.encode("utf-8").split(b"\n")
        raw = self._blines[line - 1] if 0 < line <= len(self._blines) else b""
        if raw.isascii():
            return byte_col
        return len(raw[:byte_col].decode("utf-8", "replace"))

    def loc(self, node: ast.AST) -> str:
        """``file:line:col`` of a node, col in characters."""
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        return f"{self.name}:{line}:{col if self.ascii else self.char_col(line, col)}"

    def segment(self, node: ast.AST | None, limit: int = 120) -> str:
        """Source text of ``node`` on one line, shortened to ``limit`` characters (sliced from the file for
        one-line nodes, which is much cheaper than ``ast.unparse``)."""
        if node is None:
            return ""
        line = getattr(node, "lineno", None)
        end = getattr(node, "end_lineno", None)
        if line is None or end is None:
            text = ast.unparse(node)
        else:
            if self._blines is None:
                self._blines = self.text.encode("utf-8").split(b"\n")
            if line == end:
                text = self._blines[line - 1][node.col_offset : node.end_col_offset].decode(
                    "utf-8", "replace"
                )
            else:
                parts = [
                    self._blines[line - 1][node.col_offset :],
                    *self._blines[line : end - 1],
                    self._blines[end - 1][: node.end_col_offset],
                ]
                text = " ".join(_strip_comment(p.decode("utf-8", "replace")) for p in parts)
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


def _strip_comment(line: str) -> str:
    """Drop a trailing ``# comment`` from one source line (display only; lines with quotes are kept)."""
    if "#" in line and "'" not in line and '"' not in line:
        return line.split("#", 1)[0]
    return line


def read_source(path: Path, name: str) -> SourceFile:
    """Parse ``path``; raise :class:`TraceError` with ``file:line:col`` if it cannot be read or parsed."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise UsageError(missing_file(path)) from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    text = decode_source(raw, name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # SyntaxWarning / DeprecationWarning of the analysed code are not ours
            tree = ast.parse(text, filename=name)
    except SyntaxError as exc:
        where = f"{name}:{exc.lineno or 1}:{(exc.offset or 1)}"
        raise TraceError(f"does not parse: {exc.msg}", where=where) from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise TraceError(f"does not parse: {exc}", where=name) from exc
    source = SourceFile(
        path=path, name=name, text=text, tree=tree, lines=text.count("\n") + 1, ascii=text.isascii()
    )
    source.imports = _collect_imports(tree)
    return source


def decode_source(raw: bytes, name: str) -> str:
    """Bytes -> text the way Python reads a source file: a UTF-8 BOM or a PEP 263 coding line picks the
    encoding (default UTF-8); the BOM itself is dropped, so columns count from the first real character. Line
    ends are Python's too: ``\r\n`` and a lone ``\r`` (classic Mac) both end a line, and become ``\n``
    (before the coding line is looked for, which Python finds on a ``\r``-ended first line as well)."""
    raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    try:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except (SyntaxError, LookupError) as exc:
        raise TraceError(f"not UTF-8 text and no valid coding line ({exc})", where=f"{name}:1") from exc
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        label = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise TraceError(
            f"not {label} text ({exc.reason} at byte {exc.start})", where=f"{name}:{line}"
        ) from exc
    except LookupError as exc:  # pragma: no cover - detect_encoding already checked the codec
        raise TraceError(f"unknown encoding {encoding!r}", where=f"{name}:1") from exc


def _module_statements(body: list[ast.stmt]):
    """Module-level statements, including those inside top-level if / try / with blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for block in (
                getattr(stmt, "body", []),
                getattr(stmt, "orelse", []),
                getattr(stmt, "finalbody", []),
            ):
                yield from _module_statements(block)
            for handler in getattr(stmt, "handlers", []):
                yield from _module_statements(handler.body)


def _collect_imports(tree: ast.Module) -> dict[str, tuple[str, str | None, int]]:
    """Module-level imports: local name -> (module, imported attribute or None, relative level). Imports inside
    functions are local names of those functions (see scan.py)."""
    imports: dict[str, tuple[str, str | None, int]] = {}
    for node in _module_statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (alias.name, None, 0)
                else:
                    top = alias.name.split(".")[0]
                    imports.setdefault(top, (top, None, 0))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    continue
                imports[alias.asname or alias.name] = (node.module or "", alias.name, node.level)
    return imports


class Project:
    """The set of files taking part in one analysis, parsed once each, with display names relative to a base."""

    def __init__(self, base: Path):
        self.base = base
        self.files: dict[Path, SourceFile] = {}
        self.failed: dict[Path, TraceError] = {}
        self._resolved: dict[tuple[str, int, Path], Path | None] = {}
        self._real: dict[Path, Path] = {}  # path as asked for -> resolved path (resolving costs system calls)
        self._outside: dict[Path, str] = {}  # display names of files outside the base, each given once

    def display(self, path: Path) -> str:
        """``path`` relative to the base; a file outside it by its file name, with as many of its folders as
        make the name unique (two helpers' ``utils.py`` of other demos' folders: ``utils.py`` and
        ``demo_c/utils.py``; one name for two files would merge their functions and lose one file's reads), never
        the name of a file below the base."""
        try:
            return path.relative_to(self.base).as_posix()
        except ValueError:
            pass
        if path not in self._outside:
            taken = set(self._outside.values())
            parts = path.parts
            name = path.name
            for depth in range(2, len(parts) + 1):
                if name not in taken and not (self.base / name).is_file():  # nor a file below the base's name
                    break
                name = "/".join(parts[-depth:]).lstrip("/")
            self._outside[path] = name
        return self._outside[path]

    def load(self, path: Path) -> SourceFile:
        real = self._real.get(path)
        if real is None:
            real = self._real[path] = path.resolve()
        path = real
        if path in self.files:
            return self.files[path]
        if path in self.failed:
            raise self.failed[path]
        try:
            source = read_source(path, self.display(path))
        except TraceError as exc:
            self.failed[path] = exc
            raise
        self.files[path] = source
        return source

    def resolve_module(self, module: str, level: int, importer: Path) -> Path | None:
        """:meth:`find_module`, once per (module, level, importing folder)."""
        key = (module, level, importer.parent)
        if key not in self._resolved:
            self._resolved[key] = self.find_module(module, level, importer)
        return self._resolved[key]

    def find_module(self, module: str, level: int, importer: Path) -> Path | None:
        """Find the file for ``module`` as imported from ``importer`` (relative to the importer's folder).

        Absolute dotted names are matched by their tail: ``models.tt_transformers.tt.ccl`` imported from
        ``.../tt/mlp.py`` resolves to ``.../tt/ccl.py`` when that file exists, so a copied folder of modules
        works without the original package layout.
        """
        here = importer.parent
        parts = [p for p in module.split(".") if p]
        if level:
            base = here
            for _ in range(level - 1):
                base = base.parent
            return _module_file(base, parts)
        if not parts:
            return None
        for start in range(len(parts)):
            tail = parts[start:]
            if len(tail) == 1 and len(parts) > 1 and parts[-2] != here.name:
                continue  # a bare file name only matches when its package is the importer's folder
            found = _module_file(here, tail)
            if found is not None:
                return found
        ancestor = here
        for _ in range(6):
            found = _module_file(ancestor, parts)
            if found is not None:
                return found
            if ancestor.parent == ancestor:
                break
            ancestor = ancestor.parent
        return None


def _module_file(base: Path, parts: list[str]) -> Path | None:
    if not parts:
        init = base / "__init__.py"
        return init if init.is_file() else None
    candidate = base.joinpath(*parts)
    file = candidate.with_suffix(".py") if candidate.suffix != ".py" else candidate
    if file.is_file():
        return file
    init = candidate / "__init__.py"
    if init.is_file():
        return init
    return None


def common_base(paths: list[Path]) -> Path:
    """The folder that display names are relative to: the common parent of the inputs."""
    parents = [str(p.resolve().parent) for p in paths]
    try:
        return Path(os.path.commonpath(parents))
    except ValueError:  # pragma: no cover - different drives on Windows
        return Path(parents[0])
