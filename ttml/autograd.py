"""Deprecated ``ttml.autograd``: ``AutoContext`` (device, seed, graph) and the ``Tensor`` wrapper.

The unified library needs neither: open a mesh with ``ttnn.open_mesh_device``, seed with
``ttnn.nn.manual_seed``, and use ``ttnn.Tensor`` directly — it carries ``requires_grad``, ``.grad`` and
``.backward()``, and its graph is freed with the loss (``reset_graph`` has nothing left to do).
"""

from __future__ import annotations

import enum

import numpy as np

from tttv2 import ttnn

from ._deprecation import deprecated

__all__ = ["AutoContext", "DataType", "GradMode", "Tensor"]

DataType = ttnn.DataType  # TTML re-exported ttnn's dtype enum (ttml.autograd.DataType.UINT32)


class GradMode(enum.Enum):
    ENABLED = "enabled"
    DISABLED = "disabled"


class AutoContext:
    """Singleton holding the mesh device; use ``ttnn.open_mesh_device`` and ``ttnn.nn.manual_seed`` instead."""

    _instance: AutoContext | None = None

    def __init__(self) -> None:
        self._device: ttnn.MeshDevice | None = None
        self._grad_scope = None

    @classmethod
    def get_instance(cls) -> AutoContext:
        deprecated(
            "ttml.autograd.AutoContext.get_instance()",
            "ttnn.open_mesh_device(...) and ttnn.nn.manual_seed(...)",
        )
        return cls._shared()

    @classmethod
    def _shared(cls) -> AutoContext:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def open_device(self, mesh_shape=(1, 1), device_ids=None) -> None:
        deprecated("ttml AutoContext.open_device", "mesh = ttnn.open_mesh_device(ttnn.MeshShape(rows, cols))")
        if self._device is not None and self._device.is_open:
            raise RuntimeError("ttml AutoContext.open_device: a device is already open; close_device() first")
        self._device = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
        ttnn.SetDefaultDevice(self._device)

    def get_device(self) -> ttnn.MeshDevice:
        """The open mesh (a 1×1 mesh is opened on first use, as TTML did)."""
        if self._device is None or not self._device.is_open:
            self._device = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
            ttnn.SetDefaultDevice(self._device)
        return self._device

    def close_device(self) -> None:
        deprecated("ttml AutoContext.close_device", "ttnn.close_mesh_device(mesh)")
        if self._device is not None and self._device.is_open:
            ttnn.close_mesh_device(self._device)
        self._device = None

    def set_seed(self, seed: int) -> None:
        deprecated("ttml AutoContext.set_seed", "ttnn.nn.manual_seed(seed)")
        ttnn.nn.manual_seed(seed)
        np.random.seed(seed % 2**32)

    def reset_graph(self) -> None:
        deprecated(
            "ttml AutoContext.reset_graph",
            "graphs belong to their tensors and are freed by backward() or when the loss is dropped",
            verb="drop the call:",
        )

    def set_gradient_mode(self, mode: GradMode) -> None:
        deprecated("ttml AutoContext.set_gradient_mode", "with ttnn.autograd.no_grad(): ...")
        if not isinstance(mode, GradMode):
            raise TypeError(
                "ttml AutoContext.set_gradient_mode: mode: expected ttml.autograd.GradMode.ENABLED or "
                f"GradMode.DISABLED, got {mode!r}"
            )
        if self._grad_scope is not None:
            self._grad_scope.__exit__(None, None, None)
            self._grad_scope = None
        if mode is GradMode.DISABLED:
            self._grad_scope = ttnn.autograd.no_grad()
            self._grad_scope.__enter__()


def _ttnn_dtype(array: np.ndarray, new_type) -> ttnn.DataType:
    if new_type is not None:
        return new_type
    return ttnn.uint32 if array.dtype.kind in "iu" else ttnn.bfloat16


def _value(t):
    return t._value if isinstance(t, Tensor) else t


