"""A galaxy flag TG= next to the mesh: TTTv1 runs the galaxy path only when the caller passes TG=True."""

import ttnn


class Flagged:
    def __init__(self, mesh_device, args, TG=False):
        self.args = args
        self.TG = TG

    def forward(self, x, mode):
        if self.TG:
            x = ttnn.mul(x, 3.0)
        return ttnn.add(x, 1.0)
