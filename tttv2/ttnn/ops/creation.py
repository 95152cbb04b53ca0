"""Tensor creation: zeros, ones, full, empty, rand, arange and their ``*_like`` forms.

A tensor created with ``device=`` is replicated on every device of the mesh; without a device it is a host
tensor. Defaults follow ttnn: bfloat16, ROW_MAJOR (``rand``: TILE), DRAM interleaved.

Memory: a device tensor's size is checked against every device's free memory first (the allocator's
``DeviceMemoryError``), before any host memory is used. Values are written at the dtype's storage type: a
constant is quantised once; ``rand`` and ``arange`` are computed in float64 chunks of rows, each quantised into
the output, so no float64 copy of the whole tensor exists.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numpy as np

from .. import storage
from ..device import MeshDevice
from ..errors import op_error
from ..memory import DRAM_MEMORY_CONFIG, MemoryConfig
from ..numerics import check_integer_range, fill_in_pieces, quantize
from ..placement import TensorTopology
from ..tensor import Shape, Tensor, device_bytes, resolve_shard_spec, validate_memory_config
from ..types import TILE_SIZE, DataType, Layout
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


def _check_args(op: str, dtype, layout, device, memory_config) -> None:
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


def _check_device_memory(op: str, shape: tuple[int, ...], dtype, layout, device, memory_config) -> None:
    """Raise the allocator's DeviceMemoryError before any host memory is spent on a tensor that cannot fit."""
    mc = resolve_shard_spec(memory_config, shape, layout, device, op)
    validate_memory_config(mc, shape, layout, dtype, op)
    nbytes = device_bytes(shape, dtype, layout, mc)
    desc = f"{op} {list(shape)} {dtype.name} {layout.name}"
    for dev in device.get_devices():
        allocator = dev.allocators[mc.buffer_type]
        if allocator.used + nbytes > allocator.capacity:
            allocator.allocate(nbytes, desc, dev.id())  # raises: the message of every allocation failure
            allocator.release(nbytes)  # pragma: no cover - only if another thread freed memory meanwhile


def _make(
    op: str,
    shape,
    fill: Callable[[tuple[int, ...], DataType, str], np.ndarray],
    dtype,
    layout,
    device,
    memory_config,
) -> Tensor:
    """Validate, check device memory, then build a host or replicated device tensor from
    ``fill(shape, dtype, op)``, which returns the stored values (already quantised, in the dtype's storage type)."""
    _check_args(op, dtype, layout, device, memory_config)
    shape = _shape(op, shape)
    if device is not None:
        _check_device_memory(op, shape, dtype, layout, device, memory_config or DRAM_MEMORY_CONFIG)
    nonzero = math.prod(d for d in shape if d)
    if max(shape, default=0) > sys.maxsize or nonzero * dtype.numpy_dtype.itemsize > sys.maxsize:
        # numpy cannot even describe an array of this many elements
        raise op_error(op, "shape", "a shape whose element count fits in host memory", list(shape))
    values = fill(shape, dtype, op)
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


def _constant(value, arg: str = "fill_value") -> Callable[[tuple[int, ...], DataType, str], np.ndarray]:
    """A fill with one value: quantised once, then written at the storage dtype (no float64 array)."""

    def fill(shape: tuple[int, ...], dtype: DataType, op: str) -> np.ndarray:
        one = np.array([value], dtype=np.float64 if isinstance(value, float) else np.int64)
        check_integer_range(one, dtype, f"{op}: {arg}")
        # a block of equal values shares their exponent: one quantised value is every element's value
        q = quantize(one, dtype)
        if dtype.is_packed:
            return storage.constant(shape, q[0], dtype)
        return np.full(shape, q[0], dtype=q.dtype)

    return fill


