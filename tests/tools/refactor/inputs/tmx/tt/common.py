"""The base module and the mode enum, in tt-metal's style."""

from enum import Enum


class Mode(Enum):
    DECODE = "decode"
    PREFILL = "prefill"


class LightweightModule:
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)
