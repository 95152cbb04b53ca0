"""Deprecated ``ttml.distributed``: use ``ttnn.nn.parallel`` (``DistributedDataParallel``, ``TensorParallel``, …)."""

from __future__ import annotations

from tttv2 import ttnn

from ._deprecation import deprecated
from .autograd import _value
from .models._shim import ModelShim

__all__ = ["DistributedDataParallel", "sync_gradients"]


def _module(model):
    return model.module if isinstance(model, ModelShim) else _value(model)


def _mean_over_axes(parameters, cluster_axes) -> None:
    """TTML's gradient synchronisation: an all-reduce mean over each listed mesh axis (None: the whole mesh)."""
    params = [_value(p) for p in parameters]
    for axis in [None] if cluster_axes is None else list(cluster_axes):
        ttnn.nn.utils.all_reduce_gradients_(params, average=True, cluster_axis=axis)


def sync_gradients(model, runtime=None, cluster_axes=None) -> None:
    """Average the gradients of ``model`` over ``cluster_axes`` (TTML inferred them from its runtime; here None
    means the whole mesh)."""
    deprecated(
        "ttml.distributed.sync_gradients",
        "ttnn.nn.parallel.DistributedDataParallel (gradients reduced during backward) or "
        "ttnn.nn.utils.all_reduce_gradients_(model.parameters(), cluster_axis=...)",
    )
    _mean_over_axes(_module(model).parameters(), cluster_axes)


class DistributedDataParallel:
    """TTML's ``DistributedDataParallel(model, sync_axes)``: the gradients are averaged over ``sync_axes`` during
    backward by a ``ttnn.nn.parallel.DistributedDataParallel`` built around the model; calls go to the model."""

    def __init__(self, module, sync_axes=None) -> None:
        deprecated(
            "ttml.distributed.DistributedDataParallel(model, sync_axes)",
            "ttnn.nn.parallel.DistributedDataParallel(model, mesh_device, cluster_axis=...)",
        )
        inner = _module(module)
        mesh = next(inner.parameters()).device()
        self._model = module
        self._ddp = ttnn.nn.parallel.DistributedDataParallel(inner, mesh, _cluster_axis(mesh, sync_axes))

    def __call__(self, *args, **kwargs):
        return self._model(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._model, name)


def _cluster_axis(mesh, sync_axes):
    """TTML's list of mesh axes as the ``cluster_axis`` of ``ttnn.nn.parallel`` (None: every axis that has more
    than one device)."""
    if sync_axes is None:
        return None
    big = {a for a, size in enumerate(mesh.shape) if size > 1}
    axes = set(sync_axes) & big
    if not axes:
        raise ValueError(
            f"ttml.distributed.DistributedDataParallel: sync_axes {list(sync_axes)} hold one device each on the "
            f"{'x'.join(map(str, mesh.shape))} mesh: there is nothing to synchronise"
        )
    return None if axes == big else axes.pop()
