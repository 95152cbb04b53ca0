"""The expansion worklist: each queued node gets the edges from what it depends on."""

from __future__ import annotations

import ast

from .astutil import (
    short_value,
)
from .ids import (
    NodeKind,
)
from .scan import FuncInfo, children, loc_of
from .source import SourceFile
from .state import DefSite, Part

#: Methods that put their arguments into the container they are called on.
_FILLERS = frozenset(
    {"append", "extend", "insert", "add", "update", "setdefault", "appendleft", "extendleft"}
)
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_NO_CALL_INSIDE = frozenset({ast.Name, ast.Constant})  # leaves: nothing below them to look at


class Expansion(Part):
    """Expanding queued graph nodes."""

    def expand_all(self) -> None:
        count = 0
        while self.work.pending:
            nid = self.work.pending.popleft()
            payload = self.work.payload.get(nid)
            if payload is None:
                continue
            count += 1
            if count % 2000 == 0:
                self.st.progress(f"expanding dependencies ({count} nodes)")
            try:
                self._expand(nid, payload)
            except RecursionError:
                self.skip(
                    self.out.g.nodes[nid].get("loc") or "?",
                    nid,
                    "expression nested too deeply to analyse",
                    "warning",
                )

    def _expand(self, nid: str, payload) -> None:
        kind = payload[0]
        if kind is NodeKind.LOCAL and len(payload) == 4:
            self._expand_local_site(nid, *payload[1:])
        elif kind is NodeKind.LOCAL:
            _, info, name = payload
            if name in info.params:
                initial = self.param_node(info, name)
                if initial is not None:
                    self.edge(initial, nid, "data", info.loc())
            for site in info.assigns[name]:
                loc = f"{info.file.name}:{site.line}"
                if site.kind == "def" and name in info.nested:
                    self.edge(self.func_node(self.nested_info(info, info.nested[name])), nid, "data", loc)
                elif site.kind == "import":
                    continue
                else:
                    value = site.value if site.value is not None else site.source
                    for dep in self.deps(value, info):
                        self.edge(dep, nid, "data", loc)
                self.guard_edges(nid, site.guards)
            self._mutation_edges(nid, info, name)
        elif kind is NodeKind.PARAM:
            _, info, name = payload
            if (
                info.parent is None
                and self.is_config_class(info.cls)
                and not self.out.g.nodes[nid].get("bound")
            ):
                for caller, call in self.config_callers(info.name):
                    self.bind(info, call, caller, skip_first=True)
            elif info.name in self.config_builders() and not self.out.g.nodes[nid].get("bound"):
                for caller, call in self.builder_callers(info.name):
                    self.bind(info, call, caller, skip_first=False)
            default = info.defaults.get(name)
            if default is not None:
                for dep in self.deps(default, info):
                    self.edge(dep, nid, "data", loc_of(info.file, default))
        elif kind is NodeKind.GLOBAL:
            _, source, name = payload
            info = self._module_info(source)
            for stmt in self.index(source).globals[name]:
                for dep in self.deps(getattr(stmt, "value", None), info):
                    self.edge(dep, nid, "data", f"{source.name}:{stmt.lineno}")
        elif kind is NodeKind.FUNC:
            info = payload[1]
            self._expand_function(nid, info)
        elif kind is NodeKind.METHOD:
            name = payload[1]
            info = self.config_method(name)
            if info is None:
                attr_defs = self.attr_defs_for(name)
                if attr_defs:
                    self.edge(self.attr_node(name), nid, "data")
                    return
                self.out.g.nodes[nid]["resolved"] = False
                reason = self._missing_reason("method", name)
                self.edge(self.unknown(f"method:{name}", reason, None), nid, "data")
                return
            self.out.g.nodes[nid]["loc"] = info.loc()
            self.out.g.nodes[nid]["resolved"] = True
            self._expand_function(nid, info)
        elif kind is NodeKind.ATTR:
            self._expand_attr(nid, payload[1])
        elif kind is NodeKind.KEY:
            self._expand_key(nid, payload[1])
        elif kind is NodeKind.DEF:
            site: DefSite = payload[1]
            self._expand_def(nid, site)
        elif kind is NodeKind.SELF:
            _, cls, name = payload
            for info, site in self.self_sites(cls, name):
                value = site.value if site.value is not None else site.source
                for dep in self.deps(value, info):
                    self.edge(dep, nid, "data", f"{info.file.name}:{site.line}")
                self.guard_edges(nid, site.guards)
        elif kind is NodeKind.BRANCH:
            _, site, info = payload
            for decider in site.deciders:
                found: set[str] = set()
                rest: list = []
                self._truth_dep(decider, info, found, rest)
                for expr in rest:
                    self._deps(expr, info, found)
                for dep in found:
                    self.edge(dep, nid, "data", site.id)
            for fact, _pol in self.facts_of(site, info):
                if fact == "galaxy":
                    self.edge(self.fact_node("galaxy"), nid, "data", site.id)
            real = [g for g in site.guards if g[0] in self.out.branch_index]
            if real:
                self.edge(self.branch_node(real[-1][0]), nid, "nest")

    def _expand_local_site(self, nid: str, info: FuncInfo, name: str, site) -> None:
        """One assignment of a local: its value (``x += v`` also reads the assignments of ``x`` that reach it)."""
        loc = f"{info.file.name}:{site.line}"
        if site.kind == "def" and name in info.nested:
            self.edge(self.func_node(self.nested_info(info, info.nested[name])), nid, "data", loc)
        elif site.kind != "import":
            for dep in self.deps(site.value if site.value is not None else site.source, info):
                self.edge(dep, nid, "data", loc)
        if site.kind == "aug" and site.target is not None:
            for dep in self.local_uses(site.target, info, info):
                self.edge(dep, nid, "data", loc)
        self.guard_edges(nid, site.guards)
        self._mutation_edges(nid, info, name)

    def _mutation_edges(self, nid: str, info: FuncInfo, name: str) -> None:
        """A local container filled in place (``pieces.append(f(x))``, ``out[i] = v``) depends on what is put
        in, wherever in the function that happens (an over-approximation: never fewer dependencies)."""
        if info.complete and name not in self._filled_names(info):
            return  # no call or subscript assignment in the function fills ``name``: no need to walk it
        for value in self._local_mutations(info).get(name, ()):
            for dep in self.deps(value, info):
                self.edge(dep, nid, "data", loc_of(info.file, value))

    def _filled_names(self, info: FuncInfo) -> frozenset[str]:
        """The locals a filler call (``name.append(...)``) or a subscript assignment (``name[k] = v``) may fill,
        from what pass 1 recorded (a superset of what :meth:`_local_mutations` finds, when ``info.complete``):
        most locals are never filled, and this spares walking a long function (ModelArgs.__init__) for them."""
        found = self.cache.filled_names.get(info.id)
        if found is None:
            names = set()
            for site in info.calls:
                func = site.node.func
                if type(func) is ast.Attribute and func.attr in _FILLERS and type(func.value) is ast.Name:
                    names.add(func.value.id)
            for sub in info.sub_assigns:
                if type(sub.target.value) is ast.Name:
                    names.add(sub.target.value.id)
            found = self.cache.filled_names[info.id] = frozenset(names)
        return found

    def _local_mutations(self, info: FuncInfo) -> dict[str, list[ast.expr]]:
        found = self.cache.local_mutations.get(info.id)
        if found is not None:
            return found
        found = {}
        body = info.node.body if isinstance(getattr(info.node, "body", None), list) else []
        stack: list[ast.AST] = list(body)
        pop, extend = stack.pop, stack.extend
        while stack:
            node = pop()
            kind = type(node)
            if kind in _SCOPES:
                continue  # other scopes
            if kind is ast.Call:
                func = node.func
                if type(func) is ast.Attribute and func.attr in _FILLERS and type(func.value) is ast.Name:
                    values = [a.value if type(a) is ast.Starred else a for a in node.args]
                    found.setdefault(func.value.id, []).extend(values + [k.value for k in node.keywords])
            elif kind is ast.Assign or kind is ast.AugAssign:
                for target in node.targets if kind is ast.Assign else (node.target,):
                    if type(target) is ast.Subscript and type(target.value) is ast.Name:
                        found.setdefault(target.value.id, []).append(node.value)
            elif kind in _NO_CALL_INSIDE:
                continue
            extend(children(node))
        self.cache.local_mutations[info.id] = found
        return found

    def _module_info(self, source: SourceFile) -> FuncInfo:
        key = f"{source.name}:<module>"
        if key not in self.out.funcs:
            self.out.funcs[key] = FuncInfo(source, source.tree, "<module>", None, None)
        return self.out.funcs[key]

    def _expand_attr(self, nid: str, name: str) -> None:
        defs = self.attr_defs_for(name)
        data = self.out.g.nodes[nid]
        if defs:
            data["resolved"] = True
            data["loc"] = defs[0].loc
            for site in defs:
                value = site.value if site.value is not None else site.source
                if site.value_kind == "class" and value is None:
                    continue
                for dep in self.deps(value, site.func):
                    self.edge(dep, nid, "data", site.loc)
                self.guard_edges(nid, site.guards, innermost_only=False)
            return
        meth = self.config_method(name)
        if meth is not None:
            data["resolved"] = True
            data["loc"] = meth.loc()
            data["method"] = True
            self._expand_function(nid, meth)
            return
        data["resolved"] = False
        self.edge(self.unknown(f"attr:{name}", self._missing_reason("attribute", name), None), nid, "data")

    def _missing_reason(self, what: str, name: str) -> str:
        if self.st.config is None:
            return f"no config module given: ModelArgs.{name} cannot be resolved"
        if self.st.config_class is None:
            return f"{self.st.config.name} has no ModelArgs class: {what} {name} cannot be resolved"
        return f"ModelArgs ({self.st.config.name}) defines no {what} {name!r}"

    def _expand_key(self, nid: str, key: str) -> None:
        self.compose()
        defs = self.out.key_defs.get(key, [])
        data = self.out.g.nodes[nid]
        if not defs:
            data["resolved"] = False
            if self.st.config is None:
                reason = "no config module given"
            elif self.st.config_class is None and not self.config_builders():
                reason = f"{self.st.config.name} has no ModelArgs class"
            else:
                reason = f"no definition of model_config[{key!r}] in {self.st.config.name}"
                if self.out.dynamic_defs:
                    locs = ", ".join(d.loc for d in self.out.dynamic_defs[:3])
                    reason += f"; it may come from a dynamic key ({locs})"
            self.edge(self.unknown(f"key:{key}", reason, None), nid, "data")
            return
        data["resolved"] = True
        data["loc"] = defs[0].loc
        for site in defs:
            did = self.node(
                site.id,
                "definition",
                f"{key} = {short_value(site)}",
                site.loc,
                payload=(NodeKind.DEF, site),
                key=key,
            )
            self.edge(did, nid, "defines", site.loc)

    def _expand_def(self, nid: str, site: DefSite) -> None:
        value = site.value if site.value is not None else site.source
        for dep in self.deps(value, site.func):
            self.edge(dep, nid, "data", site.loc)
        self.guard_edges(nid, site.guards, innermost_only=False)
