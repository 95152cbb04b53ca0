"""The value path of the Llama-3 70B Galaxy demo's attention (``llama_attention.py``), without the scores: the
fused QKV weight split per mesh row (8 query heads, then that row's K and V), decode through the CCL object's
reduce-scatter-into-heads and gather-and-concat of the heads into the WO matmul, prefill through an all-reduce,
``nlp_create_qkv_heads`` and ``nlp_concat_heads``. Each user's query heads come back through WO."""

import torch
import ttnn

from rfused.lightweightmodule import LightweightModule


class TtFusedHeads(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num=0, tt_ccl=None):
        self.args = args
        self.model_config = args.get_model_config()
        self.tt_ccl = tt_ccl
        self.n_local_heads = args.n_heads // args.cluster_shape[0]
        self.n_local_kv_heads = args.n_kv_heads // args.cluster_shape[0]
        prefix = f"layers.{layer_num}.attention"
        groups = args.cluster_shape[0]
        parts = [
            torch.cat(
                [torch.chunk(state_dict[f"{prefix}.{w}.weight"], groups)[i].T for w in ("wq", "wk", "wv")], -1
            )
            for i in range(groups)
        ]
        self.wqkv = ttnn.as_tensor(
            torch.cat(parts, -1)[None, None],
            dtype=ttnn.bfloat8_b,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh_device, dims=(3, 2), mesh_shape=args.cluster_shape),
        )
        self.wo = ttnn.as_tensor(
            state_dict[f"{prefix}.wo.weight"].T[None, None],
            dtype=ttnn.bfloat8_b,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh_device, dims=(2, 3), mesh_shape=args.cluster_shape),
        )

    def forward(self, x, mode):
        if mode == "prefill":
            return self.forward_prefill(x)
        xqkv = ttnn.matmul(
            x, self.wqkv, dtype=ttnn.bfloat16, memory_config=self.model_config["QKV_OUT_MEMCFG"]
        )
        q, k, v = self.tt_ccl.create_heads(xqkv, self.model_config["HEADS_MEMCFG"])
        ttnn.deallocate(k)
        ttnn.deallocate(v)
        cat = self.tt_ccl.gather_heads(q, self.model_config["WO_IN_MEMCFG"])
        out = ttnn.matmul(cat, self.wo, dtype=ttnn.bfloat8_b, memory_config=ttnn.L1_MEMORY_CONFIG)
        return self.tt_ccl.all_reduce(out, cluster_axis=0, memory_config=self.model_config["RESIDUAL_MEMCFG"])

    def forward_prefill(self, x):
        xqkv = ttnn.linear(x, self.wqkv, dtype=ttnn.bfloat16, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        fused = self.tt_ccl.all_reduce(xqkv, cluster_axis=1, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        q, _k, _v = ttnn.experimental.nlp_create_qkv_heads(
            fused,
            num_heads=self.n_local_heads,
            num_kv_heads=self.n_local_kv_heads,
            transpose_k_heads=False,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )
        cat = ttnn.experimental.nlp_concat_heads(q, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        out = ttnn.linear(cat, self.wo, dtype=ttnn.bfloat8_b, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        return self.tt_ccl.all_reduce(out, cluster_axis=0, memory_config=ttnn.DRAM_MEMORY_CONFIG)
