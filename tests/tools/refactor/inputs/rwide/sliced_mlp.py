"""A matmul run slice by slice in a loop, its last slice's result read after the loop under a config flag, as
Falcon-7B's optimized prefill MLP reads ``hidden_states`` (the last slice's activations) after its
``for slice_idx in range(num_slices)`` loop to free it. Here the loop targets themselves (``slice_idx``, the
block weight) are read after the loop, in the arm of a static test."""

import torch
import ttnn

from .lightweightmodule import LightweightModule


class TtSlicedMLP(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, dtype=ttnn.bfloat16):
        super().__init__()
        self.mesh_device = mesh_device
        self.model_config = args.get_model_config()
        self.blocks = [
            ttnn.as_tensor(
                torch.transpose(state_dict[f"mlp.{i}.weight"], -2, -1),
                dtype=dtype,
                layout=ttnn.TILE_LAYOUT,
                device=mesh_device,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
                mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
            )
            for i in range(args.head_blocks)
        ]

    def forward(self, x):
        out = x
        for slice_idx, weight in enumerate(self.blocks):  # noqa: B007 (read after the loop)
            out = ttnn.linear(out, weight, memory_config=self.model_config["OUT_MEMCFG"])
        if self.model_config["SUBTRACT_BIAS"]:
            again = ttnn.linear(out, weight, memory_config=self.model_config["OUT_MEMCFG"])
            out = ttnn.subtract(out, ttnn.multiply(again, 1.0 / (slice_idx + 2)))
        return out
