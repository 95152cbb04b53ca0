"""Backward rules of the data-movement ops: layout / dtype / memory moves pass the gradient through (in the
input's layout, memory config and gradient dtype); shape ops apply their inverse to the gradient (reshape back,
inverse permutation, scatter of a slice into zeros, split of a concat, sum over repeats)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ..engine import register_backward
from ._util import arrays, grad_like, per_device


def _passthrough(arg: str):
    def rule(ctx, grad):
        return {arg: grad_like(ctx, ctx.args[arg], arrays(grad))}

    return rule


for _op, _arg in (
    ("ttnn.to_layout", "tensor"),
    ("ttnn.tilize", "input_tensor"),
    ("ttnn.untilize", "input_tensor"),
    ("ttnn.typecast", "input_tensor"),
    ("ttnn.to_memory_config", "tensor"),
    ("ttnn.interleaved_to_sharded", "input_tensor"),
    ("ttnn.sharded_to_interleaved", "input_tensor"),
    ("ttnn.reshard", "input_tensor"),
    ("ttnn.clone", "input_tensor"),
):
    register_backward(_op)(_passthrough(_arg))


def _reshape_back(ctx, grad):
    x = ctx.args["input_tensor"]
    shape = tuple(x.shape)
    return {"input_tensor": grad_like(ctx, x, per_device(lambda g: g.reshape(shape), arrays(grad)))}


for _op in ("ttnn.view", "ttnn.squeeze", "ttnn.unsqueeze", "ttnn.unsqueeze_to_4D"):
    register_backward(_op)(_reshape_back)


@register_backward("ttnn.reshape")
def reshape_backward(ctx, grad):
    """A plain reshape is undone by reshaping back. A tile-padding view (``padded_shape=`` or a volume change)
    reinterpreted the padded buffer: the gradient is laid into the output's padded buffer (zeros in the
    padding), read back with the input's padded shape, and cut to the input's logical shape — rows that moved
    into the padding get no gradient."""
    x = ctx.args["input_tensor"]
    out = ctx.output
    in_shape = tuple(x.shape)
    if out._padded_shape is None and math.prod(out.shape) == math.prod(in_shape):
        return _reshape_back(ctx, grad)
    out_padded = tuple(out.padded_shape)
    in_padded = tuple(x.padded_shape)

    def one(g):
        full = np.zeros(out_padded, dtype=np.float32)
        full[tuple(builtins.slice(0, d) for d in g.shape)] = g
        return full.reshape(in_padded)[tuple(builtins.slice(0, d) for d in in_shape)]

    return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad)))}


@register_backward("ttnn.permute")
def permute_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    rank = len(x.shape)
    order = [int(d) % rank for d in ctx.args["dims"]]
    inverse = list(np.argsort(order))
    return {"input_tensor": grad_like(ctx, x, per_device(lambda g: np.transpose(g, inverse), arrays(grad)))}


@register_backward("ttnn.transpose")
def transpose_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    d1, d2 = ctx.args["dim1"], ctx.args["dim2"]
    return {"input_tensor": grad_like(ctx, x, per_device(lambda g: np.swapaxes(g, d1, d2), arrays(grad)))}


def _slice_index(shape, starts, ends, steps) -> tuple:
    """The numpy index ``ttnn.slice`` reads (negative starts/ends count from the end, ends clamp)."""
    index = []
    for s, e, st, size in zip(starts, ends, steps, shape):
        s = s + size if s < 0 else s
        e = e + size if e < 0 else e
        index.append(builtins.slice(min(max(s, 0), size), min(max(e, 0), size), st))
    return tuple(index)


def _scatter_into_zeros(shape, index):
    def one(g):
        full = np.zeros(shape, dtype=np.float32)
        full[index] = g
        return full

    return one


@register_backward("ttnn.slice")
def slice_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    shape = tuple(x.shape)
    steps = ctx.args["slice_step"]
    steps = [1] * len(shape) if steps is None else [int(v) for v in np.atleast_1d(steps)]
    starts = [int(v) for v in np.atleast_1d(ctx.args["slice_start"])]
    ends = [int(v) for v in np.atleast_1d(ctx.args["slice_end"])]
    index = _slice_index(shape, starts, ends, steps)
    return {"input_tensor": grad_like(ctx, x, per_device(_scatter_into_zeros(shape, index), arrays(grad)))}


def _pieces_backward(ctx, grads, sizes: list[int], dim: int):
    """Concatenate the pieces' gradients (zeros for pieces that got none) along ``dim``."""
    x = ctx.args["input_tensor"]
    n = len(x.shards())
    columns = []
    for size, g in zip(sizes, grads):
        if g is None:
            shape = list(x.shape)
            shape[dim] = size
            zero = np.zeros(shape, dtype=np.float32)
            columns.append([zero] * n)
        else:
            columns.append(arrays(g))
    shards = per_device(lambda *parts: np.concatenate(parts, axis=dim), *columns)
    return {"input_tensor": grad_like(ctx, x, shards)}


