"""Dead code after specialisation: assignments nobody reads, ``if`` statements with nothing left in them, and
imports the new module does not use; and the two lint findings that deciding a branch can leave in code that was
clean (a loop variable only the decided test read, a handler the decided test emptied)."""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from .cstutil import (
    assigned_names,
    block_statements,
    code,
    is_pure,
    names_read,
    names_written,
    small_statement,
    summary,
    target_names,
)
from .track import Provenance, StatementTransformer, is_expression
from .walk import hot_paths, walk


class _DeadStores(StatementTransformer):
    def __init__(self, live: set[str], pure_call: Callable[[cst.Call], bool] | None, prov) -> None:
        super().__init__(prov)
        self.live = live
        self.pure_call = pure_call
        self.changed = False

    def would_change(self, node: cst.CSTNode) -> bool:
        """Whether a leave hook below changes ``node`` when nothing inside it changed (the nodes worth entering
        are those and their ancestors)."""
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            small = small_statement(node)
            if small is None or isinstance(small, cst.AugAssign):
                return False
            return any(n not in self.live for n in assigned_names(small) or ())
        if kind is cst.If:
            return _empty(node.body) and _empty_orelse(node.orelse) and is_pure(node.test, self.pure_call)
        if kind is cst.IndentedBlock:
            body = node.body
            if any(_ends_the_block(s) for s in body[:-1]):
                return True
            passes = sum(1 for s in body if _is_pass(s))
            return 0 < passes < len(body)
        return False

    def leave_SimpleStatementLine(self, original_node, updated_node):
        small = small_statement(updated_node)
        if small is None or isinstance(small, cst.AugAssign):
            return updated_node
        names = assigned_names(small)
        if not names:
            return updated_node
        unused = [n for n in names if n not in self.live]
        if not unused:
            return updated_node
        if len(unused) < len(names):
            to_rename = {n for n in unused if not n.startswith("_")}
            if to_rename and isinstance(small, cst.Assign) and len(small.targets) == 1:
                self.changed = True
                return updated_node.with_changes(body=[_rename_targets(small, to_rename)])
            return updated_node
        value = getattr(small, "value", None)
        if value is not None and not is_pure(value, self.pure_call):
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                self.changed = True  # the call must still run; nobody reads what it returns
                return updated_node.with_changes(body=[cst.Expr(value=value)])
            return updated_node
        self._drop(original_node, f"dead code: nothing reads {', '.join(names)}")
        return cst.RemoveFromParent()

    def leave_If(self, original_node, updated_node):
        body_empty = _empty(updated_node.body) and _empty_orelse(updated_node.orelse)
        if body_empty and is_pure(updated_node.test, self.pure_call):
            self._drop(original_node, "dead code: nothing left in it")
            return cst.RemoveFromParent()
        return updated_node

    def _drop(self, node: cst.CSTNode, reason: str) -> None:
        self.changed = True
        if self.prov is not None:
            self.prov.drop(node, reason)

    def leave_IndentedBlock(self, original_node, updated_node):
        # statements after a return / raise never run; a block left empty renders as ``pass``. Those after
        # ``assert False`` are kept: under ``python -O`` the assert is stripped and they run
        body = list(updated_node.body)
        for index, statement in enumerate(body):
            if _ends_the_block(statement) and index + 1 < len(body):
                for unreachable in body[index + 1 :]:
                    self._drop(unreachable, "dead code: after a return / raise")
                body = body[: index + 1]
                break
        kept = [s for s in body if not _is_pass(s)]
        if kept and len(kept) != len(body):
            body = kept
        if len(body) != len(updated_node.body):
            return updated_node.with_changes(body=body)
        return updated_node


def _ends_the_block(statement: cst.CSTNode) -> bool:
    """A return or a raise. Not ``assert False`` (Llama-2-70B's attention: ``assert False, "Legacy ccl call
    removed ..."``): under ``python -O`` it is stripped and the code after it runs."""
    return isinstance(small_statement(statement), (cst.Return, cst.Raise))


