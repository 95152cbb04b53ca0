"""DistributedNorm: gathers the fractured residual (1-D meshes) or normalises it distributed (Galaxy).

The residual stream is split over devices along dim; a norm needs the whole row. 1-D meshes all-gather first
(unless the dim is large in prefill), Galaxy computes the statistics locally and gathers only those.
"""

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.ccl import tt_distributed_rmsnorm, tt_sharded_distributed_rmsnorm


class DistributedNorm(LightweightModule):
    def __init__(self, norm, args, tt_ccl, TG=False):
        self.norm = norm
        self.args = args
        self.tt_ccl = tt_ccl
        self.TG = TG
        if TG:
            self._build_galaxy_configs(args)

    def _build_galaxy_configs(self, args):
        """Sharded layouts for the Galaxy decode norm: each device holds dim / 4 of the row."""
        local_width = args.dim // 4
        cores = args.find_largest_divisor(local_width // 32, 8)
        tiles_per_core = local_width // cores // 32
        self.gather_in_mem_cfg = ttnn.create_sharded_memory_config(
            shape=(1, 1, 32, local_width),
            core_grid=ttnn.CoreGrid(y=1, x=cores),
            strategy=ttnn.ShardStrategy.WIDTH,
        )
        self.ln_prg_cfg = ttnn.LayerNormShardedMultiCoreProgramConfig(
            compute_with_storage_grid_size=(cores, 1),
            subblock_w=tiles_per_core,
            block_h=1,
            block_w=tiles_per_core,
            inplace=False,
        )
        # the gathered statistics: one tile per mesh column, on a single core
        self.ln_sharded_stats_memcfg = ttnn.create_sharded_memory_config(
            shape=[1, 1, 32, 4 * 32],
            core_grid=ttnn.CoreGrid(y=1, x=1),
            strategy=ttnn.ShardStrategy.WIDTH,
        )
        self.ln_cfg = ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi2,
            math_approx_mode=False,
            fp32_dest_acc_en=False,
            packer_l1_acc=False,
        )

    def forward(self, x, mode):
        """Normalise the fractured residual ``x`` and return it replicated (or distributed-normalised on Galaxy)."""
        if self.args.is_distributed_norm(mode):
            common = dict(
                epsilon=self.norm.eps,
                gamma=self.norm.weight_distributed,
                mesh_device=self.args.mesh_device,
                tt_ccl=self.tt_ccl,
            )
            if mode == "decode":
                return tt_sharded_distributed_rmsnorm(
                    x,
                    ln_sharded_input_memcfg=self.gather_in_mem_cfg,
                    ln_sharded_progcfg=self.ln_prg_cfg,
                    ln_sharded_stats_memcfg=self.ln_sharded_stats_memcfg,
                    **common,
                )
            return tt_distributed_rmsnorm(x, compute_kernel_config=self.ln_cfg, **common)

        # a local norm needs the whole row on each device
        target_mem = self.norm.sharded_output_config if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        if self.args.is_multichip and not self.args.is_distributed_norm(mode):
            x = ttnn.experimental.all_gather_async(
                x,
                dim=3,
                num_links=1,
                topology=self.args.ccl_topology(),
                memory_config=target_mem,
                persistent_output_buffer=None,
                multi_device_global_semaphore=self.tt_ccl.get_and_cycle_ag_semaphore_handles(),
                barrier_semaphore=self.tt_ccl.get_and_cycle_barrier_semaphore_handle(),
                chunks_per_sync=10,
                num_workers_per_link=2,
                num_buffers_per_channel=2,
            )
        else:
            x = ttnn.to_memory_config(x, target_mem)
        return self.norm(x, mode=mode, in_sharded=(mode == "decode"), out_sharded=(mode == "decode"))
