"""A module global a setter changes with `global`: TTTv1 reads its current value on every call."""

import ttnn

FAST = True


def set_fast(value):
    global FAST
    FAST = value


class Globalled:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if FAST:
            x = ttnn.add(x, 1.0)
        return x


LIMIT = 2.0


class Declared:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        global LIMIT  # declared, never assigned: a constant like any other
        return ttnn.mul(x, LIMIT)
