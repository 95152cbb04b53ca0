"""Plain Python state a forward keeps on its instance (``self.calls += 1``, a memory config cached on the first
call: ``if self.cfg is None: self.cfg = …``, tt_transformers' rotary embedding growing its cache when a longer
sequence arrives: ``if self.max_seq_len_cached is None or seq_len > self.max_seq_len_cached: …``).

Such an attribute is neither a config field (its value changes from call to call) nor a device weight. The
generated module keeps it as its own per-instance state: ``_bind()``, which runs once when the module is built,
gives it the starting value TTTv1's ``__init__`` leaves in it, and the forward reads and writes ``self.X`` as
TTTv1 does (a test on it stays a run-time test). The starting value is taken when it is a literal (``0``,
``None``, ``[]``, ``ttnn.DRAM_MEMORY_CONFIG``: names read only ``None`` / ``True`` / ``False`` / ``ttnn``, no
call), evaluated again for each instance, so a list the forward appends to is each instance's own, as in TTTv1.
It is the value of ``__init__``'s last top-level statement ``self.X = <literal>``, when nothing after it in
``__init__`` writes ``self.X`` (directly, or through a method of the class it calls).

Anything else stays a gap (``forward changes module state``): a starting value computed at construction
(``self.calls = args.first_call``: it would need a config field the instance copies, and a mutable one would be
shared by every module built from the same config), one set under a test or by a method ``__init__`` calls
last, and an attribute ``__init__`` never starts."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .cstutil import code, dotted, names_read
from .walk import walk

_LITERAL_NAMES = frozenset({"None", "True", "False", "ttnn"})


def _self_attr(node: cst.CSTNode) -> str | None:
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        return node.attr.value
    return None


def _is_literal(value: cst.BaseExpression) -> bool:
    if any(isinstance(n, (cst.Call, cst.Lambda, cst.NamedExpr, cst.Await, cst.Yield)) for n in walk(value)):
        return False
    return names_read(value) <= _LITERAL_NAMES and not any(
        type(n) is cst.Attribute and (dotted(n) or "").split(".")[0] != "ttnn" for n in walk(value)
    )


def _writes(node: cst.CSTNode, attr: str) -> bool:
    for n in walk(node):
        is_target = type(n) is cst.AssignTarget or type(n) is cst.AugAssign or type(n) is cst.AnnAssign
        if is_target and any(_self_attr(t) == attr for t in walk(n.target)):
            return True
    return False


@dataclass(frozen=True)
class Start:
    """How the generated module starts one attribute: ``literal`` (evaluated again in ``_bind()`` for each
    instance), or None: the value TTTv1's ``__init__`` leaves in it, computed in ``from_model_args`` and carried
    by the config field ``field``."""

    literal: cst.BaseExpression | None
    field: str

    @property
    def source(self) -> str:
        return code(self.literal) if self.literal is not None else f"self.config.{self.field}"


def _starting_value(init: cst.FunctionDef, attr: str, methods: dict[str, cst.FunctionDef]) -> Start | None:
    if not isinstance(init.body, cst.IndentedBlock):
        return None
    writers = {name for name, func in methods.items() if _writes(func, attr)}
    last: Start | None = None
    for statement in init.body.body:
        small = statement.body[0] if type(statement) is cst.SimpleStatementLine and statement.body else None
        if (
            type(small) is cst.Assign
            and len(small.targets) == 1
            and _self_attr(small.targets[0].target) == attr
        ):
            last = Start(small.value if _is_literal(small.value) else None, f"{attr}_start")
            continue
        calls_writer = any(
            type(n) is cst.Call
            and (dotted(n.func) or "").split(".")[:1] == ["self"]
            and (dotted(n.func) or "").split(".")[-1] in writers
            for n in walk(statement)
        )
        if _writes(statement, attr) or calls_writer:
            last = None  # something after that statement changes it
    return last


def instance_state(
    methods: dict[str, cst.FunctionDef], candidates: set[str], changed_in_place: set[str] = frozenset()
) -> dict[str, Start]:
    """The attributes of ``candidates`` (non-tensor attributes a forward changes) that the generated module can
    keep as per-instance state, each with how it starts. ``changed_in_place``: those a forward changes in place
    (``self.d[k] = v``, ``self.l.append(…)``, ``self.n += …``): only a literal start serves them (a config
    field's object would be shared by every module built from the config)."""
    init = methods.get("__init__")
    if init is None:
        return {}
    out: dict[str, Start] = {}
    for attr in sorted(candidates):
        start = _starting_value(init, attr, methods)
        if start is not None and (start.literal is not None or attr not in changed_in_place):
            out[attr] = start
    return out


__all__ = ["Start", "instance_state"]
