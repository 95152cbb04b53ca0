"""Helpers beside the module, as Falcon-7B's ``model_utils.py`` has them: the default core grid of a device,
one row short of the full grid on a Wormhole whose grid has 8 rows or more (asked of the device it is given)."""

import ttnn

from rwide.utility_functions import is_wormhole_b0


def default_matmul_grid(device):
    grid_size = device.compute_with_storage_grid_size()
    if is_wormhole_b0() and grid_size.y >= 8:
        return ttnn.CoreGrid(y=grid_size.y - 1, x=grid_size.x)
    return ttnn.CoreGrid(y=grid_size.y, x=grid_size.x)
