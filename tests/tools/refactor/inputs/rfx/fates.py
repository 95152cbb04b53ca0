"""Branches whose fate the report must follow: one nested in the arm a mode test keeps (the first statement of
that arm), a conditional value nested in the arm a galaxy test keeps, a mode test in the arm a galaxy test drops, and the
cases of a match."""

import ttnn


class Fates:
    def __init__(self, mesh_device, args):
        self.args = args
        self.dim = args.dim

    def forward(self, x, mode):
        if mode == "decode":
            x = ttnn.mul(x, 2.0)
        else:
            if x.shape[-2] > 32:
                x = ttnn.add(x, 1.0)
            x = ttnn.mul(x, 3.0)
        scale = 4.0 if self.args.is_galaxy else (2.0 if self.dim >= 64 else 1.0)
        if self.args.is_galaxy:
            x = ttnn.mul(x, 5.0 if mode == "decode" else 6.0)
        match x.shape[-1]:
            case 64:
                x = ttnn.add(x, 2.0)
            case _:
                x = ttnn.add(x, 3.0)
        return ttnn.mul(x, scale)
