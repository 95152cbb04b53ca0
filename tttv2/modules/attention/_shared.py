"""What Attention1D and Attention2D share: how heads are split over a group of devices (with KV-head replication
when the devices outnumber the KV heads), the per-device layout of the fused QKV weight, the rotary matrices,
the KV cache, default configs, and the middle of both forwards (head split, q/k norm, rotary, cache update,
SDPA, head merge). The two topologies differ only in how QKV comes in and how WO goes out.

Every choice known at construction is bound in ``AttentionBase._bind_common`` (paged or contiguous cache, q/k
norm present, QKV dtype, sliding window with chunked prefill); the shared forward steps below branch only on
call arguments (``kv_cache``, ``chunk_page_table``) and on shapes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, lazy_weights_of, mode_name
from tttv2.modules.lazy_weight import LazyWeight, host_array
from tttv2.modules.rope import rotation_tile
from tttv2.modules.tt_ccl import CCL_CHUNKS_PER_SYNC, CCL_NUM_BUFFERS_PER_CHANNEL, CCL_NUM_WORKERS_PER_LINK

TILE = _grids.TILE
MAX_BATCH = 32  # decode runs one 32-row tile of users
PREFILL_ROW_MULTIPLE = 128  # prefill lengths the SDPA / matmul kernels take


@dataclass(frozen=True)
class PagedAttentionConfig:
    """Paged KV cache geometry: ``max_num_blocks`` blocks of ``block_size`` tokens shared by all users through a
    page table. Any object with these two attributes (TTTv1's ``PagedAttentionConfig``) is accepted too."""

    block_size: int = 32
    max_num_blocks: int = 1024


@dataclass
class AttentionConfig:
    """The fields every attention config has (Attention1DConfig and Attention2DConfig add their topology's).
    The weights are required, ``None`` fields are resolved by the module."""

    # weights ([in, out]); Q and K columns in the interleaved-pair ("Meta") rotary order
    wqkv: LazyWeight  # [dim, (n_heads + 2·n_kv_heads)·head_dim]: Q | K | V
    wo: LazyWeight  # [n_heads·head_dim, dim]
    wqkv_bias: LazyWeight | None = None  # [(n_heads + 2·n_kv_heads)·head_dim], Q | K | V
    wqkv_per_device: bool = False  # wqkv / bias columns already laid out device by device ([q0 k0 v0 | …])
    q_norm_config: Any = None  # the topology's RMSNorm config over head_dim (Qwen3, Gemma-3), or None
    k_norm_config: Any = None

    # dims
    n_heads: int | None = None
    n_kv_heads: int | None = None
    head_dim: int | None = None
    dim: int | None = None  # from wqkv
    max_batch_size: int = 32
    max_seq_len: int | None = None  # sizes the contiguous KV cache

    # mesh and collectives
    mesh_device: Any = None
    tt_ccl: Any = None
    topology: Any = None
    num_reduce_scatter_links: int = 1
    ccl_chunks_per_sync: int = CCL_CHUNKS_PER_SYNC
    ccl_num_workers_per_link: int = CCL_NUM_WORKERS_PER_LINK
    ccl_num_buffers_per_channel: int = CCL_NUM_BUFFERS_PER_CHANNEL

    # attention
    scale: float | None = None  # head_dim ** -0.5
    sliding_window: int | None = None

    # KV cache: contiguous [users, kv heads, max_seq_len, hd] or paged [blocks, kv heads, block, hd] per device
    paged_attention_config: Any = None  # PagedAttentionConfig (block_size, max_num_blocks) or None
    external_kv_cache: bool = False  # the caller (a serving engine) passes kv_cache to every forward
    kv_cache: list | None = None  # [K, V] as LazyWeight or ttnn.Tensor; zeros when None
    kv_cache_dtype: Any = None

    # dtypes
    wqkv_dtype: Any = None
    wo_dtype: Any = None
    wqkv_bias_dtype: Any = None
    qkv_dtype: Any = None  # the QKV projection's output
    prefill_attention_dtype: Any = None  # Q into prefill SDPA and the prefill WO output

    # compute kernels
    li_qkv_decode_compute_kernel_cfg: Any = None
    sdpa_decode_compute_kernel_cfg: Any = None
    li_o_decode_compute_kernel_cfg: Any = None
    li_qkv_prefill_compute_kernel_cfg: Any = None
    sdpa_prefill_compute_kernel_cfg: Any = None
    li_o_prefill_compute_kernel_cfg: Any = None

    # decode
    decode_input_memcfg: Any = None
    decode_create_qkv_head_memcfg: Any = None
    decode_sdpa_prg_config: Any = None
    decode_scores_memcfg: Any = None

    # prefill: program configs are functions of seq_len
    prefill_input_memcfg: Any = None
    prefill_xqkv_prg_config: Callable[[int], Any] | None = None
    prefill_sdpa_prg_config: Callable[..., Any] | None = None  # (seq_len, chunk_start_idx=None)
    prefill_wo_prg_config: Callable[[int], Any] | None = None
    max_qkv_mm_seq_len: int = 2048  # longer prefills run the QKV matmul in pieces of this many rows
    max_wo_mm_seq_len: int = 1024  # ... and WO in pieces of this many

    # rotary matrices (LazyWeight or ttnn.Tensor); built when None
    transformation_mat_decode: Any = None
    transformation_mat_prefill: Any = None


@dataclass(frozen=True)
class HeadLayout:
    """How the heads of one attention layer are split over ``shards`` devices.

    Q heads are split evenly. KV heads are split evenly when there are at least as many as devices; otherwise
    each device holds one KV head, the one its Q heads attend to (device d gets KV head d // kv_repeat)."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    shards: int

    @property
    def local_heads(self) -> int:
        return self.n_heads // self.shards

    @property
    def local_kv_heads(self) -> int:
        return max(self.n_kv_heads // self.shards, 1)

    @property
    def kv_repeat(self) -> int:
        """How many devices hold a copy of each KV head (1: no replication)."""
        return max(self.shards // self.n_kv_heads, 1)

    @property
    def qkv_size(self) -> int:
        """Columns of the fused QKV weight as given: Q | K | V over all heads."""
        return (self.n_heads + 2 * self.n_kv_heads) * self.head_dim

    @property
    def local_qkv_size(self) -> int:
        """Columns of one device's share of the fused QKV weight: its Q heads, then its K and V heads."""
        return (self.local_heads + 2 * self.local_kv_heads) * self.head_dim

    def qkv_columns(self) -> np.ndarray:
        """Indices into the Q | K | V columns that lay them out device by device: [q0 k0 v0 | q1 k1 v1 | ...]."""
        hd = self.head_dim
        k_start, v_start = self.n_heads * hd, (self.n_heads + self.n_kv_heads) * hd

        def heads(start: int, first: int, count: int) -> np.ndarray:
            return np.arange(start + first * hd, start + (first + count) * hd)

        parts = []
        for device in range(self.shards):
            kv_first = device * self.local_kv_heads // self.kv_repeat
            parts += [
                heads(0, device * self.local_heads, self.local_heads),
                heads(k_start, kv_first, self.local_kv_heads),
                heads(v_start, kv_first, self.local_kv_heads),
            ]
        return np.concatenate(parts)


def _positive_int(owner: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")
    return int(value)


def head_layout(owner: str, config, shards: int, shard_axis: str) -> HeadLayout:
    """Validate the head counts of ``config`` against ``shards`` devices (named ``shard_axis`` in errors)."""
    for name in ("n_heads", "n_kv_heads", "head_dim"):
        if getattr(config, name) is None:
            raise ValueError(f"{owner}: {name} is required (it cannot be inferred from the fused QKV weight)")
    n_heads = _positive_int(owner, "n_heads", config.n_heads)
    n_kv = _positive_int(owner, "n_kv_heads", config.n_kv_heads)
    head_dim = _positive_int(owner, "head_dim", config.head_dim)
    if n_heads % n_kv:
        raise ValueError(f"{owner}: n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv})")
    if head_dim % TILE:
        raise ValueError(f"{owner}: head_dim must be a multiple of {TILE}, got {head_dim}")
    if n_heads % shards:
        raise ValueError(f"{owner}: n_heads ({n_heads}) must divide evenly over the {shards} {shard_axis}")
    if n_kv % shards and shards % n_kv:
        raise ValueError(
            f"{owner}: n_kv_heads ({n_kv}) must divide evenly over the {shards} {shard_axis}, or divide "
            f"{shards} so that each KV head is replicated on whole devices"
        )
    return HeadLayout(n_heads, n_kv, head_dim, shards)


def check_weight_types(owner: str, config) -> None:
    for name in ("wqkv", "wo"):
        if not isinstance(getattr(config, name), LazyWeight):
            raise TypeError(
                f"{owner}: {name} must be a LazyWeight, got {type(getattr(config, name)).__name__}"
            )


def resolve_head_norm(
    owner: str, name: str, norm_config, layout: HeadLayout, mesh, config_class, local: dict
):
    """A q/k norm config placed on ``mesh`` and made local: decode heads reach the norm as whole, interleaved
    rows on every device (``local`` holds the fields that say so for ``config_class``)."""
    weight = getattr(norm_config, "weight", None)
    if not isinstance(norm_config, config_class):
        raise TypeError(
            f"{owner}: {name} must be a {config_class.__name__}, got {type(norm_config).__name__}"
        )
    if not isinstance(weight, LazyWeight) or math.prod(weight.shape) != layout.head_dim:
        raise ValueError(
            f"{owner}: {name}.weight must hold head_dim={layout.head_dim} values, got shape "
            f"{getattr(weight, 'shape', None)}"
        )
    return replace(norm_config, mesh_device=norm_config.mesh_device or mesh, **local)


def check_common(owner: str, config, layout: HeadLayout) -> None:
    """Shapes of the weights and the bounds every topology shares."""
    dim = config.dim or config.wqkv.shape[-2]
    qkv_width = layout.shards * layout.local_qkv_size if config.wqkv_per_device else layout.qkv_size
    expected = {
        "wqkv": (dim, qkv_width),
        "wo": (layout.n_heads * layout.head_dim, dim),
    }
    for name, shape in expected.items():
        got = getattr(config, name).shape[-2:]
        if tuple(got) != shape:
            raise ValueError(
                f"{owner}: {name} must have shape {shape} ([in, out] with n_heads={layout.n_heads}, "
                f"n_kv_heads={layout.n_kv_heads}, head_dim={layout.head_dim}, dim={dim}), got {tuple(got)}"
            )
    if config.wqkv_bias is not None:
        if not isinstance(config.wqkv_bias, LazyWeight):
            raise TypeError(f"{owner}: wqkv_bias must be a LazyWeight, got {type(config.wqkv_bias).__name__}")
        if config.wqkv_bias.shape[-1] != qkv_width or math.prod(config.wqkv_bias.shape) != qkv_width:
            raise ValueError(
                f"{owner}: wqkv_bias must hold {qkv_width} values (like wqkv's columns), got shape "
                f"{config.wqkv_bias.shape}"
            )
    batch = _positive_int(owner, "max_batch_size", config.max_batch_size)
    if batch > MAX_BATCH:
        raise ValueError(
            f"{owner}: max_batch_size must be at most {MAX_BATCH} (one tile of users), got {batch}"
        )
    if config.max_seq_len is None:
        raise ValueError(f"{owner}: max_seq_len is required (it sizes the KV cache)")
    if _positive_int(owner, "max_seq_len", config.max_seq_len) % TILE:
        raise ValueError(f"{owner}: max_seq_len must be a multiple of {TILE}, got {config.max_seq_len}")
    if config.sliding_window is not None:
        _positive_int(owner, "sliding_window", config.sliding_window)
    paged = config.paged_attention_config
    if paged is not None:
        for name in ("block_size", "max_num_blocks"):
            if not hasattr(paged, name):
                raise TypeError(f"{owner}: paged_attention_config needs a {name} attribute, got {paged!r}")
        if _positive_int(owner, "paged_attention_config.block_size", paged.block_size) % TILE:
            raise ValueError(
                f"{owner}: paged_attention_config.block_size must be a multiple of {TILE}, got {paged.block_size}"
            )
        _positive_int(owner, "paged_attention_config.max_num_blocks", paged.max_num_blocks)


# --- weights laid out per device ----------------------------------------------------------------------------


def per_device_qkv(weight: LazyWeight, layout: HeadLayout, already: bool) -> LazyWeight:
    """The fused QKV weight (or bias) with its columns reordered device by device; sharding the result on the
    last dim gives each device its own Q, K and V heads side by side (KV heads copied where replicated).
    ``already``: the columns are in that order (a resolved config, or a caller who laid them out)."""
    columns = layout.qkv_columns()
    if already or (layout.kv_repeat == 1 and layout.shards == 1):
        return weight
    source = host_array(weight.source)
    return replace(weight, source=np.ascontiguousarray(source[..., columns]))


def as_4d(weight: LazyWeight) -> LazyWeight:
    """A matrix weight as [1, 1, in, out], the rank the fused all-gather matmul takes."""
    if len(weight.shape) == 4:
        return weight
    return replace(weight, source=host_array(weight.source).reshape(1, 1, *weight.shape[-2:]))


def bias_rows(bias: LazyWeight, rows: int) -> LazyWeight:
    """The QKV bias as a [1, 1, rows, width] block (the decode add does not broadcast)."""
    row = host_array(bias.source).reshape(1, 1, 1, -1)
    name = None if bias.name is None else f"{bias.name}_{rows}"
    return replace(
        bias, source=np.ascontiguousarray(np.broadcast_to(row, (1, 1, rows, row.shape[-1]))), name=name
    )


def bias_row(bias: LazyWeight) -> LazyWeight:
    """The QKV bias as one [1, 1, 1, width] row that prefill's add broadcasts over the sequence."""
    return replace(bias, source=host_array(bias.source).reshape(1, 1, 1, -1))


def user_cores(mesh_device, users: int):
    """One core per user, row-major over the worker grid."""
    return ttnn.num_cores_to_corerangeset(users, mesh_device.compute_with_storage_grid_size(), row_wise=True)


def per_user_height_sharded(mesh_device, users: int, width: int) -> ttnn.MemoryConfig:
    """Height-sharded one 32-row block per user (the decode rotary inputs)."""
    return ttnn.create_sharded_memory_config(
        shape=(TILE, width),
        core_grid=user_cores(mesh_device, users),
        strategy=ttnn.ShardStrategy.HEIGHT,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def decode_transformation_mat(mesh_device, users: int, mesh_mapper_config=None) -> LazyWeight:
    """The decode rotation matrix: one tile per user, height-sharded one user per core."""
    return LazyWeight(
        np.concatenate([rotation_tile()] * users, axis=2),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        memory_config=per_user_height_sharded(mesh_device, users, TILE),
        mesh_mapper_config=mesh_mapper_config,
        device=mesh_device,
        name="transformation_mat_decode",
    )


def prefill_transformation_mat(mesh_device) -> LazyWeight:
    """The prefill rotation matrix: one tile in DRAM, replicated."""
    return LazyWeight(
        rotation_tile(),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        device=mesh_device,
        name="transformation_mat_prefill",
    )


def kv_cache_shape(config, layout: HeadLayout, users: int) -> tuple[int, int, int, int]:
    """[blocks, kv heads, block size, head_dim] when paged, else [users, kv heads, max_seq_len, head_dim]."""
    paged = config.paged_attention_config
    if paged is not None:
        return (paged.max_num_blocks, layout.local_kv_heads, paged.block_size, layout.head_dim)
    return (users, layout.local_kv_heads, config.max_seq_len, layout.head_dim)


def zero_kv_cache(mesh_device, shape, dtype) -> list[LazyWeight]:
    """Zero-filled K and V caches, replicated (each device keeps the heads of its own share)."""
    return [
        LazyWeight(
            np.zeros(shape, dtype=np.float32),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            device=mesh_device,
            name=name,
        )
        for name in ("k_cache", "v_cache")
    ]


# --- default configs ------------------------------------------------------------------------------------------


def sdpa_prefill_program_config(grid=(8, 8)):
    """seq_len, chunk_start_idx → SDPA chunking: 64-row chunks below 2048 tokens, 256 from there; a chunked
    prefill's K chunk may not straddle the chunk start, so it is capped by the start's lowest set bit."""

    @functools.lru_cache
    def config(seq_len: int, chunk_start_idx: int | None = None):
        chunk = 64 if seq_len < 2048 else 256
        k_chunk = chunk if not chunk_start_idx else min(chunk, chunk_start_idx & -chunk_start_idx)
        return ttnn.SDPAProgramConfig(
            compute_with_storage_grid_size=grid,
            exp_approx_mode=False,
            q_chunk_size=chunk,
            k_chunk_size=k_chunk,
        )

    return config


def prefill_matmul_config(k: int, n: int, max_rows: int):
    """seq_len → the multicast program config of a prefill matmul [rows, k] @ [k, n]; prompts longer than
    ``max_rows`` run as a batch of ``max_rows``-row pieces."""

    @functools.lru_cache
    def config(seq_len: int):
        m = min(seq_len, max_rows)
        return _grids.multicast_matmul(m, k, n, _grids.prefill_grid(m, n), fuse_batch=seq_len <= max_rows)

    return config


def sdpa_decode_program_config(grid=(8, 8)):
    return ttnn.SDPAProgramConfig(
        compute_with_storage_grid_size=grid, exp_approx_mode=False, q_chunk_size=0, k_chunk_size=0
    )


def kv_prefill_memcfg(layout: HeadLayout):
    """seq_len → the K/V of one prefill height-sharded over the 8×8 grid (for long contiguous-cache fills)."""

    @functools.lru_cache
    def config(seq_len: int):
        return ttnn.create_sharded_memory_config(
            (layout.local_kv_heads * seq_len // 64, layout.head_dim),
            ttnn.CoreGrid(y=8, x=8),
            ttnn.ShardStrategy.HEIGHT,
            ttnn.ShardOrientation.ROW_MAJOR,
            use_height_and_width_as_shard_shape=True,
        )

    return config


def scores_memcfg(mesh_device, layout: HeadLayout, users: int) -> ttnn.MemoryConfig:
    """Decode SDPA output before the head merge: one user per core, that user's heads padded to a tile."""
    return ttnn.create_sharded_memory_config(
        shape=(_grids.nearest_multiple(layout.local_heads, TILE), layout.head_dim),
        core_grid=user_cores(mesh_device, users),
        strategy=ttnn.ShardStrategy.HEIGHT,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def create_qkv_head_memcfg(mesh_device, head_dim: int):
    """Where the decode head split puts Q/K/V: the shard-spec-less height-sharded config on Wormhole, an
    explicit one-tile-per-core height shard on Blackhole."""
    if mesh_device.arch() != ttnn.Arch.BLACKHOLE:
        return ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG
    return ttnn.create_sharded_memory_config(
        (TILE, head_dim),
        ttnn.CoreGrid(x=8, y=4),
        ttnn.ShardStrategy.HEIGHT,
        ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


# the TTTv1 tensor / op group of each dtype and compute-kernel field (see tttv2/modules/_hardware.py)
HW_DTYPE_GROUPS = {"wqkv_dtype": "wqkv", "wo_dtype": "wo", "kv_cache_dtype": "kv_cache"}
HW_MATH_GROUPS = {
    "li_qkv_decode_compute_kernel_cfg": "li_qkv_decode",
    "sdpa_decode_compute_kernel_cfg": "sdpa_decode",
    "li_o_decode_compute_kernel_cfg": "li_o_decode",
    "li_qkv_prefill_compute_kernel_cfg": "li_qkv_prefill",
    "sdpa_prefill_compute_kernel_cfg": "sdpa_prefill",
    "li_o_prefill_compute_kernel_cfg": "li_o_prefill",
}


def default_compute_configs() -> dict[str, Any]:
    """Matmuls and decode SDPA at HiFi2 with 16-bit accumulation; prefill SDPA at HiFi4 with fp32."""
    hifi2 = _grids.default_matmul_compute_config()
    return dict(
        li_qkv_decode_compute_kernel_cfg=hifi2,
        sdpa_decode_compute_kernel_cfg=hifi2,
        li_o_decode_compute_kernel_cfg=hifi2,
        li_qkv_prefill_compute_kernel_cfg=hifi2,
        sdpa_prefill_compute_kernel_cfg=_grids.compute_kernel_config(
            ttnn.MathFidelity.HiFi4, fp32_acc=True, l1_acc=False
        ),
        li_o_prefill_compute_kernel_cfg=hifi2,
    )


def fill_unset(config, defaults: dict):
    """``config`` with ``defaults`` applied where the field is None (fields the caller set win)."""
    return replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})


def device_getter(weight):
    """A no-argument callable giving ``weight``'s device tensor: a LazyWeight converts on first call, a device
    tensor is returned as given (decided once, at construction)."""
    if isinstance(weight, LazyWeight):
        return weight.get_device_weight
    return functools.partial(_given, weight)


def _given(tensor):
    return tensor


# --- the shared module ---------------------------------------------------------------------------------------


class Tttv1CallShape:
    """``forward`` with TTTv1's call shape: ``mode`` picks ``decode_forward`` or ``prefill_forward``."""

    def forward(
        self,
        x,
        current_pos=None,
        rot_mats=None,
        user_id: int = 0,
        mode="decode",
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ):
        if mode_name(type(self).__name__, mode) == "decode":
            return self.decode_forward(x, current_pos, rot_mats, page_table=page_table, kv_cache=kv_cache)
        return self.prefill_forward(
            x,
            rot_mats,
            user_id=user_id,
            page_table=page_table,
            chunk_page_table=chunk_page_table,
            chunk_start_idx=chunk_start_idx,
            kv_cache=kv_cache,
        )


class AttentionBase(Tttv1CallShape, TTModule):
    """Bound strategies and forward steps shared by Attention1D and Attention2D (see the module docstring)."""

    def __init__(
        self,
        wqkv: LazyWeight,
        wo: LazyWeight,
        n_heads: int,
        n_kv_heads: int,
        head_dim: int,
        max_batch_size: int = 32,
        max_seq_len: int | None = None,
    ) -> None:
        """The happy path: the two weights and the dims that cannot be inferred from them."""
        self._setup(
            self.CONFIG_CLASS(
                wqkv=wqkv,
                wo=wo,
                n_heads=n_heads,
                n_kv_heads=n_kv_heads,
                head_dim=head_dim,
                max_batch_size=max_batch_size,
                max_seq_len=max_seq_len,
            )
        )

    layout: HeadLayout
    users: int  # users (decode rows) one device serves
    _NORM_CLASS: type  # the RMSNorm of the q/k norms on this topology
    q_norm: TTModule | None  # the per-head norms (their resolved configs are q_norm.config / k_norm.config)
    k_norm: TTModule | None

    # --- binding (construction only) ----------------------------------------------------------------------

    def _bind_common(self) -> None:
        cfg = self.config
        paged = cfg.paged_attention_config is not None
        self._sdpa_decode = self._sdpa_decode_paged if paged else self._sdpa_decode_contiguous
        self._sdpa_decode_options = dict(
            scale=cfg.scale,
            sliding_window_size=cfg.sliding_window,
            program_config=cfg.decode_sdpa_prg_config,
            compute_kernel_config=cfg.sdpa_decode_compute_kernel_cfg,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )
        self._fill_prefill = self._fill_paged if paged else self._fill_contiguous
        self._check_chunked = _ccl.unchanged if paged else self._chunked_needs_paging
        if cfg.sliding_window is not None:
            self._check_chunked = self._chunked_sliding_window
        self._own_kv_cache = self._external_cache_missing if cfg.external_kv_cache else self._stored_kv_cache
        if not cfg.external_kv_cache:
            self._k_cache, self._v_cache = (device_getter(cache) for cache in cfg.kv_cache)
        self._trans_decode = device_getter(cfg.transformation_mat_decode)
        self._trans_prefill = device_getter(cfg.transformation_mat_prefill)
        # the prefill rotary kernel takes bfloat16 heads only
        self._rotary_input = _ccl.unchanged if cfg.qkv_dtype == ttnn.bfloat16 else _to_bfloat16
        if cfg.wqkv_bias is not None:
            # decode: no broadcasting (it must also run under a captured trace), so a block as tall as the
            # padded batch (one tile); prefill: one row that the add broadcasts over the sequence
            self._bias_decode = bias_rows(cfg.wqkv_bias, TILE)
            self._bias_prefill = bias_row(cfg.wqkv_bias)
        self.q_norm = self._norm_module(cfg.q_norm_config)
        self.k_norm = self._norm_module(cfg.k_norm_config)
        self._norm_q_decode = self._norm_decode_with(self.q_norm) if self.q_norm else _ccl.unchanged
        self._norm_k_decode = self._norm_decode_with(self.k_norm) if self.k_norm else _ccl.unchanged
        self._norm_q_prefill = self.q_norm.prefill_forward if self.q_norm else _ccl.unchanged
        self._norm_k_prefill = self.k_norm.prefill_forward if self.k_norm else _ccl.unchanged

    def _norm_module(self, norm_config):
        return None if norm_config is None else self._NORM_CLASS.from_config(norm_config)

    @staticmethod
    def _norm_decode_with(norm):
        """Decode heads are height-sharded, which the norm does not take: normalise an L1 interleaved copy,
        then put the result back on the heads' sharded layout."""

        def normed(heads):
            sharded = heads.memory_config()
            out = norm.decode_forward(ttnn.to_memory_config(heads, ttnn.L1_MEMORY_CONFIG, dtype=heads.dtype))
            return ttnn.to_memory_config(out, sharded, dtype=out.dtype)

        return normed

    # --- public helpers ----------------------------------------------------------------------------------------

    @property
    def kv_cache(self) -> list:
        """This layer's own [K, V] cache device tensors (allocated on first use)."""
        return list(self._own_kv_cache())

    def load_device_weights(self) -> None:
        # the q/k norm configs are resolved by their own modules (``q_norm`` / ``k_norm``), not in this config
        for weight in lazy_weights_of(replace(self.config, q_norm_config=None, k_norm_config=None)):
            weight.get_device_weight()
        for norm in (self.q_norm, self.k_norm):
            if norm is not None:
                norm.load_device_weights()
        if self.config.wqkv_bias is not None:
            self._bias_decode.get_device_weight()
            self._bias_prefill.get_device_weight()

    # --- KV cache ----------------------------------------------------------------------------------------------

    def _stored_kv_cache(self):
        return self._k_cache(), self._v_cache()

    def _external_cache_missing(self):
        raise ValueError(
            f"{type(self).__name__} was built with external_kv_cache=True: pass kv_cache=[k_cache, v_cache] "
            "to the forward"
        )

    def _caches(self, kv_cache):
        """The caller's [K, V] cache when given (serving engines own it), else this layer's own (fetched first in
        each forward, so that a missing external cache fails before any work)."""
        if kv_cache is None:
            return self._own_kv_cache()
        return kv_cache[0], kv_cache[1]

    # --- decode steps ------------------------------------------------------------------------------------------

    def _int_input(self, x, mapper, arg: str):
        """Positions / page tables: a device tensor as given, a LazyWeight (host array) as int32 row-major."""
        if isinstance(x, LazyWeight):
            x = x.with_defaults(dtype=ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
        return load_input(
            x,
            owner=type(self).__name__,
            device=self.config.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper_config=mapper,
            arg=arg,
        )

    def _positions(self, current_pos):
        return self._int_input(current_pos, self._users_mapper, "current_pos")

    def _table(self, table, mapper):
        """An optional page table (None passes through)."""
        if table is None:
            return None
        return self._int_input(table, mapper, "page_table")

    def prepare_positions(self, positions) -> ttnn.Tensor:
        """Host positions [max_batch_size] (a sequence, numpy or torch) → the int32 device tensor
        ``decode_forward`` takes."""
        values = host_array(positions) if hasattr(positions, "detach") else np.asarray(positions)
        return self._positions(LazyWeight(values.astype(np.int32).reshape(-1)))

    def _attend_decode(self, qkv, current_pos, rot_mats, page_table, caches):
        """[1, 1, users (→32), local QKV] bfloat16 interleaved → merged heads [1, 1, users, local heads · hd]."""
        cfg = self.config
        layout = self.layout
        width = qkv.shape[3]
        qkv = ttnn.reshape(qkv, (1, 1, self.users, width), (1, 1, TILE, width))
        q, k, v = ttnn.experimental.nlp_create_qkv_heads_decode(
            qkv,
            num_heads=layout.local_heads,
            num_kv_heads=layout.local_kv_heads,
            memory_config=cfg.decode_create_qkv_head_memcfg,
        )
        q = self._norm_q_decode(q)
        k = self._norm_k_decode(k)
        ttnn.deallocate(qkv)

        cos, sin = rot_mats[0], rot_mats[1]
        trans = self._trans_decode()
        q_rot = ttnn.experimental.rotary_embedding_llama(q, cos, sin, trans, is_decode_mode=True)
        k_rot = ttnn.experimental.rotary_embedding_llama(k, cos, sin, trans, is_decode_mode=True)
        ttnn.deallocate(q)
        ttnn.deallocate(k)

        cache_k, cache_v = caches
        ttnn.experimental.paged_update_cache(
            cache_k, k_rot, update_idxs_tensor=current_pos, page_table=page_table
        )
        ttnn.deallocate(k_rot)
        ttnn.experimental.paged_update_cache(
            cache_v, v, update_idxs_tensor=current_pos, page_table=page_table
        )
        ttnn.deallocate(v)

        scores = self._sdpa_decode(q_rot, cache_k, cache_v, current_pos, page_table)
        ttnn.deallocate(q_rot)
        scores_sharded = ttnn.to_memory_config(scores, memory_config=cfg.decode_scores_memcfg)
        merged = ttnn.experimental.nlp_concat_heads_decode(scores_sharded, num_heads=layout.local_heads)
        ttnn.deallocate(scores_sharded)
        ttnn.deallocate(scores)
        return merged

    def _sdpa_decode_contiguous(self, q, cache_k, cache_v, current_pos, page_table):
        return ttnn.transformer.scaled_dot_product_attention_decode(
            q, cache_k, cache_v, cur_pos_tensor=current_pos, **self._sdpa_decode_options
        )

    def _sdpa_decode_paged(self, q, cache_k, cache_v, current_pos, page_table):
        return ttnn.transformer.paged_scaled_dot_product_attention_decode(
            q,
            cache_k,
            cache_v,
            cur_pos_tensor=current_pos,
            page_table_tensor=page_table,
            **self._sdpa_decode_options,
        )

    # --- prefill steps -----------------------------------------------------------------------------------------

    def _prefill_input(self, x, chunk_start_idx):
        """The prompt on device and its length, after the checks that need no device work."""
        cfg = self.config
        if chunk_start_idx is not None:
            self._check_chunked(chunk_start_idx)
        x = load_input(
            x,
            owner=f"{type(self).__name__}.prefill_forward",
            device=cfg.mesh_device,
            memory_config=cfg.prefill_input_memcfg,
            mesh_mapper_config=self._input_mapper,
        )
        seq_len = x.shape[-2]
        if seq_len % PREFILL_ROW_MULTIPLE:
            raise ValueError(
                f"{type(self).__name__}.prefill_forward: seq_len must be a positive multiple of "
                f"{PREFILL_ROW_MULTIPLE}, got {seq_len} (pad the prompt)"
            )
        return x, seq_len

    def _fold_rows(self, x, seq_len: int, rows: int):
        """Sequences longer than ``rows`` run their matmul as a batch of ``rows``-row pieces."""
        if seq_len <= rows:
            return x
        if seq_len % rows:
            raise ValueError(
                f"{type(self).__name__}.prefill_forward: seq_len {seq_len} must be a multiple of {rows} "
                f"once it exceeds {rows}"
            )
        return ttnn.reshape(x, [1, seq_len // rows, rows, -1])

    @staticmethod
    def _unfold_rows(x, seq_len: int, rows: int):
        if seq_len <= rows:
            return x
        return ttnn.reshape(x, [1, 1, seq_len, -1])

    def _attend_prefill(
        self, qkv, seq_len, rot_mats, user_id, page_table, chunk_page_table, chunk_start_idx, caches
    ):
        """[1, 1, S, local QKV] → merged heads [1, 1, S, local heads · hd]; fills this user's K/V cache."""
        cfg = self.config
        layout = self.layout
        q, k, v = ttnn.experimental.nlp_create_qkv_heads(
            qkv,
            num_heads=layout.local_heads,
            num_kv_heads=layout.local_kv_heads,
            transpose_k_heads=False,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )
        q = self._norm_q_prefill(q)
        k = self._norm_k_prefill(k)
        ttnn.deallocate(qkv)

        trans = self._trans_prefill()
        q_rot = self._rotate_prefill(q, rot_mats, trans)
        k_rot = self._rotate_prefill(k, rot_mats, trans)

        cache_k, cache_v = caches
        k_cached = ttnn.typecast(k_rot, dtype=cache_k.dtype)
        ttnn.deallocate(k_rot)
        v_cached = ttnn.typecast(v, dtype=cache_v.dtype)
        ttnn.deallocate(v)
        self._fill_prefill(
            cache_k, cache_v, k_cached, v_cached, seq_len, user_id, page_table, chunk_page_table
        )

        q_sdpa = ttnn.typecast(q_rot, dtype=cfg.prefill_attention_dtype)
        ttnn.deallocate(q_rot)
        if chunk_start_idx is None:
            context = ttnn.transformer.scaled_dot_product_attention(
                q_sdpa,
                k_cached,
                v_cached,
                is_causal=True,
                scale=cfg.scale,
                sliding_window_size=cfg.sliding_window,
                program_config=cfg.prefill_sdpa_prg_config(seq_len),
                compute_kernel_config=cfg.sdpa_prefill_compute_kernel_cfg,
            )
        else:
            context = self._chunked_sdpa(q_sdpa, cache_k, cache_v, page_table, chunk_start_idx, seq_len)
        for done in (q_sdpa, k_cached, v_cached):
            ttnn.deallocate(done)

        context = ttnn.reshape(context, [1, layout.local_heads, -1, layout.head_dim])
        merged = ttnn.experimental.nlp_concat_heads(context, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        ttnn.deallocate(context)
        return merged

    def _rotate_prefill(self, heads, rot_mats, trans):
        heads = self._rotary_input(heads)
        rotated = ttnn.experimental.rotary_embedding_llama(
            heads, rot_mats[0], rot_mats[1], trans, is_decode_mode=False
        )
        ttnn.deallocate(heads)
        return rotated

    def _fill_paged(self, cache_k, cache_v, k, v, seq_len, user_id, page_table, chunk_page_table):
        """The pages of this prefill (a chunk's own table in chunked prefill) cover the real tokens only: the
        padded tail of the sequence is dropped so the fill does not run past them."""
        pages = page_table if chunk_page_table is None else chunk_page_table
        covered = pages.shape[1] * cache_k.shape[2]
        for cache, fill in ((cache_k, k), (cache_v, v)):
            if covered < fill.shape[2]:
                fill = fill[:, :, :covered, :]
            ttnn.experimental.paged_fill_cache(cache, fill, pages, batch_idx=0)

    def _chunked_sdpa(self, q, cache_k, cache_v, page_table, chunk_start_idx, seq_len):
        """A later chunk of a long prompt attends to everything already in the paged cache."""
        cfg = self.config
        return ttnn.transformer.chunked_scaled_dot_product_attention(
            input_tensor_q=q,
            input_tensor_k=cache_k,
            input_tensor_v=cache_v,
            page_table_tensor=page_table,
            chunk_start_idx=chunk_start_idx,
            program_config=cfg.prefill_sdpa_prg_config(seq_len, chunk_start_idx),
            compute_kernel_config=cfg.sdpa_prefill_compute_kernel_cfg,
        )

    def _chunked_needs_paging(self, *_):
        raise ValueError(
            f"{type(self).__name__}.prefill_forward: chunked prefill (chunk_start_idx) needs a paged KV cache; "
            "build the module with paged_attention_config"
        )

    def _chunked_sliding_window(self, *_):
        raise ValueError(
            f"{type(self).__name__}.prefill_forward: chunked prefill (chunk_start_idx) is not available with "
            "a sliding window"
        )


def _to_bfloat16(heads):
    return ttnn.typecast(heads, dtype=ttnn.bfloat16)
