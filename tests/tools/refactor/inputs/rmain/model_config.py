"""A small ModelArgs: the galaxy flag from the device count, the mesh shape, and a model_config dict."""

import ttnn


class ModelArgs:
    def __init__(self, mesh_device, dim=64):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.cluster_shape = list(mesh_device.shape)
        self.dim = dim
        self.norm_eps = 1e-5
        self.model_config = {"OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG}

    def get_model_config(self):
        return self.model_config
