"""A module built with one mode's config (TTTv1 makes one instance per mode)."""

import ttnn


class PerMode:
    def __init__(self, mesh_device, model_config):
        self.model_config = model_config

    def forward(self, x, llm_mode):
        x = ttnn.mul(x, self.model_config["SCALE"])
        return ttnn.to_memory_config(x, self.model_config["OUT_MEMCFG"])
