"""The read-only walks see what LibCST's own visit sees: the same children in the same order, the same
visit / leave calls (the codemod's output depends on that order); the report's start lines are
``PositionProvider``'s."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from tttv2_tools.refactor import walk as walk_module
from tttv2_tools.refactor.cstutil import clear_memos
from tttv2_tools.refactor.lines import method_lines, positions, start_lines
from tttv2_tools.refactor.members import _attribute_reads, _attributes_written
from tttv2_tools.refactor.walk import children, hot_paths, visit_read_only, walk

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "tttv1" / "tt" / "mlp_legacy.py"
ODD = """
from . import (a as b, c)
from .x import *
@dec(1)
async def f(x, /, y: int = 2, *args, z, **kw) -> "T":
    global g
    async with a as (b, c), d:
        yield f"{x!r:>{y}} {z=}"
    try:
        del x[1:2, ::3]
    except* (E, F) as e:
        raise G from e
    else:
        pass
    finally:
        lambda *, q=1: q
    match y:
        case [1, *rest] | {"k": v, **kw} if v:
            await z
        case Point(x=0) as p:
            ...
    return [i async for i in y if i] or {k: v for k, v in y} or {*y} or (i for i in ())
"""


@pytest.mark.parametrize("source", ["tttv1", "odd"])
def test_children_are_libcst_children_in_order(source):
    module = cst.parse_module(SOURCE.read_text(encoding="utf-8") if source == "tttv1" else ODD)
    count = 0
    for node in walk(module):
        ours, theirs = children(node), list(node.children)
        assert len(ours) == len(theirs) and all(a is b for a, b in zip(ours, theirs)), type(node).__name__
        count += 1
    assert count > 100


class _Log(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)  # a pruned subtree is not entered by either walk

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.calls.append(("leave", id(original_node)))


def test_visit_read_only_makes_libcsts_calls():
    module = cst.parse_module(ODD)
    theirs, ours = _Log(), _Log()
    module.visit(theirs)
    visit_read_only(module, ours)
    assert ours.calls == theirs.calls
    assert ("visit", id(module)) == ours.calls[0] and ("leave", id(module)) == ours.calls[-1]


@pytest.mark.parametrize("source", ["tttv1", "odd"])
def test_start_lines_are_position_providers(source):
    text = SOURCE.read_text(encoding="utf-8") if source == "tttv1" else ODD.replace("\n", "\r\n")
    module = cst.parse_module(text)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = start_lines(module)
    assert {id(n): p.start.line for n, p in positions.items()} == ours
    assert max(ours.values()) > 20


def test_positions_are_position_providers_in_its_order():
    module = cst.parse_module(SOURCE.read_text(encoding="utf-8"))
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ranges, nodes = positions(module)
    expected = [(id(n), (p.start.line, p.start.column, p.end.line, p.end.column)) for n, p in theirs.items()]
    assert list(ranges.items()) == expected
    assert all(nodes[key] is n for key, n in zip(ranges, theirs))


BRANCHY = """
class A:
    @dec(1 if x else 2)
    def f(self, a=(b if c else d), *, e=lambda: p and q and r):
        if a and b and c:
            x = (a and b) and c or (d if e else f)
        elif (
            a or b and c
        ):
            while x:
                assert y, "z"
        else:
            def g(h=i if j else k):
                return {k: v for k, v in y if k or v}
        match a:
            case [1] if a and b:
                pass
        return f"{a if b else c}"

    async def h(self):
        return [x async for x in y if x and (y if z else w)]


class B:
    def f(self):
        return 1 if x else 2
"""


@pytest.mark.parametrize("source", ["branchy", "example"])
def test_method_lines_are_libcsts(source):
    text = (
        BRANCHY if source == "branchy" else (ROOT / "examples/refactored/attention_1d.py").read_text("utf-8")
    )
    module = cst.parse_module(text)
    lines = start_lines(module)
    methods, branches = method_lines(text)
    expected_methods, expected_branches = {}, {}
    for klass in (s for s in module.body if isinstance(s, cst.ClassDef)):
        for item in (s for s in klass.body.body if isinstance(s, cst.FunctionDef)):
            expected_methods[item.name.value] = lines[id(item)]
            kinds = (cst.If, cst.IfExp, cst.BooleanOperation, cst.While, cst.Assert)
            for index, node in enumerate(n for n in walk(item) if isinstance(n, kinds)):
                expected_branches[(item.name.value, index)] = lines[id(node)]
    assert (methods, branches) == (expected_methods, expected_branches)
    assert len(branches) > 10


def test_method_lines_refuses_a_multiline_fstring():
    assert method_lines('class A:\n    def f(self):\n        return f"""{a\n}"""\n') is None


def test_hot_paths_lead_to_hits_and_through_every_shared_subtree():
    shared, y, z = cst.parse_expression("x + 1"), cst.Name("y"), cst.Name("z")
    is_y = lambda n: n is y  # noqa: E731
    once = cst.Tuple([cst.Element(shared), cst.Element(y), cst.Element(z)])
    hot = hot_paths(once, is_y)
    assert {id(once), id(once.elements[1]), id(y)} == hot
    twice = cst.Tuple([cst.Element(shared), cst.Element(shared), cst.Element(y), cst.Element(z)])
    hot = hot_paths(twice, is_y)
    assert {id(n) for n in walk(shared)} <= hot and id(z) not in hot and id(twice.elements[0]) in hot


def _libcst_order(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Pre-order through LibCST's own ``children``."""
    out = [node]
    for child in node.children:
        out += _libcst_order(child)
    return out


