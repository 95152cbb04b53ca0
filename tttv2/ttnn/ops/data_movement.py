"""Layout, shape and memory movement ops: to_layout, reshape, permute, slice, concat, pad, typecast, sharding …

These ops move or reinterpret data; they never do arithmetic, so values are copied exactly (except where a
dtype changes, which goes through the numerics model). Shape ops also work on host tensors, as in ttnn;
memory-config ops need a device tensor.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np

from ..errors import op_error
from ..memory import DRAM_MEMORY_CONFIG, CoreGrid, CoreRange, CoreRangeSet, MemoryConfig, ShardSpec
from ..placement import permuted_topology, reshaped_topology
from ..tensor import Shape, Tensor, padded_shape_of
from ..types import (
    TILE_SIZE,
    BufferType,
    DataType,
    Layout,
    ShardOrientation,
    ShardStrategy,
    TensorMemoryLayout,
)
from ._common import expect, expect_tensor, output_like, same_mesh, ttnn_op

__all__ = [
    "chunk",
    "clone",
    "concat",
    "copy_host_to_device_tensor",
    "deallocate",
    "interleaved_to_sharded",
    "pad",
    "permute",
    "plus_one",
    "repeat",
    "repeat_interleave",
    "reshape",
    "reshard",
    "sharded_to_interleaved",
    "slice",
    "split",
    "squeeze",
    "tilize",
    "to_layout",
    "to_memory_config",
    "transpose",
    "typecast",
    "unsqueeze",
    "unsqueeze_to_4D",
    "untilize",
    "view",
]
__experimental__ = [("typecast", "experimental_typecast")]
__transformer__: list[str] = []


# --- argument helpers -------------------------------------------------------------------------------------


def _dim(op: str, arg: str, dim, rank: int, *, extra: int = 0) -> int:
    """Normalise a (possibly negative) dim index for a rank-``rank`` tensor (``extra`` allows rank + extra)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise op_error(op, arg, "an int", repr(dim))
    limit = rank + extra
    if not -limit <= dim < limit:
        raise op_error(op, arg, f"a dim in [{-limit}, {limit - 1}] for a rank-{rank} tensor", dim)
    return int(dim) % limit


def _int_list(op: str, arg: str, values) -> list[int]:
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        return [int(values)]
    if not isinstance(values, (list, tuple, Shape)):
        raise op_error(op, arg, "a list or tuple of ints", repr(values))
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise op_error(op, arg, "a list or tuple of ints", repr(values))
        out.append(int(v))
    return out


def _dtype_arg(op: str, arg: str, dtype) -> DataType:
    if not isinstance(dtype, DataType):
        raise op_error(op, arg, "a ttnn.DataType", repr(dtype))
    return dtype


def _memcfg_arg(op: str, arg: str, memory_config) -> MemoryConfig | None:
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, arg, "a ttnn.MemoryConfig", repr(memory_config))
    return memory_config


def _no_block_float_row_major(op: str, dtype: DataType, layout: Layout) -> None:
    if dtype.is_block_float and layout is Layout.ROW_MAJOR:
        raise op_error(
            op,
            "layout",
            f"TILE_LAYOUT for a {dtype.name} tensor (block floats only exist tiled)",
            "ROW_MAJOR_LAYOUT",
        )


def _untilized_dtype(dtype: DataType) -> DataType:
    """The dtype untilize produces on a device: bfloat8_b comes out as bfloat16 (tt-metal's untilize
    ``compute_output_specs``: ``BFLOAT8_B → BFLOAT16``, every other dtype unchanged). bfloat4_b has no row-major
    form there either, and stays an error."""
    return DataType.BFLOAT16 if dtype is DataType.BFLOAT8_B else dtype


def cast_values(values: np.ndarray, src: DataType, dst: DataType) -> np.ndarray:
    """Convert stored values between dtypes the way the typecast kernels do.

    Float → integer rounds to nearest (ties to even) and saturates to the integer range (negative → 0 for
    unsigned types); integer → integer saturates; anything → float converts exactly and is then rounded by
    the output tensor's dtype.
    """
    if dst.is_float:
        return np.asarray(values, dtype=np.float32)
    info = np.iinfo(dst.numpy_dtype)
    if src.is_float:
        v = np.rint(
            np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=info.max, neginf=info.min)
        )
    else:
        v = np.asarray(values, dtype=np.int64)
    return np.clip(v, info.min, info.max).astype(dst.numpy_dtype)


def per_device(fn, *per_device_inputs):
    """``fn(*inputs_of_device_i)`` for every device; devices whose inputs are the same array objects (replicated
    tensors share one array) share one result, so replicated work is done once. ``None`` inputs pass through."""
    n = next(len(lst) for lst in per_device_inputs if lst is not None)
    cache: dict[tuple, object] = {}
    out = []
    for i in range(n):
        items = tuple(None if lst is None else lst[i] for lst in per_device_inputs)
        key = tuple(id(item) for item in items)
        if key not in cache:
            cache[key] = fn(*items)
        out.append(cache[key])
    return out


def _shards(t: Tensor, op: str) -> list[np.ndarray]:
    return t.shards(op)


def _passed_on(t: Tensor, op: str) -> list:
    """The shards for an output that holds the input's values unchanged (a move to another memory config or
    layout, a clone): the stored shards themselves, shared rather than unpacked and packed again (they are
    read-only; an in-place write copies its shard first)."""
    return t.stored_shards(op)


def _moved_topology(op: str, move, t: Tensor, *args, **kwargs):
    """``move(t's topology, *args)``: its shard dims moved with the data by a reshape or a permute."""
    try:
        return move(t.tensor_topology(), *args, **kwargs)
    except ValueError as exc:  # the input's own topology names a dim it does not have
        raise op_error(op, "input_tensor", "a tensor whose topology fits its shape", str(exc)) from None


