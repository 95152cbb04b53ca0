"""Positions of the nodes of a module, as LibCST's ``PositionProvider`` gives them, from one plain rendering.

``PositionProvider`` builds position objects for every node through LibCST's metadata machinery; this state
follows the same rules (a node's syntactic range when its rendering records one, else the range its rendering
covered; a node rendered twice keeps what ``PositionProvider`` would keep) and stores plain tuples, in the same
order."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState

_NEWLINE = re.compile(r"\r\n?|\n")

#: (start line, start column, end line, end column): lines 1-based, columns 0-based in characters
Range = tuple[int, int, int, int]


class _PositionState(CodegenState):
    __slots__ = ("_stack", "column", "line", "nodes", "ranges")

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line, self.column = 1, 0
        self.ranges: dict[int, Range] = {}  # id(node) -> range, in PositionProvider's order
        self.nodes: dict[int, cst.CSTNode] = {}
        self._stack: list[tuple[int, int]] = []

    def _advance(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
            return
        segments = _NEWLINE.split(value)
        self.line += len(segments) - 1
        self.column = len(segments[-1])

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._advance(value)

    def _store(self, node: cst.CSTNode, where: Range) -> None:
        self.ranges[id(node)] = where
        self.nodes.setdefault(id(node), node)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        if id(node) not in self.ranges:  # a syntactic range recorded inside wins
            self._store(node, (*start, self.line, self.column))

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Iterator[None]:
        start = (self.line, self.column)
        try:
            yield
        finally:
            end = (self.line, self.column)
            if start_node is not None:
                start = self.ranges[id(start_node)][:2]
            if end_node is not None:
                end = self.ranges[id(end_node)][2:]
            self._store(node, (*start, *end))


def positions(module: cst.Module) -> tuple[dict[int, Range], dict[int, cst.CSTNode]]:
    """id(node) -> range for every node of ``module`` (in the order ``PositionProvider`` lists them), and id ->
    node."""
    state = _PositionState(module)
    module._codegen(state)
    return state.ranges, state.nodes


def start_lines(module: cst.Module) -> dict[int, int]:
    """id(node) -> the line where ``PositionProvider`` says the node starts."""
    return {key: where[0] for key, where in positions(module)[0].items()}


# ------------------------------------------------------------------------------------------ written text
_BRANCHES = (ast.If, ast.IfExp, ast.While, ast.Assert)


def method_lines(text: str) -> tuple[dict[str, int], dict[tuple[str, int], int]] | None:
    """For the methods of the top-level classes of ``text``: method name -> line of its ``def``, and (method
    name, index of a branch node in LibCST's visit order of the method) -> the line where LibCST's
    ``PositionProvider`` starts that node, read with ``ast`` instead of parsing the text with LibCST. A chain
    ``a and b and c`` is one ``ast.BoolOp`` but two LibCST nodes starting where it starts. None when an f-string
    spans lines (``ast`` positions inside those are not reliable before Python 3.12)."""
    tree = ast.parse(text)
    methods: dict[str, int] = {}
    branches: dict[tuple[str, int], int] = {}
    for statement in tree.body:
        if not isinstance(statement, ast.ClassDef):
            continue
        for item in statement.body:
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = _branch_lines(item)
            if lines is None:
                return None
            methods[item.name] = item.lineno
            for index, line in enumerate(lines):
                branches[(item.name, index)] = line
    return methods, branches


def _branch_lines(func: ast.AST) -> list[int] | None:
    out: list[int] = []
    stack = [func]
    while stack:
        node = stack.pop()
        if isinstance(node, _BRANCHES):
            out.append(node.lineno)
        elif isinstance(node, ast.BoolOp):
            out.extend([node.lineno] * (len(node.values) - 1))
        elif isinstance(node, ast.JoinedStr) and node.end_lineno != node.lineno:
            return None
        stack.extend(sorted(ast.iter_child_nodes(node), key=_start, reverse=True))
    return out


def _start(node: ast.AST) -> tuple[int, int]:
    """Where a node starts in the source (a node without a position: where its first child starts)."""
    line = getattr(node, "lineno", None)
    if line is not None:
        return line, node.col_offset
    starts = [_start(child) for child in ast.iter_child_nodes(node)]
    return min(starts) if starts else (0, 0)
