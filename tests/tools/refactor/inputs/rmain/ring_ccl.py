"""The Galaxy demo's collectives, in its style: an object that owns the gather state (which of its two
semaphore slots the next gather uses) and a norm helper that calls it and returns the residual beside the output
(``llama_ccl.py``'s ``TT_CCL.line_all_gather`` and ``tt_distributed_rmsnorm``)."""

import ttnn


class RingCCL:
    def __init__(self, mesh_device):
        self.mesh_device = mesh_device
        self.slot = [0, 0]  # per cluster axis: cycles on every gather, as the semaphore double-buffering does

    def line_all_gather(self, tensor, dim, cluster_axis, memory_config, num_links=1, buffer_key=None):
        assert buffer_key is not None, "every gather names its persistent buffer"
        out = ttnn.all_gather(
            tensor,
            dim,
            num_links=num_links,
            cluster_axis=cluster_axis,
            mesh_device=self.mesh_device,
            topology=ttnn.Topology.Linear,
            memory_config=memory_config,
        )
        self.slot[cluster_axis] = (self.slot[cluster_axis] + 1) % 2
        return out


def ring_rmsnorm(inp, epsilon, gamma, compute_kernel_config, tt_ccl=None):
    wide = inp.shape[-2] == 128  # decided per call: the 2D core grid for a 128-row prefill
    stats = ttnn.rms_norm_pre_all_gather(
        inp, compute_kernel_config=compute_kernel_config, dtype=ttnn.bfloat16, use_2d_core_grid=wide
    )
    gathered = tt_ccl.line_all_gather(
        stats, dim=3, cluster_axis=1, num_links=1, memory_config=ttnn.DRAM_MEMORY_CONFIG, buffer_key="NORM"
    )
    out = ttnn.rms_norm_post_all_gather(
        inp,
        gathered,
        epsilon=epsilon,
        weight=gamma,
        compute_kernel_config=compute_kernel_config,
        use_2d_core_grid=wide,
    )
    return out, None
