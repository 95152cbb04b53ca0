"""The module's mode travels in ``phase``; ``mode`` is another choice (exact or fast). A parameter named mode is
taken to be the mode, so the module was split on ``mode`` and ``mode == "fast"`` decided False, silently."""

import ttnn


class Phased:
    def __init__(self, mesh_device, args):
        self.args = args

    def _round(self, x, mode):
        match mode:
            case "fast":
                return ttnn.add(x, 0.5)
            case _:
                return x

    def forward(self, x, phase, mode="exact"):
        if phase == "decode":
            x = ttnn.mul(x, 2.0)
        else:
            x = ttnn.mul(x, 4.0)
        if mode in ("fast", "faster"):
            x = ttnn.add(x, 1.0)
        return self._round(x, mode)
