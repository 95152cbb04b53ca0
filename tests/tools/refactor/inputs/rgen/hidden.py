"""R37: the galaxy test is made by a module-level function on its own parameter, which from_model_args cannot
write with the constructor's arguments: reported."""

import ttnn


def on_galaxy(config):
    return config.is_galaxy


class Hidden:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if on_galaxy(self.args):
            return ttnn.mul(x, 3.0)
        return ttnn.add(x, 1.0)
