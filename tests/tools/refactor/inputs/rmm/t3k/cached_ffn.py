"""A feed-forward in the style of the Llama-2-70B T3000 demo's MLP (``llama_mlp_optimized.py``): with
``read_cache`` set the host weights stay None and ``ttnn.as_tensor`` reads them from its cache files (the demo's
second and later runs); otherwise they are zero-padded to a wider hidden size first. Decode or prefill is the
dict's ``LLM_MODE``, switched by ``set_model_config``; prefill's second matmul is tt_lib's
(``ttnn.experimental`` imported as ``tt_lib``: ``tt_lib.operations.primary.matmul(..., output_dtype=...)``)."""

import torch
import ttnn
import ttnn.experimental as tt_lib
from ttnn import ShardTensorToMesh


class TtCachedFFN:
    def __init__(
        self,
        mesh_device,
        state_dict,
        base_url,
        layer_num,
        hidden_size: int,
        model_config,
        cache_path=None,
        read_cache=False,
    ):
        self.state_dict = state_dict
        self.mesh_device = mesh_device
        self.num_devices = mesh_device.get_num_devices()
        self.model_config = model_config
        self.read_cache = read_cache
        self.hidden_size = hidden_size
        self.layer_name = f"{base_url}.{layer_num}"
        self.cache_path = cache_path
        self.load_weights()

    def set_model_config(self, model_config):
        self.model_config = model_config

    def load_weights(self):
        w1_str = f"{self.layer_name}.feed_forward.w1.weight"
        w2_str = f"{self.layer_name}.feed_forward.w2.weight"
        padded_w1 = None
        padded_w2 = None
        if not self.read_cache:
            H, PADDED_H4, H4 = 64, 128, 96
            padded_w1 = torch.zeros(1, 1, H, PADDED_H4)
            padded_w2 = torch.zeros(1, 1, PADDED_H4, H)
            padded_w1[:, :, :, :H4] = self.state_dict[w1_str].transpose(-2, -1)
            padded_w2[:, :, :H4, :] = self.state_dict[w2_str].transpose(-2, -1)
        w1_ttnn = ttnn.as_tensor(
            padded_w1,
            dtype=ttnn.bfloat8_b,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ShardTensorToMesh(self.mesh_device, dim=3),
            cache_file_name=self.cache_path / w1_str,
        )
        self.w1 = ttnn.to_device(w1_ttnn, self.mesh_device)
        w2_ttnn = ttnn.as_tensor(
            padded_w2,
            dtype=ttnn.bfloat8_b,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ShardTensorToMesh(self.mesh_device, dim=3),
            cache_file_name=self.cache_path / w2_str,
        )
        self.w2 = ttnn.to_device(w2_ttnn, self.mesh_device)

    def __call__(self, x):
        if self.model_config["LLM_MODE"] == "decode":
            return self.decode_forward(x)
        elif self.model_config["LLM_MODE"] == "prefill":
            return self.prefill_forward(x)
        else:
            raise ValueError(f"Unknown llm_mode: {self.model_config['LLM_MODE']}")

    def decode_forward(self, x):
        hidden = ttnn.silu(ttnn.matmul(x, self.w1, memory_config=self.model_config["OUT_MEMCFG"]))
        hidden = ttnn.all_gather(hidden, dim=3, num_links=1)
        return ttnn.matmul(hidden, self.w2, memory_config=self.model_config["OUT_MEMCFG"])

    def prefill_forward(self, x):
        _, _, seq_len, _ = x.shape
        max_mm_seq_len = self.model_config["MAX_MM_SEQ_LEN"]
        batch_dim = 1 if seq_len < max_mm_seq_len else seq_len // max_mm_seq_len
        x = ttnn.reshape(x, (1, batch_dim, seq_len // batch_dim, self.hidden_size))
        hidden = ttnn.silu(ttnn.matmul(x, self.w1, dtype=ttnn.bfloat16))
        hidden = ttnn.all_gather(hidden, dim=3, num_links=1)
        out = tt_lib.operations.primary.matmul(hidden, self.w2, output_dtype=ttnn.bfloat16)
        return ttnn.reshape(out, (1, 1, seq_len, self.hidden_size // self.num_devices))
