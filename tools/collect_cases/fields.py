"""What one recorded call becomes: the declarative field rules and the extractor that applies them.

Each default field is a ``FieldRule``: a list of *sources* tried in order, the first that resolves to a value
that is not ``None`` wins, then a normaliser turns it into plain JSON. A source is a dotted path from one of
five roots:

- ``self``   the module instance (``self.args.cluster_shape``);
- ``init``   the arguments its constructor was called with (``init.configuration.model_name``: TTTv1's
             ``Attention`` keeps no ``args`` but is built from them);
- ``arg``    the arguments of this call, defaults applied (``arg.mode``, ``arg.llm_mode``);
- ``input``  the first ``ttnn.Tensor`` argument of this call (``input.device().shape``);
- ``outer``  the fields of the nearest enclosing recorded call (an ``RMSNorm`` inside a ``DistributedNorm``).

A step ending in ``()`` calls a method without arguments. A field no source resolves is left out of the case
(``unknown``), never guessed. Besides the rules, every call records its tensor arguments (``inputs``: shape and
dtype per argument, in signature order) and the module's tensor attributes (``weights``: dtype and shape, by
name); ``--field NAME=EXPR`` adds user fields evaluated with ``self``, the call's arguments by name and ``x``.
"""

from __future__ import annotations

import enum
import inspect
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import CollectCasesError

_MISSING = object()
ROOTS = ("self", "init", "arg", "input", "outer")


@dataclass(frozen=True)
class FieldRule:
    """One default field: where to read it (first source that resolves wins) and how to normalise it."""

    name: str
    sources: tuple[str, ...]
    kind: str  # shape | int | name | mode | str
    identity: bool = True  # part of what makes two calls the same case
    doc: str = ""


_ARGS_OBJECTS = ("self.args", "init.args", "init.configuration")


def _from_args(attr: str) -> tuple[str, ...]:
    return tuple(f"{obj}.{attr}" for obj in _ARGS_OBJECTS)


def _from_device(call: str) -> tuple[str, ...]:
    return tuple(f"{dev}.{call}" for dev in ("self.mesh_device", "self.device", "input.device()"))


DEFAULT_RULES: tuple[FieldRule, ...] = (
    FieldRule(
        "mesh_shape",
        (*_from_args("cluster_shape"), *_from_device("shape"), "outer.mesh_shape"),
        "shape",
        doc="mesh (cluster) shape [rows, cols]",
    ),
    FieldRule(
        "num_devices",
        (*_from_args("num_devices"), *_from_device("get_num_devices()"), "outer.num_devices"),
        "int",
        doc="devices in the mesh",
    ),
    FieldRule(
        "arch",
        (*_from_args("arch_name"), *_from_device("arch()"), "outer.arch"),
        "name",
        doc="device architecture, lower case (wormhole_b0)",
    ),
    FieldRule(
        "mode",
        # the names a generated test fills, tttv2.testing.generated.MODE_PARAMETERS (not imported: it loads ttnn)
        ("arg.mode", "arg.llm_mode"),
        "mode",
        doc="the call's mode argument (mode, or llm_mode as tt-metal's T3000 demos name it): decode or prefill",
    ),
    FieldRule(
        "model_name",
        (*_from_args("model_name"), "outer.model_name"),
        "str",
        doc="model name of the module's model args",
    ),
    FieldRule(
        "layer",
        ("self.layer_num", "init.layer_num"),
        "int",
        identity=False,
        doc="layer number; not part of the case identity, the layers that saw a case are listed with it",
    ),
)
DEFAULT_FIELD_NAMES = (*tuple(r.name for r in DEFAULT_RULES), "class_name", "inputs", "weights", "extra")


@dataclass(frozen=True)
class UserField:
    """``--field NAME=EXPR``: a Python expression evaluated on every call (``self``, arguments, ``x``)."""

    name: str
    expression: str

    def compiled(self):
        return compile(self.expression, f"<--field {self.name}>", "eval")


