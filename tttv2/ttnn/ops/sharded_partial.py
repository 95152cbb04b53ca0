"""A slice of rows moved into L1 shards and back: ``interleaved_to_sharded_partial`` and
``sharded_to_interleaved_partial``, which tt-metal's Falcon-40B prefill MLP uses to run a long sequence through
sharded matmuls a slice at a time (its output slices land in one persistent DRAM tensor); and ``bcast``, with which
its prefill layer norm applies gamma and beta to such slices.

Rows are the tensor's 2-D view, as ttnn counts them: every dim but the last folded into the height. Slice ``i`` of
``n`` is rows ``[i · H / n, (i + 1) · H / n)``.
"""

from __future__ import annotations

import numpy as np

from ..memory import CoreRangeSet, MemoryConfig, ShardSpec, num_cores_to_corerangeset
from ..tensor import Tensor
from ..types import (
    BcastOpDim,
    BcastOpMath,
    BufferType,
    DataType,
    Layout,
    ShardOrientation,
    TensorMemoryLayout,
)
from ._common import (
    check_memory_config,
    device_grid,
    expect,
    expect_tensor,
    map_shards,
    output_like,
    same_mesh,
    ttnn_op,
)

__all__ = ["bcast", "interleaved_to_sharded_partial", "sharded_to_interleaved_partial"]
__experimental__: list[str] = []
__transformer__: list[str] = []

_SHARDED = (
    TensorMemoryLayout.HEIGHT_SHARDED,
    TensorMemoryLayout.WIDTH_SHARDED,
    TensorMemoryLayout.BLOCK_SHARDED,
)


def _height(t: Tensor) -> int:
    return int(np.prod(t.padded_shape[:-1]))


