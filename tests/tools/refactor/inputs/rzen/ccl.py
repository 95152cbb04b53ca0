"""A collective helper in the style of tt_transformers' tt_all_reduce: a parameter whose default (None) means
"ask the CCL object", decided per call site."""

import ttnn


def all_reduce(x, mesh_device, cluster_axis=0, num_links=None, scale=None):
    if list(mesh_device.shape) == [1, 1]:
        return x
    if num_links is None:
        num_links = 1
    if scale is None:
        scale = 1.0 / num_links
    return ttnn.mul(x, scale)
