"""One expert of a mixture whose long prompts take a program config from a ModelArgs method (the tt_transformers
style of ``args.get_*()``): only prompts longer than ``args.prefill_len_cutoff`` call it, and a ModelArgs that lacks
it runs every prompt up to the cutoff. The generated module computes it at construction (docs/refactor.md,
Limits), so it refuses to build where TTTv1 runs: the failing example of the shadow verification tests."""

import torch
import ttnn

from tmx.tt.common import LightweightModule, Mode


class Expert(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, layer_num, dtype, model_config):
        super().__init__()
        self.args = args
        self.model_config = model_config
        prefix = args.get_state_dict_prefix("feed_forward", layer_num)
        self.w1 = ttnn.as_tensor(
            torch.transpose(state_dict[f"{prefix}w1.weight"], -2, -1),
            dtype=dtype,
            device=mesh_device,
            layout=ttnn.TILE_LAYOUT,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.w2 = ttnn.as_tensor(
            torch.transpose(state_dict[f"{prefix}w2.weight"], -2, -1),
            dtype=dtype,
            device=mesh_device,
            layout=ttnn.TILE_LAYOUT,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x: ttnn.Tensor, mode: Mode) -> ttnn.Tensor:
        seq_len = x.shape[-2]
        if mode == Mode.PREFILL and seq_len >= self.args.prefill_len_cutoff:
            program_config = self.args.get_long_prompt_progcfg()
        else:
            program_config = None
        hidden = ttnn.silu(ttnn.linear(x, self.w1, program_config=program_config))
        return ttnn.linear(hidden, self.w2, program_config=program_config)
