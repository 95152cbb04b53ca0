"""Pass 2 over the module and the helpers it reaches: config reads, terminal ttnn ops and calls of each visited
function."""

from __future__ import annotations

import ast

from . import constants as C
from .astutil import (
    const_str,
    unparse,
)
from .ids import ARGS, MC, NodeKind, RoleKind, Scope, is_kind, node_id
from .scan import FuncInfo, Guards, loc_of
from .state import OpRecord, Part, ReadRecord


class Visitor(Part):
    """Recording the reads, ops and callees of one visited function."""

    def _visit(self, info: FuncInfo, phase: str, via: tuple[str, ...], first: bool):
        """Record branches, config reads, ops and helper calls of one function; return its callees."""
        side = "module" if info.file is self.st.module else "helper"
        if info.file is self.st.config:
            side = "helper"
        for site in info.branches:
            self.out.branch_phase.setdefault(site.id, set()).add(phase)
            if site.id not in self.out.module_branches:
                self.out.module_branches[site.id] = side
            self.branch_node(site.id)
        call_funcs = {id(c.node.func): c.node for c in info.calls}
        record_reads = info.file is not self.st.config and first
        if record_reads:
            for site in info.exprs:
                self._read_from_expr(site, info, phase, call_funcs)
        if first:
            for site in info.binops:
                op = _BINOP_OPS.get(type(site.node.op))
                if op and (self.is_tensor(site.node.left, info) or self.is_tensor(site.node.right, info)):
                    deps = self.deps(site.node, info)
                    self._record_op(
                        op, f"{_BINOP_SYMBOLS[op]} (tensor operator)", site.node, site, info, phase, via, deps
                    )
        callees: list[tuple[FuncInfo, Guards, str]] = []
        for call in reversed(info.calls):  # inner calls first: outer calls reuse their dependencies
            node = call.node
            loc = loc_of(info.file, node)
            deps = self.deps(node, info)  # also binds parameters of every callee
            # valid for the rest of the run: a call site changing a role already looked up restarts it (engine.run)
            self.cache.call_deps[id(node)] = (node, frozenset(deps))
            if record_reads:
                self._read_from_call(call, info, phase)
            op = self.op_name(node, info)
            if op is not None and first:
                name, spelled = op
                self._record_op(name, spelled, node, call, info, phase, via, deps)
            for callee in self.callees_of(node, info):
                callees.append((callee, self.path_guards(call), loc, node))
        return callees

    def callees_of(self, call: ast.Call, info: FuncInfo) -> list[FuncInfo]:
        func = call.func
        if isinstance(func, ast.Attribute):
            base = self.base_method_call(call, info)
            if base is not None:  # super().m(...), Base.m(self, ...)
                return [base[0]] if base[0] is not None else []
            role = self.role(func.value, info)
            if role is ARGS:
                meth = self.config_method(func.attr)
                return [meth] if meth is not None else []
            if role is not None and role.kind is RoleKind.SELF:
                return self.self_callees(role.cls, func.attr)
            cls = self.instance_class(func.value, info)
            method = self.method_info(cls, func.attr) if cls is not None else None
            return [method] if method is not None else []
        if isinstance(func, ast.Name):
            if self.role_name(func.id, info) is not None:
                return []
            return self.name_callees(func.id, info) or []
        if isinstance(func, ast.Subscript) and self.role(func.value, info) is MC:
            key = const_str(func.slice)
            return self.key_callees(key) if key is not None else []
        return []

    def op_name(self, call: ast.Call, info: FuncInfo) -> tuple[str, str] | None:
        func = call.func
        if isinstance(func, (ast.Attribute, ast.Name)):
            role = self.role(func, info)
            if role is not None and role.kind is RoleKind.TTNN and "." in role.path:
                full = role.path
                last = full.rsplit(".", 1)[-1]
                if last[:1].isupper() or last in C.TTNN_NON_OPS or last in C.HW_FUNCS:
                    return None
                return full, info.file.segment(func, 60)
            if isinstance(func, ast.Attribute) and func.attr in C.TENSOR_METHOD_OPS:
                base = self.role(func.value, info)
                if base is None:
                    return f"ttnn.Tensor.{func.attr}", info.file.segment(func, 60)
        return None

    def is_tensor(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        """Whether ``e`` holds a device tensor: a ttnn op result, a weight made with ttnn.as_tensor/from_torch,
        or a parameter annotated ``ttnn.Tensor``."""
        if depth > 6:
            self.cut("tensor test", e, info, 6)
            return False
        if isinstance(e, ast.Call):
            if self.op_name(e, info) is not None:
                return True
            role = self.role(e.func, info) if isinstance(e.func, (ast.Name, ast.Attribute)) else None
            return (
                role is not None and role.kind is RoleKind.TTNN and role.last in ("as_tensor", "from_torch")
            )
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.LOCAL:
                return any(
                    s.value is not None and self.is_tensor(s.value, owner, depth + 1)
                    for s in self.local_sites(e, info, owner)
                )
            if kind is Scope.PARAM:
                ann = owner.annotations.get(e.id)
                return ann is not None and unparse(ann).endswith("Tensor")
            return False
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role is not None and role.kind is RoleKind.SELF:
                return any(
                    s.value is not None and self.is_tensor(s.value, i, depth + 1)
                    for i, s in self.self_sites(role.cls, e.attr)
                )
        if isinstance(e, ast.Subscript):
            return self.is_tensor(e.value, info, depth + 1)
        return False

    def _record_op(self, name, spelled, node, call, info, phase, via, deps) -> None:
        loc = loc_of(info.file, node)
        nid = self.node(node_id(NodeKind.OP, name), "op", name)
        for dep in deps:
            if not is_kind(dep, NodeKind.OP):
                self.edge(dep, nid, "arg", loc)
        self.guard_edges(nid, call.guards)
        guards = self.path_guards(call)
        self.out.ops.append(OpRecord(name, loc, info.qualname, spelled, phase, guards, via, info.id))

    def path_guards(self, site) -> tuple:
        """A call's or operator's guards plus the path ends before it (an arm that raised, an assert that
        failed: scan.Scanner.ends) that topology and mode can decide; the others would only say "unless it
        raised" where nothing decides whether it does."""
        if not site.ends:
            return site.guards
        ends = tuple(g for g in site.ends if g not in site.guards and _decidable(self.branch_tree(g[0])))
        return (*site.guards, *ends) if ends else site.guards

    def _read(
        self,
        name,
        kind,
        via,
        node_ast,
        info,
        phase,
        site_guards,
        in_cond,
        default=None,
        called=None,
        note=None,
    ):
        loc = loc_of(info.file, node_ast)
        if (loc, name) in self.out.read_locs:
            return
        self.out.read_locs.add((loc, name))
        if kind == "key":
            nid = self.key_node(name)
        elif kind == "attr":
            nid = self.attr_node(name)
        else:
            nid = self.method_node(name)
        self.out.reads.append(
            ReadRecord(
                name,
                kind,
                via,
                loc,
                info.qualname,
                nid,
                in_cond,
                site_guards,
                phase,
                info.id,
                default=default,
                called_with=called,
                note=note,
            )
        )

    def _read_from_expr(self, site, info: FuncInfo, phase: str, call_funcs) -> None:
        e = site.node
        if isinstance(e, ast.Subscript):
            role = self.role(e.value, info)
            if role is not MC:
                return
            key = const_str(e.slice)
            call = call_funcs.get(id(e))
            called = [info.file.segment(a, 40) for a in call.args] if call is not None else None
            if key is None:
                keys, param = self.read_keys(e.slice, info, site.loops)
                if param is not None:  # named by the call sites' constants: read them once all are seen
                    self.out.deferred_reads.append((site, info, phase, called))
                    return
                if keys:
                    for key in keys:
                        self._read(
                            key,
                            "key",
                            info.file.segment(e, 80),
                            e,
                            info,
                            phase,
                            site.guards,
                            site.in_condition,
                            called=called,
                            note=f"key from {info.file.segment(e.slice, 30)} over a constant iterable",
                        )
                    return
                loc = loc_of(info.file, e)
                self.unknown(
                    f"dynkey:{loc}",
                    f"model_config[{info.file.segment(e.slice, 40)}]: key is not a constant",
                    loc,
                )
                self.skip(
                    loc,
                    f"model_config[{info.file.segment(e.slice, 40)}]",
                    "key is not a constant string",
                    "warning",
                )
                return
            self._read(
                key,
                "key",
                info.file.segment(e, 80),
                e,
                info,
                phase,
                site.guards,
                site.in_condition,
                called=called,
            )
        elif isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role is not ARGS or e.attr in ("model_config", "get_model_config"):
                return
            call = call_funcs.get(id(e))
            if call is not None:
                called = [info.file.segment(a, 40) for a in call.args] + [
                    f"{k.arg}={info.file.segment(k.value, 30)}" for k in call.keywords
                ]
                self._read(
                    e.attr,
                    "method",
                    info.file.segment(e, 80) + "()",
                    e,
                    info,
                    phase,
                    site.guards,
                    site.in_condition,
                    called=called,
                )
                return
            meth = self.config_method(e.attr)
            if meth is not None and not meth.is_property:
                self._read(
                    e.attr,
                    "method",
                    info.file.segment(e, 80),
                    e,
                    info,
                    phase,
                    site.guards,
                    site.in_condition,
                    note="callable passed as a value",
                )
                return
            self._read(
                e.attr, "attr", info.file.segment(e, 80), e, info, phase, site.guards, site.in_condition
            )

    def resolve_deferred_reads(self) -> None:
        """Reads whose key comes from a parameter's constants, now that every call site has been visited."""
        for site, info, phase, called in self.out.deferred_reads:
            e = site.node
            keys, _param = self.read_keys(e.slice, info, site.loops)
            for key in keys or ():
                self._read(
                    key,
                    "key",
                    info.file.segment(e, 80),
                    e,
                    info,
                    phase,
                    site.guards,
                    site.in_condition,
                    called=called,
                    note=f"key from {info.file.segment(e.slice, 30)} with the constants its call sites pass",
                )
        for (fid, name), (loc, seen) in self.out.param_key_uses.items():
            values = self.out.param_consts.get((fid, name))
            if values is None or len(values) != seen:
                self.skip(
                    loc,
                    f"model_config[...] keyed by parameter {name!r}",
                    "its dependency edges were drawn before every call site was seen; the reads list every key",
                    "warning",
                )

    def _read_from_call(self, call, info: FuncInfo, phase: str) -> None:
        node = call.node
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and self.role(func.value, info) is MC:
            key = const_str(node.args[0]) if node.args else None
            if key is not None:
                default = info.file.segment(node.args[1], 40) if len(node.args) > 1 else "None"
                self._read(
                    key,
                    "key",
                    info.file.segment(node, 80),
                    node,
                    info,
                    phase,
                    call.guards,
                    call.in_condition,
                    default=default,
                )
        elif (
            isinstance(func, ast.Name)
            and func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and self.role(node.args[0], info) is ARGS
        ):
            attr = const_str(node.args[1])
            if attr is not None:
                default = info.file.segment(node.args[2], 40) if len(node.args) > 2 else None
                self._read(
                    attr,
                    "attr",
                    info.file.segment(node, 80),
                    node,
                    info,
                    phase,
                    call.guards,
                    call.in_condition,
                    default=default,
                    note=f"{func.id}()",
                )


_BINOP_OPS = {
    ast.Add: "ttnn.add",
    ast.Sub: "ttnn.subtract",
    ast.Mult: "ttnn.multiply",
    ast.Div: "ttnn.divide",
    ast.MatMult: "ttnn.matmul",
}
_BINOP_SYMBOLS = {
    "ttnn.add": "+",
    "ttnn.subtract": "-",
    "ttnn.multiply": "*",
    "ttnn.divide": "/",
    "ttnn.matmul": "@",
}


def _decidable(tree) -> bool:
    """Whether a fact tree names anything an assumption or a call site can decide (a fact or a parameter)."""
    if tree is None:
        return False
    kind = tree[0]
    if kind == "not":
        return _decidable(tree[1])
    if kind in ("and", "or"):
        return any(_decidable(t) for t in tree[1])
    return kind in ("fact", "param", "param_eq")
