"""A recorded case as the public API returns it, and its flat form (one named value per column)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TOPOLOGIES = ("1d", "2d")
MODES = ("decode", "prefill")
_HEAD = ("mesh_shape", "num_devices", "arch", "mode", "model_name", "class_name")
# the columns ``emit`` writes when no --fields is given (the rest stay available by name)
_NOT_EMITTED_BY_DEFAULT = ("num_devices", "arch")
#: What a test ``tttv2-refactor --tests-out`` writes is parametrised by (its ``PARAMETERS``): a recorded case in those
#: terms is a column of every case, so ``emit`` into a generated test and ``tttv2-refactor --cases`` write the same
#: entries. ``mesh_device`` is the mesh shape, ``seq_len`` the rows of the first tensor argument (its
#: second-to-last dimension; the last for token ids), ``recorded`` every tensor argument's shape and dtype by
#: parameter name (canonical JSON, written as a dict).
GENERATED_TEST_COLUMNS = ("mesh_device", "mode", "seq_len", "model_name", "recorded")
#: The generated tests' mode of a module whose forward takes none (``tttv2-refactor``'s default matrix too).
NO_MODE = "forward"
#: The rows of a case that recorded no tensor argument (the generated tests' decode rows, ``testgen.DECODE_ROWS``).
DEFAULT_ROWS = 32


def _tuples(value):
    """JSON lists back to tuples (hashable, and written as tuples in tests)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


@dataclass(frozen=True)
class Case:
    """One distinct configuration a target saw.

    ``fields`` is the stored (nested, JSON) form; ``flat`` maps column names to values: ``mesh_shape``,
    ``num_devices``, ``arch``, ``mode``, ``model_name``, ``class_name`` (when a subclass was called), then
    ``<arg>_shape`` / ``<arg>_dtype`` per tensor argument in signature order, ``<attr>_dtype`` /
    ``<attr>_shape`` per tensor attribute (``arg_``/``self_`` prefixed if the name is taken), then the
    user fields (``field_<name>`` if taken), then the case in the generated tests' terms (``mesh_device``,
    ``seq_len``, ``recorded``: ``GENERATED_TEST_COLUMNS``). Shapes are tuples, dtypes lower-case names (``"bfloat8_b"``);
    fields that were not known are absent.
    """

    target: str
    fields: dict[str, Any]
    hits: int = 1
    first_command: str = ""
    layers: tuple[int, ...] = ()
    first_seen: str = ""
    last_seen: str = ""
    flat: dict[str, Any] = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "flat", flatten(self.fields))

    @property
    def mesh_shape(self) -> tuple[int, ...] | None:
        return self.flat.get("mesh_shape")

    @property
    def mode(self) -> str | None:
        return self.flat.get("mode")

    @property
    def topology(self) -> str | None:
        return topology_of(self.mesh_shape)


def topology_of(mesh_shape) -> str | None:
    """``1d`` for meshes with one row or one column (1×1, 1×2, 1×8), ``2d`` for the others (Galaxy 8×4)."""
    if not mesh_shape:
        return None
    return "1d" if min(mesh_shape) == 1 else "2d"


def flatten(fields: dict[str, Any]) -> dict[str, Any]:
    """The columns of a case, in a stable order (see ``Case``)."""
    return {name: value for name, value, _ in columns_of(fields)}


def columns_of(fields: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """``(column, value, kind)`` triples; kind is head, input, weight, extra or test (the generated tests' columns)."""
    out: list[tuple[str, Any, str]] = []
    taken: set[str] = set()

    def put(name, value, kind):
        out.append((name, value, kind))
        taken.add(name)

    for name in _HEAD:
        if name in fields and (
            name != "mode" or fields[name]
        ):  # no mode: the generated tests' NO_MODE, below
            put(name, _tuples(fields[name]), "head")
    for kind, prefix, items in (
        ("input", "arg_", fields.get("inputs", ())),
        ("weight", "self_", sorted(fields.get("weights", {}).items())),
    ):
        for name, spec in items:
            key = name if {f"{name}_shape", f"{name}_dtype"}.isdisjoint(taken) else f"{prefix}{name}"
            specs = spec if isinstance(spec, list) else [spec]
            for part in ("shape", "dtype"):  # an imported upstream row may know only one of them
                if all(part in s for s in specs):
                    got = tuple(_tuples(s[part]) for s in specs)
                    put(f"{key}_{part}", got if isinstance(spec, list) else got[0], kind)
    for name, value in fields.get("extra", {}).items():
        put(f"field_{name}" if name in taken else name, _tuples(value), "extra")
    for name, value in generated_test_values(fields).items():
        if name not in taken:  # a user's field of that name keeps it
            put(name, value, "test")
    return out


def first_input(fields: dict[str, Any]) -> tuple[tuple[int, ...], str | None] | None:
    """Shape and dtype of the first tensor argument the recorder saw (in signature order), whatever its name."""
    for _, spec in fields.get("inputs", ()):
        if isinstance(spec, dict) and spec.get("shape"):
            return tuple(spec["shape"]), spec.get("dtype")
    return None


def generated_test_values(fields: dict[str, Any]) -> dict[str, Any]:
    """A case's ``mesh_device``, ``seq_len`` and ``recorded`` (``GENERATED_TEST_COLUMNS``; ``mode`` and
    ``model_name`` are columns already); ``mesh_device`` only for a 2-D mesh, as the generated tests take. A case
    recorded without a mode (a forward that takes none) has the mode ``"forward"``, as the generated tests
    name it (docs/refactor.md, "Generated tests")."""
    out: dict[str, Any] = {}
    if not fields.get("mode"):
        out["mode"] = NO_MODE
    mesh = fields.get("mesh_shape")
    if mesh and len(mesh) == 2:
        out["mesh_device"] = (int(mesh[0]), int(mesh[1]))
    shape, dtype = first_input(fields) or ((), None)
    if dtype == "uint32" and shape:
        out["seq_len"] = int(shape[-1])  # token ids: one per position
    elif len(shape) >= 2:
        out["seq_len"] = int(shape[-2])
    else:
        out["seq_len"] = DEFAULT_ROWS
    inputs = {name: spec for name, spec in fields.get("inputs", ()) if spec}
    out["recorded"] = json.dumps(inputs) if inputs else None
    return out


def default_columns(cases) -> list[str]:
    """What ``emit`` writes without ``--fields``: every column some case has, except device count, arch and the
    shapes of the module's own tensors (all three follow from the mesh and the model)."""
    by_kind: dict[str, list[str]] = {"head": [], "input": [], "weight": [], "extra": []}
    for case in cases:
        for name, _, kind in columns_of(case.fields):
            if kind == "test" or name in by_kind[kind] or name in _NOT_EMITTED_BY_DEFAULT:
                continue
            if kind == "weight" and name.endswith("_shape"):
                continue
            by_kind[kind].append(name)
    return order_columns([c for kind in by_kind.values() for c in kind])


def order_columns(columns) -> list[str]:
    """Head columns first (mesh, mode, model), then the rest in the order given."""
    head = [c for c in _HEAD if c in columns]
    return head + [c for c in columns if c not in head]


def select(cases, topology: str | None = None, mode: str | None = None) -> list[Case]:
    """The cases on ``topology`` (1d / 2d) in ``mode`` (decode / prefill); ``None`` keeps all."""
    return [
        c for c in cases if (topology is None or c.topology == topology) and (mode is None or c.mode == mode)
    ]
