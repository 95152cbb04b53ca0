"""A fused QKV projection in the style of the Llama-2-70B T3000 demo's attention: the mode is the config dict's
``LLM_MODE``, swapped by ``set_model_config``; prefill picks its program config by length (a config entry for
the long and the 128-row inputs, else one built from the operands' shapes by a helper of another folder, called
with constant accumulate and subblock arguments); a long-prefill path that now fails at once (``assert False``)
before code that still calls that helper."""

import ttnn

from rmm.common.matmul_utils import mm2d_config_for


class TtFusedQKV:
    def __init__(self, mesh_device, state_dict, model_config, layer_num=0):
        self.mesh_device = mesh_device
        self.model_config = model_config
        prefix = f"layers.{layer_num}.attention"
        self.wqkv = ttnn.as_tensor(
            state_dict[f"{prefix}.wqkv"].unsqueeze(0).unsqueeze(0),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.wo = ttnn.as_tensor(
            state_dict[f"{prefix}.wo"].unsqueeze(0).unsqueeze(0),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def set_model_config(self, model_config):
        self.model_config = model_config

    def __call__(self, xs):
        if self.model_config["LLM_MODE"] == "decode":
            return self.decode_forward(xs)
        elif self.model_config["LLM_MODE"] == "prefill":
            return self.prefill_forward(xs)
        else:
            raise ValueError(f"Unknown llm_mode: {self.model_config['LLM_MODE']}")

    def decode_forward(self, xs):
        fused = ttnn.linear(
            xs, self.wqkv, program_config=self.model_config["DECODE_QKV_PROGCFG"], dtype=ttnn.bfloat16
        )
        return ttnn.linear(fused, self.wo, memory_config=self.model_config["OUT_MEMCFG"])

    def prefill_forward(self, xs):
        _, _, seq_len, _ = xs.shape
        max_mm_seq_len = self.model_config["MAX_MM_SEQ_LEN"]
        if seq_len >= max_mm_seq_len:
            if seq_len % max_mm_seq_len != 0:
                raise ValueError(f"seq_len {seq_len} must be divisible by {max_mm_seq_len}")
            return self.prefill_long(xs, seq_len // max_mm_seq_len)
        elif seq_len == 128:
            pc_qkv = self.model_config["PREFILL_QKV_PROGCFG_128"]
        else:
            # built from the shapes for the other lengths
            pc_qkv = mm2d_config_for(
                xs.shape,
                self.wqkv.shape,
                grid=ttnn.CoreGrid(y=min(8, xs.shape[2] // 32), x=8),
                fp32_acc=True,
                force_sub_h=1,
                force_sub_w=1,
            )
        fused = ttnn.linear(
            xs,
            self.wqkv,
            core_grid=ttnn.CoreGrid(y=8, x=8) if not pc_qkv else None,
            dtype=ttnn.bfloat16,
            program_config=pc_qkv,
        )
        return self.prefill_selfout(fused, seq_len)

    def prefill_selfout(self, fused, seq_len):
        if seq_len == 128:
            pc_out = self.model_config["PREFILL_WO_PROGCFG_128"]
        else:
            pc_out = mm2d_config_for(
                fused.shape,
                self.wo.shape,
                grid=ttnn.CoreGrid(y=min(8, seq_len // 32), x=8),
                fp32_acc=False,
                force_sub_h=1,
            )
        return ttnn.linear(
            fused, self.wo, program_config=pc_out, memory_config=self.model_config["OUT_MEMCFG"]
        )

    def prefill_long(self, xs, chunks):
        assert False, "the chunked prefill waits for its collective to come back"  # noqa: B011 (as tt-metal)
        xs = ttnn.reshape(xs, (1, chunks, xs.shape[2] // chunks, -1))
        pc_qkv = mm2d_config_for(xs.shape, self.wqkv.shape, fp32_acc=False, force_sub_w=2)
        return ttnn.linear(xs, self.wqkv, program_config=pc_qkv)
