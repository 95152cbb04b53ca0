"""Class constants, properties and a classmethod helper read by forward (the generated module used to read them
on a namespace that has only what __init__ sets)."""

import ttnn


class Members:
    DECODE_GAIN = 2.0
    PREFILL_GAIN = 0.5
    OFFSET = DECODE_GAIN + 1.0

    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    @property
    def gain(self):
        return self.model_config["GAIN"] * 2

    @classmethod
    def _shift(cls, x):
        return ttnn.add(x, cls.OFFSET)

    def forward(self, x, mode):
        scale = self.DECODE_GAIN if mode == "decode" else self.PREFILL_GAIN
        x = ttnn.mul(x, scale)
        if self.args.is_galaxy:
            x = ttnn.mul(x, self.gain)
        return self._shift(x)
