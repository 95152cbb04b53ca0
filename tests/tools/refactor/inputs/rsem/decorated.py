"""Decorators that change the result: on forward and on a helper forward calls."""

import ttnn


def plus_one(fn):
    def wrapper(self, x, mode):
        return ttnn.add(fn(self, x, mode), 1.0)

    return wrapper


def doubled(fn):
    def wrapper(self, x):
        return ttnn.mul(fn(self, x), 2.0)

    return wrapper


class Decorated:
    def __init__(self, mesh_device, args):
        self.args = args

    @doubled
    def _scale(self, x):
        return ttnn.add(x, 3.0)

    @plus_one
    def forward(self, x, mode):
        return self._scale(x)
