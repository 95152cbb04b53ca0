"""A local given a static value in each arm of a run-time ``if`` (found by the output-quality engineer): the
value it holds after the ``if`` depends on the run-time test, so it is not one construction-time field."""

import ttnn


class Arms:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        rows = x.shape[-2]
        if rows > 32:
            step = self.args.dim * 2
            x = ttnn.add(x, step)
        else:
            step = self.args.dim - 1
        return ttnn.mul(x, float(step))
