"""A device weight a forward converts in place on every call (tt-metal's Gemma-3 projector:
``self.mm_input_projection_weight = ttnn.to_layout(self.mm_input_projection_weight, ttnn.TILE_LAYOUT)``, then
``ttnn.matmul(x, self.mm_input_projection_weight)``).

TTTv1 writes the attribute, so it is state the forward changes. But when the conversion is idempotent (a layout,
dtype or memory config, each fixed by constants) and nothing reads the weight before it, every read sees the
same tensor: the converted weight. The generated module converts it once, where it loads its device weights
(``load_device_weights``: ``self.w = ttnn.to_layout(_on_device(self.config.w), ttnn.TILE_LAYOUT)``), and the
forward only reads it. The conditions, each checked:

* ``__init__`` makes the attribute a device tensor, and each forward method that writes it does so only by
  top-level statements ``self.A = ttnn.<conversion>(self.A, <constants>)``, all of the same code;
* the conversion is ``ttnn.to_layout``, ``ttnn.typecast`` or ``ttnn.to_memory_config`` (converting twice gives
  what converting once gives), and its other arguments are literals and ``ttnn.`` constants;
* no method reads the attribute before a conversion runs: the converting forwards read it only after their
  conversion, no other method other than the construction ones reads it, nothing changes it in place
  (``self.A[...] = …``) and nothing deallocates it.

A device weight a forward rebinds otherwise (a conversion whose arguments are run-time values,
``x.memory_config()``, or read ``self``; a weight read before its conversion) is kept as the generated module's
own per-instance state (``plan.py``'s ``kept_state``); one a forward also changes in place, and any other state a
forward writes, stays a gap (``forward changes module state``)."""

from __future__ import annotations

import libcst as cst

from .cstutil import code, dotted, names_read
from .track import Provenance
from .walk import walk

#: ttnn conversions that give the same tensor when applied twice with the same arguments.
IDEMPOTENT = frozenset({"ttnn.to_layout", "ttnn.typecast", "ttnn.to_memory_config"})
_CONSTANT_NAMES = frozenset({"ttnn", "True", "False", "None"})


def _self_attribute(node: cst.CSTNode) -> str | None:
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        return node.attr.value
    return None


def _conversion(statement: cst.BaseStatement) -> tuple[str, cst.Call] | None:
    """``(A, call)`` of a statement ``self.A = ttnn.<conversion>(self.A, <constants>)``."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or len(small.targets) != 1:
        return None
    attr = _self_attribute(small.targets[0].target)
    call = small.value
    if attr is None or type(call) is not cst.Call or dotted(call.func) not in IDEMPOTENT or not call.args:
        return None
    first, rest = call.args[0], call.args[1:]
    if first.keyword is not None or first.star or _self_attribute(first.value) != attr:
        return None
    if any(arg.star or not names_read(arg.value) <= _CONSTANT_NAMES for arg in rest):
        return None
    return attr, call


def _reads(node: cst.CSTNode, attr: str) -> int:
    return sum(1 for n in walk(node) if _self_attribute(n) == attr)


def _deallocated(func: cst.CSTNode, attr: str) -> bool:
    return any(
        type(n) is cst.Call
        and (dotted(n.func) or "").endswith("deallocate")
        and any(_self_attribute(a.value) == attr for a in n.args)
        for n in walk(func)
    )


def relaid_weights(
    methods: dict[str, cst.FunctionDef],
    forward_methods: list[str],
    init_names: list[str],
    device: set[str],
    mutated: dict[str, set[str]],
) -> dict[str, cst.Call]:
    """The device attributes the forwards convert in place, each with its conversion (see the module docstring).
    ``mutated``: method name -> the ``self`` attributes it changes in place."""
    found: dict[str, list[tuple[str, cst.Call]]] = {}
    refused: set[str] = set()
    for name in forward_methods:
        func = methods.get(name)
        if func is None or name in init_names or not isinstance(func.body, cst.IndentedBlock):
            continue
        body = list(func.body.body)
        here: dict[str, cst.Call] = {}
        for index, statement in enumerate(body):
            hit = _conversion(statement)
            if hit is None or hit[0] not in device:
                continue
            attr, call = hit
            earlier = sum(_reads(s, attr) for s in body[:index])
            if attr in here or earlier:
                refused.add(attr)  # converted twice, or read before its conversion
                continue
            here[attr] = call
        for attr, call in here.items():
            # the statement's own target and first argument are its only other uses of the attribute there
            writes = [
                n for n in walk(func) if type(n) is cst.AssignTarget and _self_attribute(n.target) == attr
            ]
            if len(writes) != 1 or attr in mutated.get(name, set()) or _deallocated(func, attr):
                refused.add(attr)
                continue
            found.setdefault(attr, []).append((name, call))
    out: dict[str, cst.Call] = {}
    for attr, sites in found.items():
        if attr in refused or len({code(call) for _, call in sites}) != 1:
            continue
        converting = {name for name, _ in sites}
        others = [m for n, m in methods.items() if n not in converting and n not in init_names]
        if any(_reads(m, attr) for m in others):
            continue  # another method may read it before any conversion ran
        out[attr] = sites[0][1]
    return out


def drop_conversions(
    func: cst.FunctionDef, relaid: dict[str, cst.Call], prov: Provenance | None
) -> cst.FunctionDef:
    """``func`` without its top-level conversions of the weights of ``relaid`` (done at weight loading)."""
    if not isinstance(func.body, cst.IndentedBlock):
        return func
    body = list(func.body.body)
    kept = []
    for statement in body:
        hit = _conversion(statement)
        if hit is not None and hit[0] in relaid and code(hit[1]) == code(relaid[hit[0]]):
            continue
        kept.append(statement)
    if len(kept) == len(body):
        return func
    out = func.with_changes(body=func.body.with_changes(body=kept or [cst.SimpleStatementLine([cst.Pass()])]))
    if prov is not None:
        prov.note(out, func)
    return out


def loaded_conversion(attr: str, call: cst.Call) -> str:
    """The line of ``load_device_weights`` that loads ``attr`` converted as the forward converts it."""
    first = call.args[0].with_changes(value=cst.parse_expression(f"_on_device(self.config.{attr})"))
    return f"self.{attr} = {code(call.with_changes(args=[first, *call.args[1:]]))}"


__all__ = ["IDEMPOTENT", "drop_conversions", "loaded_conversion", "relaid_weights"]
