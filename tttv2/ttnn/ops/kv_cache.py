"""KV-cache writes: ``fill_cache`` / ``update_cache`` and the paged ``ttnn.experimental`` forms.

All of these update the cache tensor IN PLACE on every device (through ``Tensor._writable_shard``) and return
it, as ttnn does. Layouts (per device):

* contiguous cache ``[B, nkv, max_seq, hd]``; paged cache ``[num_blocks, nkv, block_size, hd]`` addressed through
  a page table ``[B, max_blocks_per_seq]`` (int32): position p of user b lives in block
  ``page_table[b, p // block_size]`` at row ``p % block_size``;
* prefill inputs ``[1, nkv, S, hd]``: hardware copies whole 32-row tiles, so the tile padding rows after S are
  written as zeros;
* decode inputs ``[1, B, nkv(→32), hd]`` height-sharded one user per core, one position per user; a position
  of −1 skips that user.

Written rows are quantised to the cache dtype (bfloat8_b blocks run along head_dim, so a row quantises alone).
Positions, batch indices and page-table entries are checked before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..errors import op_error
from ..memory import MemoryConfig
from ..numerics import quantize
from ..program_configs import WormholeComputeKernelConfig
from ..tensor import Tensor
from ..types import TILE_SIZE, BufferType, DataType, Layout, ShardOrientation, TensorMemoryLayout
from ._common import check_compute_config, expect, expect_tensor, same_mesh, ttnn_op

__all__: list[str] = ["fill_cache", "fill_cache_for_user_", "update_cache", "update_cache_for_token_"]
__experimental__: list[str] = ["paged_fill_cache", "paged_fused_update_cache", "paged_update_cache"]
__transformer__: list[str] = []

_CACHE3 = (DataType.FLOAT32, DataType.BFLOAT16, DataType.BFLOAT8_B)
_CACHE4 = (*_CACHE3, DataType.BFLOAT4_B)
_F32_BF16 = (DataType.FLOAT32, DataType.BFLOAT16)
_INTERLEAVED = TensorMemoryLayout.INTERLEAVED
_SKIP = -1


# --- shared helpers (also used by sdpa) ---------------------------------------------------------------------


def _index(op: str, arg: str, value, upper: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0
    expect(ok, op, arg, "a non-negative int", repr(value))
    if upper is not None:
        expect(value < upper, op, arg, f"< {upper}", value)
    return int(value)


def _mem(t: Tensor) -> MemoryConfig:
    return t.memory_config()


def _check_sharded_rows(op: str, arg: str, x: Tensor) -> None:
    """A sharded decode/prefill input must be height-style sharded with whole rows per shard."""
    kind = _mem(x).memory_layout
    expect(
        kind is not TensorMemoryLayout.WIDTH_SHARDED,
        op,
        f"{arg} memory layout",
        "HEIGHT or BLOCK sharded",
        kind.name,
    )
    spec = x.shard_spec()
    expect(
        spec.shape[1] == x.padded_shape[-1],
        op,
        f"{arg} shard width",
        f"the padded width {x.padded_shape[-1]}",
        spec.shape[1],
    )


def _page_table(op: str, arg: str, value, *, users: int, sharded_ok: bool) -> Tensor:
    """Validate a page table ``[B, max_blocks]``: int32 ROW_MAJOR interleaved (or uint16 L1-sharded if allowed)."""
    pt = expect_tensor(
        op, arg, value, dtypes=(DataType.INT32, DataType.UINT16), layouts=(Layout.ROW_MAJOR,), rank=2
    )
    if pt.is_sharded():
        expect(sharded_ok, op, f"{arg} memory layout", "INTERLEAVED", _mem(pt).memory_layout.name)
        expect(
            pt.dtype is DataType.UINT16, op, f"{arg}.dtype", "UINT16 for a sharded page table", pt.dtype.name
        )
        cores = pt.shard_spec().num_cores()
        expect(
            pt.shape[0] == cores * users,
            op,
            f"{arg}.shape[0]",
            f"{users} users on each of its {cores} cores",
            pt.shape[0],
        )
    else:
        expect(pt.dtype is DataType.INT32, op, f"{arg}.dtype", "INT32", pt.dtype.name)
        expect(pt.shape[0] == users, op, f"{arg}.shape[0]", f"the batch ({users})", pt.shape[0])
    return pt


def _page_rows(pt: Tensor, index: int, users: int) -> np.ndarray:
    """The page table of one device as int64 ``[users, max_blocks]`` (a sharded table: the first core's copy)."""
    return pt.shards()[index][:users].astype(np.int64)


def _physical_block(
    op: str, arg: str, rows: np.ndarray, user: int, vblock: int, num_blocks: int, skip_ok: bool = False
) -> int:
    expect(
        vblock < rows.shape[1],
        op,
        arg,
        f"a virtual block < its {rows.shape[1]} columns for user {user}",
        vblock,
    )
    entry = int(rows[user, vblock])
    if skip_ok and entry == _SKIP:
        return _SKIP
    expect(
        0 <= entry < num_blocks,
        op,
        f"{arg}[{user}, {vblock}]",
        f"a physical block in [0, {num_blocks})" + (" or -1 (skip)" if skip_ok else ""),
        entry,
    )
    return entry


def _devices(op: str, cache: Tensor, mesh_coords) -> list[int]:
    """Indices of the devices an op runs on: all, or those named by ``mesh_coords`` (MeshCoordinate or (r, c))."""
    n = len(cache.shards(op))
    if mesh_coords is None:
        return list(range(n))
    rows, cols = cache.device().shape.as_2d()
    out = []
    for coord in mesh_coords:
        r, c = tuple(coord)
        expect(
            0 <= r < rows and 0 <= c < cols,
            op,
            "mesh_coords",
            f"coordinates inside the {rows}x{cols} mesh",
            (r, c),
        )
        out.append(r * cols + c)
    return sorted(set(out))


def _input_devices(op: str, cache: Tensor, x: Tensor) -> list[int]:
    """For each shard of the input, the index of the cache device it belongs to.

    Both on one mesh: shard i is device i. An input on a view made of some of the cache's devices (what
    ``ttnn.combine_device_tensors`` gives for part of a mesh, e.g. one Galaxy column) covers only those; ttnn
    runs an op on the smallest coordinate set of its inputs, so only their caches are written."""
    mesh, where = cache.device(), x.device()
    if where is mesh:
        return list(range(len(x.shards(op))))
    if where is not None and mesh is not None and where._parent is mesh:
        devices = mesh.get_devices()
        return [devices.index(d) for d in where.get_devices()]
    raise op_error(
        op, "input_tensor", f"a tensor on the cache's mesh {mesh} or on some of its devices", where
    )


def _int_list(op: str, arg: str, values: Iterable) -> list[int]:
    out = list(values)
    for v in out:
        _index(op, arg, v)
    return [int(v) for v in out]


def _update_positions(op: str, x: Tensor, update_idxs, update_idxs_tensor) -> list[np.ndarray]:
    """Per-device positions [B] (int64) from ``update_idxs`` (list) or ``update_idxs_tensor`` (int32 [B])."""
    listed = _int_list(op, "update_idxs", update_idxs if update_idxs is not None else [])
    has_tensor = update_idxs_tensor is not None
    expect(
        has_tensor != bool(listed),
        op,
        "update_idxs/update_idxs_tensor",
        "exactly one of them",
        "both" if has_tensor else "neither",
    )
    users = x.shape[1]
    if not has_tensor:
        expect(len(listed) == users, op, "update_idxs", f"one position per user ({users})", len(listed))
        return [np.asarray(listed, dtype=np.int64)] * len(x.shards(op))
    t = expect_tensor(
        op, "update_idxs_tensor", update_idxs_tensor, dtypes=(DataType.INT32,), layouts=(Layout.ROW_MAJOR,)
    )
    same_mesh(op, input_tensor=x, update_idxs_tensor=t)
    if t.is_sharded():
        expect(
            _mem(t).memory_layout is TensorMemoryLayout.HEIGHT_SHARDED,
            op,
            "update_idxs_tensor memory layout",
            "HEIGHT_SHARDED",
            _mem(t).memory_layout.name,
        )
        expect(
            _mem(t).buffer_type is BufferType.L1,
            op,
            "update_idxs_tensor buffer",
            "L1 when sharded",
            _mem(t).buffer_type.name,
        )
        expect(
            len(t.shape) == 2 and t.shape[1] == users,
            op,
            "update_idxs_tensor shape",
            f"[cores, {users}]",
            list(t.shape),
        )
        # user b runs on core b and reads its own shard's copy
        return [s[np.arange(users) % s.shape[0], np.arange(users)].astype(np.int64) for s in t.shards(op)]
    expect(
        _mem(t).buffer_type is BufferType.DRAM,
        op,
        "update_idxs_tensor buffer",
        "DRAM when interleaved",
        _mem(t).buffer_type.name,
    )
    expect(
        len(t.shape) == 1 and t.shape[0] == users, op, "update_idxs_tensor shape", f"[{users}]", list(t.shape)
    )
    return [s.astype(np.int64) for s in t.shards(op)]


def _check_position(op: str, arg: str, user: int, pos: int, capacity: int | None) -> bool:
    """True to write, False to skip (−1); raises for anything else out of range (``capacity`` None: no bound)."""
    if pos == _SKIP:
        return False
    if capacity is None:
        expect(pos >= 0, op, f"{arg}[{user}]", "-1 (skip) or a non-negative position", pos)
    else:
        expect(0 <= pos < capacity, op, f"{arg}[{user}]", f"-1 (skip) or a position in [0, {capacity})", pos)
    return True


# --- fill_cache / update_cache ---------------------------------------------------------------------------


def _check_cache_pair(op: str, cache_tensor, input_tensor, input_dtypes) -> tuple[Tensor, Tensor]:
    cache = expect_tensor(op, "cache_tensor", cache_tensor, dtypes=_CACHE3, layouts=(Layout.TILE,), rank=4)
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=input_dtypes, layouts=(Layout.TILE,), rank=4)
    _input_devices(op, cache, x)
    expect(
        x.shape[-1] == cache.shape[-1],
        op,
        "input_tensor.shape[-1]",
        f"the cache head_dim {cache.shape[-1]}",
        x.shape[-1],
    )
    expect(x.shape[0] == 1, op, "input_tensor.shape[0]", "1", x.shape[0])
    expect(
        x.shape[1] == cache.shape[1],
        op,
        "input_tensor.shape[1]",
        f"the cache's {cache.shape[1]} kv heads",
        x.shape[1],
    )
    expect(
        _mem(cache).memory_layout is _INTERLEAVED,
        op,
        "cache_tensor memory layout",
        "INTERLEAVED",
        _mem(cache).memory_layout.name,
    )
    if x.is_sharded():
        _check_sharded_rows(op, "input_tensor", x)
    return cache, x


