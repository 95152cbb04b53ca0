"""R42: weights made by a helper method, by a local lambda, and kept in a list, a dict or a conditional."""

import ttnn


class Weights:
    def __init__(self, mesh_device, args, state_dict):
        self.args = args
        self.mesh_device = mesh_device
        mk = lambda t: ttnn.as_tensor(  # noqa: E731
            t,
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.w = self._load(state_dict["w"])
        self.ws = [mk(state_dict["w"] * 2), mk(state_dict["w"] * 3)]
        self.wd = {"a": mk(state_dict["w"] * 0.5)}
        self.b = None if args.is_galaxy else mk(state_dict["b"])

    def _load(self, t):
        return ttnn.as_tensor(
            t,
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )

    def forward(self, x, mode):
        y = ttnn.linear(x, self.w)
        y = ttnn.linear(y, self.ws[0] if mode == "decode" else self.ws[1])
        y = ttnn.linear(y, self.wd["a"])
        if self.b is not None:
            y = ttnn.add(y, self.b)
        return y
