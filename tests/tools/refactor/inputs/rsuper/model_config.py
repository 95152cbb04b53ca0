"""ModelArgs of the rsuper package: a width, a galaxy flag, a flag choosing a fused bias, a clip bound and a
config dict."""

import ttnn


class ModelArgs:
    def __init__(self, mesh_device, dim=64, fuse_bias=True):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.dim = dim
        self.fuse_bias = fuse_bias
        self.clip = 4.0
        self.model_config = {"PROJ_MEMCFG": ttnn.DRAM_MEMORY_CONFIG, "PREFILL_CHUNK": 64}

    def get_model_config(self):
        return self.model_config
