"""The same Galaxy-only MLP with nothing in its code saying so (``llama3_70b_galaxy/tt/llama_mlp.py`` as it is):
the refactor cannot tell, and ``--topology 2d`` says it."""

import ttnn

from rmain.lightweightmodule import LightweightModule


class TtPlainRingMLP(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num=0):
        self.mesh_device = mesh_device
        self.args = args
        self.w1 = ttnn.as_tensor(
            state_dict[f"layers.{layer_num}.w1"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        return ttnn.silu(ttnn.linear(x, self.w1))
