"""Device tensors back to host arrays for comparisons, composed from the tensor's own topology: an axis a tensor
is sharded on is concatenated along that dim, a replicated axis contributes one copy."""

from __future__ import annotations

import numpy as np

from tttv2 import ttnn

__all__ = ["to_host", "to_host_rows"]


def _device_array(tensor) -> np.ndarray:
    return np.asarray(ttnn.to_numpy(tensor), dtype=np.float32)


def to_host(tensor) -> np.ndarray:
    """The whole logical tensor as float32 numpy, however it is distributed over the mesh."""
    topology = tensor.tensor_topology()
    parts = ttnn.get_device_tensors(tensor)
    if topology is None or len(parts) == 1:
        return _device_array(parts[0])
    shape = [int(d) for d in topology.distribution_shape]
    grid = np.empty(shape, dtype=object)
    for index, part in zip(np.ndindex(*shape), parts):
        grid[index] = _device_array(part)
    # collapse the mesh axes from the last to the first
    for axis in reversed(range(len(shape))):
        placement = topology.placements()[axis]
        collapsed = np.empty(grid.shape[:axis] + grid.shape[axis + 1 :], dtype=object)
        for index in np.ndindex(*collapsed.shape):
            along = [grid[(*index[:axis], k, *index[axis:])] for k in range(shape[axis])]
            dim = getattr(placement, "dim", None)
            collapsed[index] = along[0] if dim is None else np.concatenate(along, axis=dim)
        grid = collapsed
    return grid[()]


def to_host_rows(tensor, rows: int | None = None) -> np.ndarray:
    """``to_host`` flattened to [rows, last dim] (outer dims folded), keeping the first ``rows`` rows."""
    out = to_host(tensor)
    out = out.reshape(-1, out.shape[-1])
    return out if rows is None else out[:rows]
