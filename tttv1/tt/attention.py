"""Grouped-query attention with a KV cache (G2 style: string modes, ``model_config["KEY"]`` configs).

Heads are split over the devices (over the 8 rows on a Galaxy, where each mesh column also serves its own
group of 8 users in decode). Decode: fused QKV matmul, head split, rotary, cache update, SDPA decode, head
merge, WO, all-reduce. Prefill: the same with a full-sequence SDPA (or chunked SDPA against a paged cache).
The galaxy flag here is ``self.TG = num_devices == 32`` (not ``args.is_galaxy``), as in TTTv1.
"""

# TTTv1's own style is reproduced on purpose (this package is the migration tools' test corpus)
# ruff: noqa: E731, SIM210

from __future__ import annotations

import math

import torch
import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.ccl import tt_all_gather, tt_all_reduce
from tttv1.tt.model_config import OpGroup, TensorGroup
from tttv1.tt.rmsnorm import RMSNorm

# Galaxy decode layout: 32 devices as 8 rows x 4 columns; each column owns 8 of the 32 users.
_GALAXY_DEVICES = 32
_GALAXY_COLUMNS = 4
_USERS_PER_COLUMN = 8


def _galaxy_qkv_row_picker() -> torch.Tensor:
    """(1, 32, 8, 32): device d keeps rows [8c, 8c + 8) of the 32-row QKV tile, c = d % 4 its mesh column."""
    n = _USERS_PER_COLUMN
    picker = torch.zeros(1, _GALAXY_DEVICES, n, n * _GALAXY_COLUMNS)
    for device in range(_GALAXY_DEVICES):
        first = (device % _GALAXY_COLUMNS) * n
        picker[:, device, :, first : first + n] = torch.eye(n)
    return picker


def _galaxy_user_gather_picker() -> torch.Tensor:
    """(32, 128): after the 4 columns' 32-row tiles are stacked, keep the first 8 rows of each tile, in order."""
    n, tile = _USERS_PER_COLUMN, 32
    picker = torch.zeros(n * _GALAXY_COLUMNS, tile * _GALAXY_COLUMNS)
    for column in range(_GALAXY_COLUMNS):
        picker[column * n : (column + 1) * n, column * tile : column * tile + n] = torch.eye(n)
    return picker


def _per_device_concat(parts, num_shards):
    """Split every tensor of ``parts`` into ``num_shards`` slices on the last dim and lay the slices out device
    by device — [q0 k0 v0 | q1 k1 v1 | ...] — so that sharding the result on the last dim gives each device
    its own Q, K and V columns side by side."""
    sliced = [torch.chunk(p, num_shards, dim=-1) for p in parts]
    return torch.cat([piece for device_slices in zip(*sliced) for piece in device_slices], dim=-1)


