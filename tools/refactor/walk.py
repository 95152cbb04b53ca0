"""Read-only walks over LibCST trees without LibCST's visit machinery.

``node.visit(visitor)`` and ``node.children`` both go through ``_visit_and_replace_children``, which rebuilds
(and re-validates) every node it passes, even for a visitor that changes nothing: most of the codemod's
read-only passes paid for a whole-tree rebuild. Here the children of a node are read straight from its fields,
in the order LibCST itself visits them (taken once per node class from the keyword order of that class's
``_visit_and_replace_children``), so a :class:`libcst.CSTVisitor` driven by :func:`visit_read_only` sees
exactly the calls ``node.visit`` would make, in the same order."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from operator import attrgetter

import libcst as cst
from libcst._nodes.base import BaseLeaf

_VISIT_HELPERS = frozenset(
    {
        "visit_required",
        "visit_optional",
        "visit_sentinel",
        "visit_sequence",
        "visit_iterable",
        "visit_body_sequence",
        "visit_body_iterable",
    }
)

_DEFAULT = cst.MaybeSentinel.DEFAULT
_SEQUENCES = (tuple, list)

#: node class -> a function giving the values of its fields that hold children, in LibCST's visit order
_GETTERS: dict[type, object] = {}


def _getter(cls: type):
    found = _GETTERS.get(cls)
    if found is None:
        names = _child_fields(cls)
        if not names:
            found = _no_fields
        elif len(names) == 1:
            one = attrgetter(names[0])
            found = lambda node: (one(node),)  # noqa: E731 - attrgetter of one name returns the value alone
        else:
            found = attrgetter(*names)
        _GETTERS[cls] = found
    return found


def _no_fields(node: cst.CSTNode) -> tuple:
    return ()


def _child_fields(cls: type) -> tuple[str, ...]:
    """The names of the fields of a node class that hold children, in LibCST's visit order."""
    method = cls._visit_and_replace_children
    if method is BaseLeaf._visit_and_replace_children:
        names: tuple[str, ...] = ()
    else:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _VISIT_HELPERS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ]
        calls.sort(key=lambda c: (c.lineno, c.col_offset))
        names = tuple(dict.fromkeys(c.args[1].value for c in calls))
    return names


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` (same nodes, same order), without rebuilding ``node``."""
    out: list[cst.CSTNode] = []
    for value in _getter(type(node))(node):
        if value is None or value is _DEFAULT:
            continue
        if type(value) in _SEQUENCES:  # a child field holds a node, a sequence of nodes, or nothing
            out.extend(value)
        else:
            out.append(value)
    return out


def visit_read_only(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads (no attribute hooks, no metadata): the same
    ``visit_*`` / ``leave_*`` calls in the same order, without rebuilding the tree."""
    if visitor.on_visit(node):
        for child in children(node):
            visit_read_only(child, visitor)
    visitor.on_leave(node)


def walk(node: cst.CSTNode, enter=None) -> Iterator[cst.CSTNode]:
    """Every node of the subtree, ``node`` first, in LibCST's (pre-order) visit order; with ``enter``, the
    children of a node only when ``enter(node)`` is true (the node itself is always yielded)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if enter is None or enter(current):
            stack.extend(reversed(children(current)))


def hot_paths(tree: cst.CSTNode, hit, enter=None) -> set[int]:
    """ids of the nodes of ``tree`` that are, or contain, a node for which ``hit(node)`` is true: a transformer
    that can only change such nodes need not enter the others (LibCST would rebuild them unchanged, and the
    untouched subtrees keep their identity). A subtree that occurs twice in ``tree`` (an argument substituted
    for each use of a parameter) is entered everywhere, so each occurrence is rebuilt into nodes of its own as
    a full pass would. ``enter``: as for :func:`walk`, the nodes the transformer itself enters."""
    hot: set[int] = set()
    seen: set[int] = set()
    shared: set[int] = set()

    def mark(node: cst.CSTNode, inside_shared: bool) -> bool:
        ident = id(node)
        if ident in seen:
            shared.add(ident)
        seen.add(ident)
        inside_shared = inside_shared or ident in shared
        found = inside_shared or hit(node)
        if enter is None or enter(node):
            for child in children(node):
                if mark(child, inside_shared):
                    found = True
        if found:
            hot.add(ident)
        return found

    mark(tree, False)
    if not shared:
        return hot
    # a subtree met twice: mark again, knowing which (its first occurrence was marked before it was known)
    hot.clear()
    seen.clear()
    mark(tree, False)
    return hot
