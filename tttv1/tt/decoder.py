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

        self.state_dict = state_dict
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl

        self.args = args
        self.hidden_size = args.dim
        self.n_heads = args.n_heads
        self.head_dim = self.hidden_size // self.n_heads
        self.max_seq_len = args.max_seq_len
        self.dim = args.dim
        self.max_batch_size = args.max_batch_size
        self.n_kv_heads = args.n_kv_heads
        self.current = 0
        self.model_config = args.get_model_config()

        self.layer_num = layer_num

        ActualAttentionClass = attention_class if attention_class is not None else Attention

        self.attention = ActualAttentionClass(
            mesh_device=mesh_device,
            tt_ccl=self.tt_ccl,
            args=args,
            state_dict=state_dict,
            weight_cache_path=weight_cache_path,
            layer_num=layer_num,
            dtype=dtype,
            transformation_mats=transformation_mats,
            configuration=args,
            paged_attention_config=paged_attention_config,
            use_paged_kv_cache=use_paged_kv_cache,
        )
        # G3 MLP by default; the older dict-keyed form when asked for (TTTV1_MLP_GENERATION=G1)
        MLPClass = LegacyMLP if args.mlp_generation == "G1" else MLP
        self.feed_forward = MLPClass(
            mesh_device=mesh_device,
            tt_ccl=self.tt_ccl,
            args=args,
            state_dict=state_dict,
            weight_cache_path=weight_cache_path,
            layer_num=layer_num,
            dtype=dtype,
            model_config=self.model_config,
        )
        # Multi-device residual adds keep the fractured layout; single devices may add in place
        self.residual_inplace = not (args.num_devices > 1)
        # Qwen2.5-7B loses accuracy with fp32 accumulation in the norms' packer path
        norm_kwargs = {}
        if self.args.base_model_name in ("Qwen2.5-7B", "Qwen2.5-VL-7B"):
            norm_kwargs["fp32_dest_acc_en"] = False

        self.attention_norm = DistributedNorm(
            RMSNorm(
                device=mesh_device,
                dim=args.dim,
                eps=args.norm_eps,
                state_dict=state_dict,
                state_dict_prefix=args.get_state_dict_prefix("", layer_num),
                weight_cache_path=None if args.dummy_weights else weight_cache_path,
                weight_dtype=ttnn.bfloat16,
                weight_key="attention_norm",
                is_distributed=self.args.is_distributed_norm,
                add_unit_offset=self.args.rms_norm_add_unit_offset,
                sharded_program_config=self.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
                sharded_output_config=self.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
                ccl_topology=self.args.ccl_topology(),
                tt_ccl=self.tt_ccl,
                **norm_kwargs,
            ),
            args,
            tt_ccl=self.tt_ccl,
            TG=args.is_galaxy,
        )
        self.ff_norm = DistributedNorm(
            RMSNorm(
                device=mesh_device,
                dim=args.dim,
                eps=args.norm_eps,
                state_dict=state_dict,
                state_dict_prefix=args.get_state_dict_prefix("", layer_num),
                weight_cache_path=None if args.dummy_weights else weight_cache_path,
                weight_dtype=ttnn.bfloat16,
                weight_key="ffn_norm",
                is_distributed=self.args.is_distributed_norm,
                add_unit_offset=self.args.rms_norm_add_unit_offset,
                sharded_program_config=self.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
                sharded_output_config=self.model_config["SHARDED_MLP_INPUT_MEMCFG"],
                ccl_topology=self.args.ccl_topology(),
                tt_ccl=self.tt_ccl,
                **norm_kwargs,
            ),
            args,
            tt_ccl=self.tt_ccl,
            TG=args.is_galaxy,
        )
        # Gemma-style extra norms exist only if the checkpoint has them
        prefix = args.get_state_dict_prefix("", layer_num)
        self.pre_ff_norm = None
        self.post_ff_norm = None
        if f"{prefix}pre_feedforward_layernorm.weight" in state_dict:
            self.pre_ff_norm = DistributedNorm(
                RMSNorm(
                    device=mesh_device,
                    dim=args.dim,
                    eps=args.norm_eps,
                    state_dict=state_dict,
                    state_dict_prefix=prefix,
                    weight_cache_path=None if args.dummy_weights else weight_cache_path,
                    weight_dtype=ttnn.bfloat16,
                    weight_key="pre_feedforward_layernorm",
                    is_distributed=self.args.is_distributed_norm,
                    add_unit_offset=self.args.rms_norm_add_unit_offset,
                    sharded_program_config=self.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
                    sharded_output_config=self.model_config["SHARDED_MLP_INPUT_MEMCFG"],
                    ccl_topology=self.args.ccl_topology(),
                    tt_ccl=self.tt_ccl,
                ),
                args,
                tt_ccl=self.tt_ccl,
                TG=args.is_galaxy,
            )
        if f"{prefix}post_feedforward_layernorm.weight" in state_dict:
            self.post_ff_norm = DistributedNorm(
                RMSNorm(
                    device=mesh_device,
                    dim=args.dim,
                    eps=args.norm_eps,
                    state_dict=state_dict,
                    state_dict_prefix=prefix,
                    weight_cache_path=None if args.dummy_weights else weight_cache_path,
                    weight_dtype=ttnn.bfloat16,
                    weight_key="post_feedforward_layernorm",
                    is_distributed=self.args.is_distributed_norm,
                    add_unit_offset=self.args.rms_norm_add_unit_offset,
                    sharded_program_config=self.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
                    sharded_output_config=self.model_config["SHARDED_MLP_INPUT_MEMCFG"],
                    ccl_topology=self.args.ccl_topology(),
                    tt_ccl=self.tt_ccl,
                ),
                args,
                tt_ccl=self.tt_ccl,
                TG=args.is_galaxy,
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
        # x is fractured across devices and interleaved in DRAM (for prefill) and sharded in L1 (for decode)
        skip_mem_cfg = (
            self.model_config["DECODE_RESIDUAL_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        )
        assert x.memory_config() == skip_mem_cfg, (
            f"decoder input memcfg mismatch: {x.memory_config()} != {skip_mem_cfg}"
        )
        # Norms take fractured inputs and output replicated across devices
        attn_in = self.attention_norm(x, mode)
        # Attention takes replicated inputs and produces fractured outputs
        attn_out = self.attention.forward(
            attn_in,
            current_pos,
            rot_mats,
            user_id,
            mode,
            page_table=page_table,
            chunk_page_table=chunk_page_table,
            chunk_start_idx=chunk_start_idx,
            kv_cache=kv_cache,
        )
        # Here x and attn_out are both fractured across devices
        h = ttnn.add(x, attn_out, memory_config=skip_mem_cfg, dtype=ttnn.bfloat16 if TG else None)
        ttnn.deallocate(attn_out)
        if mode == "prefill":
            x.deallocate(True)

        # Norms take fractured inputs and output replicated across devices
        ff_in = self.ff_norm(h, mode)
        if self.pre_ff_norm is not None:
            ff_in = self.pre_ff_norm(ff_in, mode)
        if TG and mode == "decode":
            ff_in = ttnn.to_memory_config(ff_in, memory_config=self.model_config["MLP_ACT_MEMCFG"])
        # MLP takes replicated inputs and produces fractured outputs
        ff_out = self.feed_forward.forward(ff_in, mode)
        if self.post_ff_norm is not None:
            ff_out = self.post_ff_norm(ff_out, mode)
        # ff_out and h are both fractured across devices
        activation_dtype = self.model_config["DECODERS_OPTIMIZATIONS"].get_tensor_dtype(
            decoder_id=self.layer_num, tensor=TensorGroup.ACTIVATION
        )
        out = ttnn.add(
            h,
            ff_out,
            memory_config=skip_mem_cfg,
            dtype=self.args.ccl_dtype
            if TG and not self.args.is_distributed_norm(mode)
            else activation_dtype or ttnn.bfloat16,
        )
        return out  # fractured across devices
