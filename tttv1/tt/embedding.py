"""Token embedding: the table is split over mesh columns along dim, like the residual stream it feeds."""

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule


class Embedding(LightweightModule):
    def __init__(self, mesh_device, args, weight_cache_path, state_dict, dtype):
        super().__init__()
        self.mesh_device = mesh_device
        self.args = args

        base_name = args.get_state_dict_prefix("", None) + "tok_embeddings.weight"
        torch_weight = state_dict[base_name].unsqueeze(0).unsqueeze(0)
        cache_name = (
            None if args.dummy_weights or weight_cache_path is None else weight_cache_path / base_name
        )
        self.weights = ttnn.as_tensor(
            torch_weight,
            dtype=dtype,
            device=self.mesh_device,
            mesh_mapper=ttnn.ShardTensor2dMesh(
                self.mesh_device, dims=(None, 3), mesh_shape=args.cluster_shape
            ),
            layout=ttnn.ROW_MAJOR_LAYOUT,
            memory_config=args.get_model_config()["EMB_WEIGHTS_MEMCFG"],
            cache_file_name=cache_name,
        )

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        x = ttnn.embedding(x, self.weights, layout=ttnn.TILE_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        return x


class ScaledEmbedding(Embedding):
    """Embedding followed by a constant scale (Gemma-style models multiply by sqrt(dim))."""

    def __init__(self, mesh_device, args, weight_cache_path, state_dict, dtype, embed_scale: float = 1.0):
        super().__init__(mesh_device, args, weight_cache_path, state_dict, dtype)
        self.embed_scale = embed_scale

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        e = ttnn.embedding(x, self.weights, layout=ttnn.TILE_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        return ttnn.multiply(e, self.embed_scale, memory_config=ttnn.DRAM_MEMORY_CONFIG)
