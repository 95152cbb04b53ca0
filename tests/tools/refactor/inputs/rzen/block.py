"""A decoder block in the style of tt_transformers' decoder: the rotation matrices chosen by a test on a
sub-module's attribute (``hasattr(self.attention, "is_sliding") and self.attention.is_sliding``), a value
known at construction choosing between two run-time inputs; and a reduction through a helper that is given
only some of its arguments."""

import ttnn

from rzen.ccl import all_reduce


class Sliding:
    is_sliding = True


class Block:
    def __init__(self, mesh_device, args, attention=None):
        self.mesh_device = mesh_device
        self.args = args
        self.attention = attention

    def forward(self, x, mode, rot_global=None, rot_local=None):
        rot = (
            rot_local if (hasattr(self.attention, "is_sliding") and self.attention.is_sliding) else rot_global
        )
        x = ttnn.mul(x, rot)
        return all_reduce(x, self.mesh_device)
