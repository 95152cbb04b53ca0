"""Another demo's collective helpers (``*_ccl.py``), imported by the ``rhelp`` modules."""

import ttnn


def gather_rows(x, mesh_device, num_links=None, scale=1.0):
    """Gather ``x`` over the mesh's devices (a copy of ``x`` on one device), scaled."""
    if num_links is None:
        num_links = 1
    if mesh_device.get_num_devices() > 1:
        x = ttnn.all_gather(x, dim=3, num_links=num_links)
    return ttnn.multiply(x, scale)
