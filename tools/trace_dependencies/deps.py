"""Expression dependencies: the graph nodes an expression's value depends on (iteratively, so deep nesting
cannot overflow), including the explicit unknowns for code chosen at run time."""

from __future__ import annotations

import ast

from . import constants as C
from .astutil import (
    const_str,
    endswith_mode,
    is_none,
)
from .ids import (
    ARGS,
    ENVIRON,
    GETENV,
    HFCFG,
    MC,
    MESH,
    RoleKind,
    Scope,
)
from .scan import FuncInfo, _fields, loc_of
from .state import Part


class Dependencies(Part):
    """The dependencies of an expression."""

    def deps(self, e: ast.AST | None, info: FuncInfo) -> set[str]:
        out: set[str] = set()
        if e is not None:
            self._deps(e, info, out)
        return out

    def _deps(self, e: ast.AST, info: FuncInfo, out: set[str]) -> None:
        stack = [e]
        pop, push, extend = stack.pop, stack.append, stack.extend
        call_cache = self.cache.call_deps if self.work.inline is None else {}
        while stack:
            e = pop()
            kind = type(e)
            if kind is ast.Constant or e is None:
                continue
            if kind is ast.Name:
                self._name_dep(e, info, out)
            elif kind is ast.Attribute:
                extend(self._attr_dep(e, info, out))
            elif kind is ast.Call:
                cached = call_cache.get(id(e))
                if cached is not None and cached[0] is e:
                    out.update(cached[1])
                else:
                    extend(self._call_parts(e, info, out))
            elif kind is ast.Subscript:
                extend(self._sub_dep(e, info, out))
            elif kind is ast.Lambda:
                out.add(self.func_node(self.nested_info(info, e)))
            elif kind is ast.Compare and self._compare_dep(e, info, out):
                continue
            elif kind is ast.IfExp:
                push(e.body)
                push(e.orelse)
                self._truth_dep(e.test, info, out, stack)
            elif kind is ast.BoolOp:
                for value in e.values:
                    self._truth_dep(value, info, out, stack)
            elif kind is ast.UnaryOp and type(e.op) is ast.Not:
                self._truth_dep(e.operand, info, out, stack)
            elif isinstance(e, _SKIP_CHILDREN):
                continue
            else:
                for field in _fields(kind):
                    value = getattr(e, field, None)
                    if type(value) is list:
                        extend(v for v in value if isinstance(v, ast.AST))
                    elif isinstance(value, ast.AST):
                        push(value)

    def _call_parts(self, e: ast.Call, info: FuncInfo, out: set[str]) -> list:
        """:meth:`_call_dep`, once per call node while the roles stay the same. What a call adds by itself (the
        callee's node, keys, env, hardware; argument binding) does not depend on the closure being computed
        (``work.inline`` only changes how the names among its sub-expressions resolve, and those are left to the
        walk), so closures and expansions that meet the same call again reuse it."""
        memo = self.cache.call_parts.get(id(e))
        epoch = self.cache.role_epoch
        if memo is not None and memo[0] is e and memo[1] is info and memo[2] == epoch:
            out.update(memo[3])
            return memo[4]
        added: set[str] = set()
        children = self._call_dep(e, info, added)
        out.update(added)
        if self.cache.role_epoch == epoch:  # no role was bound meanwhile: the parts are current
            self.cache.call_parts[id(e)] = (e, info, epoch, frozenset(added), children)
        return children

    def _truth_dep(self, e: ast.AST, info: FuncInfo, out: set[str], stack: list) -> None:
        """``if mesh_device`` / ``mesh_device and ...`` test whether a device is present."""
        if isinstance(e, (ast.Name, ast.Attribute)) and self.role(e, info) is MESH:
            out.add(self.hw("device_present"))
        else:
            stack.append(e)

    def _name_dep(self, e: ast.Name, info: FuncInfo, out: set[str]) -> None:
        name = e.id
        role = self.role_name(name, info)
        if role is MESH:
            out.add(self.hw("mesh_device"))
            return
        if role is not None:
            return
        if self.work.inline is not None and self._inline_name(name, info, out):
            return
        kind, owner = self.lookup(name, info)
        if kind is Scope.LOCAL:
            sites = owner.assigns[name]
            if all(s.kind == "def" for s in sites) and name in owner.nested:
                out.add(self.func_node(self.nested_info(owner, owner.nested[name])))
            else:
                out.update(self.local_uses(e, info, owner))
        elif kind is Scope.PARAM:
            nid = self.param_node(owner, name)
            if nid:
                out.add(nid)
        elif kind is Scope.GLOBAL:
            out.add(self.global_node(info.file, name))
        elif kind is Scope.FUNCTION:
            fn = self.module_function(info.file, name)
            if fn is not None:
                out.add(self.func_node(fn))
        elif kind is Scope.IMPORT:
            _module, attr, _level = info.file.imports[name]
            if attr in C.HW_FUNCS:
                return  # referenced, not called: nothing flows
            target = self.imported_function(info.file, name)
            if target is not None:
                out.add(self.func_node(target))

    def _attr_dep(self, e: ast.Attribute, info: FuncInfo, out: set[str]) -> list:
        role = self.role(e.value, info)
        if role is None:
            if (
                isinstance(e.value, (ast.Name, ast.Attribute))
                and e.attr in C.MODE_VALUES
                and endswith_mode(e.value)
            ):
                return []  # Mode.DECODE / Mode.PREFILL: constants
            return [e.value]
        kind = role.kind
        if kind is RoleKind.ARGS:
            if e.attr != "model_config":
                out.add(self.attr_node(e.attr))
            return []
        if kind is RoleKind.MESH:
            out.add(self.hw(C.MESH_MEMBERS.get(e.attr, "mesh_device")))
            return []
        if kind is RoleKind.OS and e.attr == "environ":
            out.add(
                self.env("*", loc_of(info.file, e))
            )  # the whole environment (copied, passed on, iterated)
            return []
        if kind is RoleKind.SELF:
            nid = self.self_attr_node(role.cls, e.attr)
            if nid is not None:
                out.add(nid)
            else:
                meth = self.method_info(role.cls, e.attr)
                if meth is not None:
                    out.add(self.func_node(meth))
            return []
        return []

    def _sub_dep(self, e: ast.Subscript, info: FuncInfo, out: set[str]) -> list:
        role = self.role(e.value, info)
        key = const_str(e.slice)
        loc = loc_of(info.file, e)
        if role is MC:
            if key == C.MODE_KEY:  # the mode a per-mode dict carries: the mode itself (facts.is_mode)
                out.add(self.node("input:mode", "mode", "mode (per-call: decode / prefill)", info.loc()))
                return []
            if key is not None:
                out.add(self.key_node(key))
                return []
            keys, param = self.read_keys(e.slice, info)
            if keys:
                out.update(self.key_node(k) for k in keys)
                if param is not None:  # which key depends on the argument: keep that dependency
                    self.out.param_key_uses.setdefault(param, (loc, len(keys)))
                    return [e.slice]
                return []
            out.add(
                self.unknown(
                    f"dynkey:{loc}",
                    f"model_config[{info.file.segment(e.slice, 40)}]: key is not a constant",
                    loc,
                )
            )
            return [e.slice]
        if role is ENVIRON and key is not None:
            out.add(self.env(key, loc))
            return []
        if role is HFCFG and key is not None:
            out.add(self.hf(key, loc))
            return []
        return [e.value, e.slice]

    def _compare_dep(self, e: ast.Compare, info: FuncInfo, out: set[str]) -> bool:
        if len(e.ops) != 1:
            return False
        left, right, op = e.left, e.comparators[0], e.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and is_none(right) and self.role(left, info) is MESH:
            out.add(self.hw("device_present"))
            return True
        if (
            isinstance(op, (ast.In, ast.NotIn))
            and const_str(left) is not None
            and self.role(right, info) is HFCFG
        ):
            out.add(self.hf(const_str(left), loc_of(info.file, e)))
            return True
        return False

    def _call_dep(self, e: ast.Call, info: FuncInfo, out: set[str]) -> list:
        func = e.func
        args = [a.value if isinstance(a, ast.Starred) else a for a in e.args]
        args += [k.value for k in e.keywords]
        loc = loc_of(info.file, e)
        if isinstance(func, ast.Attribute):
            base = self.base_method_call(e, info)
            if base is not None:  # super().m(...), Base.m(self, ...): the base class's method
                callee, skip_first = base
                if callee is None:
                    if func.attr != "__init__":  # a base's method not analysed may hold ops: say so
                        what = f"{info.file.segment(func, 60)}()"
                        reason = f"no analysed base class defines {func.attr}(): not followed"
                        out.add(self.unknown(f"base:{loc}", reason, loc))
                        self.skip(loc, what, reason, "warning")
                    elif args:  # a base constructor outside the analysed files, given values
                        out.add(self.extern(f"super.{func.attr}", loc))
                    return args
                out.add(self.func_node(callee))
                self.bind(callee, e, info, skip_first=skip_first)
                return args[1:] if not skip_first else args
            role = self.role(func.value, info)
            name = func.attr
            kind = role.kind if role else None
            if kind is RoleKind.ARGS:
                if name == "get_model_config":
                    return []
                out.add(self.method_node(name))
                meth = self.config_method(name)
                if meth is not None:
                    self.bind(meth, e, info, skip_first=True)
                return args
            if kind is RoleKind.MC:
                key = const_str(e.args[0]) if e.args else None
                if name in ("get", "pop", "setdefault") and key is not None:
                    out.add(self.key_node(key))
                    return args[1:]
                return args
            if kind is RoleKind.ENVIRON and name == "get":
                key = const_str(e.args[0]) if e.args else None
                if key is not None:
                    out.add(self.env(key, loc))
                    return args[1:]
                out.add(self.unknown(f"env:{loc}", "environment variable with a non-constant name", loc))
                return args
            if (kind is RoleKind.OS and name == "getenv") or kind is RoleKind.GETENV:
                return self._getenv(e, info, loc, out)
            if kind is RoleKind.HFCFG:
                key = const_str(e.args[0]) if e.args else None
                if name == "get" and key is not None:
                    out.add(self.hf(key, loc))
                    return args[1:]
                return args
            if kind is RoleKind.MESH:
                out.add(self.hw(C.MESH_MEMBERS.get(name, "mesh_device")))
                return args
            if kind is RoleKind.TTNN:
                last = name
                if last in C.HW_FUNCS:
                    out.add(self.hw(C.HW_FUNCS[last]))
                return args
            if kind is RoleKind.SELF:
                for callee in self.self_callees(role.cls, name):
                    out.add(self.func_node(callee))
                    self.bind(callee, e, info, skip_first=callee.self_name is not None)
                return args
            cls = self.instance_class(func.value, info)
            method = self.method_info(cls, name) if cls is not None else None
            if method is not None:  # self.norm.forward(x): a method of an analysed class's instance
                out.add(self.func_node(method))
                self.bind(method, e, info, skip_first=method.self_name is not None)
                return [func.value, *args]
            if name in C.HW_FUNCS and isinstance(func.value, (ast.Name, ast.Attribute)):
                out.add(self.hw(C.HW_FUNCS[name]))
                return args
            return [func.value, *args]
        if isinstance(func, ast.Name):
            name = func.id
            role = self.role_name(name, info)
            dynamic = self._dynamic_call(e, name, info, loc)
            if dynamic is not None:
                out.add(dynamic)
                return args
            if role is GETENV:
                return self._getenv(e, info, loc, out)
            if role is not None and role.kind is RoleKind.TTNN:
                last = role.last
                if last in C.HW_FUNCS:
                    out.add(self.hw(C.HW_FUNCS[last]))
                return args
            if name in ("getattr", "hasattr") and len(e.args) >= 2 and self.role(e.args[0], info) is ARGS:
                attr = const_str(e.args[1])
                if attr is not None:
                    if self.config_has(attr) or (name == "getattr" and len(e.args) < 3):
                        out.add(self.attr_node(attr))
                    # else: the attribute does not exist, hasattr is False and getattr gives the default
                    return args[2:]
                out.add(self.unknown(f"getattr:{loc}", "getattr on ModelArgs with a non-constant name", loc))
                return args
            kind, _owner = self.lookup(name, info)
            if kind in (Scope.IMPORT, Scope.BUILTIN) and name in C.HW_FUNCS:
                out.add(self.hw(C.HW_FUNCS[name]))
                return args
            callees = self.name_callees(name, info)
            if callees is None:
                if kind is Scope.IMPORT:
                    module, attr, _ = info.file.imports[name]
                    out.add(self.extern(f"{module}.{attr or name}".strip("."), loc))
                return args
            for callee in callees:
                out.add(self.func_node(callee))
                self.bind(callee, e, info, skip_first=callee.self_name is not None)
            return args
        if isinstance(func, ast.Subscript) and self.role(func.value, info) is MC:
            key = const_str(func.slice)
            if key is not None:
                for callee in self.key_callees(key):
                    self.bind(callee, e, info, skip_first=False)
        return [func, *args]

    def _dynamic_call(self, e: ast.Call, name: str, info: FuncInfo, loc: str) -> str | None:
        """``exec``/``eval``/``compile``/``__import__`` and ``getattr(module, <computed name>)``: code chosen at run
        time. Each is an explicit unknown at its file:line (so ``--strict`` fails), never silently nothing."""
        if name not in C.DYNAMIC_CODE and name != "getattr":
            return None
        if self.lookup(name, info)[0] is not Scope.BUILTIN:
            return None
        if name in C.DYNAMIC_CODE:
            reason = f"{name}() runs code chosen at run time: not followed"
        else:
            if len(e.args) < 2 or const_str(e.args[1]) is not None:
                return None
            base = self.role(e.args[0], info)
            if base is None or base.kind not in (RoleKind.TTNN, RoleKind.OS):
                return None
            target = "ttnn" if base.kind is RoleKind.TTNN else "os"
            reason = f"getattr({target}, {info.file.segment(e.args[1], 40)}): member chosen at run time: not followed"
        self.skip(loc, info.file.segment(e, 60), reason, "warning")
        return self.unknown(f"dynamic:{loc}", reason, loc)

    def _getenv(self, e: ast.Call, info: FuncInfo, loc: str, out: set[str]) -> list:
        key = const_str(e.args[0]) if e.args else None
        rest = [a for a in e.args[1:]] + [k.value for k in e.keywords]
        if key is not None:
            out.add(self.env(key, loc))
        else:
            out.add(self.unknown(f"env:{loc}", "environment variable with a non-constant name", loc))
        return rest


_SKIP_CHILDREN = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
