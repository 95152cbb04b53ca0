"""Activations resharded onto core grids from a helper of model_config.py whose defaults are objects built at
import (``start_core=ttnn.CoreCoord(0, 0)``), called with and without them, as tt-metal's attention does for its
Q and K grids."""

import ttnn

from rhelp.model_config import cores_from


class Grids:
    def __init__(self, mesh_device, args):
        self.args = args
        self.shard_width = args.dim // 2

    def forward(self, x, mode):
        if mode == "decode":
            grid = ttnn.CoreRangeSet({cores_from(2, start_core=ttnn.CoreCoord(0, 1))})
        else:
            grid = ttnn.CoreRangeSet({cores_from(2)})
        sharded = ttnn.create_sharded_memory_config(
            (x.shape[-2], self.shard_width),
            core_grid=grid,
            strategy=ttnn.ShardStrategy.WIDTH,
            use_height_and_width_as_shard_shape=True,
        )
        x = ttnn.to_memory_config(x, sharded)
        return ttnn.silu(x, memory_config=sharded)
