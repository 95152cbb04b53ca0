"""A vision attention whose constructor takes the CCL object second, as tt-metal's image attention does once
it gained ``tt_ccl`` (its callers of the earlier version pass ``state_dict`` there)."""

import ttnn

from .lightweightmodule import LightweightModule


class TtPatchAttention(LightweightModule):
    def __init__(self, mesh_device, tt_ccl, state_dict, state_dict_prefix, dtype, configuration):
        super().__init__()
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.num_devices = configuration.num_devices
        self.wo = ttnn.as_tensor(
            state_dict[f"{state_dict_prefix}wo.weight"].transpose(-2, -1),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x_11SH):
        return ttnn.linear(x_11SH, self.wo, memory_config=ttnn.DRAM_MEMORY_CONFIG)
