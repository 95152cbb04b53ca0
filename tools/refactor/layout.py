"""Layout of the generated module: blank lines between definitions and sorted import blocks, so that the output
passes ``ruff check`` as generated (``--formatter`` can run a code formatter on top)."""

from __future__ import annotations

import sys

import libcst as cst

from .track import StatementTransformer, is_expression
from .walk import hot_paths

_STDLIB = frozenset(sys.stdlib_module_names)


def _blank(n: int) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(indent=False) for _ in range(n)]


def _with_blank_lines(node: cst.CSTNode, n: int) -> cst.CSTNode:
    lines = list(node.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return node.with_changes(leading_lines=[*_blank(n), *lines])


def _is_def(node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.FunctionDef, cst.ClassDef))


def _is_import(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in node.body
    )


def tidy(module: cst.Module) -> cst.Module:
    """Two blank lines around top-level definitions, one between methods, none between dataclass fields."""
    body = []
    previous = None
    for index, statement in enumerate(module.body):
        if index == 0:
            body.append(statement)
        elif _is_def(statement) or (previous is not None and _is_def(previous)):
            body.append(_with_blank_lines(statement, 2))
        elif _is_import(statement) and previous is not None and _is_import(previous):
            body.append(statement)  # import blocks lay themselves out (see sorted_imports)
        elif previous is not None and _is_import(previous):
            body.append(_with_blank_lines(statement, 2 if _is_def(statement) else 1))
        else:
            body.append(statement)
        previous = statement
    body = [_tidy_class(s) if isinstance(s, cst.ClassDef) else s for s in body]
    return _no_whitespace_lines(module.with_changes(body=body))


class _NoWhitespaceLines(StatementTransformer):
    """Blank lines carry no indentation (ruff W293); expressions hold none of them, so they are skipped, and so
    is every statement without such a line (see :func:`_no_whitespace_lines`)."""

    def leave_EmptyLine(self, original_node, updated_node):
        if _indented_blank(updated_node):
            return updated_node.with_changes(indent=False, whitespace=cst.SimpleWhitespace(""))
        return updated_node


def _indented_blank(node: cst.CSTNode) -> bool:
    return type(node) is cst.EmptyLine and node.comment is None and bool(node.indent or node.whitespace.value)


def _no_whitespace_lines(module: cst.Module) -> cst.Module:
    transformer = _NoWhitespaceLines(None)
    transformer.hot = hot_paths(module, _indented_blank, lambda n: not is_expression(n))
    return module.visit(transformer)


def _tidy_class(klass: cst.ClassDef) -> cst.ClassDef:
    statements = list(klass.body.body)
    out = []
    for index, statement in enumerate(statements):
        if index == 0:
            out.append(_with_blank_lines(statement, 0))
        elif isinstance(statement, cst.FunctionDef) or index == 1:
            out.append(_with_blank_lines(statement, 1))
        else:
            out.append(_with_blank_lines(statement, 0))
    return klass.with_changes(body=klass.body.with_changes(body=out))


def sorted_imports(
    entries: list[tuple[str, str | None, str]], first_party: set[str]
) -> list[cst.SimpleStatementLine]:
    """Import statements for (module, imported name or None, local name), grouped and ordered as isort does:
    ``__future__``, standard library, third party, first party; ``import x`` before ``from x import y``."""
    sections: dict[int, dict[tuple[int, str], list[tuple[str | None, str]]]] = {}
    for module, name, local in entries:
        root = module.lstrip(".").split(".", 1)[0]
        if module == "__future__":
            section = 0
        elif module.startswith("."):
            section = 4
        elif root in _STDLIB:
            section = 1
        elif root in first_party:
            section = 3
        else:
            section = 2
        kind = 0 if name is None else 1
        sections.setdefault(section, {}).setdefault((kind, module), []).append((name, local))
    out: list[cst.SimpleStatementLine] = []
    for section in sorted(sections):
        group = []
        for (kind, module), names in sorted(
            sections[section].items(), key=lambda kv: (kv[0][0], kv[0][1].lower())
        ):
            if kind == 0:
                for _, local in sorted(set(names)):
                    text = (
                        f"import {module}" if module.split(".")[0] == local else f"import {module} as {local}"
                    )
                    group.append(cst.parse_statement(text))
            else:
                # names kept as they are share one statement; each renamed one gets its own (isort's default)
                plain = sorted({n for n, local in names if n == local}, key=_member_key)
                renamed = sorted({f"{n} as {local}" for n, local in names if n != local}, key=_member_key)
                lines = [", ".join(plain)] if plain else []
                for part in lines + renamed:
                    group.append(cst.parse_statement(f"from {module} import {part}"))
        if out and group:
            group[0] = group[0].with_changes(leading_lines=_blank(1))
        out.extend(group)
    return out


def _member_key(text: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions and variables."""
    name = text.split(" as ", 1)[0]
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name.lower())
    return (2, name.lower())
