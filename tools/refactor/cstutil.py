"""Small libcst helpers shared by the passes: code of a node, names read and written, constants, parentheses,
purity, slugs. Nothing here knows about TTTv1; the passes supply what the analysis says."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import libcst as cst

from .walk import children, clear_run_memos

_EMPTY = cst.parse_module("")

TRUE, FALSE = cst.Name("True"), cst.Name("False")

#: Builtins whose calls have no side effects (for dead-code removal and hoisting).
PURE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "dict", "divmod", "iter", "next", "enumerate", "float", "frozenset", "getattr", "hasattr",
        "int", "isinstance", "len", "list", "max", "min", "pow", "range", "repr", "reversed", "round", "set",
        "sorted", "str", "sum", "tuple", "type", "zip",
    }
)  # fmt: skip


def code(node: cst.CSTNode) -> str:
    """Source text of a node (as libcst renders it); nodes never change, so the text is memoised by identity
    (until :func:`clear_memos`)."""
    hit = _CODE.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    text = _EMPTY.code_for_node(node)
    if len(_CODE) > _MEMO_LIMIT:
        _CODE.clear()
    _CODE[id(node)] = (node, text)
    return text


_CODE: dict[int, tuple[cst.CSTNode, str]] = {}


def is_staticmethod(func: cst.FunctionDef) -> bool:
    """``func`` is decorated ``@staticmethod``: it takes no instance (its first parameter is data)."""
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in func.decorators
    )


def one_line(node: cst.CSTNode, limit: int = 100) -> str:
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def stmt(text: str) -> cst.BaseStatement:
    return cst.parse_statement(text)


def const_bool(node: cst.CSTNode) -> bool | None:
    """True / False for the literal names, None otherwise."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def bool_name(value: bool) -> cst.Name:
    return cst.Name("True" if value else "False")


def strip_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    if getattr(node, "lpar", None):
        return node.with_changes(lpar=[], rpar=[])
    return node


def adopt_parens(old: cst.BaseExpression, new: cst.BaseExpression) -> cst.BaseExpression:
    """``new`` replaces ``old``: keep ``old``'s parentheses when ``new`` has none and could need them."""
    if not getattr(old, "lpar", None) or getattr(new, "lpar", None):
        return new
    if is_atom(new):
        return new
    return new.with_changes(lpar=old.lpar, rpar=old.rpar)


def is_atom(node: cst.CSTNode) -> bool:
    """An expression whose parentheses never matter."""
    return isinstance(
        node,
        (
            cst.Name,
            cst.Attribute,
            cst.Call,
            cst.Subscript,
            cst.Integer,
            cst.Float,
            cst.SimpleString,
            cst.ConcatenatedString,
            cst.FormattedString,
            cst.List,
            cst.Dict,
            cst.Set,
        ),
    )


