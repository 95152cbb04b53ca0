"""TTTv1 refuses prefill on galaxy with an assert, and decode on galaxy with a raise."""

import ttnn


class Refusal:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if mode == "prefill":
            assert not self.args.is_galaxy, "prefill is not supported on galaxy"
            return ttnn.add(x, 1.0)
        if self.args.is_galaxy:
            raise NotImplementedError("decode on galaxy")
        return ttnn.mul(x, 2.0)
