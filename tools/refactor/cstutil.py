"""Small libcst helpers shared by the passes: code of a node, names read and written, constants, parentheses,
purity, slugs. Nothing here knows about TTTv1; the passes supply what the analysis says."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import libcst as cst

_EMPTY = cst.parse_module("")

TRUE, FALSE = cst.Name("True"), cst.Name("False")

#: Builtins whose calls have no side effects (for dead-code removal and hoisting).
PURE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "frozenset", "getattr", "hasattr",
        "int", "isinstance", "len", "list", "max", "min", "pow", "range", "repr", "reversed", "round", "set",
        "sorted", "str", "sum", "tuple", "type", "zip",
    }
)  # fmt: skip


def code(node: cst.CSTNode) -> str:
    """Source text of a node (as libcst renders it)."""
    return _EMPTY.code_for_node(node)


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
class _NameUse(cst.CSTVisitor):
    """Names read and written in a subtree (value positions only: attribute names, keyword names and
    parameter names are not variables)."""

    def __init__(self) -> None:
        self.reads: list[cst.Name] = []
        self.writes: list[cst.Name] = []
        self._targets: set[int] = set()
        self._skip: set[int] = set()

    def _mark_target(self, node: cst.CSTNode | None) -> None:
        if node is None:
            return
        if isinstance(node, cst.Name):
            self._targets.add(id(node))
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._mark_target(element.value)
        elif isinstance(node, cst.StarredElement):
            self._mark_target(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._mark_target(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._mark_target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.reads.append(node.target)  # x += 1 reads x
            self._targets.add(id(node.target))

    def visit_For(self, node: cst.For) -> None:
        self._mark_target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._mark_target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._mark_target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._mark_target(node.target)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self._targets.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._targets.add(id(node.name))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._targets.add(id(node.name))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        self._skip_all(node.name)
        if node.asname is None:
            name = node.name
            while isinstance(name, cst.Attribute):
                name = name.value
            if isinstance(name, cst.Name):
                self.writes.append(name)
        return True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            self._skip_all(node.module)

    def _skip_all(self, node: cst.CSTNode) -> None:
        for name in _all_names(node):
            self._skip.add(id(name))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self._skip:
            return
        if id(node) in self._targets:
            self.writes.append(node)
        else:
            self.reads.append(node)


def _all_names(node: cst.CSTNode) -> Iterable[cst.Name]:
    out: list[cst.Name] = []

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

    node.visit(_V())
    return out


def name_use(node: cst.CSTNode) -> tuple[list[cst.Name], list[cst.Name]]:
    """(names read, names written) in ``node``, as Name nodes in source order."""
    visitor = _NameUse()
    node.visit(visitor)
    return visitor.reads, visitor.writes


def names_read(node: cst.CSTNode) -> set[str]:
    return {n.value for n in name_use(node)[0]}


def names_written(node: cst.CSTNode) -> set[str]:
    return {n.value for n in name_use(node)[1]}


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
    ``pure_call`` accepts), no await / yield / walrus."""
    impure = False

    class _V(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal impure
            if not (_pure_callee(call) or (pure_call is not None and pure_call(call))):
                impure = True
            return not impure

        def visit_Await(self, _n: cst.Await) -> bool:
            nonlocal impure
            impure = True
            return False

        def visit_Yield(self, _n: cst.Yield) -> bool:
            nonlocal impure
            impure = True
            return False

        def visit_NamedExpr(self, _n: cst.NamedExpr) -> bool:
            nonlocal impure
            impure = True
            return False

        def visit_Lambda(self, _n: cst.Lambda) -> bool:
            return False  # defining a function runs nothing

    node.visit(_V())
    return not impure


def _pure_callee(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in PURE_BUILTINS or _camel(func.value)
    if isinstance(func, cst.Attribute):
        return _camel(func.attr.value)
    return False


def _camel(name: str) -> bool:
    return bool(name) and name[0].isupper() and not name.isupper() and "_" not in name
