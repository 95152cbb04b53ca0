"""A text-model projection the vision tower reuses by subclassing (as Qwen2.5-VL's vision attention subclasses
tt_transformers' ``Attention``): its prefill and its shared matmul step branch on the mode, the topology and the
config, and read a helper and a constant of this file."""

import ttnn

from rsuper.common.lightweightmodule import LightweightModule

TILE = 32


def padded_rows(rows):
    return ((rows + TILE - 1) // TILE) * TILE


class TtProjection(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, prefix):
        super().__init__()
        self.mesh_device = mesh_device
        self.args = args
        self.model_config = args.get_model_config()
        self.weight = ttnn.as_tensor(
            state_dict[f"{prefix}.weight"].transpose(-2, -1),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.bias = ttnn.as_tensor(
            state_dict[f"{prefix}.bias"].reshape(1, 1, 1, -1),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.bounds = [-args.clip, args.clip]

    def project(self, x, mode):
        if mode == "decode":
            memory_config = ttnn.L1_MEMORY_CONFIG
        else:
            memory_config = self.model_config["PROJ_MEMCFG"]
        if self.args.fuse_bias:
            return ttnn.linear(x, self.weight, bias=self.bias, memory_config=memory_config)
        out = ttnn.matmul(x, self.weight, memory_config=memory_config)
        return ttnn.add(out, self.bias)

    def forward_prefill(self, x, scale=None, bounds=None):
        seq_len = x.shape[-2]
        chunk = self.model_config["PREFILL_CHUNK"]
        if seq_len > chunk:
            x = ttnn.reshape(x, [1, seq_len // chunk, chunk, x.shape[-1]])
        out = self.project(x, "prefill")
        if seq_len > chunk:
            out = ttnn.reshape(out, [1, 1, padded_rows(seq_len), out.shape[-1]])
        if self.args.is_galaxy:
            out = ttnn.to_memory_config(out, ttnn.DRAM_MEMORY_CONFIG)
        if scale is not None:
            out = ttnn.mul(out, scale)
        if bounds:
            low, high = bounds[0], bounds[1]
        else:
            low, high = self.bounds[0], self.bounds[1]
        return ttnn.clamp(out, min=low, max=high)

    def forward_decode(self, x):
        return self.project(x, "decode")

    def forward(self, x, mode):
        if mode == "prefill":
            return self.forward_prefill(x)
        return self.forward_decode(x)