def _map(t: Tensor, op: str, fn) -> list[np.ndarray]:
    """Apply ``fn`` once per distinct shard array (replicated shards share one array object)."""
    return per_device(fn, _shards(t, op))


# --- layout -------------------------------------------------------------------------------------------------


@ttnn_op("ttnn.to_layout")
def to_layout(
    tensor: Tensor,
    layout: Layout,
    dtype: DataType | None = None,
    memory_config: MemoryConfig | None = None,
    *,
    sub_core_grids=None,
    **_ignored,
) -> Tensor:
    """Convert between ROW_MAJOR and TILE layout (optionally changing dtype / memory config).

    Works on host and device tensors. bfloat8_b / bfloat4_b only exist in TILE layout: on a device, TILE →
    ROW_MAJOR of a bfloat8_b tensor untilizes it to bfloat16 (as ttnn's to_layout does, through untilize);
    anything else asking for a row-major block float is an error (typecast to bfloat16 first).
    """
    op = "ttnn.to_layout"
    t = expect_tensor(op, "tensor", tensor, on_device=False)
    expect(isinstance(layout, Layout), op, "layout", "a ttnn.Layout", repr(layout))
    out_dtype = t.dtype if dtype is None else _dtype_arg(op, "dtype", dtype)
    if dtype is None and layout is Layout.ROW_MAJOR and t.layout is Layout.TILE and t.device() is not None:
        out_dtype = _untilized_dtype(t.dtype)
    _memcfg_arg(op, "memory_config", memory_config)
    _no_block_float_row_major(op, out_dtype, layout)
    if t.device() is None:
        memory_config = None
    if layout is t.layout and out_dtype is t.dtype and memory_config in (None, t.memory_config()):
        return t
    shards = (
        _map(t, op, lambda s: cast_values(s, t.dtype, out_dtype))
        if out_dtype is not t.dtype
        else _passed_on(t, op)
    )
    return output_like(op, shards, t, dtype=out_dtype, layout=layout, memory_config=memory_config)


@ttnn_op("ttnn.tilize")
def tilize(
    input_tensor: Tensor,
    *,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    use_multicore: bool = True,
    use_low_perf: bool = False,
    sub_core_grids=None,
) -> Tensor:
    """ROW_MAJOR → TILE (the input must be row-major). ``use_multicore`` only changes speed on hardware."""
    op = "ttnn.tilize"
    t = expect_tensor(op, "input_tensor", input_tensor, layouts=(Layout.ROW_MAJOR,))
    out_dtype = t.dtype if dtype is None else _dtype_arg(op, "dtype", dtype)
    _memcfg_arg(op, "memory_config", memory_config)
    shards = (
        _map(t, op, lambda s: cast_values(s, t.dtype, out_dtype))
        if out_dtype is not t.dtype
        else _passed_on(t, op)
    )
    return output_like(op, shards, t, dtype=out_dtype, layout=Layout.TILE, memory_config=memory_config)


@ttnn_op("ttnn.untilize")
def untilize(
    input_tensor: Tensor,
    *,
    memory_config: MemoryConfig | None = None,
    use_multicore: bool = True,
    use_pack_untilize: bool = True,
    sub_core_grids=None,
) -> Tensor:
    """TILE → ROW_MAJOR. A bfloat8_b input comes out as bfloat16 (its values are exact in bfloat16), as on
    hardware; bfloat4_b has no row-major form. ``use_multicore`` is a speed knob."""
    op = "ttnn.untilize"
    t = expect_tensor(op, "input_tensor", input_tensor, layouts=(Layout.TILE,))
    out_dtype = _untilized_dtype(t.dtype)
    _no_block_float_row_major(op, out_dtype, Layout.ROW_MAJOR)
    _memcfg_arg(op, "memory_config", memory_config)
    shards = (
        _passed_on(t, op)
        if out_dtype is t.dtype
        else _map(t, op, lambda s: cast_values(s, t.dtype, out_dtype))
    )
    return output_like(op, shards, t, dtype=out_dtype, layout=Layout.ROW_MAJOR, memory_config=memory_config)


# --- shape ops ----------------------------------------------------------------------------------------------


def _infer_shape(op: str, shape: list[int], volume: int) -> list[int]:
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise op_error(op, "shape", "at most one -1 (inferred) dimension", shape)
    for d in shape:
        if d < -1:
            raise op_error(op, "shape", "non-negative dims (or one -1)", shape)
    if unknown:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or volume % known:
            raise op_error(op, "shape", f"a shape whose -1 can be inferred from the volume {volume}", shape)
        shape = list(shape)
        shape[unknown[0]] = volume // known
    return shape


def _padded_array(shard: np.ndarray, padded: Sequence[int]) -> np.ndarray:
    """The shard with its implicit padding made explicit (zeros), as the device buffer holds it."""
    pad = [(0, p - s) for s, p in zip(shard.shape, padded)]
    return np.pad(shard, pad) if any(after for _, after in pad) else shard


