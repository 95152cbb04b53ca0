"""ModelArgs shaped like tt-metal's (not tttv1's): Hugging Face names for the sizes, the mesh as cluster_shape,
memory configs from a method per mode."""

import ttnn


class ModelArgs:
    def __init__(self, mesh_device, hidden_size=64, intermediate_size=256, num_experts=32, max_batch_size=32):
        self.mesh_device = mesh_device
        self.cluster_shape = list(mesh_device.shape)
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_experts = num_experts
        self.max_batch_size = max_batch_size
        self.model_name = "tmx-tiny"
        self.prefill_len_cutoff = 1024  # longer prompts read per-length program configs

    def get_model_config(self):
        return {"MLP_OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG, "ROUTER_SCORES_MEMCFG": ttnn.L1_MEMORY_CONFIG}

    def get_state_dict_prefix(self, module_name, layer_num):
        return f"layers.{layer_num}.{module_name}."

    def mlp_output_memory_config(self, mode):
        return ttnn.L1_MEMORY_CONFIG if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
