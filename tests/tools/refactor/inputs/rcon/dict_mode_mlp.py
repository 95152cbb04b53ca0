"""An MLP in the style of the Llama-2-70B T3000 demo: no mode parameter; the mode is the ``LLM_MODE`` entry of
the config dict, which ``set_model_config`` swaps for the other mode's dict between prefill and decode."""

import ttnn

from rcon.lightweightmodule import LightweightModule


class TtDictModeMLP(LightweightModule):
    def __init__(self, mesh_device, state_dict, model_config):
        self.mesh_device = mesh_device
        self.model_config = model_config
        self.w = ttnn.as_tensor(
            state_dict["layers.0.w"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def set_model_config(self, model_config):
        self.model_config = model_config

    def __call__(self, x):
        if self.model_config["LLM_MODE"] == "decode":
            return self.decode_forward(x)
        elif self.model_config["LLM_MODE"] == "prefill":
            return self.prefill_forward(x)
        else:
            raise ValueError(f"Unknown llm_mode: {self.model_config['LLM_MODE']}")

    def decode_forward(self, x):
        out = ttnn.linear(x, self.w, memory_config=self.model_config["OUT_MEMCFG"])
        return ttnn.mul(out, 0.5)

    def prefill_forward(self, x):
        return ttnn.linear(x, self.w, memory_config=self.model_config["OUT_MEMCFG"])
