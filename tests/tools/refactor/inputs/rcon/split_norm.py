"""A norm in the style of tt_transformers' DistributedNorm: on a Galaxy it runs the split norm of ccl.py
(whose link count goes through two helpers), elsewhere a plain rms_norm."""

import ttnn

from rcon.ccl import tt_split_norm
from rcon.lightweightmodule import LightweightModule


class TtSplitNorm(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, tt_ccl):
        self.mesh_device = mesh_device
        self.args = args
        self.tt_ccl = tt_ccl
        self.gamma = ttnn.as_tensor(
            state_dict["gamma"].reshape(1, 1, 1, -1),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        if self.args.is_galaxy:
            return tt_split_norm(x, self.gamma, self.mesh_device, self.tt_ccl)
        return ttnn.rms_norm(x, epsilon=1e-5, weight=self.gamma)
