"""Config reads inside try / except KeyError: TTTv1 works without the first key, and reads the second only then."""

import ttnn


class Optional:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        try:
            x = ttnn.add(x, self.model_config["OPTIONAL_SHIFT"])
        except KeyError:
            x = ttnn.mul(x, self.model_config["FALLBACK_SCALE"])
        return x
