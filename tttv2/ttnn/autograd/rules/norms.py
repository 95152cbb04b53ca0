"""Backward rules of softmax, rms_norm, layer_norm and the distributed (pre/post all-gather) norms.

With ``v = x + residual`` normalised over the last dim (C values), ``x̂`` the normalised rows, ``r`` the
reciprocal RMS / standard deviation and ``gy = dy · γ``:

* rms_norm: ``dv = r · (gy − x̂ · mean(gy · x̂))``; layer_norm: ``dv = r · (gy − mean(gy) − x̂ · mean(gy · x̂))``;
  ``dγ = Σ_rows dy · x̂``, ``dβ = Σ_rows dy``; ``dx = d residual = dv``;
* softmax: ``dx = y ⊙ (g − Σ g ⊙ y)`` along the softmax dim (y recomputed in float32);
* ``*_pre_all_gather`` (Σv² in column 0, Σv in column 32): ``dv = 2v · dS2 + dS1``;
* ``*_post_all_gather``: the statistics tiles are summed over every column and device, so every element of a
  statistic's tile gets the same gradient: ``dS2 = dvar / N``, ``dS1 = dμ / N`` (``N`` = devices · local padded
  width) with ``dvar = −½ r³ Σ gy (v − μ)`` and ``dμ = −r Σ gy − 2μ · dvar`` (μ = 0 for RMS). Chained through the
  all-gather (whose adjoint is a reduce-scatter) this gives the gradient of the full distributed norm.

Weights may be given in every form the forward accepts; their gradient has the weight's own shape (the used row
or the flattened padded vector, zeros elsewhere).
"""

from __future__ import annotations

import math

import numpy as np

from ...types import TILE_SIZE
from ..engine import register_backward
from ._util import arrays, grad_like, per_device


def _param_vector(w, width: int):
    """Per-device float32 [width] vectors of a gamma/beta tensor (as the forward reads them), or None."""
    if w is None:
        return None
    shape = list(w.shape)
    if shape[-1] == width:
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        return per_device(lambda s: s.reshape(rows, width)[0], arrays(w))
    return per_device(lambda s: s.reshape(-1)[:width], arrays(w))


def _param_grad(ctx, name: str, width: int, vectors: list[np.ndarray]):
    """The gradient tensor of weight/bias ``name`` from per-device [width] gradient vectors."""
    w = ctx.args[name]
    shape = tuple(w.shape)
    if shape[-1] == width:
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1

        def place(vec):
            out = np.zeros((rows, width), dtype=np.float32)
            out[0] = vec
            return out.reshape(shape)
    else:  # the ROW_MAJOR [1, 1, padded width / 32, 32] storage form

        def place(vec):
            out = np.zeros(math.prod(shape), dtype=np.float32)
            out[:width] = vec
            return out.reshape(shape)

    return grad_like(ctx, w, per_device(place, vectors))


def _rows_sum(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1]).sum(axis=0, dtype=np.float32)


def _norm_rule(kind: str):
    def rule(ctx, grad):
        x = ctx.args["input_tensor"]
        res = ctx.args.get("residual_input_tensor")
        weight = ctx.args.get("weight")
        eps = np.float32(ctx.args["epsilon"])
        width = x.shape[-1]
        gammas = _param_vector(weight, width)

        def one(g, xs, rs, gamma):
            v = xs if rs is None else xs + rs
            if kind == "layer":
                centered = v - v.mean(axis=-1, keepdims=True, dtype=np.float32)
            else:
                centered = v
            r = 1.0 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True, dtype=np.float32) + eps)
            xhat = centered * r
            gy = g if gamma is None else g * gamma
            inner = (gy * xhat).mean(axis=-1, keepdims=True, dtype=np.float32)
            if kind == "layer":
                dv = r * (gy - gy.mean(axis=-1, keepdims=True, dtype=np.float32) - xhat * inner)
            else:
                dv = r * (gy - xhat * inner)
            return dv, _rows_sum(g * xhat), _rows_sum(g)

        dv, dgamma, dbeta = (
            list(c)
            for c in zip(
                *per_device(one, arrays(grad), arrays(x), arrays(res), gammas or [None] * len(grad.shards()))
            )
        )
        out = {}
        if ctx.needs_grad("input_tensor"):
            out["input_tensor"] = grad_like(ctx, x, dv)
        if ctx.needs_grad("residual_input_tensor"):
            out["residual_input_tensor"] = grad_like(ctx, res, dv)
        if ctx.needs_grad("weight"):
            out["weight"] = _param_grad(ctx, "weight", width, dgamma)
        if ctx.needs_grad("bias"):
            out["bias"] = _param_grad(ctx, "bias", width, dbeta)
        return out

    return rule


