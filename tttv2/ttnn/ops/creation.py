"""Tensor creation: zeros, ones, full, empty, rand, arange and their ``*_like`` forms.

A tensor created with ``device=`` is replicated on every device of the mesh; without a device it is a host
tensor. Defaults follow ttnn: bfloat16, ROW_MAJOR (``rand``: TILE), DRAM interleaved.
"""

from __future__ import annotations

import numpy as np

from ..device import MeshDevice
from ..errors import op_error
from ..memory import DRAM_MEMORY_CONFIG, MemoryConfig
from ..numerics import quantize
from ..placement import TensorTopology
from ..tensor import Shape, Tensor
from ..types import DataType, Layout
from ._common import expect_tensor, ttnn_op

__all__ = [
    "arange",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "rand",
    "zeros",
    "zeros_like",
]
__experimental__: list[str] = []
__transformer__: list[str] = []


def _shape(op: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (list, tuple, Shape)):
        raise op_error(op, "shape", "a list or tuple of non-negative ints", repr(shape))
    dims = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise op_error(op, "shape", "a list or tuple of non-negative ints", repr(shape))
        dims.append(int(d))
    return tuple(dims)


def _make(op: str, array: np.ndarray, dtype, layout, device, memory_config) -> Tensor:
    """Validate the common keyword arguments and build a host or replicated device tensor."""
    if not isinstance(dtype, DataType):
        raise op_error(op, "dtype", "a ttnn.DataType", repr(dtype))
    if not isinstance(layout, Layout):
        raise op_error(op, "layout", "a ttnn.Layout", repr(layout))
    if dtype.is_block_float and layout is not Layout.TILE:
        raise op_error(op, "layout", f"TILE_LAYOUT for {dtype.name}", layout.name)
    if device is not None and not isinstance(device, MeshDevice):
        raise op_error(op, "device", "a ttnn.MeshDevice or None", type(device).__name__)
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    if memory_config is not None and device is None:
        raise op_error(op, "device", "a device when memory_config is given", None)
    values = quantize(array, dtype)
    if device is None:
        return Tensor([values], dtype, layout, None, None, quantized=True, what=op)
    return Tensor(
        [values] * device.get_num_devices(),
        dtype,
        layout,
        device,
        memory_config or DRAM_MEMORY_CONFIG,
        TensorTopology.replicated(device.shape),
        quantized=True,
        what=op,
    )


def _fill_array(op: str, shape, fill_value) -> np.ndarray:
    if isinstance(fill_value, bool) or not isinstance(fill_value, (int, float, np.integer, np.floating)):
        raise op_error(op, "fill_value", "a number", repr(fill_value))
    return np.full(
        _shape(op, shape), fill_value, dtype=np.float64 if isinstance(fill_value, float) else np.int64
    )


