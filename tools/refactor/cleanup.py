"""Dead code after specialisation: assignments nobody reads, ``if`` statements with nothing left in them, and
imports the new module does not use."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from .cstutil import assigned_names, block_statements, is_pure, names_read, small_statement
from .track import Provenance, StatementTransformer, is_expression
from .walk import hot_paths


class _DeadStores(StatementTransformer):
    def __init__(self, live: set[str], pure_call: Callable[[cst.Call], bool] | None, prov) -> None:
        super().__init__(prov)
        self.live = live
        self.pure_call = pure_call
        self.changed = False

    def would_change(self, node: cst.CSTNode) -> bool:
        """Whether a leave hook below changes ``node`` when nothing inside it changed (the nodes worth entering
        are those and their ancestors)."""
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            small = small_statement(node)
            if small is None or isinstance(small, cst.AugAssign):
                return False
            return any(n not in self.live for n in assigned_names(small) or ())
        if kind is cst.If:
            return _empty(node.body) and _empty_orelse(node.orelse) and is_pure(node.test, self.pure_call)
        if kind is cst.IndentedBlock:
            body = node.body
            if any(isinstance(small_statement(s), (cst.Return, cst.Raise)) for s in body[:-1]):
                return True
            passes = sum(1 for s in body if _is_pass(s))
            return 0 < passes < len(body)
        return False

    def leave_SimpleStatementLine(self, original_node, updated_node):
        small = small_statement(updated_node)
        if small is None or isinstance(small, cst.AugAssign):
            return updated_node
        names = assigned_names(small)
        if not names:
            return updated_node
        unused = [n for n in names if n not in self.live]
        if not unused:
            return updated_node
        if len(unused) < len(names):
            to_rename = {n for n in unused if not n.startswith("_")}
            if to_rename and isinstance(small, cst.Assign) and len(small.targets) == 1:
                self.changed = True
                return updated_node.with_changes(body=[_rename_targets(small, to_rename)])
            return updated_node
        value = getattr(small, "value", None)
        if value is not None and not is_pure(value, self.pure_call):
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                self.changed = True  # the call must still run; nobody reads what it returns
                return updated_node.with_changes(body=[cst.Expr(value=value)])
            return updated_node
        self._drop(original_node, f"dead code: nothing reads {', '.join(names)}")
        return cst.RemoveFromParent()

    def leave_If(self, original_node, updated_node):
        body_empty = _empty(updated_node.body) and _empty_orelse(updated_node.orelse)
        if body_empty and is_pure(updated_node.test, self.pure_call):
            self._drop(original_node, "dead code: nothing left in it")
            return cst.RemoveFromParent()
        return updated_node

    def _drop(self, node: cst.CSTNode, reason: str) -> None:
        self.changed = True
        if self.prov is not None:
            self.prov.drop(node, reason)

    def leave_IndentedBlock(self, original_node, updated_node):
        # statements after a return / raise never run; a block left empty renders as ``pass``
        body = list(updated_node.body)
        for index, statement in enumerate(body):
            if isinstance(small_statement(statement), (cst.Return, cst.Raise)) and index + 1 < len(body):
                for unreachable in body[index + 1 :]:
                    self._drop(unreachable, "dead code: after a return / raise")
                body = body[: index + 1]
                break
        kept = [s for s in body if not _is_pass(s)]
        if kept and len(kept) != len(body):
            body = kept
        if len(body) != len(updated_node.body):
            return updated_node.with_changes(body=body)
        return updated_node


def _rename_targets(assign: cst.Assign, unused: set[str]) -> cst.Assign:
    """``a, b = f()`` with ``a`` unread -> ``_a, b = f()`` (an unpacking that must keep its shape)."""

    class _T(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            if updated_node.value in unused and not updated_node.value.startswith("_"):
                return updated_node.with_changes(value="_" + updated_node.value)
            return updated_node

    target = assign.targets[0]
    if not isinstance(target.target, (cst.Tuple, cst.List)):
        return assign
    return assign.with_changes(targets=[target.with_changes(target=target.target.visit(_T()))])


def _is_pass(statement: cst.CSTNode) -> bool:
    small = small_statement(statement)
    return isinstance(small, cst.Pass) and not statement.leading_lines


def _empty(block: cst.BaseSuite) -> bool:
    return all(_is_pass(s) for s in block_statements(block))


def _empty_orelse(orelse) -> bool:
    if orelse is None:
        return True
    if isinstance(orelse, cst.Else):
        return _empty(orelse.body)
    return _empty(orelse.body) and _empty_orelse(orelse.orelse)


def remove_dead_code(
    node: cst.CSTNode,
    pure_call: Callable[[cst.Call], bool] | None = None,
    keep: set[str] | None = None,
    prov: Provenance | None = None,
) -> cst.CSTNode:
    """Remove, until nothing changes, assignments of pure values to names nobody reads (``keep`` names are
    always live) and ``if`` statements left empty with a pure test."""
    while True:
        live = names_read(node) | (keep or set())
        transformer = _DeadStores(live, pure_call, prov)
        transformer.hot = hot_paths(node, transformer.would_change, lambda n: not is_expression(n))
        node = node.visit(transformer)
        if not transformer.changed:
            return node


def unused_imports(module: cst.Module) -> cst.Module:
    """Drop imported names the module never reads (``from __future__`` imports stay)."""
    used = names_read(module)  # an attribute chain reads its root name, so ``import os.path`` counts too

    class _T(StatementTransformer):
        def leave_ImportFrom(self, original_node, updated_node):
            module_name = updated_node.module
            if isinstance(module_name, cst.Name) and module_name.value == "__future__":
                return updated_node
            if isinstance(updated_node.names, cst.ImportStar):
                return updated_node
            kept = [a for a in updated_node.names if _alias_name(a) in used]
            if not kept:
                return cst.RemoveFromParent()
            if len(kept) != len(updated_node.names):
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated_node.with_changes(names=kept)
            return updated_node

        def leave_Import(self, original_node, updated_node):
            kept = [a for a in updated_node.names if _alias_name(a) in used]
            if not kept:
                return cst.RemoveFromParent()
            if len(kept) != len(updated_node.names):
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated_node.with_changes(names=kept)
            return updated_node

    transformer = _T(None)
    transformer.hot = hot_paths(
        module, lambda n: type(n) in (cst.Import, cst.ImportFrom), lambda n: not is_expression(n)
    )
    return module.visit(transformer)


def _alias_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    name = alias.name
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value if isinstance(name, cst.Name) else ""