class Attention(LightweightModule):
    def __init__(
        self,
        mesh_device,
        tt_ccl,
        args,
        state_dict,
        weight_cache_path,
        layer_num,
        dtype,
        transformation_mats,
        configuration,
        paged_attention_config=None,
        use_paged_kv_cache=False,
    ):
        super().__init__()

        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.state_dict = state_dict
        self.dtype = dtype
        self.transformation_mats = transformation_mats
        self.paged_attention_config = paged_attention_config

        # --- shapes and hardware -------------------------------------------------------------------------------
        self.num_devices = configuration.num_devices
        self.TG = self.num_devices == 32
        self.hidden_size = configuration.dim
        self.n_heads = configuration.n_heads
        self.n_kv_heads = configuration.n_kv_heads
        self.head_dim = configuration.head_dim
        self.max_seq_len = configuration.max_seq_len
        self.max_batch_size = configuration.max_batch_size
        self.tile_size = configuration.tile_size
        self.grid_size = configuration.max_grid_size
        self.arch_name = configuration.arch_name
        self.is_multichip = configuration.is_multichip
        self.use_qk_fused = configuration.use_qk_fused
        self.MAX_QKV_MM_SEQ_LEN = configuration.MAX_QKV_MM_SEQ_LEN
        self.min_kv_prefill_shard_seqlen = configuration.min_kv_prefill_shard_seqlen
        self.rms_norm_add_unit_offset = configuration.rms_norm_add_unit_offset

        # On a galaxy the heads are split over one mesh column (n_kv_heads devices) and every column serves its
        # own slice of the batch; elsewhere the heads are split over all devices and each sees the whole batch.
        self.num_device_groups = self.num_devices // self.n_kv_heads
        if self.TG:
            self.num_devices_per_group = self.n_kv_heads
            self.batch_size_per_device_group = max(self.max_batch_size // self.num_device_groups, 1)
        else:
            self.num_devices_per_group = self.num_devices
            self.batch_size_per_device_group = self.max_batch_size
        self.n_local_heads = self.n_heads // self.num_devices_per_group
        self.n_local_kv_heads = self.n_kv_heads // self.num_devices_per_group

        if self.TG:
            # Constant 0/1 matrices used as matmuls to pick the rows (users) each mesh column is responsible for.
            picker_kwargs = dict(dtype=ttnn.bfloat4_b, layout=ttnn.TILE_LAYOUT, device=self.mesh_device)
            self.slice_mat = ttnn.from_torch(
                _galaxy_qkv_row_picker(),
                mesh_mapper=ttnn.ShardTensorToMesh(self.mesh_device, dim=1),
                **picker_kwargs,
            )
            self.user_selection_matrix = ttnn.from_torch(
                _galaxy_user_gather_picker(),
                mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
                **picker_kwargs,
            )

        # --- collectives ---------------------------------------------------------------------------------------
        self.ccl_dtype = configuration.ccl_dtype
        self.num_reduce_scatter_links = configuration.num_reduce_scatter_links
        self.num_all_gather_links = configuration.num_all_gather_links
        self.ccl_topology = configuration.ccl_topology()

        # --- precision: fixed kernel configs plus the per-layer choices of DECODERS_OPTIMIZATIONS ---------------
        self.compute_kernel_config_hifi2 = configuration.compute_kernel_config_hifi2
        self.compute_kernel_config_hifi2_fp16 = configuration.compute_kernel_config_hifi2_fp16
        self.compute_kernel_config_hifi4 = configuration.compute_kernel_config_hifi4

        self.model_config = configuration.get_model_config()
        layer_dtype = lambda group: self.model_config["DECODERS_OPTIMIZATIONS"].get_tensor_dtype(
            decoder_id=layer_num, tensor=group
        )
        layer_fidelity = lambda group: self.model_config["DECODERS_OPTIMIZATIONS"].get_math_fidelity(
            decoder_id=layer_num, op=group, configuration=configuration
        )
        self.activation_dtype = layer_dtype(TensorGroup.ACTIVATION)
        self.wqkv_dtype = layer_dtype(TensorGroup.WQKV)
        self.wo_dtype = layer_dtype(TensorGroup.WO)
        self.kv_cache_dtype = layer_dtype(TensorGroup.KV_CACHE)
        self.li_qkv_decode_compute_kernel_cfg = layer_fidelity(OpGroup.LI_QKV_DECODE)
        self.li_qkv_prefill_compute_kernel_cfg = layer_fidelity(OpGroup.LI_QKV_PREFILL)
        self.sdpa_decode_compute_kernel_cfg = layer_fidelity(OpGroup.SDPA_DECODE)
        self.sdpa_prefill_compute_kernel_cfg = layer_fidelity(OpGroup.SDPA_PREFILL)
        self.li_o_decode_compute_kernel_cfg = layer_fidelity(OpGroup.LI_O_DECODE)
        self.li_o_prefill_compute_kernel_cfg = layer_fidelity(OpGroup.LI_O_PREFILL)

        # Only layers marked "sliding_attention" get a window; models without layer types attend to everything
        layer_type = configuration.layer_types[layer_num] if configuration.layer_types else "full_attention"
        self.sliding_window = configuration.sliding_window if layer_type == "sliding_attention" else None

        # --- weights -------------------------------------------------------------------------------------------
        layer_name = configuration.get_state_dict_prefix(self.__class__.__name__, layer_num)
        if configuration.dummy_weights or (weight_cache_path is None):
            cache_name = lambda _: None
        else:
            cache_name = lambda name: weight_cache_path / f"{layer_name}.{name}"

        wq_str, wk_str, wv_str, wo_str = (f"{layer_name}.{w}" for w in ("wq", "wk", "wv", "wo"))
        q_norm_str = f"{layer_name}.q_norm"
        k_norm_str = f"{layer_name}.k_norm"
        shards = self.num_devices_per_group

        # Optional QKV bias (Qwen). Kept outside the matmul and added as a separate op.
        self.wqkv_bias_prefill = None
        self.wqkv_bias_decode = None
        if f"{wq_str}.bias" in self.state_dict:
            qkv_bias = _per_device_concat(
                [self.state_dict[f"{w}.bias"] for w in (wq_str, wk_str, wv_str)], shards
            )
            bias_mapper = (
                ttnn.ShardTensor2dMesh(
                    self.mesh_device, dims=(-1, None), mesh_shape=configuration.cluster_shape
                )
                if self.TG
                else ttnn.ShardTensorToMesh(self.mesh_device, dim=-1)
            )

            def bias_to_device(rows, file_tag):
                return ttnn.as_tensor(
                    rows,
                    dtype=self.dtype,
                    layout=ttnn.TILE_LAYOUT,
                    device=self.mesh_device,
                    memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    mesh_mapper=bias_mapper,
                    cache_file_name=cache_name(file_tag),
                )

            # Prefill: a single logical row that the add broadcasts over the sequence. Uploading pads it to a
            # full tile, so restate the shape as one row within a tile-high padded shape.
            single_row = bias_to_device(qkv_bias, "wqkv_bias_prefill_sharded")
            width = single_row.shape[-1]
            self.wqkv_bias_prefill = ttnn.reshape(single_row, (1, 1, 1, width), (1, 1, self.tile_size, width))

            # Decode: no broadcasting here (it must also run under a captured trace), so keep one bias already
            # repeated to each possible padded batch height: entry i has (i + 1) * tile_size rows.
            self.wqkv_bias_decode = [
                bias_to_device(qkv_bias.unsqueeze(0).expand(rows, -1), f"wqkv_bias_decode_sharded_{rows}")
                for rows in range(
                    configuration.tile_size,
                    configuration.tile_padded_batch_rows + configuration.tile_size,
                    configuration.tile_size,
                )
            ]

        # every device must get whole heads and an equal share of the fused QKV and of the model dim
        for what, size in (
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("qkv_size", configuration.qkv_size),
            ("dim", configuration.dim),
        ):
            assert size % self.num_devices_per_group == 0, f"{what}={size} not divisible by {shards} devices"

        # Fused QKV weight, transposed to (dim, qkv) and laid out per device.
        qkv_weight = _per_device_concat(
            [self.state_dict[f"{w}.weight"].transpose(-2, -1) for w in (wq_str, wk_str, wv_str)], shards
        )
        self.wqkv = ttnn.as_tensor(
            qkv_weight[None, None],
            dtype=self.wqkv_dtype,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG
            if self.TG
            else configuration.create_dram_sharded_mem_config(
                configuration.dim, configuration.qkv_size // configuration.num_devices
            ),
            mesh_mapper=ttnn.ShardTensor2dMesh(
                self.mesh_device, dims=(3, 2) if self.TG else (2, 3), mesh_shape=configuration.cluster_shape
            ),
            cache_file_name=cache_name("wqkv_sharded_2d"),
        )

        def norm_reshard(x, norm, mode):
            """Decode heads are height-sharded, which our RMSNorm cannot emit: normalise an L1 interleaved copy
            and put the result back on the original sharded layout."""
            if mode == "decode":
                sharded_layout = x.memory_config()
                normed = norm(ttnn.to_memory_config(x, ttnn.L1_MEMORY_CONFIG, dtype=x.dtype), mode)
                return ttnn.to_memory_config(normed, sharded_layout, dtype=normed.dtype)
            return norm(x, mode)

        def head_rmsnorm(weight_key):
            """RMSNorm over head_dim for per-head Q/K normalisation (Qwen3, Gemma-3)."""
            return RMSNorm(
                device=self.mesh_device,
                dim=self.head_dim,
                eps=configuration.norm_eps,
                state_dict=self.state_dict,
                state_dict_prefix=None,  # weight_key is already the full name
                weight_cache_path=None if configuration.dummy_weights else weight_cache_path,
                weight_dtype=ttnn.bfloat16,
                weight_key=weight_key,
                is_distributed=False,
                add_unit_offset=self.rms_norm_add_unit_offset,
                sharded_program_config=None,
                sharded_output_config=None,
                tt_ccl=self.tt_ccl,
            )

        if f"{q_norm_str}.weight" in self.state_dict:
            q_rmsnorm = head_rmsnorm(q_norm_str)
            self.q_norm = lambda x, mode: norm_reshard(x, q_rmsnorm, mode)
        else:
            self.q_norm = lambda x, mode: x

        if f"{k_norm_str}.weight" in self.state_dict:
            k_rmsnorm = head_rmsnorm(k_norm_str)
            self.k_norm = lambda x, mode: norm_reshard(x, k_rmsnorm, mode)
        else:
            self.k_norm = lambda x, mode: x

        # WO. When decode fuses the all-gather into the WO matmul (T3K ring), or on a galaxy, it lives in plain
        # DRAM split the other way round; otherwise it is DRAM-sharded for the DRAM-sharded decode matmul.
        self.use_fused_all_gather_matmul = self.model_config["USE_FUSED_ALL_GATHER_MATMUL"]
        self.wo = ttnn.as_tensor(
            self.state_dict[f"{wo_str}.weight"].transpose(-1, -2)[None, None],
            dtype=self.wo_dtype,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG
            if (self.use_fused_all_gather_matmul or self.TG)
            else configuration.create_dram_sharded_mem_config(
                (configuration.n_heads * configuration.head_dim) // configuration.num_devices,
                configuration.dim,
            ),
            mesh_mapper=ttnn.ShardTensor2dMesh(
                self.mesh_device,
                dims=(2, 3) if (self.use_fused_all_gather_matmul or self.TG) else (3, 2),
                mesh_shape=configuration.cluster_shape,
            ),
            cache_file_name=cache_name(
                "wo_width_sharded_2d" if (self.use_fused_all_gather_matmul or self.TG) else "wo"
            ),
        )

        # With a paged cache owned by the serving engine (vLLM), the caller passes kv_cache into forward instead
        if not use_paged_kv_cache:
            self.init_kv_cache(configuration, weight_cache_path)

        # Gemma scales scores by query_pre_attn_scalar instead of head_dim
        if configuration.query_pre_attn_scalar is not None:
            self.scale = configuration.query_pre_attn_scalar**-0.5
        else:
            self.scale = self.head_dim**-0.5

    def init_kv_cache(self, configuration, weight_cache_path):
        """Allocate this layer's zero-filled K and V caches on device (``self.layer_past``)."""
        if self.paged_attention_config:
            # a pool of fixed-size blocks shared by all users through a page table
            cache_shape = (
                self.paged_attention_config.max_num_blocks,
                self.n_local_kv_heads,
                self.paged_attention_config.block_size,
                self.head_dim,
            )
        else:
            # one full-length row per user
            cache_shape = (
                self.batch_size_per_device_group,
                self.n_local_kv_heads,
                self.max_seq_len,
                self.head_dim,
            )

        def empty_cache():
            zeros = torch.zeros(cache_shape)
            return ttnn.as_tensor(
                zeros,
                dtype=self.kv_cache_dtype or ttnn.bfloat8_b,
                layout=self.model_config["ATTN_W_LAYOUT_TILE"],
                device=self.mesh_device,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
                mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
                cache_file_name=(
                    f"{weight_cache_path}/kvcache_{zeros.shape}"
                    if weight_cache_path and not configuration.dummy_weights
                    else None
                ),
            )

        self.layer_past = [empty_cache(), empty_cache()]  # [keys, values]

    def forward_decode(
        self,
        x: ttnn.Tensor,
        current_pos,
        rot_mats=None,
        page_table=None,
        kv_cache=None,
    ) -> ttnn.Tensor:
        """One new token per user.

        x: (1, 1, batch, dim), width-sharded; current_pos: (batch,) index each user's token is written at.
        """
        mesh_rows, mesh_cols = list(self.mesh_device.shape)

        # --- fused QKV projection --------------------------------------------------------------------------------
        qkv_partial = ttnn.linear(
            x,
            self.wqkv,
            dtype=self.ccl_dtype if self.TG else self.activation_dtype or ttnn.bfloat16,
            memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
            program_config=self.model_config["XQKV_DECODE_PROGCFG"],
            compute_kernel_config=self.li_qkv_decode_compute_kernel_cfg,
        )
        if self.wqkv_bias_decode and not self.TG:
            # the bias is added separately; pick the copy as tall as the padded batch (fixed once traced)
            qkv_partial = (
                qkv_partial + self.wqkv_bias_decode[math.ceil(qkv_partial.shape[-2] / self.tile_size) - 1]
            )
        ttnn.deallocate(x)

        # on a galaxy each mesh column holds a partial sum of the projection; elsewhere this returns its input
        qkv_summed = tt_all_reduce(
            qkv_partial,
            self.mesh_device,
            self.tt_ccl,
            cluster_axis=1,
            num_reduce_scatter_links=self.num_reduce_scatter_links,
            num_all_gather_links=self.num_all_gather_links,
            memory_config=self.model_config["QKV_OUT_GATHERED_MEMCFG"](mesh_cols),
            sharded=True,
            dtype=self.ccl_dtype,
            topology=self.ccl_topology,
        )

        if self.TG:
            if self.wqkv_bias_decode:
                # added after the reduce so that it is counted once, not once per column
                bias_rows = self.wqkv_bias_decode[math.ceil(qkv_summed.shape[-2] / self.tile_size) - 1]
                qkv_summed = ttnn.add(qkv_summed, bias_rows, memory_config=ttnn.L1_MEMORY_CONFIG)
            # keep only the 8 users of this device's column
            qkv = ttnn.matmul(
                self.slice_mat,
                qkv_summed,
                dtype=ttnn.bfloat16,
                memory_config=self.model_config["CREATE_HEAD_INPUT_MEMCFG"],
                compute_kernel_config=self.compute_kernel_config_hifi4,  # a 0/1 selection: keep it exact
            )
        else:
            # the head split below takes bfloat16, interleaved
            qkv = ttnn.sharded_to_interleaved(qkv_partial, ttnn.L1_MEMORY_CONFIG, ttnn.bfloat16)
        ttnn.deallocate(qkv_partial)

        # logical rows = the users this device serves; padded rows = one tile
        qkv_width = qkv.shape[3]
        qkv = ttnn.reshape(qkv, (1, 1, self.batch_size_per_device_group, qkv_width), (1, 1, 32, qkv_width))

        # --- heads, optional per-head norms, rotary ------------------------------------------------------------
        q_raw, k_raw, v_new = ttnn.experimental.nlp_create_qkv_heads_decode(
            qkv,
            num_heads=self.n_local_heads,
            num_kv_heads=self.n_local_kv_heads,
            memory_config=self.model_config["CREATE_QKV_DECODE_SHARD"],
        )
        q_raw = self.q_norm(q_raw, mode="decode")
        k_raw = self.k_norm(k_raw, mode="decode")
        ttnn.deallocate(qkv)

        cos, sin = rot_mats[0], rot_mats[1]
        if self.use_qk_fused:
            q_rot, k_rot = ttnn.experimental.rotary_embedding_llama_fused_qk(
                q_raw, k_raw, cos, sin, self.transformation_mats["decode"]
            )
        else:
            q_rot, k_rot = (
                ttnn.experimental.rotary_embedding_llama(
                    heads, cos, sin, self.transformation_mats["decode"], is_decode_mode=True
                )
                for heads in (q_raw, k_raw)
            )
        ttnn.deallocate(q_raw)
        ttnn.deallocate(k_raw)

        # --- write the new K/V at current_pos, then attend over the cache --------------------------------------
        if kv_cache:
            cache_k, cache_v = kv_cache[0], kv_cache[1]
        else:
            cache_k, cache_v = self.layer_past[0], self.layer_past[1]
        for cache, new_rows in ((cache_k, k_rot), (cache_v, v_new)):
            ttnn.experimental.paged_update_cache(
                cache, new_rows, update_idxs_tensor=current_pos, page_table=page_table
            )
            ttnn.deallocate(new_rows)

        # Caveat: decode SDPA splits its reduction differently for different batch sizes, so the same prompt
        # can give slightly different numbers when run alone or alongside other users.
        if page_table:
            scores = ttnn.transformer.paged_scaled_dot_product_attention_decode(
                q_rot,
                cache_k,
                cache_v,
                cur_pos_tensor=current_pos,
                page_table_tensor=page_table,
                scale=self.scale,
                sliding_window_size=self.sliding_window,
                program_config=self.model_config["SDPA_DECODE_PROGCFG"],
                compute_kernel_config=self.sdpa_decode_compute_kernel_cfg,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
            )
        else:
            scores = ttnn.transformer.scaled_dot_product_attention_decode(
                q_rot,
                cache_k,
                cache_v,
                cur_pos_tensor=current_pos,
                scale=self.scale,
                sliding_window_size=self.sliding_window,
                program_config=self.model_config["SDPA_DECODE_PROGCFG"],
                compute_kernel_config=self.sdpa_decode_compute_kernel_cfg,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
            )
        ttnn.deallocate(q_rot)

        # --- merge heads --------------------------------------------------------------------------------------
        scores_sharded = ttnn.to_memory_config(
            scores,
            memory_config=self.model_config["SCORES_BATCHED_MM_OUTPUT_MEMCFG"](
                self.batch_size_per_device_group
            ),
        )
        merged = ttnn.experimental.nlp_concat_heads_decode(scores_sharded, num_heads=self.n_local_heads)
        ttnn.deallocate(scores_sharded)
        ttnn.deallocate(scores)

        # --- output projection and reduction ------------------------------------------------------------------
        if self.use_fused_all_gather_matmul:
            # T3K: one op gathers the heads from the ring and multiplies by WO
            merged = ttnn.to_memory_config(merged, self.model_config["ATTN_ALL_GATHER_MATMUL_OUTPUT_MEMCFG"])
            _, projected = ttnn.experimental.all_gather_matmul_async(
                merged,
                self.wo,
                persistent_output_buffer=None,
                dim=3,
                all_gather_core_grid_offset=(0, 4),
                num_links=1 if self.ccl_topology == ttnn.Topology.Ring else 2,
                multi_device_global_semaphore=self.tt_ccl.get_and_cycle_ag_semaphore_handles(),
                barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(),
                memory_config_ag=self.model_config["ATTN_ALL_GATHER_MATMUL_OUTPUT_MEMCFG"],
                memory_config_mm=self.model_config["DECODE_RESIDUAL_MEMCFG"],
                program_config=self.model_config["ATTN_ALL_GATHER_MATMUL_PROGCFG"],
                compute_kernel_config=self.li_o_decode_compute_kernel_cfg,
                chunks_per_sync=10,
                num_workers_per_link=2,
                num_buffers_per_channel=2,
            )
            ttnn.deallocate(merged)
            return ttnn.to_memory_config(projected, self.model_config["DECODE_RESIDUAL_MEMCFG"])

        if self.TG:
            # Each column's head merge is a 32-row tile holding its 8 users: stack the 4 columns' tiles, then a
            # selection matmul packs the 4 x 8 real rows into one (32, 128) -> (32, hidden) tile.
            stacked = tt_all_gather(
                merged,
                self.mesh_device,
                self.tt_ccl,
                dim=2,
                cluster_axis=1,
                num_links=2,
                memory_config=self.model_config["GATHER_USERS_MEMCFG"](mesh_cols),
                sharded=True,
                # kept in bfloat16 (not ccl_dtype): the SDPA output is bfloat16 and a cast would cost two reshards
            )
            stacked = ttnn.to_memory_config(stacked, ttnn.L1_MEMORY_CONFIG)
            wo_input = ttnn.matmul(
                self.user_selection_matrix,
                stacked,
                core_grid=ttnn.CoreGrid(y=4, x=8),
                dtype=ttnn.bfloat16,
                memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
                compute_kernel_config=self.compute_kernel_config_hifi4,  # a 0/1 selection: keep it exact
            )
        else:
            wo_input = merged

        # galaxy: a plain matmul on a 4x8 grid; elsewhere the DRAM-sharded program config
        projected = ttnn.matmul(
            wo_input,
            self.wo,
            core_grid=ttnn.CoreGrid(y=4, x=8) if self.TG else None,
            program_config=self.model_config["ATTN_OUTPUT_PROGCFG"] if not self.TG else None,
            memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG if self.TG else merged.memory_config(),
            dtype=ttnn.bfloat8_b if self.TG else None,
            compute_kernel_config=self.li_o_decode_compute_kernel_cfg,
        )
        ttnn.deallocate(merged)

        # sum the per-device partial products over the mesh rows (1-D: reduce-scatter into the residual shards)
        if self.TG:
            out_memory_config = (
                self.model_config["SELF_OUT_REDUCE_SCATTER_MEMCFG"]
                if self.hidden_size == 8192
                else self.model_config["SELF_OUT_GATHERED_MEMCFG"](mesh_rows)
            )
        else:
            out_memory_config = self.model_config["DECODE_RESIDUAL_MEMCFG"]
        out = tt_all_reduce(
            projected,
            self.mesh_device,
            self.tt_ccl,
            cluster_axis=0,
            dim=0 if (self.TG and self.hidden_size < 8192) else 3,
            num_reduce_scatter_links=self.num_reduce_scatter_links,
            num_all_gather_links=self.num_all_gather_links,
            topology=self.ccl_topology,
            memory_config=out_memory_config,
            sharded=True,
            dtype=self.ccl_dtype,
            use_composite=True if self.hidden_size == 8192 else False,
        )
        if not self.TG:
            out = ttnn.to_memory_config(out, self.model_config["DECODE_RESIDUAL_MEMCFG"])
        return out

    def forward_prefill(
        self,
        x_11SH,
        rot_mats,
        user_id: int = 0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ):
        seq_len = x_11SH.shape[-2]
        assert seq_len % 128 == 0 and seq_len > 0, (
            f"prefill length {seq_len} is not a positive multiple of 128"
        )
        qkv_rows = self.MAX_QKV_MM_SEQ_LEN

        # --- fused QKV projection --------------------------------------------------------------------------------
        # sequences longer than MAX_QKV_MM_SEQ_LEN are cut into a batch of equal pieces for the matmul
        if seq_len > qkv_rows:
            if seq_len % qkv_rows != 0:
                raise ValueError(
                    f"prefill length {seq_len} is not a multiple of MAX_QKV_MM_SEQ_LEN={qkv_rows}"
                )
            x_11SH = ttnn.reshape(x_11SH, [1, seq_len // qkv_rows, qkv_rows, -1])

        qkv = ttnn.linear(
            x_11SH,
            self.wqkv,
            dtype=self.ccl_dtype if self.TG else self.activation_dtype or ttnn.bfloat16,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            program_config=self.model_config["XQKV_PREFILL_PROGCFG"](seq_len),
            compute_kernel_config=self.li_qkv_prefill_compute_kernel_cfg,
        )
        # bias as a separate broadcast add: before the reduce on 1-D meshes, after it on a galaxy (counted once)
        if self.wqkv_bias_prefill is not None and not self.TG:
            qkv = qkv + self.wqkv_bias_prefill
        qkv = tt_all_reduce(
            qkv,
            self.mesh_device,
            self.tt_ccl,
            cluster_axis=1,
            num_reduce_scatter_links=self.num_reduce_scatter_links,
            num_all_gather_links=self.num_all_gather_links,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            dtype=self.ccl_dtype,
        )
        if self.wqkv_bias_prefill is not None and self.TG:
            qkv = qkv + self.wqkv_bias_prefill
        if seq_len > qkv_rows:
            qkv = ttnn.reshape(qkv, [1, 1, seq_len, -1])
        ttnn.deallocate(x_11SH)

        # --- heads, optional per-head norms, rotary ------------------------------------------------------------
        q_raw, k_raw, v_new = ttnn.experimental.nlp_create_qkv_heads(
            qkv,
            num_heads=self.n_local_heads,
            num_kv_heads=self.n_local_kv_heads,
            transpose_k_heads=False,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )
        q_raw = self.q_norm(q_raw, mode="prefill")
        k_raw = self.k_norm(k_raw, mode="prefill")
        ttnn.deallocate(qkv)

        def rotate(heads):
            # the prefill rotary kernel only accepts bfloat16
            if heads.dtype != ttnn.bfloat16:
                heads = ttnn.typecast(heads, dtype=ttnn.bfloat16)
            rotated = ttnn.experimental.rotary_embedding_llama(
                heads, rot_mats[0], rot_mats[1], self.transformation_mats["prefill"], is_decode_mode=False
            )
            ttnn.deallocate(heads)
            return rotated

        q_rot = rotate(q_raw)
        k_rot = rotate(k_raw)

        # --- fill the KV cache with this user's keys and values ----------------------------------------------
        if kv_cache:
            cache_k, cache_v = kv_cache[0], kv_cache[1]
        else:
            cache_k, cache_v = self.layer_past[0], self.layer_past[1]

        k_cached = ttnn.typecast(k_rot, dtype=cache_k.dtype)
        ttnn.deallocate(k_rot)
        v_cached = ttnn.typecast(v_new, dtype=cache_v.dtype)
        ttnn.deallocate(v_new)

        # long non-paged fills go through an L1-sharded copy (the cache update cannot take them interleaved)
        if seq_len >= self.min_kv_prefill_shard_seqlen and not self.TG and not page_table:
            fill_layout = self.model_config["KV_PREFILL_MEM_CFG"](seq_len)
            k_fill = ttnn.interleaved_to_sharded(k_cached, fill_layout)
            v_fill = ttnn.interleaved_to_sharded(v_cached, fill_layout)
        else:
            k_fill, v_fill = k_cached, v_cached

        if self.TG and not page_table:
            # Non-paged galaxy caches hold 8 users per mesh column: fill only the column that owns this user
            self.prefill_fill_cache_for_user_column(cache_k, k_fill, user_id)
            self.prefill_fill_cache_for_user_column(cache_v, v_fill, user_id)
        elif page_table:
            # The pages of this prefill (the chunk's own table in chunked prefill) cover the real tokens only;
            # drop the padded tail of the sequence so the fill does not run past them.
            pages = chunk_page_table if chunk_page_table is not None else page_table
            covered = pages.shape[1] * cache_k.shape[2]  # pages x block size
            for cache, fill in ((cache_k, k_fill), (cache_v, v_fill)):
                if covered < fill.shape[2]:
                    fill = fill[:, :, :covered, :]
                ttnn.experimental.paged_fill_cache(cache, fill, pages, batch_idx=0)
        else:
            slot = user_id % self.batch_size_per_device_group
            ttnn.fill_cache(cache_k, k_fill, slot)
            ttnn.fill_cache(cache_v, v_fill, slot)

        if seq_len >= self.min_kv_prefill_shard_seqlen and not self.TG and not page_table:
            ttnn.deallocate(k_fill)
            ttnn.deallocate(v_fill)

        # --- attention ---------------------------------------------------------------------------------------
        q_sdpa = ttnn.typecast(q_rot, dtype=self.activation_dtype or ttnn.bfloat8_b)
        ttnn.deallocate(q_rot)

        if chunk_start_idx is not None:
            # a later chunk of a long prompt attends to everything already in the (paged) cache
            if self.sliding_window is not None:
                raise NotImplementedError("chunked prefill is not implemented for sliding-window layers")
            context = ttnn.transformer.chunked_scaled_dot_product_attention(
                input_tensor_q=q_sdpa,
                input_tensor_k=cache_k,
                input_tensor_v=cache_v,
                page_table_tensor=page_table,
                chunk_start_idx=chunk_start_idx,
                program_config=self.model_config["SDPA_PROGCFG"](seq_len, chunk_start_idx),
                compute_kernel_config=self.sdpa_prefill_compute_kernel_cfg,
            )
        else:
            context = ttnn.transformer.scaled_dot_product_attention(
                q_sdpa,
                k_cached,
                v_cached,
                is_causal=True,
                scale=self.scale,
                sliding_window_size=self.sliding_window,
                program_config=self.model_config["SDPA_PROGCFG"](seq_len),
                compute_kernel_config=self.sdpa_prefill_compute_kernel_cfg,
            )
        for done in (q_sdpa, k_cached, v_cached):
            ttnn.deallocate(done)

        # --- merge heads, output projection, reduction ------------------------------------------------------
        context = ttnn.reshape(context, [1, self.n_local_heads, -1, self.head_dim])
        merged = ttnn.experimental.nlp_concat_heads(context, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        ttnn.deallocate(context)

        wo_rows = 1024  # WO runs on pieces of at most this many rows
        if seq_len > wo_rows:
            merged = ttnn.reshape(merged, [1, seq_len // wo_rows, wo_rows, -1])

        if self.use_fused_all_gather_matmul:
            # WO is split for the fused decode op here, so prefill gathers all heads first (and needs no reduce)
            merged = ttnn.experimental.all_gather_async(
                merged,
                persistent_output_buffer=None,
                dim=3,
                num_links=1,
                topology=self.ccl_topology,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
                multi_device_global_semaphore=self.tt_ccl.get_and_cycle_ag_semaphore_handles(),
                barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(),
                chunks_per_sync=10,
                num_workers_per_link=2,
                num_buffers_per_channel=2,
            )

        out = ttnn.linear(
            merged,
            self.wo,
            dtype=self.activation_dtype or ttnn.bfloat8_b,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            program_config=self.model_config["WO_PREFILL_PROGCFG"](seq_len),
            compute_kernel_config=self.li_o_prefill_compute_kernel_cfg,
        )
        if seq_len > wo_rows:
            out = ttnn.reshape(out, [1, 1, seq_len, -1])
        ttnn.deallocate(merged)

        if not self.use_fused_all_gather_matmul:
            out = tt_all_reduce(
                out,
                self.mesh_device,
                self.tt_ccl,
                cluster_axis=0,
                dim=0 if self.TG else 3,
                num_reduce_scatter_links=self.num_reduce_scatter_links,
                num_all_gather_links=self.num_all_gather_links,
                topology=self.ccl_topology,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
                dtype=self.ccl_dtype,
            )
        return out

    def forward(
        self,
        x,
        current_pos,
        rot_mats=None,
        user_id=0,
        mode="decode",
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ):
        if mode == "prefill":
            return self.forward_prefill(
                x,
                rot_mats,
                user_id,
                page_table=page_table,
                chunk_page_table=chunk_page_table,
                chunk_start_idx=chunk_start_idx,
                kv_cache=kv_cache,
            )
        return self.forward_decode(x, current_pos, rot_mats, page_table=page_table, kv_cache=kv_cache)

    def prefill_fill_cache_for_user_column(self, cache, fill, user_id):
        """Fill the cache of the devices in the mesh column that owns ``user_id`` (every 4th device)."""
        column = user_id // self.batch_size_per_device_group
        columns = list(self.mesh_device.shape)[1]
        slot = user_id % self.batch_size_per_device_group
        # device tensors come row-major over the mesh, so one column is every `columns`-th entry from `column`
        pairs = list(zip(ttnn.get_device_tensors(cache), ttnn.get_device_tensors(fill)))
        for cache_on_device, fill_on_device in pairs[column::columns]:
            ttnn.fill_cache(cache_on_device, fill_on_device, slot)
