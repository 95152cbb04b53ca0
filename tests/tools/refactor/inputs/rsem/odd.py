"""Class-body members the generated module cannot rebuild: a property of two statements, and a class constant
computed from a module name."""

import ttnn

BASE = 2.0


class Odd:
    FROM_MODULE = BASE * 2

    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    @property
    def twice(self):
        gain = self.model_config["GAIN"]
        return gain * 2

    def forward(self, x, mode):
        x = ttnn.mul(x, self.twice)
        return ttnn.add(x, self.FROM_MODULE)
