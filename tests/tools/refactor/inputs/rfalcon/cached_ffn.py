"""A two-projection feed-forward in the style of a T3000 demo module: its weights go through ``ttnn.as_tensor``
with a cache file and a host-side ``preprocess``, and a run that already has the cache builds it with an empty
state dict (``state_dict.get(...) if state_dict else None``): the weights then come from the cache alone."""

import torch
import ttnn


class TtCachedFeedForward:
    def __init__(
        self, mesh_device, state_dict, base_url, layer_num, hidden_size, model_config, tt_cache_path
    ):
        self.mesh_device = mesh_device
        self.model_config = model_config
        prefix = f"{base_url}.{layer_num}.ffn"
        up_key = f"{prefix}.up.weight"
        down_key = f"{prefix}.down.weight"
        up = state_dict.get(up_key) if state_dict else None
        down = state_dict.get(down_key) if state_dict else None

        def to_columns(weight):
            return torch.transpose(weight.reshape(1, 1, *weight.shape), -2, -1)

        self.up_weight = ttnn.as_tensor(
            up,
            dtype=model_config["UP_WEIGHTS_DTYPE"],
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ShardTensorToMesh(mesh_device, dim=3),
            cache_file_name=tt_cache_path / up_key,
            preprocess=to_columns,
        )
        self.down_weight = ttnn.as_tensor(
            down,
            dtype=model_config["DOWN_WEIGHTS_DTYPE"],
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ShardTensorToMesh(mesh_device, dim=2),
            cache_file_name=tt_cache_path / f"{down_key}_rows",
            preprocess=to_columns,
        )

    def __call__(self, x):
        hidden = ttnn.matmul(x, self.up_weight, dtype=self.model_config["HIDDEN_DTYPE"])
        hidden = ttnn.gelu(hidden)
        return ttnn.matmul(hidden, self.down_weight, dtype=ttnn.bfloat16)  # each device's partial sum
