"""A scale vector prepared by static methods, as tt_transformers' rotary embedding prepares its cos / sin tables
(``self.permute_to_meta_format(cos, sin)``, a ``@staticmethod`` whose first parameter is data, not ``self``),
and a static method the forward calls through ``self`` whose branch is decided by the config."""

import torch
import ttnn

from .lightweightmodule import LightweightModule


class TtFoldedScale(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, dtype=ttnn.bfloat16):
        super().__init__()
        self.mesh_device = mesh_device
        self.model_config = args.get_model_config()
        gain = state_dict["scale.gain"]
        bias = state_dict["scale.bias"]
        gain, bias = self.fold_halves(gain, bias)
        self.gain = ttnn.as_tensor(
            gain,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.bias = ttnn.as_tensor(
            bias,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    @staticmethod
    def fold_halves(gain: torch.Tensor, bias: torch.Tensor):
        # repeat the first half of each vector, the second half is dropped
        gain = gain[: gain.shape[0] // 2]
        gain = torch.stack((gain, gain), dim=-1).flatten(-2)
        bias = bias[: bias.shape[0] // 2]
        bias = torch.stack((bias, bias), dim=-1).flatten(-2)
        return gain.reshape(1, 1, 1, -1), bias.reshape(1, 1, 1, -1)

    @staticmethod
    def shifted(x, shift, subtract):
        if subtract:
            return ttnn.sub(x, shift)
        return ttnn.add(x, shift)

    def forward(self, x):
        x = ttnn.mul(x, self.gain)
        x = self.shifted(x, self.bias, self.model_config["SUBTRACT_BIAS"])
        return ttnn.to_memory_config(x, self.model_config["OUT_MEMCFG"])
