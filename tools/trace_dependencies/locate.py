"""From a trace-deps location to the libcst node at that position (the refactor codemod joins on these).

Every location trace-deps reports is ``file:line:col`` with a 1-based line and a 0-based CHARACTER column, which is
libcst's ``PositionProvider`` convention, so no conversion is needed::

    import libcst as cst
    from libcst.metadata import MetadataWrapper
    from tttv2_tools.trace_dependencies import analyze, node_at, node_for, parse_loc

    a = analyze("tttv1/tt/mlp.py")
    wrapper = MetadataWrapper(cst.parse_module(source_text))     # once per file
    branch = a.branch_at("mlp.py", 266)
    test = node_at(wrapper, *parse_loc(branch.loc)[1:])         # the test expression (outermost node there)
    stmt = node_for(wrapper, branch.span, kind=cst.If)          # the whole if statement, by its span
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: about 5 ms of every trace-deps start-up

if TYPE_CHECKING:
    from typing import Any

    import libcst

    from .records import Span


def parse_loc(loc: str) -> tuple[str, int, int]:
    """``"mlp.py:266:11"`` -> ``("mlp.py", 266, 11)`` (the file part may itself contain ``:``)."""
    try:
        file, line, col = loc.rsplit(":", 2)
        return file, int(line), int(col)
    except ValueError:
        raise ValueError(f"loc: expected 'file:line:col', got {loc!r}") from None


def _wrapper(source: Any):
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    if isinstance(source, MetadataWrapper):
        return source
    if isinstance(source, cst.Module):
        return MetadataWrapper(source)
    if isinstance(source, str):
        return MetadataWrapper(cst.parse_module(source))
    raise TypeError(
        f"source: expected source text, a libcst.Module or a MetadataWrapper, got {type(source).__name__}"
    )


def node_at(
    source: str | libcst.Module | Any,
    line: int,
    col: int,
    *,
    end: tuple[int, int] | None = None,
    kind: type | tuple[type, ...] | None = None,
) -> libcst.CSTNode | None:
    """The outermost libcst node that starts at ``line``/``col`` (1-based line, 0-based character column), or
    None. ``end=(line, col)`` also requires that end position (exclusive); ``kind`` a node class (or classes).

    ``source`` is the file's text, a parsed ``libcst.Module`` or a ``MetadataWrapper`` (pass the wrapper when
    looking up many positions in one file: positions are computed once per wrapper)."""
    from libcst.metadata import PositionProvider

    wrapper = _wrapper(source)
    positions = wrapper.resolve(PositionProvider)
    best, best_size = None, -1
    for node, where in positions.items():
        if where.start.line != line or where.start.column != col:
            continue
        if end is not None and (where.end.line, where.end.column) != tuple(end):
            continue
        if kind is not None and not isinstance(node, kind):
            continue
        size = (where.end.line, where.end.column)
        if best is None or size > best_size:
            best, best_size = node, size
    return best


def node_for(source: str | libcst.Module | Any, span: Span, *, kind: type | tuple[type, ...] | None = None):
    """The libcst node that covers exactly ``span`` (a ``Branch.span`` / ``Branch.test_span``)."""
    return node_at(source, span.start_line, span.start_col, end=(span.end_line, span.end_col), kind=kind)


__all__ = ["node_at", "node_for", "parse_loc"]
