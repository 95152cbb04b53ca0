"""Files and lookups: module indexes, methods through the class hierarchy, imported functions, where a name is
bound, and the partial-understanding log (``skip``/``cut``)."""

from __future__ import annotations

import ast

from .errors import TraceError
from .flow import PARAM, reaching
from .ids import (
    RoleKind,
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
                elif base in klass.file.imports:  # a base of another project file (None: not resolvable)
                    imported = self.imported_class(klass.file, base)
                    if imported is not None:
                        queue.append(imported)
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
        found = self.imported_file(source, name)
        return (
            self.module_function(*found) if found else None
        )  # also the analysed module itself (import cycles)

    def imported_class(self, source: SourceFile, name: str) -> ClassInfo | None:
        """The class ``name`` stands for when it is imported from an analysed file (``from .norm import RMSNorm``)."""
        found = self.imported_file(source, name)
        return self.index(found[0]).classes.get(found[1]) if found else None

    def imported_file(self, source: SourceFile, name: str) -> tuple[SourceFile, str] | None:
        """``(file, attribute)`` for ``from module import attribute [as name]`` when the module is an analysed file
        (a file that cannot be read or parsed is reported once)."""
        module, attr, level = source.imports[name]
        if attr is None:
            return None
        path = self.st.project.resolve_module(module, level, source.path)
        if path is None:
            return None
        try:
            return self.st.project.load(path), attr
        except TraceError as exc:
            self.skip(f"{source.name}:1:0", f"import {module}", f"{exc}", "warning")
            return None

    def class_named(self, name: str, info: FuncInfo) -> ClassInfo | None:
        """The analysed class a bare name refers to in ``info`` (defined in the same file or imported)."""
        kind, _owner = self.lookup(name, info)
        if kind is Scope.CLASS:
            return self.index(info.file).classes.get(name)
        if kind is Scope.IMPORT:
            return self.imported_class(info.file, name)
        return None

    def instance_class(self, e: ast.AST | None, info: FuncInfo, depth: int = 0) -> ClassInfo | None:
        """The analysed class whose instance ``e`` holds: ``RMSNorm(...)``, a local or ``self.X`` bound only to
        such constructions of one class."""
        if e is None or depth > 6:
            return None
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            return self.class_named(e.func.id, info)
        values: list[tuple[FuncInfo, ast.AST | None]] = []
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is not Scope.LOCAL:
                return None
            values = [(owner, s.value) for s in self.local_sites(e, info, owner)]
        elif isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role is None or role.kind is not RoleKind.SELF:
                return None
            values = [(i, s.value) for i, s in self.self_sites(role.cls, e.attr)]
        classes = {
            id(c): c for c in (self.instance_class(v, i, depth + 1) for i, v in values if v is not None)
        }
        return next(iter(classes.values())) if len(classes) == 1 and None not in classes.values() else None

    def reaching_sites(self, e: ast.AST, info: FuncInfo, owner: FuncInfo) -> tuple | None:
        """The assignments (and ``flow.PARAM``) of ``owner``'s local that reach the use ``e``; None when the use is
        not mapped (in a nested function or comprehension, or a name of an enclosing function): then every
        assignment counts."""
        if owner is not info:
            return None
        flow = self.cache.reaching.get(info.id)
        if flow is None:
            flow = reaching(info)
            self.cache.reaching[info.id] = flow
        return flow.get(id(e))

    def local_sites(self, e: ast.Name, info: FuncInfo, owner: FuncInfo) -> list:
        """The assignment sites of local ``e.id`` that can reach this use (all of them when not mapped)."""
        sites = owner.assigns[e.id]
        if len(sites) == 1 and e.id not in owner.params:
            return sites
        reach = self.reaching_sites(e, info, owner)
        if reach is None:
            return sites
        return [s for s in reach if s is not PARAM]

    def call_entry(self, cls: ClassInfo) -> FuncInfo | None:
        """What calling an instance runs: ``forward`` (TTTv1 modules' ``__call__`` dispatches to it), else
        ``__call__``."""
        return self.method_info(cls, "forward") or self.method_info(cls, "__call__")

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
