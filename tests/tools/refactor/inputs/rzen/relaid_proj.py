"""Projectors that convert a weight in place on each call, as tt-metal's Gemma-3 multi-modal projector does
with its projection weight before the matmul. ``RelaidProjector`` uploads its weight row-major and its bias as
float32, then tiles the one and casts the other to bfloat16 in every forward: constant conversions, converted
once by the generated module. ``FollowingProjector`` converts its weight to the memory config of each input (a
run-time value) and ``PeekingProjector`` reads its weight's layout before converting it: in both the weight is
state that lives across calls, which the generated module keeps on its instance as TTTv1 does."""

import ttnn


class RelaidProjector:
    def __init__(self, mesh_device, state_dict, prefix):
        self.mesh_device = mesh_device
        self.proj_weight = ttnn.as_tensor(
            state_dict[prefix + "proj.weight"],
            dtype=ttnn.bfloat16,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )
        self.proj_bias = ttnn.as_tensor(
            state_dict[prefix + "proj.bias"],
            dtype=ttnn.float32,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )

    def forward(self, features):
        normed = ttnn.rms_norm(features, epsilon=1e-6)
        self.proj_weight = ttnn.to_layout(self.proj_weight, ttnn.TILE_LAYOUT)
        self.proj_bias = ttnn.typecast(self.proj_bias, dtype=ttnn.bfloat16)
        projected = ttnn.matmul(normed, self.proj_weight)
        if self.proj_bias.dtype == ttnn.bfloat16:
            projected = ttnn.mul(projected, 0.5)
        ttnn.deallocate(normed)
        return ttnn.add(projected, self.proj_bias)


class FollowingProjector:
    def __init__(self, mesh_device, state_dict, prefix):
        self.proj_weight = ttnn.as_tensor(
            state_dict[prefix + "proj.weight"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, features):
        self.proj_weight = ttnn.to_memory_config(self.proj_weight, features.memory_config())
        return ttnn.matmul(features, self.proj_weight)


class PeekingProjector:
    def __init__(self, mesh_device, state_dict, prefix):
        self.proj_weight = ttnn.as_tensor(
            state_dict[prefix + "proj.weight"],
            dtype=ttnn.bfloat16,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, features):
        tiled = self.proj_weight.layout == ttnn.TILE_LAYOUT
        self.proj_weight = ttnn.to_layout(self.proj_weight, ttnn.TILE_LAYOUT)
        out = ttnn.matmul(features, self.proj_weight)
        return ttnn.mul(out, 2.0) if tiled else out
