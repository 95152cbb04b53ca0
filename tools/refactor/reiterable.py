"""Values that may not become config fields: iterators.

TTTv1 writes ``for w, gain in zip(self.ws, self.gains)`` in a forward: a new iterator on every call. Hoisted into
a config field, the one iterator made at construction is used up by the first call (the next calls loop over
nothing), and the ``LazyWeight``\\ s inside it are never reached by ``load_device_weights``. So an expression that
gives an iterator (``zip``, ``map``, ``filter``, ``iter``, ``enumerate``, ``reversed``, an ``itertools``
function, a generator expression, or a display or choice holding one) stays in the forward, made per call as
TTTv1 makes it; what it reads (``self.ws``, ``self.gains``) still becomes fields. A local assigned such a value
is per call too. A value that materialises the iterator itself (``list(zip(…))``, ``dict(zip(…))``) is not an
iterator and is hoisted as before.
"""

from __future__ import annotations

import libcst as cst

from .cstutil import dotted

ITERATOR_BUILTINS = frozenset({"zip", "map", "filter", "iter", "enumerate", "reversed"})


def yields_iterator(node: cst.BaseExpression | None) -> bool:
    """Whether evaluating ``node`` gives an iterator (or a container or choice that may hold one)."""
    if node is None:
        return False
    if isinstance(node, cst.GeneratorExp):
        return True
    if isinstance(node, cst.Call):
        name = dotted(node.func) or ""
        return name in ITERATOR_BUILTINS or name.startswith("itertools.")
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(yields_iterator(getattr(e, "value", None)) for e in node.elements)
    if isinstance(node, cst.Dict):
        return any(yields_iterator(getattr(e, "value", None)) for e in node.elements)
    if isinstance(node, cst.IfExp):
        return yields_iterator(node.body) or yields_iterator(node.orelse)
    if isinstance(node, cst.BooleanOperation):
        return yields_iterator(node.left) or yields_iterator(node.right)
    return False


__all__ = ["ITERATOR_BUILTINS", "yields_iterator"]
