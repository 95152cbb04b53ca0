"""Token embedding: the table is split over mesh columns along dim, like the residual stream it feeds."""

from __future__ import annotations

import ttnn

from tttv1.common.lightweightmodule import LightweightModule


class Embedding(LightweightModule):
    def __init__(self, mesh_device, args, weight_cache_path, state_dict, dtype):
        super().__init__()
        self.mesh_device = mesh_device
        self.args = args

        key = args.get_state_dict_prefix("", None) + "tok_embeddings.weight"
        use_cache = not args.dummy_weights and weight_cache_path is not None
        # [vocab, dim] -> [1, 1, vocab, dim]; dim is split over the mesh columns
        self.weights = ttnn.as_tensor(
            state_dict[key][None, None],
            dtype=dtype,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=self.mesh_device,
            memory_config=args.get_model_config()["EMB_WEIGHTS_MEMCFG"],
            mesh_mapper=ttnn.ShardTensor2dMesh(
                self.mesh_device, dims=(None, 3), mesh_shape=args.cluster_shape
            ),
            cache_file_name=weight_cache_path / key if use_cache else None,
        )

    def lookup(self, ids: ttnn.Tensor) -> ttnn.Tensor:
        """Rows of the table for ``ids``, tiled, in DRAM."""
        return ttnn.embedding(
            ids, self.weights, layout=ttnn.TILE_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG
        )

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        return self.lookup(x)


class ScaledEmbedding(Embedding):
    """Embedding followed by a constant scale (Gemma-style models multiply by sqrt(dim))."""

    def __init__(self, mesh_device, args, weight_cache_path, state_dict, dtype, embed_scale: float = 1.0):
        super().__init__(mesh_device, args, weight_cache_path, state_dict, dtype)
        self.embed_scale = embed_scale

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        return ttnn.multiply(self.lookup(x), self.embed_scale, memory_config=ttnn.DRAM_MEMORY_CONFIG)
