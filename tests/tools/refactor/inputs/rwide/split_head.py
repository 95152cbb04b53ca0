"""An output head split into column blocks, each block's logits reduced after the mode's matmul loop, as the
Llama-3 70B Galaxy demo's ``LMHead.forward`` does (``if mode == "decode" and self.no_prefetcher: for weight in
…: output = …; outputs.append(output)`` … ``for output in outputs: …``). The loop variable of the later loop
has the name each arm assigns; a head may have no block at all (``args.head_blocks`` = 0)."""

import torch
import ttnn

from .lightweightmodule import LightweightModule


class TtSplitHead(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, dtype=ttnn.bfloat16):
        super().__init__()
        self.mesh_device = mesh_device
        self.args = args
        self.no_prefetcher = not args.use_prefetcher
        self.weights = []
        for i in range(args.head_blocks):
            self.weights.append(
                ttnn.as_tensor(
                    torch.transpose(state_dict[f"head.{i}.weight"], -2, -1),
                    dtype=dtype,
                    layout=ttnn.TILE_LAYOUT,
                    device=mesh_device,
                    memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
                )
            )

    def forward(self, x, mode):
        outputs = []
        if mode == "decode" and self.no_prefetcher:
            x_in = ttnn.to_memory_config(x, ttnn.DRAM_MEMORY_CONFIG)
            for weight in self.weights:
                output = ttnn.linear(x_in, weight, memory_config=ttnn.DRAM_MEMORY_CONFIG)
                output = ttnn.to_memory_config(output, ttnn.L1_MEMORY_CONFIG)
                outputs.append(output)
        elif mode == "decode":
            for weight in self.weights:
                output = ttnn.linear(x, weight, memory_config=ttnn.L1_MEMORY_CONFIG)
                outputs.append(output)
        else:
            for weight in self.weights:
                output = ttnn.linear(x, weight, memory_config=ttnn.DRAM_MEMORY_CONFIG)
                outputs.append(output)

        reduced = []
        for output in outputs:
            reduced.append(ttnn.multiply(output, 0.5, memory_config=output.memory_config()))
        return reduced
