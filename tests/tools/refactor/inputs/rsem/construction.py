"""Constructors the generated from_model_args cannot copy as they are: an early return, a default read from a
module constant, an attribute set by the base class's __init__. And one it can: a default from a class constant."""

import ttnn

BIAS = 0.5


class EarlyReturn:
    def __init__(self, mesh_device, args, extra=None):
        self.gain = 2.0
        if extra is None:
            return
        self.gain = extra

    def forward(self, x, mode):
        return ttnn.mul(x, self.gain)


class ModuleDefault:
    def __init__(self, mesh_device, args, bias=BIAS):
        self.bias = bias

    def forward(self, x, mode):
        return ttnn.add(x, self.bias)


class ClassDefault:
    EPS = 0.25

    def __init__(self, mesh_device, args, eps=EPS):
        self.eps = eps

    def forward(self, x, mode):
        return ttnn.add(x, self.eps)


class Scaled(ClassDefault):
    def __init__(self, mesh_device, args):
        super().__init__(mesh_device, args)
        self.scale = 2.0

    def forward(self, x, mode):
        return ttnn.mul(ttnn.add(x, self.eps), self.scale)
