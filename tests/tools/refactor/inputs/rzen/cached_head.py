"""Forwards that keep a value on the instance for their own later use, as tt-metal's lm_head does with
``self.lm_head_output_memory_config``: one static (a config value chosen by the mode), one per call (the
rows of the input). ``Counted`` keeps a count across calls (``__init__`` starts it): state of the instance."""

import ttnn


class CachedHead:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        self.out_memcfg = self.model_config["OUT_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        self.rows = x.shape[-2]
        x = ttnn.mul(x, float(self.rows) / 32.0)
        return ttnn.to_memory_config(x, self.out_memcfg)


class Counted:
    def __init__(self, mesh_device, args):
        self.args = args
        self.calls = 0

    def forward(self, x, mode):
        self.calls = 1
        return ttnn.mul(x, float(self.calls))
