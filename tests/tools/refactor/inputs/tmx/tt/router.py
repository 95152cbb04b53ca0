"""A MoE top-k router ("gate"): a kind of module the toolkit has no recipe or Hugging Face reference for. Its
forward takes ``hidden_states`` and no mode; on Galaxy the scores stay in L1."""

import ttnn

from tmx.tt.common import LightweightModule


class TopKRouter(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num, dtype=ttnn.bfloat16):
        super().__init__()
        self.args = args
        weight = state_dict[f"layers.{layer_num}.gate.weight"].transpose(-2, -1)
        self.gate = ttnn.as_tensor(
            weight,
            dtype=dtype,
            device=mesh_device,
            layout=ttnn.TILE_LAYOUT,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, hidden_states):
        logits = ttnn.linear(hidden_states, self.gate)
        if self.args.is_galaxy:
            logits = ttnn.to_memory_config(logits, self.args.get_model_config()["ROUTER_SCORES_MEMCFG"])
        return ttnn.softmax(logits, dim=-1)
