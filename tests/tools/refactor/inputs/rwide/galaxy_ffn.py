"""A feed-forward whose forward reduces differently on a galaxy (``if self.args.is_galaxy``), as tt_transformers'
``MLP`` does: the topology code of a sub-module."""

import torch
import ttnn

from .lightweightmodule import LightweightModule


class TtGalaxyFFN(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, prefix):
        super().__init__()
        self.args = args
        self.w = ttnn.as_tensor(
            torch.transpose(state_dict[f"{prefix}w.weight"], -2, -1),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x):
        out = ttnn.linear(x, self.w)
        if self.args.is_galaxy:
            out = ttnn.multiply(out, 0.5)
        return out
