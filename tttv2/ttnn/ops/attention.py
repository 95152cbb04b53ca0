"""Attention data movement and rotary embeddings: the ``ttnn.experimental`` head split/merge and RoPE ops.

Shapes follow tt-metal exactly (each is per device; heads are usually sharded over the mesh by the caller):

* ``nlp_create_qkv_heads``: fused ``[B, 1, S, (nh + 2·nkv)·hd]`` → Q ``[B, nh, S, hd]``, K ``[B, nkv, S, hd]``
  (or ``[B, nkv, hd, S]`` with ``transpose_k_heads``), V ``[B, nkv, S, hd]``;
* ``nlp_create_qkv_heads_decode``: ``[1, 1, B, (nh + 2·nkv)·hd]`` → ``[1, B, nh, hd]`` / ``[1, B, nkv, hd]``,
  always L1 height-sharded one user per core (heads padded to a 32-row tile);
* ``nlp_concat_heads`` / ``nlp_concat_heads_decode``: the inverse merges;
* ``rotary_embedding_llama`` (+ ``_fused_qk``): ``x·cos + (x @ trans_mat)·sin`` on adjacent pairs (Meta layout);
* ``rotary_embedding``: the HF rotate-half form ``x·cos + rotate_half(x)·sin``.

Numerics: data movement is exact; rotary math is float32 on the stored values, output quantised to the input
dtype (the hardware rounds its intermediate products to bfloat16 as well; the emulator does not).
"""

from __future__ import annotations

import numpy as np

from .. import _kernels
from .._remote import local_shards
from ..memory import CoreCoord, CoreRange, CoreRangeSet, MemoryConfig, ShardSpec, num_cores_to_corerangeset
from ..program_configs import WormholeComputeKernelConfig
from ..tensor import Tensor
from ..types import TILE_SIZE, BufferType, DataType, Layout, ShardOrientation, TensorMemoryLayout
from ._common import (
    check_compute_config,
    check_memory_config,
    expect,
    expect_tensor,
    output_like,
    same_mesh,
    ttnn_op,
)

__all__: list[str] = []
__experimental__: list[str] = [
    "nlp_concat_heads",
    "nlp_concat_heads_decode",
    "nlp_create_qkv_heads",
    "nlp_create_qkv_heads_decode",
    "rotary_embedding",
    "rotary_embedding_llama",
    "rotary_embedding_llama_fused_qk",
]
__transformer__: list[str] = []

_F32_BF16 = (DataType.FLOAT32, DataType.BFLOAT16)
_F32_BF16_BF8 = (DataType.FLOAT32, DataType.BFLOAT16, DataType.BFLOAT8_B)
_HEIGHT = TensorMemoryLayout.HEIGHT_SHARDED
_WIDTH = TensorMemoryLayout.WIDTH_SHARDED
_INTERLEAVED = TensorMemoryLayout.INTERLEAVED


# --- shared helpers ---------------------------------------------------------------------------------------


def _positive_int(op: str, arg: str, value) -> int:
    expect(
        isinstance(value, int) and not isinstance(value, bool) and value > 0,
        op,
        arg,
        "a positive int",
        repr(value),
    )
    return value


def _bf16_tile4(op: str, arg: str, value) -> Tensor:
    """A rank-4 bfloat16 TILE tensor argument (the decode rotary ops take nothing else)."""
    return expect_tensor(op, arg, value, dtypes=(DataType.BFLOAT16,), layouts=(Layout.TILE,), rank=4)


def _layout_of(t: Tensor) -> TensorMemoryLayout:
    return t.memory_config().memory_layout


def _padded_height(t: Tensor) -> int:
    padded = t.padded_shape
    return int(np.prod(padded[:-1])) if len(padded) > 1 else 1


def _grid_cores(grid: CoreRangeSet) -> list[CoreCoord]:
    """Cores of a grid in the order ttnn fills them: range by range, row by row inside each range."""
    ranges = sorted(grid.ranges, key=lambda r: (r.start.y, r.start.x))
    return [core for r in ranges for core in r.cores(row_wise=True)]


def _cores_to_crs(cores: list[CoreCoord]) -> CoreRangeSet:
    """Contiguous row runs merged into rectangles (the decomposition ``num_cores_to_corerangeset`` produces)."""
    runs: list[tuple[int, int, int]] = []
    for c in cores:
        if runs and runs[-1][0] == c.y and runs[-1][2] + 1 == c.x:
            runs[-1] = (c.y, runs[-1][1], c.x)
        else:
            runs.append((c.y, c.x, c.x))
    rects: list[list[int]] = []
    for y, x0, x1 in runs:
        if rects and rects[-1][0] == x0 and rects[-1][1] == x1 and rects[-1][3] + 1 == y:
            rects[-1][3] = y
        else:
            rects.append([x0, x1, y, y])
    return CoreRangeSet([CoreRange(CoreCoord(a, c), CoreCoord(b, d)) for a, b, c, d in rects])


def _sub_grid(grid: CoreRangeSet, start: int, count: int) -> CoreRangeSet:
    return _cores_to_crs(_grid_cores(grid)[start : start + count])


# --- nlp_create_qkv_heads ------------------------------------------------------------------------------------


