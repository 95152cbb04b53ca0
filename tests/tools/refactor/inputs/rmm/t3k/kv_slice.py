"""A decode step in the style of the Falcon-40B T3000 demo's attention: a memory config of the dict is tested
(``is_sharded()``), and when it is sharded its shard height is set in place to this call's length before the
output is moved there; the test is a static choice, the arm's store runs on every call."""

import ttnn


class TtKVSlice:
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
        if mode == "decode":
            return self.fwd_decode(x)
        return ttnn.linear(x, self.w)

    def fwd_decode(self, x):
        rows = x.shape[-2]
        slice_memcfg = self.model_config["KV_SLICE_MEMCFG"]
        if slice_memcfg.is_sharded():
            shard_shape = slice_memcfg.shard_spec.shape
            shard_shape[0] = rows
            slice_memcfg.shard_spec.shape = shard_shape
        out = ttnn.linear(x, self.w)
        out = ttnn.to_memory_config(out, slice_memcfg.memory_config())
        return ttnn.mul(out, self.model_config["OUT_SCALE"], memory_config=slice_memcfg.memory_config())
