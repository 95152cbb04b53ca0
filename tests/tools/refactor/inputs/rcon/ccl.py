"""Collectives in the style of tt_transformers' ccl.py: a CCL object that knows how many links each mesh axis
has, a gather whose ``num_links=None`` means "ask it", and a norm helper with the same default that asks
first and then hands its value to the gather: the value goes through two levels of helpers."""

import ttnn


class TT_CCL:
    def __init__(self, mesh_device, links=(1, 2)):
        self.mesh_device = mesh_device
        self.links = links

    def get_num_links(self, cluster_axis=None):
        if cluster_axis is None:
            return min(self.links)
        return self.links[cluster_axis]


def tt_all_gather(input_tensor, mesh_device, tt_ccl, cluster_axis, dim, num_links=None, memory_config=None):
    # ask the CCL object when the caller did not say
    if num_links is None:
        num_links = tt_ccl.get_num_links(cluster_axis)
    if list(mesh_device.shape) == [1, 1]:
        return input_tensor
    input_tensor = ttnn.to_memory_config(input_tensor, ttnn.DRAM_MEMORY_CONFIG)
    gathered = ttnn.all_gather(input_tensor, dim, num_links=num_links, cluster_axis=cluster_axis)
    return ttnn.mul(gathered, 1.0 / num_links)


def tt_split_norm(inp, gamma, mesh_device, tt_ccl, num_links=None):
    """The statistics of every device's slice, gathered, then the norm."""
    if num_links is None:
        num_links = tt_ccl.get_num_links(cluster_axis=1)

    stats = ttnn.mul(inp, inp)
    gathered = tt_all_gather(
        stats,
        mesh_device=mesh_device,
        tt_ccl=tt_ccl,
        dim=3,
        cluster_axis=1,
        num_links=num_links,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
    )
    return ttnn.mul(ttnn.add(inp, ttnn.mean(gathered, dim=-1, keepdim=True)), gamma)
