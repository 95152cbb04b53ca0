"""Specialisation for one (topology, mode): every fact the analysis locates is replaced by its value, the
mode itself by its constant, then boolean operators, conditional expressions and ``if`` / ``elif`` / ``else``
statements that became constant keep only the part that runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst

from tttv2_tools.trace_dependencies import FactSite, decide_fact

from .cstutil import adopt_parens, block_statements, bool_name, const_bool, is_pure
from .source import ParsedFile
from .track import Provenance, TrackingTransformer
from .walk import hot_paths


@dataclass
class Decisions:
    """What one specialisation decided: original branching node -> value of its test."""

    values: dict[int, tuple[cst.CSTNode, bool]] = field(default_factory=dict)
    #: for a boolean operator: the operand that replaced it ("left" / "right") and whether that operand is the
    #: constant (then ``value`` is the operator's value; else ``value`` is the other operand's)
    kept: dict[int, tuple[str, bool]] = field(default_factory=dict)
    #: nodes decided differently by two specialisations of one mode (call-site copies of one method)
    conflicts: set[int] = field(default_factory=set)

    def record(self, original: cst.CSTNode, value: bool, kept: tuple[str, bool] | None = None) -> None:
        before = self.values.get(id(original))
        if before is not None and (before[1], self.kept.get(id(original))) != (value, kept):
            self.conflicts.add(id(original))
        self.values[id(original)] = (original, value)
        if kept is not None:
            self.kept[id(original)] = kept

    def value(self, original: cst.CSTNode) -> bool | None:
        entry = self.values.get(id(original))
        return None if entry is None else entry[1]


def mode_constant(form: str, mode: str, enum_name: str = "Mode") -> cst.BaseExpression:
    """The mode as the specialised code spells it: ``Mode.DECODE`` or ``"decode"``."""
    if form == "enum":
        return cst.Attribute(value=cst.Name(enum_name), attr=cst.Name(mode.upper()))
    return cst.SimpleString(f'"{mode}"')


def fact_replacements(
    parsed: ParsedFile, sites: Iterable[FactSite], topology: str, mode: str, enum_name: str = "Mode"
) -> dict[int, cst.BaseExpression]:
    """id(original node) -> replacement, for the fact sites of ``parsed`` that ``(topology, mode)`` decides."""
    out: dict[int, cst.BaseExpression] = {}
    for site in sites:
        if site.file != parsed.name:
            continue
        node = parsed.node_for_span(site.span)
        if node is None:
            continue
        if site.fact == "mode":
            if mode in ("decode", "prefill"):
                out[id(node)] = mode_constant(site.mode_form, mode, enum_name)
            continue
        value = decide_fact(site, topology=topology, mode=mode if mode in ("decode", "prefill") else None)
        if value is not None:
            out[id(node)] = bool_name(value)
    return out


def enum_spelling(node: cst.CSTNode) -> str:
    """How a function names the mode enum (``Mode`` in ``Mode.DECODE``); "Mode" when it never does."""
    code_text = _code_of(node)
    for candidate in ("Mode", "mode_enum", "ModeEnum"):
        if f"{candidate}.DECODE" in code_text or f"{candidate}.PREFILL" in code_text:
            return candidate
    return "Mode"


def _code_of(node: cst.CSTNode) -> str:
    from .cstutil import code

    return code(node)


class Specialiser(TrackingTransformer):
    """Applies fact replacements and folds what became constant. Records decided tests in ``decisions``."""

    def __init__(
        self, replacements: dict[int, cst.BaseExpression], prov: Provenance, decisions: Decisions
    ) -> None:
        super().__init__(prov)
        self.replacements = replacements
        self.decisions = decisions
        self.bool_context: set[int] = set()
        self.elif_nodes: set[int] = set()
        # (node returned, original it stands for) when a node is replaced by one of its own parts
        self._part: tuple[cst.CSTNode, cst.CSTNode] | None = None

    def _keep_part(self, result: cst.CSTNode, part: cst.CSTNode) -> cst.CSTNode:
        """``result`` (``part``, maybe with the parent's parentheses) replaces its parent: it keeps the origin of
        ``part``, so a branch nested in a decided one is still followed by the report."""
        self._part = (result, self.prov.origin(part))
        return result

    # -- context ---------------------------------------------------------------------------------
    def _mark_bool(self, node: cst.BaseExpression | None) -> None:
        if node is not None:
            self.bool_context.add(id(node))

    def visit_If(self, node: cst.If) -> None:
        self._mark_bool(node.test)
        if isinstance(node.orelse, cst.If):
            self.elif_nodes.add(id(node.orelse))

    def visit_While(self, node: cst.While) -> None:
        self._mark_bool(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._mark_bool(node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._mark_bool(node.test)

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._mark_bool(node.test)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self._mark_bool(node.expression)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if id(node) in self.bool_context:
            self._mark_bool(node.left)
            self._mark_bool(node.right)

    # -- expressions -----------------------------------------------------------------------------
    def on_leave(self, original_node, updated_node):
        replacement = self.replacements.get(id(original_node))
        if replacement is not None:
            return (
                adopt_parens(original_node, replacement) if const_bool(replacement) is None else replacement
            )
        self._part = None
        result = super().on_leave(original_node, updated_node)
        if self._part is not None and self._part[0] is result:
            self.prov.set_origin(result, self._part[1])
        self._part = None
        return result

    def leave_Comparison(self, original_node, updated_node):
        """Constants compared (after a helper's arguments were substituted): ``0 == 1``, ``None is None``."""
        value = _fold_comparison(updated_node)
        if value is None:
            return updated_node
        return bool_name(value)

    def leave_Call(self, original_node, updated_node):
        """``str("decode")`` (the mode put into ``str(mode)``): the string itself."""
        func, args = updated_node.func, updated_node.args
        if (
            isinstance(func, cst.Name)
            and func.value == "str"
            and len(args) == 1
            and not args[0].keyword
            and not args[0].star
            and isinstance(args[0].value, cst.SimpleString)
            and "b" not in args[0].value.prefix.lower()
        ):
            return args[0].value
        return updated_node

    def leave_UnaryOperation(self, original_node, updated_node):
        if isinstance(updated_node.operator, cst.Not):
            value = const_bool(updated_node.expression)
            if value is not None:
                return bool_name(not value)
        return updated_node

    def leave_BooleanOperation(self, original_node, updated_node):
        left, right = updated_node.left, updated_node.right
        lv, rv = const_bool(left), const_bool(right)
        is_and = isinstance(updated_node.operator, cst.And)
        in_bool = id(original_node) in self.bool_context
        result = None
        if lv is not None:
            # exact in any context: True and X -> X, False and X -> False, True or X -> True, False or X -> X
            result = (right if lv else left) if is_and else (left if lv else right)
        elif rv is not None and in_bool:
            if rv == is_and:  # X and True / X or False -> X (as a truth value)
                result = left
            elif is_pure(left):  # X and False -> False / X or True -> True
                result = right
        if result is None:
            return updated_node
        side = "left" if result is left else "right"
        constant = side == ("left" if lv is not None else "right")
        self.decisions.record(
            self.prov.origin(original_node), lv if lv is not None else bool(rv), (side, constant)
        )
        return self._keep_part(adopt_parens(updated_node, result), result)

    def leave_IfExp(self, original_node, updated_node):
        value = _test_value(updated_node.test)
        if value is None:
            return updated_node
        self.decisions.record(self.prov.origin(original_node), value)
        kept = updated_node.body if value else updated_node.orelse
        return self._keep_part(adopt_parens(updated_node, kept), kept)

    # -- statements ------------------------------------------------------------------------------
    def leave_If(self, original_node, updated_node):
        updated_node = updated_node.with_changes(orelse=self._resolve_orelse(updated_node.orelse))
        value = _test_value(updated_node.test)
        if value is not None:
            self.decisions.record(self.prov.origin(original_node), value)
        if id(original_node) in self.elif_nodes or value is None:
            return updated_node
        if value:
            return _splice(updated_node, block_statements(updated_node.body), self.prov)
        orelse = updated_node.orelse
        if orelse is None:
            return cst.RemoveFromParent()
        if isinstance(orelse, cst.Else):
            return _splice(updated_node, block_statements(orelse.body), self.prov)
        return self._keep_part(orelse.with_changes(leading_lines=updated_node.leading_lines), orelse)

    def _resolve_orelse(self, orelse):
        """An ``elif`` whose test became constant: its body becomes the ``else``, or it disappears."""
        while isinstance(orelse, cst.If):
            value = _test_value(orelse.test)
            if value is None:
                return orelse
            if value:
                return cst.Else(body=orelse.body, leading_lines=orelse.leading_lines)
            orelse = orelse.orelse
        return orelse

    def leave_Match(self, original_node, updated_node):
        """``match "decode":`` (the mode put in as a constant) with literal and ``_`` cases: the case that runs."""
        subject = _constant(updated_node.subject)
        if subject is NotImplemented:
            return updated_node
        for case in updated_node.cases:
            pattern = case.pattern
            if case.guard is not None:
                return updated_node
            if isinstance(pattern, cst.MatchAs) and pattern.pattern is None and pattern.name is None:
                hit = True  # case _
            elif isinstance(pattern, cst.MatchValue) and _constant(pattern.value) is not NotImplemented:
                hit = _constant(pattern.value) == subject
            else:
                return updated_node  # a pattern this pass does not evaluate: the match stays
            if hit:
                self.decisions.record(self.prov.origin(original_node), True)
                return _splice(updated_node, block_statements(case.body), self.prov)
        self.decisions.record(self.prov.origin(original_node), False)
        return cst.RemoveFromParent()

    def leave_While(self, original_node, updated_node):
        value = const_bool(updated_node.test)
        if value is False:
            self.decisions.record(self.prov.origin(original_node), False)
            if updated_node.orelse is None:
                return cst.RemoveFromParent()
            return _splice(updated_node, block_statements(updated_node.orelse.body), self.prov)
        return updated_node

    def leave_Assert(self, original_node, updated_node):
        if const_bool(updated_node.test) is True:
            self.decisions.record(self.prov.origin(original_node), True)
            return cst.RemoveFromParent()
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not updated_node.body:
            return cst.RemoveFromParent()
        return updated_node


_OPS = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
    cst.Is: lambda a, b: a is b,
    cst.IsNot: lambda a, b: a is not b,
}


def _constant(node: cst.BaseExpression):
    """The value of a literal number, string, None, True or False; NotImplemented otherwise."""
    import ast

    if isinstance(node, cst.Name) and node.value in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[node.value]
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)) or (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, (cst.Integer, cst.Float))
    ):
        from .cstutil import code

        try:
            return ast.literal_eval(code(node).strip())
        except (ValueError, SyntaxError):  # pragma: no cover - a literal always evaluates
            return NotImplemented
    return NotImplemented


