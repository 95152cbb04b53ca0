"""Helpers imported from a sibling module with a relative import, used at construction and in forward."""

from .scales import links_for, scaled


class Sibling:
    def __init__(self, mesh_device, args):
        self.args = args
        self.links = links_for(args.dim)

    def forward(self, x, mode):
        return scaled(x, self.links + 1)