def parse_user_field(text: str) -> UserField:
    """``'seq_len=x.shape[-2]'`` → UserField; the name must be a new identifier and the expression compile."""
    name, sep, expression = text.partition("=")
    name, expression = name.strip(), expression.strip()
    if not sep or not name.isidentifier() or not expression:
        raise CollectCasesError(f"--field: expected NAME=EXPR (e.g. seq_len=x.shape[-2]), got {text!r}")
    if name in DEFAULT_FIELD_NAMES:
        raise CollectCasesError(f"--field {name}: {name!r} is a default field; choose another name")
    try:
        field = UserField(name, expression)
        field.compiled()
    except SyntaxError as exc:
        raise CollectCasesError(
            f"--field {name}: {expression!r} is not a Python expression: {exc.msg}"
        ) from None
    return field


# --- normalisers --------------------------------------------------------------------------------------------


def _enum_name(value) -> str:
    name = getattr(value, "name", None)
    return (name if isinstance(name, str) else str(value)).lower()


def _as_mode(value) -> str:
    if isinstance(value, enum.Enum):
        value = value.value if isinstance(value.value, str) else value.name
    return str(value).lower()


_NORMALISERS: dict[str, Callable[[Any], Any]] = {
    "shape": lambda v: [int(d) for d in v],
    "int": int,
    "name": _enum_name,
    "mode": _as_mode,
    "str": str,
}

_tensor_types_cache: tuple[type, ...] | None = None


def tensor_types() -> tuple[type, ...]:
    """The ``ttnn.Tensor`` classes loaded in this process (the emulator's and, where imported, the real one)."""
    global _tensor_types_cache
    if _tensor_types_cache is None:
        found = []
        for name in ("ttnn", "tttv2.ttnn", "tttv2.ttnn.tensor"):
            cls = getattr(sys.modules.get(name), "Tensor", None)
            if isinstance(cls, type) and cls not in found:
                found.append(cls)
        if not found:
            return ()  # nothing imported ttnn yet: look again on the next call
        _tensor_types_cache = tuple(found)
    return _tensor_types_cache


def _tensor_spec(tensor) -> dict:
    return {"shape": [int(d) for d in tensor.shape], "dtype": _enum_name(tensor.dtype)}


def _tensors_spec(value, types: tuple[type, ...]):
    """A tensor's spec, a list of specs for a non-empty list/tuple of tensors, else _MISSING."""
    if isinstance(value, types):
        return _tensor_spec(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, types) for v in value):
        return [_tensor_spec(v) for v in value]
    return _MISSING


def plain_value(value, what: str):
    """A user field's value as plain JSON: numbers, strings, bools, None, shapes and enums (by lower-case name);
    anything else is an error naming the field (a repr would silently never match between runs)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    types = tensor_types()
    if types and isinstance(value, types):
        return _tensor_spec(value)
    if isinstance(value, enum.Enum) or type(value).__name__ in ("DataType", "Layout", "Arch"):
        return _enum_name(value)
    if isinstance(value, Mapping):
        return {str(k): plain_value(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ in ("Shape", "MeshShape", "Size"):
        return [plain_value(v, what) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return plain_value(value.item(), what)
    raise CollectCasesError(
        f"{what}: a value of type {type(value).__name__} cannot be recorded "
        "(expected a number, string, bool, None, shape, dtype or a list of them)"
    )


# --- sources ------------------------------------------------------------------------------------------------


def _compile_source(source: str) -> tuple[str, tuple[tuple[str, bool], ...]]:
    root, *rest = source.split(".")
    if root not in ROOTS:
        raise ValueError(f"field source {source!r}: root must be one of {ROOTS}")
    steps = []
    for step in rest:
        call = step.endswith("()")
        steps.append((step[:-2] if call else step, call))
    return root, tuple(steps)


def _resolve(compiled, roots: dict):
    root, steps = compiled
    obj = roots.get(root, _MISSING)
    if obj is _MISSING or obj is None:
        return _MISSING
    try:
        for i, (name, call) in enumerate(steps):
            # init, arg and outer are mappings: their first step is a key
            if i == 0 and root in ("init", "arg", "outer"):
                obj = obj.get(name, _MISSING)
                if obj is _MISSING:
                    return _MISSING
            else:
                obj = getattr(obj, name)
            if call:
                obj = obj()
            if obj is None:
                return _MISSING
    except (AttributeError, TypeError, KeyError, IndexError):
        return _MISSING
    return obj


_COMPILED_RULES = tuple((rule, tuple(_compile_source(s) for s in rule.sources)) for rule in DEFAULT_RULES)
INIT_NAMES = frozenset(
    steps[0][0] for _, compiled in _COMPILED_RULES for root, steps in compiled if root == "init" and steps
)


def layer_of(instance, init: Mapping | None) -> int | None:
    """The layer number the ``layer`` rule reads for a module (before any call: ``self`` and ``init`` only)."""
    for rule, compiled in _COMPILED_RULES:
        if rule.name == "layer":
            for source in compiled:
                value = _resolve(source, {"self": instance, "init": init})
                if value is not _MISSING:
                    try:
                        return _NORMALISERS[rule.kind](value)
                    except (TypeError, ValueError):
                        continue
    return None


def canonical_json(fields: Mapping) -> str:
    """The one text form of a case's fields: what is hashed for identity and stored."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


