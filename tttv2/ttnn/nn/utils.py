"""Training utilities: gradient-norm clipping and reading scalar results."""

from __future__ import annotations

import math

import numpy as np

from ... import ttnn
from .._remote import full_shards
from ..autograd import no_grad
from ..errors import ValidationError
from ..placement import PlacementReplicate
from ..tensor import Tensor

__all__ = ["all_reduce_gradients_", "clip_grad_norm_", "grad_norm", "item"]


def _unique_shards(t: Tensor) -> list[np.ndarray]:
    """The shards that together hold ``t`` once: along a mesh axis where ``t`` is replicated only the first
    device's copy counts, along an axis where it is sharded every device's piece does."""
    shards = t.shards("ttnn.nn.utils.clip_grad_norm_")
    top = t.tensor_topology()
    if len(shards) == 1 or top is None:
        return list(shards[:1])
    dims = tuple(top.distribution_shape)
    replicated = [isinstance(p, PlacementReplicate) for p in top.placements()]
    out = []
    for index, shard in enumerate(shards):
        coord = np.unravel_index(index, dims)
        if all(c == 0 for c, rep in zip(coord, replicated) if rep):
            out.append(shard)
    return out


def _as_list(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    if isinstance(parameters, dict):
        parameters = parameters.values()
    out = []
    for p in parameters:
        p = p[1] if isinstance(p, tuple) else p
        if not isinstance(p, Tensor):
            raise ValidationError(
                f"ttnn.nn.utils.clip_grad_norm_: expected ttnn tensors, got {type(p).__name__}"
            )
        out.append(p)
    return out


def grad_norm(parameters, norm_type: float = 2.0) -> float:
    """The ``norm_type`` norm of all gradients together (each device computes the norm of its local shards;
    the local results are combined so that a replicated gradient counts once and a sharded one in full)."""
    norm_type = float(norm_type)
    if not (norm_type > 0 or math.isinf(norm_type)):
        raise ValidationError(
            f"ttnn.nn.utils.clip_grad_norm_: norm_type: expected > 0 or inf, got {norm_type}"
        )
    total = 0.0
    for p in _as_list(parameters):
        if p.grad is None:
            continue
        for shard in _unique_shards(p.grad):
            a = np.abs(np.asarray(shard, dtype=np.float64))
            if math.isinf(norm_type):
                total = max(total, float(a.max(initial=0.0)))
            else:
                total += float(np.sum(a**norm_type))
    return total if math.isinf(norm_type) else total ** (1.0 / norm_type)


def clip_grad_norm_(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> float:
    """Scale all gradients in place (``p.grad`` is replaced by the scaled tensor) so that their joint norm is
    at most ``max_norm``; returns the norm before clipping (a float). Same semantics as
    ``torch.nn.utils.clip_grad_norm_`` (coefficient ``max_norm / (norm + 1e-6)``, applied when below 1)."""
    params = _as_list(parameters)
    total = grad_norm(params, norm_type)
    if not math.isfinite(total) and error_if_nonfinite:
        raise ValidationError(
            f"ttnn.nn.utils.clip_grad_norm_: the total gradient norm is {total}; pass error_if_nonfinite=False to clip anyway"
        )
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0:
        with no_grad():
            for p in params:
                if p.grad is not None:
                    p.grad = ttnn.multiply(p.grad, coef)
    return total


def all_reduce_gradients_(parameters, *, average: bool = True, cluster_axis: int | None = None) -> None:
    """Data parallelism: replace each gradient by its sum (``average``: mean) over the devices of the mesh, or of
    one mesh axis, with ``ttnn.all_reduce`` — after ``backward`` on a batch split over devices, so that every
    replica of a parameter takes the same optimizer step."""
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is None or p.grad.device() is None:
                continue
            mesh = p.grad.device()
            count = mesh.get_num_devices() if cluster_axis is None else tuple(mesh.shape)[cluster_axis]
            if count == 1:
                continue
            g = ttnn.all_reduce(p.grad, cluster_axis=cluster_axis)
            p.grad = ttnn.multiply(g, 1.0 / count) if average else g


def item(t: Tensor) -> float:
    """The value of a one-element tensor as a float (read from the first device)."""
    if not isinstance(t, Tensor):
        raise ValidationError(f"ttnn.nn.utils.item: expected a ttnn.Tensor, got {type(t).__name__}")
    shard = np.asarray(full_shards(t, "ttnn.nn.utils.item")[0])
    if shard.size != 1:
        raise ValidationError(f"ttnn.nn.utils.item: expected a one-element tensor, got shape {list(t.shape)}")
    return float(shard.reshape(-1)[0])
