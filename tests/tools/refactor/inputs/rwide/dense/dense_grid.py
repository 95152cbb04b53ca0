"""A two-matmul MLP whose matmuls take their core grid from a helper asked of the device of the tensor they
multiply (``default_matmul_grid(x.device())``, then ``default_matmul_grid(hidden.device())`` on the first
matmul's output), as Falcon-7B's ``TtFalconMLPDecode`` does with ``get_falcon_default_core_grid``. The helper
lives beside the module, the hardware query it imports above it."""

import torch
import ttnn

from rwide.dense.grid_utils import default_matmul_grid
from rwide.lightweightmodule import LightweightModule


class TtDenseGrid(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, dtype=ttnn.bfloat16):
        super().__init__()
        self.mesh_device = mesh_device
        self.model_config = args.get_model_config()
        self.up_weight = ttnn.as_tensor(
            torch.transpose(state_dict["mlp.up.weight"], -2, -1),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.down_weight = ttnn.as_tensor(
            torch.transpose(state_dict["mlp.down.weight"], -2, -1),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        hidden = ttnn.linear(
            x,
            self.up_weight,
            memory_config=self.model_config["OUT_MEMCFG"],
            core_grid=default_matmul_grid(x.device()),
            activation="gelu",
        )
        x.deallocate()
        out = ttnn.matmul(
            hidden,
            self.down_weight,
            memory_config=self.model_config["OUT_MEMCFG"],
            core_grid=default_matmul_grid(hidden.device()),
        )
        hidden.deallocate()
        return out
