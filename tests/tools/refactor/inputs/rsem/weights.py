"""Weights uploaded through a helper method, and weights held in a dict."""

import ttnn


class Loaded:
    def __init__(self, mesh_device, args, state_dict):
        self.mesh_device = mesh_device
        self.w = self._load(state_dict["w"])

    def _load(self, tensor):
        return ttnn.as_tensor(tensor, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=self.mesh_device)

    def forward(self, x, mode):
        return ttnn.linear(x, self.w)


class Keyed:
    def __init__(self, mesh_device, args, state_dict):
        self.w = {"a": ttnn.as_tensor(state_dict["w"], dtype=ttnn.bfloat16, device=mesh_device)}

    def forward(self, x, mode):
        return ttnn.linear(x, self.w["a"])
