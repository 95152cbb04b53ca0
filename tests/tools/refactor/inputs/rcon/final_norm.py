"""A norm whose epsilon and decode memory config come from a base class of another file (``norm_base.py``):
its own ``__init__`` calls ``super().__init__(mesh_device, args)`` and sets only the weight."""

import ttnn

from rcon.norm_base import TtNormBase


class TtFinalNorm(TtNormBase):
    def __init__(self, mesh_device, args, state_dict):
        super().__init__(mesh_device, args)
        self.weight = ttnn.as_tensor(
            state_dict["norm.weight"].reshape(1, 1, 1, -1),
            dtype=ttnn.bfloat16,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        out = ttnn.rms_norm(x, epsilon=self.norm_eps, weight=self.weight)
        if mode == "decode":
            out = ttnn.to_memory_config(out, self.out_memcfg)
        return out