def _generated(
    values: Callable[[int, int], np.ndarray], arg: str
) -> Callable[[tuple[int, ...], DataType, str], np.ndarray]:
    """A fill computed in float64 chunks (``values(start, count)`` gives flat elements ``start .. start + count``,
    asked for in order), each quantised into the output: float64 never holds the whole tensor. A chunk is whole
    rows, or pieces of one long row cut at multiples of the 32-wide tile, so block floats (blocks of 16 values
    along a row, rows padded to the tile width) quantise exactly as in one pass. ``arg`` names the arguments
    that chose the values, for the integer range check."""

    def chunk_of(start: int, count: int, rows: int, dtype: DataType, op: str) -> np.ndarray:
        chunk = values(start, count).reshape(rows, count // rows)
        check_integer_range(chunk, dtype, f"{op}: {arg}")
        return quantize(chunk, dtype)

    def fill(shape: tuple[int, ...], dtype: DataType, op: str) -> np.ndarray:
        if dtype.is_packed:
            out = storage.empty(shape, dtype)  # written chunk by chunk in the device format
        else:
            out = np.empty(shape, dtype=dtype.numpy_dtype)
        if math.prod(shape) == 0:
            return out
        width = shape[-1] if shape else 1
        flat = out.reshape(-1, width)
        if width <= _CHUNK_ELEMENTS:
            step = _CHUNK_ELEMENTS // width
            for r0 in range(0, flat.shape[0], step):
                r1 = min(flat.shape[0], r0 + step)
                flat[r0:r1] = chunk_of(r0 * width, (r1 - r0) * width, r1 - r0, dtype, op)
            return out
        piece = max(TILE_SIZE, _CHUNK_ELEMENTS // TILE_SIZE * TILE_SIZE)
        for r in range(flat.shape[0]):
            for c0 in range(0, width, piece):
                c1 = min(width, c0 + piece)
                flat[r, c0:c1] = chunk_of(r * width + c0, c1 - c0, 1, dtype, op)[0]
        return out

    return fill


_CHUNK_ELEMENTS = 1 << 20  # float64 working set of a generated fill: 8 MiB


def _fill_value(op: str, fill_value):
    if isinstance(fill_value, bool) or not isinstance(fill_value, (int, float, np.integer, np.floating)):
        raise op_error(op, "fill_value", "a number", repr(fill_value))
    return float(fill_value) if isinstance(fill_value, (float, np.floating)) else int(fill_value)


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
    fill = _constant(_fill_value(op, fill_value))
    return _make(
        op, shape, fill, dtype or DataType.BFLOAT16, layout or Layout.ROW_MAJOR, device, memory_config
    )


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
        shape,
        _constant(0.0),
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
        shape,
        _constant(1.0),
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
        shape,
        _constant(0.0),
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
    """Uniform values in ``[low, high)`` drawn in float64, reproducible from ``seed`` (an int in [0, 2**32), ttnn's
    uint32; the same values on every device). The cast to ``dtype`` rounds to nearest, as ttnn's typecast of its
    float32 draw does, so ``high`` itself can appear (bfloat16 on [0, 1): about one value in 500)."""
    op = "ttnn.rand"
    seed = check_seed(op, "seed", seed)
    for name, value in (("low", low), ("high", high)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not np.isfinite(value)
        ):
            raise op_error(op, name, "a finite number", repr(value))
    if not low < high:
        raise op_error(op, "high", f"a value greater than low ({low})", high)
    state = np.random.default_rng(seed).bit_generator.state  # numpy's PCG64, seeded as default_rng(seed)

    unit = low == 0.0 and high == 1.0  # the default (dropout masks): uniform(0, 1) is 0 + 1·d, d itself

    def draw(start: int, out: np.ndarray) -> None:
        # the stream from value ``start`` on: one double a value, so advancing by ``start`` draws gives the very
        # values a single generator drawing everything in order gives there
        bits = np.random.PCG64(0)
        bits.state = state
        bits.advance(start)
        gen = np.random.Generator(bits)
        # d itself on [0, 1): the same doubles as uniform(0, 1)'s 0 + 1·d, ≈ 1.5× faster
        out[...] = gen.random(out.size) if unit else gen.uniform(low, high, size=out.size)

    def uniform(start: int, count: int) -> np.ndarray:  # flat values start .. start + count of the stream
        out = np.empty(count, dtype=np.float32)
        fill_in_pieces(lambda lo, hi: draw(start + lo, out[lo:hi]), count)  # pieces on the workers
        return out

    return _make(op, shape, _generated(uniform, "low/high"), dtype, layout, device, memory_config)


SEED_LIMIT = 2**32  # ttnn's seeds are uint32


def check_seed(op: str, name: str, seed) -> int:
    """``seed`` as an int in [0, 2**32) (ttnn's uint32), else a one-line error naming ``op`` and ``name``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < SEED_LIMIT:
        raise op_error(op, name, f"an int in [0, {SEED_LIMIT})", repr(seed))
    return int(seed)


def _like(op: str, tensor, fill: float | None, dtype, layout, device, memory_config) -> Tensor:
    t = expect_tensor(op, "tensor", tensor, on_device=False)
    device = device if device is not None else t.device()
    if memory_config is None and device is t.device():
        memory_config = t.memory_config()
    fill_values = _constant(0.0 if fill is None else fill)
    return _make(op, tuple(t.shape), fill_values, dtype or t.dtype, layout or t.layout, device, memory_config)


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
    return _like(op, tensor, _fill_value(op, fill_value), dtype, layout, device, memory_config)


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
    count = max(0, math.ceil((end - start) / step))
    if count == 0:
        raise op_error(op, "end", f"a range with at least one element from start {start} by step {step}", end)
    first = np.float64(start)
    delta = (first + np.float64(step)) - first  # numpy's arange: element i is start + i·delta

    def values(begin: int, n: int) -> np.ndarray:
        return first + np.arange(begin, begin + n, dtype=np.float64) * delta

    return _make(op, (count,), _generated(values, "start/end"), dtype, layout, device, memory_config)
