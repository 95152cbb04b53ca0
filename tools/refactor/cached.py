"""An attribute a forward sets for its own later use (``self.lm_head_output_memory_config = …`` in tt-metal's
lm_head, then ``memory_config=self.lm_head_output_memory_config`` in the same call).

TTTv1 stores the value on the instance, but nothing of the class reads it outside that call: it is a local of
the forward spelled as an attribute. Such an attribute is rewritten as a local of the generated method
(``lm_head_output_memory_config = …``; the reads use the local). The value is then what any local is: a
config field when it is static (computed at construction), computed per call otherwise. "Nothing of the
class" means: one method sets it, once, at the top level of its body, before any read there; no other method
sets it or reads it, and ``__init__`` does not. Code outside the class that reads the attribute after a call
(``lm_head.lm_head_output_memory_config``) would not find it on the generated module (docs/refactor.md,
Limits); a device weight the forward converts in place is converted once at loading (``relaid.py``), one it
rebinds otherwise is kept as per-instance state (``plan.py``'s ``kept_state``); plain state ``__init__`` starts
(a literal, or a value carried by a config field) is kept on the instance (``instate.py``); any other attribute a
forward sets stays a gap (``forward changes module state``)."""

from __future__ import annotations

import libcst as cst

from .track import Provenance, TrackingTransformer
from .walk import hot_paths, walk


def _self_attribute(node: cst.CSTNode) -> str | None:
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        return node.attr.value
    return None


def _set_here(statement: cst.BaseStatement) -> str | None:
    """``A`` of a top-level ``self.A = value`` statement (one target)."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or len(small.targets) != 1:
        return None
    return _self_attribute(small.targets[0].target)


def _written(func: cst.FunctionDef) -> list[str]:
    """Every ``self.A`` the function assigns (plain, augmented, annotated or in a tuple / list target)."""
    out = []
    for node in walk(func):
        if type(node) in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign):
            targets = [node.target]
            if type(node.target) in (cst.Tuple, cst.List):
                targets = [e.value for e in node.target.elements]
            out += [name for t in targets if (name := _self_attribute(t)) is not None]
    return out


def _read(func: cst.CSTNode) -> set[str]:
    return {name for node in walk(func) if (name := _self_attribute(node)) is not None}


def cached_attributes(
    methods: dict[str, cst.FunctionDef], forward_methods: list[str], init_names: list[str]
) -> set[str]:
    """The attributes a forward method sets only for itself (see the module docstring)."""
    out: set[str] = set()
    for name in forward_methods:
        func = methods.get(name)
        if func is None or name in init_names:
            continue
        body = list(func.body.body) if isinstance(func.body, cst.IndentedBlock) else []
        for index, statement in enumerate(body):
            attr = _set_here(statement)
            if attr is None or _written(func).count(attr) != 1:
                continue
            before = set().union(*(_read(s) for s in body[:index])) if index else set()
            if attr in before or attr in _read(statement.body[0].value):
                continue
            others = [m for n, m in methods.items() if n != name]
            if any(attr in _read(m) for m in others):
                continue  # another method (``__init__`` included) sets or reads it
            out.add(attr)
    return out


def localise_cached(func: cst.FunctionDef, attrs: set[str], prov: Provenance | None) -> cst.FunctionDef:
    """``self.A`` -> a local ``A`` (``_A`` when the method already has a name ``A``) in ``func``, for each ``A`` of
    ``attrs`` the method sets."""
    body = list(func.body.body) if isinstance(func.body, cst.IndentedBlock) else []
    here = {attr for statement in body if (attr := _set_here(statement)) in attrs}
    if not here:
        return func
    attr_names = {id(node.attr) for node in walk(func) if type(node) is cst.Attribute}
    names = {node.value for node in walk(func) if type(node) is cst.Name and id(node) not in attr_names}
    local = {attr: attr if attr not in names else f"_{attr}" for attr in here}

    class _T(TrackingTransformer):
        def leave_Attribute(self, original_node, updated_node):
            attr = _self_attribute(updated_node)
            if attr in local:
                return cst.Name(local[attr])
            return updated_node

    transformer = _T(prov)
    transformer.hot = hot_paths(func, lambda node: _self_attribute(node) in local)
    return func.visit(transformer)


__all__ = ["cached_attributes", "localise_cached"]
