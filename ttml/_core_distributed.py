"""Deprecated ``ttml.core.distributed``: mesh mappers and gradient synchronisation, forwarded to ``tttv2.ttnn``."""

from __future__ import annotations

from tttv2 import ttnn

from ._deprecation import deprecated
from .distributed import _mean_over_axes
from .optimizers import _params

__all__ = ["concat_mesh_to_tensor_composer", "shard_tensor_to_mesh_mapper", "synchronize_gradients"]


def synchronize_gradients(parameters, cluster_axes=None) -> None:
    """Average every gradient of ``parameters`` (TTML's name → tensor map) over ``cluster_axes`` (None: the whole
    mesh; TTML took the data-parallel axis of its parallelism context)."""
    deprecated(
        "ttml.core.distributed.synchronize_gradients",
        "ttnn.nn.parallel.DistributedDataParallel (gradients reduced during backward) or "
        "ttnn.nn.utils.all_reduce_gradients_(params, cluster_axis=...)",
    )
    _mean_over_axes(_params(parameters).values(), cluster_axes)


def shard_tensor_to_mesh_mapper(device, dim: int, cluster_axis: int | None = None):
    deprecated("ttml.core.distributed.shard_tensor_to_mesh_mapper", "ttnn.ShardTensorToMesh(mesh, dim=...)")
    if cluster_axis is None:
        return ttnn.ShardTensorToMesh(device, dim)
    placements = [ttnn.PlacementReplicate()] * len(device.shape)
    placements[cluster_axis] = ttnn.PlacementShard(dim)
    return ttnn.create_mesh_mapper(device, ttnn.MeshMapperConfig(placements))


def concat_mesh_to_tensor_composer(mesh_device, dim: int):
    deprecated(
        "ttml.core.distributed.concat_mesh_to_tensor_composer", "ttnn.ConcatMeshToTensor(mesh, dim=...)"
    )
    return ttnn.ConcatMeshToTensor(mesh_device, dim)