class Tensor:
    """A ttml tensor wrapping a ``ttnn.Tensor``; use the ``ttnn.Tensor`` itself instead."""

    def __init__(self, value: ttnn.Tensor, requires_grad: bool | None = None) -> None:
        """``Tensor(value)`` wraps ``value``; ``Tensor(value, requires_grad)`` (TTML's two-argument form) makes a
        new leaf: the same values, cut from any graph, with that flag (``value`` itself is left as it is)."""
        if not isinstance(value, ttnn.Tensor):
            raise TypeError(f"ttml.autograd.Tensor wraps a ttnn.Tensor, got {type(value).__name__}")
        if requires_grad is not None and (not value.is_leaf or value.requires_grad != bool(requires_grad)):
            value = value.detach()
            value.requires_grad = bool(requires_grad)
        self._value = value

    @staticmethod
    def from_numpy(array, layout=ttnn.TILE_LAYOUT, new_type=None, mapper=None) -> Tensor:
        deprecated(
            "ttml.autograd.Tensor.from_numpy",
            "ttnn.from_numpy(array, dtype=..., layout=..., device=mesh) (set .requires_grad for leaves)",
        )
        array = np.asarray(array)
        if array.dtype.kind not in "biuf" and array.dtype.name not in ("bfloat16", "float16"):
            raise TypeError(
                f"ttml Tensor.from_numpy: array: expected a numeric array (bool, integer or float), got dtype {array.dtype}"
            )
        if array.dtype.kind not in "iuf":  # ml_dtypes.bfloat16 and bool arrays
            array = array.astype(np.float32)
        dtype = _ttnn_dtype(array, new_type)
        if dtype in (ttnn.uint32, ttnn.int32, ttnn.uint16):
            layout = ttnn.ROW_MAJOR_LAYOUT
        device = AutoContext._shared().get_device()
        return Tensor(ttnn.from_numpy(array, dtype=dtype, layout=layout, device=device, mesh_mapper=mapper))

    def to_numpy(self, new_type=None, composer=None) -> np.ndarray:
        deprecated("ttml Tensor.to_numpy", "ttnn.to_numpy(tensor) / ttnn.to_torch(tensor)")
        out = ttnn.to_numpy(self._value, mesh_composer=composer)
        if new_type in (ttnn.uint32, ttnn.int32):
            return out.astype(np.int64 if new_type is ttnn.int32 else np.uint32)
        return out.astype(np.float32) if out.dtype.kind == "f" else out

    def get_value(self, precision=None) -> ttnn.Tensor:
        deprecated("ttml Tensor.get_value", "the ttnn.Tensor itself")
        return self._value

    def set_value(self, value: ttnn.Tensor) -> None:
        deprecated("ttml Tensor.set_value", "assign the ttnn.Tensor")
        self._value = _value(value)

    def assign(self, other) -> None:
        """Copy values into this tensor in place (parameters keep their identity)."""
        deprecated("ttml Tensor.assign", "Module.load_state_dict(...)")
        from tttv2.ttnn.nn.module import assign_

        assign_(self._value, _value(other), "ttml Tensor.assign")

    def backward(self, retain_graph: bool = False) -> None:
        deprecated("ttml Tensor.backward", "ttnn.Tensor.backward(retain_graph=...)")
        self._value.backward(retain_graph=retain_graph)

    def get_grad(self) -> ttnn.Tensor | None:
        deprecated("ttml Tensor.get_grad", "ttnn.Tensor.grad")
        return self._value.grad

    def is_grad_initialized(self) -> bool:
        deprecated("ttml Tensor.is_grad_initialized", "ttnn.Tensor.grad is not None")
        return self._value.grad is not None

    def get_requires_grad(self) -> bool:
        deprecated("ttml Tensor.get_requires_grad", "ttnn.Tensor.requires_grad")
        return self._value.requires_grad

    def set_requires_grad(self, requires_grad: bool) -> None:
        deprecated("ttml Tensor.set_requires_grad", "ttnn.Tensor.requires_grad = ...")
        self._value.requires_grad = requires_grad

    def shape(self) -> list[int]:
        return list(self._value.shape)

    def dtype(self) -> ttnn.DataType:
        return self._value.dtype

    def __repr__(self) -> str:
        return f"ttml.autograd.Tensor({self._value!r})"