def _same(ours, theirs) -> bool:
    ours, theirs = list(ours), list(theirs)
    return len(ours) == len(theirs) and all(a is b for a, b in zip(ours, theirs))


def test_a_finished_walk_is_kept_and_read_back_in_the_same_order():
    clear_memos()
    module = cst.parse_module(ODD)
    function = module.body[-1]
    started = walk(function)
    next(started)  # a walk left half-way keeps nothing
    assert id(function) not in walk_module._ORDERS
    expected = _libcst_order(module)
    assert _same(walk(module), expected) and id(module) in walk_module._ORDERS
    assert _same(walk(module), expected)  # read back
    assert _same(walk(function), _libcst_order(function))  # a node inside a kept walk: its own walk
    pruned = list(walk(module, lambda n: not isinstance(n, cst.FunctionDef)))  # with ``enter``: never kept
    assert pruned[-1] is function and _same(walk(module), expected)
    clear_memos()  # a run ends: nothing kept
    assert not walk_module._ORDERS


def test_kept_walks_are_dropped_past_the_limit(monkeypatch):
    clear_memos()
    monkeypatch.setattr(walk_module, "_ORDERS_LIMIT", 1)
    first, second, third = (cst.parse_expression(t) for t in ("a + b", "c", "d.e"))
    for node in (first, second, third):
        assert _same(walk(node), _libcst_order(node))
    assert set(walk_module._ORDERS) == {id(third)}  # the memo was full (two entries) when the third came
    clear_memos()


MEMBER_USES = """
def f(self, legacy, cls):
    self.a = 1
    (self.b, [self.c, *self.d]) = t
    for self.e in x:
        pass
    with g() as self.f:
        pass
    self.h: int = legacy.k
    print(self.r, cls.q, self.a, legacy.m.n, other.p)
    setattr(legacy, "x", 1)
    print(cls.__dict__)
"""


def test_attribute_uses_of_a_tree():
    clear_memos()
    func = cst.parse_module(MEMBER_USES).body[0]
    assert _attributes_written(func, "self") == {"a", "b", "c", "d", "e", "f", "h"}
    assert [n.attr.value for n in _attribute_reads(func, "self")] == ["r", "a"]
    assert [n.attr.value for n in _attribute_reads(func, "legacy")] == ["k", "m"]
    assert [n.attr.value for n in _attribute_reads(func, "cls")] == ["q", "__dict__"]
    assert _attributes_written(func, "legacy") is None  # setattr(legacy, ...)
    assert _attributes_written(func, "cls") is None  # cls.__dict__ read
    assert _attributes_written(func, "other") == set() and _attribute_reads(func, "nobody") == []
    clear_memos()


def test_attribute_uses_are_dropped_past_the_limit(monkeypatch):
    from tttv2_tools.refactor import members

    clear_memos()
    monkeypatch.setattr(members, "_USES_LIMIT", 0)
    one, two = cst.parse_expression("self.a"), cst.parse_expression("self.b")
    assert [n.attr.value for n in _attribute_reads(one, "self")] == ["a"]
    assert [n.attr.value for n in _attribute_reads(two, "self")] == ["b"]
    assert set(members._USES) == {id(two)}
    clear_memos()


def test_hot_paths_mark_leaves_like_other_nodes():
    """Nodes without children (whitespace) are marked without a call of their own: hit, shared, or neither."""
    space, a, b = cst.SimpleWhitespace("  "), cst.Name("a"), cst.Name("b")
    first, second = cst.Comma(whitespace_after=space), cst.Comma(whitespace_after=space)  # one leaf, twice
    tree = cst.Tuple([cst.Element(a, comma=first), cst.Element(b, comma=second)])
    hot = hot_paths(tree, lambda n: False)
    path = {id(tree), id(tree.elements[0]), id(tree.elements[1]), id(first), id(second), id(space)}
    assert hot == path  # the shared leaf is entered everywhere, with the paths to it; a and b are not
    lone = cst.SimpleWhitespace(" ")
    single = cst.Tuple([cst.Element(a, comma=cst.Comma(whitespace_after=lone)), cst.Element(b)])
    hot = hot_paths(single, lambda n: n is lone)
    assert hot == {id(single), id(single.elements[0]), id(single.elements[0].comma), id(lone)}
    assert hot_paths(single, lambda n: n is lone, lambda n: type(n) is not cst.Comma) == set()  # not entered
