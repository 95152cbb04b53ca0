"""Two classes with an entry, the helper first, as in Falcon-40B's falcon_attention.py (TtFalconRotaryEmbedding
before TtFalconAttention, which builds it): the module's class is the second one."""

import ttnn


class TtScaleEmbedding:
    def __init__(self, mesh_device, scale):
        self.mesh_device = mesh_device
        self.scale = scale

    def __call__(self, layer):
        return ttnn.mul(layer, self.scale)


class TtScaledNorm:
    def __init__(self, mesh_device, args):
        self.mesh_device = mesh_device
        self.eps = args.norm_eps
        self.embedding = TtScaleEmbedding(mesh_device, 2.0)

    def __call__(self, x, mode):
        memory_config = ttnn.L1_MEMORY_CONFIG if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        x = ttnn.rms_norm(x, epsilon=self.eps, memory_config=memory_config)
        return self.embedding(x)
