"""A tiny G2-style ModelArgs whose config has a key only galaxy defines (for the guarded-read inputs)."""

import ttnn


class ModelArgs:
    def __init__(self, mesh_device, dim=64):
        self.num_devices = mesh_device.get_num_devices() if mesh_device else 0
        self.is_galaxy = self.num_devices == 32
        self.dim = dim
        self.model_config = {}
        self.model_config["OUT_MEMCFG"] = ttnn.DRAM_MEMORY_CONFIG
        self.model_config["GAIN"] = 1.5
        if self.is_galaxy:
            self.model_config["WIDE_GAIN"] = 0.25

    def get_model_config(self):
        return self.model_config
