"""What ``Attention1D.from_model_args`` and ``Attention2D.from_model_args`` read from TTTv1 the same way: the
layer's weights from the Meta-named state dict, its per-layer precision (``DECODERS_OPTIMIZATIONS``), q/k norms,
sliding window and scale, and the prefill program configs of ``model_config``. The caller passes TTTv1's
``OpGroup`` / ``TensorGroup`` enums (it imports ``tttv1`` lazily; this file never does)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tttv2 import ttnn
from tttv2.modules.lazy_weight import LazyWeight, host_array


def _head_norm_config(args, state_dict, key: str, cache_dir, name: str, norm_config_class):
    """TTTv1's per-head RMSNorm (over head_dim, bfloat16 weight, HiFi2 with fp32 accumulation) as a config."""
    weight = host_array(state_dict[f"{key}.weight"]).astype(np.float32)
    return norm_config_class(
        weight=LazyWeight(weight, cache_dir=cache_dir, name=name),
        eps=args.norm_eps,
        add_unit_offset=args.rms_norm_add_unit_offset,
        compute_kernel_config=ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi2,
            math_approx_mode=False,
            fp32_dest_acc_en=True,
            packer_l1_acc=True,
        ),
    )


def common_fields(
    args, state_dict, layer_num: int, weight_cache_path, dtype, op_group, tensor_group, norm_config_class
) -> dict:
    """Config fields both topologies take from TTTv1 for layer ``layer_num`` (q/k norms as
    ``norm_config_class``, the topology's RMSNorm config)."""
    model_config = args.get_model_config()
    precision = model_config["DECODERS_OPTIMIZATIONS"]

    def tensor_dtype(group):
        return precision.get_tensor_dtype(decoder_id=layer_num, tensor=group)

    def fidelity(group):
        return precision.get_math_fidelity(decoder_id=layer_num, op=group, configuration=args)

    prefix = args.get_state_dict_prefix("Attention", layer_num)
    cache_dir = None if args.dummy_weights or weight_cache_path is None else Path(weight_cache_path) / prefix

    def matrix(name):
        return host_array(state_dict[f"{prefix}.{name}.weight"]).astype(np.float32).T

    wqkv = np.concatenate([matrix("wq"), matrix("wk"), matrix("wv")], axis=-1)
    fields = dict(
        wqkv=LazyWeight(np.ascontiguousarray(wqkv), cache_dir=cache_dir, name="wqkv"),
        wo=LazyWeight(np.ascontiguousarray(matrix("wo")), cache_dir=cache_dir, name="wo"),
        n_heads=args.n_heads,
        n_kv_heads=args.n_kv_heads,
        head_dim=args.head_dim,
        dim=args.dim,
        max_batch_size=args.max_batch_size,
        max_seq_len=args.max_seq_len,
        wqkv_dtype=tensor_dtype(tensor_group.WQKV),
        wo_dtype=tensor_dtype(tensor_group.WO),
        kv_cache_dtype=tensor_dtype(tensor_group.KV_CACHE) or ttnn.bfloat8_b,
        prefill_attention_dtype=tensor_dtype(tensor_group.ACTIVATION) or ttnn.bfloat8_b,
        li_qkv_decode_compute_kernel_cfg=fidelity(op_group.LI_QKV_DECODE),
        sdpa_decode_compute_kernel_cfg=fidelity(op_group.SDPA_DECODE),
        li_o_decode_compute_kernel_cfg=fidelity(op_group.LI_O_DECODE),
        li_qkv_prefill_compute_kernel_cfg=fidelity(op_group.LI_QKV_PREFILL),
        sdpa_prefill_compute_kernel_cfg=fidelity(op_group.SDPA_PREFILL),
        li_o_prefill_compute_kernel_cfg=fidelity(op_group.LI_O_PREFILL),
        decode_create_qkv_head_memcfg=model_config["CREATE_QKV_DECODE_SHARD"],
        decode_sdpa_prg_config=model_config["SDPA_DECODE_PROGCFG"],
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_xqkv_prg_config=model_config["XQKV_PREFILL_PROGCFG"],
        prefill_sdpa_prg_config=model_config["SDPA_PROGCFG"],
        prefill_wo_prg_config=model_config["WO_PREFILL_PROGCFG"],
        max_qkv_mm_seq_len=args.MAX_QKV_MM_SEQ_LEN,
        num_reduce_scatter_links=args.num_reduce_scatter_links,
        num_all_gather_links=args.num_all_gather_links,
        topology=args.ccl_topology(),
        # Gemma scales the scores by query_pre_attn_scalar instead of head_dim
        scale=(args.query_pre_attn_scalar or args.head_dim) ** -0.5,
    )
    layer_types = args.layer_types or []
    if layer_num < len(layer_types) and layer_types[layer_num] == "sliding_attention":
        fields["sliding_window"] = args.sliding_window
    if f"{prefix}.wq.bias" in state_dict:
        bias = np.concatenate([host_array(state_dict[f"{prefix}.{w}.bias"]) for w in ("wq", "wk", "wv")])
        fields["wqkv_bias"] = LazyWeight(bias.astype(np.float32), cache_dir=cache_dir, name="wqkv_bias")
        # TTTv1 stores the bias in the layer's dtype argument (bfloat8_b from its Transformer)
        fields["wqkv_bias_dtype"] = dtype or ttnn.bfloat16
    for norm in ("q_norm", "k_norm"):
        if f"{prefix}.{norm}.weight" in state_dict:
            fields[f"{norm}_config"] = _head_norm_config(
                args, state_dict, f"{prefix}.{norm}", cache_dir, norm, norm_config_class
            )
    return fields


def paging_fields(paged_attention_config, use_paged_kv_cache: bool) -> dict:
    return dict(paged_attention_config=paged_attention_config, external_kv_cache=bool(use_paged_kv_cache))


def transformation_fields(transformation_mats) -> dict:
    return dict(
        transformation_mat_decode=transformation_mats["decode"],
        transformation_mat_prefill=transformation_mats["prefill"],
    )
