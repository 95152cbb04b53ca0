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
        if self.st.config_class is None:
            return
        self.st.progress("composing ModelArgs definitions")
        cls = self.st.config_class
        for klass in reversed(self.st.config_chain):
            for name, stmt in klass.class_attrs.items():
                info = self._class_body_info(klass)
                value = getattr(stmt, "value", None)
                self.out.order += 1
                site = DefSite(
                    name,
                    "attr",
                    info,
                    value,
                    None,
                    stmt.lineno,
                    klass.file.char_col(stmt.lineno, stmt.col_offset),
                    getattr(stmt, "end_lineno", stmt.lineno),
                    (),
                    self.out.order,
                    "class",
                )
                self.out.attr_defs.setdefault(name, []).append(site)
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
                self.out.order += 1
                end = site.line
                d = DefSite(
                    name,
                    "attr",
                    info,
                    site.value,
                    site.source,
                    site.line,
                    site.col,
                    end,
                    guards,
                    self.out.order,
                    value_kind_of(site.value),
                    via=via,
                )
                self.out.attr_defs.setdefault(name, []).append(d)
                if name == "model_config" and isinstance(site.value, ast.Dict):
                    self._dict_defs(site.value, info, guards, via, site.line, site.col, "value")
            elif event.kind == "key":
                self._key_event(event.payload, info, guards, via)
            elif event.kind == "mutate":
                self._mutation(event.payload, info, guards, via)
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
        if self.role(sa.target.value, info) != MC:
            return
        stmt = sa.stmt
        end = getattr(stmt, "end_lineno", stmt.lineno)
        keys = self.key_names(sa.target.slice, info, sa.loops)
        line, col = sa.target.lineno, info.file.char_col(sa.target.lineno, sa.target.col_offset)
        if keys is None:
            self.out.order += 1
            d = DefSite(
                "?",
                "key",
                info,
                sa.value,
                None,
                line,
                col,
                end,
                guards,
                self.out.order,
                value_kind_of(sa.value),
                via=via,
                dynamic=f"model_config[{info.file.segment(sa.target.slice, 60)}]",
            )
            self.out.dynamic_defs.append(d)
            return
        for key, env in keys:
            self.out.order += 1
            d = DefSite(
                key,
                "key",
                info,
                sa.value,
                None,
                line,
                col,
                end,
                guards,
                self.out.order,
                value_kind_of(sa.value),
                env=env,
                via=via,
            )
            self.out.key_defs.setdefault(key, []).append(d)

    def _mutation(self, mut, info: FuncInfo, guards: Guards, via) -> None:
        if self.role(mut.base, info) != MC:
            return
        call = mut.call
        line, end = call.lineno, getattr(call, "end_lineno", call.lineno)
        col = info.file.char_col(line, call.col_offset)
        if mut.method == "setdefault" and call.args:
            key = const_str(call.args[0])
            value = call.args[1] if len(call.args) > 1 else None
            if key is not None:
                self.out.order += 1
                self.out.key_defs.setdefault(key, []).append(
                    DefSite(
                        key,
                        "key",
                        info,
                        value,
                        None,
                        line,
                        col,
                        end,
                        guards,
                        self.out.order,
                        value_kind_of(value),
                        via=via,
                    )
                )
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
                        self.out.order += 1
                        self.out.key_defs.setdefault(kw.arg, []).append(
                            DefSite(
                                kw.arg,
                                "key",
                                info,
                                kw.value,
                                None,
                                kw.value.lineno,
                                info.file.char_col(kw.value.lineno, kw.value.col_offset),
                                end,
                                guards,
                                self.out.order,
                                value_kind_of(kw.value),
                                via=via,
                            )
                        )
            else:
                handled = False
        for kw in call.keywords:
            if kw.arg:
                self.out.order += 1
                self.out.key_defs.setdefault(kw.arg, []).append(
                    DefSite(
                        kw.arg,
                        "key",
                        info,
                        kw.value,
                        None,
                        kw.value.lineno,
                        info.file.char_col(kw.value.lineno, kw.value.col_offset),
                        end,
                        guards,
                        self.out.order,
                        value_kind_of(kw.value),
                        via=via,
                    )
                )
        if not handled:
            self.out.order += 1
            self.out.dynamic_defs.append(
                DefSite(
                    "?",
                    "key",
                    info,
                    None,
                    None,
                    line,
                    col,
                    end,
                    guards,
                    self.out.order,
                    "value",
                    via=via,
                    dynamic=f"model_config.update({info.file.segment(call.args[0] if call.args else None, 60)})",
                )
            )

    def _dict_defs(self, d: ast.Dict, info, guards, via, line, col, kind, end=None) -> None:
        for k, v in zip(d.keys, d.values):
            key = const_str(k)
            if key is None:
                continue
            self.out.order += 1
            self.out.key_defs.setdefault(key, []).append(
                DefSite(
                    key,
                    "key",
                    info,
                    v,
                    None,
                    k.lineno,
                    info.file.char_col(k.lineno, k.col_offset),
                    end or v.end_lineno or k.lineno,
                    guards,
                    self.out.order,
                    value_kind_of(v),
                    via=via,
                )
            )

    def _dictcomp_defs(self, comp: ast.DictComp, info, guards, via, line, col, end) -> bool:
        if len(comp.generators) != 1 or not isinstance(comp.generators[0].target, ast.Name):
            return False
        gen = comp.generators[0]
        var = gen.target.id
        values = self.static_iter(gen.iter, info)
        if values is None:
            return False
        produced = False
        for item in values:
            env = {var: item}
            if not all(const_eval(test, env) is True for test in gen.ifs):
                continue
            key = const_eval(comp.key, env)
            if not isinstance(key, str):
                return False
            value = comp.value
            while isinstance(value, ast.IfExp):
                test = const_eval(value.test, env)
                if test is NOTHING:
                    break
                value = value.body if test else value.orelse
            self.out.order += 1
            self.out.key_defs.setdefault(key, []).append(
                DefSite(
                    key,
                    "key",
                    info,
                    value,
                    None,
                    comp.key.lineno,
                    info.file.char_col(comp.key.lineno, comp.key.col_offset),
                    end,
                    guards,
                    self.out.order,
                    "comprehension",
                    env=env,
                    via=via,
                )
            )
            produced = True
        return produced or not values

    def key_names(self, slice_: ast.expr, info: FuncInfo, loops) -> list[tuple[str, dict]] | None:
        key = const_str(slice_)
        if key is not None:
            return [(key, {})]
        names = {n.id for n in ast.walk(slice_) if isinstance(n, ast.Name)}
        for target, iterable in reversed(loops):
            if isinstance(target, ast.Name) and target.id in names:
                values = self.static_iter(iterable, info)
                if values is None:
                    return None
                out = []
                for item in values:
                    env = {target.id: item}
                    value = const_eval(slice_, env)
                    if not isinstance(value, str):
                        return None
                    out.append((value, env))
                return out
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

    def static_iter(self, e: ast.expr, info: FuncInfo, depth: int = 0):
        if depth > 6:
            self.cut("constant iterable", e, info, 6)
            return None
        value = const_eval(e, {})
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(e, ast.Attribute) and self.role(e.value, info) == ARGS:
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
