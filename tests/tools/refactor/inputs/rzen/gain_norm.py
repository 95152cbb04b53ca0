"""A norm in the style of models/common/rmsnorm.py: whether it runs split is a callable of the mode given to the
constructor; forward picks a bound method as a value (``norm = self._split if split else ttnn.rms_norm``) and
one of two device weights with the same test, then calls what it picked."""

import ttnn


class GainNorm:
    def __init__(self, mesh_device, args, state_dict, is_split=None, eps=1e-5):
        self.mesh_device = mesh_device
        self.eps = eps
        self.is_split = is_split
        gamma = state_dict["gamma"].reshape(1, 1, 1, -1)
        self.weight = ttnn.as_tensor(
            gamma,
            dtype=ttnn.bfloat16,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        if self.is_split:
            self.weight_split = ttnn.as_tensor(
                gamma * 0.5,
                dtype=ttnn.bfloat16,
                layout=ttnn.ROW_MAJOR_LAYOUT,
                device=mesh_device,
                mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
            )

    def forward(self, x, mode, in_sharded=False):
        split = self.is_split and self.is_split(mode)
        norm = self._split_norm if split else ttnn.rms_norm
        weight = self.weight_split if split else self.weight
        if in_sharded:
            assert not split, "the split norm takes interleaved inputs"
        return norm(x, epsilon=self.eps, weight=weight)

    def _split_norm(self, inp, epsilon=None, weight=None):
        out = ttnn.rms_norm(inp, epsilon=epsilon, weight=weight)
        return ttnn.add(out, out)
