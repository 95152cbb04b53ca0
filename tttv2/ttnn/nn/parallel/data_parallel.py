"""Data parallelism: ``DistributedDataParallel`` and ``shard_batch``.

The model is replicated over the data-parallel (DP) group — the whole mesh, or one axis of a 2-D mesh — and
``shard_batch`` gives each replica its slice of the batch (dim 0). During ``backward`` the gradients are
averaged over the group in buckets (see reducer.py), so every replica takes the same optimizer step, equal to
the single-device step on the full batch. Wrapping a :class:`~tttv2.ttnn.nn.parallel.TensorParallel` model puts
DP on the other axis of a 2-D mesh (DP × TP).
"""

from __future__ import annotations

import numpy as np

from ...device import MeshDevice
from ...distribution import from_numpy, to_numpy
from ...errors import ValidationError
from ...tensor import Tensor
from ...types import DataType, Layout
from ..module import Module
from ._mesh import group_size, mesh_of, resolve_axes, shard_mapper
from ._wrapper import ParallelWrapper

__all__ = ["DistributedDataParallel", "shard_batch"]


class DistributedDataParallel(ParallelWrapper):
    """``DistributedDataParallel(module, mesh_device, cluster_axis=None)``: data parallelism over the mesh
    (``cluster_axis=None``) or over one axis of a 2-D mesh.

    * ``forward`` runs the wrapped module on each device's slice of the batch (see :func:`shard_batch`).
    * ``backward`` averages the gradients over the group with bucketed all-reduces (``bucket_cap_mb`` MiB per
      bucket) as soon as each bucket's gradients are complete.
    * ``reduce_loss(loss)`` gives the loss averaged over the group (what to print); ``no_sync()`` accumulates
      gradients without reducing; ``check_parameters=True`` verifies before each forward that every parameter is
      still identical on all its replicas (a debug check).
    * A :class:`TensorParallel` module keeps its tensor-parallel axis; ``cluster_axis`` must be the other one.
    """

    def __init__(
        self,
        module: Module,
        mesh_device: MeshDevice,
        cluster_axis: int | None = None,
        *,
        bucket_cap_mb: float = 25.0,
        check_parameters: bool = False,
    ) -> None:
        owner = "ttnn.nn.parallel.DistributedDataParallel"
        mesh = mesh_of(owner, mesh_device)
        axes = resolve_axes(owner, mesh, cluster_axis)
        inner = getattr(module, "reducer", None)
        if isinstance(module, ParallelWrapper):
            if isinstance(module, DistributedDataParallel):
                raise ValidationError(f"{owner}: module: is already a DistributedDataParallel")
            inner.remove()  # one reducer for both kinds of parallelism
        try:
            super().__init__(owner, module, mesh, axes, bucket_cap_mb, check_parameters)
        except Exception:
            if isinstance(module, ParallelWrapper):
                module.reducer = type(inner)(
                    inner.owner, module.module, inner.mesh, inner.data_axes, inner.bucket_cap_mb
                )
            raise
        self.cluster_axis = cluster_axis


def shard_batch(
    x,
    mesh_device: MeshDevice,
    cluster_axis: int | None = None,
    *,
    dtype: DataType | None = None,
    layout: Layout | None = None,
) -> Tensor:
    """Split a batch along dim 0 over the data-parallel group (replicated along the other mesh axis).

    ``x``: a numpy array (or anything ``np.asarray`` takes, a torch tensor, a host or replicated ttnn tensor).
    Integer data becomes uint32 ROW_MAJOR (token ids), floats float32 TILE, unless ``dtype``/``layout`` say
    otherwise. The batch must divide by the group size.
    """
    owner = "ttnn.nn.parallel.shard_batch"
    mesh = mesh_of(owner, mesh_device)
    axes = resolve_axes(owner, mesh, cluster_axis)
    if isinstance(x, Tensor):
        array = to_numpy(x)
    elif hasattr(x, "detach") and hasattr(x, "numpy"):  # torch
        array = x.detach().to("cpu").numpy()
    else:
        array = np.asarray(x)
    if array.ndim == 0:
        raise ValidationError(f"{owner}: x: expected a batch with a leading batch dim, got a scalar")
    size = group_size(mesh, axes)
    if array.shape[0] % size:
        raise ValidationError(
            f"{owner}: x: expected a batch (dim 0) divisible by the {size} devices of the data-parallel group, "
            f"got batch {array.shape[0]} (shape {list(array.shape)})"
        )
    integer = array.dtype.kind in "iub"
    if dtype is None:
        dtype = DataType.UINT32 if integer else DataType.FLOAT32
    if layout is None:
        layout = Layout.ROW_MAJOR if integer else Layout.TILE
    if dtype is DataType.UINT32:
        array = array.astype(np.uint32)
    mapper = shard_mapper(mesh, axes, 0) if axes else None
    return from_numpy(array, dtype=dtype, layout=layout, device=mesh, mesh_mapper=mapper)
