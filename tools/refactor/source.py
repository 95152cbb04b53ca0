"""The input: one TTTv1 module parsed with libcst, the trace-deps analysis of it, and the join between the two
(analysis locations are ``file:line:col`` with ``ast`` byte columns; libcst positions count characters)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from tttv2_tools._cli import missing_file
from tttv2_tools.trace_dependencies import Analysis, TraceError, analyze
from tttv2_tools.trace_dependencies.mainclass import main_class
from tttv2_tools.trace_dependencies.source import decode_source

from .errors import UsageError
from .lines import positions
from .track import is_tracked


@dataclass(eq=False)
class ParsedFile:
    """One parsed file and a position index over its expression and statement nodes."""

    path: Path
    name: str  # the display name the analysis uses in its locations
    text: str
    module: cst.Module
    _lines: list[str] = field(default_factory=list, repr=False)
    _by_range: dict[tuple[int, int, int, int], cst.CSTNode] = field(default_factory=dict, repr=False)
    _by_start: dict[tuple[int, int], list[cst.CSTNode]] = field(default_factory=dict, repr=False)
    _ranges: dict[int, tuple[int, int, int, int]] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: Path, name: str) -> ParsedFile:
        try:
            text = decode_source(
                path.read_bytes(), name
            )  # as Python and trace-deps read it (PEP 263, line ends)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc}") from exc
        except TraceError as exc:
            raise UsageError(f"cannot read {path}: {exc}") from exc
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError as exc:
            raise UsageError(_syntax_error(path, text, exc)) from exc
        parsed = cls(path=path, name=name, text=text, module=module)
        parsed._lines = text.splitlines()
        return parsed

    def _index(self) -> None:
        """Positions of every node (computed on first use: helper files mostly need none)."""
        if self._ranges:
            return
        ranges, nodes = positions(self.module)
        for ident, key in ranges.items():
            node = nodes[ident]
            self._ranges[ident] = key
            if is_tracked(node):
                # keep the outermost node for a range (a libcst chain ``a and b and c`` is one ast BoolOp)
                self._by_range.setdefault(key, node)
                self._by_start.setdefault(key[:2], []).append(node)

    # -- positions (lines 1-based, columns in characters, as the analysis gives them) ----------------
    def node_at(self, line: int, col: int, end_line: int, end_col: int) -> cst.CSTNode | None:
        """The node spanning exactly (line, col)–(end_line, end_col)."""
        self._index()
        return self._by_range.get((line, col, end_line, end_col))

    def node_for_span(self, span) -> cst.CSTNode | None:
        return self.node_at(span.start_line, span.start_col, span.end_line, span.end_col)

    def nodes_starting(self, line: int, col: int) -> list[cst.CSTNode]:
        """Nodes starting at (line, col), outermost first."""
        self._index()
        return self._by_start.get((line, col), [])

    def range_of(self, node: cst.CSTNode) -> tuple[int, int, int, int] | None:
        self._index()
        return self._ranges.get(id(node))

    def line_of(self, node: cst.CSTNode) -> int | None:
        self._index()
        where = self._ranges.get(id(node))
        return None if where is None else where[0]

    def loc(self, node: cst.CSTNode) -> str:
        return f"{self.name}:{self.line_of(node) or 0}"

    # -- structure -------------------------------------------------------------------------------
    def classes(self) -> dict[str, cst.ClassDef]:
        return {s.name.value: s for s in self.module.body if isinstance(s, cst.ClassDef)}

    def functions(self) -> dict[str, cst.FunctionDef]:
        return {s.name.value: s for s in self.module.body if isinstance(s, cst.FunctionDef)}


def _syntax_error(path: Path, text: str, exc: cst.ParserSyntaxError) -> str:
    """The one-line message of a file that does not parse: Python's own position and words when Python rejects
    it too (LibCST's parser reports where its grammar gave up, often a line later, with a long token list)."""
    try:
        ast.parse(text, filename=str(path))
    except SyntaxError as error:
        return f"{path}:{error.lineno}:{error.offset or 0}: does not parse: {error.msg}"
    except ValueError:  # pragma: no cover - a NUL byte; LibCST's words then
        pass
    return f"{path}:{exc.raw_line}:{exc.raw_column}: does not parse: {exc.message}"


def methods_of(klass: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else []
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}


@dataclass
class Inputs:
    """Everything the codemod reads: the module, its analysis, and the other files the analysis reached."""

    module: ParsedFile
    config_path: Path | None
    analysis: Analysis
    class_name: str
    klass: cst.ClassDef
    files: dict[str, ParsedFile]  # display name -> parsed file (module and helper files)
    cache: dict = field(default_factory=dict)  # results shared by the 1D and 2D passes
    class_choice: str = ""  # why class_name was chosen among several classes with a forward (a note), or ""

    def file(self, name: str) -> ParsedFile | None:
        return self.files.get(name)

    def loc(self, node: cst.CSTNode, file: str = "") -> str:
        """``file:line`` of a node of the module or of a helper file (``file``), or the file name alone when the
        node was made by the codemod (a call-site copy) and has no line of its own."""
        parsed = self.files.get(file) or self.module
        line = parsed.line_of(node)
        if line is None and parsed is not self.module:
            parsed, line = self.module, self.module.line_of(node)
        return f"{parsed.name}:{line}" if line else (file or parsed.name)


def load_inputs(module_path: Path, config_path: Path | None, class_name: str | None) -> Inputs:
    """Parse the module, check it has a usable class, and run trace-deps on it (once)."""
    if not module_path.is_file():
        raise UsageError(missing_file(module_path, "MODULE"))
    if config_path is not None and not config_path.is_file():
        raise UsageError(missing_file(config_path, "CONFIG"))
    parsed = ParsedFile.load(module_path, module_path.name)
    classes = parsed.classes()
    if not classes:
        raise UsageError(f"{module_path}:1: no class in the module (expected a TTTv1 module class)")
    if class_name is not None and class_name not in classes:
        raise UsageError(
            f"MODULE:CLASS: no class {class_name!r} in {module_path} (classes: {', '.join(sorted(classes))})"
        )
    main, why = (None, "") if class_name else _main_class(parsed)
    candidates = [class_name or main] if class_name or main else list(classes)
    chosen = None
    for name in candidates:
        methods = methods_of(classes[name])
        if "forward" in methods or "__call__" in methods:
            chosen = name
            break
    if chosen is None:
        if class_name is None:
            raise UsageError(f"{module_path}:1: no class with a forward() or __call__() method")
        raise UsageError(_no_forward(parsed, classes, class_name))
    if "__init__" not in methods_of(classes[chosen]):
        line = parsed.line_of(classes[chosen]) or 1
        raise UsageError(
            f"{module_path}:{line}: class {chosen} has no __init__ of its own (a base class?): the generated "
            "from_model_args takes TTTv1's constructor arguments; name the class TTTv1 callers build (MODULE:CLASS)"
        )
    entry = "forward" if "forward" in methods_of(classes[chosen]) else "__call__"
    try:
        analysis = analyze(module_path, config_path, class_name=chosen, entry=entry)
    except TraceError as exc:
        raise UsageError(str(exc)) from exc
    module_display = analysis.module
    parsed.name = module_display
    files = {module_display: parsed}
    base = module_path.resolve().parent
    for name in analysis.files:
        if name in files or (analysis.config and name == analysis.config):
            continue
        candidate = _locate(base, module_display, name) or _read_path(analysis.input_paths, name)
        if candidate is not None:
            files[name] = ParsedFile.load(candidate, name)
    choice = f"class {chosen} chosen: {why}" if why else ""
    return Inputs(parsed, config_path, analysis, chosen, classes[chosen], files, class_choice=choice)


def _main_class(parsed: ParsedFile) -> tuple[str | None, str]:
    """trace-deps' main-class rule (mainclass.py) on the module, with both entries (forward, __call__)."""
    try:
        tree = ast.parse(parsed.text)
    except SyntaxError:  # libcst parsed it; a file ast refuses is left to the analysis' own error
        return None, ""
    return main_class(tree, ("forward", "__call__"))


def _no_forward(parsed: ParsedFile, classes: dict[str, cst.ClassDef], name: str) -> str:
    """The message for ``--class NAME`` without a forward: where it inherits one from, when it does (an
    inherited forward is not supported)."""
    seen, queue = {name}, [name]
    while queue:
        klass = classes[queue.pop(0)]
        for base in klass.bases:
            base_name = base.value.value if isinstance(base.value, cst.Name) else None
            if base_name in classes and base_name not in seen:
                seen.add(base_name)
                methods = methods_of(classes[base_name])
                entry = "forward" if "forward" in methods else "__call__" if "__call__" in methods else None
                if entry is not None:
                    where = f"{parsed.name}:{parsed.line_of(methods[entry]) or 1}"
                    return (
                        f"{parsed.path}:1: class {name} has no {entry}() of its own: it inherits {entry}() "
                        f"from {base_name} ({where}); inherited forwards are not supported"
                    )
                queue.append(base_name)
    return f"{parsed.path}:1: class {name} has no forward() or __call__() method"


def _locate(base: Path, module_display: str, name: str) -> Path | None:
    """The path of a file the analysis names relative to the common folder of its inputs."""
    depth = module_display.count("/")
    root = base
    for _ in range(depth):
        root = root.parent
    candidate = root / name
    return candidate if candidate.is_file() else None


def _read_path(paths: list[Path], name: str) -> Path | None:
    """The file the analysis read under the display name ``name`` when it is not below the inputs' common
    folder: trace-deps then names it by its file name alone (Falcon-40B's ``model_utils.py``, imported by
    Llama-2-70B's attention from another demo's folder). None unless exactly one file read matches."""
    found = {p for p in paths if p.name == name.rsplit("/", 1)[-1] and p.as_posix().endswith("/" + name)}
    return found.pop() if len(found) == 1 else None
