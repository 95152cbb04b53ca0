"""Mesh-axis bookkeeping shared by the parallel wrappers and layers.

A *parallel group* is a set of mesh axes: ``cluster_axis=None`` means every axis that has more than one device
(the whole mesh), ``cluster_axis=a`` one axis of a 2-D mesh. Collectives over a set of axes map to the CCL
``cluster_axis`` argument: all non-trivial axes → ``None``, one axis → that axis.
"""

from __future__ import annotations

import math

import numpy as np

from ...device import MeshDevice
from ...distribution import MeshMapperConfig, ShardTensorToMesh, create_mesh_mapper
from ...errors import ValidationError
from ...ops.ccl import check_cluster_axis
from ...placement import PlacementReplicate, PlacementShard
from ...tensor import Tensor

__all__ = [
    "collective_axis",
    "group_size",
    "groups_along",
    "mesh_of",
    "nontrivial_axes",
    "replicated_axes",
    "resolve_axes",
    "shard_mapper",
]


def mesh_of(owner: str, mesh_device) -> MeshDevice:
    if not isinstance(mesh_device, MeshDevice):
        raise ValidationError(
            f"{owner}: mesh_device: expected a ttnn.MeshDevice, got {type(mesh_device).__name__}"
        )
    if not mesh_device.is_open:
        raise ValidationError(f"{owner}: mesh_device: {mesh_device} is closed")
    return mesh_device


def nontrivial_axes(mesh: MeshDevice) -> tuple[int, ...]:
    """The mesh axes with more than one device."""
    return tuple(a for a, size in enumerate(mesh.shape) if size > 1)


def resolve_axes(owner: str, mesh: MeshDevice, cluster_axis) -> tuple[int, ...]:
    """The axes of the group ``cluster_axis`` names (see the module docstring).

    ``cluster_axis`` only picks one axis of a 2-D mesh whose two axes both have several devices; on a 1-D mesh
    (``MeshShape([n])``, 1×N or N×1) the group is the whole mesh and ``cluster_axis`` must stay None.
    """
    if cluster_axis is None:
        return nontrivial_axes(mesh)
    shape = list(mesh.shape)
    if len(shape) != 2 or min(shape) == 1:
        raise ValidationError(
            f"{owner}: cluster_axis: expected None on the 1-D mesh {'x'.join(map(str, shape))} (cluster_axis "
            f"picks one axis of a 2-D mesh such as 2x4), got {cluster_axis!r}"
        )
    check_cluster_axis(owner, cluster_axis, (0, 1), "None, 0 or 1")  # the CCL ops' check: no bools
    return (int(cluster_axis),)


def group_size(mesh: MeshDevice, axes) -> int:
    return math.prod(mesh.shape[a] for a in axes)


def collective_axis(mesh: MeshDevice, axes) -> int | None:
    """The CCL ``cluster_axis`` whose groups span ``axes`` (non-empty, non-trivial axes of ``mesh``)."""
    axes = tuple(sorted(set(axes)))
    if axes == nontrivial_axes(mesh):
        return None
    if len(axes) == 1:
        return axes[0]
    raise ValidationError(
        f"no CCL group spans the mesh axes {axes} of {mesh}"
    )  # pragma: no cover - 2-D meshes


def replicated_axes(tensor: Tensor) -> frozenset[int]:
    """The non-trivial mesh axes along which ``tensor`` holds the same (logical) values on every device."""
    mesh = tensor.device()
    axes = nontrivial_axes(mesh)
    topology = tensor.tensor_topology()
    placements = topology.placements()
    dist = tuple(topology.distribution_shape)
    if dist == tuple(mesh.shape):
        return frozenset(a for a in axes if isinstance(placements[a], PlacementReplicate))
    if len(dist) == 1 and dist[0] == mesh.get_num_devices():  # one placement over all devices, row-major
        return frozenset(axes) if isinstance(placements[0], PlacementReplicate) else frozenset()
    big = [a for a, s in enumerate(dist) if s > 1]
    if [dist[a] for a in big] == [mesh.shape[a] for a in axes]:  # equal once size-1 axes are dropped
        return frozenset(a for a, d in zip(axes, big) if isinstance(placements[d], PlacementReplicate))
    raise ValidationError(f"the distribution {topology} of a tensor does not map onto {mesh}")


def shard_mapper(mesh: MeshDevice, axes: tuple[int, ...], dim: int):
    """A mesh mapper that splits ``dim`` over the group ``axes`` (the whole mesh, or one axis of a 2-D mesh) and
    replicates along the other axis."""
    if tuple(axes) == nontrivial_axes(mesh):
        return ShardTensorToMesh(mesh, dim)
    placements = [PlacementReplicate()] * len(mesh.shape)
    placements[axes[0]] = PlacementShard(dim)
    return create_mesh_mapper(mesh, MeshMapperConfig(placements))


def groups_along(mesh: MeshDevice, axis: int) -> np.ndarray:
    """Row-major device indices of the groups along mesh ``axis`` (one row per group, in ring order)."""
    shape = tuple(mesh.shape)
    grid = np.arange(mesh.get_num_devices()).reshape(shape)
    return np.moveaxis(grid, axis, -1).reshape(-1, shape[axis])
