"""The feed-forward block (G3 style): ``w2(silu(w1(x)) * w3(x))`` over a mesh.

Configs come from ``args.get_mlp_*`` methods taking ``(mode, seq_len, prefetcher)`` and the mode is the
``Mode`` enum (the G2 decoder passes strings; they are converted on entry). One ``forward`` branches on galaxy,
mode, the model dim and seq_len, as TTTv1's does: that branching is what the migration splits apart.
"""

# TTTv1's own style is reproduced on purpose (this package is the migration tools' test corpus)
# ruff: noqa: E731, SIM210

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.ccl import tt_all_reduce
from tttv1.tt.common import Mode, pad_to_size
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
        prefetcher=None,
    ):
        super().__init__()

        self.args = args
        self.model_config = model_config
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.prefetcher = prefetcher
        self.layer_num = layer_num
        self.num_devices = args.num_devices
        self.dim = args.dim

        prefix = state_dict_prefix or args.get_state_dict_prefix(self.__class__.__name__, layer_num)

        # A padded hidden dim (PAD_MLP_CORES) produces different tensors, so it must not share a cache file
        # with the unpadded checkpoint.
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

        def as_sharded_tensor(name, type, dims):
            """Load checkpoint matrix ``name`` ("w1_sharded" reads "w1") as [in, out], padded and mesh-sharded."""
            checkpoint_name = name.split("_")[0]
            host = state_dict[f"{prefix}.{checkpoint_name}.weight"].transpose(-2, -1)
            # the padded axis is the hidden one; its position in ``dims`` differs on galaxy
            host = pad_to_size(host, dim=dims[0] if args.is_galaxy else dims[1], size=args.hidden_dim)
            if args.is_galaxy:
                placement = ttnn.DRAM_MEMORY_CONFIG
            elif "w2" in name:
                placement = down_proj_mem
            else:
                placement = up_proj_mem
            return ttnn.as_tensor(
                host,
                dtype=type,
                layout=ttnn.TILE_LAYOUT,
                device=self.mesh_device,
                memory_config=placement,
                mesh_mapper=ttnn.ShardTensor2dMesh(
                    self.mesh_device, dims=dims, mesh_shape=args.cluster_shape
                ),
                cache_file_name=cache_name(name),
            )

        # The mesh axes that split (in, out) are swapped between galaxy and the other meshes.
        w1_dims = (-1, -2) if args.is_galaxy else (-2, -1)
        w2_dims = tuple(reversed(w1_dims))

        # precision is chosen per decoder; a negative layer number (the vision cross block) takes layer 0's
        precision = args.decoders_optimizations
        layer_num = max(layer_num, 0)
        up_dtype = precision.get_tensor_dtype(decoder_id=layer_num, tensor=TensorGroup.FF1_FF3)
        down_dtype = precision.get_tensor_dtype(decoder_id=layer_num, tensor=TensorGroup.FF2)
        self.w1 = as_sharded_tensor("w1_sharded", up_dtype, dims=w1_dims)
        self.w3 = as_sharded_tensor("w3_sharded", up_dtype, dims=w1_dims)
        self.w2 = as_sharded_tensor("w2_sharded", down_dtype, dims=w2_dims)

        self.activation_type = (
            args.mlp_activation_type if hasattr(args, "mlp_activation_type") else ttnn.UnaryOpType.SILU
        )

        if self.prefetcher is not None:

            def register_weights():
                # the prefetcher streams the weights in the order the matmuls consume them
                for weight in (self.w1, self.w3, self.w2):
                    self.prefetcher.insert_tensor(weight)

            self.prefetcher.register_callback(register_weights)

    def forward(self, x: ttnn.Tensor, mode) -> ttnn.Tensor:
        """Gate (w1) and up (w3) projections, activation of the gate times up, then the down projection (w2),
        reduced over the mesh."""
        if isinstance(mode, str):  # a G2 decoder passes "decode" / "prefill"
            mode = Mode(mode)
        TG = self.args.is_galaxy
        seq_len = x.shape[-2]
        precision = self.args.decoders_optimizations
        layer = max(self.layer_num, 0)
        activation_dtype = precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.ACTIVATION)

        # the prefetcher's circular buffer and worker sub-device only exist for decode
        if self.prefetcher is not None and mode == Mode.DECODE:
            global_cb, worker_sub_device = self.prefetcher.global_cb, self.prefetcher.worker_sub_device_id
        else:
            global_cb, worker_sub_device = None, None

        if mode == Mode.PREFILL and seq_len >= self.args.prefill_len_cutoff:
            # long prompts are cut into rows of prefill_len_cutoff tokens (the cutoff depends on the chip)
            chunk = self.args.prefill_len_cutoff
            x = ttnn.reshape(x, [1, seq_len // chunk, chunk, -1])

        up_proj_kwargs = dict(
            program_config=self.args.get_mlp_ff1_3_prg_config(mode, seq_len, self.prefetcher),
            memory_config=self.args.get_mlp_ff1_3_mem_config(mode, self.prefetcher),
            compute_kernel_config=precision.get_math_fidelity(
                decoder_id=layer, op=OpGroup.LI_FF1_FF3, configuration=self.args
            ),
            dtype=ttnn.bfloat8_b if TG else activation_dtype or ttnn.bfloat16,
            core_grid=None,
            global_cb=global_cb,
            sub_device_id=worker_sub_device,
        )
        gate = ttnn.linear(x, self.w1, **up_proj_kwargs)
        up = ttnn.linear(x, self.w3, **up_proj_kwargs)
        ttnn.deallocate(x)

        if TG:
            # on galaxy the hidden dim is also split over mesh axis 1, so both halves need a reduction there
            if self.dim == 8192 or mode == Mode.PREFILL:
                pre_scatter_mem = gate.memory_config()  # the all-gather before w2 restores this layout
                scatter_kwargs = dict(
                    dim=3,
                    cluster_axis=1,
                    topology=ttnn.Topology.Linear,
                    persistent_output_buffers=None,
                    intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    memory_config=self.model_config["FF1_OUT_REDUCE_SCATTER_MEMCFG"]
                    if mode == Mode.DECODE
                    else None,
                    chunks_per_sync=10,
                    num_workers_per_link=2,
                    num_buffers_per_channel=2,
                )
                gate = ttnn.experimental.reduce_scatter_minimal_async(
                    gate,
                    multi_device_global_semaphore=self.tt_ccl.get_and_cycle_rs_semaphore_handles(
                        cluster_axis=1
                    ),
                    barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis=1),
                    num_links=self.args.num_reduce_scatter_links,
                    **scatter_kwargs,
                )
                up = ttnn.experimental.reduce_scatter_minimal_async(
                    up,
                    multi_device_global_semaphore=self.tt_ccl.get_and_cycle_rs_semaphore_handles(
                        cluster_axis=1
                    ),
                    barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis=1),
                    num_links=1,
                    **scatter_kwargs,
                )
            else:
                gathered_mem = self.model_config["FF1_OUT_GATHERED_MEMCFG"] if mode == Mode.DECODE else None
                sharded = True if mode == Mode.DECODE else False
                reduced = []
                for partial in (gate, up):
                    reduced.append(
                        tt_all_reduce(
                            partial,
                            self.mesh_device,
                            self.tt_ccl,
                            cluster_axis=1,
                            topology=self.args.ccl_topology(),
                            num_all_gather_links=2,
                            sharded=sharded,
                            memory_config=gathered_mem,
                        )
                    )
                gate, up = reduced

        hidden = ttnn.mul(
            gate,
            up,
            memory_config=gate.memory_config(),
            dtype=activation_dtype or ttnn.bfloat8_b,
            input_tensor_a_activations=[self.activation_type],
        )
        if mode == Mode.DECODE and not TG and self.prefetcher is None:
            # the down projection may shard over another core grid than the up projections
            hidden = ttnn.to_memory_config(hidden, self.args.get_mlp_binary_mult_mem_config(mode))
        ttnn.deallocate(gate)
        ttnn.deallocate(up)

        if TG and (self.dim == 8192 or mode == Mode.PREFILL):
            hidden = ttnn.experimental.all_gather_async(
                hidden,
                dim=3,
                cluster_axis=1,
                num_links=2,
                topology=ttnn.Topology.Linear,
                memory_config=pre_scatter_mem,
                persistent_output_buffer=None,
                multi_device_global_semaphore=self.tt_ccl.get_and_cycle_ag_semaphore_handles(cluster_axis=1),
                barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis=1),
                chunks_per_sync=10,
                num_workers_per_link=2,
                num_buffers_per_channel=2,
            )
            if mode == Mode.DECODE:
                hidden = ttnn.to_memory_config(hidden, ttnn.L1_MEMORY_CONFIG)

        down_fidelity = precision.get_math_fidelity(
            decoder_id=layer, op=OpGroup.LI_FF2, configuration=self.args
        )
        down_dtype = self.args.ccl_dtype if TG else activation_dtype or ttnn.bfloat16
        if seq_len > 128 and mode != Mode.DECODE:
            # past 128 rows the down projection runs as a minimal_matmul with a block config from the args
            out = ttnn.experimental.minimal_matmul(
                hidden,
                self.w2,
                config=self.args.get_mlp_ff2_minimal_matmul_config(seq_len),
                compute_kernel_config=down_fidelity,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
                dtype=down_dtype,
            )
        else:
            out = ttnn.linear(
                hidden,
                self.w2,
                program_config=self.args.get_mlp_ff2_prg_config(mode, seq_len, self.prefetcher),
                memory_config=self.args.get_mlp_ff2_mem_config(mode, self.prefetcher),
                compute_kernel_config=down_fidelity,
                dtype=down_dtype,
                core_grid=None,
                global_cb=global_cb,
                sub_device_id=worker_sub_device,
            )
        ttnn.deallocate(hidden)

        # each device holds a partial sum of the down projection: reduce it over mesh axis 0
        rs_config = self.model_config["MLP_RS_CONFIG"]
        out = tt_all_reduce(
            out,
            self.mesh_device,
            self.tt_ccl,
            cluster_axis=0,
            dim=0 if (TG and self.dim < 8192) else 3,
            sharded=(mode == Mode.DECODE),
            use_composite=True if self.dim == 8192 else False,
            dtype=self.args.ccl_dtype,
            topology=self.args.ccl_topology(),
            num_reduce_scatter_links=self.args.num_reduce_scatter_links,
            num_all_gather_links=self.args.num_all_gather_links,
            memory_config=self.args.get_mlp_ff2_all_reduce_mem_config(mode, out),
            rs_memory_config=rs_config["rs_memory_config"] if mode == Mode.PREFILL else None,
            chunks_per_sync=rs_config["chunks_per_sync"],
            num_workers_per_link=rs_config["num_workers_per_link"],
            subdevice_id=worker_sub_device,
        )

        # fold any chunking of the prefill rows back into a single [1, 1, rows, dim] tensor
        *outer, width = out.shape
        rows = outer[-3] * outer[-2] * outer[-1]
        out = ttnn.reshape(out, (1, 1, rows, width))
        if mode == Mode.DECODE:
            out = ttnn.to_memory_config(out, self.args.get_mlp_output_mem_config(mode, self.prefetcher))
        return out
