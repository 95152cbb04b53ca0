"""Tests made of literals, decided where they stand (``tools/refactor/literals.py``): what counts as a literal
test, which arm is kept, and the straight-code locals a call-site copy starts from."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tttv2_tools.refactor.literals import (
    decide_straight_literals,
    fold_literal_tests,
    literal_truth,
    with_prelude,
)


@pytest.mark.parametrize(
    ("test", "truth"),
    [
        ("True", True),
        ("None", False),
        ("flag", None),  # a name: not a literal
        ('"a" == "a"', True),
        ('"prefill_out" == "decode_out"', False),
        ("not False", True),
        ("-1 < 0", True),
        ("None is None", True),
        ("2 is None", False),  # defined: None is a singleton
        ("None is not 2", True),
        ('"a" is "a"', None),  # identity of two other literals: not defined by the language
        ("1 in (1, 2)", None),  # membership: not evaluated here
        ('"a" < 1', None),  # raises in Python: left to run time
        ("~1 == -2", None),  # other unary operators are not evaluated
        ("f(1) == 1", None),  # a call
        ("x.y", None),
        ("True and False", False),
    ],
)
def test_literal_truth(test, truth):
    assert literal_truth(cst.parse_expression(test)) is truth


def _func(source: str) -> cst.FunctionDef:
    return cst.parse_module(textwrap.dedent(source)).body[0]


def _code(func: cst.FunctionDef) -> str:
    return cst.Module([func]).code


def test_a_literal_if_keeps_the_arm_that_runs():
    func = _func(
        """
        def f(x):
            if False:
                x = 1
            elif "a" == "a":
                x = 2
            else:
                x = 3
            if True: x = x + 1
            if None:
                x = 5
            if 0 == 1:
                pass
            elif x:
                x = 6
            return x
        """
    )
    out = _code(fold_literal_tests(func, None))
    assert "x = 2\n" in out and "x = 1" not in out and "x = 3" not in out
    assert "x = x + 1" in out and "if True" not in out and "x = 5" not in out
    assert "if x:\n        x = 6" in out  # the elif whose test is not literal stays, as an if


def test_a_literal_conditional_expression_and_boolean_operation_keep_their_value():
    func = _func(
        """
        def f(x, y):
            a = x if "d" == "d" else y
            b = (x if False else y)
            c = True and x
            d = 0 or y
            e = None and x
            g = y if False else lambda: 1
            h = (False or y)
            return a, b, c, d, e, g, h
        """
    )
    out = _code(fold_literal_tests(func, None))
    assert "a = x\n" in out and "b = (y)\n" in out and "c = x\n" in out and "d = y\n" in out
    assert "e = None\n" in out  # ``None and x`` is None, not False
    assert "g = (lambda: 1)\n" in out and "h = (False or y)" in out


def test_nothing_to_fold_returns_the_same_function():
    func = _func("def f(x):\n    return x if x else 1\n")
    assert fold_literal_tests(func, None) is func


def test_a_prelude_starts_after_the_docstring():
    func = _func('def f(n):\n    """Doc."""\n    if n is None:\n        n = 1\n    return n\n')
    out = _code(with_prelude(func, {"n": cst.Name("None")}))
    assert out.index('"""Doc."""') < out.index("n = None") < out.index("if n is None")
    plain = _code(with_prelude(_func("def f(n):\n    return n\n"), {"n": cst.Integer("2")}))
    assert plain.startswith("def f(n):\n    n = 2\n")


def test_straight_literals_decide_the_tests_that_follow():
    func = _func(
        """
        def f(x):
            links = None
            scale = -2
            if links is None:
                links = 1
            if scale < 0:
                x = x * 2
            elif x:
                x = 0
            if links is None:
                x = x + 7
            if x:
                scale = 3
            if scale < 0:
                x = x - 1
            return x
        """
    )
    out = _code(decide_straight_literals(func, None))
    assert "if links is None" not in out.split("if x:")[0]  # decided: True, then False after links = 1
    assert "x = x * 2" in out and "x = x + 7" not in out and "elif x" not in out
    assert "if scale < 0:\n        x = x - 1" in out  # ``scale`` may have changed under ``if x``: kept


def test_straight_self_attributes_make_a_test_on_self():
    func = _func(
        """
        def f(self, x):
            links = self.links
            if links is None:
                links = 2
            self.reset()
            n = self.n
            self.n = 4
            if n > 1:
                x = x + 1
            m = self.m
            if m > x:
                x = 0
            return x + links
        """
    )
    out = _code(decide_straight_literals(func, None))
    assert "if self.links is None:" in out  # read only from what straight code set: a test on self
    assert "if n > 1:" in out  # ``self.n = 4`` in between: not the same value
    assert "if m > x:" in out  # it reads a run-time value too: not made static


def test_straight_literals_change_nothing_without_a_decision():
    func = _func("def f(x):\n    a = 1\n    if x:\n        a = 2\n    return a\n")
    assert decide_straight_literals(func, None) is func
