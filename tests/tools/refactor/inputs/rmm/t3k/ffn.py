"""A feed-forward whose output goes through a helper of another folder, called with a keyword that only the
helper's newer commit takes (``out_memory_config=``), as tt_transformers' newer mlp.py calls ``tt_all_reduce``
with ``rs_memory_config=``. This file imports the helper's newer commit (the call binds)."""

import ttnn

from rmm.common.scaling_next import scaled_output


class TtScaledFFN:
    def __init__(self, mesh_device, state_dict, model_config):
        self.mesh_device = mesh_device
        self.model_config = model_config
        self.w = ttnn.as_tensor(
            state_dict["layers.0.w"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        out = ttnn.linear(x, self.w)
        return scaled_output(
            out,
            sharded=False,
            memory_config=self.model_config["OUT_MEMCFG"],
            out_memory_config=self.model_config["OUT_MEMCFG"],
        )