@register_backward("ttnn.split")
def split_backward(ctx, grads):
    x = ctx.args["input_tensor"]
    shape = list(x.shape)
    dim = int(ctx.args["dim"]) % len(shape)
    split_size = ctx.args["split_size"]
    if isinstance(split_size, (list, tuple)):
        sizes = [int(s) for s in split_size]
    else:
        size = int(np.atleast_1d(split_size)[0])
        sizes = [min(size, shape[dim] - s) for s in range(0, shape[dim], size)]
    return _pieces_backward(ctx, grads, sizes, dim)


@register_backward("ttnn.chunk")
def chunk_backward(ctx, grads):
    x = ctx.args["input_tensor"]
    shape = list(x.shape)
    dim = int(ctx.args["dim"]) % len(shape)
    size = -(-shape[dim] // int(np.atleast_1d(ctx.args["chunks"])[0]))
    sizes = [min(size, shape[dim] - s) for s in range(0, shape[dim], size)]
    return _pieces_backward(ctx, grads, sizes, dim)


@register_backward("ttnn.concat")
def concat_backward(ctx, grad):
    tensors = ctx.args["tensors"]
    dim = int(ctx.args["dim"]) % len(tensors[0].shape)
    bounds = np.cumsum([t.shape[dim] for t in tensors])[:-1]
    parts = per_device(lambda g: np.split(g, bounds, axis=dim), arrays(grad))
    wanted = ctx.needs["tensors"]
    grads = [grad_like(ctx, t, [p[i] for p in parts]) if wanted[i] else None for i, t in enumerate(tensors)]
    return {"tensors": grads}


def _pad_start(ctx) -> list[int]:
    """Where the input sits in the padded output, for both call forms of ``ttnn.pad``."""
    x = ctx.args["input_tensor"]
    rank = len(x.shape)
    padding = ctx.args["padding"]
    output_padded_shape = ctx.args["output_padded_shape"]
    shape_form = output_padded_shape is not None or (
        isinstance(padding, (list, tuple)) and len(padding) > 0 and isinstance(padding[0], (int, np.integer))
    )
    if shape_form:
        start = ctx.args["input_tensor_start"] if output_padded_shape is not None else ctx.args["value"]
        return [0] * rank if start is None else [int(v) for v in start]
    pairs = [list(np.atleast_1d(p)) for p in padding]
    return [0] * (rank - len(pairs)) + [int(p[0]) for p in pairs]


@register_backward("ttnn.pad")
def pad_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    start = _pad_start(ctx)
    index = tuple(builtins.slice(s, s + d) for s, d in zip(start, x.shape))
    return {"input_tensor": grad_like(ctx, x, per_device(lambda g: g[index], arrays(grad)))}


@register_backward("ttnn.repeat")
def repeat_backward(ctx, grad):
    """Sum the gradient over the copies: view each dim as (repeats, size) and sum the repeats axes."""
    x = ctx.args["input_tensor"]
    reps = [int(r) for r in np.atleast_1d(ctx.args["repeat_dims"])]
    shape = [1] * (len(reps) - len(x.shape)) + list(x.shape)
    split = [v for pair in zip(reps, shape) for v in pair]
    axes = tuple(range(0, 2 * len(reps), 2))
    target = tuple(x.shape)

    def one(g):
        return g.reshape(split).sum(axis=axes, dtype=np.float32).reshape(target)

    return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad)))}


@register_backward("ttnn.repeat_interleave")
def repeat_interleave_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    n = int(np.atleast_1d(ctx.args["repeats"])[0])
    shape = list(x.shape)
    d = int(ctx.args["dim"]) % len(shape)

    def one(g):
        return g.reshape([*shape[:d], shape[d], n, *shape[d + 1 :]]).sum(axis=d + 1, dtype=np.float32)

    return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad)))}