@ttnn_op("ttnn.reshape")
def reshape(
    input_tensor: Tensor,
    shape,
    padded_shape=None,
    *,
    memory_config: MemoryConfig | None = None,
    pad_value=None,
    reshape_tile_mode=None,
    recreate_mapping_tensor: bool = False,
    sub_core_grids=None,
) -> Tensor:
    """Reshape each device shard to ``shape`` (one -1 may be inferred; the volume must match).

    ``padded_shape`` sets the tile padding explicitly, as ttnn's 3-argument form does: for a TILE tensor whose
    padded width is unchanged and whose padded height is a multiple of 32, the device buffer is reinterpreted
    (a view) with the new logical and padded shapes — e.g. ``[1, 1, 32, D]`` → logical ``[1, 1, 8, D]`` padded
    ``[1, 1, 32, D]``. The logical volume may then change (rows move into or out of the padding, which holds
    zeros); the padded volume must stay the same. ``pad_value`` / ``reshape_tile_mode`` only affect speed or
    the content of padding on hardware.
    """
    op = "ttnn.reshape"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    _memcfg_arg(op, "memory_config", memory_config)
    logical = _infer_shape(op, _int_list(op, "shape", shape), t.volume)
    padded = None if padded_shape is None else _int_list(op, "padded_shape", padded_shape)
    if t.device() is None:
        memory_config = None
    if padded is not None:
        if len(padded) != len(logical):
            raise op_error(op, "padded_shape", f"rank {len(logical)} like shape {logical}", padded)
        if any(p < s for p, s in zip(padded, logical)):
            raise op_error(op, "padded_shape", f"every dim >= the logical shape {logical}", padded)
        if t.layout is Layout.ROW_MAJOR and padded != logical:
            raise op_error(op, "padded_shape", f"{logical} (ROW_MAJOR tensors carry no padding)", padded)
    explicit = padded is not None
    if explicit and (padded == logical or padded == list(padded_shape_of(logical, t.layout))):
        padded = None  # the default padding: nothing custom to keep
    if logical == list(t.shape) and padded is None and t._padded_shape is None and memory_config is None:
        return t
    if math.prod(logical) != t.volume and not explicit:
        raise op_error(
            op,
            "shape",
            f"a shape with the volume {t.volume} of the input {list(t.shape)} (or a padded_shape for a TILE view)",
            f"{logical} (volume {math.prod(logical)})",
        )
    if padded is not None or math.prod(logical) != t.volume:
        return _reshape_view(op, t, logical, padded, memory_config)
    return _reshape(op, t, logical, memory_config)


def _reshape(op: str, t: Tensor, logical: list[int], memory_config=None, inserted=None) -> Tensor:
    """Reshape every shard; the shard dims of the topology follow the data (``inserted``: see unsqueeze)."""
    topology = _moved_topology(op, reshaped_topology, t, t.shape, logical, inserted=inserted)
    new_shape = tuple(logical)
    # the stored shards reshaped (a bfloat16 shard, or a block float one keeping its last dim, is the same bytes
    # under the new shape; another block float reshape re-blocks its values, as packing the reshaped ones would)
    shards = per_device(lambda s: s.reshape(new_shape), t.stored_shards(op))
    return output_like(op, shards, t, memory_config=memory_config, topology=topology)


