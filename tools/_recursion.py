"""Room for the recursive walks of libcst and ``ast`` over user code, shared by the tools' command lines.

libcst's visitors and code generation recurse about three Python frames per operand of a long expression
(``x + x + ...``), so Python's default limit of 1000 frames stops them near 300 operands, on input Python
itself compiles. From 3.11 Python-to-Python calls do not grow the C stack, so a higher limit is safe; each tool
runs under :func:`deeper_recursion` and turns a ``RecursionError`` past it into one line (exit 2) through
:func:`too_deep`.
"""

from __future__ import annotations

import contextlib
import sys

RECURSION_LIMIT = 12_000


@contextlib.contextmanager
def deeper_recursion(limit: int | None = None):
    """Run with a recursion limit of at least ``limit`` (default :data:`RECURSION_LIMIT`); restored after."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, RECURSION_LIMIT if limit is None else limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def too_deep(what: str) -> str:
    """The one-line message for a ``RecursionError`` past the raised limit."""
    return (
        f"input nested too deeply to {what} (more than {max(sys.getrecursionlimit(), RECURSION_LIMIT)} levels "
        f"of Python calls; "
        f"e.g. an expression of thousands of operands): split it into shorter statements"
    )
