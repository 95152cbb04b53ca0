"""The read-only walks see what LibCST's own visit sees: the same children in the same order, the same
visit / leave calls (the codemod's output depends on that order)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from tttv2_tools.refactor.walk import children, visit_read_only, walk

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "tttv1" / "tt" / "attention.py"
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


@pytest.mark.parametrize("source", ["attention", "odd"])
def test_children_are_libcst_children_in_order(source):
    module = cst.parse_module(SOURCE.read_text(encoding="utf-8") if source == "attention" else ODD)
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