@ttnn_op("ttnn.fill_cache")
def fill_cache(cache_tensor: Tensor, input_tensor: Tensor, batch_idx: int) -> Tensor:
    """Prefill user ``batch_idx``: ``cache[batch_idx, :, :S] = input[0]`` for cache ``[B, nkv, max_seq, hd]``.

    The input ``[1, nkv, S, hd]`` must have the cache's dtype; its tile padding rows (S up to a multiple of 32)
    are written as zeros. Returns the (updated) cache.
    """
    op = "ttnn.fill_cache"
    cache, x = _check_cache_pair(op, cache_tensor, input_tensor, _CACHE3)
    expect(
        x.dtype == cache.dtype, op, "input_tensor.dtype", f"the cache dtype {cache.dtype.name}", x.dtype.name
    )
    b = _index(op, "batch_idx", batch_idx, cache.shape[0])
    expect(
        x.padded_shape[-2] <= cache.padded_shape[-2],
        op,
        "input_tensor.shape[-2]",
        f"<= the cache length {cache.shape[-2]}",
        x.shape[-2],
    )
    rows = min(x.padded_shape[-2], cache.shape[-2])
    remote = cache.device().remote_indices()  # other ranks' devices write their own caches
    for i, xs in zip(_input_devices(op, cache, x), x.shards(op)):
        if i in remote:
            continue
        block = np.zeros((xs.shape[1], rows, xs.shape[-1]), dtype=np.float32)
        block[:, : xs.shape[2]] = xs[0]
        cache._writable_shard(i, op)[b, :, :rows, :] = quantize(block, cache.dtype)
    return cache