def _rename_targets(assign: cst.Assign, unused: set[str]) -> cst.Assign:
    """``a, b = f()`` with ``a`` unread -> ``_a, b = f()`` (an unpacking that must keep its shape)."""

    class _T(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            if updated_node.value in unused and not updated_node.value.startswith("_"):
                return updated_node.with_changes(value="_" + updated_node.value)
            return updated_node

    target = assign.targets[0]
    if not isinstance(target.target, (cst.Tuple, cst.List)):
        return assign
    return assign.with_changes(targets=[target.with_changes(target=target.target.visit(_T()))])


def _is_pass(statement: cst.CSTNode) -> bool:
    small = small_statement(statement)
    return isinstance(small, cst.Pass) and not statement.leading_lines


def _empty(block: cst.BaseSuite) -> bool:
    return all(_is_pass(s) for s in block_statements(block))


def _empty_orelse(orelse) -> bool:
    if orelse is None:
        return True
    if isinstance(orelse, cst.Else):
        return _empty(orelse.body)
    return _empty(orelse.body) and _empty_orelse(orelse.orelse)


def remove_dead_code(
    node: cst.CSTNode,
    pure_call: Callable[[cst.Call], bool] | None = None,
    keep: set[str] | None = None,
    prov: Provenance | None = None,
) -> cst.CSTNode:
    """Remove, until nothing changes, assignments of pure values to names nobody reads (``keep`` names are
    always live) and ``if`` statements left empty with a pure test."""
    while True:
        live = names_read(node) | (keep or set())
        transformer = _DeadStores(live, pure_call, prov)
        transformer.hot = hot_paths(node, transformer.would_change, lambda n: not is_expression(n))
        node = node.visit(transformer)
        if not transformer.changed:
            return node


def unused_imports(module: cst.Module) -> cst.Module:
    """Drop imported names the module never reads (``from __future__`` imports stay)."""
    used = names_read(module)  # an attribute chain reads its root name, so ``import os.path`` counts too

    class _T(StatementTransformer):
        def leave_ImportFrom(self, original_node, updated_node):
            module_name = updated_node.module
            if isinstance(module_name, cst.Name) and module_name.value == "__future__":
                return updated_node
            if isinstance(updated_node.names, cst.ImportStar):
                return updated_node
            kept = [a for a in updated_node.names if _alias_name(a) in used]
            if not kept:
                return cst.RemoveFromParent()
            if len(kept) != len(updated_node.names):
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated_node.with_changes(names=kept)
            return updated_node

        def leave_Import(self, original_node, updated_node):
            kept = [a for a in updated_node.names if _alias_name(a) in used]
            if not kept:
                return cst.RemoveFromParent()
            if len(kept) != len(updated_node.names):
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated_node.with_changes(names=kept)
            return updated_node

    transformer = _T(None)
    transformer.hot = hot_paths(
        module, lambda n: type(n) in (cst.Import, cst.ImportFrom), lambda n: not is_expression(n)
    )
    return module.visit(transformer)


def _alias_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    name = alias.name
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value if isinstance(name, cst.Name) else ""


# ------------------------------------------------------------------------------------------ lint after specialising
#: Calls that read a function's local variables by name: a local may then not be renamed.
_SCOPE_READERS = frozenset({"locals", "vars", "eval", "exec", "dir"})
#: Statements ruff's SIM105 accepts as the one statement of the ``try`` body.
_SUPPRESSIBLE = (cst.Del, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Assert, cst.Import, cst.ImportFrom)
_SUPPRESSIBLE += (cst.Expr, cst.Pass)
SIM105_REASON = "tttv2-refactor keeps TTTv1's try/except; its handler does nothing here"
B007_REASON = "tttv2-refactor: read outside the loop body, so it keeps TTTv1's name"
B011_REASON = "tttv2-refactor keeps TTTv1's assert: python -O strips it here as in TTTv1"


class _Scope:
    """What a function's code does with its names, worked out only when a loop variable may be renamed (most
    loops use theirs): names read in it, names that may not be renamed, every name spelled in it."""

    def __init__(self, func: cst.FunctionDef) -> None:
        self.func = func
        self._facts: tuple[set[str], set[str], set[str]] | None = None

    def facts(self) -> tuple[set[str], set[str], set[str]]:
        if self._facts is None:
            body = self.func.body
            reads = names_read(body)
            pinned: set[str] = set()
            spelled: set[str] = set(reads) | names_written(body)
            for inner in walk(body):
                if isinstance(inner, (cst.Global, cst.Nonlocal)):
                    pinned |= {n.name.value for n in inner.names}
                elif isinstance(inner, cst.Name):
                    spelled.add(inner.value)
            if reads & _SCOPE_READERS:
                pinned |= spelled  # locals() / eval(...) can read any of them
            self._facts = (reads, pinned, spelled)
        return self._facts


class _LintAfterSpecialising(StatementTransformer):
    """See :func:`lint_after_specialising`. A stack of the enclosing function scopes (None for a class body)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.functions: list[_Scope | None] = []
        self.entered: list[cst.FunctionDef | cst.ClassDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.functions.append(_Scope(node))
        self.entered.append(node)
        return True

    def leave_FunctionDef(self, original_node, updated_node):
        if self.entered and self.entered[-1] is original_node:  # a function with no loop / try is not entered
            self.entered.pop()
            self.functions.pop()
        return updated_node

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.functions.append(None)  # a loop in a class body binds a class attribute: never renamed
        self.entered.append(node)
        return True

    leave_ClassDef = leave_FunctionDef

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        """B007: a loop variable the body never names. Renamed ``_name`` when nothing in the function reads it
        (its value is then never used: exactly the same behaviour); otherwise it keeps its name and the header
        says why."""
        names = target_names(updated_node.target) or []
        used = _named_in(updated_node.body)
        unused = [n for n in dict.fromkeys(names) if not n.startswith("_") and n not in used]
        if not unused:
            return updated_node
        renames: dict[str, str] = {}
        kept: list[str] = []
        if self.functions and self.functions[-1] is not None:
            reads, pinned, spelled = self.functions[-1].facts()
            for name in unused:
                if name in reads or name in pinned:
                    kept.append(name)
                    continue
                new, n = f"_{name}", 2
                while new in spelled:
                    new, n = f"_{name}_{n}", n + 1
                spelled.add(new)
                renames[name] = new
        else:
            kept = unused  # a module or class level loop binds a global / class attribute others may read
        if renames:
            updated_node = updated_node.with_changes(target=_renamed(updated_node.target, renames))
        if kept and "\n" not in code(updated_node.target) + code(updated_node.iter):
            updated_node = updated_node.with_changes(body=_with_noqa(updated_node.body, "B007", B007_REASON))
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        """A ``# noqa: E702`` of TTTv1's ``a = 1; b = 2`` line, now one statement a line: ruff would call it
        unused (RUF100). ``assert False`` (B011) is kept on purpose, so the generated code behaves as TTTv1 under
        ``python -O`` too: its line says so."""
        comment = updated_node.trailing_whitespace.comment
        if _assert_false(updated_node) and (comment is None or "noqa" not in comment.value.lower()):
            return _b011(updated_node)
        if comment is None or len(updated_node.body) != 1:
            return updated_node
        text = _without_code(comment.value, "E702")
        if text == comment.value:
            return updated_node
        trailing = updated_node.trailing_whitespace
        if not text:
            trailing = trailing.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
        else:
            trailing = trailing.with_changes(comment=cst.Comment(text))
        return updated_node.with_changes(trailing_whitespace=trailing)

    def leave_Try(self, original_node: cst.Try, updated_node: cst.Try) -> cst.Try:
        """SIM105: ``try: <one statement> except E: pass``, which specialising leaves when the decided test
        emptied the handler. ``contextlib.suppress(E)`` would evaluate ``E`` before the body (TTTv1 evaluates it
        only when an exception is raised) and change the imports, so the code stays TTTv1's and says so."""
        if not _sim105(updated_node):
            return updated_node
        return updated_node.with_changes(body=_with_noqa(updated_node.body, "SIM105", SIM105_REASON))


def _named_in(node: cst.CSTNode) -> set[str]:
    """Every name the code spells as a variable, read or bound, nested functions included (what ruff counts as
    a use of a loop variable)."""
    found = summary(node)
    return set(found.reads) | set(found.writes)


def _renamed(target: cst.BaseAssignTargetExpression, renames: dict[str, str]):
    class _T(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            new = renames.get(updated_node.value)
            return updated_node if new is None else updated_node.with_changes(value=new)

    return target.visit(_T())


_NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)", re.IGNORECASE)


def _without_code(comment: str, rule: str) -> str:
    """``comment`` with ``rule`` taken out of its ``# noqa: …`` list (the directive goes when nothing is left)."""
    match = _NOQA.search(comment)
    if match is None:
        return comment
    codes = [c.strip() for c in match.group("codes").split(",")]
    if rule not in codes:
        return comment
    kept = [c for c in codes if c != rule]
    replacement = f"# noqa: {', '.join(kept)}" if kept else ""
    text = comment[: match.start()] + replacement + comment[match.end() :]
    text = re.sub(r"^\s*#?\s*(?=#)", "", text.strip())  # "  # fmt: skip" -> "# fmt: skip"
    return text.strip()


def _sim105(node: cst.Try) -> bool:
    if len(node.handlers) != 1 or node.orelse is not None or node.finalbody is not None:
        return False
    body = block_statements(node.body)
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return False
    if not isinstance(body[0].body[0], _SUPPRESSIBLE):
        return False
    handler = block_statements(node.handlers[0].body)
    if not handler:
        return True  # an emptied block renders as ``pass``
    if len(handler) != 1 or not isinstance(handler[0], cst.SimpleStatementLine) or len(handler[0].body) != 1:
        return False
    small = handler[0].body[0]
    return isinstance(small, cst.Pass) or (
        isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis)
    )


