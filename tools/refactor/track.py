"""Provenance of rewritten nodes: every pass that rebuilds a branching node records which original node it came
from, so the report can say, for each branch of the TTTv1 source, where it went."""

from __future__ import annotations

import libcst as cst

from .fstrings import compatible_fstring
from .walk import hot_paths, walk

#: Node types whose fate the report follows (a ``match`` stands for each of its cases).
BRANCH_NODES = (cst.If, cst.IfExp, cst.BooleanOperation, cst.While, cst.Assert, cst.Match)


class Provenance:
    """Maps rewritten nodes back to the original node they were made from (identity based; keeps the nodes
    alive so identities stay unique)."""

    def __init__(self) -> None:
        self._origin: dict[int, cst.CSTNode] = {}
        self._keep: list[cst.CSTNode] = []
        self.phase = ""  # what is being planned: "construction" or a mode (set by the planner)
        #: (phase, id(original branch)) -> (the original, why its code was dropped there)
        self.dropped: dict[tuple[str, int], tuple[cst.CSTNode, str]] = {}

    def drop(self, node: cst.CSTNode, reason: str) -> None:
        """``node`` is left out of the output of the current phase: the branches in it do not run there."""

        for n in walk(node):
            if isinstance(n, BRANCH_NODES):
                origin = self.origin(n)
                self.dropped.setdefault((self.phase, id(origin)), (origin, reason))

    def note(self, new: cst.CSTNode, old: cst.CSTNode) -> None:
        if new is old:
            return
        self._origin[id(new)] = self.origin(old)
        self._keep.append(new)

    def origin(self, node: cst.CSTNode) -> cst.CSTNode:
        return self._origin.get(id(node), node)

    def set_origin(self, node: cst.CSTNode, origin: cst.CSTNode) -> None:
        """``node`` stands for ``origin`` (an original node), whatever was noted for it before: a node that
        replaces its parent by one of its own parts keeps the origin of that part, not the parent's."""
        if node is not origin:
            self._origin[id(node)] = origin
            self._keep.append(node)
        else:
            self._origin.pop(id(node), None)


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

    def leave_FormattedString(self, original_node, updated_node):
        """A pass that puts a string where a name was can put it inside an f-string: keep it valid on 3.10."""
        return compatible_fstring(updated_node)


class StatementTransformer(TrackingTransformer):
    """A transformer over statements only: it never descends into expressions, so they keep their identity
    (and their memoised summaries) and the pass costs a fraction of a full walk."""

    def on_visit(self, node) -> bool:
        if is_expression(node):
            return False
        return super().on_visit(node)


def _not_expression(node: cst.CSTNode) -> bool:
    return not is_expression(node)


def replace_node(tree: cst.CSTNode, target: cst.CSTNode, replacement: cst.CSTNode, prov: Provenance | None):
    """``tree`` with ``target`` (found by identity) replaced, keeping provenance of everything else."""

    statement = isinstance(target, (cst.BaseStatement, cst.BaseSmallStatement))
    base = StatementTransformer if statement else TrackingTransformer

    class _Replace(base):
        def on_leave(self, original_node, updated_node):
            if original_node is target:
                return replacement
            return super().on_leave(original_node, updated_node)

    replacer = _Replace(prov)
    # a statement replacer enters no expression: the search for the target (and for shared nodes) skips them too
    replacer.hot = hot_paths(tree, lambda node: node is target, _not_expression if statement else None)
    return tree.visit(replacer)
