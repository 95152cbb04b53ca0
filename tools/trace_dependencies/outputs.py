"""The files trace-deps writes, and how a later run recognises them as its own (so re-running a command may
replace them without ``--force``): JSON by its ``"schema": "trace-deps"`` key, every drawing by a comment line
near its top that the writers in ``export.py`` emit."""

from __future__ import annotations

from tttv2_tools._output import json_schema, marked, marker

TOOL = "trace-deps"
#: the comment syntax of each drawn format (start, end)
COMMENTS = {
    "dot": ("//", ""),
    "graphml": ("<!--", "-->"),
    "mermaid": ("%%", ""),
    "html": ("<!--", "-->"),
    "svg": ("<!--", "-->"),
}
KINDS = {
    "json": json_schema(TOOL, "json output", TOOL),
    **{fmt: marked(TOOL, f"{fmt} output", *comment) for fmt, comment in COMMENTS.items()},
}


def marker_line(fmt: str) -> str:
    """The line a ``fmt`` drawing carries (second line of the file) so that ``KINDS[fmt]`` recognises it."""
    return marker(TOOL, f"{fmt} output", *COMMENTS[fmt])