def _slice(op: str, num_slices, slice_index, height: int, what: str) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of slice ``slice_index`` of ``num_slices`` over ``height`` rows."""
    for name, value in (("num_slices", num_slices), ("slice_index", slice_index)):
        expect(
            isinstance(value, (int, np.integer)) and not isinstance(value, bool),
            op,
            name,
            "an int",
            repr(value),
        )
    expect(num_slices >= 1, op, "num_slices", "at least 1", num_slices)
    expect(0 <= slice_index < num_slices, op, "slice_index", f"in [0, {num_slices})", slice_index)
    expect(
        height % num_slices == 0,
        op,
        "num_slices",
        f"a divisor of {what}'s height {height} (every dim but the last)",
        num_slices,
    )
    rows = height // num_slices
    return slice_index * rows, (slice_index + 1) * rows


def _whole_tiles(op: str, arg: str, t: Tensor) -> None:
    expect(
        len(t.shape) >= 2 and t.shape[-2] == t.padded_shape[-2],
        op,
        arg,
        "rows that fill their tiles (the row count a multiple of 32)",
        list(t.shape),
    )


def _rows(values: np.ndarray) -> np.ndarray:
    return values.reshape(-1, values.shape[-1])


@ttnn_op("ttnn.interleaved_to_sharded_partial")
def interleaved_to_sharded_partial(
    input_tensor: Tensor,
    grid,
    shard_shape,
    num_slices: int,
    slice_index: int,
    shard_scheme: TensorMemoryLayout,
    shard_orientation: ShardOrientation,
    *,
    output_dtype: DataType | None = None,
) -> Tensor:
    """Slice ``slice_index`` of ``num_slices`` of an interleaved TILE tensor's rows, as a ``[1, 1, H / n, W]``
    tensor in L1 sharded by ``shard_scheme`` in ``shard_shape`` shards. ``grid`` is a ``CoreCoord`` (or ``(x, y)``):
    the shards take as many of its cores as the slice needs, row by row for ROW_MAJOR (ttnn refuses a
    ``CoreRangeSet`` here, and so does the emulator)."""
    op = "ttnn.interleaved_to_sharded_partial"
    t = expect_tensor(op, "input_tensor", input_tensor, layouts=(Layout.TILE,))
    expect(
        not t.is_sharded(), op, "input_tensor", "an interleaved tensor", t.memory_config().memory_layout.name
    )
    expect(
        not isinstance(grid, CoreRangeSet),
        op,
        "grid",
        "a ttnn.CoreCoord (ttnn does not take a CoreRangeSet here)",
        "a CoreRangeSet",
    )
    grid = device_grid(op, "grid", grid, t.device())
    expect(shard_scheme in _SHARDED, op, "shard_scheme", "HEIGHT, WIDTH or BLOCK_SHARDED", repr(shard_scheme))
    expect(
        isinstance(shard_orientation, ShardOrientation),
        op,
        "shard_orientation",
        "a ttnn.ShardOrientation",
        repr(shard_orientation),
    )
    shape = tuple(int(v) for v in shard_shape) if isinstance(shard_shape, (tuple, list)) else None
    expect(shape is not None and len(shape) == 2, op, "shard_shape", "(height, width)", repr(shard_shape))
    expect(
        output_dtype is None or isinstance(output_dtype, DataType),
        op,
        "output_dtype",
        "a ttnn.DataType or None",
        repr(output_dtype),
    )
    lo, hi = _slice(op, num_slices, slice_index, _height(t), "input_tensor")
    rows, width = hi - lo, t.padded_shape[-1]
    if shard_scheme is TensorMemoryLayout.HEIGHT_SHARDED:
        cores = -(-rows // shape[0])
    elif shard_scheme is TensorMemoryLayout.WIDTH_SHARDED:
        cores = -(-width // shape[1])
    else:
        cores = -(-rows // shape[0]) * -(-width // shape[1])
    expect(
        cores <= grid.x * grid.y,
        op,
        "shard_shape",
        f"shards fitting {grid.x}x{grid.y} cores",
        f"{cores} shards",
    )
    spec = ShardSpec(
        num_cores_to_corerangeset(cores, grid, shard_orientation is ShardOrientation.ROW_MAJOR),
        shape,
        shard_orientation,
    )
    _whole_tiles(op, "input_tensor", t)
    shards = map_shards(lambda s: np.ascontiguousarray(_rows(s)[lo:hi]).reshape(1, 1, rows, -1), t)
    return output_like(
        op,
        shards,
        t,
        dtype=t.dtype if output_dtype is None else output_dtype,
        memory_config=MemoryConfig(shard_scheme, BufferType.L1, spec),
    )


@ttnn_op("ttnn.sharded_to_interleaved_partial")
def sharded_to_interleaved_partial(
    input_tensor: Tensor,
    cache_tensor: Tensor,
    num_slices: int,
    slice_index: int,
    *,
    memory_config: MemoryConfig | None = None,
    output_dtype: DataType | None = None,
) -> Tensor:
    """Write a sharded TILE tensor's rows into slice ``slice_index`` of ``num_slices`` of ``cache_tensor``'s rows,
    in place (the values stored as the cache's dtype); returns ``cache_tensor``. The input holds exactly one
    slice: ``H / n`` rows of the cache's width."""
    op = "ttnn.sharded_to_interleaved_partial"
    t = expect_tensor(op, "input_tensor", input_tensor, layouts=(Layout.TILE,))
    cache = expect_tensor(op, "cache_tensor", cache_tensor, layouts=(Layout.TILE,))
    same_mesh(op, input_tensor=t, cache_tensor=cache)
    expect(t.is_sharded(), op, "input_tensor", "a sharded tensor", t.memory_config().memory_layout.name)
    check_memory_config(op, memory_config)
    expect(
        output_dtype is None or output_dtype is cache.dtype,
        op,
        "output_dtype",
        f"None or the cache's {cache.dtype.name}",
        repr(output_dtype),
    )
    _whole_tiles(op, "cache_tensor", cache)
    lo, hi = _slice(op, num_slices, slice_index, _height(cache), "cache_tensor")
    expect(
        (_height(t), t.padded_shape[-1]) == (hi - lo, cache.padded_shape[-1]),
        op,
        "input_tensor",
        f"one slice of the cache: {hi - lo} rows of {cache.padded_shape[-1]}",
        f"{_height(t)} rows of {t.padded_shape[-1]}",
    )
    lead = tuple(cache.padded_shape[:-1])
    index = (*np.unravel_index(np.arange(lo, hi), lead), slice(None))
    values = map_shards(_rows, t)
    for i, rows in enumerate(values):
        cache._writable_shard(i, op)[index] = rows
    return cache


_BCAST_MATH = {
    BcastOpMath.ADD: np.add,
    BcastOpMath.SUB: np.subtract,
    BcastOpMath.MUL: np.multiply,
}


@ttnn_op("ttnn.bcast")
def bcast(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    math_op: BcastOpMath,
    dim: BcastOpDim,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """``a op b`` with b broadcast within each tile: its first row over the rows (``BcastOpDim.H``: b one tile
    tall, a's width), its first column over the columns (``W``: b one tile wide, a's height) or its first value
    everywhere (``HW``: b one tile). Falcon-40B's prefill layer norm applies its gamma and beta this way (each padded
    to 32 rows, row 0 holding the values). b's leading dims are 1, or a's. Computed in float32, stored in a's dtype;
    a sharded output keeps a's shard spec (H takes a sharded a only with a sharded output, W an interleaved one)."""
    op = "ttnn.bcast"
    a = expect_tensor(op, "input_tensor_a", input_tensor_a, layouts=(Layout.TILE,), rank=(2, 3, 4))
    b = expect_tensor(op, "input_tensor_b", input_tensor_b, layouts=(Layout.TILE,), rank=(2, 3, 4))
    same_mesh(op, input_tensor_a=a, input_tensor_b=b)
    expect(a.dtype.is_float, op, "input_tensor_a.dtype", "a float dtype", a.dtype.name)
    expect(isinstance(math_op, BcastOpMath), op, "math_op", "a ttnn.BcastOpMath", repr(math_op))
    expect(isinstance(dim, BcastOpDim), op, "dim", "a ttnn.BcastOpDim", repr(dim))
    expect(output_tensor is None, op, "output_tensor", "None (not emulated)", "a tensor")
    check_memory_config(op, memory_config)
    out_mc = a.memory_config() if memory_config is None else memory_config
    if dim is BcastOpDim.H:
        expect(
            a.is_sharded() == out_mc.is_sharded(),
            op,
            "memory_config",
            "sharded output for a sharded input, interleaved for an interleaved one (bcast H)",
            out_mc.memory_layout.name,
        )
    elif dim is BcastOpDim.W:
        expect(
            not a.is_sharded() and not out_mc.is_sharded(),
            op,
            "memory_config",
            "interleaved input and output (bcast W)",
            f"{a.memory_config().memory_layout.name} → {out_mc.memory_layout.name}",
        )
    if out_mc.is_sharded() and a.is_sharded():
        out_mc = MemoryConfig(out_mc.memory_layout, out_mc.buffer_type, a.shard_spec())
    ap, bp = tuple(a.padded_shape), tuple(b.padded_shape)
    want = {BcastOpDim.H: (32, ap[-1]), BcastOpDim.W: (ap[-2], 32), BcastOpDim.HW: (32, 32)}[dim]
    expect(
        bp[-2:] == want, op, "input_tensor_b", f"padded last dims {list(want)} ({dim.name})", list(bp[-2:])
    )
    lead_b = int(np.prod(bp[:-2]))
    expect(
        lead_b == 1 or (len(bp) == len(ap) and bp[:-2] == ap[:-2]),
        op,
        "input_tensor_b",
        f"leading dims of 1 or a's {list(ap[:-2])}",
        list(bp[:-2]),
    )
    rows, cols = a.shape[-2], a.shape[-1]
    fn = _BCAST_MATH[math_op]

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        y = y.reshape((1,) * (x.ndim - y.ndim) + y.shape) if lead_b == 1 else y
        if dim is BcastOpDim.H:
            part = y[..., :1, :cols]
        elif dim is BcastOpDim.W:
            part = y[..., :rows, :1]
        else:
            part = y[..., :1, :1]
        return np.asarray(fn(x, part), dtype=np.float32)

    return output_like(op, map_shards(run, a, b), a, memory_config=out_mc)