def _with_noqa(body: cst.BaseSuite, rule: str, reason: str) -> cst.BaseSuite:
    """``body`` whose header line (the ``for …:`` / ``try:`` line) ends in ``# noqa: RULE reason``; a comment
    already there is kept before it, and one that already has a ``noqa`` is left alone."""
    if isinstance(body, cst.IndentedBlock):
        trailing, field_name = body.header, "header"
    else:
        trailing, field_name = body.trailing_whitespace, "trailing_whitespace"
    existing = trailing.comment.value if trailing.comment is not None else ""
    if "noqa" in existing.lower():
        return body
    text = f"{existing}  # noqa: {rule} {reason}" if existing else f"# noqa: {rule} {reason}"
    whitespace = trailing.whitespace if existing else cst.SimpleWhitespace("  ")
    new = trailing.with_changes(whitespace=whitespace, comment=cst.Comment(text))
    return body.with_changes(**{field_name: new})


def _assert_false(line: cst.SimpleStatementLine) -> bool:
    """A line that is one ``assert False`` (TTTv1's, or a refusal a topology / mode decided)."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assert):
        return False
    test = line.body[0].test
    return isinstance(test, cst.Name) and test.value == "False"


def _b011(line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """``line`` ending in ``# noqa: B011 …`` (after a comment already there)."""
    trailing = line.trailing_whitespace
    existing = trailing.comment.value if trailing.comment is not None else ""
    text = f"{existing}  # noqa: B011 {B011_REASON}" if existing else f"# noqa: B011 {B011_REASON}"
    whitespace = trailing.whitespace if existing else cst.SimpleWhitespace("  ")
    return line.with_changes(
        trailing_whitespace=trailing.with_changes(whitespace=whitespace, comment=cst.Comment(text))
    )


def _worth_entering(node: cst.CSTNode) -> bool:
    kind = type(node)
    if kind is cst.SimpleStatementLine:
        comment = node.trailing_whitespace.comment
        return (comment is not None and "E702" in comment.value) or _assert_false(node)
    return kind is cst.For or kind is cst.Try


def _holds_statements(node: cst.CSTNode) -> bool:
    """Whether a loop, a ``try`` or a statement line can be below ``node`` (not in an expression or a line)."""
    return type(node) is not cst.SimpleStatementLine and not is_expression(node)


def lint_after_specialising(module: cst.Module) -> cst.Module:
    """Keep a generated module ruff-clean where specialising, not TTTv1, made code that lint rules flag:
    a ``for`` variable only a decided test read (B007), a handler a decided test emptied (SIM105), and the
    ``# noqa: E702`` of a ``;`` line that is now one statement a line. All leave the behaviour exactly TTTv1's
    (see the hooks)."""
    transformer = _LintAfterSpecialising()
    transformer.hot = hot_paths(module, _worth_entering, _holds_statements)
    return module.visit(transformer)
