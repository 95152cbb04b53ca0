"""R37: galaxy code chosen by args.is_galaxy, which a 2x4 mesh (2-D, 8 devices) does not satisfy."""

import ttnn


class Topo:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if self.args.is_galaxy:
            return ttnn.mul(x, 3.0)
        return ttnn.add(x, 1.0)