def _reshape_view(op: str, t: Tensor, logical: list[int], padded: list[int] | None, memory_config) -> Tensor:
    """Reinterpret the padded device buffer with a new (logical, padded) shape pair."""
    cur_padded = list(t.padded_shape)
    padded = padded if padded is not None else list(padded_shape_of(logical, t.layout))
    ok = (
        t.layout is Layout.TILE
        and len(padded) >= 2
        and padded[-1] % TILE_SIZE == 0
        and padded[-2] % TILE_SIZE == 0
        and cur_padded
        and padded[-1] == cur_padded[-1]
    )
    if not ok:
        raise op_error(
            op,
            "shape",
            f"a shape with the volume {t.volume} of the input {list(t.shape)} (a volume-changing reshape needs a TILE "
            f"tensor and a padded_shape with the same padded width {cur_padded[-1] if cur_padded else '?'} and a "
            "tile-aligned padded height)",
            f"{logical} (volume {math.prod(logical)})"
            + ("" if padded is None else f", padded_shape {padded}"),
        )
    if math.prod(padded) != math.prod(cur_padded):
        raise op_error(
            op,
            "padded_shape",
            f"the padded volume {math.prod(cur_padded)} of the input (padded shape {cur_padded})",
            f"{padded} (volume {math.prod(padded)})",
        )
    index = tuple(builtins.slice(0, d) for d in logical)

    def view_shard(s: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(_padded_array(s, cur_padded).reshape(padded)[index])

    topology = _moved_topology(
        op, reshaped_topology, t, cur_padded, padded
    )  # the padded buffer is what is reinterpreted
    shards = _map(t, op, view_shard)
    out_padded = None if padded == list(padded_shape_of(logical, t.layout)) else padded
    return output_like(op, shards, t, memory_config=memory_config, padded_shape=out_padded, topology=topology)


@ttnn_op("ttnn.view")
def view(input_tensor: Tensor, shape) -> Tensor:
    """A zero-cost view with a new shape: the last dim must not change and, for TILE tensors, the second-last
    dim must not change unless neither it nor the new one has padding. The view shares the input's buffer."""
    op = "ttnn.view"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    logical = _infer_shape(op, _int_list(op, "shape", shape), t.volume)
    if math.prod(logical) != t.volume:
        raise op_error(
            op,
            "shape",
            f"volume {t.volume} (input {list(t.shape)})",
            f"{logical} (volume {math.prod(logical)})",
        )
    old = list(t.shape)
    if not logical or not old or logical[-1] != old[-1]:
        raise op_error(op, "shape", f"the same last dim as the input {old}", logical)
    if t.layout is Layout.TILE:
        h_old = old[-2] if len(old) >= 2 else 1
        h_new = logical[-2] if len(logical) >= 2 else 1
        if h_old != h_new and (h_old % TILE_SIZE or h_new % TILE_SIZE):
            raise op_error(
                op, "shape", f"an unchanged second-last dim {h_old} (TILE padding would move)", logical
            )
    new_shape = tuple(logical)
    topology = _moved_topology(op, reshaped_topology, t, old, logical)
    shards = _map(t, op, lambda s: s.reshape(new_shape))
    if t.device() is None:
        out = Tensor(shards, t.dtype, t.layout, None, None, topology, quantized=True, what=op)
    else:
        out = Tensor(
            shards,
            t.dtype,
            t.layout,
            t.device(),
            t.memory_config(),
            topology,
            quantized=True,
            view_of=t,
            what=op,
        )
    out._versions = t._versions  # the view aliases t's buffer: in-place writes to t show through it
    return out


@ttnn_op("ttnn.unsqueeze_to_4D")
def unsqueeze_to_4D(input_tensor: Tensor) -> Tensor:
    """Prepend size-1 dims up to rank 4 (a rank-4 tensor is returned unchanged; rank > 4 is an error)."""
    op = "ttnn.unsqueeze_to_4D"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    rank = len(t.shape)
    if rank > 4:
        raise op_error(op, "input_tensor rank", "at most 4", f"{rank} (shape {list(t.shape)})")
    if rank == 4:
        return t
    return _reshape(op, t, [1] * (4 - rank) + list(t.shape), inserted=(0, 4 - rank))


@ttnn_op("ttnn.squeeze")
def squeeze(input_tensor: Tensor, dim=None) -> Tensor:
    """Remove size-1 dims (all of them, or the given dim / dims); dims whose size is not 1 are kept (torch)."""
    op = "ttnn.squeeze"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    shape = list(t.shape)
    rank = len(shape)
    if dim is None:
        dims = [i for i, d in enumerate(shape) if d == 1]
    else:
        dims = [_dim(op, "dim", d, rank) for d in _int_list(op, "dim", dim)]
        dims = [d for d in dims if shape[d] == 1]
    new = [d for i, d in enumerate(shape) if i not in set(dims)]
    if not new:
        raise op_error(op, "dim", "to leave at least one dim (rank-0 tensors are not supported here)", dim)
    return reshape(t, new) if new != shape else t


@ttnn_op("ttnn.unsqueeze")
def unsqueeze(input_tensor: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (negative counts from the end of the output, as in torch)."""
    op = "ttnn.unsqueeze"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    shape = list(t.shape)
    d = _dim(op, "dim", dim, len(shape), extra=1)
    return _reshape(op, t, [*shape[:d], 1, *shape[d:]], inserted=(d, 1))


@ttnn_op("ttnn.permute")
def permute(
    input_tensor: Tensor,
    dims,
    *,
    memory_config: MemoryConfig | None = None,
    pad_value: float = 0.0,
    sub_core_grids=None,
) -> Tensor:
    """Reorder the dims of each device shard (``dims`` is a permutation; negative entries allowed)."""
    op = "ttnn.permute"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    _memcfg_arg(op, "memory_config", memory_config)
    rank = len(t.shape)
    order = [_dim(op, "dims", d, rank) for d in _int_list(op, "dims", dims)]
    if sorted(order) != list(range(rank)):
        raise op_error(op, "dims", f"a permutation of range({rank})", list(dims))
    if order == list(range(rank)) and memory_config is None:
        return t
    topology = _moved_topology(op, permuted_topology, t, t.shape, order)  # a shard dim moves with its data
    shards = _map(t, op, lambda s: np.ascontiguousarray(np.transpose(s, order)))
    return output_like(
        op,
        shards,
        t,
        memory_config=memory_config if t.device() is not None else None,
        topology=topology,
        shard_grid=_inherited_grid(t, memory_config),
    )


def _inherited_grid(t: Tensor, memory_config: MemoryConfig | None):
    """ttnn's transpose/permute give a sharded output asked for without a shard spec the input's shard grid when
    the input is sharded the same way (tt-metal's ``derive_effective_output_memory_config`` scales the input's
    shard to the output's shape): Falcon-40B's decode transposes its per-user key shards into per-user shards."""
    mine = t.memory_config()
    if (
        memory_config is None
        or not memory_config.is_sharded()
        or memory_config.shard_spec is not None
        or mine is None
        or mine.shard_spec is None
        or mine.memory_layout is not memory_config.memory_layout
    ):
        return None
    return mine.shard_spec.grid


@ttnn_op("ttnn.transpose")
def transpose(
    input_tensor: Tensor,
    dim1: int,
    dim2: int,
    *,
    memory_config: MemoryConfig | None = None,
    pad_value: float = 0.0,
) -> Tensor:
    """Swap two dims of each device shard."""
    op = "ttnn.transpose"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    rank = len(t.shape)
    a, b = _dim(op, "dim1", dim1, rank), _dim(op, "dim2", dim2, rank)
    order = list(range(rank))
    order[a], order[b] = order[b], order[a]
    with_memcfg = {"memory_config": memory_config} if memory_config is not None else {}
    return permute(t, order, **with_memcfg)


# --- slicing --------------------------------------------------------------------------------------------------


@ttnn_op("ttnn.slice")
def slice(
    input_tensor: Tensor,
    slice_start,
    slice_end,
    slice_step=None,
    *,
    memory_config: MemoryConfig | None = None,
    pad_value=None,
    output_tensor=None,
    sub_core_grids=None,
) -> Tensor:
    """``input[start:end:step]`` per dim on each device shard (one entry per dim; negative indices count from
    the end; ends are clamped to the dim). The result must not be empty."""
    op = "ttnn.slice"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    _memcfg_arg(op, "memory_config", memory_config)
    shape = list(t.shape)
    rank = len(shape)
    starts = _int_list(op, "slice_start", slice_start)
    ends = _int_list(op, "slice_end", slice_end)
    steps = [1] * rank if slice_step is None else _int_list(op, "slice_step", slice_step)
    for name, values in (("slice_start", starts), ("slice_end", ends), ("slice_step", steps)):
        if len(values) != rank:
            raise op_error(op, name, f"{rank} entries (one per dim of {shape})", values)
    index = []
    for axis, (s, e, st, size) in enumerate(zip(starts, ends, steps, shape)):
        if st < 1:
            raise op_error(op, "slice_step", "positive steps", steps)
        s = s + size if s < 0 else s
        e = e + size if e < 0 else e
        s, e = min(max(s, 0), size), min(max(e, 0), size)
        if s >= e:
            raise op_error(
                op,
                "slice_end",
                f"end > start in dim {axis} (size {size}); empty slices are not supported",
                f"start {starts[axis]}, end {ends[axis]}",
            )
        index.append(builtins.slice(s, e, st))
    if (
        all(ix.start == 0 and ix.stop == size and ix.step == 1 for ix, size in zip(index, shape))
        and memory_config is None
    ):
        return t
    idx = tuple(index)
    shards = _map(t, op, lambda a: np.ascontiguousarray(a[idx]))
    return output_like(op, shards, t, memory_config=memory_config if t.device() is not None else None)


def getitem(input_tensor: Tensor, index) -> Tensor:
    """``tensor[...]``: ints select (and drop) a dim, slices slice (steps allowed on device tensors), one ``...``
    expands; implemented with :func:`slice` and :func:`squeeze` like ttnn's ``Tensor.__getitem__``."""
    op = "ttnn.Tensor.__getitem__"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    shape = list(t.shape)
    rank = len(shape)
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise op_error(op, "index", "at most one Ellipsis", index)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        fill = rank - (len(items) - 1)
        if fill < 0:
            raise op_error(op, "index", f"at most {rank} indices for a rank-{rank} tensor", index)
        items = items[:at] + [builtins.slice(None)] * fill + items[at + 1 :]
    if len(items) > rank:
        raise op_error(op, "index", f"at most {rank} indices for a rank-{rank} tensor", index)
    items += [builtins.slice(None)] * (rank - len(items))
    starts, ends, steps, dropped = [], [], [], []
    for axis, item in enumerate(items):
        size = shape[axis]
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            i = int(item) + size if item < 0 else int(item)
            if not 0 <= i < size:
                raise op_error(op, "index", f"an index in [{-size}, {size - 1}] for dim {axis}", item)
            starts.append(i)
            ends.append(i + 1)
            steps.append(1)
            dropped.append(axis)
        elif isinstance(item, builtins.slice):
            starts.append(0 if item.start is None else item.start)
            ends.append(size if item.stop is None else item.stop)
            steps.append(1 if item.step is None else item.step)
        else:
            raise op_error(op, "index", "ints, slices or ...", repr(item))
    if t.device() is None and any(s != 1 for s in steps):
        raise op_error(op, "index", "unit steps on a host tensor", steps)
    out = slice(t, starts, ends, steps)
    if dropped:
        if len(dropped) == rank:
            raise op_error(op, "index", "at least one sliced dim (a scalar result is not supported)", index)
        keep = [d for i, d in enumerate(out.shape) if i not in set(dropped)]
        out = reshape(out, keep)
    return out


@ttnn_op("ttnn.split")
def split(
    input_tensor: Tensor, split_size, dim: int = 0, *, memory_config: MemoryConfig | None = None
) -> list[Tensor]:
    """Split along ``dim`` into pieces of ``split_size`` (int: equal pieces, last may be smaller; list: sizes)."""
    op = "ttnn.split"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    shape = list(t.shape)
    d = _dim(op, "dim", dim, len(shape))
    if isinstance(split_size, (list, tuple)):
        sizes = _int_list(op, "split_size", split_size)
        if sum(sizes) != shape[d] or any(s < 1 for s in sizes):
            raise op_error(op, "split_size", f"positive sizes summing to dim {d} ({shape[d]})", sizes)
    else:
        (size,) = _int_list(op, "split_size", split_size)
        if size < 1:
            raise op_error(op, "split_size", "a positive int", size)
        sizes = [min(size, shape[d] - s) for s in range(0, shape[d], size)]
    pieces, start = [], 0
    for size in sizes:
        starts = [0] * len(shape)
        ends = list(shape)
        starts[d], ends[d] = start, start + size
        pieces.append(slice(t, starts, ends, memory_config=memory_config))
        start += size
    return pieces


@ttnn_op("ttnn.chunk")
def chunk(input_tensor: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
    """Split into ``chunks`` pieces along ``dim`` (torch.chunk: ceil-sized pieces)."""
    op = "ttnn.chunk"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    (n,) = _int_list(op, "chunks", chunks)
    if n < 1:
        raise op_error(op, "chunks", "a positive int", n)
    d = _dim(op, "dim", dim, len(t.shape))
    return split(t, -(-t.shape[d] // n), d)


# --- combining and padding -------------------------------------------------------------------------------------


@ttnn_op("ttnn.concat")
def concat(
    tensors: Sequence[Tensor],
    dim: int = 0,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor=None,
    groups: int = 1,
    sub_core_grids=None,
) -> Tensor:
    """Concatenate per-device shards along ``dim``: ranks, dtypes, layouts and the other dims must match."""
    op = "ttnn.concat"
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise op_error(op, "tensors", "a non-empty list of ttnn.Tensor", repr(tensors))
    ts = [expect_tensor(op, f"tensors[{i}]", x, on_device=False) for i, x in enumerate(tensors)]
    same_mesh(op, **{f"tensors[{i}]": x for i, x in enumerate(ts)})
    _memcfg_arg(op, "memory_config", memory_config)
    first = ts[0]
    rank = len(first.shape)
    d = _dim(op, "dim", dim, rank)
    for i, x in enumerate(ts[1:], start=1):
        if len(x.shape) != rank:
            raise op_error(op, f"tensors[{i}]", f"rank {rank} like tensors[0]", f"rank {len(x.shape)}")
        if x.dtype is not first.dtype or x.layout is not first.layout:
            raise op_error(
                op,
                f"tensors[{i}]",
                f"{first.dtype.name} {first.layout.name} like tensors[0]",
                f"{x.dtype.name} {x.layout.name}",
            )
        if [s for j, s in enumerate(x.shape) if j != d] != [s for j, s in enumerate(first.shape) if j != d]:
            raise op_error(op, f"tensors[{i}]", f"shape {list(first.shape)} except in dim {d}", list(x.shape))
    if len(ts) == 1:
        return first
    n = len(first.shards(op))
    shards = [np.concatenate([x.shards(op)[k] for x in ts], axis=d) for k in range(n)]
    mem = memory_config if first.device() is not None else None
    return output_like(op, shards, first, memory_config=mem)


def _pad_pairs(op: str, padding, rank: int) -> list[tuple[int, int]]:
    if not isinstance(padding, (list, tuple)) or len(padding) > rank:
        raise op_error(op, "padding", f"a list of at most {rank} (before, after) pairs", repr(padding))
    pairs = []
    for p in padding:
        pair = _int_list(op, "padding", p)
        if len(pair) != 2 or min(pair) < 0:
            raise op_error(op, "padding", "(before, after) pairs of non-negative ints", repr(padding))
        pairs.append((pair[0], pair[1]))
    return [(0, 0)] * (rank - len(pairs)) + pairs


@ttnn_op("ttnn.pad")
def pad(
    input_tensor: Tensor,
    padding=None,
    value=0.0,
    *args,
    output_padded_shape=None,
    input_tensor_start=None,
    use_multicore: bool = True,
    memory_config: MemoryConfig | None = None,
    sub_core_grids=None,
) -> Tensor:
    """Pad each device shard with ``value``.

    Two forms, as in ttnn: ``pad(t, padding=[(before, after), ...], value=v)`` (pairs for the trailing dims),
    and ``pad(t, output_padded_shape, input_tensor_start, value)`` (place the input at ``input_tensor_start``
    of a tensor of shape ``output_padded_shape``). ``use_multicore`` only changes speed on hardware.
    """
    op = "ttnn.pad"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    _memcfg_arg(op, "memory_config", memory_config)
    shape = list(t.shape)
    rank = len(shape)
    shape_form = output_padded_shape is not None or (
        isinstance(padding, (list, tuple, Shape))
        and len(padding) > 0
        and isinstance(padding[0], (int, np.integer))
    )
    if shape_form:
        if output_padded_shape is None:  # positional: (t, output_padded_shape, input_tensor_start, value)
            output_padded_shape, input_tensor_start = padding, value
            value = args[0] if args else 0.0
        out_shape = _int_list(op, "output_padded_shape", output_padded_shape)
        start = _int_list(
            op, "input_tensor_start", input_tensor_start if input_tensor_start is not None else [0] * rank
        )
        if len(out_shape) != rank or len(start) != rank:
            raise op_error(
                op, "output_padded_shape", f"{rank} dims and {rank} start indices", f"{out_shape}, {start}"
            )
        if any(s < 0 or s + d > o for s, d, o in zip(start, shape, out_shape)):
            raise op_error(op, "output_padded_shape", f"room for the input {shape} at {start}", out_shape)
        pairs = [(s, o - s - d) for s, d, o in zip(start, shape, out_shape)]
    else:
        if padding is None:
            raise op_error(op, "padding", "a list of (before, after) pairs or an output_padded_shape", None)
        pairs = _pad_pairs(op, padding, rank)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise op_error(op, "value", "a number", repr(value))
    if not any(a or b for a, b in pairs):
        return t
    fill = np.asarray(value).astype(t.dtype.numpy_dtype)
    shards = _map(t, op, lambda s: np.pad(s, pairs, constant_values=fill))
    return output_like(op, shards, t, memory_config=memory_config if t.device() is not None else None)


@ttnn_op("ttnn.repeat")
def repeat(input_tensor: Tensor, repeat_dims, *, memory_config: MemoryConfig | None = None) -> Tensor:
    """Tile each device shard ``repeat_dims[i]`` times along dim i (torch ``Tensor.repeat``)."""
    op = "ttnn.repeat"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    reps = _int_list(op, "repeat_dims", repeat_dims)
    rank = len(t.shape)
    if len(reps) < rank or any(r < 1 for r in reps):
        raise op_error(op, "repeat_dims", f"at least {rank} positive ints", reps)
    shape = [1] * (len(reps) - rank) + list(t.shape)
    shards = _map(t, op, lambda s: np.tile(s.reshape(shape), reps))
    return output_like(op, shards, t, memory_config=memory_config if t.device() is not None else None)


@ttnn_op("ttnn.repeat_interleave")
def repeat_interleave(
    input_tensor: Tensor, repeats: int, dim: int, *, memory_config: MemoryConfig | None = None
) -> Tensor:
    """Repeat each element ``repeats`` times along ``dim`` (torch ``repeat_interleave`` with an int)."""
    op = "ttnn.repeat_interleave"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    (n,) = _int_list(op, "repeats", repeats)
    if n < 1:
        raise op_error(op, "repeats", "a positive int", n)
    d = _dim(op, "dim", dim, len(t.shape))
    shards = _map(t, op, lambda s: np.repeat(s, n, axis=d))
    return output_like(op, shards, t, memory_config=memory_config if t.device() is not None else None)


# --- dtype and memory ----------------------------------------------------------------------------------------


@ttnn_op("ttnn.typecast")
def typecast(
    input_tensor: Tensor,
    dtype: DataType,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor=None,
    sub_core_grids=None,
) -> Tensor:
    """Convert to ``dtype`` (see :func:`cast_values` for rounding and saturation of integer results)."""
    op = "ttnn.typecast"
    t = expect_tensor(op, "input_tensor", input_tensor)
    out_dtype = _dtype_arg(op, "dtype", dtype)
    _memcfg_arg(op, "memory_config", memory_config)
    _no_block_float_row_major(op, out_dtype, t.layout)
    shards = _map(t, op, lambda s: cast_values(s, t.dtype, out_dtype))
    return output_like(op, shards, t, dtype=out_dtype, memory_config=memory_config)


@ttnn_op("ttnn.experimental.typecast")
def experimental_typecast(
    input_tensor: Tensor,
    dtype: DataType,
    memory_config: MemoryConfig | None = None,
    optional_output_tensor: Tensor | None = None,
    queue_id: int = 0,
) -> Tensor:
    """The copy-kernel typecast of older models (``ttnn.experimental.typecast``): the same values as
    :func:`typecast`, in ``memory_config`` (default the input's). ``optional_output_tensor``, of the input's
    shape and mesh and of ``dtype``, is filled and returned (hardware writes into it)."""
    op = "ttnn.experimental.typecast"
    t = expect_tensor(op, "input_tensor", input_tensor)
    out_dtype = _dtype_arg(op, "dtype", dtype)
    if optional_output_tensor is None:
        return typecast(t, out_dtype, memory_config=memory_config)
    out = expect_tensor(op, "optional_output_tensor", optional_output_tensor)
    same_mesh(op, input_tensor=t, optional_output_tensor=out)
    expect(
        out.dtype is out_dtype,
        op,
        "optional_output_tensor.dtype",
        f"{out_dtype.name} (the dtype argument)",
        out.dtype.name,
    )
    expect(
        tuple(out.shape) == tuple(t.shape), op, "optional_output_tensor.shape", list(t.shape), list(out.shape)
    )
    cast = typecast(t, out_dtype, memory_config=memory_config)
    for i, shard in enumerate(cast.shards(op)):
        out._writable_shard(i, op)[...] = shard
    return out


@ttnn_op("ttnn.to_memory_config")
def to_memory_config(
    tensor: Tensor,
    memory_config: MemoryConfig,
    dtype: DataType | None = None,
    *,
    output_tensor=None,
) -> Tensor:
    """Move a device tensor to another memory config (DRAM/L1, interleaved/sharded), optionally casting.

    A sharded config without a shard spec gets one chosen for the shape; an explicit spec must tile the
    tensor, or the move fails as on hardware.
    """
    op = "ttnn.to_memory_config"
    t = expect_tensor(op, "tensor", tensor)
    if not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    out_dtype = t.dtype if dtype is None else _dtype_arg(op, "dtype", dtype)
    _no_block_float_row_major(op, out_dtype, t.layout)
    if memory_config == t.memory_config() and out_dtype is t.dtype:
        return t
    shards = (
        _map(t, op, lambda s: cast_values(s, t.dtype, out_dtype))
        if out_dtype is not t.dtype
        else _passed_on(t, op)
    )
    return output_like(op, shards, t, dtype=out_dtype, memory_config=memory_config)


_STRATEGY_LAYOUT = {
    ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
    ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
    ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED,
}


@ttnn_op("ttnn.interleaved_to_sharded")
def interleaved_to_sharded(
    input_tensor: Tensor,
    sharded_memory_config,
    shard_shape=None,
    shard_scheme=None,
    shard_orientation=None,
    output_dtype: DataType | None = None,
    *,
    keep_l1_aligned: bool = False,
    dtype: DataType | None = None,
) -> Tensor:
    """Interleaved → sharded (L1). Either ``(t, sharded_memory_config[, output_dtype])`` or
    ``(t, grid, shard_shape, shard_scheme, shard_orientation[, output_dtype])`` as in ttnn."""
    op = "ttnn.interleaved_to_sharded"
    t = expect_tensor(op, "input_tensor", input_tensor)
    if t.is_sharded():
        raise op_error(
            op,
            "input_tensor",
            "an interleaved tensor (use ttnn.reshard for sharded inputs)",
            t.memory_config().memory_layout.name,
        )
    if isinstance(sharded_memory_config, MemoryConfig):
        if isinstance(shard_shape, DataType) and output_dtype is None:
            output_dtype = shard_shape  # positional (t, memcfg, dtype)
        memcfg = sharded_memory_config
    elif isinstance(sharded_memory_config, (CoreGrid, CoreRangeSet, CoreRange)):
        if shard_shape is None or not isinstance(shard_scheme, (TensorMemoryLayout, ShardStrategy)):
            raise op_error(
                op,
                "shard_scheme",
                "shard_shape and a TensorMemoryLayout / ShardStrategy with a grid",
                repr(shard_scheme),
            )
        kind = _STRATEGY_LAYOUT.get(shard_scheme, shard_scheme)
        orientation = shard_orientation or ShardOrientation.ROW_MAJOR
        memcfg = MemoryConfig(
            kind, BufferType.L1, ShardSpec(sharded_memory_config, tuple(shard_shape), orientation)
        )
    else:
        raise op_error(
            op,
            "sharded_memory_config",
            "a sharded ttnn.MemoryConfig or a core grid",
            repr(sharded_memory_config),
        )
    if not memcfg.is_sharded():
        raise op_error(op, "sharded_memory_config", "a sharded memory config", memcfg.memory_layout.name)
    return to_memory_config(t, memcfg, output_dtype if output_dtype is not None else dtype)


@ttnn_op("ttnn.sharded_to_interleaved")
def sharded_to_interleaved(
    input_tensor: Tensor,
    memory_config: MemoryConfig = DRAM_MEMORY_CONFIG,
    output_dtype: DataType | None = None,
    *,
    is_l1_aligned: bool = False,
    dtype: DataType | None = None,
) -> Tensor:
    """Sharded → interleaved (DRAM by default). ``dtype`` is accepted as an alias of ``output_dtype``. An input
    that is not sharded is returned as it is (ttnn's op does so before any other check: tt-metal's Galaxy LM head
    and Gemma-3 vision RMSNorm call it on DRAM-interleaved tensors)."""
    op = "ttnn.sharded_to_interleaved"
    t = expect_tensor(op, "input_tensor", input_tensor)
    if not t.is_sharded():
        return t
    memory_config = DRAM_MEMORY_CONFIG if memory_config is None else memory_config
    if not isinstance(memory_config, MemoryConfig) or memory_config.is_sharded():
        raise op_error(op, "memory_config", "an interleaved ttnn.MemoryConfig", repr(memory_config))
    return to_memory_config(t, memory_config, output_dtype if output_dtype is not None else dtype)


@ttnn_op("ttnn.reshard")
def reshard(input_tensor: Tensor, output_memory_config: MemoryConfig, output_tensor=None) -> Tensor:
    """Sharded → differently sharded."""
    op = "ttnn.reshard"
    t = expect_tensor(op, "input_tensor", input_tensor)
    if not t.is_sharded():
        raise op_error(op, "input_tensor", "a sharded tensor", t.memory_config().memory_layout.name)
    if not isinstance(output_memory_config, MemoryConfig) or not output_memory_config.is_sharded():
        raise op_error(op, "output_memory_config", "a sharded ttnn.MemoryConfig", repr(output_memory_config))
    return to_memory_config(t, output_memory_config)


@ttnn_op("ttnn.clone")
def clone(
    input_tensor: Tensor,
    dtype: DataType | None = None,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
) -> Tensor:
    """A new tensor with the same values (optionally another dtype / memory config)."""
    op = "ttnn.clone"
    t = expect_tensor(op, "input_tensor", input_tensor, on_device=False)
    out_dtype = t.dtype if dtype is None else _dtype_arg(op, "dtype", dtype)
    _memcfg_arg(op, "memory_config", memory_config)
    _no_block_float_row_major(op, out_dtype, t.layout)
    shards = (
        _map(t, op, lambda s: cast_values(s, t.dtype, out_dtype))
        if out_dtype is not t.dtype
        else _passed_on(t, op)
    )
    return output_like(
        op,
        shards,
        t,
        dtype=out_dtype,
        memory_config=memory_config if t.device() is not None else None,
        padded_shape=t._padded_shape,
    )


@ttnn_op("ttnn.deallocate")
def deallocate(tensor: Tensor, force: bool = True) -> None:
    """Free the tensor's device memory now; any later use of it raises."""
    if not isinstance(tensor, Tensor):
        raise op_error("ttnn.deallocate", "tensor", "a ttnn.Tensor", type(tensor).__name__)
    tensor.deallocate(force)


@ttnn_op("ttnn.plus_one")
def plus_one(input_tensor: Tensor, sub_core_grids=None, skip_negative_entries: bool = False) -> Tensor:
    """Add 1 in place to an INT32/UINT32 ROW_MAJOR tensor of rank 1–4 (position counters) and return it.

    Arithmetic is 32-bit with wrap-around; with ``skip_negative_entries`` only entries in [0, INT32_MAX) (read
    as int32) are incremented, so negative "inactive slot" markers stay put.
    """
    op = "ttnn.plus_one"
    t = expect_tensor(
        op,
        "input_tensor",
        input_tensor,
        dtypes=(DataType.INT32, DataType.UINT32),
        layouts=(Layout.ROW_MAJOR,),
        rank=(1, 2, 3, 4),
    )
    for i in range(len(t.shards(op))):
        shard = t._writable_shard(i, op)
        as_int = shard.view(np.int32)
        if skip_negative_entries:
            mask = (as_int >= 0) & (as_int < np.iinfo(np.int32).max)
            as_int[mask] += 1
        else:
            shard.view(np.uint32)[...] += np.uint32(1)
    return t


@ttnn_op("ttnn.copy_host_to_device_tensor")
def copy_host_to_device_tensor(
    host_tensor: Tensor, device_tensor: Tensor, cq_id: int = 0, region=None
) -> None:
    """Write a host tensor's values into an existing device tensor in place (same shape, dtype and layout);
    a single host buffer is written to every device, a multi-device host tensor shard by shard."""
    op = "ttnn.copy_host_to_device_tensor"
    src = expect_tensor(op, "host_tensor", host_tensor, on_device=False)
    dst = expect_tensor(op, "device_tensor", device_tensor)
    if src.device() is not None:
        raise op_error(op, "host_tensor", "a host tensor", f"a tensor on {src.device()}")
    if src.shape != dst.shape or src.dtype is not dst.dtype or src.layout is not dst.layout:
        raise op_error(
            op,
            "host_tensor",
            f"{list(dst.shape)} {dst.dtype.name} {dst.layout.name} like device_tensor",
            f"{list(src.shape)} {src.dtype.name} {src.layout.name}",
        )
    src_shards = src.shards(op)
    n = len(dst.shards(op))
    if len(src_shards) not in (1, n):
        raise op_error(op, "host_tensor", f"1 or {n} host buffers", len(src_shards))
    for i in range(n):
        dst._writable_shard(i, op)[...] = src_shards[0 if len(src_shards) == 1 else i]
