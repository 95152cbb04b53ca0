"""One transformer block: norm → attention → residual add → norm → MLP → residual add.

The residual stream ``x`` stays fractured over devices (width-sharded in L1 in decode, DRAM in prefill); norms
gather it, attention and MLP return it fractured again. Modes are strings here (G2); the MLP is G3 and takes
them as they come.
"""

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.attention import Attention
from tttv1.tt.distributed_norm import DistributedNorm
from tttv1.tt.mlp import MLP
from tttv1.tt.mlp_legacy import MLP as LegacyMLP
from tttv1.tt.model_config import TensorGroup
from tttv1.tt.rmsnorm import RMSNorm


class TransformerBlock(LightweightModule):
    def __init__(
        self,
        args,
        mesh_device,
        tt_ccl,
        dtype,
        state_dict,
        layer_num,
        weight_cache_path,
        transformation_mats,
        paged_attention_config=None,
        use_paged_kv_cache=False,
        attention_class=None,
    ):
        super().__init__()

        self.args = args
        self.model_config = args.get_model_config()
        self.state_dict = state_dict
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.layer_num = layer_num
        self.current = 0
        self.dim = self.hidden_size = args.dim
        self.n_heads, self.n_kv_heads = args.n_heads, args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.max_seq_len = args.max_seq_len
        self.max_batch_size = args.max_batch_size

        shared = dict(
            mesh_device=mesh_device,
            tt_ccl=self.tt_ccl,
            args=args,
            state_dict=state_dict,
            weight_cache_path=weight_cache_path,
            layer_num=layer_num,
            dtype=dtype,
        )
        self.attention = (attention_class or Attention)(
            **shared,
            transformation_mats=transformation_mats,
            configuration=args,
            paged_attention_config=paged_attention_config,
            use_paged_kv_cache=use_paged_kv_cache,
        )
        # TTTV1_MLP_GENERATION=G1 swaps in the dict-keyed MLP; the G3 one is the default
        mlp_class = LegacyMLP if args.mlp_generation == "G1" else MLP
        self.feed_forward = mlp_class(**shared, model_config=self.model_config)

        # recorded for callers: with several devices the residual is fractured and adds are not done in place
        self.residual_inplace = not (args.num_devices > 1)

        prefix = args.get_state_dict_prefix("", layer_num)

        def make_norm(weight_key, program_config, output_config, **rmsnorm_extra):
            """A DistributedNorm around this layer's RMSNorm ``weight_key``."""
            rmsnorm = RMSNorm(
                device=mesh_device,
                dim=args.dim,
                eps=args.norm_eps,
                state_dict=state_dict,
                state_dict_prefix=prefix,
                weight_key=weight_key,
                weight_cache_path=None if args.dummy_weights else weight_cache_path,
                weight_dtype=ttnn.bfloat16,
                add_unit_offset=args.rms_norm_add_unit_offset,
                is_distributed=args.is_distributed_norm,
                sharded_program_config=program_config,
                sharded_output_config=output_config,
                ccl_topology=args.ccl_topology(),
                tt_ccl=self.tt_ccl,
                **rmsnorm_extra,
            )
            return DistributedNorm(rmsnorm, args, tt_ccl=self.tt_ccl, TG=args.is_galaxy)

        # these two checkpoints lose accuracy when the norms accumulate in fp32
        main_norm_extra = {}
        if args.base_model_name in ("Qwen2.5-7B", "Qwen2.5-VL-7B"):
            main_norm_extra["fp32_dest_acc_en"] = False
        self.attention_norm = make_norm(
            "attention_norm",
            self.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
            self.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
            **main_norm_extra,
        )
        self.ff_norm = make_norm(
            "ffn_norm",
            self.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
            self.model_config["SHARDED_MLP_INPUT_MEMCFG"],
            **main_norm_extra,
        )

        # optional sandwich norms around the MLP (Gemma): present only when the checkpoint carries their weights
        self.pre_ff_norm = self.post_ff_norm = None
        if f"{prefix}pre_feedforward_layernorm.weight" in state_dict:
            self.pre_ff_norm = make_norm(
                "pre_feedforward_layernorm",
                self.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
                self.model_config["SHARDED_MLP_INPUT_MEMCFG"],
            )
        if f"{prefix}post_feedforward_layernorm.weight" in state_dict:
            self.post_ff_norm = make_norm(
                "post_feedforward_layernorm",
                self.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
                self.model_config["SHARDED_MLP_INPUT_MEMCFG"],
            )

    def forward(
        self,
        x: ttnn.Tensor,
        current_pos,
        rot_mats=None,
        user_id=0,
        mode="decode",
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ) -> ttnn.Tensor:
        TG = self.args.is_galaxy
        # the residual stream lives in L1 (sharded) during decode and in DRAM during prefill
        skip_mem_cfg = (
            self.model_config["DECODE_RESIDUAL_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        )
        assert x.memory_config() == skip_mem_cfg, (
            f"residual arrives in {x.memory_config()}, expected {skip_mem_cfg}"
        )

        # attention sub-block: the norm hands attention the full row, attention returns a per-device slice
        attn_out = self.attention.forward(
            self.attention_norm(x, mode),
            current_pos,
            rot_mats,
            user_id,
            mode,
            page_table=page_table,
            chunk_page_table=chunk_page_table,
            chunk_start_idx=chunk_start_idx,
            kv_cache=kv_cache,
        )
        residual = ttnn.add(x, attn_out, memory_config=skip_mem_cfg, dtype=ttnn.bfloat16 if TG else None)
        ttnn.deallocate(attn_out)
        if mode == "prefill":
            x.deallocate(True)

        # feed-forward sub-block, with the optional extra norms on either side
        ff_in = self.ff_norm(residual, mode)
        if self.pre_ff_norm is not None:
            ff_in = self.pre_ff_norm(ff_in, mode)
        if TG and mode == "decode":
            ff_in = ttnn.to_memory_config(ff_in, memory_config=self.model_config["MLP_ACT_MEMCFG"])
        ff_out = self.feed_forward.forward(ff_in, mode)
        if self.post_ff_norm is not None:
            ff_out = self.post_ff_norm(ff_out, mode)

        if TG and not self.args.is_distributed_norm(mode):
            out_dtype = self.args.ccl_dtype
        else:
            precision = self.model_config["DECODERS_OPTIMIZATIONS"]
            out_dtype = (
                precision.get_tensor_dtype(decoder_id=self.layer_num, tensor=TensorGroup.ACTIVATION)
                or ttnn.bfloat16
            )
        return ttnn.add(residual, ff_out, memory_config=skip_mem_cfg, dtype=out_dtype)
