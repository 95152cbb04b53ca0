"""A feed-forward in the style of the Llama-3 70B Galaxy demo's MLP: a flag that mixes the hardware, the mode
and a config switch (``no_pf``), then one test that ANDs that flag with a fact of the output tensor, written
over several lines in parentheses; a test with an ``else`` whose first half is a constructor argument and
whose second half reads the tensor; and one with an ``elif`` on the number of rows."""

import ttnn

from rcon.lightweightmodule import LightweightModule


class TtGatedFFN(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num=0):
        self.mesh_device = mesh_device
        self.args = args
        self.model_config = args.get_model_config()
        self.w = ttnn.as_tensor(
            state_dict[f"layers.{layer_num}.w"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        no_pf = self.args.is_blackhole and mode == "decode" and not self.model_config.get("USE_PREFETCHER", False)
        out_memcfg = ttnn.DRAM_MEMORY_CONFIG if no_pf else ttnn.L1_MEMORY_CONFIG
        out = ttnn.linear(x, self.w, memory_config=out_memcfg)
        if (
            no_pf
            and not self.model_config.get("USE_PREFETCHER", False)
            and out.memory_config().buffer_type == ttnn.BufferType.DRAM
        ):
            # the collective after this takes L1 inputs only
            out = ttnn.to_memory_config(out, self.model_config["DECODE_RESIDUAL_MEMCFG"])
        if self.args.scale_residual and out.dtype == ttnn.bfloat16:
            out = ttnn.mul(out, 0.5)
        else:
            out = ttnn.add(out, 1.0)
        rows = out.shape[-2]
        if self.args.is_blackhole and rows > 64:
            out = ttnn.mul(out, 2.0)
        elif rows > 32:
            out = ttnn.add(out, 0.5)
        return out
