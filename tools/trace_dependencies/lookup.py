"""Files and lookups: module indexes, methods through the class hierarchy, imported functions, where a name is
bound, and the partial-understanding log (``skip``/``cut``)."""

from __future__ import annotations

import ast

from .errors import TraceError
from .ids import (
    Scope,
)
from .index import ClassInfo, ModuleIndex
from .records import Skipped
from .scan import FuncInfo, loc_of
from .source import SourceFile
from .state import Part


class Lookup(Part):
    """Finding classes, methods, functions and names across the analysed files."""

    def index(self, source: SourceFile) -> ModuleIndex:
        idx = self.st.indexes.get(source.name)
        if idx is None:
            idx = ModuleIndex(source)
            self.st.indexes[source.name] = idx
        return idx

    def register(self, info: FuncInfo) -> FuncInfo:
        if info.id not in self.out.funcs:
            self.out.funcs[info.id] = info
            for site in info.branches:
                self.out.branch_index.setdefault(site.id, (site, info))
        return info

    def method_info(self, cls: ClassInfo, name: str) -> FuncInfo | None:
        key = (id(cls), name)
        if key in self.cache.methods:
            return self.cache.methods[key]
        found = None
        for klass in self.mro(cls):
            info = self.index(klass.file).method(klass, name)
            if info is not None:
                found = self.register(info)
                break
        self.cache.methods[key] = found
        return found

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        cached = self.cache.mro.get(id(cls))
        if cached is not None:
            return cached
        chain = self._mro(cls)
        self.cache.mro[id(cls)] = chain
        return chain

    def _mro(self, cls: ClassInfo) -> list[ClassInfo]:
        chain, queue, seen = [], [cls], set()
        while queue:
            klass = queue.pop(0)
            if klass.name in seen:
                continue
            seen.add(klass.name)
            chain.append(klass)
            idx = self.index(klass.file)
            for base in klass.bases:
                if base in idx.classes:
                    queue.append(idx.classes[base])
        return chain

    def nested_info(self, parent: FuncInfo, node: ast.AST) -> FuncInfo:
        return self.register(self.index(parent.file).nested(parent, node))

    def module_function(self, source: SourceFile, name: str) -> FuncInfo | None:
        info = self.index(source).function(name)
        return self.register(info) if info is not None else None

    def skip(self, loc: str, what: str, reason: str, severity: str = "info") -> None:
        key = (loc, what, reason)
        if key not in self.out.skip_seen:
            self.out.skip_seen.add(key)
            self.out.skipped.append(Skipped(loc, what, reason, severity))

    def cut(self, what: str, e: ast.AST, info: FuncInfo, limit: int) -> None:
        """A depth limit stopped the analysis of ``e``: say so (an explicit unknown and a warning), never guess."""
        loc = loc_of(info.file, e)
        reason = f"{what} nested deeper than {limit} levels: not followed"
        self.unknown(f"depth:{loc}", reason, loc)
        self.skip(loc, info.file.segment(e, 60), reason, "warning")

    def lookup(self, name: str, info: FuncInfo):
        scope: FuncInfo | None = info
        while scope is not None:
            if name in scope.assigns:
                return (Scope.LOCAL, scope)
            if name in scope.params or name in (scope.vararg, scope.kwarg):
                return (Scope.PARAM, scope)
            scope = scope.parent
        idx = self.index(info.file)
        if name in idx.functions:
            return (Scope.FUNCTION, idx)
        if name in idx.classes:
            return (Scope.CLASS, idx)
        if name in idx.globals:
            return (Scope.GLOBAL, idx)
        if name in info.file.imports:
            return (Scope.IMPORT, idx)
        return (Scope.BUILTIN, None)

    def imported_function(self, source: SourceFile, name: str) -> FuncInfo | None:
        key = (source.name, name)
        if key not in self.cache.imports:
            self.cache.imports[key] = self._imported_function(source, name)
        return self.cache.imports[key]

    def _imported_function(self, source: SourceFile, name: str) -> FuncInfo | None:
        module, attr, level = source.imports[name]
        if attr is None:
            return None
        path = self.st.project.resolve_module(module, level, source.path)
        if path is None:
            return None
        try:
            target = self.st.project.load(path)
        except TraceError as exc:
            self.skip(f"{source.name}:1:0", f"import {module}", f"{exc}", "warning")
            return None
        return self.module_function(target, attr)  # also the analysed module itself (import cycles)

    def config_has(self, name: str) -> bool:
        """Whether ModelArgs defines ``name`` (attribute, class attribute, property or method)."""
        if self.st.config_class is None:
            return False
        return bool(self.attr_defs_for(name)) or self.config_method(name) is not None

    def config_method(self, name: str) -> FuncInfo | None:
        if self.st.config_class is None:
            return None
        return self.method_info(self.st.config_class, name)

    def is_config_class(self, cls: object) -> bool:
        return isinstance(cls, ClassInfo) and any(cls is k for k in self.st.config_chain)