@ttnn_op("ttnn.full")
def full(
    shape,
    fill_value,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (rounded to ``dtype``)."""
    op = "ttnn.full"
    array = _fill_array(op, shape, fill_value)
    return _make(op, array, dtype or DataType.BFLOAT16, layout or Layout.ROW_MAJOR, device, memory_config)


@ttnn_op("ttnn.zeros")
def zeros(
    shape,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
) -> Tensor:
    """A tensor of zeros."""
    op = "ttnn.zeros"
    return _make(
        op,
        np.zeros(_shape(op, shape)),
        dtype or DataType.BFLOAT16,
        layout or Layout.ROW_MAJOR,
        device,
        memory_config,
    )


@ttnn_op("ttnn.ones")
def ones(
    shape,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
) -> Tensor:
    """A tensor of ones."""
    op = "ttnn.ones"
    return _make(
        op,
        np.ones(_shape(op, shape)),
        dtype or DataType.BFLOAT16,
        layout or Layout.ROW_MAJOR,
        device,
        memory_config,
    )


@ttnn_op("ttnn.empty")
def empty(
    shape,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
) -> Tensor:
    """An uninitialised tensor; the emulator fills it with zeros (hardware leaves whatever was in memory)."""
    op = "ttnn.empty"
    return _make(
        op,
        np.zeros(_shape(op, shape)),
        dtype or DataType.BFLOAT16,
        layout or Layout.ROW_MAJOR,
        device,
        memory_config,
    )


@ttnn_op("ttnn.rand")
def rand(
    shape,
    *,
    device: MeshDevice | None = None,
    dtype: DataType = DataType.BFLOAT16,
    layout: Layout = Layout.TILE,
    memory_config: MemoryConfig | None = None,
    low: float = 0.0,
    high: float = 1.0,
    seed: int = 0,
) -> Tensor:
    """Uniform values in ``[low, high)``, reproducible from ``seed`` (the same values on every device)."""
    op = "ttnn.rand"
    if not low < high:
        raise op_error(op, "high", f"a value greater than low ({low})", high)
    rng = np.random.default_rng(seed)
    array = rng.uniform(low, high, size=_shape(op, shape)).astype(np.float32)
    return _make(op, array, dtype, layout, device, memory_config)


def _like(op: str, tensor, fill: float | None, dtype, layout, device, memory_config) -> Tensor:
    t = expect_tensor(op, "tensor", tensor, on_device=False)
    device = device if device is not None else t.device()
    if memory_config is None and device is t.device():
        memory_config = t.memory_config()
    array = np.zeros(t.shape) if fill is None else np.full(tuple(t.shape), fill)
    return _make(op, array, dtype or t.dtype, layout or t.layout, device, memory_config)


@ttnn_op("ttnn.zeros_like")
def zeros_like(tensor: Tensor, dtype=None, layout=None, device=None, memory_config=None) -> Tensor:
    """Zeros with the shape (and by default dtype, layout, device and memory config) of ``tensor``."""
    return _like("ttnn.zeros_like", tensor, 0.0, dtype, layout, device, memory_config)


@ttnn_op("ttnn.ones_like")
def ones_like(tensor: Tensor, dtype=None, layout=None, device=None, memory_config=None) -> Tensor:
    """Ones with the shape (and by default dtype, layout, device and memory config) of ``tensor``."""
    return _like("ttnn.ones_like", tensor, 1.0, dtype, layout, device, memory_config)


@ttnn_op("ttnn.empty_like")
def empty_like(tensor: Tensor, dtype=None, layout=None, device=None, memory_config=None) -> Tensor:
    """Like :func:`empty` with the properties of ``tensor`` (filled with zeros)."""
    return _like("ttnn.empty_like", tensor, None, dtype, layout, device, memory_config)


@ttnn_op("ttnn.full_like")
def full_like(tensor: Tensor, fill_value, dtype=None, layout=None, device=None, memory_config=None) -> Tensor:
    """``fill_value`` with the shape (and by default dtype, layout, device and memory config) of ``tensor``."""
    op = "ttnn.full_like"
    if isinstance(fill_value, bool) or not isinstance(fill_value, (int, float, np.integer, np.floating)):
        raise op_error(op, "fill_value", "a number", repr(fill_value))
    return _like(op, tensor, fill_value, dtype, layout, device, memory_config)


@ttnn_op("ttnn.arange")
def arange(
    start: int = 0,
    end: int | None = None,
    step: int = 1,
    dtype: DataType = DataType.BFLOAT16,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
    layout: Layout = Layout.ROW_MAJOR,
) -> Tensor:
    """``[start, start + step, …)`` below ``end`` as a 1-D tensor; ``arange(n)`` means ``arange(0, n)``."""
    op = "ttnn.arange"
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise op_error(op, name, "a number", repr(v))
    if step == 0:
        raise op_error(op, "step", "a non-zero step", step)
    values = np.arange(start, end, step, dtype=np.float64)
    if values.size == 0:
        raise op_error(op, "end", f"a range with at least one element from start {start} by step {step}", end)
    return _make(op, values, dtype, layout, device, memory_config)