class CaseExtractor:
    """Applies the rules to calls of one target class. Built once per class; ``extract`` runs on every call."""

    def __init__(self, cls: type, entry: str, user_fields: tuple[UserField, ...] = ()):
        self.cls = cls
        self.signature = inspect.signature(getattr(cls, entry))
        params = list(self.signature.parameters.values())
        self.var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.user_fields = tuple((f.name, f.compiled()) for f in user_fields)

    def extract(self, instance, args: tuple, kwargs: dict, init: Mapping | None, outer: Mapping | None):
        """``(identity fields, layer)`` for one call, or ``None`` when the arguments do not bind (the call itself
        will raise the TypeError)."""
        try:
            bound = self.signature.bind(instance, *args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop(next(iter(arguments)))  # self
        if self.var_keyword is not None:
            arguments.update(arguments.pop(self.var_keyword))
        types = tensor_types()

        inputs = []
        first_tensor = _MISSING
        for name, value in arguments.items():
            spec = _tensors_spec(value, types) if types else _MISSING
            if spec is not _MISSING:
                inputs.append([name, spec])
                if first_tensor is _MISSING and isinstance(value, types):
                    first_tensor = value

        roots = {"self": instance, "init": init, "arg": arguments, "outer": outer}
        if first_tensor is not _MISSING:
            roots["input"] = first_tensor
        fields: dict[str, Any] = {}
        layer = None
        for rule, compiled in _COMPILED_RULES:
            for source in compiled:
                value = _resolve(source, roots)
                if value is not _MISSING:
                    try:
                        value = _NORMALISERS[rule.kind](value)
                    except (TypeError, ValueError):
                        continue  # not the kind of value this rule reads: try the next source
                    if rule.identity:
                        fields[rule.name] = value
                    else:
                        layer = value
                    break
        if type(instance) is not self.cls:
            fields["class_name"] = type(instance).__qualname__
        if inputs:
            fields["inputs"] = inputs
        weights = {}
        for name, value in sorted(getattr(instance, "__dict__", {}).items()):
            spec = _tensors_spec(value, types) if types else _MISSING
            if spec is not _MISSING:
                weights[name] = spec
        if weights:
            fields["weights"] = weights
        if self.user_fields:
            namespace = dict(arguments)
            namespace["self"] = instance
            if "x" not in namespace:
                namespace["x"] = first_tensor if first_tensor is not _MISSING else next(iter(args), None)
            extra = {}
            for name, code in self.user_fields:
                try:
                    value = eval(code, {"ttnn": sys.modules.get("ttnn")}, namespace)
                except Exception as exc:
                    raise CollectCasesError(
                        f"--field {name}: evaluating it on a call of {self.cls.__qualname__} failed: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                extra[name] = plain_value(value, f"--field {name}")
            fields["extra"] = extra
        return fields, layer
