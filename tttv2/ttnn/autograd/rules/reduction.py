"""Backward rules of the reductions (sum, mean, max, min, var, std, topk values) and of ``embedding``.

The upstream gradient is first given back the reduced dims (as size 1) and then broadcast over them:

* sum: ``dx = g · scalar``; mean: ``dx = g · scalar / N``;
* max / min: the gradient goes to the extreme elements, split evenly among ties (torch ``amax``/``amin``);
* var: ``dx = g · scalar · 2(x − μ) / (N − ddof)``; std: ``dx = g · scalar · (x − μ) / ((N − ddof) · σ)``;
* topk: the values' gradient is scattered to the positions the indices name.
"""

from __future__ import annotations

import numpy as np

from ...ops.reduction import _dims
from ..engine import register_backward
from ._util import arrays, grad_like, per_device


def _kept_shape(shape, dims) -> tuple[int, ...]:
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _reduction_rule(kind: str):
    def rule(ctx, grad):
        x = ctx.args["input_tensor"]
        shape = tuple(x.shape)
        dims = _dims(ctx.op_name, ctx.args["dim"], len(shape))
        kept = _kept_shape(shape, dims)
        scalar = np.float32(ctx.args.get("scalar", 1.0))
        count = int(np.prod([shape[d] for d in dims])) if dims else 1
        ddof = 1 if ctx.args.get("correction", True) and count > 1 else 0

        def one(g, xs):
            g = g.reshape(kept) * scalar
            if kind == "sum":
                return np.broadcast_to(g, shape)
            if kind == "mean":
                return np.broadcast_to(g / np.float32(count), shape)
            if kind in ("max", "min"):
                extreme = (
                    xs.max(axis=dims, keepdims=True) if kind == "max" else xs.min(axis=dims, keepdims=True)
                )
                hit = (xs == extreme).astype(np.float32)
                return g * hit / hit.sum(axis=dims, keepdims=True)
            centered = xs - xs.mean(axis=dims, keepdims=True, dtype=np.float64).astype(np.float32)
            if kind == "var":
                return g * np.float32(2.0 / max(count - ddof, 1)) * centered
            sigma = np.sqrt(
                (centered.astype(np.float64) ** 2).sum(axis=dims, keepdims=True) / max(count - ddof, 1)
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                return g * (centered / (np.float32(max(count - ddof, 1)) * sigma.astype(np.float32)))

        return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad), arrays(x)))}

    return rule


for _kind in ("sum", "mean", "max", "min", "var", "std"):
    register_backward(f"ttnn.{_kind}")(_reduction_rule(_kind))


@register_backward("ttnn.topk")
def topk_backward(ctx, grads):
    x = ctx.args["input_tensor"]
    g_values = grads[0]  # the indices carry no gradient (integer output)
    indices = ctx.output[1]
    axis = int(ctx.args["dim"]) % len(x.shape)
    shape = tuple(x.shape)

    def one(g, idx):
        full = np.zeros(shape, dtype=np.float32)
        np.put_along_axis(full, idx.astype(np.int64), g, axis=axis)
        return full

    return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(g_values), indices.shards()))}


@register_backward("ttnn.embedding")
def embedding_backward(ctx, grad):
    """The table's gradient is the upstream rows scatter-added at their token ids (rows of ``padding_idx``
    get nothing, as their output was forced to zero); the ids get no gradient."""
    if not ctx.needs_grad("weight"):
        return {}
    ids, table = ctx.args["input_tensor"], ctx.args["weight"]
    vocab, dim = table.shape[-2], table.shape[-1]
    padding_idx = ctx.args.get("padding_idx")
    wshape = tuple(table.shape)

    def one(g, id_shard):
        tok = np.asarray(id_shard).astype(np.int64).reshape(-1)
        rows = g.reshape(-1, dim)
        if padding_idx is not None:
            keep = tok != padding_idx
            tok, rows = tok[keep], rows[keep]
        out = np.zeros((vocab, dim), dtype=np.float32)
        np.add.at(out, tok, rows)
        return out.reshape(wshape)

    return {"weight": grad_like(ctx, table, per_device(one, arrays(grad), ids.shards()))}
