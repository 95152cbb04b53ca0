"""Side-by-side equivalence of a TTTv1 module and its generated TTTv2 twin, with no knowledge of the module's kind.

Three pieces, shared by the generated tests and by shadow verification (``collect-cases verify``):

- ``clone_inputs``: identical, independent copies of a forward's arguments (a forward may deallocate or change
  its input in place, so each module gets its own copy);
- ``first_difference``: the first place two outputs differ (type, shape, dtype, layout, memory config, then each
  device's values), as a ``Difference`` that names the device, the index and both values; bit for bit by default,
  to a tolerance on real hardware;
- ``build_twin``: the generated class whose ``from_model_args`` accepts the TTTv1 constructor's own arguments (a
  1D class refuses a Galaxy mesh and the other way round, so the first that accepts is the one).

Everything goes through the public ``ttnn`` API (``get_device_tensors``, ``clone``, ``to_numpy`` or ``to_torch``),
so the same code runs on the emulator and on Tenstorrent's ``ttnn``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "Difference",
    "TwinError",
    "assert_equivalent_outputs",
    "build_twin",
    "clone_inputs",
    "first_difference",
]


def _ttnn():
    from tttv2 import ttnn  # the emulator, or Tenstorrent's ttnn under TTTV2_BACKEND=ttnn

    return ttnn


def _is_tensor(value) -> bool:
    return isinstance(value, _ttnn().Tensor)


# --- inputs ----------------------------------------------------------------------------------------------------
def clone_inputs(value):
    """A copy of ``value`` whose ttnn tensors are new tensors with the same values, dtype, layout, memory config
    and mesh placement; lists, tuples and dicts are copied element by element; anything else (ints, modes,
    configs, host tensors) is shared, since modules do not change those."""
    if _is_tensor(value):
        if not value.is_allocated():
            return value  # a deallocated input: whatever the module does with it, the twin gets the same
        ttnn = _ttnn()
        if value.storage_type() == ttnn.StorageType.DEVICE:
            return ttnn.clone(value, memory_config=value.memory_config())
        return ttnn.clone(value)
    if isinstance(value, list):
        return [clone_inputs(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(clone_inputs(v) for v in value)
    if isinstance(value, dict):
        return {k: clone_inputs(v) for k, v in value.items()}
    return value


# --- outputs ---------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Difference:
    """Where two outputs first differ: ``where`` is the path in the output (``output[1]``), ``aspect`` one of
    type / length / shape / dtype / layout / memory_config / value / devices; for values, the device, the flat
    index into that device's tensor and both values."""

    where: str
    aspect: str
    expected: Any
    got: Any
    device: int | None = None
    index: tuple[int, ...] | None = None
    differing: int = 0  # how many values differ on that device

    def __str__(self) -> str:
        if self.aspect != "value" or self.device is None:
            return f"{self.where}: {self.aspect} {self.got!r} != {self.expected!r} (expected)"
        count = f" ({self.differing} values differ on that device)" if self.differing > 1 else ""
        return (
            f"{self.where}: device {self.device}, index {list(self.index or ())}: "
            f"{self.got!r} != {self.expected!r} (expected){count}"
        )


def _host_values(tensor) -> np.ndarray:
    ttnn = _ttnn()
    if hasattr(ttnn, "to_numpy"):
        return np.asarray(ttnn.to_numpy(tensor))
    return ttnn.to_torch(tensor).float().numpy()  # Tenstorrent's ttnn has no to_numpy


def _values_differ(expected: np.ndarray, got: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    if atol == 0 and rtol == 0:
        same = (
            (expected == got) | (np.isnan(expected) & np.isnan(got))
            if expected.dtype.kind == "f"
            else (expected == got)
        )
        return ~same
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    close = np.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
    return ~close


def first_difference(expected, got, *, atol: float = 0.0, rtol: float = 0.0, where: str = "output"):
    """The first ``Difference`` between two outputs (ttnn tensors, or lists / tuples / dicts of them, or plain
    values), or None when they are the same. ``atol`` / ``rtol`` = 0 compares bits (NaN equals NaN)."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return Difference(where, "type", type(expected).__name__, type(got).__name__)
        if len(got) != len(expected):
            return Difference(where, "length", len(expected), len(got))
        for i, (e, g) in enumerate(zip(expected, got)):
            found = first_difference(e, g, atol=atol, rtol=rtol, where=f"{where}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return Difference(where, "type", "dict", type(got).__name__)
        if list(got) != list(expected):
            return Difference(where, "keys", list(expected), list(got))
        for key in expected:
            found = first_difference(expected[key], got[key], atol=atol, rtol=rtol, where=f"{where}[{key!r}]")
            if found is not None:
                return found
        return None
    if not _is_tensor(expected):
        if _is_tensor(got) or type(got) is not type(expected):
            return Difference(where, "type", type(expected).__name__, type(got).__name__)
        try:
            same = bool(got == expected)
        except Exception:  # an object whose == is not a bool (an array): compare its values
            same = np.array_equal(np.asarray(got), np.asarray(expected))
        return None if same else Difference(where, "value", expected, got)
    if not _is_tensor(got):
        return Difference(where, "type", "ttnn.Tensor", type(got).__name__)
    for aspect, read in (
        ("shape", lambda t: list(t.shape)),
        ("dtype", lambda t: t.dtype),
        ("layout", lambda t: t.layout),
        ("memory_config", lambda t: t.memory_config()),
    ):
        e, g = read(expected), read(got)
        if e != g:
            return Difference(where, aspect, e, g)
    ttnn = _ttnn()
    expected_parts, got_parts = ttnn.get_device_tensors(expected), ttnn.get_device_tensors(got)
    if len(expected_parts) != len(got_parts):
        return Difference(where, "devices", len(expected_parts), len(got_parts))
    for device, (e_part, g_part) in enumerate(zip(expected_parts, got_parts)):
        e, g = _host_values(e_part), _host_values(g_part)
        if e.shape != g.shape:
            return Difference(where, "shape", list(e.shape), list(g.shape), device=device)
        differ = _values_differ(e, g, atol, rtol)
        if differ.any():
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(differ)), differ.shape))
            return Difference(
                where,
                "value",
                e[index].item(),
                g[index].item(),
                device=device,
                index=index,
                differing=int(differ.sum()),
            )
    return None


def assert_equivalent_outputs(expected, got, *, atol: float = 0.0, rtol: float = 0.0, what: str = "output"):
    """``first_difference`` as an assertion: the message names the first difference."""
    found = first_difference(expected, got, atol=atol, rtol=rtol, where=what)
    if found is not None:
        raise AssertionError(str(found))


# --- the twin --------------------------------------------------------------------------------------------------
class TwinError(Exception):
    """No generated class accepts the constructor's arguments; the message has each class's reason."""


def build_twin(classes: Sequence[type] | Iterable[type], args: Sequence = (), kwargs: dict | None = None):
    """``(twin, cls)``: the first of ``classes`` whose ``from_model_args(*args, **kwargs)`` builds, given the TTTv1
    constructor's own arguments. A class refuses a mesh of the other topology (or TTTv1's galaxy test) with a
    ``TopologyError`` before any device work, so the next one is tried; any other exception is the twin's own
    failure and is raised as is. When every class refuses, ``TwinError`` names each refusal."""
    from tttv2.modules._topology import TopologyError

    refusals = []
    for cls in classes:
        try:
            return cls.from_model_args(*args, **(kwargs or {})), cls
        except TopologyError as exc:
            refusals.append(f"{cls.__name__}: {exc}")
    if not refusals:
        raise TwinError("no generated class to build")
    raise TwinError("; ".join(refusals))
