"""``--partial``: what could not be transformed, said in the written file itself, at the spot.

Each gap names a TTTv1 ``file:line``. Every statement of the generated class that came from that line (by the
provenance the passes keep) gets a marker comment above it; a spot that is in both ``decode_forward`` and
``prefill_forward`` is marked in both. A header lists every gap of the run, and says for each whether it is
marked below or has no statement in this file (TTTv1's ``__call__``, a copied module-level helper, the
construction code).
"""

from __future__ import annotations

import libcst as cst

from .errors import MARKER, Gap
from .track import StatementTransformer, is_expression
from .walk import children, hot_paths


def _statements(func: cst.FunctionDef) -> list[tuple[cst.BaseStatement, int]]:
    """The statements of ``func``'s body in source order, each with its depth (nested blocks are deeper)."""
    out: list[tuple[cst.BaseStatement, int]] = []

    def visit(node: cst.CSTNode, depth: int) -> None:
        for child in children(node):
            if isinstance(child, cst.BaseStatement):
                out.append((child, depth))
                visit(child, depth + 1)
            elif not is_expression(child):
                visit(child, depth)

    visit(func.body, 0)
    return out


def _where(gap: Gap) -> tuple[str, int] | None:
    file, _, line = gap.loc.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else None


def _own_lines(node: cst.CSTNode, parsed) -> tuple[int, int] | None:
    """The lines of ``node`` (an original statement) that are its own: all of a simple statement, the header of a
    compound one (up to its first inner statement)."""
    where = parsed.range_of(node)
    if where is None:
        return None
    body = getattr(node, "body", None)
    inner = getattr(body, "body", None)
    if isinstance(node, cst.SimpleStatementLine) or not isinstance(body, cst.IndentedBlock) or not inner:
        return where[0], where[2]
    first = parsed.range_of(inner[0])
    return where[0], (first[0] - 1 if first is not None else where[0])


def spots(generated, gaps: list[Gap], inputs) -> dict[tuple[str, int], list[Gap]]:
    """(method name, index of the statement in :func:`_statements`) -> the gaps it carries, for the statements
    of the rendered methods that came from a gap's line (the innermost such statement, in every method)."""
    wanted: dict[tuple[str, int], list[Gap]] = {}
    for gap in gaps:
        where = _where(gap)
        if where is not None:
            wanted.setdefault(where, []).append(gap)
    if not wanted:
        return {}
    prov = generated.plan.prov
    files = [(name, parsed) for name, parsed in inputs.files.items() if name in {f for f, _ in wanted}]
    out: dict[tuple[str, int], list[Gap]] = {}
    for method in generated.rendered.methods:
        hits: list[tuple[int, int, list[Gap]]] = []  # (index, depth, gaps)
        for index, (statement, depth) in enumerate(_statements(method.func)):
            origin = prov.origin(statement)
            for name, parsed in files:
                lines = _own_lines(origin, parsed)
                if lines is None:
                    continue
                found = [
                    g
                    for (f, line), gs in wanted.items()
                    if f == name
                    for g in gs
                    if lines[0] <= line <= lines[1]
                ]
                if found:
                    hits.append((index, depth, found))
        for index, depth, found in hits:
            deeper = any(
                other_index > index and other_depth > depth and set(map(id, other)) & set(map(id, found))
                for other_index, other_depth, other in hits
            )
            if not deeper:
                out[(method.func.name.value, index)] = found
    return out


def _functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    return {
        item.name.value: item
        for statement in module.body
        if isinstance(statement, cst.ClassDef)
        for item in statement.body.body
        if isinstance(item, cst.FunctionDef)
    }


def mark_gaps(generated, gaps: list[Gap], inputs) -> str:
    """The code of ``generated`` with a marker comment above each statement a gap names, and a header that lists
    every gap of the run."""
    if not gaps:
        return generated.code
    module = generated.rendered.module
    targets: dict[int, list[Gap]] = {}
    functions = _functions(module)
    every = spots(generated, gaps, inputs)
    for method in generated.rendered.methods:
        found = {k: v for k, v in every.items() if k[0] == method.func.name.value}
        written = functions.get(method.func.name.value)
        if not found or written is None:
            continue
        mine, theirs = _statements(method.func), _statements(written)
        if [type(s) for s, _ in mine] != [type(s) for s, _ in theirs]:
            continue  # not the same statements: the header still lists the gap
        for (_, index), spot_gaps in found.items():
            targets[id(theirs[index][0])] = spot_gaps
    marked: set[int] = set()

    class _Mark(StatementTransformer):
        def on_leave(self, original_node, updated_node):
            spot_gaps = targets.get(id(original_node))
            if spot_gaps is None:
                return updated_node
            marked.update(id(g) for g in spot_gaps)
            lines = [cst.EmptyLine(comment=cst.Comment(f"{MARKER}: {g.describe()}")) for g in spot_gaps]
            return updated_node.with_changes(leading_lines=[*updated_node.leading_lines, *lines])

    marker = _Mark(None)
    marker.hot = hot_paths(module, lambda n: id(n) in targets, lambda n: not is_expression(n))
    code = module.visit(marker).code if targets else module.code
    header = [
        f"{MARKER}: {g.describe()}"
        + (" (marked below)" if id(g) in marked else " (no statement of this file)")
        for g in gaps
    ]
    return "\n".join(header) + "\n" + code


__all__ = ["mark_gaps", "spots"]
