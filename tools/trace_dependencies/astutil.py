"""Small helpers over ``ast`` nodes shared by the engine's parts (no state)."""

from __future__ import annotations

import ast

TYPE_CHECKING = False  # typing is not imported at run time: about 5 ms of every trace-deps start-up

if TYPE_CHECKING:  # annotations only
    from .scan import FuncInfo
    from .state import DefSite

NOTHING = object()  # "not evaluable" (None is a value)


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unparse(node: ast.AST | None, limit: int = 100) -> str:
    if node is None:
        return ""
    try:
        return short(ast.unparse(node), limit)
    except Exception:  # pragma: no cover - ast.unparse handles all parsed nodes
        return type(node).__name__


def const_eval(e: ast.AST | None, env: dict[str, object]):
    """Evaluate the small constant subset used for generated keys; NOTHING when not evaluable."""
    if e is None:
        return NOTHING
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Name):
        return env.get(e.id, NOTHING)
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        items = [const_eval(x, env) for x in e.elts]
        if any(x is NOTHING for x in items):
            return NOTHING
        return tuple(items) if isinstance(e, ast.Tuple) else list(items)
    if isinstance(e, ast.JoinedStr):
        parts = []
        for value in e.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif (
                isinstance(value, ast.FormattedValue) and value.format_spec is None and value.conversion == -1
            ):
                inner = const_eval(value.value, env)
                if inner is NOTHING:
                    return NOTHING
                parts.append(str(inner))
            else:
                return NOTHING
        return "".join(parts)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        a, b = const_eval(e.left, env), const_eval(e.right, env)
        if isinstance(a, str) and isinstance(b, str):
            return a + b
        return NOTHING
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        v = const_eval(e.operand, env)
        return NOTHING if v is NOTHING else not v
    if isinstance(e, ast.BoolOp):
        vals = [const_eval(v, env) for v in e.values]
        if any(v is NOTHING for v in vals):
            return NOTHING
        return all(vals) if isinstance(e.op, ast.And) else any(vals)
    if isinstance(e, ast.Compare) and len(e.ops) == 1:
        a, b = const_eval(e.left, env), const_eval(e.comparators[0], env)
        if a is NOTHING or b is NOTHING:
            return NOTHING
        op = e.ops[0]
        try:
            if isinstance(op, ast.In):
                return a in b
            if isinstance(op, ast.NotIn):
                return a not in b
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
        except TypeError:
            return NOTHING
        return NOTHING
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.keywords:
        base = const_eval(e.func.value, env)
        args = [const_eval(a, env) for a in e.args]
        if isinstance(base, str) and not any(a is NOTHING for a in args):
            if (
                e.func.attr in ("startswith", "endswith")
                and len(args) == 1
                and isinstance(args[0], (str, tuple))
            ):
                return getattr(base, e.func.attr)(args[0])
            if e.func.attr in ("lower", "upper", "strip") and not args:
                return getattr(base, e.func.attr)()
    return NOTHING


def is_none(e: ast.AST | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is None


def is_const(e: ast.AST, value) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is type(value) and e.value == value


def is_str_seq(e: ast.AST) -> bool:
    return (
        isinstance(e, (ast.List, ast.Tuple, ast.Set))
        and bool(e.elts)
        and all(const_str(x) is not None for x in e.elts)
    )


def endswith_mode(e: ast.AST) -> bool:
    if isinstance(e, ast.Name):
        return e.id.lower().endswith("mode")
    if isinstance(e, ast.Attribute):
        return e.attr.lower().endswith("mode")
    return False


def mentions(e: ast.AST, hints) -> bool:
    for node in ast.walk(e):
        name = (
            node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        )
        if name and any(h.lower() in name.lower() for h in hints):
            return True
    return False


def value_kind_of(value: ast.AST | None) -> str:
    if isinstance(value, ast.Lambda):
        return "lambda"
    if isinstance(value, (ast.DictComp, ast.ListComp)):
        return "comprehension"
    return "value"


def short_value(site: DefSite) -> str:
    if site.value is None:
        return "…"
    if isinstance(site.value, ast.Lambda):
        params = ", ".join(a.arg for a in site.value.args.args)
        return f"lambda {params}: …"
    return site.func.file.segment(site.value, 50)


def unique_funcs(items: list[FuncInfo]) -> list[FuncInfo]:
    seen, out = set(), []
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            out.append(item)
    return out
