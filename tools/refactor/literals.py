"""Tests made of literals only, decided where they stand.

Once a local assigned one literal is replaced by it (:func:`hoist.propagate_literals`: ``wide = False`` then
``if wide:``; ``tag = f"{mode}_out"`` then ``tag == "decode_out"``), a test can be a comparison of constants
(``"prefill_out" == "decode_out"``, ``not False``). Such a test is decided here, like the topology and mode
facts: the arm that runs is kept, so no static branch is left for the binder (a choice "made at construction"
between constants would be noise) nor for the Zen check."""

from __future__ import annotations

import warnings

import libcst as cst

from .cstutil import names_written
from .track import Provenance, StatementTransformer, TrackingTransformer, is_expression
from .walk import hot_paths, walk

_LITERAL_NAMES = frozenset({"True", "False", "None"})
_PARTS = (
    cst.Comparison,
    cst.ComparisonTarget,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.Name,
    cst.BaseCompOp,
    cst.BaseBooleanOp,
    cst.Not,
    cst.Minus,
    cst.LeftParen,
    cst.RightParen,
    cst.BaseParenthesizableWhitespace,
)
#: Comparison operators evaluated here (identity and membership of literals are left alone).
_OPERATORS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def _identity_defined(test: cst.BaseExpression) -> bool:
    """Every ``is`` / ``is not`` in ``test`` has None / True / False on one side (``2 is None``: always False;
    between two other literals the result is not defined by the language)."""
    for node in walk(test):
        if type(node) is not cst.Comparison:
            continue
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.Is, cst.IsNot)) and not any(
                type(side) is cst.Name and side.value in _LITERAL_NAMES for side in (left, target.comparator)
            ):
                return False
            left = target.comparator
    return True


def literal_truth(test: cst.BaseExpression) -> bool | None:
    """The truth of ``test`` when it is made of literals, comparisons, ``not``, ``and`` / ``or`` only, else None."""
    if type(test) is cst.Name:
        return {"True": True, "False": False, "None": False}.get(test.value)
    if not isinstance(
        test,
        (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation, cst.Integer, cst.Float, cst.SimpleString),
    ):
        return None
    for node in walk(test):
        if not isinstance(node, _PARTS):
            return None
        if type(node) is cst.Name and node.value not in _LITERAL_NAMES:
            return None
        # ``is`` only between None / True / False: on other literals its result is not defined
        identity = isinstance(node, (cst.Is, cst.IsNot)) and _identity_defined(test)
        if isinstance(node, cst.BaseCompOp) and not isinstance(node, _OPERATORS) and not identity:
            return None
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, (cst.Not, cst.Minus)):
            return None
    try:  # only literals and operators on them: nothing to run but the comparison
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # ``2 is None``: defined, and what TTTv1 wrote
            compiled = compile(cst.Module([]).code_for_node(test), "<test>", "eval")
        value = eval(compiled, {"__builtins__": {}})
    except Exception:  # e.g. "a" < 1: leave it to run time as TTTv1 does
        return None
    return bool(value)


def _arm(statement: cst.If, truth: bool) -> list[cst.BaseStatement] | cst.If:
    if truth:
        return (
            list(statement.body.body) if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
        )
    orelse = statement.orelse
    if orelse is None:
        return []
    if isinstance(orelse, cst.If):
        return orelse  # elif: its own test is looked at in turn
    return list(orelse.body.body) if isinstance(orelse.body, cst.IndentedBlock) else [orelse.body]


def fold_literal_tests(func: cst.FunctionDef, prov: Provenance | None) -> cst.FunctionDef:
    """``func`` with every ``if`` / ``elif`` / conditional expression whose test is literal replaced by its arm
    that runs (an ``if`` left with no statement at all is dropped)."""

    def candidate(node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind is cst.BooleanOperation:
            return literal_truth(node.left) is not None
        return kind in (cst.If, cst.IfExp) and literal_truth(node.test) is not None

    class _Statements(StatementTransformer):
        elifs: set[int]

        def visit_If(self, node: cst.If) -> None:
            if isinstance(node.orelse, cst.If):
                # an elif is decided with its ``if`` (it is no statement of its own)
                self.elifs.add(id(node.orelse))

        def leave_If(self, original_node, updated_node):
            truth = literal_truth(updated_node.test)
            if truth is None or id(original_node) in self.elifs:
                return updated_node
            kept = _arm(updated_node, truth)
            while isinstance(kept, cst.If):
                inner = literal_truth(kept.test)
                if inner is None:
                    return kept.with_changes(leading_lines=updated_node.leading_lines)
                kept = _arm(kept, inner)
            if not kept:
                return cst.RemoveFromParent()
            return cst.FlattenSentinel(kept)

    class _Expressions(TrackingTransformer):
        def leave_BooleanOperation(self, original_node, updated_node):
            # ``<literal> and X`` / ``<literal> or X``: Python's own short-circuit, its value unchanged
            truth = literal_truth(updated_node.left)
            if truth is None or updated_node.lpar:
                return updated_node
            stops = truth is isinstance(updated_node.operator, cst.Or)
            return updated_node.left if stops else updated_node.right

        def leave_IfExp(self, original_node, updated_node):
            truth = literal_truth(updated_node.test)
            if truth is None:
                return updated_node
            chosen = updated_node.body if truth else updated_node.orelse
            if chosen.lpar:
                return chosen
            # an arm binds tighter than the conditional it replaces (a lambda does not: it keeps parentheses)
            if type(chosen) is cst.Lambda and not updated_node.lpar:
                return chosen.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return chosen.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)

    if not any(candidate(node) for node in walk(func)):
        return func
    expressions = _Expressions(prov)
    expressions.hot = hot_paths(func, lambda n: type(n) is not cst.If and candidate(n))
    func = func.visit(expressions)
    statements = _Statements(prov)
    statements.elifs = set()
    statements.hot = hot_paths(
        func, lambda n: type(n) is cst.If and candidate(n), lambda n: not is_expression(n)
    )
    return func.visit(statements)