def _test_value(test: cst.BaseExpression) -> bool | None:
    """The truth of an ``if`` test that is a literal: ``True`` / ``False``, and ``None`` (a base's ``if kv_cache:``
    copied for a call passing ``kv_cache=None``: Qwen2.5-VL's ``super().forward_prefill(…)``)."""
    if isinstance(test, cst.Name) and test.value == "None":
        return False
    return const_bool(test)


def _fold_comparison(node: cst.Comparison) -> bool | None:
    left = _constant(node.left)
    if left is NotImplemented:
        return None
    result = True
    for target in node.comparisons:
        right = _constant(target.comparator)
        op = _OPS.get(type(target.operator))
        if right is NotImplemented or op is None:
            return None
        if (left is None or right is None) and type(target.operator) not in (
            cst.Is,
            cst.IsNot,
            cst.Equal,
            cst.NotEqual,
        ):
            return None
        try:
            result = result and bool(op(left, right))
        except TypeError:
            return None
        left = right
    return result


def _splice(
    owner: cst.BaseCompoundStatement, body, prov: Provenance | None = None
) -> cst.FlattenSentinel | cst.RemovalSentinel:
    """The statements of one arm in place of the compound statement; its leading comments move with them (the
    first statement, rebuilt for them, keeps its provenance)."""
    statements = list(body)
    if not statements:
        return cst.RemoveFromParent()
    first = statements[0]
    statements[0] = first.with_changes(leading_lines=[*owner.leading_lines, *first.leading_lines])
    if prov is not None:
        prov.note(statements[0], first)
    return cst.FlattenSentinel(statements)


def specialise(
    func: cst.FunctionDef,
    replacements: dict[int, cst.BaseExpression],
    prov: Provenance,
    decisions: Decisions,
) -> cst.FunctionDef:
    """``func`` with the replacements applied and everything they decide folded away. Only the subtrees that
    hold something to fold (a replaced node, a literal ``True`` / ``False``, a comparison) are rebuilt."""

    def foldable(node: cst.CSTNode) -> bool:
        kind = type(node)
        return (
            kind is cst.Comparison
            or (kind is cst.Name and node.value in ("True", "False", "None"))
            or id(node) in replacements
        )

    specialiser = Specialiser(replacements, prov, decisions)
    specialiser.hot = hot_paths(func, foldable)
    return func.visit(specialiser)
