"""The Falcon-40B MLP's persistent prefill buffer: ``set_model_config`` swaps the dict and then reallocates the
output buffer for it (``_allocate_output_tensors``), which exists only while the dict is a prefill one and has
that dict's rows; prefill adds its result into the buffer."""

import torch
import ttnn


class TtBufferedMLP:
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
        self.output = None
        self._allocate_output_tensors()

    def set_model_config(self, model_config):
        self.model_config = model_config

        self._allocate_output_tensors()

    def _allocate_output_tensors(self):
        if self.model_config["LLM_MODE"] == "prefill":
            if self.output is not None:
                self.output.deallocate()
            rows = 64 * self.model_config["PREFILL_SLICES"]
            # the buffer prefill writes into, one per prefill length
            self.output = ttnn.as_tensor(
                torch.full((1, 1, rows, self.hidden_size), 0.125).bfloat16(),
                dtype=ttnn.bfloat16,
                layout=ttnn.TILE_LAYOUT,
                device=self.mesh_device,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
                mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
            )

    def __call__(self, x, llm_mode):
        if llm_mode == "prefill":
            return self.fwd_prefill(x)
        elif llm_mode == "decode":
            return self.fwd_decode(x)
        else:
            assert False, f"unknown mode {llm_mode}"  # noqa: B011 - as Falcon-40B writes it (a TTTv1 input)

    def fwd_decode(self, x):
        h = ttnn.linear(x, self.ff1, dtype=self.model_config["FF1_OUTPUT_DTYPE"])
        return ttnn.to_memory_config(h, self.model_config["OUTPUT_MEMCFG"])

    def fwd_prefill(self, x):
        h = ttnn.linear(x, self.ff1, dtype=self.model_config["FF1_OUTPUT_DTYPE"])
        out = ttnn.add(h, self.output)
        return ttnn.to_memory_config(out, self.model_config["OUTPUT_MEMCFG"])
