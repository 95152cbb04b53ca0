"""An MLP in the Llama-3 70B Galaxy demo's style (``llama_mlp.py``): weights split over both mesh axes with
``args.cluster_shape``, decode through the CCL object's fused matmul + reduce-scatter and an all-reduce into the
residual's shards, prefill through plain matmuls and the async reduce-scatter / all-gather. In decode with a
prefetcher, ``__init__`` hands it the uploaded weights (``prefetch``, as the demo's modules do)."""

import ttnn

from rfused.lightweightmodule import LightweightModule


class TtFusedMLP(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num=0, tt_ccl=None, prefetcher_setup=None):
        self.args = args
        self.model_config = args.get_model_config()
        self.tt_ccl = tt_ccl
        prefix = f"layers.{layer_num}.feed_forward"
        as_weight = lambda name, dims: ttnn.as_tensor(  # noqa: E731  (the demo's lambdas)
            state_dict[f"{prefix}.{name}.weight"].transpose(-2, -1)[None, None],
            dtype=ttnn.bfloat8_b,
            device=mesh_device,
            layout=ttnn.TILE_LAYOUT,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh_device, dims=dims, mesh_shape=args.cluster_shape),
        )
        self.w1 = as_weight("w1", (-1, -2))
        self.w3 = as_weight("w3", (-1, -2))
        self.w2 = as_weight("w2", (-2, -1))
        if tt_ccl.mode == "decode" and prefetcher_setup is not None:
            self.prefetch(prefetcher_setup, tt_ccl)

    def prefetch(self, prefetcher_setup, tt_ccl):
        self.prefetcher_setup = prefetcher_setup
        self.prefetcher_setup.insert_tensor(self.w1)
        self.prefetcher_setup.insert_tensor(self.w3)
        self.prefetcher_setup.insert_tensor(self.w2)
        self.tt_ccl = tt_ccl

    def forward(self, x, mode):
        if mode == "prefill":
            return self.forward_prefill(x)
        w1_reduced, w3_out = self.tt_ccl.double_matmul_reduce_scatter(
            x,
            self.w1,
            self.w3,
            memory_config=self.model_config["FF1_OUT_MEMCFG"],
            rs_memory_config=self.model_config["RS_OUT_MEMCFG"],
        )
        w3_reduced = self.tt_ccl.reduce_scatter(w3_out, self.model_config["RS_OUT_MEMCFG"])
        ff1ff3 = ttnn.mul(
            w1_reduced,
            w3_reduced,
            input_tensor_a_activations=[ttnn.UnaryOpType.SILU],
            dtype=ttnn.bfloat8_b,
            memory_config=self.model_config["RS_OUT_MEMCFG"],
        )
        w2_in = self.tt_ccl.all_gather(
            ff1ff3, cluster_axis=1, memory_config=self.model_config["FF2_IN_MEMCFG"]
        )
        w2_out = ttnn.linear(w2_in, self.w2, dtype=ttnn.bfloat8_b, memory_config=ttnn.L1_MEMORY_CONFIG)
        return self.tt_ccl.all_reduce(
            w2_out, cluster_axis=0, memory_config=self.model_config["RESIDUAL_MEMCFG"]
        )

    def forward_prefill(self, x):
        w1_out = ttnn.linear(x, self.w1, dtype=ttnn.bfloat8_b, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        w1_reduced = self.tt_ccl.reduce_scatter(w1_out, ttnn.DRAM_MEMORY_CONFIG)
        w3_out = ttnn.linear(x, self.w3, dtype=ttnn.bfloat8_b, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        w3_reduced = self.tt_ccl.reduce_scatter(w3_out, ttnn.DRAM_MEMORY_CONFIG)
        w2_in = ttnn.mul(
            w1_reduced,
            w3_reduced,
            input_tensor_a_activations=[ttnn.UnaryOpType.SILU],
            dtype=ttnn.bfloat8_b,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )
        gathered = self.tt_ccl.all_gather(w2_in, cluster_axis=1, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        w2_out = ttnn.linear(gathered, self.w2, dtype=ttnn.bfloat8_b, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        return self.tt_ccl.all_reduce(w2_out, cluster_axis=0, memory_config=ttnn.DRAM_MEMORY_CONFIG)
