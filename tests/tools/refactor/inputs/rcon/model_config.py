"""ModelArgs of the rcon package: a Blackhole flag, a prefetcher switch in the config dict, and a per-layer
precision object that gives each decoder its activation dtype (None: keep what the caller gives)."""

import ttnn


class LayerPrecision:
    def __init__(self, dtypes):
        self.dtypes = dtypes

    def get_tensor_dtype(self, decoder_id, tensor):
        if tensor != "activation":
            return None
        return self.dtypes[decoder_id]


class ModelArgs:
    def __init__(self, mesh_device, dim=64, is_blackhole=True, use_prefetcher=False, scale_residual=True):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.is_blackhole = is_blackhole
        self.scale_residual = scale_residual
        self.dim = dim
        self.n_layers = 3
        self.norm_eps = 1e-5
        self.model_config = {
            "USE_PREFETCHER": use_prefetcher,
            "DECODE_RESIDUAL_MEMCFG": ttnn.L1_MEMORY_CONFIG,
            "DECODERS_OPTIMIZATIONS": LayerPrecision([None, ttnn.bfloat8_b, ttnn.bfloat16]),
        }

    def get_model_config(self):
        return self.model_config
