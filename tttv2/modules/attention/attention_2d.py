"""Attention2D: grouped-query attention with a KV cache on a 2-D mesh of R rows × C columns (Galaxy 8x4, 4x8).

The heads are split over the mesh rows (KV heads replicated when the rows outnumber them) and the model dim over
the mesh columns, so each device's QKV product is a partial sum over its column's slice of dim: an all-reduce
over the columns completes it. In decode the columns also split the users: each column keeps the 32/C rows of
its own users (a 0/1 selection matmul), so every device attends for its column's users only and its KV cache
holds only them. The head outputs are then gathered over the columns (back to all users, another selection
matmul), multiplied by WO (rows: heads, columns: dim) and all-reduced over the mesh rows. The result is
fractured over the columns along dim and replicated over the rows, as the residual stream is on a Galaxy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._topology import default_topology, mesh_shape, require_2d_mesh, resolve_mesh_device
from tttv2.modules.attention import _shared, _tttv1_bridge
from tttv2.modules.lazy_weight import LazyWeight
from tttv2.modules.rmsnorm import RMSNorm2D, RMSNorm2DConfig
from tttv2.modules.tt_ccl import get_tt_ccl

__all__ = ["Attention2D", "Attention2DConfig"]

_LOCAL_NORM = dict(distributed=False)  # q/k norms see whole heads on every device
_OWNER = "Attention2D"
_SELECTION_GRID = ttnn.CoreGrid(y=4, x=8)  # where the user-selection and WO matmuls of decode run


@dataclass
class Attention2DConfig(_shared.AttentionConfig):
    """Everything Attention2D needs: the fields every attention config has (``AttentionConfig``) and the 2-D
    ones below. ``None`` fields are resolved by ``Attention2D`` (see docs/attention.md). The collectives run in
    the dtype of the tensor they reduce (qkv_dtype, decode_wo_dtype, prefill_attention_dtype)."""

    num_all_gather_links: int = 2
    decode_gather_users_num_links: int = 2
    use_composite_all_reduce: bool = False  # WO decode: reduce-scatter + all-gather instead of gather + sum
    decode_wo_dtype: Any = None  # decode WO output (and its all-reduce)
    selection_compute_kernel_cfg: Any = None  # the 0/1 user-selection matmuls (exact: HiFi4)

    # decode
    decode_qkv_gathered_memcfg: Any = None
    decode_create_head_input_memcfg: Any = None
    decode_gather_users_memcfg: Any = None
    decode_wo_reduce_memcfg: Any = None  # where the row all-reduce lands

    # the user-selection matrices (LazyWeight or ttnn.Tensor); built when None
    qkv_user_picker: Any = None
    user_gather_picker: Any = None


def _qkv_user_picker(rows: int, cols: int, users: int) -> np.ndarray:
    """(1, R·C, 32/C, 32): device d keeps the ``users`` rows [users·c, users·(c + 1)) of the 32-row QKV tile,
    c = d mod C its mesh column (rows after ``users`` are zero)."""
    picker = np.zeros((1, rows * cols, _shared.TILE // cols, _shared.TILE), dtype=np.float32)
    for device in range(rows * cols):
        first = (device % cols) * users
        picker[0, device, :users, first : first + users] = np.eye(users)
    return picker


def _user_gather_picker(cols: int, users: int) -> np.ndarray:
    """(1, 1, 32, 32·C): after the C columns' 32-row tiles are stacked, row users·c + i takes row i of column c's
    tile (i < users): every user back in its place."""
    tile = _shared.TILE
    picker = np.zeros((1, 1, tile, tile * cols), dtype=np.float32)
    for column in range(cols):
        picker[0, 0, column * users : (column + 1) * users, column * tile : column * tile + users] = np.eye(
            users
        )
    return picker


def _resolve_attention2d_config(config: Attention2DConfig) -> Attention2DConfig:
    """A resolved copy of ``config``; fields the caller set are kept as they are."""
    _shared.check_weight_types(_OWNER, config)
    mesh = resolve_mesh_device(_OWNER, config.mesh_device, config.wqkv, config.wo)
    require_2d_mesh(_OWNER, mesh, "Attention1D")
    rows, cols = mesh_shape(mesh)
    layout = _shared.head_layout(_OWNER, config, rows, "mesh rows")
    _shared.check_common(_OWNER, config, layout)
    dim = config.dim or config.wqkv.shape[-2]
    if dim % (_grids.TILE * cols):
        raise ValueError(
            f"{_OWNER}: dim must split into whole tiles over the {cols} mesh columns, got dim={dim}"
        )
    if _shared.TILE % cols:
        raise ValueError(f"{_OWNER}: the {cols} mesh columns must divide the {_shared.TILE} users of a tile")
    if config.max_batch_size != 1 and config.max_batch_size % cols:
        raise ValueError(
            f"{_OWNER}: max_batch_size must be 1 or a multiple of the {cols} mesh columns (each column serves an "
            f"equal share of the users), got {config.max_batch_size}"
        )
    users = max(config.max_batch_size // cols, 1)
    local_qkv = layout.local_qkv_size
    heads_width = layout.local_heads * layout.head_dim
    column_dim = dim // cols

    def width_sharded(height: int, width: int):
        return _grids.width_sharded(height, width, ttnn.CoreGrid(y=1, x=_grids.largest_divisor(width // 32)))

    def picker(source, mapper, name):
        return LazyWeight(
            source,
            dtype=ttnn.bfloat4_b,
            layout=ttnn.TILE_LAYOUT,
            mesh_mapper_config=mapper,
            device=mesh,
            name=name,
        )

    qkv_dtype = config.qkv_dtype or ttnn.bfloat8_b
    defaults = dict(
        mesh_device=mesh,
        tt_ccl=get_tt_ccl(mesh),
        topology=default_topology(mesh),
        dim=dim,
        scale=layout.head_dim**-0.5,
        kv_cache_dtype=ttnn.bfloat8_b,
        wqkv_dtype=ttnn.bfloat8_b,
        wo_dtype=ttnn.bfloat8_b,
        wqkv_bias_dtype=ttnn.bfloat16,
        qkv_dtype=qkv_dtype,
        decode_wo_dtype=ttnn.bfloat8_b,
        prefill_attention_dtype=ttnn.bfloat8_b,
        **_shared.default_compute_configs(),
        selection_compute_kernel_cfg=_grids.compute_kernel_config(
            ttnn.MathFidelity.HiFi4, fp32_acc=True, l1_acc=True
        ),
        decode_input_memcfg=width_sharded(_shared.TILE, column_dim),
        decode_qkv_gathered_memcfg=width_sharded(_shared.TILE * cols, local_qkv),
        decode_create_head_input_memcfg=ttnn.L1_MEMORY_CONFIG,
        decode_create_qkv_head_memcfg=_shared.create_qkv_head_memcfg(mesh, layout.head_dim),
        decode_sdpa_prg_config=_shared.sdpa_decode_program_config(),
        decode_scores_memcfg=_shared.scores_memcfg(mesh, layout, users),
        decode_gather_users_memcfg=width_sharded(_shared.TILE * cols, heads_width),
        decode_wo_reduce_memcfg=(
            ttnn.L1_MEMORY_CONFIG
            if config.use_composite_all_reduce
            else width_sharded(_shared.TILE * rows, column_dim)
        ),
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_xqkv_prg_config=_shared.prefill_matmul_config(
            column_dim, local_qkv, config.max_qkv_mm_seq_len
        ),
        prefill_sdpa_prg_config=_shared.sdpa_prefill_program_config(),
        prefill_wo_prg_config=_shared.prefill_matmul_config(
            heads_width, column_dim, config.max_wo_mm_seq_len
        ),
        transformation_mat_decode=_shared.decode_transformation_mat(mesh, users),
        transformation_mat_prefill=_shared.prefill_transformation_mat(mesh),
        qkv_user_picker=picker(
            _qkv_user_picker(rows, cols, users),
            ttnn.MeshMapperConfig([ttnn.PlacementShard(1)], ttnn.MeshShape(rows * cols)),
            "qkv_user_picker",
        ),
        user_gather_picker=picker(_user_gather_picker(cols, users), None, "user_gather_picker"),
    )
    resolved = _shared.fill_unset(config, defaults)
    if resolved.kv_cache is None and not resolved.external_kv_cache:
        shape = _shared.kv_cache_shape(resolved, layout, users)
        resolved = replace(resolved, kv_cache=_shared.zero_kv_cache(mesh, shape, resolved.kv_cache_dtype))
    return _resolve_weights(resolved, layout, mesh, rows, cols)


def _resolve_weights(cfg: Attention2DConfig, layout, mesh, rows: int, cols: int) -> Attention2DConfig:
    """QKV: columns (heads) split over the mesh rows, rows (dim) over the mesh columns; WO the other way."""

    def placed(weight, dtype, placements):
        return weight.with_defaults(
            device=mesh,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper_config=ttnn.MeshMapperConfig(placements, ttnn.MeshShape(rows, cols)),
        )

    shard, replicate = ttnn.PlacementShard, ttnn.PlacementReplicate
    changes = dict(
        wqkv_per_device=True,
        wqkv=placed(
            _shared.as_4d(_shared.per_device_qkv(cfg.wqkv, layout, cfg.wqkv_per_device)),
            cfg.wqkv_dtype,
            [shard(-1), shard(-2)],
        ),
        wo=placed(_shared.as_4d(cfg.wo), cfg.wo_dtype, [shard(-2), shard(-1)]),
    )
    if cfg.wqkv_bias is not None:
        bias = _shared.per_device_qkv(cfg.wqkv_bias, layout, cfg.wqkv_per_device)
        changes["wqkv_bias"] = placed(bias, cfg.wqkv_bias_dtype, [shard(-1), replicate()])
    for name in ("q_norm_config", "k_norm_config"):
        norm = getattr(cfg, name)
        if norm is not None:
            changes[name] = _shared.resolve_head_norm(
                _OWNER, name, norm, layout, mesh, RMSNorm2DConfig, _LOCAL_NORM
            )
    return replace(cfg, **changes)


class Attention2D(_shared.AttentionBase):
    """``Attention2D(wqkv, wo, n_heads, n_kv_heads, head_dim, max_batch_size, max_seq_len)`` on an R×C mesh.

    Weights as for ``Attention1D`` (whole, [in, out]); the module splits them over the mesh. Decode input
    [1, 1, 32, dim / C] is fractured over the columns along dim (and replicated over the rows); ``current_pos``
    holds max_batch_size positions, each column taking its users'."""

    _NORM_CLASS = RMSNorm2D
    CONFIG_CLASS = Attention2DConfig
    HARDWARE = HardwareGroups(
        dtypes=_shared.HW_DTYPE_GROUPS,
        math=_shared.HW_MATH_GROUPS,
        placement={
            "decode_input_memcfg": Placement("L1", "width_sharded"),
            "decode_create_qkv_head_memcfg": Placement("L1", "height_sharded"),
            "prefill_input_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    _resolve_config = staticmethod(_resolve_attention2d_config)

    def _bind(self) -> None:
        cfg = self.config
        rows, cols = mesh_shape(cfg.mesh_device)
        self.layout = _shared.head_layout(_OWNER, cfg, rows, "mesh rows")
        self.users = max(cfg.max_batch_size // cols, 1)
        self._cols = cols
        shard, replicate = ttnn.PlacementShard, ttnn.PlacementReplicate
        # a single user is the same user on every column; more are dealt out over the columns
        self._users_mapper = (
            None
            if cfg.max_batch_size == 1
            else ttnn.MeshMapperConfig([replicate(), shard(0)], ttnn.MeshShape(rows, cols))
        )
        self._page_table_decode_mapper = (
            None
            if cfg.max_batch_size == 1
            else ttnn.MeshMapperConfig([replicate(), shard(-2)], ttnn.MeshShape(rows, cols))
        )
        self._input_mapper = ttnn.MeshMapperConfig([replicate(), shard(-1)], ttnn.MeshShape(rows, cols))
        self._bind_common()
        self._add_bias_decode = _ccl.unchanged if cfg.wqkv_bias is None else self._add_bias_rows
        self._add_bias_prefill = _ccl.unchanged if cfg.wqkv_bias is None else self._add_bias_row
        self._reduce_wo_decode = (
            self._composite_all_reduce if cfg.use_composite_all_reduce else self._gather_sum_decode
        )

    # --- decode ------------------------------------------------------------------------------------------------

    def decode_forward(self, x, current_pos, rot_mats, page_table=None, kv_cache=None):
        """One token per user. x: [1, 1, 32, dim / C] per device (fractured over the columns); current_pos:
        [max_batch_size] int32 (each column takes its users'); rot_mats: [cos, sin] of this column's users;
        page_table: [max_batch_size, blocks] with a paged cache. → [1, 1, 32, dim / C] (all users), L1."""
        cfg = self.config
        caches = self._caches(kv_cache)
        x = load_input(
            x,
            owner="Attention2D.decode_forward",
            device=cfg.mesh_device,
            memory_config=cfg.decode_input_memcfg,
            mesh_mapper_config=self._input_mapper,
        )
        current_pos = self._positions(current_pos)
        page_table = self._table(page_table, self._page_table_decode_mapper)
        partial = ttnn.linear(
            x,
            cfg.wqkv.get_device_weight(),
            dtype=cfg.qkv_dtype,
            memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
            compute_kernel_config=cfg.li_qkv_decode_compute_kernel_cfg,
        )
        ttnn.deallocate(x)
        # each column holds a partial sum over its slice of dim
        qkv = self._gather_sum(partial, 1, cfg.decode_qkv_gathered_memcfg, cfg.num_all_gather_links)
        qkv = self._add_bias_decode(qkv)  # after the sum, so that it counts once
        # keep only the users of this device's column
        own_users = ttnn.matmul(
            cfg.qkv_user_picker.get_device_weight(),
            qkv,
            dtype=ttnn.bfloat16,
            memory_config=cfg.decode_create_head_input_memcfg,
            compute_kernel_config=cfg.selection_compute_kernel_cfg,
        )
        ttnn.deallocate(partial)
        merged = self._attend_decode(own_users, current_pos, rot_mats, page_table, caches)

        # every column's heads for all users: stack the C columns' tiles, keep the first u rows of each
        stacked = _ccl.all_gather(
            merged,
            cfg,
            dim=2,
            cluster_axis=1,
            memory_config=cfg.decode_gather_users_memcfg,
            num_links=cfg.decode_gather_users_num_links,
        )
        merged.deallocate(True)
        stacked = ttnn.to_memory_config(stacked, ttnn.L1_MEMORY_CONFIG)
        all_users = ttnn.matmul(
            cfg.user_gather_picker.get_device_weight(),
            stacked,
            core_grid=_SELECTION_GRID,
            dtype=ttnn.bfloat16,
            memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
            compute_kernel_config=cfg.selection_compute_kernel_cfg,
        )
        projected = ttnn.matmul(
            all_users,
            cfg.wo.get_device_weight(),
            core_grid=_SELECTION_GRID,
            memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
            dtype=cfg.decode_wo_dtype,
            compute_kernel_config=cfg.li_o_decode_compute_kernel_cfg,
        )
        # each mesh row holds a partial sum over its heads
        return self._reduce_wo_decode(projected)

    def _add_bias_rows(self, qkv):
        return ttnn.add(qkv, self._bias_decode.get_device_weight(), memory_config=ttnn.L1_MEMORY_CONFIG)

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
        """One user's prompt. x: [1, 1, S, dim / C] per device (S a multiple of 128); rot_mats: [cos, sin] of
        positions [start, start + S) (replicated); user_id picks the column (and row) of a contiguous cache;
        page tables are replicated. → [1, 1, S, dim / C]."""
        cfg = self.config
        caches = self._caches(kv_cache)
        x, seq_len = self._prefill_input(x, chunk_start_idx)
        page_table = self._table(page_table, None)
        chunk_page_table = self._table(chunk_page_table, None)
        x = self._fold_rows(x, seq_len, cfg.max_qkv_mm_seq_len)
        partial = ttnn.linear(
            x,
            cfg.wqkv.get_device_weight(),
            dtype=cfg.qkv_dtype,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            program_config=cfg.prefill_xqkv_prg_config(seq_len),
            compute_kernel_config=cfg.li_qkv_prefill_compute_kernel_cfg,
        )
        qkv = self._gather_sum_prefill(partial, 1)
        qkv = self._add_bias_prefill(qkv)
        qkv = self._unfold_rows(qkv, seq_len, cfg.max_qkv_mm_seq_len)
        ttnn.deallocate(x)
        merged = self._attend_prefill(
            qkv, seq_len, rot_mats, user_id, page_table, chunk_page_table, chunk_start_idx, caches
        )
        merged = self._fold_rows(merged, seq_len, cfg.max_wo_mm_seq_len)
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
        return self._gather_sum_prefill(out, 0)

    def _add_bias_row(self, qkv):
        return qkv + self._bias_prefill.get_device_weight()

    def _fill_contiguous(self, cache_k, cache_v, k, v, seq_len, user_id, page_table, chunk_page_table):
        """Only the devices of the mesh column that serves ``user_id`` hold its cache row."""
        column, slot = divmod(user_id, self.users)
        for cache, fill in ((cache_k, k), (cache_v, v)):
            # device tensors come row-major over the mesh: one column is every C-th from ``column``
            pairs = list(zip(ttnn.get_device_tensors(cache), ttnn.get_device_tensors(fill)))
            for on_device, fill_on_device in pairs[column :: self._cols]:
                ttnn.fill_cache(on_device, fill_on_device, slot)

    # --- collectives -------------------------------------------------------------------------------------------

    def _gather_sum(self, x, axis: int, landing, num_links: int):
        """All-reduce over mesh ``axis`` of a sharded decode tensor: gather the partial sums on dim 0, add."""
        cfg = self.config
        stacked = _ccl.all_gather(
            x, cfg, dim=0, cluster_axis=axis, memory_config=landing, num_links=num_links
        )
        stacked = ttnn.to_memory_config(stacked, ttnn.L1_MEMORY_CONFIG)
        summed = ttnn.experimental.fast_reduce_nc(
            stacked, dims=[0], output=None, compute_kernel_config=None, memory_config=ttnn.L1_MEMORY_CONFIG
        )
        stacked.deallocate(True)
        return ttnn.reshape(summed, x.shape)

    def _gather_sum_decode(self, projected):
        cfg = self.config
        return self._gather_sum(projected, 0, cfg.decode_wo_reduce_memcfg, cfg.num_all_gather_links)

    def _composite_all_reduce(self, projected):
        """All-reduce over the mesh rows as a reduce-scatter on dim 3 then an all-gather back."""
        cfg = self.config
        layout_before = projected.memory_config()
        partial = _ccl.reduce_scatter(
            projected,
            cfg,
            dim=3,
            cluster_axis=0,
            memory_config=cfg.decode_wo_reduce_memcfg,
            num_links=cfg.num_reduce_scatter_links,
        )
        summed = _ccl.all_gather(
            partial,
            cfg,
            dim=3,
            cluster_axis=0,
            memory_config=layout_before,
            num_links=cfg.num_all_gather_links,
        )
        return ttnn.reshape(summed, projected.shape)

    def _gather_sum_prefill(self, x, axis: int):
        """All-reduce over mesh ``axis`` of a prefill tensor in DRAM (outer dims folded into the rows first)."""
        cfg = self.config
        shape_in = x.shape
        if (shape_in[0], shape_in[1]) != (1, 1):
            x = ttnn.reshape(x, (1, 1, shape_in[0] * shape_in[1] * shape_in[2], shape_in[3]))
        x = ttnn.to_memory_config(x, ttnn.DRAM_MEMORY_CONFIG)
        stacked = _ccl.all_gather(
            x,
            cfg,
            dim=0,
            cluster_axis=axis,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            num_links=cfg.num_all_gather_links,
        )
        summed = ttnn.experimental.fast_reduce_nc(
            stacked, dims=[0], output=None, compute_kernel_config=None, memory_config=ttnn.DRAM_MEMORY_CONFIG
        )
        stacked.deallocate(True)
        return ttnn.reshape(summed, shape_in)

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
    ) -> Attention2D:
        """The tttv1 ``Attention`` of ``layer_num`` on a Galaxy as an Attention2D (the same weights, precision,
        program and memory configs; see ``Attention1D.from_model_args``). Checked before any device work."""
        from tttv1.tt.model_config import OpGroup, TensorGroup

        if not args.is_galaxy:
            raise ValueError(
                f"Attention2D requires a Galaxy mesh (8x4); ModelArgs is for a {args.cluster_shape} mesh; "
                "use Attention1D instead"
            )
        if args.ccl_dtype != ttnn.bfloat8_b:
            raise ValueError(
                "Attention2D.from_model_args: ccl_dtype must be bfloat8_b (tttv1 casts its bfloat8_b outputs to "
                f"ccl_dtype before each collective; Attention2D reduces in the output dtype), got {args.ccl_dtype}"
            )
        model_config = args.get_model_config()
        rows, cols = args.cluster_shape
        composite = args.dim == 8192
        fields = _tttv1_bridge.common_fields(
            args, state_dict, layer_num, weight_cache_path, dtype, OpGroup, TensorGroup, RMSNorm2DConfig
        )
        config = Attention2DConfig(
            **fields,
            **_tttv1_bridge.paging_fields(paged_attention_config, use_paged_kv_cache),
            **_tttv1_bridge.transformation_fields(transformation_mats),
            mesh_device=mesh_device,
            tt_ccl=tt_ccl,
            qkv_dtype=args.ccl_dtype,
            decode_wo_dtype=ttnn.bfloat8_b,
            use_composite_all_reduce=composite,
            selection_compute_kernel_cfg=args.compute_kernel_config_hifi4,
            decode_input_memcfg=model_config["SHARDED_ATTN_INPUT_MEMCFG"],
            decode_qkv_gathered_memcfg=model_config["QKV_OUT_GATHERED_MEMCFG"](cols),
            decode_create_head_input_memcfg=model_config["CREATE_HEAD_INPUT_MEMCFG"]
            or ttnn.DRAM_MEMORY_CONFIG,
            decode_scores_memcfg=model_config["SCORES_BATCHED_MM_OUTPUT_MEMCFG"](
                max(args.max_batch_size // cols, 1)
            ),
            decode_gather_users_memcfg=model_config["GATHER_USERS_MEMCFG"](cols),
            decode_wo_reduce_memcfg=(
                model_config["SELF_OUT_REDUCE_SCATTER_MEMCFG"]
                if composite
                else model_config["SELF_OUT_GATHERED_MEMCFG"](rows)
            ),
        )
        return cls.from_config(config)