def dotted(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def slug(text: str, limit: int = 40) -> str:
    """An identifier fragment describing an expression: ``self.dim == 8192`` -> ``dim_eq_8192``."""
    words = {
        "==": " eq ",
        "!=": " ne ",
        "<=": " le ",
        ">=": " ge ",
        "<": " lt ",
        ">": " gt ",
        " is not ": " is_not ",
        " not in ": " not_in ",
    }
    for old, new in words.items():
        text = text.replace(old, new)
    text = re.sub(r"\bself\.(args\.|model_config|config\.)?", "", text)
    text = re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower()
    text = re.sub(r"_+", "_", text)
    if not text or text[0].isdigit():
        text = "value_" + text
    return text[:limit].rstrip("_")


# ------------------------------------------------------------------------------------------ names
@dataclass(frozen=True)
class Summary:
    """What a subtree reads, binds and calls, computed bottom-up once per node (memoised by identity)."""

    reads: tuple[str, ...]  # names read, in source order, repeats dropped
    writes: tuple[str, ...]  # plain names bound
    self_attrs: tuple[str, ...]  # X of every ``self.X``
    calls: tuple[cst.Call, ...]  # calls outside lambda bodies (lambdas run nothing when defined)
    effects: bool  # await / yield / walrus outside lambda bodies

    @staticmethod
    def merge(parts: Iterable[Summary], reads=(), writes=()) -> Summary:
        parts = [p for p in parts if p is not _EMPTY_SUMMARY]
        if not reads and not writes:
            if not parts:
                return _EMPTY_SUMMARY
            if len(parts) == 1:
                return parts[0]
        r: dict[str, None] = dict.fromkeys(reads)
        w: dict[str, None] = dict.fromkeys(writes)
        a: dict[str, None] = {}
        calls: list[cst.Call] = []
        effects = False
        for part in parts:
            r.update(dict.fromkeys(part.reads))
            w.update(dict.fromkeys(part.writes))
            a.update(dict.fromkeys(part.self_attrs))
            calls.extend(part.calls)
            effects = effects or part.effects
        return Summary(tuple(r), tuple(w), tuple(a), tuple(calls), effects)


_EMPTY_SUMMARY = Summary((), (), (), (), False)
_MEMO: dict[int, tuple[cst.CSTNode, Summary]] = {}
_MEMO_LIMIT = 400_000


def clear_memos() -> None:
    """Forget the memoised texts and summaries, and the passes' run memos: each run starts, and ends, with none
    (a run never gains from an earlier one, and the nodes are freed)."""
    _MEMO.clear()
    _CODE.clear()
    clear_run_memos()


_OUTERMOST = [True]  # the next summary() call is not inside another one


def summary(node: cst.CSTNode) -> Summary:
    hit = _MEMO.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if _OUTERMOST[0]:
        _OUTERMOST[0] = False
        try:
            result = _summarize(node)
        except RecursionError:  # a very long expression (``x + x + ...``): the same summaries, bottom up
            result = _summarize_bottom_up(node)
        finally:
            _OUTERMOST[0] = True
    else:
        result = _summarize(node)
    if len(_MEMO) > _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[id(node)] = (node, result)
    return result


def _summarize_bottom_up(root: cst.CSTNode) -> Summary:
    """The iterative fallback of :func:`summary` for trees deeper than Python's recursion limit: every node
    below ``root`` is summarised children first (an explicit stack, no recursion), so each ``_summarize`` finds
    the summaries of its parts memoised and goes one level deep."""
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(children(node))
    if len(_MEMO) + len(order) > _MEMO_LIMIT:
        _MEMO.clear()
    for node in reversed(order):
        hit = _MEMO.get(id(node))
        if hit is None or hit[0] is not node:
            _MEMO[id(node)] = (node, _summarize(node))
    return _MEMO[id(root)][1]


def _target(node: cst.CSTNode) -> Summary:
    """An assignment target: plain names are bound; subscripts and attributes read their parts."""
    if isinstance(node, cst.Name):
        return Summary((), (node.value,), (), (), False)
    if isinstance(node, (cst.Tuple, cst.List)):
        return Summary.merge(_target(e.value) for e in node.elements)
    if isinstance(node, cst.StarredElement):
        return _target(node.value)
    return summary(node)


_LEAVES = (
    cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Comma, cst.Dot, cst.Colon,
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.EmptyLine, cst.TrailingWhitespace,
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
    cst.RightCurlyBrace, cst.Comment, cst.Pass, cst.Break, cst.Continue, cst.AssignEqual, cst.AssignTarget,
)  # fmt: skip


#: (node class, kind) in the order _summarize tells them apart; a subclass takes the first kind it matches.
_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (cst.AssignTarget, "other"),
    (_LEAVES, "leaf"),
    (cst.Name, "name"),
    (cst.Attribute, "attribute"),
    (cst.Arg, "arg"),
    (cst.Param, "param"),
    (cst.Call, "call"),
    (cst.Lambda, "lambda"),
    ((cst.Await, cst.Yield), "effect"),
    (cst.NamedExpr, "walrus"),
    (cst.Assign, "assign"),
    (cst.AnnAssign, "annassign"),
    (cst.AugAssign, "augassign"),
    ((cst.For, cst.CompFor), "for"),
    (cst.AsName, "asname"),
    ((cst.FunctionDef, cst.ClassDef), "def"),
    (cst.ImportAlias, "alias"),
    (cst.ImportFrom, "importfrom"),
    ((cst.Global, cst.Nonlocal), "leaf"),
)
#: node class -> kind, filled on first sight (isinstance against libcst's abstract bases is slow in a hot loop)
_KIND_OF: dict[type, str] = {}


def _kind(node: cst.CSTNode) -> str:
    kind = _KIND_OF.get(type(node))
    if kind is None:
        kind = next((k for cls, k in _KINDS if isinstance(node, cls)), "other")
        _KIND_OF[type(node)] = kind
    return kind


