"""A vision block of the era before its attention took ``tt_ccl``: it builds the attention with the arguments
of the earlier constructor (``state_dict`` lands on ``tt_ccl``, and ``state_dict`` itself is missing), as
tt-metal's image block does in a version older than its attention. TTTv1 raises ``TypeError`` there."""

import ttnn

from .lightweightmodule import LightweightModule
from .patch_attention import TtPatchAttention


class TtPatchBlock(LightweightModule):
    def __init__(self, mesh_device, state_dict, state_dict_prefix, dtype, configuration):
        super().__init__()
        self.mesh_device = mesh_device
        self.attn = TtPatchAttention(
            mesh_device,
            state_dict,
            state_dict_prefix=f"{state_dict_prefix}attn.",
            dtype=dtype,
            configuration=configuration,
        )

    def forward(self, x_11SH):
        return ttnn.add(x_11SH, self.attn(x_11SH))