register_backward("ttnn.rms_norm")(_norm_rule("rms"))
register_backward("ttnn.layer_norm")(_norm_rule("layer"))


@register_backward("ttnn.softmax")
def softmax_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    axis = int(ctx.args["dim"]) % len(x.shape)

    def one(g, xs):
        shifted = xs - xs.max(axis=axis, keepdims=True)
        e = np.exp(shifted)
        y = e / e.sum(axis=axis, keepdims=True, dtype=np.float32)
        return y * (g - (g * y).sum(axis=axis, keepdims=True, dtype=np.float32))

    return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad), arrays(x)))}


# --- distributed norms -------------------------------------------------------------------------------------


def _pre_rule(kind: str):
    def rule(ctx, grad):
        x = ctx.args["input_tensor"]
        res = ctx.args.get("residual_input_tensor")

        def one(g, xs, rs):
            v = xs if rs is None else xs + rs
            dv = 2.0 * v * g[..., 0:1]
            if kind == "layer":
                dv = dv + g[..., TILE_SIZE : TILE_SIZE + 1]
            return dv

        dv = per_device(one, arrays(grad), arrays(x), arrays(res))
        out = {}
        if ctx.needs_grad("input_tensor"):
            out["input_tensor"] = grad_like(ctx, x, dv)
        if ctx.needs_grad("residual_input_tensor"):
            out["residual_input_tensor"] = grad_like(ctx, res, dv)
        return out

    return rule


register_backward("ttnn.rms_norm_pre_all_gather")(_pre_rule("rms"))
register_backward("ttnn.layer_norm_pre_all_gather")(_pre_rule("layer"))


def _fit_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """Pad with zero rows or cut to ``rows`` rows (the second-last dim), as the forward aligns the stats."""
    if a.shape[-2] == rows:
        return a
    if a.shape[-2] < rows:
        pad = [(0, 0)] * (a.ndim - 2) + [(0, rows - a.shape[-2]), (0, 0)]
        return np.pad(a, pad)
    return a[..., :rows, :]


def _post_rule(kind: str):
    tiles = 1 if kind == "rms" else 2

    def rule(ctx, grad):
        x, stats = ctx.args["input_tensor"], ctx.args["stats"]
        weight = ctx.args.get("weight")
        eps = np.float32(ctx.args["epsilon"])
        width = x.shape[-1]
        n_devices = stats.shape[-1] // (TILE_SIZE * tiles)
        total = np.float32(x.padded_shape[-1] * n_devices)
        stat_rows = stats.shape[-2]
        gammas = _param_vector(weight, width)

        def one(g, v, st, gamma):
            st = _fit_rows(st, v.shape[-2]).reshape(*v.shape[:-1], n_devices, tiles, TILE_SIZE)
            mean_sq = st[..., 0, :].sum(axis=(-1, -2), dtype=np.float32)[..., None] / total
            if kind == "layer":
                mean = st[..., 1, :].sum(axis=(-1, -2), dtype=np.float32)[..., None] / total
            else:
                mean = np.float32(0)
            r = 1.0 / np.sqrt(mean_sq - mean * mean + eps)
            centered = v - mean
            xhat = centered * r
            gy = g if gamma is None else g * gamma
            dvar = -0.5 * r**3 * (gy * centered).sum(axis=-1, keepdims=True, dtype=np.float32)
            dst = np.zeros((*v.shape[:-1], n_devices, tiles, TILE_SIZE), dtype=np.float32)
            dst[..., 0, :] = (dvar / total)[..., None]
            if kind == "layer":
                dmean = -r * gy.sum(axis=-1, keepdims=True, dtype=np.float32) - 2.0 * mean * dvar
                dst[..., 1, :] = (dmean / total)[..., None]
            dst = _fit_rows(dst.reshape(*v.shape[:-1], -1), stat_rows)
            return gy * r, dst, _rows_sum(g * xhat), _rows_sum(g)

        dx, dstats, dgamma, dbeta = (
            list(c)
            for c in zip(
                *per_device(
                    one, arrays(grad), arrays(x), arrays(stats), gammas or [None] * len(grad.shards())
                )
            )
        )
        out = {}
        if ctx.needs_grad("input_tensor"):
            out["input_tensor"] = grad_like(ctx, x, dx)
        if ctx.needs_grad("stats"):
            out["stats"] = grad_like(ctx, stats, dstats)
        if ctx.needs_grad("weight"):
            out["weight"] = _param_grad(ctx, "weight", width, dgamma)
        if ctx.needs_grad("bias"):
            out["bias"] = _param_grad(ctx, "bias", width, dbeta)
        return out

    return rule


register_backward("ttnn.rms_norm_post_all_gather")(_post_rule("rms"))
register_backward("ttnn.layer_norm_post_all_gather")(_post_rule("layer"))
