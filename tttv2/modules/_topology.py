"""Which mesh a module runs on, checked before any device work: 1D classes take 1×N meshes, 2D classes R×C meshes
with R, C > 1; the default collective topology and device count of a mesh."""

from __future__ import annotations

from tttv2 import ttnn


def mesh_shape(mesh_device) -> tuple[int, ...]:
    return tuple(int(d) for d in mesh_device.shape)


def _shape_text(shape) -> str:
    return "x".join(str(d) for d in shape)


class TopologyError(ValueError):
    """A module built for one topology was given a mesh (or TTTv1 arguments) of the other: the caller picks the
    other class. A ``ValueError``, as before it had its own name."""


def require_mesh(owner: str, mesh_device) -> None:
    if mesh_device is None or not hasattr(mesh_device, "get_num_devices"):
        raise ValueError(
            f"{owner}: mesh_device must be a ttnn.MeshDevice (from the config, a weight's device or "
            f"ttnn.SetDefaultDevice), got {type(mesh_device).__name__}"
        )


def require_1d_mesh(owner: str, mesh_device, use_instead: str | None) -> None:
    """1D modules run on a single row (or column) of devices: 1x1, 1x2, 1x4, 1x8."""
    require_mesh(owner, mesh_device)
    shape = mesh_shape(mesh_device)
    if len(shape) > 1 and sorted(shape)[-2] > 1:
        hint = f"; use {use_instead} instead" if use_instead else ""
        raise TopologyError(
            f"{owner} runs on 1-D meshes (1x1, 1x2, 1x4, 1x8); got a {_shape_text(shape)} mesh{hint}"
        )


def require_2d_mesh(owner: str, mesh_device, use_instead: str) -> None:
    """2D modules run on meshes with more than one device along both axes (Galaxy 8x4 / 4x8)."""
    require_mesh(owner, mesh_device)
    shape = mesh_shape(mesh_device)
    if len(shape) != 2 or min(shape) < 2:
        raise TopologyError(
            f"{owner} runs on 2-D meshes (8x4, 4x8); got a {_shape_text(shape)} mesh; use {use_instead} instead"
        )


def num_devices(mesh_device) -> int:
    return int(mesh_device.get_num_devices())


def default_topology(mesh_device):
    """Ring on an 8-device T3K or a 4-chip P150x4 (their fabric closes the loop), Linear on any other
    multi-device mesh, None on a single device."""
    n = num_devices(mesh_device)
    if n == 1:
        return None
    cluster = ttnn.cluster.get_cluster_type()
    ring = (n == 8 and cluster == ttnn.cluster.ClusterType.T3K) or (
        n == 4 and cluster == ttnn.cluster.ClusterType.P150_X4
    )
    return ttnn.Topology.Ring if ring else ttnn.Topology.Linear


def resolve_mesh_device(owner: str, explicit, *weights):
    """The config's mesh, else the first weight's device, else ttnn's default device."""
    for candidate in (explicit, *(getattr(w, "device", None) for w in weights)):
        if candidate is not None:
            require_mesh(owner, candidate)
            return candidate
    default = ttnn.GetDefaultDevice()
    require_mesh(owner, default)
    return default
