"""Cases as ``pytest.param(...)`` entries: projection onto columns, sort order, readable unique ids, source text."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .cases import Case

_MODE_ORDER = {"decode": 0, "prefill": 1}
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


@dataclass(frozen=True)
class Row:
    """One case projected onto the emitted columns; ``hits`` adds up the cases that project onto it."""

    values: tuple
    hits: int
    case: Case


def project(cases: list[Case], columns: list[str]) -> list[Row]:
    """One row per distinct projected value tuple (missing columns are ``None``), sorted (see ``sort_key``)."""
    merged: dict[tuple, Row] = {}
    for case in cases:
        values = tuple(case.flat.get(c) for c in columns)
        known = merged.get(values)
        merged[values] = Row(values, case.hits + (known.hits if known else 0), known.case if known else case)
    return sorted(merged.values(), key=lambda r: sort_key(r.values, columns))


def _sortable(value) -> tuple:
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, tuple):
        return (4, tuple(_sortable(v) for v in value))
    return (5, json.dumps(value, sort_keys=True, default=str))


def sort_key(values: tuple, columns: list[str]) -> tuple:
    """Mesh (rows, cols), then mode (decode first), then the other columns in order."""
    key = []
    for column, value in zip(columns, values):
        if column == "mode" and value in _MODE_ORDER:
            key.append((2, _MODE_ORDER[value]))
        else:
            key.append(_sortable(value))
    return tuple(key)


# --- ids ------------------------------------------------------------------------------------------------------


def _short(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return "x".join(str(v) for v in value)
        return "+".join(_short(v) for v in value)
    return str(value)


def _clean(text: str) -> str:
    return _ID_UNSAFE.sub("_", text).strip("_")


def base_id(values: dict[str, Any]) -> str:
    """``1x8-decode-32-Llama-3.1-8B-tiny``: mesh, mode, rows of the first tensor argument (seq_len, or the padded
    batch in decode), model, and the subclass when one was called."""
    parts = []
    mesh = values.get("mesh_shape", values.get("mesh_device"))  # the generated tests call it mesh_device
    if mesh is not None:
        parts.append(_short(mesh))
    if values.get("mode") is not None:
        parts.append(str(values["mode"]))
    first_shape = (
        None
        if values.get("seq_len") is not None
        else next(
            (
                v
                for k, v in values.items()
                if k.endswith("_shape")
                and k != "mesh_shape"
                and isinstance(v, tuple)
                and v
                and isinstance(v[0], int)
            ),
            None,
        )
    )
    if values.get("seq_len") is not None:
        parts.append(str(values["seq_len"]))
    elif first_shape:
        parts.append(str(first_shape[-2] if len(first_shape) >= 2 else first_shape[-1]))
    for key in ("model_name", "class_name"):
        if values.get(key) is not None:
            parts.append(str(values[key]))
    return _clean("-".join(parts)) or "case"


def make_ids(rows: list[Row], columns: list[str]) -> list[str]:
    """Readable ids, unique: colliding base ids get ``-column=value`` for the columns that tell them apart,
    then ``-2``, ``-3`` in sort order if that is still not enough."""
    named = [dict(zip(columns, r.values)) for r in rows]
    ids = [base_id(v) for v in named]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, ident in enumerate(ids):
        groups[ident].append(i)
    for ident, members in groups.items():
        if len(members) < 2:
            continue
        differing = [
            c for c in columns if len({json.dumps(named[i].get(c), default=str) for i in members}) > 1
        ]
        # the fewest differing columns (in column order) that tell the members apart
        used = differing
        for count in range(1, len(differing)):
            if len({tuple(_short(named[i].get(c)) for c in differing[:count]) for i in members}) == len(
                members
            ):
                used = differing[:count]
                break
        for i in members:
            extra = "-".join(f"{c}={_short(named[i].get(c))}" for c in used)
            ids[i] = _clean(f"{ident}-{extra}") if extra else ident
    seen: dict[str, int] = defaultdict(int)
    for i, ident in enumerate(ids):
        seen[ident] += 1
        if seen[ident] > 1:
            ids[i] = f"{ident}-{seen[ident]}"
    return ids


# --- source text ----------------------------------------------------------------------------------------------


def render_value(value, column: str) -> str:
    """Python source for one value: dtype columns as ``ttnn.<dtype>``, tuples as tuples, strings double-quoted;
    ``recorded`` (the generated tests' column, kept as canonical JSON) as the dict tttv2-refactor writes."""
    if column == "recorded" and isinstance(value, str):
        return _literal(json.loads(value))
    dtype_column = column.endswith("dtype")
    if isinstance(value, str):
        if dtype_column and value.isidentifier():
            return f"ttnn.{value}"
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple):
        inner = [render_value(v, column) for v in value]
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(str(k))}: {render_value(v, column)}" for k, v in value.items())
            + "}"
        )
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"column {column}: cannot write a {type(value).__name__} value")


def _literal(value) -> str:
    """A JSON value as Python source (lists stay lists, as tttv2-refactor writes ``recorded``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def uses_ttnn(rows: list[Row], columns: list[str]) -> bool:
    """Whether the rendered rows refer to ``ttnn`` (a dtype column holds a dtype name)."""
    return any(
        "ttnn." in render_value(v, c) for r in rows for c, v in zip(columns, r.values) if c.endswith("dtype")
    )


def render_param(values_code: list[str], kwargs_code: list[str], indent: str, line_length: int) -> str:
    """``pytest.param(...)`` on one line when it fits in ``line_length``, else one argument per line."""
    args = [*values_code, *kwargs_code]
    one_line = f"{indent}pytest.param({', '.join(args)}),"
    if len(one_line) <= line_length:
        return one_line
    inner = indent + "    "
    return "\n".join([f"{indent}pytest.param(", *(f"{inner}{a}," for a in args), f"{indent}),"])
