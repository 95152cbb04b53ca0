"""A key only galaxy defines, read by TTTv1 under a run-time test and after an `in` test."""

import ttnn


class LazyKey:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        if mode == "prefill" and x.shape[-2] > 1024:
            x = ttnn.mul(x, self.model_config["WIDE_GAIN"])
        if "WIDE_GAIN" in self.model_config:
            x = ttnn.add(x, self.model_config["WIDE_GAIN"])
        return ttnn.mul(x, self.model_config["GAIN"])
