"""A list built from the config that prefill grows in place (a new list per call in TTTv1), and a dict attribute
that forward changes through an alias (kept from one call to the next in TTTv1)."""

import ttnn


class Grown:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        tiles = [self.args.dim // 32]
        if mode == "prefill":
            tiles.append(x.shape[-2] // 32)
        return ttnn.mul(x, float(sum(tiles)))


class Aliased:
    def __init__(self, mesh_device, args):
        self.args = args
        self.opts = {"scale": 2.0}

    def forward(self, x, mode):
        opts = self.opts
        if mode == "prefill":
            opts["scale"] = opts["scale"] + 1.0
        return ttnn.mul(x, opts["scale"])
