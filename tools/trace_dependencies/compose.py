"""Config composition: every definition of every key and attribute, with its guards, in execution order
(ModelArgs.__init__ and the methods it calls, generated keys over constant iterables)."""

from __future__ import annotations

import ast

from .astutil import (
    NOTHING,
    const_eval,
    const_str,
    value_kind_of,
)
from .ids import (
    ARGS,
    MC,
    Scope,
)
from .index import ClassInfo
from .scan import FuncInfo, Guards
from .state import DefSite, Part


class Composition(Part):
    """Collecting the config's definitions in execution order."""

    def compose(self) -> None:
        """Walk ModelArgs.__init__ in execution order, inlining the methods it calls, to collect every
        definition of every key and attribute with the guards it sits under."""
        if self.out.composed:
            return
        self.out.composed = True
        self._compose_functions()
        if self.st.config_class is None:
            return
        self.st.progress("composing ModelArgs definitions")
        cls = self.st.config_class
        for klass in reversed(self.st.config_chain):
            for name, stmt in klass.class_attrs.items():
                info = self._class_body_info(klass)
                where = (
                    stmt.lineno,
                    klass.file.char_col(stmt.lineno, stmt.col_offset),
                    getattr(stmt, "end_lineno", stmt.lineno),
                )
                self.define(name, "attr", info, getattr(stmt, "value", None), where, (), (), "class")
        visited: set[str] = set()
        init = self.method_info(cls, "__init__")
        if init is not None:
            self._walk(init, (), (), visited)
        called: set[str] = set()
        methods: list[FuncInfo] = []
        for klass in self.st.config_chain:
            for mname in klass.methods:
                info = self.method_info(klass, mname)
                if info is None or info in methods:
                    continue
                methods.append(info)
                for event in info.events:
                    if event.kind == "call":
                        called.add(event.payload.func.attr)
        for info in methods:
            if info.qualname in visited or info.name in called:
                continue
            pseudo = (f"call:{info.qualname}", "called")
            self._walk(info, (pseudo,), (f"{info.qualname}()",), visited)
        for info in methods:  # methods only reachable through cycles
            if info.qualname not in visited:
                pseudo = (f"call:{info.qualname}", "called")
                self._walk(info, (pseudo,), (f"{info.qualname}()",), visited)

    # -- configs built by functions (T3000-era style) -------------------------------------------------------
    def config_builders(self) -> dict[str, FuncInfo]:
        """Module-level functions of the config file that return a dict: a literal, ``dict(...)``, a local holding
        one, or what another builder returns (``get_model_config`` -> ``get_decode_model_config``)."""
        builders = self.cache.builders
        if builders is not None:
            return builders
        builders = {}
        if self.st.config is not None:
            candidates = [self.module_function(self.st.config, name) for name in self.st.cindex.functions]
            changed = True
            while changed:
                changed = False
                for info in candidates:
                    if info is not None and info.name not in builders and self._returns_dict(info, builders):
                        builders[info.name] = info
                        changed = True
        self.cache.builders = builders
        return builders

    def _returns_dict(self, info: FuncInfo, builders: dict[str, FuncInfo]) -> bool:
        def is_dict(value: ast.AST | None) -> bool:
            if isinstance(value, (ast.Dict, ast.DictComp)):
                return True
            return (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and (value.func.id == "dict" or value.func.id in builders)
            )

        for value, _guards in info.returns:
            if is_dict(value):
                return True
            if isinstance(value, ast.Name) and any(is_dict(s.value) for s in info.assigns.get(value.id, ())):
                return True
        return False

    def builder_dict_names(self, info: FuncInfo) -> frozenset[str]:
        """The locals a config builder returns: inside it they are the model_config dict."""
        if info.parent is not None or info.cls is not None or info.file is not self.st.config:
            return frozenset()
        if self.config_builders().get(info.name) is not info:
            return frozenset()
        return frozenset(v.id for v, _ in info.returns if isinstance(v, ast.Name))

    def builder_callers(self, name: str) -> list[tuple[FuncInfo, ast.Call]]:
        """Calls ``name(...)`` made by the config file's functions (to bind a builder's parameters)."""
        out = []
        for caller_name in self.st.cindex.functions if self.st.cindex is not None else ():
            caller = self.module_function(self.st.config, caller_name)
            for event in caller.events if caller is not None else ():
                if event.kind == "fcall" and event.payload.func.id == name:
                    out.append((caller, event.payload))
        return out

    def entry_builders(self) -> list[FuncInfo]:
        """The builders no function of the config file calls: where composition starts (the dispatchers)."""
        if self.cache.entry_builders is None:
            builders = self.config_builders()
            self.cache.entry_builders = [
                info for name, info in builders.items() if not self.builder_callers(name)
            ]
        return self.cache.entry_builders

    def _compose_functions(self) -> None:
        builders = self.config_builders()
        if not builders:
            return
        self.st.progress("composing the config functions' definitions")
        visited: set[str] = set()
        for info in self.entry_builders():
            self._walk(info, (), (), visited)
        for info in builders.values():  # builders only reachable through cycles
            if info.qualname not in visited:
                pseudo = (f"call:{info.qualname}", "called")
                self._walk(info, (pseudo,), (f"{info.qualname}()",), visited)

    def define(
        self,
        name: str,
        kind: str,
        info: FuncInfo,
        value: ast.expr | None,
        where: tuple[int, int, int],
        guards: Guards,
        via,
        value_kind: str | None = None,
        **extra,
    ) -> DefSite:
        """Record one definition (in execution order): of a key (``kind="key"``; ``dynamic=`` when the key has no
        name) or of an attribute. ``where`` is (line, character column, end line)."""
        self.out.order += 1
        line, col, end = where
        site = DefSite(
            name,
            kind,
            info,
            value,
            extra.pop("source", None),
            line,
            col,
            end,
            guards,
            self.out.order,
            value_kind or value_kind_of(value),
            via=via,
            **extra,
        )
        if site.dynamic is not None:
            self.out.dynamic_defs.append(site)
        else:
            (self.out.key_defs if kind == "key" else self.out.attr_defs).setdefault(name, []).append(site)
        return site

    def _class_body_info(self, klass: ClassInfo) -> FuncInfo:
        key = f"{klass.file.name}:{klass.name}.<class>"
        if key not in self.out.funcs:
            info = FuncInfo(klass.file, klass.node, f"{klass.name}.<class>", klass, None)
            self.out.funcs[key] = info
        return self.out.funcs[key]

    def _walk(
        self, info: FuncInfo, prefix: Guards, via: tuple[str, ...], visited: set[str], stack=()
    ) -> None:
        visited.add(info.qualname)
        stack = (*stack, info.qualname)
        for event in sorted(info.events, key=lambda ev: ev.order):
            guards = (*prefix, *event.guards)
            if event.kind == "attr":
                name, site = event.payload
                where = (site.line, site.col, site.line)
                self.define(name, "attr", info, site.value, where, guards, via, source=site.source)
                if name == "model_config" and isinstance(site.value, ast.Dict):
                    self._dict_defs(site.value, info, guards, via, site.line, site.col, "value")
            elif event.kind == "key":
                self._key_event(event.payload, info, guards, via)
            elif event.kind == "mutate":
                self._mutation(event.payload, info, guards, via)
            elif event.kind == "del":
                self._del_event(event.payload, info, guards, via)
            elif event.kind == "dict":
                name, value = event.payload
                if name in self.builder_dict_names(info):
                    site = next(s for s in info.assigns[name] if s.value is value)
                    if isinstance(value, ast.Dict):
                        self._dict_defs(value, info, guards, via, site.line, site.col, "value")
                    elif isinstance(value, ast.DictComp):
                        self._dictcomp_defs(value, info, guards, via, site.line, site.col, site.line)
                    else:
                        for kw in value.keywords:
                            if kw.arg:
                                self._keyword_def(kw, info, guards, via, site.line)
            elif event.kind == "fcall":
                call = event.payload
                target = self.config_builders().get(call.func.id) if info.file is self.st.config else None
                if (
                    target is not None
                    and target.qualname not in stack
                    and self.lookup(call.func.id, info)[0] is Scope.FUNCTION
                ):
                    self._walk(
                        target,
                        guards,
                        (*via, f"{info.name}() line {call.lineno} -> {target.name}()"),
                        visited,
                        stack,
                    )
            elif event.kind == "call":
                call = event.payload
                target = (
                    self.method_info(self.st.config_class, call.func.attr) if self.st.config_class else None
                )
                if target is not None and target.qualname not in stack:
                    self._walk(
                        target,
                        guards,
                        (*via, f"{info.name}() line {call.lineno} -> {target.name}()"),
                        visited,
                        stack,
                    )

    def _key_event(self, sa, info: FuncInfo, guards: Guards, via) -> None:
        if self.role(sa.target.value, info) is not MC:
            return
        stmt = sa.stmt
        end = getattr(stmt, "end_lineno", stmt.lineno)
        keys = self.key_names(sa.target.slice, info, sa.loops)
        line, col = sa.target.lineno, info.file.char_col(sa.target.lineno, sa.target.col_offset)
        if keys is None:
            dynamic = f"model_config[{info.file.segment(sa.target.slice, 60)}]"
            self.define("?", "key", info, sa.value, (line, col, end), guards, via, dynamic=dynamic)
            return
        for key, env in keys:
            self.define(key, "key", info, sa.value, (line, col, end), guards, via, env=env)

    def _del_event(self, target: ast.Subscript, info: FuncInfo, guards: Guards, via) -> None:
        """``del model_config[KEY]``: a definition of kind "deleted" (no value), so last-assignment-wins ends the
        earlier definitions on its path; a key that cannot be named is a dynamic definition."""
        if self.role(target.value, info) is not MC:
            return
        line, col = target.lineno, info.file.char_col(target.lineno, target.col_offset)
        where = (line, col, getattr(target, "end_lineno", line))
        keys = self.key_names(target.slice, info, ())
        if keys is None:
            dynamic = f"del model_config[{info.file.segment(target.slice, 60)}]"
            self.define("?", "key", info, None, where, guards, via, "deleted", dynamic=dynamic)
            return
        for key, env in keys:
            self.define(key, "key", info, None, where, guards, via, "deleted", env=env)

    def _mutation(self, mut, info: FuncInfo, guards: Guards, via) -> None:
        if self.role(mut.base, info) is not MC:
            return
        call = mut.call
        line, end = call.lineno, getattr(call, "end_lineno", call.lineno)
        col = info.file.char_col(line, call.col_offset)
        if mut.method == "setdefault" and call.args:
            key = const_str(call.args[0])
            value = call.args[1] if len(call.args) > 1 else None
            if key is not None:
                self.define(key, "key", info, value, (line, col, end), guards, via, only_if_absent=True)
                return
        if mut.method != "update":
            return
        handled = True
        for arg in call.args:
            if isinstance(arg, ast.Dict):
                self._dict_defs(arg, info, guards, via, line, col, "value", end)
            elif isinstance(arg, ast.DictComp):
                handled = self._dictcomp_defs(arg, info, guards, via, line, col, end) and handled
            elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "dict":
                for kw in arg.keywords:
                    if kw.arg:
                        self._keyword_def(kw, info, guards, via, end)
            else:
                handled = False
        for kw in call.keywords:
            if kw.arg:
                self._keyword_def(kw, info, guards, via, end)
        if not handled:
            dynamic = f"model_config.update({info.file.segment(call.args[0] if call.args else None, 60)})"
            self.define("?", "key", info, None, (line, col, end), guards, via, dynamic=dynamic)

    def _keyword_def(self, kw: ast.keyword, info: FuncInfo, guards: Guards, via, end: int) -> None:
        """``update(KEY=value)`` / ``dict(KEY=value)``: one definition of KEY."""
        where = (kw.value.lineno, info.file.char_col(kw.value.lineno, kw.value.col_offset), end)
        self.define(kw.arg, "key", info, kw.value, where, guards, via)

    def _dict_defs(self, d: ast.Dict, info, guards, via, line, col, kind, end=None) -> None:
        for k, v in zip(d.keys, d.values):
            key = const_str(k)
            if key is None:
                continue
            where = (k.lineno, info.file.char_col(k.lineno, k.col_offset), end or v.end_lineno or k.lineno)
            self.define(key, "key", info, v, where, guards, via)

    def _dictcomp_defs(self, comp: ast.DictComp, info, guards, via, line, col, end) -> bool:
        if len(comp.generators) != 1 or not isinstance(comp.generators[0].target, ast.Name):
            return False
        gen = comp.generators[0]
        var = gen.target.id
        values = self.static_iter(gen.iter, info)
        if values is None:
            return False
        produced = False
        constants = self.constant_names(info)
        for item in values:
            env = {var: item}
            scope = {**constants, **env}  # module constants for the filters (``key not in NO_MEMCFG``)
            if not all(const_eval(test, scope) is True for test in gen.ifs):
                continue
            key = const_eval(comp.key, scope)
            if not isinstance(key, str):
                return False
            value = comp.value
            while isinstance(value, ast.IfExp):
                test = const_eval(value.test, scope)
                if test is NOTHING:
                    break
                value = value.body if test else value.orelse
            where = (comp.key.lineno, info.file.char_col(comp.key.lineno, comp.key.col_offset), end)
            self.define(key, "key", info, value, where, guards, via, "comprehension", env=env)
            produced = True
        return produced or not values

    def constant_names(self, info: FuncInfo) -> dict[str, object]:
        """Module-level names of ``info``'s file bound once to a constant (``NO_MEMCFG = ("SOFTMAX_OUTPUT",)``), for
        evaluating generated keys and their filters."""
        cached = self.cache.constants.get(info.file.name)
        if cached is None:
            cached = {}
            for name, stmts in self.index(info.file).globals.items():
                value = getattr(stmts[0], "value", None) if len(stmts) == 1 else None
                result = const_eval(value, {})
                if result is not NOTHING:
                    cached[name] = result
            self.cache.constants[info.file.name] = cached
        return cached

    def key_names(self, slice_: ast.expr, info: FuncInfo, loops) -> list[tuple[str, dict]] | None:
        """The keys ``model_config[slice_]`` names inside ``loops`` (innermost loop that binds a name of the
        slice), each with the loop values that make it; None when they cannot be named."""
        key = const_str(slice_)
        if key is not None:
            return [(key, {})]
        names = {n.id for n in ast.walk(slice_) if isinstance(n, ast.Name)}
        constants = self.constant_names(info)
        for target, iterable in reversed(loops):
            envs = self.loop_envs(target, iterable, info, names)
            if envs is None:
                continue
            out = []
            for env in envs:
                value = const_eval(slice_, {**constants, **env})
                if not isinstance(value, str):
                    return None
                out.append((value, env))
            return out
        value = const_eval(slice_, constants)
        return [(value, {})] if isinstance(value, str) else None

    def loop_envs(self, target: ast.expr, iterable: ast.expr, info: FuncInfo, names: set[str]):
        """One ``{name: value}`` per iteration of ``for target in iterable`` for the target names in ``names``:
        ``for k in OP_KEYS`` or ``for name, n in (("A", 16), ("B", 4))`` (other tuple parts may be anything).
        None when the loop binds none of ``names``; ``[]`` for an empty loop."""
        if isinstance(target, ast.Name):
            if target.id not in names:
                return None
            values = self.static_iter(iterable, info)
            return None if values is None else [{target.id: v} for v in values]
        if not isinstance(target, (ast.Tuple, ast.List)):
            return None
        parts = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        wanted = [i for i, name in enumerate(parts) if name in names]
        if not wanted:
            return None
        rows = self.static_rows(iterable, info)
        if rows is None:
            return None
        envs = []
        for row in rows:
            if not isinstance(row, (ast.Tuple, ast.List)) or len(row.elts) != len(parts):
                return None
            env = {parts[i]: const_eval(row.elts[i], {}) for i in wanted}
            if any(v is NOTHING for v in env.values()):
                return None
            envs.append(env)
        return envs

    def static_rows(self, e: ast.expr, info: FuncInfo, depth: int = 0) -> list[ast.expr] | None:
        """The element expressions of a literal tuple / list (directly, or through a local / global bound once)."""
        if isinstance(e, (ast.Tuple, ast.List)):
            return list(e.elts)
        if isinstance(e, ast.Name) and depth < 6:
            kind, owner = self.lookup(e.id, info)
            if (
                kind is Scope.LOCAL
                and len(owner.assigns[e.id]) == 1
                and owner.assigns[e.id][0].value is not None
            ):
                return self.static_rows(owner.assigns[e.id][0].value, owner, depth + 1)
            if kind is Scope.GLOBAL and len(owner.globals[e.id]) == 1:
                value = getattr(owner.globals[e.id][0], "value", None)
                return self.static_rows(value, info, depth + 1) if value is not None else None
        return None

    def loop_keys(self, slice_: ast.expr, info: FuncInfo) -> list[str] | None:
        """Keys of ``mc[k]`` / ``mc[f"{k}_X"]`` where ``k`` loops over a statically known iterable."""
        names = [n.id for n in ast.walk(slice_) if isinstance(n, ast.Name)]
        if len(set(names)) != 1:
            return None
        kind, owner = self.lookup(names[0], info)
        if kind is not Scope.LOCAL:
            return None
        sites = owner.assigns[names[0]]
        if len(sites) != 1 or sites[0].kind not in ("for", "comp") or sites[0].source is None:
            return None
        values = self.static_iter(sites[0].source, owner)
        if not values:
            return None
        out = []
        for item in values:
            key = const_eval(slice_, {names[0]: item})
            if not isinstance(key, str):
                return None
            out.append(key)
        return out

    def read_keys(
        self, slice_: ast.expr, info: FuncInfo, loops=None
    ) -> tuple[list[str] | None, tuple | None]:
        """The keys a read ``model_config[slice_]`` can name, and the parameter they depend on (or None):
        a constant iterable the key loops over (``for k in OP_KEYS``, ``for name, w in (("A", w1), ...)``), module
        constants (``PREFIX + "_X"``), or the constants every call site seen so far passes to a parameter
        (``def _project(self, x, name): model_config[f"{name}_MM_PROGCFG"]``). (None, None) when unknown."""
        keys = self.loop_keys(slice_, info)
        if keys:
            return keys, None
        if loops is None:
            loops = self.expr_loops(info).get(id(slice_), ())
        named = self.key_names(slice_, info, loops)
        if named:
            return [k for k, _env in named], None
        names = {n.id for n in ast.walk(slice_) if isinstance(n, ast.Name)}
        if len(names) != 1:
            return None, None
        (name,) = names
        kind, owner = self.lookup(name, info)
        if kind is not Scope.PARAM:
            return None, None
        values = self.param_constants(owner, name)
        if not values:
            return None, None
        constants = self.constant_names(info)
        keys = [const_eval(slice_, {**constants, name: v}) for v in sorted(values, key=repr)]
        if not all(isinstance(k, str) for k in keys):
            return None, None
        return keys, (owner.id, name)

    def expr_loops(self, info: FuncInfo) -> dict[int, tuple]:
        """The enclosing ``for`` loops of each recorded subscript's slice in ``info`` (cached)."""
        cached = self.cache.expr_loops.get(info.id)
        if cached is None:
            cached = {
                id(s.node.slice): s.loops for s in info.exprs if isinstance(s.node, ast.Subscript) and s.loops
            }
            self.cache.expr_loops[info.id] = cached
        return cached

    def static_iter(self, e: ast.expr, info: FuncInfo, depth: int = 0):
        if depth > 6:
            self.cut("constant iterable", e, info, 6)
            return None
        value = const_eval(e, {})
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(e, ast.Attribute) and self.role(e.value, info) is ARGS:
            for klass in self.st.config_chain:
                stmt = klass.class_attrs.get(e.attr)
                if stmt is not None and getattr(stmt, "value", None) is not None:
                    return self.static_iter(stmt.value, info, depth + 1)
            return None
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.LOCAL:
                sites = owner.assigns[e.id]
                if len(sites) == 1 and sites[0].value is not None:
                    return self.static_iter(sites[0].value, owner, depth + 1)
            if kind is Scope.GLOBAL:
                stmts = owner.globals[e.id]
                if len(stmts) == 1 and getattr(stmts[0], "value", None) is not None:
                    return self.static_iter(stmts[0].value, info, depth + 1)
        return None

    def attr_defs_for(self, name: str) -> list[DefSite]:
        self.compose()
        return self.out.attr_defs.get(name, [])
