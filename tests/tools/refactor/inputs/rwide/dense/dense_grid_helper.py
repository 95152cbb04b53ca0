"""Falcon-7B's module-level matmul helpers (``falcon_dense_h_to_4h_matmul``), written so that the helper itself
asks the tensor it multiplies for its device: ``default_matmul_grid(a.device())`` inside ``up_matmul``, which
the forward calls with device ops, so the codemod copies it into the class per call site."""

import torch
import ttnn

from rwide.dense.grid_utils import default_matmul_grid
from rwide.lightweightmodule import LightweightModule


def up_matmul(a, b, out_memcfg, fused_activation=None):
    grid = default_matmul_grid(a.device())
    return ttnn.linear(a, b, memory_config=out_memcfg, core_grid=grid, activation=fused_activation)


class TtDenseGridHelper(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, dtype=ttnn.bfloat16):
        super().__init__()
        self.device = mesh_device
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
        hidden_states = up_matmul(x, self.up_weight, self.model_config["OUT_MEMCFG"], fused_activation="gelu")
        return up_matmul(hidden_states, self.down_weight, self.model_config["OUT_MEMCFG"])
