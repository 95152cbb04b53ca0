"""Module-level index of one file: classes, functions, globals, imports; FuncInfo built on demand."""

from __future__ import annotations

import ast

from .scan import FuncInfo, make_funcinfo
from .source import SourceFile


class ClassInfo:
    """One class of an indexed file: its bases, methods and class attributes. (A plain class, compared by identity:
    see scan.ByValue.)"""

    __slots__ = ("bases", "class_attrs", "file", "methods", "name", "node")

    def __init__(
        self,
        name: str,
        node: ast.ClassDef,
        file: SourceFile,
        bases: list[str],
        methods: dict[str, ast.AST] | None = None,
        class_attrs: dict[str, ast.stmt] | None = None,
    ) -> None:
        self.name = name
        self.node = node
        self.file = file
        self.bases = bases
        self.methods: dict[str, ast.AST] = {} if methods is None else methods
        self.class_attrs: dict[str, ast.stmt] = {} if class_attrs is None else class_attrs

    def loc(self) -> str:
        return self.file.loc(self.node)


class ModuleIndex:
    """Index of one parsed file."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, ast.AST] = {}
        self.globals: dict[str, list[ast.stmt]] = {}
        self._funcinfo: dict[int, FuncInfo] = {}
        self._rebound: dict[str, tuple[str, int]] | None = None
        for stmt in source.tree.body:
            self._top(stmt)

    def rebound_globals(self) -> dict[str, tuple[str, int]]:
        """Module globals a function declares ``global`` (and so may rebind at run time), each with the first such
        function's name and the line of its ``global`` statement. Walked on first use only."""
        if self._rebound is None:
            self._rebound = {}
            stack: list[tuple[ast.AST, str]] = [(self.source.tree, "")]
            while stack:
                node, where = stack.pop()
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        stack.append((child, f"{where}.{child.name}" if where else child.name))
                    elif isinstance(child, ast.Global) and where:
                        for name in child.names:
                            self._rebound.setdefault(name, (where, child.lineno))
                    elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                        stack.append((child, where))
            self._rebound = dict(sorted(self._rebound.items()))
        return self._rebound

    def _top(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.ClassDef):
            bases = []
            for base in stmt.bases:
                if isinstance(base, ast.Name):
                    bases.append(base.id)
                elif isinstance(base, ast.Attribute):
                    bases.append(base.attr)
            info = ClassInfo(stmt.name, stmt, self.source, bases)
            for item in stmt.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.methods[item.name] = item
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    for target in targets:
                        if isinstance(target, ast.Name):
                            info.class_attrs[target.id] = item
            self.classes.setdefault(stmt.name, info)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        self.globals.setdefault(node.id, []).append(stmt)
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for body in _bodies(stmt):
                for inner in body:
                    self._top(inner)

    # -- FuncInfo cache -----------------------------------------------------------------------------
    def funcinfo(
        self, node: ast.AST, qualname: str, cls: ClassInfo | None, parent: FuncInfo | None
    ) -> FuncInfo:
        key = id(node)
        info = self._funcinfo.get(key)
        if info is None:
            info = make_funcinfo(
                self.source, node, qualname, cls, parent, is_method=cls is not None and parent is None
            )
            self._funcinfo[key] = info
        return info

    def method(self, cls: ClassInfo, name: str) -> FuncInfo | None:
        node = cls.methods.get(name)
        if node is None:
            return None
        return self.funcinfo(node, f"{cls.name}.{name}", cls, None)

    def function(self, name: str) -> FuncInfo | None:
        node = self.functions.get(name)
        if node is None:
            return None
        return self.funcinfo(node, name, None, None)

    def nested(self, parent: FuncInfo, node: ast.AST) -> FuncInfo:
        info = self._funcinfo.get(id(node))
        if info is not None:  # made already: its name need not be spelled again
            return info
        if isinstance(node, ast.Lambda):
            qual = f"{parent.qualname}.<lambda@{node.lineno}:{parent.file.char_col(node.lineno, node.col_offset)}>"
        else:
            qual = f"{parent.qualname}.{node.name}"
        return self.funcinfo(node, qual, None, parent)


def _bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    bodies = [getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
    for handler in getattr(stmt, "handlers", []):
        bodies.append(handler.body)
    return bodies
