"""RMSNorm (the counterpart of ``models/common/rmsnorm.py``): local or distributed, sharded in decode.

The caller decides sharding per call (``in_sharded`` / ``out_sharded`` are passed as ``mode == "decode"``) and
whether the norm is distributed (``is_distributed`` is a callable, in practice the bound method
``args.is_distributed_norm``).
"""

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule

TILE = 32
SHARD_HEIGHT = TILE  # the weight is laid out as rows of one tile width (see RMSNorm's docstring)


class RMSNorm(LightweightModule):
    """RMSNorm with the weight stored as [1, 1, dim/32, 32] row-major, as the ttnn kernels read it."""

    def __init__(
        self,
        device,
        dim,
        state_dict,
        weight_key,
        layer_num=None,
        state_dict_prefix=None,
        weight_cache_path=None,
        weight_memory_config=ttnn.DRAM_MEMORY_CONFIG,
        weight_dtype=ttnn.bfloat16,
        is_distributed=None,
        eps: float = 1e-05,
        add_unit_offset=False,
        sharded_program_config=None,
        sharded_output_config=None,
        output_mem_config=None,
        ccl_topology=ttnn.Topology.Linear,
        tt_ccl=None,
        fp32_dest_acc_en=True,
    ):
        super().__init__()
        self.device = device
        self.eps = eps
        self.is_distributed = is_distributed
        self.ccl_topology = ccl_topology
        self.tt_ccl = tt_ccl
        self.sharded_program_config = sharded_program_config
        self.sharded_output_config = sharded_output_config
        self.output_mem_config = output_mem_config

        if state_dict_prefix:
            weight_name = f"{state_dict_prefix}{weight_key}.weight"
        elif layer_num is not None:
            weight_name = f"layers.{layer_num}.{weight_key}.weight"
        else:
            weight_name = f"{weight_key}.weight"

        gamma = state_dict[weight_name].reshape(1, 1, dim // SHARD_HEIGHT, SHARD_HEIGHT)
        if add_unit_offset:  # checkpoints such as Gemma's store (gamma - 1)
            gamma = gamma + 1.0
        cache_name = None if weight_cache_path is None else weight_cache_path / weight_name

        # a plain single device gets no mesh mapper
        is_mesh_device = device.__class__.__name__ == "MeshDevice"

        def upload(mapper, cache_file):
            return ttnn.as_tensor(
                gamma,
                device=device,
                dtype=weight_dtype,
                layout=ttnn.ROW_MAJOR_LAYOUT,
                memory_config=weight_memory_config,
                mesh_mapper=mapper if is_mesh_device else None,
                cache_file_name=cache_file,
            )

        # the whole weight on every device for the local norm
        self.weight = upload(ttnn.ReplicateTensorToMesh(device) if is_mesh_device else None, cache_name)
        if self.is_distributed:
            # the distributed norm sees only this device's slice of the row, so it gets that slice of the weight
            self.weight_distributed = upload(
                ttnn.ShardTensor2dMesh(device, dims=(None, 2), mesh_shape=list(device.shape))
                if is_mesh_device
                else None,
                None if cache_name is None else cache_name.with_name(cache_name.name + "_distributed"),
            )

        self.compute_kernel_config_hifi2 = ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi2,
            math_approx_mode=False,
            fp32_dest_acc_en=fp32_dest_acc_en,
            packer_l1_acc=True,
        )

    def forward(self, x: ttnn.Tensor, mode, in_sharded=False, out_sharded=False) -> ttnn.Tensor:
        """Normalise ``x``; ``mode`` only decides (through ``is_distributed``) whether the norm is distributed."""
        distributed = self.is_distributed and self.is_distributed(mode)
        if in_sharded:
            assert not distributed, "the distributed norm takes interleaved inputs only"
        else:
            assert not out_sharded, "a sharded output needs a sharded input"

        if distributed:
            normed = self._distributed_rmsnorm(
                x,
                epsilon=self.eps,
                weight=self.weight_distributed,
                compute_kernel_config=self.compute_kernel_config_hifi2,
            )
        else:
            normed = ttnn.rms_norm(
                x,
                epsilon=self.eps,
                weight=self.weight,
                program_config=self.sharded_program_config if in_sharded else None,
                memory_config=self.sharded_output_config if out_sharded else None,
                compute_kernel_config=self.compute_kernel_config_hifi2,
            )
        # a sharded input with an interleaved output wanted: unshard here
        return ttnn.sharded_to_interleaved(normed) if in_sharded and not out_sharded else normed

    def _distributed_rmsnorm(
        self,
        inp,
        epsilon=None,
        weight=None,
        program_config=None,
        memory_config=None,
        compute_kernel_config=None,
    ):
        """Two-pass norm over a row split across devices: local sum of squares, all-gather of the statistics,
        then the normalisation of the local slice."""
        assert program_config is None and memory_config is None, "the distributed norm is interleaved only"
        local_stats = ttnn.rms_norm_pre_all_gather(
            inp, compute_kernel_config=compute_kernel_config, dtype=ttnn.bfloat16
        )
        all_stats = ttnn.experimental.all_gather_async(
            local_stats,
            dim=3,
            num_links=1,
            topology=self.ccl_topology,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            persistent_output_buffer=None,
            multi_device_global_semaphore=self.tt_ccl.get_and_cycle_ag_semaphore_handles(),
            barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(),
            chunks_per_sync=10,
            num_workers_per_link=2,
            num_buffers_per_channel=2,
        )
        out = ttnn.rms_norm_post_all_gather(
            inp, all_stats, epsilon=epsilon, weight=weight, compute_kernel_config=compute_kernel_config
        )
        all_stats.deallocate(True)
        return out
