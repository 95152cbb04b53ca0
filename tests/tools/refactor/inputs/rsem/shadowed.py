"""A static local, and a nested function and a lambda whose own parameters have its name."""

import ttnn


class Shadowed:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        scale = self.args.dim / 128.0

        def g(t, scale=0.25):
            return ttnn.mul(t, scale * 2.0)

        h = lambda t, scale=4.0: ttnn.add(t, scale)  # noqa: E731
        return ttnn.mul(h(g(x)), scale)
