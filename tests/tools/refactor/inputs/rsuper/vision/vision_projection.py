"""The vision tower's projection: the text model's ``TtProjection`` with a GELU after it, its prefill run through
``super().forward_prefill`` with a scale and no bounds of its own, its decode through the base's ``super().project``."""

import ttnn

from rsuper.common.projection import TtProjection


class TtVisionProjection(TtProjection):
    def __init__(self, mesh_device, args, state_dict, prefix="visual.proj", scale=0.5):
        super().__init__(mesh_device, args, state_dict, prefix)
        self.scale = scale

    def forward(self, x, mode):
        if mode == "prefill":
            out = super().forward_prefill(x, scale=self.scale, bounds=None)
        else:
            out = super().project(x, mode)
        return ttnn.gelu(out)
