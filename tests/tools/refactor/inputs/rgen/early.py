"""R41: an early return in __init__ (the gain stays 2.0 unless extra is given)."""

import ttnn


class Early:
    def __init__(self, mesh_device, args, extra=None):
        self.args = args
        self.gain = 2.0
        if extra is None:
            return
        self.gain = extra

    def forward(self, x, mode):
        if mode == "decode":
            return ttnn.mul(x, self.gain)
        return ttnn.add(x, self.gain)
