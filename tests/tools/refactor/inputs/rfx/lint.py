"""Code that is ruff-clean here and that deciding the galaxy test used to leave flagged: a loop variable only
the decided test reads (B007), one that is also read after the loop, and a handler the decided test empties
(SIM105)."""

import ttnn


class Lint:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        for i, scale in enumerate((1.5, 0.5)):
            x = ttnn.mul(x, scale)
            if self.args.is_galaxy and i == 0:
                x = ttnn.add(x, 1.0)
        for j, shift in enumerate((0.25, 0.75)):
            x = ttnn.add(x, shift)
            if self.args.is_galaxy and j == 1:
                x = ttnn.mul(x, 2.0)
        x = ttnn.mul(x, 1.0 + j)
        scales = {x.shape[-2]: 0.5}
        try:
            x = ttnn.mul(x, scales[64])
        except KeyError:
            if self.args.is_galaxy:
                x = ttnn.add(x, 3.0)
        return x
