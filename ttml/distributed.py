"""Deprecated ``ttml.distributed``: use ``ttnn.nn.parallel`` (``DistributedDataParallel``, ``TensorParallel``, …)."""

from __future__ import annotations

from tttv2 import ttnn

from ._deprecation import deprecated
from .autograd import _value
from .models._shim import ModelShim

__all__ = [
    "ColwiseParallel",
    "DistributedDataParallel",
    "RowwiseParallel",
    "parallelize_module",
    "sync_gradients",
]


def _module(model):
    return model.module if isinstance(model, ModelShim) else _value(model)


def _mean_over_axes(parameters, cluster_axes) -> None:
    """TTML's gradient synchronisation: an all-reduce mean over each listed mesh axis (None: the whole mesh),
    then, when several ranks run (``tttv2-run``, an initialised distributed context), the mean over the ranks
    (``tttv2.distributed.all_reduce_gradients_``) of the parameters on each rank's own mesh: TTML's data-parallel
    group spans the hosts. Parameters on one mesh spread over the ranks are complete after the axes."""
    params = [_value(p) for p in parameters]
    for axis in [None] if cluster_axes is None else list(cluster_axes):
        ttnn.nn.utils.all_reduce_gradients_(params, average=True, cluster_axis=axis)
    # a mesh spread over the ranks already holds every rank's devices: the axes above covered them
    own = [p for p in params if p.device() is None or not p.device().spans_ranks()]
    if own and ttnn.distributed_context_is_initialized() and int(ttnn.distributed_context_get_size()) > 1:
        from tttv2.distributed import all_reduce_gradients_

        all_reduce_gradients_(own)


def sync_gradients(model, runtime=None, cluster_axes=None) -> None:
    """Average the gradients of ``model`` over ``cluster_axes`` (TTML inferred them from its runtime; here None
    means the whole mesh)."""
    deprecated(
        "ttml.distributed.sync_gradients",
        "ttnn.nn.parallel.DistributedDataParallel (gradients reduced during backward) or "
        "ttnn.nn.utils.all_reduce_gradients_(model.parameters(), cluster_axis=...)",
    )
    _mean_over_axes(_module(model).parameters(), cluster_axes)


class _Delegate:
    """A model that keeps a ``ttnn.nn.parallel`` wrapper alive: calls and attributes go to the model."""

    def __init__(self, model, wrapper) -> None:
        self._model = model
        self._wrapper = wrapper

    def __call__(self, *args, **kwargs):
        return self._model(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._model, name)


class DistributedDataParallel(_Delegate):
    """TTML's ``DistributedDataParallel(model, sync_axes)``: the gradients are averaged over ``sync_axes`` during
    backward by a ``ttnn.nn.parallel.DistributedDataParallel`` built around the model; calls go to the model."""

    def __init__(self, module, sync_axes=None) -> None:
        deprecated(
            "ttml.distributed.DistributedDataParallel(model, sync_axes)",
            "ttnn.nn.parallel.DistributedDataParallel(model, mesh_device, cluster_axis=...)",
        )
        inner = _module(module)
        mesh = next(inner.parameters()).device()
        super().__init__(
            module, ttnn.nn.parallel.DistributedDataParallel(inner, mesh, _cluster_axis(mesh, sync_axes))
        )


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


class ColwiseParallel:
    """TTML's plan entry for ``parallelize_module``: the matched ``LinearLayer`` becomes a
    ``ttnn.nn.parallel.ColumnParallelLinear`` (output features split; ``gather_output`` all-gathers them)."""

    def __init__(self, *, gather_output: bool = False) -> None:
        self.gather_output = bool(gather_output)

    def convert(self, linear, cluster_axis):
        from .modules import ColumnParallelLinear

        dense = ttnn.nn.parallel.ColumnParallelLinear.from_dense(
            linear, gather_output=self.gather_output, cluster_axis=cluster_axis
        )
        return ColumnParallelLinear.around(dense)


class RowwiseParallel:
    """TTML's plan entry for ``parallelize_module``: the matched ``LinearLayer`` becomes a
    ``ttnn.nn.parallel.RowParallelLinear`` whose input is the split output of a column-parallel layer."""

    def convert(self, linear, cluster_axis):
        from .modules import RowParallelLinear

        dense = ttnn.nn.parallel.RowParallelLinear.from_dense(
            linear, input_is_parallel=True, cluster_axis=cluster_axis
        )
        return RowParallelLinear.around(dense)


def parallelize_module(module, mesh_device, plan: dict, tp_axis: int = 0):
    """TTML's ``parallelize_module(model, mesh, {regex: ColwiseParallel() | RowwiseParallel()}, tp_axis)``: each
    ``ttml.modules.LinearLayer`` whose dotted name fully matches a pattern is replaced, in place and with the
    same weights, by its ``ttnn.nn.parallel`` layer on mesh axis ``tp_axis``. Returns a
    ``ttnn.nn.parallel.TensorParallel`` around the model, which owns the gradient reduction that makes the
    gradients those of the unsharded model (calls and attributes go to the model). Build the optimizer
    afterwards: the split parameters are new tensors."""
    import re

    from .modules import AbstractModuleBase, LinearLayer, tp_cluster_axis

    owner = "ttml.distributed.parallelize_module"
    deprecated(
        owner, "ttnn.nn.parallel.TensorParallel(model, mesh) or ttnn.nn.parallel.ColumnParallelLinear / ..."
    )
    if not isinstance(module, AbstractModuleBase):
        raise TypeError(
            f"{owner}: module: expected a ttml.modules.AbstractModuleBase, got {type(module).__name__}"
        )
    for pattern, style in plan.items():
        if not isinstance(style, (ColwiseParallel, RowwiseParallel)):
            raise TypeError(
                f"{owner}: plan[{pattern!r}]: expected ColwiseParallel() or RowwiseParallel(), got {style!r}"
            )
    cluster_axis = tp_cluster_axis(owner, mesh_device, tp_axis)
    matched = set()
    for parent_name, parent in list(module.named_modules()):
        for name, child in list(parent.named_children()):
            full = f"{parent_name}.{name}" if parent_name else name
            styles = [(p, s) for p, s in plan.items() if re.fullmatch(p, full)]
            if not styles:
                continue
            if not isinstance(child, LinearLayer):
                raise TypeError(
                    f"{owner}: plan[{styles[0][0]!r}]: matches {full!r}, a {type(child).__name__}; expected "
                    "ttml.modules.LinearLayer"
                )
            parent.add_module(name, styles[0][1].convert(child.layer, cluster_axis))
            matched.update(p for p, _ in styles)
    unused = [p for p in plan if p not in matched]
    if unused:
        raise ValueError(f"{owner}: plan: patterns {unused} match no LinearLayer of the model")
    return _Delegate(module, ttnn.nn.parallel.TensorParallel(module, mesh_device, cluster_axis))
