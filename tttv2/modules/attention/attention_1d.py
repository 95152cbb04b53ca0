"""Attention1D: grouped-query attention with a KV cache on a 1-D mesh (1x1, 1x2, 1x4, 1x8).

The heads are split over the devices (Q heads evenly; KV heads evenly, or replicated when the devices outnumber
them), so QKV needs no collective. Each device's WO product is a partial sum over its heads: a reduce-scatter
sums it and leaves each device its slice of ``dim`` (the fractured residual stream). On a Ring the
all-gather of the heads can instead be fused into the WO matmul (WO split by columns, no reduction). Decode runs
one token for up to 32 users; prefill runs one user's prompt (a multiple of 128 tokens), optionally as one chunk
of a longer prompt against a paged cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._topology import default_topology, num_devices, require_1d_mesh, resolve_mesh_device
from tttv2.modules.attention import _shared, _tttv1_bridge
from tttv2.modules.rmsnorm import RMSNorm1D, RMSNorm1DConfig
from tttv2.modules.tt_ccl import get_tt_ccl

__all__ = ["Attention1D", "Attention1DConfig"]

# q/k norms see whole heads on every device, interleaved
_LOCAL_NORM = dict(decode_in_sharded=False, decode_out_sharded=False, prefill_distributed=False)
_OWNER = "Attention1D"
_AG_MM_CORES = 8  # the fused all-gather + WO matmul runs on one row of 8 cores


@dataclass
class Attention1DConfig(_shared.AttentionConfig):
    """Everything Attention1D needs: the fields every attention config has (``AttentionConfig``) and the 1-D
    ones below. ``None`` fields are resolved by ``Attention1D`` (see docs/attention.md)."""

    num_all_gather_links: int = 1
    activation_dtype: Any = None  # optional override of qkv_dtype and prefill_attention_dtype

    # weight placement
    wqkv_memcfg: Any = None
    wo_memcfg: Any = None

    # decode
    decode_xqkv_prg_config: Any = None
    decode_attn_output_prg_config: Any = None
    decode_residual_memcfg: Any = None

    # fused all-gather + WO matmul (decode; prefill all-gathers before WO): Ring topology only
    use_fused_all_gather_matmul: bool | None = None
    decode_all_gather_matmul_prg_config: Any = None
    decode_all_gather_matmul_memcfg: Any = None
    decode_all_gather_matmul_num_links: int = 1

    # prefill: contiguous fills of at least min_kv_prefill_shard_seqlen rows go through an L1 height shard
    prefill_kv_memcfg: Callable[[int], Any] | None = None
    min_kv_prefill_shard_seqlen: int | None = None


def _resolve_attention1d_config(config: Attention1DConfig) -> Attention1DConfig:
    """A resolved copy of ``config``; fields the caller set are kept as they are."""
    _shared.check_weight_types(_OWNER, config)
    mesh = resolve_mesh_device(_OWNER, config.mesh_device, config.wqkv, config.wo)
    require_1d_mesh(_OWNER, mesh, "Attention2D")
    n = num_devices(mesh)
    layout = _shared.head_layout(_OWNER, config, n, "devices")
    _shared.check_common(_OWNER, config, layout)
    dim = config.dim or config.wqkv.shape[-2]
    if dim % (_grids.TILE * n):
        raise ValueError(f"{_OWNER}: dim must split into whole tiles over {n} devices, got dim={dim}")

    rows = _grids.nearest_multiple(config.max_batch_size, _grids.TILE)
    local_qkv = layout.local_qkv_size
    heads_width = layout.local_heads * layout.head_dim
    topology = config.topology if config.topology is not None else default_topology(mesh)
    fused = config.use_fused_all_gather_matmul
    if fused is None:
        fused = (
            topology == ttnn.Topology.Ring
            and (dim // _grids.TILE // n) % _AG_MM_CORES == 0
            and (layout.n_heads * layout.head_dim // _grids.TILE) % _AG_MM_CORES == 0
        )
    if fused and n == 1:
        raise ValueError(f"{_OWNER}: use_fused_all_gather_matmul needs more than one device")
    qkv_grid = _grids.grid_dividing(dim // _grids.TILE, local_qkv // _grids.TILE)
    residual_grid = _grids.grid_near_32_cores(dim // n // _grids.TILE)
    dram_banks = mesh.dram_grid_size().x
    activation_dtype = config.activation_dtype

    defaults = dict(
        mesh_device=mesh,
        tt_ccl=get_tt_ccl(mesh) if n > 1 else None,
        topology=topology,
        dim=dim,
        scale=layout.head_dim**-0.5,
        kv_cache_dtype=ttnn.bfloat8_b,
        wqkv_dtype=ttnn.bfloat8_b,
        wo_dtype=ttnn.bfloat8_b,
        wqkv_bias_dtype=ttnn.bfloat16,
        qkv_dtype=activation_dtype or ttnn.bfloat16,
        prefill_attention_dtype=activation_dtype or ttnn.bfloat8_b,
        **_shared.default_compute_configs(),
        wqkv_memcfg=_grids.dram_width_sharded(dim, local_qkv, dram_banks),
        wo_memcfg=(
            ttnn.DRAM_MEMORY_CONFIG if fused else _grids.dram_width_sharded(heads_width, dim, dram_banks)
        ),
        decode_input_memcfg=_grids.width_sharded(rows, dim, qkv_grid),
        decode_xqkv_prg_config=_grids.dram_sharded_matmul(rows, dim, local_qkv, qkv_grid.num_cores),
        decode_create_qkv_head_memcfg=_shared.create_qkv_head_memcfg(mesh, layout.head_dim),
        decode_sdpa_prg_config=_shared.sdpa_decode_program_config(),
        decode_scores_memcfg=_shared.scores_memcfg(mesh, layout, config.max_batch_size),
        decode_attn_output_prg_config=_grids.dram_sharded_matmul(rows, heads_width, dim, layout.local_heads),
        decode_residual_memcfg=_grids.width_sharded(rows, dim // n, residual_grid),
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_xqkv_prg_config=_shared.prefill_matmul_config(dim, local_qkv, config.max_qkv_mm_seq_len),
        prefill_sdpa_prg_config=_shared.sdpa_prefill_program_config(),
        prefill_wo_prg_config=_shared.prefill_matmul_config(
            heads_width * (n if fused else 1), dim, config.max_wo_mm_seq_len
        ),
        prefill_kv_memcfg=_shared.kv_prefill_memcfg(layout),
        min_kv_prefill_shard_seqlen=64 * _grids.TILE // layout.local_kv_heads,
        transformation_mat_decode=_shared.decode_transformation_mat(mesh, config.max_batch_size),
        transformation_mat_prefill=_shared.prefill_transformation_mat(mesh),
    )
    if fused:
        defaults.update(_fused_defaults(mesh, layout, dim, rows, n))
    resolved = _shared.fill_unset(replace(config, use_fused_all_gather_matmul=fused), defaults)
    if resolved.kv_cache is None and not resolved.external_kv_cache:
        shape = _shared.kv_cache_shape(resolved, layout, resolved.max_batch_size)
        resolved = replace(resolved, kv_cache=_shared.zero_kv_cache(mesh, shape, resolved.kv_cache_dtype))
    return _resolve_weights(resolved, layout, mesh, n)


def _fused_defaults(mesh, layout, dim: int, rows: int, n: int) -> dict:
    """The fused all-gather + WO matmul: one row of 8 cores, each a slice of K (all heads) and of its N."""
    k_tiles = layout.n_heads * layout.head_dim // _grids.TILE
    out_tiles = dim // _grids.TILE // n // _AG_MM_CORES
    gathered_heads = ttnn.ShardSpec(
        ttnn.num_cores_to_corerangeset(n, mesh.compute_with_storage_grid_size(), row_wise=True),
        [rows, layout.n_heads * layout.head_dim // n],
        ttnn.ShardOrientation.ROW_MAJOR,
    )
    return dict(
        decode_all_gather_matmul_prg_config=ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
            compute_with_storage_grid_size=(_AG_MM_CORES, 1),
            in0_block_w=k_tiles // _AG_MM_CORES,
            out_subblock_h=1,
            out_subblock_w=_grids.largest_divisor(out_tiles, 8),
            per_core_M=rows // _grids.TILE,
            per_core_N=out_tiles,
            fuse_batch=True,
            fused_activation=None,
            mcast_in0=True,
        ),
        decode_all_gather_matmul_memcfg=ttnn.MemoryConfig(
            ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, gathered_heads
        ),
    )


def _resolve_weights(cfg: Attention1DConfig, layout, mesh, n: int) -> Attention1DConfig:
    """Weights laid out device by device and split over the mesh; norm configs placed on the same mesh."""

    def sharded(dim: int):
        return ttnn.MeshMapperConfig([ttnn.PlacementShard(dim)], ttnn.MeshShape(n))

    def placed(weight, dtype, memcfg, shard_dim):
        return weight.with_defaults(
            device=mesh,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=memcfg,
            mesh_mapper_config=sharded(shard_dim),
        )

    changes = dict(
        wqkv_per_device=True,
        wqkv=placed(
            _shared.as_4d(_shared.per_device_qkv(cfg.wqkv, layout, cfg.wqkv_per_device)),
            cfg.wqkv_dtype,
            cfg.wqkv_memcfg,
            -1,
        ),
        wo=placed(
            _shared.as_4d(cfg.wo), cfg.wo_dtype, cfg.wo_memcfg, -1 if cfg.use_fused_all_gather_matmul else -2
        ),
    )
    if cfg.wqkv_bias is not None:
        bias = _shared.per_device_qkv(cfg.wqkv_bias, layout, cfg.wqkv_per_device)
        changes["wqkv_bias"] = placed(bias, cfg.wqkv_bias_dtype, ttnn.DRAM_MEMORY_CONFIG, -1)
    for name in ("q_norm_config", "k_norm_config"):
        norm = getattr(cfg, name)
        if norm is not None:
            changes[name] = _shared.resolve_head_norm(
                _OWNER, name, norm, layout, mesh, RMSNorm1DConfig, _LOCAL_NORM
            )
    return replace(cfg, **changes)


class Attention1D(_shared.AttentionBase):
    """``Attention1D(wqkv, wo, n_heads, n_kv_heads, head_dim, max_batch_size, max_seq_len)``.

    ``wqkv`` is [dim, (n_heads + 2·n_kv_heads)·head_dim] with columns Q | K | V, ``wo`` is
    [n_heads·head_dim, dim] (TT-NN's [in, out] layout); Q/K columns are in the interleaved-pair rotary order."""

    _NORM_CLASS = RMSNorm1D
    CONFIG_CLASS = Attention1DConfig
    HARDWARE = HardwareGroups(
        dtypes=_shared.HW_DTYPE_GROUPS,
        math=_shared.HW_MATH_GROUPS,
        placement={
            "wqkv_memcfg": Placement("DRAM", "width_sharded"),
            "wo_memcfg": Placement("DRAM", "width_sharded"),
            "decode_input_memcfg": Placement("L1", "width_sharded"),
            "decode_residual_memcfg": Placement("L1", "width_sharded"),
            "prefill_input_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    _resolve_config = staticmethod(_resolve_attention1d_config)

    def _bind(self) -> None:
        cfg = self.config
        n = num_devices(cfg.mesh_device)
        self.layout = _shared.head_layout(_OWNER, cfg, n, "devices")
        self.users = cfg.max_batch_size
        self._users_mapper = None  # positions and page tables: every device serves every user
        self._input_mapper = None  # QKV input: the whole row on every device
        self._bind_common()
        self._add_bias_decode = _ccl.unchanged if cfg.wqkv_bias is None else self._add_bias_rows
        self._add_bias_prefill = _ccl.unchanged if cfg.wqkv_bias is None else self._add_bias_row
        if cfg.use_fused_all_gather_matmul:
            self._wo_decode = self._wo_fused_decode
            self._gather_heads_prefill = self._all_gather_heads
            self._reduce_prefill = _ccl.unchanged
        else:
            self._wo_decode = self._wo_decode_then_reduce
            self._gather_heads_prefill = _ccl.unchanged
            self._reduce_prefill = self._reduce_scatter_prefill if n > 1 else _ccl.unchanged
        self._reduce_decode = self._reduce_scatter_decode if n > 1 else _ccl.unchanged

    # --- decode ------------------------------------------------------------------------------------------------

    def decode_forward(self, x, current_pos, rot_mats, page_table=None, kv_cache=None):
        """One token per user. x: [1, 1, users (→32), dim] (replicated); current_pos: [max_batch_size] int32,
        the position each user's token is written at; rot_mats: [cos, sin] per user (RotarySetup1D);
        page_table: [max_batch_size, blocks] int32 with a paged cache. → [1, 1, users, dim / devices]."""
        cfg = self.config
        caches = self._caches(kv_cache)
        x = load_input(
            x,
            owner="Attention1D.decode_forward",
            device=cfg.mesh_device,
            memory_config=cfg.decode_input_memcfg,
        )
        current_pos = self._positions(current_pos)
        page_table = self._table(page_table, None)
        qkv = ttnn.linear(
            x,
            cfg.wqkv.get_device_weight(),
            dtype=cfg.qkv_dtype,
            memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
            program_config=cfg.decode_xqkv_prg_config,
            compute_kernel_config=cfg.li_qkv_decode_compute_kernel_cfg,
        )
        qkv = self._add_bias_decode(qkv)
        ttnn.deallocate(x)
        # the head split takes bfloat16, interleaved
        heads_in = ttnn.sharded_to_interleaved(qkv, ttnn.L1_MEMORY_CONFIG, ttnn.bfloat16)
        ttnn.deallocate(qkv)
        merged = self._attend_decode(heads_in, current_pos, rot_mats, page_table, caches)
        return self._wo_decode(merged)

    def _add_bias_rows(self, qkv):
        return qkv + self._bias_decode.get_device_weight()

    def _wo_decode_then_reduce(self, merged):
        cfg = self.config
        out = ttnn.matmul(
            merged,
            cfg.wo.get_device_weight(),
            program_config=cfg.decode_attn_output_prg_config,
            memory_config=merged.memory_config(),
            compute_kernel_config=cfg.li_o_decode_compute_kernel_cfg,
        )
        ttnn.deallocate(merged)
        out = self._reduce_decode(out)
        return ttnn.to_memory_config(out, cfg.decode_residual_memcfg)

    def _wo_fused_decode(self, merged):
        """One op gathers every device's heads around the ring and multiplies by this device's WO columns."""
        cfg = self.config
        merged = ttnn.to_memory_config(merged, cfg.decode_all_gather_matmul_memcfg)
        _, out = ttnn.experimental.all_gather_matmul_async(
            merged,
            cfg.wo.get_device_weight(),
            persistent_output_buffer=None,
            dim=3,
            all_gather_core_grid_offset=(0, 4),
            num_links=cfg.decode_all_gather_matmul_num_links,
            multi_device_global_semaphore=cfg.tt_ccl.get_and_cycle_ag_semaphore_handles(),
            barrier_semaphore=cfg.tt_ccl.get_and_cycle_barrier_semaphore_handle(),
            memory_config_ag=cfg.decode_all_gather_matmul_memcfg,
            memory_config_mm=cfg.decode_residual_memcfg,
            program_config=cfg.decode_all_gather_matmul_prg_config,
            compute_kernel_config=cfg.li_o_decode_compute_kernel_cfg,
            chunks_per_sync=cfg.ccl_chunks_per_sync,
            num_workers_per_link=cfg.ccl_num_workers_per_link,
            num_buffers_per_channel=cfg.ccl_num_buffers_per_channel,
        )
        ttnn.deallocate(merged)
        return ttnn.to_memory_config(out, cfg.decode_residual_memcfg)

    # --- prefill -----------------------------------------------------------------------------------------------

    def prefill_forward(
        self,
        x,
        rot_mats,
        user_id: int = 0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ):
        """One user's prompt. x: [1, 1, S, dim] (S a multiple of 128); rot_mats: [cos, sin] of positions
        [start, start + S); user_id: the cache row of a contiguous cache; page_table (and chunk_page_table,
        chunk_start_idx for a later chunk of a long prompt) with a paged cache. → [1, 1, S, dim / devices]."""
        cfg = self.config
        caches = self._caches(kv_cache)
        x, seq_len = self._prefill_input(x, chunk_start_idx)
        page_table = self._table(page_table, None)
        chunk_page_table = self._table(chunk_page_table, None)
        x = self._fold_rows(x, seq_len, cfg.max_qkv_mm_seq_len)
        qkv = ttnn.linear(
            x,
            cfg.wqkv.get_device_weight(),
            dtype=cfg.qkv_dtype,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            program_config=cfg.prefill_xqkv_prg_config(seq_len),
            compute_kernel_config=cfg.li_qkv_prefill_compute_kernel_cfg,
        )
        qkv = self._add_bias_prefill(qkv)
        qkv = self._unfold_rows(qkv, seq_len, cfg.max_qkv_mm_seq_len)
        ttnn.deallocate(x)
        merged = self._attend_prefill(
            qkv, seq_len, rot_mats, user_id, page_table, chunk_page_table, chunk_start_idx, caches
        )
        merged = self._fold_rows(merged, seq_len, cfg.max_wo_mm_seq_len)
        merged = self._gather_heads_prefill(merged)
        out = ttnn.linear(
            merged,
            cfg.wo.get_device_weight(),
            dtype=cfg.prefill_attention_dtype,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            program_config=cfg.prefill_wo_prg_config(seq_len),
            compute_kernel_config=cfg.li_o_prefill_compute_kernel_cfg,
        )
        out = self._unfold_rows(out, seq_len, cfg.max_wo_mm_seq_len)
        ttnn.deallocate(merged)
        return self._reduce_prefill(out)

    def _add_bias_row(self, qkv):
        return qkv + self._bias_prefill.get_device_weight()

    def _fill_contiguous(self, cache_k, cache_v, k, v, seq_len, user_id, page_table, chunk_page_table):
        """This user's row of the contiguous cache; long fills go through an L1 height shard."""
        cfg = self.config
        slot = user_id % self.users
        if seq_len >= cfg.min_kv_prefill_shard_seqlen:
            shard = cfg.prefill_kv_memcfg(seq_len)
            k_fill, v_fill = ttnn.interleaved_to_sharded(k, shard), ttnn.interleaved_to_sharded(v, shard)
            ttnn.fill_cache(cache_k, k_fill, slot)
            ttnn.fill_cache(cache_v, v_fill, slot)
            ttnn.deallocate(k_fill)
            ttnn.deallocate(v_fill)
            return
        ttnn.fill_cache(cache_k, k, slot)
        ttnn.fill_cache(cache_v, v, slot)

    def _all_gather_heads(self, merged):
        """WO is split by columns for the fused decode op, so prefill gathers all heads first (no reduce after)."""
        cfg = self.config
        return _ccl.all_gather(
            merged,
            cfg,
            dim=3,
            cluster_axis=None,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            num_links=cfg.num_all_gather_links,
        )

    # --- collectives (bound in _bind) --------------------------------------------------------------------------

    def _reduce_scatter(self, x, memory_config):
        """Sum the per-device partial products; each device keeps its slice of dim."""
        cfg = self.config
        out = _ccl.reduce_scatter(
            x,
            cfg,
            dim=3,
            cluster_axis=None,
            memory_config=memory_config,
            num_links=cfg.num_reduce_scatter_links,
        )
        x.deallocate(True)
        return out

    def _reduce_scatter_decode(self, x):
        return self._reduce_scatter(x, self.config.decode_residual_memcfg)

    def _reduce_scatter_prefill(self, x):
        return self._reduce_scatter(x, ttnn.DRAM_MEMORY_CONFIG)

    # --- TTTv1 bridge ------------------------------------------------------------------------------------------

    @classmethod
    def from_model_args(
        cls,
        mesh_device,
        tt_ccl,
        args,
        state_dict,
        weight_cache_path,
        layer_num: int,
        transformation_mats,
        paged_attention_config=None,
        use_paged_kv_cache: bool = False,
        dtype=None,
    ) -> Attention1D:
        """The tttv1 ``Attention`` of ``layer_num`` as an Attention1D: the same weights, per-layer precision,
        program and memory configs (read from ``args`` where tttv1's Attention reads them), the rotary matrices
        of tttv1's ``RotarySetup`` (``transformation_mats``). ``dtype`` is tttv1's ``dtype`` argument (the QKV
        bias is stored in it); ``use_paged_kv_cache``: the caller passes ``kv_cache`` to every forward."""
        from tttv1.tt.model_config import OpGroup, TensorGroup

        if args.is_galaxy:
            raise ValueError("Attention1D cannot be used for Galaxy devices; use Attention2D instead")
        model_config = args.get_model_config()
        n = args.num_devices
        fused = bool(model_config["USE_FUSED_ALL_GATHER_MATMUL"])
        fields = _tttv1_bridge.common_fields(
            args, state_dict, layer_num, weight_cache_path, dtype, OpGroup, TensorGroup, RMSNorm1DConfig
        )
        activation_dtype = model_config["DECODERS_OPTIMIZATIONS"].get_tensor_dtype(
            decoder_id=layer_num, tensor=TensorGroup.ACTIVATION
        )
        heads_width = args.n_heads * args.head_dim
        config = Attention1DConfig(
            **fields,
            **_tttv1_bridge.paging_fields(paged_attention_config, use_paged_kv_cache),
            **_tttv1_bridge.transformation_fields(transformation_mats),
            mesh_device=mesh_device,
            tt_ccl=tt_ccl,
            qkv_dtype=activation_dtype or ttnn.bfloat16,
            wqkv_memcfg=args.create_dram_sharded_mem_config(args.dim, args.qkv_size // n),
            wo_memcfg=(
                ttnn.DRAM_MEMORY_CONFIG
                if fused
                else args.create_dram_sharded_mem_config(heads_width // n, args.dim)
            ),
            decode_input_memcfg=model_config["SHARDED_ATTN_INPUT_MEMCFG"],
            decode_xqkv_prg_config=model_config["XQKV_DECODE_PROGCFG"],
            decode_scores_memcfg=model_config["SCORES_BATCHED_MM_OUTPUT_MEMCFG"](args.max_batch_size),
            decode_attn_output_prg_config=model_config["ATTN_OUTPUT_PROGCFG"],
            decode_residual_memcfg=model_config["DECODE_RESIDUAL_MEMCFG"],
            use_fused_all_gather_matmul=fused,
            decode_all_gather_matmul_prg_config=model_config["ATTN_ALL_GATHER_MATMUL_PROGCFG"],
            decode_all_gather_matmul_memcfg=model_config["ATTN_ALL_GATHER_MATMUL_OUTPUT_MEMCFG"],
            decode_all_gather_matmul_num_links=1 if args.ccl_topology() == ttnn.Topology.Ring else 2,
            prefill_kv_memcfg=model_config["KV_PREFILL_MEM_CFG"],
            min_kv_prefill_shard_seqlen=args.min_kv_prefill_shard_seqlen,
        )
        return cls.from_config(config)
