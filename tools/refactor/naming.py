"""Names of config fields that say what they hold.

A hoisted expression that is a name, an attribute or a config read is named after it (``hoist.field_base_name``).
Any other expression is named after what it is given to, when it is all of it: the local it is assigned to
(``scale = a + b`` -> ``scale``) or the keyword argument it is passed as (``memory_config=…`` of ``ttnn.linear``
-> ``linear_memory_config``). Otherwise, and when that borrowed name is taken by another value, the name spells
the expression itself: ``float(links)`` -> ``links_float``, ``scale + steps`` -> ``scale_plus_steps``,
``u == "a"`` -> ``u_is_a``.
"""

from __future__ import annotations

import keyword
import re
import unicodedata

import libcst as cst

from tttv2_tools.trace_dependencies.constants import ARGS_NAMES, MC_NAMES

from .cstutil import assigned_names, code, dotted, slug

#: Longest name spelled from an expression (cut at a word boundary).
LIMIT = 48
_BINARY = {
    cst.Add: "plus",
    cst.Subtract: "minus",
    cst.Multiply: "times",
    cst.Divide: "div",
    cst.FloorDivide: "floordiv",
    cst.Modulo: "mod",
    cst.Power: "pow",
    cst.MatrixMultiply: "matmul",
    cst.LeftShift: "lshift",
    cst.RightShift: "rshift",
    cst.BitAnd: "bitand",
    cst.BitOr: "bitor",
    cst.BitXor: "bitxor",
}
_COMPARISON = {
    cst.Equal: "is",
    cst.NotEqual: "is_not",
    cst.Is: "is",
    cst.IsNot: "is_not",
    cst.LessThan: "lt",
    cst.LessThanEqual: "le",
    cst.GreaterThan: "gt",
    cst.GreaterThanEqual: "ge",
    cst.In: "in",
    cst.NotIn: "not_in",
}
_UNARY = {cst.Not: "not", cst.Minus: "minus", cst.Plus: "plus", cst.BitInvert: "invert"}
#: Words that join two parts of a name (never its last word).
_CONNECTORS = frozenset(
    {"if", "and", "or", "not", "is", "in", *_BINARY.values(), *_COMPARISON.values(), *_UNARY.values()}
)
#: Conversions read best after their argument: ``float(links)`` -> ``links_float``.
_CONVERSIONS = frozenset({"float", "int", "bool", "str", "tuple", "list", "set", "frozenset"})
#: Leading parts of a path that say where a value lives, not what it is.
_HOLDERS = ARGS_NAMES | MC_NAMES | {"self", "config"}


def context_name(node: cst.BaseExpression, stack: list[cst.CSTNode]) -> tuple[str, bool]:
    """A name for a field holding ``node``, whose ancestors are ``stack`` (outermost first), and whether it is
    borrowed from the context (the local or keyword it is given to) rather than spelled from ``node``."""
    parent = stack[-1] if stack else None
    if isinstance(parent, cst.Arg) and parent.value is node and parent.keyword is not None:
        keyword_name = parent.keyword.value
        call = stack[-2] if len(stack) >= 2 and isinstance(stack[-2], cst.Call) else None
        called = ((dotted(call.func) or "").rsplit(".", 1)[-1] or None) if call is not None else None
        if called == "dict":
            target = _assigned_to(call, stack[:-2])
            if target:
                return f"{target.removesuffix('_kwargs')}_{keyword_name}", True
        return (f"{called}_{keyword_name}" if called else keyword_name), True
    target = _assigned_to(node, stack)
    if target:
        return target, True
    return expression_name(node), False


def _assigned_to(node: cst.CSTNode, stack: list[cst.CSTNode]) -> str | None:
    """The one local ``node`` is the whole value of (``x = node``), else None."""
    parent = stack[-1] if stack else None
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
        targets = assigned_names(parent) or []
        return targets[0] if len(targets) == 1 else None
    return None


def expression_name(node: cst.BaseExpression) -> str:
    """An identifier that spells ``node``: ``float(links)`` -> ``links_float``, ``u == "a"`` -> ``u_is_a``,
    ``self.args.dim >= 64`` -> ``dim_ge_64``; at most :data:`LIMIT` characters."""
    words = _words(node)
    text = unicodedata.normalize("NFKC", "_".join(words))  # the form Python gives the identifier
    text = re.sub(r"\W+", "_", text).strip("_").lower()
    text = re.sub(r"_+", "_", text)
    if len(text) > LIMIT:
        cut = text[:LIMIT]
        parts = (cut.rsplit("_", 1)[0] if "_" in cut else cut).split("_")
        while len(parts) > 1 and parts[-1] in _CONNECTORS:
            parts.pop()  # no name ends in a dangling ``_if`` / ``_plus``
        text = "_".join(parts)
    if not text:
        return "value"
    if text[0].isdigit() or keyword.iskeyword(text):
        text = "value_" + text
    return text


def _words(node: cst.CSTNode) -> list[str]:
    path = dotted(node)
    if path is not None:
        parts = path.split(".")
        while len(parts) > 1 and parts[0] in _HOLDERS:
            parts = parts[1:]
        return parts
    if isinstance(node, cst.Call):
        return _call_words(node)
    if isinstance(node, cst.BinaryOperation):
        return [*_words(node.left), _BINARY.get(type(node.operator), "op"), *_words(node.right)]
    if isinstance(node, cst.BooleanOperation):
        joined = "and" if isinstance(node.operator, cst.And) else "or"
        return [*_words(node.left), joined, *_words(node.right)]
    if isinstance(node, cst.UnaryOperation):
        return [_UNARY.get(type(node.operator), "op"), *_words(node.expression)]
    if isinstance(node, cst.Comparison):
        out = _words(node.left)
        for target in node.comparisons:
            out += [_COMPARISON.get(type(target.operator), "op"), *_words(target.comparator)]
        return out
    if isinstance(node, cst.Subscript):
        key = [w for element in node.slice for w in _words(element.slice)]
        holder = (dotted(node.value) or "").rsplit(".", 1)[-1] in _HOLDERS
        return key if holder else [*_words(node.value), *key]  # model_config["KEY"]: the key
    if isinstance(node, cst.Index):
        return _words(node.value)
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return [value if isinstance(value, str) and value.strip() else "text"]
    if isinstance(node, (cst.Integer, cst.Float)):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [w for element in node.elements for w in _words(element.value)]
    if isinstance(node, cst.IfExp):
        if _is_none(node.body) or _is_none(node.orelse):  # ``None if m is None else m``: what it holds
            return _words(node.orelse if _is_none(node.body) else node.body)
        return [*_words(node.body), "if", *_words(node.test)]  # ``a if t else b``: a_if_t
    return [slug(code(node))]


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _call_words(node: cst.Call) -> list[str]:
    if isinstance(node.func, cst.Subscript):  # model_config["KEY"](seq_len): a config value, called
        return _words(node.func)
    path = dotted(node.func)
    args = [w for arg in node.args for w in _words(arg.value)]
    if path is None:
        return [*_words(node.func), *args]
    called = path.rsplit(".", 1)[-1]
    if called in _CONVERSIONS and len(node.args) == 1:
        return [*args, called]
    return [*_words(node.func), *args]


__all__ = ["context_name", "expression_name"]
