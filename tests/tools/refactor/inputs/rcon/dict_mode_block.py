"""A decoder block in the style of the Llama-2-70B T3000 demo: no mode parameter, the mode is the dict's
``LLM_MODE``; ``set_model_config`` swaps the block's dict and hands the new one to its sub-modules' setters, one
of which (a pair of projections) hands it on to its own sub-module in turn."""

import ttnn

from rcon.dict_mode_mlp import TtDictModeMLP
from rcon.lightweightmodule import LightweightModule


class TtDictModePair(LightweightModule):
    def __init__(self, mesh_device, state_dict, model_config):
        self.model_config = model_config
        self.inner = TtDictModeMLP(mesh_device, state_dict, model_config)

    def set_model_config(self, model_config):
        self.model_config = model_config
        self.inner.set_model_config(model_config)

    def forward(self, x):
        return ttnn.add(x, self.inner(x), memory_config=self.model_config["OUT_MEMCFG"])


class TtDictModeBlock(LightweightModule):
    def __init__(self, mesh_device, state_dict, model_config):
        self.mesh_device = mesh_device
        self.model_config = model_config

        self.ffn = TtDictModeMLP(mesh_device, state_dict, model_config)
        self.pair = TtDictModePair(mesh_device, state_dict, model_config)

    def set_model_config(self, model_config):
        self.model_config = model_config
        self.ffn.set_model_config(model_config)
        self.pair.set_model_config(model_config)

    def forward(self, x):
        if self.model_config["LLM_MODE"] == "prefill":
            return self.prefill_forward(x)
        elif self.model_config["LLM_MODE"] == "decode":
            return self.decode_forward(x)
        else:
            raise ValueError(f"Unknown llm_mode: {self.model_config['LLM_MODE']}")

    def decode_forward(self, x):
        h = ttnn.add(x, self.ffn(x), memory_config=self.model_config["OUT_MEMCFG"])
        return ttnn.add(h, self.pair(h), memory_config=self.model_config["OUT_MEMCFG"])

    def prefill_forward(self, x):
        h = ttnn.add(x, self.ffn(x), memory_config=self.model_config["OUT_MEMCFG"])
        return ttnn.multiply(ttnn.add(h, self.pair(h)), 0.5)
