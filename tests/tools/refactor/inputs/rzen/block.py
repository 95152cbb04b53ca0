"""A decoder block in the style of tt_transformers' decoder: the rotation matrices chosen by a test on a
sub-module's attribute (``hasattr(self.attention, "is_sliding") and self.attention.is_sliding``), a value
known at construction choosing between two run-time inputs; and a reduction through a helper that is given
only some of its arguments (one passes the number of links the constructor was given)."""

import ttnn

from rzen.ccl import all_reduce


class Sliding:
    is_sliding = True


class Block:
    def __init__(self, mesh_device, args, attention=None, num_links=None):
        self.mesh_device = mesh_device
        self.args = args
        self.attention = attention
        self.num_links = num_links

    def forward(self, x, mode, rot_global=None, rot_local=None):
        rot = (
            rot_local if (hasattr(self.attention, "is_sliding") and self.attention.is_sliding) else rot_global
        )
        x = ttnn.mul(x, rot)
        x = all_reduce(x, self.mesh_device, num_links=self.num_links)
        return all_reduce(x, self.mesh_device)