@ttnn_op("ttnn.fill_cache_for_user_")
def fill_cache_for_user_(cache: Tensor, input: Tensor, batch_index: int) -> Tensor:
    """Older name of :func:`fill_cache`."""
    return fill_cache(cache, input, batch_index)


@ttnn_op("ttnn.update_cache")
def update_cache(
    cache: Tensor,
    input: Tensor,
    update_idx: int,
    *,
    batch_offset: int = 0,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """Decode write of one position for every user: ``cache[b, :, update_idx] = input[0, :, batch_offset + b]``.

    cache ``[B, nkv, max_seq, hd]``, input ``[1, nkv, B(→32), hd]``; with B < 32 users the input rows
    ``[batch_offset, batch_offset + B)`` are used. The input may have another float dtype than the cache.
    """
    op = "ttnn.update_cache"
    cache, x = _check_cache_pair(op, cache, input, _CACHE3)
    check_compute_config(op, compute_kernel_config)
    if not x.is_sharded():
        expect(
            _mem(x).memory_layout is _INTERLEAVED,
            op,
            "input memory layout",
            "INTERLEAVED or sharded",
            _mem(x).memory_layout.name,
        )
    users = cache.shape[0]
    expect(
        users <= x.padded_shape[-2],
        op,
        "cache batch",
        f"<= the input's {x.padded_shape[-2]} padded rows",
        users,
    )
    offset = _index(op, "batch_offset", batch_offset)
    if users < 32:
        expect(
            offset + users <= 32, op, "batch_offset", f"<= {32 - users} (batch_offset + batch <= 32)", offset
        )
    else:
        expect(offset == 0, op, "batch_offset", "0 when the cache batch is >= 32", offset)
    pos = _index(op, "update_idx", update_idx, cache.shape[2])
    for i, xs in zip(_input_devices(op, cache, x), x.shards(op)):
        rows = np.zeros((xs.shape[1], users, xs.shape[-1]), dtype=np.float32)
        avail = xs[0, :, offset : offset + users]
        rows[:, : avail.shape[1]] = avail
        cache._writable_shard(i, op)[:, :, pos, :] = quantize(rows.transpose(1, 0, 2), cache.dtype)
    return cache


@ttnn_op("ttnn.update_cache_for_token_")
def update_cache_for_token_(
    cache: Tensor,
    input: Tensor,
    update_index: int,
    batch_offset: int = 0,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """Older name of :func:`update_cache`."""
    return update_cache(
        cache, input, update_index, batch_offset=batch_offset, compute_kernel_config=compute_kernel_config
    )


# --- paged ops -----------------------------------------------------------------------------------------------


def _check_decode_input(op: str, arg: str, x: Tensor) -> None:
    expect(x.shape[0] == 1, op, f"{arg}.shape[0]", "1", x.shape[0])
    expect(
        x.is_sharded(), op, f"{arg} memory layout", "sharded (one user per core)", _mem(x).memory_layout.name
    )
    _check_sharded_rows(op, arg, x)
    spec = x.shard_spec()
    expect(
        spec.orientation is ShardOrientation.ROW_MAJOR,
        op,
        f"{arg} shard orientation",
        "ROW_MAJOR",
        spec.orientation.name,
    )
    expect(
        spec.num_cores() == x.shape[1],
        op,
        f"{arg} shard cores",
        f"one per user ({x.shape[1]})",
        spec.num_cores(),
    )


def _paged_update_one(
    op: str,
    pair: int,
    cache: Tensor,
    x: Tensor,
    positions: list[np.ndarray],
    page_table: Tensor | None,
    share_cache: bool,
    devices: list[int],
    modulo: int | None,
) -> None:
    """Validate every position of one (cache, input) pair, then write; ``pair`` numbers the fused inputs."""
    suffix = "" if pair == 0 else str(pair)
    users, nkv = x.shape[1], cache.shape[1]
    expect(
        x.shape[2] >= nkv, op, f"input_tensor{suffix}.shape[2]", f">= the cache's {nkv} kv heads", x.shape[2]
    )
    block = cache.shape[2]
    if page_table is None:
        capacity: int | None = block
    else:
        capacity = None if modulo is not None else page_table.shape[1] * block
    plan = []
    for d in devices:
        rows = None if page_table is None else _page_rows(page_table, d, users)
        for b in range(users):
            pos = int(positions[d][b])
            if not _check_position(op, "update_idxs", b, pos, capacity):
                continue
            if rows is None:
                plan.append((d, 0 if share_cache else b, pos, b))
            else:
                pos = pos % modulo if modulo is not None else pos
                phys = _physical_block(op, "page_table", rows, b, pos // block, cache.shape[0])
                plan.append((d, phys, pos % block, b))
    for d, where, row, b in plan:
        src = x.shards(op)[d][0, b, :nkv, :]
        cache._writable_shard(d, op)[where, :, row, :] = quantize(src, cache.dtype)


def _check_paged_update_args(op, cache, x, suffix, page_table, share_cache, batch_offset):
    expect(
        x.shape[-1] == cache.shape[-1],
        op,
        f"input_tensor{suffix}.shape[-1]",
        f"the cache head_dim {cache.shape[-1]}",
        x.shape[-1],
    )
    expect(
        x.padded_shape[-1] % TILE_SIZE == 0,
        op,
        f"input_tensor{suffix}.shape[-1]",
        "a multiple of 32",
        x.shape[-1],
    )
    expect(
        _mem(cache).memory_layout is _INTERLEAVED,
        op,
        f"cache_tensor{suffix} memory layout",
        "INTERLEAVED",
        _mem(cache).memory_layout.name,
    )
    _check_decode_input(op, f"input_tensor{suffix}", x)
    if page_table is None:
        if share_cache:
            expect(
                cache.shape[0] == 1,
                op,
                f"cache_tensor{suffix}.shape[0]",
                "1 with share_cache",
                cache.shape[0],
            )
        else:
            expect(
                x.shape[1] == cache.shape[0],
                op,
                f"input_tensor{suffix}.shape[1]",
                f"the cache batch {cache.shape[0]}",
                x.shape[1],
            )
    else:
        expect(not share_cache, op, "share_cache", "False with a paged cache", share_cache)
        expect(
            cache.shape[2] % TILE_SIZE == 0,
            op,
            f"cache_tensor{suffix} block_size",
            "a multiple of 32",
            cache.shape[2],
        )
        expect(
            page_table.shape[1] <= cache.shape[0],
            op,
            "page_table.shape[1]",
            f"<= the cache's {cache.shape[0]} blocks (max_num_blocks_per_seq <= max_num_blocks)",
            page_table.shape[1],
        )
    expect(batch_offset == 0, op, "batch_offset", "0", batch_offset)


@ttnn_op("ttnn.experimental.paged_update_cache")
def paged_update_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    *,
    update_idxs: list[int] | None = None,
    update_idxs_tensor: Tensor | None = None,
    share_cache: bool | None = None,
    page_table: Tensor | None = None,
    batch_offset: int = 0,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    mesh_coords=None,
    block_size: int | None = None,
    num_kv_heads: int | None = None,
    cache_position_modulo: int | None = None,
) -> Tensor:
    """Decode write: for each user b, its kv heads ``input[0, b, :nkv]`` go to position ``update_idxs[b]``.

    Non-paged cache ``[B, nkv, max_seq, hd]`` (``share_cache``: one ``[1, ...]`` cache for all users) or, with
    ``page_table``, a paged cache (positions need ``update_idxs_tensor``). The input ``[1, B, nkv(→32), hd]`` is
    float32/bfloat16 and sharded one user per core; a position of −1 skips the user. ``mesh_coords`` restricts
    the write to those devices; ``cache_position_modulo`` wraps positions (paged only); ``block_size`` and
    ``num_kv_heads`` view overrides are accepted only when they match the cache.
    """
    op = "ttnn.experimental.paged_update_cache"
    cache = expect_tensor(op, "cache_tensor", cache_tensor, dtypes=_CACHE4, layouts=(Layout.TILE,), rank=4)
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=_F32_BF16, layouts=(Layout.TILE,), rank=4)
    same_mesh(op, cache_tensor=cache, input_tensor=x)
    check_compute_config(op, compute_kernel_config)
    share = bool(share_cache)
    pt = None
    if page_table is not None:
        pt = _page_table(op, "page_table", page_table, users=x.shape[1], sharded_ok=True)
        same_mesh(op, input_tensor=x, page_table=pt)
        expect(update_idxs_tensor is not None, op, "update_idxs_tensor", "a tensor with a paged cache", None)
    for name, value, cache_value in (
        ("block_size", block_size, cache.shape[2]),
        ("num_kv_heads", num_kv_heads, cache.shape[1]),
    ):
        if value is not None:
            expect(pt is not None, op, name, "None without a page_table (paged mode only)", value)
            expect(
                value == cache_value,
                op,
                name,
                f"the cache's own {cache_value} (other views are not emulated)",
                value,
            )
    modulo = None
    if cache_position_modulo is not None:
        expect(
            pt is not None,
            op,
            "cache_position_modulo",
            "None without a page_table (paged mode only)",
            cache_position_modulo,
        )
        modulo = _index(op, "cache_position_modulo", cache_position_modulo)
        expect(
            modulo > 0 and modulo % cache.shape[2] == 0,
            op,
            "cache_position_modulo",
            f"a positive multiple of block_size {cache.shape[2]}",
            modulo,
        )
        expect(
            modulo // cache.shape[2] <= cache.shape[0],
            op,
            "cache_position_modulo",
            f"<= {cache.shape[0]} blocks",
            modulo,
        )
    _check_paged_update_args(op, cache, x, "", pt, share, batch_offset)
    positions = _update_positions(op, x, update_idxs, update_idxs_tensor)
    devices = _devices(op, cache, mesh_coords)
    _paged_update_one(op, 0, cache, x, positions, pt, share, devices, modulo)
    return cache


@ttnn_op("ttnn.experimental.paged_fused_update_cache")
def paged_fused_update_cache(
    cache_tensor1: Tensor,
    input_tensor1: Tensor,
    cache_tensor2: Tensor,
    input_tensor2: Tensor,
    *,
    update_idxs: list[int] | None = None,
    update_idxs_tensor: Tensor | None = None,
    share_cache: bool | None = None,
    page_table: Tensor | None = None,
    batch_offset: int = 0,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    mesh_coords=None,
) -> tuple[Tensor, Tensor]:
    """:func:`paged_update_cache` of K and V at once; the two inputs sit on disjoint, equally sized core grids.

    Inputs are both TILE, or both ROW_MAJOR with the Llama-70B shapes (head_dim 128, 8 kv heads) the row-major
    kernel supports. Returns ``(cache_tensor1, cache_tensor2)``, updated in place.
    """
    op = "ttnn.experimental.paged_fused_update_cache"
    caches, inputs = [], []
    for n, (c, t) in enumerate(((cache_tensor1, input_tensor1), (cache_tensor2, input_tensor2)), start=1):
        caches.append(
            expect_tensor(op, f"cache_tensor{n}", c, dtypes=_CACHE4, layouts=(Layout.TILE,), rank=4)
        )
        inputs.append(expect_tensor(op, f"input_tensor{n}", t, dtypes=_F32_BF16, rank=4))
    same_mesh(
        op, cache_tensor1=caches[0], input_tensor1=inputs[0], cache_tensor2=caches[1], input_tensor2=inputs[1]
    )
    check_compute_config(op, compute_kernel_config)
    x1, x2 = inputs
    expect(
        x1.layout == x2.layout,
        op,
        "input_tensor2.layout",
        f"input_tensor1's layout {x1.layout.name}",
        x2.layout.name,
    )
    if x1.layout is Layout.ROW_MAJOR:
        expect(
            x1.shape[-1] == 128 and x2.shape[-2] == 8,
            op,
            "row-major inputs",
            "the Llama-70B shapes (head_dim 128, 8 kv heads)",
            (x1.shape[-1], x2.shape[-2]),
        )
    share = bool(share_cache)
    pt = None
    if page_table is not None:
        pt = _page_table(op, "page_table", page_table, users=x1.shape[1], sharded_ok=True)
        same_mesh(op, input_tensor1=x1, page_table=pt)
        expect(update_idxs_tensor is not None, op, "update_idxs_tensor", "a tensor with a paged cache", None)
    for n, (c, t) in enumerate(zip(caches, inputs), start=1):
        _check_paged_update_args(op, c, t, str(n), pt, share, batch_offset)
    expect(
        x2.shape[1] == x1.shape[1],
        op,
        "input_tensor2.shape[1]",
        f"input_tensor1's {x1.shape[1]} users",
        x2.shape[1],
    )
    g1, g2 = x1.shard_spec().grid, x2.shard_spec().grid
    expect(
        not (set(g1.cores()) & set(g2.cores())),
        op,
        "input_tensor2 shard grid",
        "disjoint from input_tensor1's grid",
        g2,
    )
    positions = _update_positions(op, x1, update_idxs, update_idxs_tensor)
    devices = _devices(op, caches[0], mesh_coords)
    _paged_update_one(op, 1, caches[0], x1, positions, pt, share, devices, None)
    _paged_update_one(op, 2, caches[1], x2, positions, pt, share, devices, None)
    return caches[0], caches[1]


@ttnn_op("ttnn.experimental.paged_fill_cache")
def paged_fill_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    page_table: Tensor,
    *,
    batch_idx_tensor: Tensor | None = None,
    batch_idx: int = 0,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    mesh_coords=None,
    block_size: int | None = None,
    cache_position_modulo: int | None = None,
) -> Tensor:
    """Prefill into a paged cache: position p of input row i goes to block ``page_table[u, p // block_size]``.

    ``u`` is ``batch_idx`` (input ``[1, nkv, S, hd]``) or ``batch_idx_tensor[i]`` (input ``[n, nkv, S, hd]``). The input
    dtype must equal the cache dtype; whole 32-row tiles are copied (padding rows as zeros); a page-table entry
    of −1 skips that block. ``cache_position_modulo`` treats the cache as a ring of that many positions (later
    tiles overwrite earlier ones).
    """
    op = "ttnn.experimental.paged_fill_cache"
    cache = expect_tensor(op, "cache_tensor", cache_tensor, dtypes=_CACHE4, layouts=(Layout.TILE,), rank=4)
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=(cache.dtype,), layouts=(Layout.TILE,), rank=4)
    x_shards = dict(zip(_input_devices(op, cache, x), x.shards(op)))
    check_compute_config(op, compute_kernel_config)
    expect(
        _mem(x).memory_layout is _INTERLEAVED,
        op,
        "input_tensor memory layout",
        "INTERLEAVED",
        _mem(x).memory_layout.name,
    )
    pt = expect_tensor(
        op, "page_table", page_table, dtypes=(DataType.INT32,), layouts=(Layout.ROW_MAJOR,), rank=2
    )
    same_mesh(op, cache_tensor=cache, page_table=pt)
    expect(
        _mem(pt).memory_layout is _INTERLEAVED,
        op,
        "page_table memory layout",
        "INTERLEAVED",
        _mem(pt).memory_layout.name,
    )
    block = cache.shape[2]
    if block_size is not None:
        expect(
            block_size == block,
            op,
            "block_size",
            f"the cache's own {block} (other views are not emulated)",
            block_size,
        )
    expect(
        x.shape[1] == cache.shape[1],
        op,
        "input_tensor.shape[1]",
        f"the cache's {cache.shape[1]} kv heads",
        x.shape[1],
    )
    expect(
        x.shape[-1] == cache.shape[-1],
        op,
        "input_tensor.shape[-1]",
        f"the cache head_dim {cache.shape[-1]}",
        x.shape[-1],
    )
    expect(x.padded_shape[-1] % TILE_SIZE == 0, op, "input_tensor.shape[-1]", "a multiple of 32", x.shape[-1])
    expect(block % TILE_SIZE == 0, op, "cache block_size", "a multiple of 32", block)
    seq_pad = x.padded_shape[-2]
    span = block * pt.shape[1]
    modulo = None
    if cache_position_modulo is not None:
        modulo = _index(op, "cache_position_modulo", cache_position_modulo)
        expect(
            modulo > 0 and modulo % block == 0,
            op,
            "cache_position_modulo",
            f"a positive multiple of block_size {block}",
            modulo,
        )
        expect(
            modulo <= span,
            op,
            "cache_position_modulo",
            f"<= max_num_blocks_per_seq · block_size = {span}",
            modulo,
        )
    else:
        expect(
            seq_pad <= span,
            op,
            "input_tensor.shape[-2]",
            f"<= max_num_blocks_per_seq · block_size = {span}",
            x.shape[-2],
        )
    if batch_idx_tensor is not None:
        bt = expect_tensor(
            op,
            "batch_idx_tensor",
            batch_idx_tensor,
            dtypes=(DataType.UINT32, DataType.INT32),
            layouts=(Layout.ROW_MAJOR,),
        )
        same_mesh(op, cache_tensor=cache, batch_idx_tensor=bt)
        expect(
            bt.volume == x.shape[0],
            op,
            "batch_idx_tensor",
            f"{x.shape[0]} elements (one per input row)",
            bt.volume,
        )
        expect(
            _mem(bt).memory_layout is _INTERLEAVED and _mem(bt).buffer_type is BufferType.DRAM,
            op,
            "batch_idx_tensor memory",
            "DRAM INTERLEAVED",
            _mem(bt),
        )
        users = [s.reshape(-1).astype(np.int64) for s in bt.shards(op)]
    else:
        expect(x.shape[0] == 1, op, "input_tensor.shape[0]", "1 without batch_idx_tensor", x.shape[0])
        users = [np.asarray([_index(op, "batch_idx", batch_idx, pt.shape[0])], dtype=np.int64)] * len(
            cache.shards(op)
        )
    plan = []
    for d in _devices(op, cache, mesh_coords):
        if d not in x_shards:
            continue  # the input has no data on this device
        rows = pt.shards(op)[d].astype(np.int64)
        for i, u in enumerate(users[d]):
            expect(
                0 <= u < pt.shape[0],
                op,
                "batch_idx_tensor" if batch_idx_tensor is not None else "batch_idx",
                f"a page-table row < {pt.shape[0]}",
                int(u),
            )
            for t0 in range(0, seq_pad, TILE_SIZE):
                p = t0 % modulo if modulo is not None else t0
                phys = _physical_block(
                    op, "page_table", rows, int(u), p // block, cache.shape[0], skip_ok=True
                )
                if phys != _SKIP:
                    plan.append((d, i, t0, phys, p % block))
    for d, i, t0, phys, row in plan:
        xs = x_shards[d][i]
        tile = np.zeros((xs.shape[0], TILE_SIZE, xs.shape[-1]), dtype=np.float32)
        part = xs[:, t0 : t0 + TILE_SIZE]
        tile[:, : part.shape[1]] = part
        cache._writable_shard(d, op)[phys, :, row : row + TILE_SIZE, :] = quantize(tile, cache.dtype)
    return cache
