"""Review 2, R33 and R30: a nested function and a lambda with their own ``mode`` (given a default or a string,
never the caller's mode), and one forward comparing the mode with a string and with a plain ``Enum`` member."""

from enum import Enum

import ttnn


class Mode(Enum):
    DECODE = "decode"
    PREFILL = "prefill"


class Shadowed:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        def inner(t, mode="prefill"):
            return ttnn.mul(t, 2.0) if mode == "decode" else t

        def passed_on(t, mode):
            return ttnn.add(t, 1.0) if mode == "decode" else t

        pick = lambda mode: 5.0 if mode == "decode" else 7.0  # noqa: E731 (the TTTv1 spelling under test)
        x = passed_on(inner(x), mode)
        return ttnn.mul(x, pick("prefill"))


class Spelled:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if mode == "decode":
            x = ttnn.mul(x, 2.0)
        if mode == Mode.DECODE:
            x = ttnn.add(x, 3.0)
        return x
