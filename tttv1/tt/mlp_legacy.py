"""The feed-forward block in its older (G1) form: every config from ``model_config["KEY"]``, string modes, and
the G1 collectives ``ttnn.reduce_scatter`` / ``ttnn.all_gather`` with ``mesh_device=``.

Same math as ``mlp.py``; kept because the original dependency tracer targets this form (pure dict keys and
prefill configs as lambdas of ``seq_len``). ``ModelArgs.mlp_generation == "G1"`` makes the decoder use it.
"""

# TTTv1's own style is reproduced on purpose (this package is the migration tools' test corpus)
# ruff: noqa: E731, SIM210

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.ccl import tt_all_reduce
from tttv1.tt.common import pad_to_size
from tttv1.tt.model_config import OpGroup, TensorGroup


class MLP(LightweightModule):
    def __init__(
        self,
        mesh_device,
        tt_ccl,
        args,
        state_dict,
        weight_cache_path,
        layer_num,
        dtype,
        model_config,
        state_dict_prefix=None,
    ):
        super().__init__()

        self.args = args
        self.model_config = model_config
        self.state_dict = state_dict
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.layer_num = layer_num
        self.dim = args.dim

        prefix = state_dict_prefix or args.get_state_dict_prefix(self.__class__.__name__, layer_num)
        # checkpoint matrix "w1" / "w2" / "w3", transposed to [in, out]
        host_weight = lambda short_name: self.state_dict[f"{prefix}.{short_name}.weight"].transpose(-2, -1)

        # PAD_MLP_CORES can pad the hidden dim; padded tensors get their own cache files
        hidden_dim_string = (
            f".hidden_dim_{args.hidden_dim}" if args.hidden_dim != args.unpadded_hidden_dim else ""
        )
        if args.dummy_weights or weight_cache_path is None:
            cache_name = lambda _: None
        else:
            cache_name = lambda name: weight_cache_path / f"{prefix}.{name}{hidden_dim_string}"

        hidden_per_device = args.hidden_dim // args.num_devices
        up_proj_mem = args.create_dram_sharded_mem_config(args.dim, hidden_per_device)
        down_proj_mem = args.create_dram_sharded_mem_config(hidden_per_device, args.dim)

        # one expression per weight: pad the hidden axis, shard over the 2-D mesh, place in DRAM
        as_sharded_tensor = lambda name, type, dims: ttnn.as_tensor(
            pad_to_size(
                host_weight(name.split("_")[0]),
                dim=dims[0] if args.is_galaxy else dims[1],
                size=args.hidden_dim,
            ),
            dtype=type,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=(
                ttnn.DRAM_MEMORY_CONFIG
                if args.is_galaxy
                else (down_proj_mem if "w2" in name else up_proj_mem)
            ),
            mesh_mapper=ttnn.ShardTensor2dMesh(self.mesh_device, dims=dims, mesh_shape=args.cluster_shape),
            cache_file_name=cache_name(name),
        )

        # galaxy swaps which mesh axis splits the input and which the output features
        w1_dims = (-1, -2) if args.is_galaxy else (-2, -1)
        w2_dims = w1_dims[::-1]

        precision = self.model_config["DECODERS_OPTIMIZATIONS"]
        layer_num = max(layer_num, 0)  # layer -1 (cross block) borrows layer 0's precision
        up_dtype = precision.get_tensor_dtype(decoder_id=layer_num, tensor=TensorGroup.FF1_FF3)
        down_dtype = precision.get_tensor_dtype(decoder_id=layer_num, tensor=TensorGroup.FF2)
        self.w1 = as_sharded_tensor("w1_sharded", up_dtype, dims=w1_dims)
        self.w3 = as_sharded_tensor("w3_sharded", up_dtype, dims=w1_dims)
        self.w2 = as_sharded_tensor("w2_sharded", down_dtype, dims=w2_dims)

    def forward(self, x: ttnn.Tensor, mode) -> ttnn.Tensor:
        """``w2(silu(w1 x) * w3 x)``: gate, up and down projections of a Llama-style feed-forward."""
        TG = self.args.is_galaxy
        seq_len = x.shape[-2]
        precision = self.model_config["DECODERS_OPTIMIZATIONS"]
        layer = max(self.layer_num, 0)
        activation_dtype = precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.ACTIVATION)

        if mode == "decode":
            if TG:
                # galaxy has no DRAM-sharded decode configs; the TG ones exist for dim >= 4096 only
                up_pc = self.model_config["FF1_3_TG_PROGCFG"] if self.dim >= 4096 else None
                down_pc = self.model_config["FF2_TG_PROGCFG"] if self.dim >= 4096 else None
            else:
                up_pc = self.model_config["DECODE_MLP_W1_W3_PRG_CONFIG"]
                down_pc = self.model_config["DECODE_MLP_W2_PRG_CONFIG"]
        else:
            if seq_len >= self.args.prefill_len_cutoff:
                # split a long prompt into rows of prefill_len_cutoff tokens
                rows = self.args.prefill_len_cutoff
                x = ttnn.reshape(x, [1, seq_len // rows, rows, -1])
            # the prefill configs are lambdas of the sequence length
            up_pc = self.model_config["PREFILL_MLP_W1_W3_PRG_CONFIG"](seq_len)
            down_pc = self.model_config["PREFILL_MLP_W2_PRG_CONFIG"](seq_len)

        if mode == "decode":
            memory_config = ttnn.L1_MEMORY_CONFIG if TG else ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG
        else:
            memory_config = ttnn.DRAM_MEMORY_CONFIG
        up_fidelity = precision.get_math_fidelity(
            decoder_id=layer, op=OpGroup.LI_FF1_FF3, configuration=self.args
        )
        up_dtype = ttnn.bfloat8_b if TG else activation_dtype or ttnn.bfloat16
        gate = ttnn.linear(
            x,
            self.w1,
            program_config=up_pc,
            memory_config=memory_config,
            compute_kernel_config=up_fidelity,
            dtype=up_dtype,
            core_grid=None,
        )
        up = ttnn.linear(
            x,
            self.w3,
            program_config=up_pc,
            memory_config=memory_config,
            compute_kernel_config=up_fidelity,
            dtype=up_dtype,
            core_grid=None,
        )
        ttnn.deallocate(x)

        if TG:
            if self.dim == 8192 or mode == "prefill":
                pre_scatter_mem = gate.memory_config()
                scatter_mem = self.model_config["FF1_OUT_REDUCE_SCATTER_MEMCFG"] if mode == "decode" else None
                gate = ttnn.reduce_scatter(
                    gate,
                    dim=3,
                    cluster_axis=1,
                    mesh_device=self.mesh_device,
                    math_op=ttnn.ReduceType.Sum,
                    num_links=self.args.num_reduce_scatter_links,
                    topology=ttnn.Topology.Linear,
                    memory_config=scatter_mem,
                )
                up = ttnn.reduce_scatter(
                    up,
                    dim=3,
                    cluster_axis=1,
                    mesh_device=self.mesh_device,
                    math_op=ttnn.ReduceType.Sum,
                    num_links=1,
                    topology=ttnn.Topology.Linear,
                    memory_config=scatter_mem,
                )
            else:
                gathered_mem = self.model_config["FF1_OUT_GATHERED_MEMCFG"] if mode == "decode" else None
                gate, up = (
                    tt_all_reduce(
                        partial,
                        self.mesh_device,
                        self.tt_ccl,
                        cluster_axis=1,
                        topology=self.args.ccl_topology(),
                        num_all_gather_links=2,
                        sharded=True if mode == "decode" else False,
                        memory_config=gathered_mem,
                    )
                    for partial in (gate, up)
                )

        hidden = ttnn.mul(
            gate,
            up,
            memory_config=gate.memory_config(),
            dtype=activation_dtype or ttnn.bfloat8_b,
            input_tensor_a_activations=[ttnn.UnaryOpType.SILU],
        )
        if mode == "decode" and not TG:
            # reshard for the down projection's core grid (nothing moves when the grids agree)
            hidden = ttnn.to_memory_config(hidden, self.model_config["SHARDED_MLP2_INPUT_MEMCFG"])
        ttnn.deallocate(gate)
        ttnn.deallocate(up)

        if TG and (self.dim == 8192 or mode == "prefill"):
            hidden = ttnn.all_gather(
                hidden,
                3,
                cluster_axis=1,
                mesh_device=self.mesh_device,
                num_links=2,
                topology=ttnn.Topology.Linear,
                memory_config=pre_scatter_mem,
            )
            if mode == "decode":
                hidden = ttnn.to_memory_config(hidden, ttnn.L1_MEMORY_CONFIG)

        out = ttnn.linear(
            hidden,
            self.w2,
            program_config=down_pc,
            memory_config=memory_config,
            compute_kernel_config=precision.get_math_fidelity(
                decoder_id=layer, op=OpGroup.LI_FF2, configuration=self.args
            ),
            dtype=self.args.ccl_dtype if TG else activation_dtype or ttnn.bfloat16,
            core_grid=None,
        )
        ttnn.deallocate(hidden)

        if mode != "decode":
            reduced_mem = ttnn.DRAM_MEMORY_CONFIG
        elif TG:
            reduced_mem = self.model_config["FF2_OUT_REDUCE_SCATTER_MEMCFG"]
        else:
            reduced_mem = self.model_config["DECODE_RESIDUAL_MEMCFG"]
        out = tt_all_reduce(
            out,
            self.mesh_device,
            self.tt_ccl,
            cluster_axis=0,
            dim=0 if (TG and self.dim < 8192) else 3,
            sharded=(mode == "decode"),
            use_composite=True if self.dim == 8192 else False,
            dtype=self.args.ccl_dtype,
            topology=self.args.ccl_topology(),
            num_reduce_scatter_links=self.args.num_reduce_scatter_links,
            num_all_gather_links=self.args.num_all_gather_links,
            memory_config=reduced_mem,
        )

        # undo the prefill row split: back to [1, 1, tokens, dim]
        *outer, width = out.shape
        out = ttnn.reshape(out, (1, 1, outer[-3] * outer[-2] * outer[-1], width))
        if mode == "decode":
            residual_mem = (
                self.model_config["SHARDED_ATTN_INPUT_MEMCFG"]
                if TG
                else self.model_config["DECODE_RESIDUAL_MEMCFG"]
            )
            out = ttnn.to_memory_config(out, residual_mem)
        return out
