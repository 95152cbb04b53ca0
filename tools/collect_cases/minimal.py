"""``--minimal``: a small subset of rows that still shows every value of every column and every (mesh, mode) pair.

Greedy set cover: the universe is every ``(column, value)`` seen plus every ``(mesh_shape, mode)`` pair; each
row covers its own; repeatedly keep the row that covers the most still-uncovered elements (ties: the first in
sort order). Greedy is within a factor ln(n) of the smallest cover, and deterministic.
"""

from __future__ import annotations

import json

from .params import Row


def _elements(row: Row, columns: list[str]) -> set:
    named = dict(zip(columns, row.values))
    out = {(c, json.dumps(v, default=str)) for c, v in named.items()}
    if "mesh_shape" in named or "mode" in named:
        out.add(("mesh_shape×mode", json.dumps([named.get("mesh_shape"), named.get("mode")], default=str)))
    return out


def minimal_rows(rows: list[Row], columns: list[str]) -> tuple[list[Row], list[Row]]:
    """``(kept, dropped)``, both in the original (sorted) order."""
    covers = [_elements(r, columns) for r in rows]
    uncovered = set().union(*covers) if covers else set()
    kept: set[int] = set()
    while uncovered:
        best = max(range(len(rows)), key=lambda i: (len(covers[i] & uncovered), -i))
        kept.add(best)
        uncovered -= covers[best]
    return [r for i, r in enumerate(rows) if i in kept], [r for i, r in enumerate(rows) if i not in kept]
