"""A small ModelArgs: the galaxy flag from the device count, and a model_config dict."""

import ttnn

from rzen.precision import DecodersPrecision


class ModelArgs:
    def __init__(self, mesh_device, dim=64):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.dim = dim
        self.norm_eps = 1e-5
        self.model_config = {"OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG}
        self.decoders_optimizations = DecodersPrecision(2, dim)
        for name, value in {"rope_eps": 1e-6}.items():  # members set by name: trace-deps cannot follow them
            setattr(self, name, value)

    def get_model_config(self):
        return self.model_config
