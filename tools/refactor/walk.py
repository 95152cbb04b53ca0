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
#: node classes without children (whitespace, newlines, ...), filled as their children functions are made
_LEAVES: set[type] = set()
_SEQUENCES = (tuple, list)

#: node class -> a function giving its children as a new list, in LibCST's visit order
_CHILDREN: dict[type, object] = {}


def _children_of(cls: type):
    """The children function of a node class, made once from the fields LibCST visits. A field LibCST
    always visits as one node or as a sequence (and under no other helper) is read as such; any other field
    may hold a node, a sequence or nothing, and is checked."""
    found = _CHILDREN.get(cls)
    if found is None:
        fields = _child_fields(cls)
        if not fields:
            _LEAVES.add(cls)
        if all(kind != "any" for _, kind in fields):
            items = ", ".join(f"node.{n}" if kind == "node" else f"*node.{n}" for n, kind in fields)
            body = [f"    return [{items}]"]
        else:  # keep LibCST's order: the checked fields sit between the others
            body = ["    out = []"]
            verb = {
                "node": "out.append(node.{})",
                "sequence": "out.extend(node.{})",
                "any": "_add(out, node.{})",
            }
            body += [f"    {verb[kind].format(n)}" for n, kind in fields]
            body.append("    return out")
        source = "def children(node):\n" + "\n".join(body) + "\n"
        namespace: dict = {"_add": _add}
        exec(
            compile(source, f"<children of {cls.__name__}>", "exec"), namespace
        )  # our own text, made from field names
        found = _CHILDREN[cls] = namespace["children"]
    return found


def _add(out: list, value) -> None:
    if value is None or value is _DEFAULT:
        return
    if type(value) in _SEQUENCES:
        out.extend(value)
    else:
        out.append(value)


def _child_fields(cls: type) -> tuple[tuple[str, str], ...]:
    """(name, kind) of the fields of a node class that hold children, in LibCST's visit order; kind is
    ``node`` (always one node), ``sequence`` (always a sequence) or ``any`` (a node, a sequence or nothing)."""
    method = cls._visit_and_replace_children
    if method is BaseLeaf._visit_and_replace_children:
        return ()
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
    kinds: dict[str, set[str]] = {}
    for call in calls:
        name = call.args[1].value
        passed = call.args[2] if len(call.args) > 2 else None
        own = isinstance(passed, ast.Attribute) and passed.attr == name  # self.<name>, not a local
        if own and call.func.id == "visit_required":
            kind = "node"
        elif own and call.func.id in _SEQUENCE_HELPERS:
            kind = "sequence"
        else:
            kind = "any"
        kinds.setdefault(name, set()).add(kind)
    return tuple((name, found.pop() if len(found) == 1 else "any") for name, found in kinds.items())


_SEQUENCE_HELPERS = frozenset({"visit_sequence", "visit_body_sequence"})


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` (same nodes, same order), without rebuilding ``node``."""
    return (_CHILDREN.get(type(node)) or _children_of(type(node)))(node)


def visit_read_only(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads (no attribute hooks, no metadata): the same
    ``visit_*`` / ``leave_*`` calls in the same order, without rebuilding the tree."""
    if visitor.on_visit(node):
        for child in children(node):
            visit_read_only(child, visitor)
    visitor.on_leave(node)


def walk(node: cst.CSTNode, enter=None) -> Iterator[cst.CSTNode]:
    """Every node of the subtree, ``node`` first, in LibCST's (pre-order) visit order; with ``enter``, the
    children of a node only when ``enter(node)`` is true (the node itself is always yielded).

    Nodes never change, so the order of a whole subtree (no ``enter``) is kept once a walk of it has finished,
    and a later walk of the same node reads it back (the passes walk the same methods again and again); kept
    until :func:`clear_run_memos`, with the node, so an id is never reused while its entry lives."""
    if enter is None:
        hit = _ORDERS.get(id(node))
        if hit is not None and hit[0] is node:
            return iter(hit[1])
        return _walk_kept(node)
    return _walk(node, enter)


def _walk(node: cst.CSTNode, enter) -> Iterator[cst.CSTNode]:
    stack = [node]
    known = _CHILDREN
    while stack:
        current = stack.pop()
        yield current
        if enter(current):
            kind = type(current)
            stack.extend(reversed((known.get(kind) or _children_of(kind))(current)))


def _walk_kept(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """:func:`walk` without ``enter``, keeping the order when the caller reads it to the end."""
    order: list[cst.CSTNode] = []
    add = order.append
    stack = [node]
    known = _CHILDREN
    while stack:
        current = stack.pop()
        add(current)
        yield current
        kind = type(current)
        stack.extend(reversed((known.get(kind) or _children_of(kind))(current)))
    if len(_ORDERS) > _ORDERS_LIMIT:
        _ORDERS.clear()
    _ORDERS[id(node)] = (node, order)


_RUN_MEMOS: list[dict] = []


def run_memo() -> dict:
    """A memo keyed by node identity (each entry holding its node) that :func:`clear_run_memos` empties."""
    memo: dict = {}
    _RUN_MEMOS.append(memo)
    return memo


def clear_run_memos() -> None:
    """Empty every :func:`run_memo` (a run starts, and ends, with none: it never gains from an earlier one, and
    the nodes are freed)."""
    for memo in _RUN_MEMOS:
        memo.clear()


#: id of a walked node -> (the node, its subtree in walk order)
_ORDERS: dict = run_memo()
_ORDERS_LIMIT = 50_000


def hot_paths(tree: cst.CSTNode, hit, enter=None) -> set[int]:
    """ids of the nodes of ``tree`` that are, or contain, a node for which ``hit(node)`` is true: a transformer
    that can only change such nodes need not enter the others (LibCST would rebuild them unchanged, and the
    untouched subtrees keep their identity). A subtree that occurs twice in ``tree`` (an argument substituted
    for each use of a parameter) is entered everywhere, so each occurrence is rebuilt into nodes of its own as
    a full pass would. ``enter``: as for :func:`walk`, the nodes the transformer itself enters."""
    hot: set[int] = set()
    seen: set[int] = set()
    shared: set[int] = set()
    known = _CHILDREN
    add_hot, add_seen = hot.add, seen.add

    def mark(node: cst.CSTNode, inside_shared: bool) -> bool:
        ident = id(node)
        if ident in seen:
            shared.add(ident)
            inside_shared = True
        else:
            add_seen(ident)
            if shared and ident in shared:
                inside_shared = True
        found = inside_shared or hit(node)
        if enter is None or enter(node):
            kind = type(node)
            for child in (known.get(kind) or _children_of(kind))(node):
                if type(child) in _LEAVES:  # no children: marked here, without a call of its own
                    ident_child = id(child)
                    inside = inside_shared
                    if ident_child in seen:
                        shared.add(ident_child)
                        inside = True
                    else:
                        add_seen(ident_child)
                        if shared and ident_child in shared:
                            inside = True
                    if inside or hit(child):
                        add_hot(ident_child)
                        found = True
                elif mark(child, inside_shared):
                    found = True
        if found:
            add_hot(ident)
        return found

    mark(tree, False)
    if not shared:
        return hot
    # a subtree met twice: mark again, knowing which (its first occurrence was marked before it was known)
    hot.clear()
    seen.clear()
    mark(tree, False)
    return hot
