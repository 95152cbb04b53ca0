"""Backward rules of the collectives: each is the adjoint of the forward within every device group.

* all-gather (device k's shard lands in slice k of every device's output): device k's gradient is the sum over
  the group of slice k of every device's upstream gradient — a reduce-scatter of the gradients;
* reduce-scatter (device k keeps slice k of the group sum): every device's gradient is the concatenation of
  the group's upstream gradients — an all-gather;
* all-reduce: an all-reduce of the gradients;
* ``fast_reduce_nc`` (a local sum over outer dims): the gradient broadcast back over those dims;
* ``all_gather_matmul_async``: the matmul's input gradient is added to the gathered output's own gradient,
  then reduce-scattered back to the input.
"""

from __future__ import annotations

import numpy as np

from ...device import MeshDevice
from ...ops import ccl
from ...types import ReduceType
from ..engine import register_backward
from ._util import arrays, grad_like, per_device
from .matmul import fused_activation, matmul_grads


def _unset(value):
    return None if value is ccl._UNSET else value


def _all_gather_axis_dim(ctx) -> tuple[int | None, int]:
    """(cluster_axis, dim) of an all_gather / all_gather_async call, for every overload."""
    args = ctx.args
    if ctx.op_name == "ttnn.all_gather":
        return args["cluster_axis"], args["dim"]
    extra = args.get("args", ())
    values = {
        k: args[k]
        for k in (
            "persistent_output_buffer",
            "dim",
            "multi_device_global_semaphore",
            "cluster_axis",
            "mesh_device",
        )
    }
    values["topology"] = args["topology"]
    if extra and (extra[0] is None or hasattr(extra[0], "shards")):
        names: tuple[str, ...] = ("persistent_output_buffer", "dim", "multi_device_global_semaphore")
    elif len(extra) >= 3 and isinstance(extra[2], MeshDevice):
        names = ("dim", "cluster_axis", "mesh_device", "topology", "multi_device_global_semaphore")
    else:
        names = ("dim", "multi_device_global_semaphore")
    values = ccl._bind(ctx.op_name, extra, names, values)
    return _unset(values["cluster_axis"]), values["dim"]


def _reduce_scatter_axis_dim(ctx) -> tuple[int | None, int]:
    args = ctx.args
    if ctx.op_name == "ttnn.experimental.reduce_scatter_minimal_async":
        return args["cluster_axis"], args["dim"]
    extra = args.get("args", ())
    values = {
        "math_op": args["math_op"],
        "cluster_axis": args["cluster_axis"],
        "mesh_device": args["mesh_device"],
    }
    names = (
        ("math_op",)
        if extra and isinstance(extra[0], ReduceType)
        else ("cluster_axis", "mesh_device", "math_op")
    )
    values = ccl._bind(ctx.op_name, extra, names, values, leading=("input_tensor", "dim"))
    dim = args["dim"]
    return _unset(values["cluster_axis"]), args["scatter_dim"] if dim is ccl._UNSET else dim


def _groups(x, axis):
    return ccl._groups(x.device(), axis)


def _all_gather_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    axis, dim = _all_gather_axis_dim(ctx)
    dim = int(dim) % len(x.shape)
    return {"input_tensor": grad_like(ctx, x, ccl._scattered(arrays(grad), _groups(x, axis), dim))}


def _reduce_scatter_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    axis, dim = _reduce_scatter_axis_dim(ctx)
    dim = int(dim) % len(x.shape)
    return {"input_tensor": grad_like(ctx, x, ccl._gathered(arrays(grad), _groups(x, axis), dim))}


register_backward("ttnn.all_gather")(_all_gather_backward)
register_backward("ttnn.experimental.all_gather_async")(_all_gather_backward)
register_backward("ttnn.reduce_scatter")(_reduce_scatter_backward)
register_backward("ttnn.experimental.reduce_scatter_minimal_async")(_reduce_scatter_backward)


@register_backward("ttnn.all_reduce")
def all_reduce_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    return {
        "input_tensor": grad_like(ctx, x, ccl._reduced(arrays(grad), _groups(x, ctx.args["cluster_axis"])))
    }


@register_backward("ttnn.experimental.fast_reduce_nc")
def fast_reduce_nc_backward(ctx, grad):
    x = ctx.args["input"]
    shape = tuple(x.shape)
    return {"input": grad_like(ctx, x, per_device(lambda g: np.broadcast_to(g, shape), arrays(grad)))}


@register_backward("ttnn.experimental.all_gather_matmul_async")
def all_gather_matmul_async_backward(ctx, grads):
    g_gathered, g_out = grads
    x, w, bias = ctx.args["input_tensor"], ctx.args["weight_tensor"], ctx.args["bias"]
    gathered = ctx.output[0]
    need_x = ctx.needs_grad("input_tensor")
    need = (need_x, ctx.needs_grad("weight_tensor"), ctx.needs_grad("bias"))
    n = len(x.shards())
    results = [(None, None, None)] * n
    if g_out is not None:
        act = fused_activation(ctx)
        ta, tb = bool(ctx.args["transpose_a"]), bool(ctx.args["transpose_b"])

        def one(g, a, b, bs):
            return matmul_grads(a, b, g, transpose_a=ta, transpose_b=tb, bias=bs, activation=act, need=need)

        results = per_device(one, arrays(g_out), arrays(gathered), arrays(w), arrays(bias))
    out = {}
    if need_x:
        total = [r[0] for r in results]
        if g_gathered is not None:
            extra = arrays(g_gathered)
            total = [e if t is None else t + e for t, e in zip(total, extra)]
        if all(t is not None for t in total):
            out["input_tensor"] = grad_like(ctx, x, ccl._scattered(total, _groups(x, None), 3))
    if need[1] and g_out is not None:
        out["weight_tensor"] = grad_like(ctx, w, [r[1] for r in results])
    if need[2] and g_out is not None:
        out["bias"] = grad_like(ctx, bias, [r[2] for r in results])
    return out
