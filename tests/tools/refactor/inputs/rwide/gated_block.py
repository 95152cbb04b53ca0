"""A gated residual block whose only topology code is inside the sub-module it builds (``self.ffn =
TtGalaxyFFN(…)``), as tt-metal's cross-attention block builds tt_transformers' ``MLP``: one module for every
mesh."""

import ttnn

from .galaxy_ffn import TtGalaxyFFN
from .lightweightmodule import LightweightModule


class TtGatedBlock(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, prefix="block."):
        super().__init__()
        self.mesh_device = mesh_device
        self.model_config = args.get_model_config()
        self.ffn = TtGalaxyFFN(mesh_device, args, state_dict, f"{prefix}ffn.")
        self.gate = ttnn.as_tensor(
            state_dict[f"{prefix}gate"].unsqueeze(0).expand(1, args.dim),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        skip_mem_cfg = self.model_config["OUT_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        out = ttnn.mul(self.ffn(x), ttnn.tanh(self.gate))
        return ttnn.add(x, out, memory_config=skip_mem_cfg)
