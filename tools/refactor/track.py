"""Provenance of rewritten nodes: every pass that rebuilds a branching node records which original node it came
from, so the report can say, for each branch of the TTTv1 source, where it went."""

from __future__ import annotations

import libcst as cst

from .walk import hot_paths

#: Node types whose fate the report follows.
BRANCH_NODES = (cst.If, cst.IfExp, cst.BooleanOperation, cst.While, cst.Assert)


class Provenance:
    """Maps rewritten nodes back to the original node they were made from (identity based; keeps the nodes
    alive so identities stay unique)."""

    def __init__(self) -> None:
        self._origin: dict[int, cst.CSTNode] = {}
        self._keep: list[cst.CSTNode] = []

    def note(self, new: cst.CSTNode, old: cst.CSTNode) -> None:
        if new is old:
            return
        self._origin[id(new)] = self.origin(old)
        self._keep.append(new)

    def origin(self, node: cst.CSTNode) -> cst.CSTNode:
        return self._origin.get(id(node), node)


_TRACKED = (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement)
#: node class -> (tracked, expression), filled on first sight: isinstance against libcst's abstract bases is slow
#: on the per-node path of every transform.
_CLASS_OF: dict[type, tuple[bool, bool]] = {}


def _classify(node: cst.CSTNode) -> tuple[bool, bool]:
    found = _CLASS_OF.get(type(node))
    if found is None:
        found = (isinstance(node, _TRACKED), isinstance(node, cst.BaseExpression))
        _CLASS_OF[type(node)] = found
    return found


def is_tracked(node: cst.CSTNode) -> bool:
    """``isinstance(node, (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement))``, by a lookup."""
    return _classify(node)[0]


def is_expression(node: cst.CSTNode) -> bool:
    """``isinstance(node, cst.BaseExpression)``, by a lookup on the node's class."""
    return _classify(node)[1]


class TrackingTransformer(cst.CSTTransformer):
    """A transformer that records the provenance of every statement and expression it rebuilds (libcst
    rebuilds every node a transform passes through, so identities do not survive on their own)."""

    def __init__(self, prov: Provenance | None) -> None:
        super().__init__()
        self.prov = prov
        self.hot: set[int] | None = None  # when set (see walk.hot_paths): the only nodes worth entering

    def on_visit(self, node) -> bool:
        if self.hot is not None and id(node) not in self.hot:
            return False  # nothing below can change: the subtree is kept as it is
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        result = super().on_leave(original_node, updated_node)
        if self.prov is not None and _classify(result)[0] and _classify(original_node)[0]:
            self.prov.note(result, original_node)
        return result


class StatementTransformer(TrackingTransformer):
    """A transformer over statements only: it never descends into expressions, so they keep their identity
    (and their memoised summaries) and the pass costs a fraction of a full walk."""

    def on_visit(self, node) -> bool:
        if is_expression(node):
            return False
        return super().on_visit(node)


def replace_node(tree: cst.CSTNode, target: cst.CSTNode, replacement: cst.CSTNode, prov: Provenance | None):
    """``tree`` with ``target`` (found by identity) replaced, keeping provenance of everything else."""

    base = (
        StatementTransformer
        if isinstance(target, (cst.BaseStatement, cst.BaseSmallStatement))
        else TrackingTransformer
    )

    class _Replace(base):
        def on_leave(self, original_node, updated_node):
            if original_node is target:
                return replacement
            return super().on_leave(original_node, updated_node)

    replacer = _Replace(prov)
    replacer.hot = hot_paths(tree, lambda node: node is target)
    return tree.visit(replacer)
