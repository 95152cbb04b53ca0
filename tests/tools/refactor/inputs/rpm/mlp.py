"""An MLP in the Falcon-40B T3000 style: built with one mode's config dict, switched to the other mode's dict by
``set_model_config``, and reading ``self.model_config["KEY"]`` in each mode's forward; the same keys differ per
mode (``OUTPUT_MEMCFG``, ``ACT_SCALE``), and each mode has keys of its own."""

import ttnn


class TtPerModeMLP:
    def __init__(self, mesh_device, state_dict, base_url, layer_num, hidden_size, model_config):
        self.mesh_device = mesh_device
        self.hidden_size = hidden_size
        self.model_config = model_config
        layer_name = f"{base_url}.{layer_num}"
        self.ff1 = ttnn.as_tensor(
            state_dict[f"{layer_name}.mlp.ff1.weight"],
            dtype=self.model_config["FF1_WEIGHTS_DTYPE"],
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=self.model_config["WEIGHTS_MEMCFG"],
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )
        self.ff2 = ttnn.as_tensor(
            state_dict[f"{layer_name}.mlp.ff2.weight"],
            dtype=self.model_config["FF2_WEIGHTS_DTYPE"],
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=self.model_config["WEIGHTS_MEMCFG"],
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )

    def set_model_config(self, model_config):
        self.model_config = model_config

    def __call__(self, x, llm_mode):
        if llm_mode == "prefill":
            return self.fwd_prefill(x)
        elif llm_mode == "decode":
            return self.fwd_decode(x)
        else:
            assert False, f"unknown mode {llm_mode}"  # noqa: B011 - as Falcon-40B writes it (a TTTv1 input)

    def fwd_decode(self, x):
        h = ttnn.linear(x, self.ff1, dtype=self.model_config["FF1_OUTPUT_DTYPE"])
        h = ttnn.multiply(ttnn.gelu(h), self.model_config["ACT_SCALE"])
        h = ttnn.add(h, self.model_config["DECODE_SHIFT"])
        out = ttnn.linear(h, self.ff2)
        return ttnn.to_memory_config(out, self.model_config["OUTPUT_MEMCFG"])

    def fwd_prefill(self, x):
        slices = self.model_config["PREFILL_SLICES"]
        h = ttnn.linear(x, self.ff1, dtype=self.model_config["FF1_OUTPUT_DTYPE"])
        h = ttnn.multiply(ttnn.gelu(h), self.model_config["ACT_SCALE"] * slices)
        out = ttnn.linear(h, self.ff2)
        return ttnn.to_memory_config(out, self.model_config["OUTPUT_MEMCFG"])
