"""An MLP that runs only on a Galaxy and says so: its constructor asserts the galaxy fact, as a module of the Llama-3 70B Galaxy demo would (``models/demos/llama3_70b_galaxy/tt/llama_mlp.py``: 2D weight sharding over ``args.cluster_shape``, no ``is_galaxy`` test anywhere, the whole demo being Galaxy-only)."""

import ttnn

from rmain.lightweightmodule import LightweightModule


class TtRingMLP(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num=0):
        assert args.is_galaxy, "TtRingMLP runs on a Galaxy (8x4 mesh) only"
        self.mesh_device = mesh_device
        self.args = args
        self.model_config = args.get_model_config()
        self.w1 = ttnn.as_tensor(
            state_dict[f"layers.{layer_num}.w1"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        memory_config = ttnn.L1_MEMORY_CONFIG if mode == "decode" else self.model_config["OUT_MEMCFG"]
        h = ttnn.linear(x, self.w1, memory_config=memory_config)
        return ttnn.silu(h)
