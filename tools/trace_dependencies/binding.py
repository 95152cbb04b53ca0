"""Callees and binding: which functions a call may reach, binding call-site arguments to parameters, and all
handling of function values (lambdas, nested defs): a function value depends on its closure only."""

from __future__ import annotations

import ast

from .astutil import (
    const_str,
    unique_funcs,
)
from .ids import (
    ARGS,
    MC,
    PASSED_ON,
    RoleKind,
    Scope,
)
from .index import ClassInfo
from .scan import FuncInfo, Guards, loc_of
from .state import Part


class RolesChanged(Exception):
    """A call site gave a parameter a role after the run looked the parameter up and found another (none, or one
    from its name): what the run computed is stale (engine.run redoes it)."""


class Binding(Part):
    """Callees, argument binding and function values (lambdas)."""

    def self_callees(self, cls: ClassInfo, name: str) -> list[FuncInfo]:
        meth = self.method_info(cls, name)
        if meth is not None:
            return [meth]
        out = []
        for info, site in self.self_sites(cls, name):
            out.extend(self.value_callees(site.value, info))
        return out

    def base_method_call(self, call: ast.Call, info: FuncInfo) -> tuple[FuncInfo | None, bool] | None:
        """``(callee, skip_first)`` for ``super().m(...)`` / ``super(K, self).m(...)`` (the next class after the
        method's own in the MRO of the instance's class that defines ``m``) and ``Base.m(self, ...)`` (``self``
        passed explicitly); the callee is None when no analysed class defines ``m``. None for any other call."""
        func = call.func
        if type(func) is not ast.Attribute:
            return None
        base = func.value
        if type(base) is ast.Call and type(base.func) is ast.Name and base.func.id == "super":
            if self.lookup("super", info)[0] is not Scope.BUILTIN:
                return None
            method = info
            while method.parent is not None:
                method = method.parent
            cls = method.cls
            if base.args and type(base.args[0]) is ast.Name:
                cls = self.class_named(base.args[0].id, info) or cls
            return (self._next_method(cls, func.attr) if cls is not None else None), True
        if type(base) is ast.Name and call.args and type(call.args[0]) is ast.Name:
            first = self.role_name(call.args[0].id, info)
            if first is None or first.kind is not RoleKind.SELF:
                return None
            if self.lookup(base.id, info)[0] not in (Scope.CLASS, Scope.IMPORT):
                return None
            cls = self.class_named(base.id, info)
            if cls is not None:
                return self.method_info(cls, func.attr), False
        return None

    def _next_method(self, cls: ClassInfo, name: str) -> FuncInfo | None:
        """The method ``name`` of the first class after ``cls`` in the MRO of the instance's class."""
        chain = self.mro(self.self_class(cls))
        index = next((i for i, k in enumerate(chain) if k is cls), None)
        for klass in chain[index + 1 :] if index is not None else ():
            if name in klass.methods:
                return self.register(self.index(klass.file).method(klass, name))
        return None

    def value_callees(self, value: ast.AST | None, info: FuncInfo, depth: int = 0) -> list[FuncInfo]:
        """Functions a value may hold (lambdas, nested defs, functions), following simple aliases."""
        if value is None:
            return []
        if depth > 6:
            self.cut("callee resolution", value, info, 6)
            return []
        if isinstance(value, ast.Lambda):
            return [self.nested_info(info, value)]
        cls = self.instance_class(value, info) if isinstance(value, ast.Call) else None
        if cls is not None:  # an instance of an analysed class: calling it runs forward / __call__
            entry = self.call_entry(cls)
            return [entry] if entry is not None else []
        if isinstance(value, ast.Name):
            return self.name_callees(value.id, info, depth + 1) or []
        if isinstance(value, ast.IfExp):
            return self.value_callees(value.body, info, depth + 1) + self.value_callees(
                value.orelse, info, depth + 1
            )
        if isinstance(value, ast.Attribute):
            role = self.role(value.value, info)
            if role is ARGS:
                meth = self.config_method(value.attr)
                return [meth] if meth is not None else []
            if role is not None and role.kind is RoleKind.SELF:
                return self.self_callees(role.cls, value.attr)
        if isinstance(value, ast.Subscript) and self.role(value.value, info) is MC:
            key = const_str(value.slice)
            if key is not None:
                return self.key_callees(key)
        return []

    def name_callees(self, name: str, info: FuncInfo, depth: int = 0) -> list[FuncInfo] | None:
        kind, owner = self.lookup(name, info)
        if kind is Scope.LOCAL:
            out = []
            for site in owner.assigns[name]:
                if site.kind == "def" and name in owner.nested:
                    out.append(self.nested_info(owner, owner.nested[name]))
                else:
                    out.extend(self.value_callees(site.value, owner, depth + 1))
            return unique_funcs(out)
        if kind is Scope.FUNCTION:
            fn = self.module_function(info.file, name)
            return [fn] if fn is not None else []
        cls = self.class_named(name, info) if kind in (Scope.CLASS, Scope.IMPORT) else None
        if cls is not None:  # constructing an analysed class runs its __init__
            init = self.method_info(cls, "__init__")
            return [init] if init is not None else []
        if kind is Scope.IMPORT:
            fn = self.imported_function(info.file, name)
            return [fn] if fn is not None else None
        if kind is Scope.PARAM:
            return []
        return []

    def key_callees(self, key: str) -> list[FuncInfo]:
        self.compose()
        out = []
        for site in self.out.key_defs.get(key, ()):
            out.extend(self.value_callees(site.value, site.func))
        return unique_funcs(out)

    def bind(self, callee: FuncInfo, call: ast.Call, caller: FuncInfo, skip_first: bool) -> None:
        memo = (id(call), callee.id)
        if memo in self.out.bound:
            return
        self.out.bound.add(memo)
        saved, self.work.inline = self.work.inline, None
        try:
            self._bind(callee, call, caller, skip_first)
        finally:
            self.work.inline = saved

    def _bind(self, callee: FuncInfo, call: ast.Call, caller: FuncInfo, skip_first: bool) -> None:
        params = list(callee.params)
        if skip_first and params and callee.self_name:
            params = params[1:]
        loc = loc_of(caller.file, call)
        pairs: list[tuple[str, ast.expr]] = []
        positional = list(call.args)
        starred = None
        for i, arg in enumerate(positional):
            if isinstance(arg, ast.Starred):
                starred = arg.value
                break
            if i < len(params):
                pairs.append((params[i], arg))
            elif callee.vararg:
                pairs.append((callee.vararg, arg))
        named = {k.arg: k.value for k in call.keywords if k.arg is not None}
        double = [k.value for k in call.keywords if k.arg is None]
        where = f"{callee.qualname}() ({callee.loc()})"
        if len(positional) > len(params) and not callee.vararg and starred is None:
            self.skip(
                loc,
                f"call {callee.qualname}()",
                f"{len(positional)} positional arguments, but {where} takes {len(params)}",
                "warning",
            )
        positional_names = {p for p, _ in pairs}
        for pname, value in named.items():
            if pname in callee.params:
                if pname in positional_names:
                    self.skip(
                        loc,
                        f"call {callee.qualname}()",
                        f"argument {pname!r} given by position and by keyword ({where})",
                        "warning",
                    )
                pairs.append((pname, value))
            elif callee.kwarg:
                pairs.append((callee.kwarg, value))
            else:
                self.skip(loc, f"call {callee.qualname}()", f"{where} has no parameter {pname!r}", "warning")
        bound_now = {p for p, _ in pairs}
        for pname in params:
            if pname not in bound_now:
                default = callee.defaults.get(pname)
                self._const_binding(callee, pname, default)
        for pname, value in pairs:
            self._const_binding(callee, pname, value)
        if starred is not None or double:
            bound_names = {p for p, _ in pairs}
            for pname in params:
                if pname not in bound_names:
                    for value in ([starred] if starred is not None else []) + double:
                        pairs.append((pname, value))
            self.skip(
                loc,
                f"call {callee.qualname}()",
                "*args/**kwargs at the call site: bound to every remaining parameter",
            )
        for pname, value in pairs:
            self._bind_role(callee, pname, value, caller)
        for pname, value in pairs:
            target = self.param_node(callee, pname)
            if target is None:
                continue
            self.out.g.nodes[target]["bound"] = True
            for dep in self.deps(value, caller):
                self.edge(dep, target, "bind", loc)

    def _bind_role(self, callee: FuncInfo, pname: str, value: ast.AST, caller: FuncInfo) -> None:
        """A parameter that receives model_config / ModelArgs / the mesh device / os.environ / an HF config at a
        call site stands for it inside the callee, whatever its name (``def helper(cfg): cfg["K"]``)."""
        key = (callee.id, pname)
        if key in self.out.param_roles or pname == callee.self_name:
            return
        role = self.role(value, caller)
        if role not in PASSED_ON:
            return
        self.out.param_roles[key] = role
        # the run already used this parameter in another role: redo it
        if self.out.role_misses.get(key, role) != role:
            raise RolesChanged(key)
        # roles computed before this binding may be stale: forget them (rare, cheap to recompute)
        self.cache.name_roles.clear()
        self.cache.attr_roles.clear()
        self.cache.role_epoch += 1

    def _const_binding(self, callee: FuncInfo, pname: str, value: ast.AST | None) -> None:
        key = (callee.id, pname)
        if isinstance(value, ast.Constant) and not isinstance(value.value, (bytes, complex)):
            values = self.out.param_consts.setdefault(key, set())
            if values is not None:
                values.add(value.value)
        else:
            self.out.param_consts[key] = None

    def param_constants(self, info: FuncInfo, name: str):
        """The constants a parameter receives at every call site seen, or None if any is not constant."""
        return self.out.param_consts.get((info.id, name))

    def config_callers(self, name: str) -> list[tuple[FuncInfo, ast.Call]]:
        """Calls ``self.<name>(...)`` made inside the config class (to bind the parameters of ``name``)."""
        if self.cache.config_callers is None:
            self.cache.config_callers = {}
            for klass in self.st.config_chain:
                for mname in klass.methods:
                    info = self.method_info(klass, mname)
                    for event in info.events if info is not None else ():
                        if event.kind == "call":
                            self.cache.config_callers.setdefault(event.payload.func.attr, []).append(
                                (info, event.payload)
                            )
        return self.cache.config_callers.get(name, [])

    def _expand_function(self, nid: str, info: FuncInfo) -> None:
        """A function *value* depends on its closure only (self attributes, enclosing locals, globals, keys, env,
        hardware, the functions it calls), never on its own parameters: those belong to each call site, which
        adds its arguments' dependencies to the call's result itself. Parameters still receive 'bind' edges from
        every call site, which classify the branches inside the function."""
        for dep in self.closure_deps(info):
            self.edge(dep, nid, "data", info.loc())

    def closure_deps(self, info: FuncInfo) -> set[str]:
        saved = self.work.inline
        self.work.inline = (info, set())
        out: set[str] = set()
        try:
            for value, guards in info.returns:
                if value is not None:
                    self._deps(value, info, out)
                self._inline_guards(guards, info, out)
        finally:
            self.work.inline = saved
        return out

    def _inline_guards(self, guards: Guards, owner: FuncInfo, out: set[str]) -> None:
        fn = self.work.inline[0] if self.work.inline else None
        for bid, _arm in guards:
            entry = self.out.branch_index.get(bid)
            if entry is None:
                continue
            site, where = entry
            if where is fn:
                for decider in site.deciders:
                    self._deps(decider, where, out)
            else:
                out.add(self.branch_node(bid))

    def _inline_name(self, name: str, info: FuncInfo, out: set[str]) -> bool:
        """While computing a function's closure: own parameters vanish, own locals are inlined."""
        fn, seen = self.work.inline
        kind, owner = self.lookup(name, info)
        if owner is not fn:
            return False
        if kind is Scope.PARAM:
            return True
        if kind is not Scope.LOCAL:
            return False
        if name in seen:
            return True
        seen.add(name)
        for site in owner.assigns[name]:
            if site.kind == "def" and name in owner.nested:
                out.add(self.func_node(self.nested_info(owner, owner.nested[name])))
                continue
            if site.kind == "import":
                continue
            value = site.value if site.value is not None else site.source
            if value is not None:
                self._deps(value, owner, out)
            self._inline_guards(site.guards, owner, out)
        return True
