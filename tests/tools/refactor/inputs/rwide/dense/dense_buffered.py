"""A prefill MLP that writes its result into an output buffer kept in its config dict and returns the unpadded
columns of that buffer, as Falcon-7B's ``TtFalconMLPPrefill`` does in its optimized prefill
(``ttnn.sharded_to_interleaved_partial(out_data, out_tt, …)`` into ``model_config["MLP_OUTPUT_TENSORS"]``, then
``out_tt[:, :, :, : self.hidden_size]``). The buffer is padded to a wider hidden size, allocated by the first
instance and shared by the others through the dict; here the write is ``ttnn.fill_cache``."""

import torch
import ttnn

from rwide.lightweightmodule import LightweightModule


class TtDenseBuffered(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, seq_len=32, dtype=ttnn.bfloat16):
        super().__init__()
        self.mesh_device = mesh_device
        self.model_config = args.get_model_config()
        self.hidden_size = args.dim
        self.padded_size = args.dim + 32
        self.seq_len = seq_len
        down = torch.transpose(state_dict["mlp.down.weight"], -2, -1)
        down = torch.nn.functional.pad(down, (0, self.padded_size - self.hidden_size))
        self.up_weight = ttnn.as_tensor(
            torch.transpose(state_dict["mlp.up.weight"], -2, -1),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.down_weight = ttnn.as_tensor(
            down,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        if "MLP_OUTPUT_BUFFER" not in self.model_config:
            self._allocate_output_buffer()

    def _allocate_output_buffer(self):
        out_buffer = ttnn.from_torch(
            torch.zeros((1, 1, self.seq_len, self.padded_size)),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )
        self.model_config["MLP_OUTPUT_BUFFER"] = out_buffer

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        out_buffer = self.model_config["MLP_OUTPUT_BUFFER"]
        hidden = ttnn.linear(
            x, self.up_weight, memory_config=self.model_config["OUT_MEMCFG"], activation="gelu"
        )
        x.deallocate()
        out_data = ttnn.matmul(hidden, self.down_weight, memory_config=self.model_config["OUT_MEMCFG"])
        hidden.deallocate()
        ttnn.fill_cache(out_buffer, out_data, 0)
        out_data.deallocate()

        # remove padding from output
        return out_buffer[:, :, :, : self.hidden_size]