def _summarize(node: cst.CSTNode) -> Summary:
    kind = _kind(node)
    if kind == "leaf":
        return _EMPTY_SUMMARY
    if kind == "other":
        return Summary.merge(summary(c) for c in children(node))
    if kind == "name":
        if node.value in ("True", "False", "None"):
            return _EMPTY_SUMMARY  # constants, not variables
        return Summary((node.value,), (), (), (), False)
    if kind == "attribute":
        inner = summary(node.value)
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            return Summary.merge([inner, Summary((), (), (node.attr.value,), (), False)])
        return inner
    if kind == "arg":
        return summary(node.value)
    if kind == "param":
        return Summary.merge(summary(c) for c in (node.annotation, node.default) if c is not None)
    if kind == "call":
        inner = Summary.merge(summary(c) for c in children(node))
        return Summary(inner.reads, inner.writes, inner.self_attrs, (*inner.calls, node), inner.effects)
    if kind == "lambda":
        inner = Summary.merge(summary(c) for c in children(node))
        return Summary(inner.reads, inner.writes, inner.self_attrs, (), False)
    if kind == "effect":
        inner = Summary.merge(summary(c) for c in children(node))
        return Summary(inner.reads, inner.writes, inner.self_attrs, inner.calls, True)
    if kind == "walrus":
        inner = Summary.merge([_target(node.target), summary(node.value)])
        return Summary(inner.reads, inner.writes, inner.self_attrs, inner.calls, True)
    if kind == "assign":
        return Summary.merge([*(_target(t.target) for t in node.targets), summary(node.value)])
    if kind == "annassign":
        parts = [_target(node.target), summary(node.annotation)]
        if node.value is not None:
            parts.append(summary(node.value))
        return Summary.merge(parts)
    if kind == "augassign":
        target = _target(node.target)
        return Summary.merge([target, summary(node.value)], reads=target.writes)
    if kind == "for":
        others = [summary(c) for c in children(node) if c is not node.target]
        return Summary.merge([_target(node.target), *others])
    if kind == "asname":
        return _target(node.name)
    if kind == "def":
        others = [summary(c) for c in children(node) if c is not node.name]
        return Summary.merge(others, writes=(node.name.value,))
    if kind == "alias":
        if node.asname is not None:
            return _target(node.asname.name)
        root = node.name
        while isinstance(root, cst.Attribute):
            root = root.value
        return Summary((), (root.value,) if isinstance(root, cst.Name) else (), (), (), False)
    # kind == "importfrom"
    if isinstance(node.names, cst.ImportStar):
        return _EMPTY_SUMMARY
    return Summary.merge(summary(a) for a in node.names)


def names_read(node: cst.CSTNode) -> set[str]:
    return set(summary(node).reads)


def names_read_ordered(node: cst.CSTNode) -> tuple[str, ...]:
    return summary(node).reads


def names_written(node: cst.CSTNode) -> set[str]:
    return set(summary(node).writes)


def names_bound(target: cst.CSTNode) -> set[str]:
    """Names an assignment or loop target binds (``for i, w in …``: ``{"i", "w"}``); ``names_written`` of a bare
    target is empty, the target being an expression (a read) on its own."""
    return set(_target(target).writes)


def target_names(node: cst.BaseAssignTargetExpression | cst.BaseExpression) -> list[str] | None:
    """Names bound by an assignment target, or None when the target is not plain names (``a.b = …``)."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        out: list[str] = []
        for element in node.elements:
            inner = target_names(element.value)
            if inner is None:
                return None
            out.extend(inner)
        return out
    if isinstance(node, cst.StarredElement):
        return target_names(node.value)
    return None


def assigned_names(statement: cst.CSTNode) -> list[str] | None:
    """Names an assignment statement binds; None if it is not a plain-name assignment."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        statement = statement.body[0]
    if isinstance(statement, cst.Assign):
        out: list[str] = []
        for target in statement.targets:
            names = target_names(target.target)
            if names is None:
                return None
            out.extend(names)
        return out
    if isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        return target_names(statement.target)
    return None


def block_statements(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of a suite; a one-line suite (``if x: y``) becomes one statement line."""
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=list(block.body))] if block.body else []
    return list(block.body)


def small_statement(statement: cst.CSTNode) -> cst.BaseSmallStatement | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        return statement.body[0]
    return None


# ------------------------------------------------------------------------------------------ purity
def is_pure(node: cst.CSTNode, pure_call: Callable[[cst.Call], bool] | None = None) -> bool:
    """No calls (except builtins from :data:`PURE_BUILTINS`, constructors spelled in CamelCase, and calls
    ``pure_call`` accepts), no await / yield / walrus. Lambda bodies do not count: defining runs nothing."""
    info = summary(node)
    if info.effects:
        return False
    return all(_pure_callee(call) or (pure_call is not None and pure_call(call)) for call in info.calls)


#: Methods that only query an object (a tensor's layout, a memory config's sharding).
QUERY_METHODS = frozenset(
    {"is_sharded", "memory_config", "storage_type", "get_dtype", "get_layout", "num_cores"}
)


def _pure_callee(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in PURE_BUILTINS or _camel(func.value)
    if isinstance(func, cst.Attribute):
        return _camel(func.attr.value) or (func.attr.value in QUERY_METHODS and not call.args)
    return False


def _camel(name: str) -> bool:
    return bool(name) and name[0].isupper() and not name.isupper() and "_" not in name