@ttnn_op("ttnn.experimental.nlp_create_qkv_heads")
def nlp_create_qkv_heads(
    input: Tensor,
    input_kv: Tensor | None = None,
    *,
    num_heads: int,
    num_kv_heads: int | None = None,
    transpose_k_heads: bool = True,
    kv_tied: bool = False,
    memory_config: MemoryConfig | None = None,
    output_tensors=None,
    head_split: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Split fused QKV ``[B, 1, S, (nh + 2·nkv)·hd]`` into Q ``[B, nh, S, hd]``, K and V ``[B, nkv, S, hd]``.

    With ``input_kv``, Q comes from ``input`` ``[B, 1, S, nh·hd]`` and K|V from ``input_kv``
    ``[B, 1, S, 2·nkv·hd]``. K is ``[B, nkv, hd, S]`` when ``transpose_k_heads`` (ttnn's default is True).
    Interleaved inputs hold all Q heads, then all K heads, then all V heads; width-sharded inputs hold one
    group per core (``nh/nkv`` Q heads, its K head, its V head), as the sharded kernel reads them.
    ``head_split`` only changes the work split on hardware and is ignored; ``kv_tied`` and
    ``output_tensors`` are not emulated.
    """
    op = "ttnn.experimental.nlp_create_qkv_heads"
    x = expect_tensor(op, "input", input, dtypes=_F32_BF16_BF8, layouts=(Layout.TILE,), rank=4)
    nq = _positive_int(op, "num_heads", num_heads)
    nkv = nq if num_kv_heads is None else _positive_int(op, "num_kv_heads", num_kv_heads)
    expect(isinstance(transpose_k_heads, bool), op, "transpose_k_heads", "a bool", repr(transpose_k_heads))
    expect(kv_tied is False, op, "kv_tied", "False (tied K/V is not emulated)", repr(kv_tied))
    expect(
        output_tensors is None,
        op,
        "output_tensors",
        "None (preallocated outputs are not emulated)",
        "tensors",
    )
    memory_config = check_memory_config(op, memory_config)
    width = x.padded_shape[-1]
    kv = None
    if input_kv is not None:
        kv = expect_tensor(op, "input_kv", input_kv, dtypes=(x.dtype,), layouts=(Layout.TILE,), rank=4)
        same_mesh(op, input=x, input_kv=kv)
        expect(width % nq == 0, op, "input", f"a last dim divisible by num_heads={nq}", width)
        hd = width // nq
        kv_width = kv.padded_shape[-1]
        expect(
            kv_width == 2 * nkv * hd,
            op,
            "input_kv",
            f"a last dim of 2·num_kv_heads·head_dim = {2 * nkv * hd}",
            kv_width,
        )
        expect(
            kv.shape[0] == x.shape[0],
            op,
            "input_kv.shape[0]",
            f"the batch of input ({x.shape[0]})",
            kv.shape[0],
        )
        expect(kv.shape[1] == 1, op, "input_kv.shape[1]", "1", kv.shape[1])
        expect(
            kv.shape[2] == x.shape[2],
            op,
            "input_kv.shape[2]",
            f"the sequence length of input ({x.shape[2]})",
            kv.shape[2],
        )
    else:
        total = nq + 2 * nkv
        expect(
            width % total == 0,
            op,
            "input",
            f"a last dim divisible by num_heads + 2·num_kv_heads = {total}",
            width,
        )
        hd = width // total
    expect(hd % TILE_SIZE == 0, op, "head_dim", "a multiple of 32 (heads are moved as whole tiles)", hd)
    expect(x.shape[1] == 1, op, "input.shape[1]", "1", x.shape[1])
    out_mc = memory_config if memory_config is not None else x.memory_config()
    sharded = x.is_sharded()
    if kv is not None:
        expect(
            kv.is_sharded() == sharded,
            op,
            "input_kv",
            "the same memory layout kind (sharded or interleaved) as input",
            _layout_of(kv).name,
        )
    if sharded:
        _check_sharded_create_heads(op, x, kv, nq, nkv, hd, out_mc, transpose_k_heads)
        grid = x.device().compute_with_storage_grid_size()
        q_mc = MemoryConfig(
            out_mc.memory_layout,
            out_mc.buffer_type,
            ShardSpec(num_cores_to_corerangeset(nq, grid, True), (TILE_SIZE, hd)),
        )
        kv_mc = MemoryConfig(
            out_mc.memory_layout,
            out_mc.buffer_type,
            ShardSpec(num_cores_to_corerangeset(nkv, grid, True), (TILE_SIZE, hd)),
        )
    else:
        expect(
            out_mc.memory_layout is _INTERLEAVED,
            op,
            "memory_config",
            "an INTERLEAVED config for an interleaved input",
            out_mc.memory_layout.name,
        )
        q_mc = kv_mc = out_mc

    group = nq // nkv
    qs, ks, vs = [], [], []
    for i, xs in enumerate(x.shards(op)):
        b, _, s, _ = xs.shape
        if kv is not None:
            kvs = kv.shards(op)[i]
            if sharded:  # per core: [q of group g] and [k_g, v_g]
                q = xs.reshape(b, s, nkv, group, hd).reshape(b, s, nq, hd)
                pair = kvs.reshape(b, s, nkv, 2, hd)
                k, v = pair[:, :, :, 0], pair[:, :, :, 1]
            else:
                q = xs.reshape(b, s, nq, hd)
                k = kvs[:, 0, :, : nkv * hd].reshape(b, s, nkv, hd)
                v = kvs[:, 0, :, nkv * hd :].reshape(b, s, nkv, hd)
        elif sharded:  # per core: [q heads of group g, k_g, v_g]
            grouped = xs.reshape(b, s, nkv, group + 2, hd)
            q = grouped[:, :, :, :group].reshape(b, s, nq, hd)
            k, v = grouped[:, :, :, group], grouped[:, :, :, group + 1]
        else:
            flat = xs.reshape(b, s, nq + 2 * nkv, hd)
            q, k, v = flat[:, :, :nq], flat[:, :, nq : nq + nkv], flat[:, :, nq + nkv :]
        qs.append(np.ascontiguousarray(q.transpose(0, 2, 1, 3)))
        k = k.transpose(0, 2, 3, 1) if transpose_k_heads else k.transpose(0, 2, 1, 3)
        ks.append(np.ascontiguousarray(k))
        vs.append(np.ascontiguousarray(v.transpose(0, 2, 1, 3)))
    return (
        output_like(op, qs, x, layout=Layout.TILE, memory_config=q_mc),
        output_like(op, ks, x, layout=Layout.TILE, memory_config=kv_mc),
        output_like(op, vs, x, layout=Layout.TILE, memory_config=kv_mc),
    )


def _check_sharded_create_heads(op, x, kv, nq, nkv, hd, out_mc, transpose_k_heads) -> None:
    spec = x.shard_spec()
    expect(
        spec.shape[0] == _padded_height(x),
        op,
        "input shard height",
        f"the full height {_padded_height(x)}",
        spec.shape[0],
    )
    expect(
        out_mc.is_sharded() and out_mc.memory_layout is not _WIDTH,
        op,
        "memory_config",
        "a HEIGHT or BLOCK sharded config for a sharded input",
        out_mc.memory_layout.name,
    )
    expect(
        spec.orientation is ShardOrientation.ROW_MAJOR,
        op,
        "input shard orientation",
        "ROW_MAJOR",
        spec.orientation.name,
    )
    grid = x.device().compute_with_storage_grid_size()
    cores = grid.x * grid.y
    expect(nq <= cores, op, "num_heads", f"at most one head per core (<= {cores})", nq)
    expect(nq >= nkv, op, "num_heads", f">= num_kv_heads ({nkv})", nq)
    n_in = spec.num_cores()
    expect(nq % n_in == 0, op, "num_heads", f"divisible by the input's {n_in} shard cores", nq)
    if kv is not None:
        kspec = kv.shard_spec()
        expect(kspec.grid == spec.grid, op, "input_kv shard grid", "the grid of input", kspec.grid)
        expect(
            spec.shape[1] == (nq // nkv) * hd,
            op,
            "input shard width",
            f"(num_heads/num_kv_heads)·head_dim = {(nq // nkv) * hd}",
            spec.shape[1],
        )
        expect(kspec.shape[1] == 2 * hd, op, "input_kv shard width", f"2·head_dim = {2 * hd}", kspec.shape[1])
        expect(
            nkv % kspec.num_cores() == 0,
            op,
            "num_kv_heads",
            f"divisible by input_kv's {kspec.num_cores()} shard cores",
            nkv,
        )
    else:
        expect(nkv % n_in == 0, op, "num_kv_heads", f"divisible by the input's {n_in} shard cores", nkv)
        want = (nq // nkv + 2) * hd
        expect(
            spec.shape[1] == want,
            op,
            "input shard width",
            f"(num_heads/num_kv_heads + 2)·head_dim = {want}",
            spec.shape[1],
        )
    expect(not transpose_k_heads, op, "transpose_k_heads", "False for a sharded input", transpose_k_heads)


# --- nlp_create_qkv_heads_decode -----------------------------------------------------------------------------


@ttnn_op("ttnn.experimental.nlp_create_qkv_heads_decode")
def nlp_create_qkv_heads_decode(
    input_tensor: Tensor,
    *,
    num_heads: int,
    num_kv_heads: int | None = None,
    output_tensors=None,
    overlap_qk_coregrid: bool = True,
    batch_offset: Tensor | None = None,
    slice_size: int | None = None,
    memory_config: MemoryConfig | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Split decode QKV ``[1, 1, B, (nh + 2·nkv)·hd]`` (B ≤ 32 users) into ``[1, B, nh, hd]`` / ``[1, B, nkv, hd]``.

    As on hardware the outputs are always L1 HEIGHT_SHARDED, one user per core with a 32-row shard (heads padded
    to a tile): Q and V on the first B cores of ``memory_config``'s shard grid (default: the device grid), K on
    the same cores, or on the next B cores when ``overlap_qk_coregrid=False`` (sharded inputs only; interleaved
    inputs always overlap). ``batch_offset`` (a one-element int tensor) with ``slice_size`` keeps users
    ``[offset, offset + slice_size)`` of a sharded input.
    """
    op = "ttnn.experimental.nlp_create_qkv_heads_decode"
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=_F32_BF16, layouts=(Layout.TILE,), rank=4)
    nq = _positive_int(op, "num_heads", num_heads)
    nkv = nq if num_kv_heads is None else _positive_int(op, "num_kv_heads", num_kv_heads)
    expect(
        output_tensors is None,
        op,
        "output_tensors",
        "None (preallocated outputs are not emulated)",
        "tensors",
    )
    memory_config = check_memory_config(op, memory_config)
    width = x.padded_shape[-1]
    total = nq + 2 * nkv
    expect(
        width % total == 0,
        op,
        "input_tensor",
        f"a last dim divisible by num_heads + 2·num_kv_heads = {total}",
        width,
    )
    hd = width // total
    expect(hd % TILE_SIZE == 0, op, "head_dim", "a multiple of 32", hd)
    expect(x.shape[0] == 1 and x.shape[1] == 1, op, "input_tensor shape", "[1, 1, B, W]", list(x.shape))
    users = x.shape[2]
    expect(users <= 32, op, "input_tensor.shape[2] (users)", "<= 32", users)
    expect(nq <= 32, op, "num_heads", "<= 32", nq)
    expect(nq >= nkv, op, "num_heads", f">= num_kv_heads ({nkv})", nq)
    offset = 0
    sharded = x.is_sharded()
    if sharded:
        spec = x.shard_spec()
        expect(_layout_of(x) is _WIDTH, op, "input_tensor memory layout", "WIDTH_SHARDED", _layout_of(x).name)
        expect(
            spec.shape[0] == _padded_height(x),
            op,
            "input shard height",
            f"the full height {_padded_height(x)}",
            spec.shape[0],
        )
        expect(
            spec.orientation is ShardOrientation.ROW_MAJOR,
            op,
            "input shard orientation",
            "ROW_MAJOR",
            spec.orientation.name,
        )
        expect(
            isinstance(overlap_qk_coregrid, bool),
            op,
            "overlap_qk_coregrid",
            "a bool",
            repr(overlap_qk_coregrid),
        )
        if not overlap_qk_coregrid:
            expect(
                hd % spec.shape[1] == 0,
                op,
                "input shard width",
                f"a divisor of head_dim={hd} (no partial heads)",
                spec.shape[1],
            )
        expect(
            (batch_offset is None) == (slice_size is None),
            op,
            "batch_offset/slice_size",
            "both or neither",
            f"batch_offset={'set' if batch_offset is not None else None}, slice_size={slice_size}",
        )
        if batch_offset is not None:
            bo = expect_tensor(op, "batch_offset", batch_offset, dtypes=(DataType.UINT32, DataType.INT32))
            same_mesh(op, input_tensor=x, batch_offset=bo)
            expect(bo.volume == 1, op, "batch_offset", "a one-element tensor", list(bo.shape))
            size = _positive_int(op, "slice_size", slice_size)
            offsets = {int(s.reshape(-1)[0]) for s in local_shards(bo, op)}  # this rank's devices
            expect(len(offsets) == 1, op, "batch_offset", "the same value on every device", sorted(offsets))
            offset = offsets.pop()
            expect(
                offset >= 0 and offset + size <= users,
                op,
                "batch_offset + slice_size",
                f"within the {users} users",
                offset + size,
            )
            users = size
    else:
        expect(
            batch_offset is None and slice_size is None,
            op,
            "batch_offset/slice_size",
            "None for an interleaved input",
            "set",
        )
        overlap_qk_coregrid = True  # ttnn forces overlapping grids for interleaved inputs
    device = x.device()
    if memory_config is not None and memory_config.shard_spec is not None:
        out_grid = memory_config.shard_spec.grid
    else:
        g = device.compute_with_storage_grid_size()
        out_grid = CoreRangeSet([CoreRange(CoreCoord(0, 0), CoreCoord(g.x - 1, g.y - 1))])
    n_cores = out_grid.num_cores()
    need = users if overlap_qk_coregrid else 2 * users
    expect(
        n_cores >= need,
        op,
        "output core grid",
        f"at least {need} cores (one per user{'' if overlap_qk_coregrid else ', Q and K apart'})",
        n_cores,
    )
    q_grid = _sub_grid(out_grid, 0, users)
    k_grid = q_grid if overlap_qk_coregrid else _sub_grid(out_grid, users, users)
    shard = (TILE_SIZE * ((nq + TILE_SIZE - 1) // TILE_SIZE), hd)
    q_mc = MemoryConfig(_HEIGHT, BufferType.L1, ShardSpec(q_grid, shard))
    k_mc = MemoryConfig(_HEIGHT, BufferType.L1, ShardSpec(k_grid, shard))
    v_mc = MemoryConfig(_HEIGHT, BufferType.L1, ShardSpec(q_grid, shard))
    qs, ks, vs = [], [], []
    for xs in x.shards(op):
        rows = xs[0, 0, offset : offset + users].reshape(users, total, hd)
        qs.append(np.ascontiguousarray(rows[None, :, :nq]))
        ks.append(np.ascontiguousarray(rows[None, :, nq : nq + nkv]))
        vs.append(np.ascontiguousarray(rows[None, :, nq + nkv :]))
    return (
        output_like(op, qs, x, memory_config=q_mc),
        output_like(op, ks, x, memory_config=k_mc),
        output_like(op, vs, x, memory_config=v_mc),
    )


# --- nlp_concat_heads ----------------------------------------------------------------------------------------


@ttnn_op("ttnn.experimental.nlp_concat_heads")
def nlp_concat_heads(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None) -> Tensor:
    """Merge heads: ``[B, nh, S, hd]`` → ``[B, 1, S, nh·hd]`` (head h at columns ``[h·hd, (h+1)·hd)``)."""
    op = "ttnn.experimental.nlp_concat_heads"
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=_F32_BF16_BF8, layouts=(Layout.TILE,), rank=4)
    memory_config = check_memory_config(op, memory_config)
    b, nh, s, hd = x.shape
    expect(
        hd % TILE_SIZE == 0, op, "head_dim", "a multiple of 32 (heads are concatenated as whole tiles)", hd
    )
    out_mc = memory_config if memory_config is not None else x.memory_config()
    if x.is_sharded():
        expect(
            _layout_of(x) is not _WIDTH,
            op,
            "input_tensor memory layout",
            "HEIGHT or BLOCK sharded",
            _layout_of(x).name,
        )
        spec = x.shard_spec()
        s_pad = x.padded_shape[-2]
        expect(
            spec.shape[1] == x.padded_shape[-1],
            op,
            "input shard width",
            f"the padded head_dim {x.padded_shape[-1]}",
            spec.shape[1],
        )
        expect(
            spec.shape[0] % s_pad == 0,
            op,
            "input shard height",
            f"a multiple of the padded sequence {s_pad}",
            spec.shape[0],
        )
        per_shard = spec.shape[0] // s_pad
        expect(nh % per_shard == 0, op, "num heads", f"divisible by the {per_shard} heads per shard", nh)
        expect(
            out_mc.memory_layout is not _HEIGHT,
            op,
            "memory_config",
            "not HEIGHT_SHARDED for a sharded input",
            out_mc.memory_layout.name,
        )
        if out_mc.is_sharded():
            out_mc = MemoryConfig(
                out_mc.memory_layout,
                out_mc.buffer_type,
                ShardSpec(
                    spec.grid, (spec.shape[0] // per_shard, spec.shape[1] * per_shard), spec.orientation
                ),
            )
    else:
        expect(
            out_mc.memory_layout is _INTERLEAVED,
            op,
            "memory_config",
            "an INTERLEAVED config for an interleaved input",
            out_mc.memory_layout.name,
        )
    shards = [np.ascontiguousarray(xs.transpose(0, 2, 1, 3).reshape(b, 1, s, nh * hd)) for xs in x.shards(op)]
    return output_like(op, shards, x, layout=Layout.TILE, memory_config=out_mc)


@ttnn_op("ttnn.experimental.nlp_concat_heads_decode")
def nlp_concat_heads_decode(
    input_tensor: Tensor,
    *,
    num_heads: int,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    sub_core_grids: CoreRangeSet | None = None,
) -> Tensor:
    """Merge decode heads: ``[1, B, nh(≤32, one tile), hd]`` height-sharded on B cores → ``[1, 1, max(B, 32), nh·hd]``.

    The first ``num_heads`` heads are kept. As on hardware the output always has 32 rows when B < 32 (the rows
    past B are zero here) and is L1 WIDTH_SHARDED with one head per core; ``memory_config`` is ignored, as ttnn
    ignores it. ``output_tensor`` and ``sub_core_grids`` are not emulated.
    """
    op = "ttnn.experimental.nlp_concat_heads_decode"
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=_F32_BF16, layouts=(Layout.TILE,), rank=4)
    nh = _positive_int(op, "num_heads", num_heads)
    check_memory_config(op, memory_config)
    expect(
        output_tensor is None, op, "output_tensor", "None (preallocated outputs are not emulated)", "a tensor"
    )
    expect(
        sub_core_grids is None, op, "sub_core_grids", "None (sub-core grids are not emulated)", sub_core_grids
    )
    seq, users, heads, hd = x.shape
    expect(seq == 1, op, "input_tensor.shape[0]", "1 (decode)", seq)
    expect(users <= 32, op, "input_tensor.shape[1] (users)", "<= 32", users)
    expect(
        x.padded_shape[2] == TILE_SIZE,
        op,
        "input_tensor.shape[2] (heads)",
        "one tile of padded heads (<= 32)",
        heads,
    )
    expect(nh <= heads, op, "num_heads", f"<= the {heads} heads of the input", nh)
    expect(
        x.is_sharded() and _layout_of(x) is _HEIGHT,
        op,
        "input_tensor memory layout",
        "HEIGHT_SHARDED",
        _layout_of(x).name,
    )
    spec = x.shard_spec()
    expect(
        spec.shape == (TILE_SIZE, x.padded_shape[-1]),
        op,
        "input shard shape",
        f"(32, {x.padded_shape[-1]})",
        spec.shape,
    )
    expect(spec.num_cores() == users, op, "input shard cores", f"one per user ({users})", spec.num_cores())
    rows = max(users, TILE_SIZE)
    grid = num_cores_to_corerangeset(nh, x.device().compute_with_storage_grid_size(), row_wise=True)
    out_mc = MemoryConfig(_WIDTH, BufferType.L1, ShardSpec(grid, (rows, x.padded_shape[-1])))
    shards = []
    for xs in x.shards(op):
        out = np.zeros((1, 1, rows, nh * hd), dtype=np.float32)
        out[0, 0, :users] = xs[0, :, :nh, :].reshape(users, nh * hd)
        shards.append(out)
    return output_like(op, shards, x, memory_config=out_mc)


# --- rotary embeddings ---------------------------------------------------------------------------------------


def _standard_trans_mat() -> np.ndarray:
    """The 32×32 pair-swap matrix of ``get_rot_transformation_mat``: T[2j, 2j+1] = 1, T[2j+1, 2j] = −1."""
    t = np.zeros((TILE_SIZE, TILE_SIZE), dtype=np.float32)
    idx = np.arange(0, TILE_SIZE, 2)
    t[idx, idx + 1] = 1.0
    t[idx + 1, idx] = -1.0
    return t


_PAIR_SWAP = _standard_trans_mat()


def _rotate(x: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """``x @ trans`` applied to every 32-wide tile of the last dim."""
    shape = x.shape
    tiles = x.reshape(*shape[:-1], shape[-1] // TILE_SIZE, TILE_SIZE)
    return np.matmul(tiles, trans, dtype=np.float32).reshape(shape)


def _rope_rows(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, trans: np.ndarray, inner: int) -> np.ndarray:
    """x [n, d]; cos/sin [m, d]; row i of x uses row (i // inner) % m (the ``rotary_interleaved`` contract)."""
    if np.array_equal(trans, _PAIR_SWAP):
        return _kernels.rotary_interleaved(x, cos, sin, inner)
    idx = (np.arange(x.shape[0]) // inner) % cos.shape[0]
    return (x * cos[idx] + _rotate(x, trans) * sin[idx]).astype(np.float32)


def _check_rope_common(op, x, cos, sin, trans, compute_kernel_config, memory_config):
    same_mesh(op, input_tensor=x, cos_cache=cos, sin_cache=sin, trans_mat=trans)
    hd = x.shape[-1]
    config = check_compute_config(op, compute_kernel_config)
    expect(hd % TILE_SIZE == 0, op, "head_dim", "a multiple of 32", hd)
    expect(hd <= 256, op, "head_dim", "<= 256", hd)
    expect(
        hd <= 128 or config is None or not config.fp32_dest_acc_en,
        op,
        "compute_kernel_config.fp32_dest_acc_en",
        "False when head_dim > 128",
        True,
    )
    expect(
        cos.shape == sin.shape, op, "sin_cache", f"the shape of cos_cache {list(cos.shape)}", list(sin.shape)
    )
    expect(cos.shape[-1] == hd, op, "cos_cache.shape[-1]", f"head_dim={hd}", cos.shape[-1])
    out_mc = check_memory_config(op, memory_config) or x.memory_config()
    expect(
        out_mc.memory_layout is _layout_of(x),
        op,
        "memory_config",
        f"the input's memory layout ({_layout_of(x).name})",
        out_mc.memory_layout.name,
    )
    return out_mc


def _trans_tiles(trans: Tensor, index: int) -> np.ndarray:
    """The 32×32 tiles stacked along the rows of a trans_mat shard: [n_tiles, 32, 32]."""
    t = trans.shards()[index]
    return t.reshape(-1, TILE_SIZE, TILE_SIZE)


@ttnn_op("ttnn.experimental.rotary_embedding_llama")
def rotary_embedding_llama(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    trans_mat: Tensor,
    *,
    is_decode_mode: bool = False,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """Rotary embedding on adjacent pairs: ``out = x·cos + (x @ trans_mat)·sin`` per 32-wide tile of head_dim.

    Prefill: x ``[B, nh, S, hd]`` interleaved, cos/sin ``[1, 1 or nh, ≥S, hd]`` (row s for position s), trans_mat
    ``[1, 1, 32, 32]``. Decode (``is_decode_mode``): x ``[1, B, nh, hd]`` HEIGHT_SHARDED one user per core, cos/sin
    ``[1, B, 1(→32), hd]`` sharded with 32-row shards (row 0 of user b's tile is broadcast over its heads), trans_mat
    ``[1, 1, 32·n, 32]`` sharded one tile per core (user b uses tile ``b mod n``). All inputs are bfloat16.
    The standard pair-swap matrix runs the fused ``rotary_interleaved`` kernel; any other matrix a matmul.
    """
    op = "ttnn.experimental.rotary_embedding_llama"
    x = _bf16_tile4(op, "input_tensor", input_tensor)
    cos = _bf16_tile4(op, "cos_cache", cos_cache)
    sin = _bf16_tile4(op, "sin_cache", sin_cache)
    trans = _bf16_tile4(op, "trans_mat", trans_mat)
    expect(isinstance(is_decode_mode, bool), op, "is_decode_mode", "a bool", repr(is_decode_mode))
    out_mc = _check_rope_common(op, x, cos, sin, trans, compute_kernel_config, memory_config)
    expect(
        trans.shape[0] == 1 and trans.shape[1] == 1,
        op,
        "trans_mat shape",
        "[1, 1, 32·n, 32]",
        list(trans.shape),
    )
    if is_decode_mode:
        expect(x.shape[0] == 1, op, "input_tensor.shape[0]", "1 (decode: [1, B, nh, hd])", x.shape[0])
        for name, t in (("input_tensor", x), ("cos_cache", cos), ("sin_cache", sin), ("trans_mat", trans)):
            expect(
                t.is_sharded() and _layout_of(t) is _HEIGHT,
                op,
                f"{name} memory layout",
                "HEIGHT_SHARDED in decode mode",
                _layout_of(t).name,
            )
        grid = x.device().compute_with_storage_grid_size()
        users = x.shape[1]
        expect(
            users <= grid.x * grid.y,
            op,
            "input_tensor.shape[1] (users)",
            f"<= the {grid.x * grid.y} cores",
            users,
        )
        expect(
            cos.shape[1] == users, op, "cos_cache.shape[1]", f"the {users} users of the input", cos.shape[1]
        )
        expect(
            cos.shard_spec().shape[0] == TILE_SIZE,
            op,
            "cos_cache shard height",
            "32 (one tile per user)",
            cos.shard_spec().shape[0],
        )
        expect(
            trans.shard_spec().shape == (TILE_SIZE, TILE_SIZE),
            op,
            "trans_mat shard shape",
            "(32, 32)",
            trans.shard_spec().shape,
        )
    else:
        expect(
            _layout_of(x) is _INTERLEAVED,
            op,
            "input_tensor memory layout",
            "INTERLEAVED in prefill mode",
            _layout_of(x).name,
        )
        for name, t in (("cos_cache", cos), ("sin_cache", sin)):
            expect(
                _layout_of(t) is _INTERLEAVED,
                op,
                f"{name} memory layout",
                "INTERLEAVED like the input",
                _layout_of(t).name,
            )
        expect(cos.shape[0] == 1, op, "cos_cache.shape[0]", "1", cos.shape[0])
        expect(
            cos.shape[1] in (1, x.shape[1]),
            op,
            "cos_cache.shape[1]",
            f"1 or the {x.shape[1]} heads",
            cos.shape[1],
        )
        if cos.shape[1] == 1:
            expect(
                cos.shape[2] >= x.shape[2],
                op,
                "cos_cache.shape[2]",
                f">= the sequence length {x.shape[2]}",
                cos.shape[2],
            )
        else:
            expect(
                cos.padded_shape[2] == x.padded_shape[2],
                op,
                "cos_cache.shape[2]",
                f"the sequence length {x.shape[2]} (per-head cos)",
                cos.shape[2],
            )
        expect(
            trans.shape[2:] == (TILE_SIZE, TILE_SIZE),
            op,
            "trans_mat shape",
            "[1, 1, 32, 32]",
            list(trans.shape),
        )
    shards = []
    for i, xs in enumerate(x.shards(op)):
        c, s = cos.shards(op)[i], sin.shards(op)[i]
        tiles = _trans_tiles(trans, i)
        hd = xs.shape[-1]
        if is_decode_mode:
            users, heads = xs.shape[1], xs.shape[2]
            c_rows, s_rows = c[0, :, 0, :], s[0, :, 0, :]
            if all(np.array_equal(t, _PAIR_SWAP) for t in tiles[: min(users, len(tiles))]):
                out = _kernels.rotary_interleaved(xs.reshape(-1, hd), c_rows, s_rows, heads)
            else:
                out = np.empty((users, heads, hd), dtype=np.float32)
                for b in range(users):
                    out[b] = _rope_rows(
                        xs[0, b], c_rows[b : b + 1], s_rows[b : b + 1], tiles[b % len(tiles)], heads
                    )
        else:
            seq = xs.shape[2]
            c_rows = c[0, :, :seq, :].reshape(-1, hd)
            s_rows = s[0, :, :seq, :].reshape(-1, hd)
            out = _rope_rows(xs.reshape(-1, hd), c_rows, s_rows, tiles[0], 1)
        shards.append(np.asarray(out, dtype=np.float32).reshape(xs.shape))
    return output_like(op, shards, x, memory_config=out_mc)


@ttnn_op("ttnn.experimental.rotary_embedding_llama_fused_qk")
def rotary_embedding_llama_fused_qk(
    q_input_tensor: Tensor,
    k_input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    trans_mat: Tensor,
    *,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> tuple[Tensor, Tensor]:
    """Decode rotary on Q ``[1, B, nh, hd]`` and K ``[1, B, nkv, hd]`` at once (disjoint core grids).

    cos/sin are ``[1, 2B, 1(→32), hd]``: rows ``[0, B)`` for Q's users, ``[B, 2B)`` for K's; trans_mat is sharded one
    32×32 tile per core over at least the Q + K cores (Q user b uses tile b, K user b tile B + b). Everything is
    bfloat16, HEIGHT_SHARDED and (in the emulator) TILE layout; outputs keep the inputs' memory configs.
    """
    op = "ttnn.experimental.rotary_embedding_llama_fused_qk"
    q = _bf16_tile4(op, "q_input_tensor", q_input_tensor)
    k = _bf16_tile4(op, "k_input_tensor", k_input_tensor)
    cos = _bf16_tile4(op, "cos_cache", cos_cache)
    sin = _bf16_tile4(op, "sin_cache", sin_cache)
    trans = _bf16_tile4(op, "trans_mat", trans_mat)
    same_mesh(op, q_input_tensor=q, k_input_tensor=k)
    for name, t in (
        ("q_input_tensor", q),
        ("k_input_tensor", k),
        ("cos_cache", cos),
        ("sin_cache", sin),
        ("trans_mat", trans),
    ):
        expect(
            t.is_sharded() and _layout_of(t) is _HEIGHT,
            op,
            f"{name} memory layout",
            "HEIGHT_SHARDED",
            _layout_of(t).name,
        )
    _check_rope_common(op, q, cos, sin, trans, compute_kernel_config, None)
    expect(q.shape[0] == 1 and k.shape[0] == 1, op, "input shape[0]", "1 (decode)", (q.shape[0], k.shape[0]))
    expect(
        k.shape[-1] == q.shape[-1], op, "k_input_tensor head_dim", f"Q's head_dim {q.shape[-1]}", k.shape[-1]
    )
    users = q.shape[1]
    expect(k.shape[1] == users, op, "k_input_tensor.shape[1]", f"Q's batch {users}", k.shape[1])
    expect(users <= 32, op, "batch", "<= 32", users)
    nq_cores, nk_cores = q.shard_spec().num_cores(), k.shard_spec().num_cores()
    expect(nq_cores + nk_cores <= 64, op, "Q + K shard cores", "<= 64", nq_cores + nk_cores)
    q_cores, k_cores = set(q.shard_spec().grid.cores()), set(k.shard_spec().grid.cores())
    expect(
        not (q_cores & k_cores),
        op,
        "k_input_tensor shard grid",
        "disjoint from Q's grid",
        k.shard_spec().grid,
    )
    expect(
        cos.shape[1] == 2 * users,
        op,
        "cos_cache.shape[1]",
        f"2·batch = {2 * users} (Q users then K users)",
        cos.shape[1],
    )
    expect(
        trans.shard_spec().num_cores() >= nq_cores + nk_cores,
        op,
        "trans_mat shard cores",
        f">= Q + K cores ({nq_cores + nk_cores})",
        trans.shard_spec().num_cores(),
    )
    expect(
        trans.shard_spec().shape == (TILE_SIZE, TILE_SIZE),
        op,
        "trans_mat shard shape",
        "(32, 32)",
        trans.shard_spec().shape,
    )
    q_out, k_out = [], []
    for i, (qs, ks) in enumerate(zip(q.shards(op), k.shards(op))):
        c, s = cos.shards(op)[i][0, :, 0, :], sin.shards(op)[i][0, :, 0, :]
        tiles = _trans_tiles(trans, i)
        for xs, base, out in ((qs, 0, q_out), (ks, users, k_out)):
            hd, heads = xs.shape[-1], xs.shape[2]
            res = np.empty((users, heads, hd), dtype=np.float32)
            for b in range(users):
                res[b] = _rope_rows(
                    xs[0, b],
                    c[base + b : base + b + 1],
                    s[base + b : base + b + 1],
                    tiles[(base + b) % len(tiles)],
                    heads,
                )
            out.append(res.reshape(xs.shape))
    return output_like(op, q_out, q), output_like(op, k_out, k)


@ttnn_op("ttnn.experimental.rotary_embedding")
def rotary_embedding(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    token_index: int | None = None,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """HF-style rotary: ``out = x·cos + rotate_half(x)·sin`` with ``rotate_half(x) = [−x₂, x₁]`` (halves of the last dim).

    x ``[B, n, S, X]``, cos/sin ``[1, 1, ≥S, X]``: row s of x uses row s of cos/sin. With ``token_index`` the input is a
    decode batch ``[1, n, B, X]`` and every row uses row ``token_index``. X must split into two whole tiles.
    """
    op = "ttnn.experimental.rotary_embedding"
    x = expect_tensor(op, "input_tensor", input_tensor, layouts=(Layout.TILE,), rank=4)
    cos = expect_tensor(op, "cos_cache", cos_cache, layouts=(Layout.TILE,), rank=4)
    sin = expect_tensor(op, "sin_cache", sin_cache, layouts=(Layout.TILE,), rank=4)
    same_mesh(op, input_tensor=x, cos_cache=cos, sin_cache=sin)
    expect(x.dtype.is_float, op, "input_tensor.dtype", "a float dtype", x.dtype.name)
    check_compute_config(op, compute_kernel_config)
    out_mc = check_memory_config(op, memory_config) or x.memory_config()
    width = x.padded_shape[-1]
    expect(
        width % (2 * TILE_SIZE) == 0,
        op,
        "input_tensor.shape[-1]",
        "a multiple of 64 (two halves of whole tiles)",
        x.shape[-1],
    )
    expect(
        cos.dtype == sin.dtype, op, "sin_cache.dtype", f"cos_cache's dtype {cos.dtype.name}", sin.dtype.name
    )
    expect(
        cos.shape == sin.shape, op, "sin_cache", f"the shape of cos_cache {list(cos.shape)}", list(sin.shape)
    )
    expect(
        cos.shape[0] == 1 and cos.shape[1] == 1 and cos.shape[-1] == x.shape[-1],
        op,
        "cos_cache shape",
        f"[1, 1, S, {x.shape[-1]}]",
        list(cos.shape),
    )
    if token_index is not None:
        expect(
            isinstance(token_index, int) and not isinstance(token_index, bool) and token_index >= 0,
            op,
            "token_index",
            "a non-negative int",
            repr(token_index),
        )
        expect(x.shape[0] == 1, op, "input_tensor.shape[0]", "1 when token_index is given", x.shape[0])
        expect(
            token_index < cos.shape[-2],
            op,
            "token_index",
            f"< the {cos.shape[-2]} rows of cos_cache",
            token_index,
        )
    else:
        expect(
            cos.shape[-2] >= x.shape[-2],
            op,
            "cos_cache.shape[-2]",
            f">= the sequence length {x.shape[-2]}",
            cos.shape[-2],
        )
    if x.is_sharded():
        expect(
            _layout_of(x) is not _WIDTH,
            op,
            "input_tensor memory layout",
            "HEIGHT or BLOCK sharded",
            _layout_of(x).name,
        )
        expect(
            x.shard_spec().shape[1] == width,
            op,
            "input shard width",
            f"the padded width {width}",
            x.shard_spec().shape[1],
        )
    if out_mc.is_sharded():
        expect(
            out_mc.memory_layout is not _WIDTH,
            op,
            "memory_config",
            "not WIDTH_SHARDED",
            out_mc.memory_layout.name,
        )
    elif not x.is_sharded():
        expect(
            _layout_of(x) is _INTERLEAVED, op, "input_tensor memory layout", "INTERLEAVED", _layout_of(x).name
        )
    half = x.shape[-1] // 2
    shards = []
    for i, xs in enumerate(x.shards(op)):
        c, s = cos.shards(op)[i][0, 0], sin.shards(op)[i][0, 0]
        if token_index is not None:
            c, s = c[token_index], s[token_index]
        else:
            c, s = c[: xs.shape[-2]], s[: xs.shape[-2]]
        rotated = np.concatenate([-xs[..., half:], xs[..., :half]], axis=-1)
        shards.append((xs * c + rotated * s).astype(np.float32))
    return output_like(op, shards, x, memory_config=out_mc)
