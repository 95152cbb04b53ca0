"""A KV cache in the style of the Llama-2-70B T3000 demo's attention: the empty caches are uploaded in a
comprehension, each ``ttnn.as_tensor`` (with a cache file) handed straight to ``ttnn.to_device``; a call casts K
and V to the cache's block-float dtype with the copy-kernel ``ttnn.experimental.typecast`` and fills user
``user_id``'s rows, then reads both caches back in bfloat16."""

import torch
import ttnn
from ttnn import ShardTensorToMesh


class TtKVStore:
    def __init__(self, mesh_device, model_config, cache_path, n_kv_heads=2, head_dim=32):
        self.mesh_device = mesh_device
        self.model_config = model_config
        self.cache_path = cache_path
        self.n_kv_heads = n_kv_heads
        self.head_dim = head_dim
        self.kv_dtype = ttnn.bfloat8_b
        self.init_kv_cache()

    def init_kv_cache(self):
        shape = (
            self.model_config["MAX_BATCH_SIZE"],
            self.n_kv_heads,
            self.model_config["MAX_CONTEXT_LEN"],
            self.head_dim,
        )
        layer_past = [torch.zeros(shape), torch.zeros(shape)]
        self.layer_past = [
            ttnn.to_device(
                ttnn.as_tensor(
                    lp,
                    device=self.mesh_device,
                    mesh_mapper=ShardTensorToMesh(self.mesh_device, dim=1),
                    layout=ttnn.TILE_LAYOUT,
                    memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    dtype=self.kv_dtype,
                    cache_file_name=self.cache_path / f"empty_kv_cache{shape}",
                ),
                self.mesh_device,
            )
            for lp in layer_past
        ]

    def __call__(self, key_layer, value_layer, user_id: int = 0):
        keys, values = self.layer_past
        ttnn.fill_cache(keys, ttnn.experimental.typecast(key_layer, self.kv_dtype), user_id)
        ttnn.fill_cache(values, ttnn.experimental.typecast(value_layer, self.kv_dtype), user_id)
        return ttnn.experimental.typecast(keys, ttnn.bfloat16), ttnn.experimental.typecast(
            values, ttnn.bfloat16
        )
