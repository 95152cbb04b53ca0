"""ModelArgs of the rwide package: a width, a galaxy flag, a norm epsilon and a prefetcher flag, a number of head blocks, a config dict with a memory config and a flag."""

import ttnn


class ModelArgs:
    def __init__(self, mesh_device, dim=64, subtract_bias=False, use_prefetcher=True, head_blocks=2):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.dim = dim
        self.norm_eps = 1e-5
        self.use_prefetcher = use_prefetcher
        self.head_blocks = head_blocks
        self.model_config = {"OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG, "SUBTRACT_BIAS": subtract_bias}

    def get_model_config(self):
        return self.model_config