__all__ = ["fold_literal_tests", "literal_truth"]


def with_prelude(func: cst.FunctionDef, prelude: dict[str, cst.BaseExpression]) -> cst.FunctionDef:
    """A call-site copy whose parameter is reassigned in its body (``if num_links is None: num_links = …``) and
    receives a literal (the call's argument or the parameter's default): the literal becomes the first
    assignment of a local (``num_links = None``), which :func:`decide_straight_literals` then follows."""
    body = list(func.body.body)
    start = 1 if body and _is_docstring(body[0]) else 0
    lines = [
        cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])
        for name, value in prelude.items()
    ]
    return func.with_changes(body=func.body.with_changes(body=[*body[:start], *lines, *body[start:]]))


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        type(statement) is cst.SimpleStatementLine
        and type(statement.body[0]) is cst.Expr
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _plain_literal(value: cst.BaseExpression) -> bool:
    if type(value) is cst.Name:
        return value.value in _LITERAL_NAMES
    if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus:
        value = value.expression
    return type(value) in (cst.Integer, cst.Float, cst.SimpleString)


class _Substitute(cst.CSTTransformer):
    def __init__(self, values: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.values = values

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``x.name``: only the receiver is a read
        return False

    def leave_Name(self, original_node, updated_node):
        return self.values.get(updated_node.value, updated_node)


def _self_chain(value: cst.BaseExpression) -> bool:
    node = value
    if type(node) is not cst.Attribute:
        return False
    while type(node) is cst.Attribute:
        node = node.value
    return type(node) is cst.Name and node.value == "self"


def _changes_self(statement: cst.CSTNode) -> bool:
    """Whether a statement may change an attribute of ``self``: it assigns one, or calls a method of ``self``."""
    for node in walk(statement):
        if type(node) is cst.Call and type(node.func) is cst.Attribute:
            receiver = node.func.value
            if type(receiver) is cst.Name and receiver.value == "self":
                return True
        if type(node) in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign):
            target = node.target
            if (
                type(target) is cst.Attribute
                and type(target.value) is cst.Name
                and target.value.value == "self"
            ):
                return True
    return False


def decide_straight_literals(
    func: cst.FunctionDef, prov: Provenance | None, trusted: frozenset[str] = frozenset()
) -> cst.FunctionDef:
    """In the straight code at the top level of ``func``: after ``name = <literal>``, an ``if`` whose test then
    reads only such names and literals is decided with their values (``num_links = None`` then ``if num_links
    is None:`` keeps its body), until a statement that is not a plain assignment or a decided ``if`` writes the
    name. After ``name = self.a.b`` (what a call site passes to a copy's parameter that the copy reassigns), the
    test reads ``self.a.b`` itself, a static test the binder then makes at construction, until a statement may
    change ``self``. ``trusted``: locals whose first assignment the caller checked to be a pure expression of
    ``self`` (a copy's prelude: ``num_links = self.tt_ccl.get_num_links(1)``, what an outer copy passes on),
    followed like a chain of ``self``. Locals assigned more than once are not replaced anywhere else
    (:func:`hoist.propagate_literals` does that for the ones assigned once)."""
    body = list(func.body.body)
    known: dict[str, cst.BaseExpression] = {}
    seen: set[str] = set()  # trusted only in their first assignment
    out: list[cst.BaseStatement] = []
    changed = False
    while body:
        statement = body.pop(0)
        if type(statement) is cst.If and known:
            test = statement.test
            names = {n.value for n in walk(test) if type(n) is cst.Name} - _LITERAL_NAMES
            reads = names & set(known)
            if reads:
                substituted = test.visit(_Substitute({k: v for k, v in known.items() if k in reads}))
                truth = literal_truth(substituted)
                if truth is not None:
                    changed = True
                    kept = _arm(statement, truth)
                    body[:0] = [kept] if isinstance(kept, cst.If) else kept
                    continue
                if reads == names and any(_self_chain(known[k]) or k in trusted for k in reads):
                    # only what the straight code just set: the test becomes one on ``self``, static
                    changed = True
                    new = statement.with_changes(test=substituted)
                    if prov is not None:
                        prov.note(new, statement)
                    statement = new
        small = (
            statement.body[0]
            if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
            else None
        )
        if (
            type(small) is cst.Assign
            and len(small.targets) == 1
            and type(small.targets[0].target) is cst.Name
            and (
                _plain_literal(small.value)
                or _self_chain(small.value)
                or (small.targets[0].target.value in trusted and small.targets[0].target.value not in seen)
            )
        ):
            seen.add(small.targets[0].target.value)
            known[small.targets[0].target.value] = small.value
            out.append(statement)
            continue
        for name in names_written(statement):
            known.pop(name, None)
        if _changes_self(statement):
            known = {k: v for k, v in known.items() if _plain_literal(v)}
        out.append(statement)
    if not changed:
        return func
    return func.with_changes(body=func.body.with_changes(body=out))
