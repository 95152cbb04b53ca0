"""The fused training kernels: C++ (``tttv2._native.training``) by default, numpy (:mod:`.training_reference`)
with ``TTTV2_KERNELS=reference`` — the backend switch of :mod:`tttv2.ttnn._kernels` (``use_backend``) applies.

Every function has the signature and semantics of its twin in :mod:`.training_reference` (read there what it
computes). Inputs are array likes (converted to C-contiguous float32; ids to int64); outputs are new arrays,
except for the optimizer steps, which update their (writable, C-contiguous float32) arrays in place.

The attention kernels run their matrix products with numpy (BLAS) and the row work — masking, softmax, the
seeded dropout mask, log-sum-exp and ``dS`` — in C++, in chunks of batch rows so that the score arrays stay
bounded in memory. The SwiGLU kernels do the same: GEMMs in BLAS, the gate and its backward fused in C++.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ..numerics import matmul_f32, matmul_f32_each
from . import training_reference as reference

__all__ = [
    "adamw_step",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "dropout_mask",
    "embedding_backward",
    "gumbel_argmax",
    "layer_norm_backward",
    "layer_norm_forward",
    "log_softmax",
    "log_softmax_backward",
    "pointwise_loss",
    "pointwise_loss_backward",
    "rms_norm_backward",
    "rms_norm_forward",
    "sdpa_backward",
    "sdpa_forward",
    "sgd_step",
    "silu_backward",
    "softmax_backward",
    "swiglu_backward",
    "swiglu_forward",
]

_base = importlib.import_module(__package__)  # tttv2.ttnn._kernels: BACKEND, use_backend, _native
_SCORE_BUDGET = 1 << 22  # score elements per attention chunk (16 MB of float32 per work array)

F = TypeVar("F", bound=Callable[..., Any])


def _native():
    native = _base._native
    training = getattr(native, "training", None)
    if training is None:  # pragma: no cover - only with a stale build of the extension
        raise ImportError(
            "tttv2._native has no training kernels (stale build): run `pip install --no-build-isolation -e .` "
            f"from the project root, or set {_base.ENV_VAR}=reference"
        )
    return training


def _dispatch(native_impl: F) -> F:
    """Route calls to ``native_impl`` or to the reference function of the same name (per ``_kernels.BACKEND``)."""
    ref = getattr(reference, native_impl.__name__)

    @functools.wraps(ref)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if _base.BACKEND == "reference":
            return ref(*args, **kwargs)
        return native_impl(*args, **kwargs)

    return kernel  # type: ignore[return-value]


def _f32(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float32, order="C")


def _rows(a: Any) -> np.ndarray:
    a = _f32(a)
    if a.ndim == 0:
        raise ValueError("training kernels need arrays of rank >= 1, got a 0-d array")
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _stat_shape(shape: tuple) -> tuple:
    return (*tuple(shape[:-1]), 1)


def _ids(kernel: str, ids: Any, count: int) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise ValueError(f"{kernel}: ids must be integers, got {ids.dtype}")
    if ids.size != count:
        raise ValueError(f"{kernel}: expected {count} ids, got {ids.size} (shape {ids.shape})")
    return np.ascontiguousarray(ids.reshape(-1), dtype=np.int64)


def _optional_rows(v: Any, rows: int) -> np.ndarray | None:
    return None if v is None else _f32(v).reshape(rows)


def _vector(v: Any, d: int) -> np.ndarray | None:
    return None if v is None else _f32(v).reshape(d)


# --- losses and softmax family ---------------------------------------------------------------------------------


@_dispatch
def cross_entropy_forward(logits, target):
    x = _rows(logits)
    out = np.empty(x.shape[0], dtype=np.float32)
    _native().cross_entropy_forward(x, _ids("cross_entropy_forward", target, x.shape[0]), out)
    return out.reshape(_stat_shape(np.shape(logits)))


@_dispatch
def cross_entropy_backward(logits, target, scale):
    x = _rows(logits)
    s = _f32(scale).reshape(-1)
    out = np.empty_like(x)
    _native().cross_entropy_backward(x, _ids("cross_entropy_backward", target, x.shape[0]), s, out)
    return out.reshape(np.shape(logits))


@_dispatch
def log_softmax(x):
    x2 = _rows(x)
    out = np.empty_like(x2)
    _native().log_softmax(x2, out)
    return out.reshape(np.shape(x))


@_dispatch
def log_softmax_backward(y, dy):
    y2 = _rows(y)
    out = np.empty_like(y2)
    _native().log_softmax_backward(y2, _rows(dy), out)
    return out.reshape(np.shape(y))


@_dispatch
def softmax_backward(y, dy):
    y2 = _rows(y)
    out = np.empty_like(y2)
    _native().softmax_backward(y2, _rows(dy), out)
    return out.reshape(np.shape(y))


# --- norms --------------------------------------------------------------------------------------------------------


@_dispatch
def rms_norm_forward(x, weight, eps):
    x2 = _rows(x)
    y = np.empty_like(x2)
    rms = np.empty(x2.shape[0], dtype=np.float32)
    _native().rms_norm_forward(x2, _vector(weight, x2.shape[1]), float(eps), y, rms)
    return y.reshape(np.shape(x)), rms.reshape(_stat_shape(np.shape(x)))


@_dispatch
def rms_norm_backward(x, weight, rms, dy, eps):
    x2 = _rows(x)
    rows, d = x2.shape
    dx = np.empty_like(x2)
    dw = np.empty(d, dtype=np.float32)
    _native().rms_norm_backward(
        x2, _vector(weight, d), _optional_rows(rms, rows), float(eps), _rows(dy), dx, dw
    )
    return dx.reshape(np.shape(x)), dw


@_dispatch
def layer_norm_forward(x, weight, bias, eps):
    x2 = _rows(x)
    rows, d = x2.shape
    y = np.empty(np.shape(x), dtype=np.float32)  # written through a row view: y owns its buffer
    stat = _stat_shape(np.shape(x))
    mean = np.empty(stat, dtype=np.float32)
    rstd = np.empty(stat, dtype=np.float32)
    _native().layer_norm_forward(
        x2, _vector(weight, d), _vector(bias, d), float(eps), _rows(y), mean.reshape(rows), rstd.reshape(rows)
    )
    return y, mean, rstd


@_dispatch
def layer_norm_backward(x, weight, mean, rstd, dy, eps):
    x2 = _rows(x)
    rows, d = x2.shape
    if mean is None or rstd is None:
        mean = rstd = None
    dx = np.empty(np.shape(x), dtype=np.float32)  # written through a row view: dx owns its buffer
    dw = np.empty(d, dtype=np.float32)
    db = np.empty(d, dtype=np.float32)
    _native().layer_norm_backward(
        x2,
        _vector(weight, d),
        _optional_rows(mean, rows),
        _optional_rows(rstd, rows),
        float(eps),
        _rows(dy),
        _rows(dx),
        dw,
        db,
    )
    return dx, dw, db


# --- activations and SwiGLU ----------------------------------------------------------------------------------------


@_dispatch
def pointwise_loss(pred, target, kind):
    pred = _f32(pred)
    out = np.empty_like(pred)
    _native().pointwise_loss(pred, _f32(target).reshape(pred.shape), int(kind), out)
    return out


@_dispatch
def pointwise_loss_backward(pred, target, grad, scale, kind):
    pred = _f32(pred)
    out = np.empty_like(pred)
    g = None if grad is None else _f32(grad).reshape(pred.shape)
    _native().pointwise_loss_backward(pred, _f32(target).reshape(pred.shape), g, float(scale), int(kind), out)
    return out


@_dispatch
def silu_backward(x, dy):
    x = _f32(x)
    out = np.empty_like(x)
    _native().silu_backward(x, _f32(dy).reshape(x.shape), out)
    return out


def _gate_backward(a, b, dh):
    a, b, dh = _f32(a), _f32(b), _f32(dh)
    da, db, h = np.empty_like(a), np.empty_like(a), np.empty_like(a)
    _native().swiglu_gate_backward(a, b, dh, da, db, h)
    return da, db, h


@_dispatch
def swiglu_forward(x, w1, w2, w3):
    x = _f32(x)
    a = np.matmul(x, _f32(w1))
    b = np.matmul(x, _f32(w3))
    return np.matmul(_base.silu_mul(a, b), _f32(w2)).astype(np.float32, copy=False)


@_dispatch
def swiglu_backward(x, w1, w2, w3, dy):
    return reference.swiglu_backward(x, w1, w2, w3, dy, gate_backward=_gate_backward)


# --- attention ------------------------------------------------------------------------------------------------------


def _mask(mask, shape: tuple) -> tuple[np.ndarray | None, tuple[int, int, int] | None]:
    """A mask broadcastable to ``shape`` [B, H, Sq, Sk] as (flat contiguous array, element strides of B, H, Sq)."""
    if mask is None:
        return None, None
    m = _f32(mask)
    if m.ndim == 0 or m.shape[-1] != shape[-1]:  # broadcast along the keys: make the key dim contiguous
        m = np.ascontiguousarray(np.broadcast_to(m, (*m.shape[:-1], shape[-1])))
    view = np.broadcast_to(m, shape)
    strides = tuple(int(s) // m.itemsize for s in view.strides[:3])
    return m.reshape(-1), strides  # type: ignore[return-value]


def _chunks(batch: int, per_batch: int):
    step = max(1, _SCORE_BUDGET // max(per_batch, 1))
    for b0 in range(0, batch, step):
        yield b0, min(batch, b0 + step)


@_dispatch
def sdpa_forward(q, k, v, mask, *, scale, is_causal, dropout_p, seed):
    q, k, v = _f32(q), _f32(k), _f32(v)
    b, hq, sq, _ = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    threshold, keep = reference.dropout_params(dropout_p)
    key = reference.random_key(seed, reference.STREAM_DROPOUT)
    flat, strides = _mask(mask, (b, hq, sq, sk))
    out = np.empty((b, hq, sq, v.shape[-1]), dtype=np.float32)
    lse = np.empty((b, hq, sq, 1), dtype=np.float32)
    native = _native()
    for b0, b1 in _chunks(b, hq * sq * sk):
        raw = reference.sdpa_scores(q[b0:b1], k[b0:b1], hkv)
        probs = np.empty_like(raw)
        lse_c = np.empty(raw.shape[0] * hq * sq, dtype=np.float32)
        native.sdpa_row_forward(
            raw, flat, strides, float(scale), bool(is_causal), threshold, keep, key, b0, b, probs, lse_c
        )
        out[b0:b1] = matmul_f32(reference._grouped(probs, hkv), v[b0:b1]).reshape(
            b1 - b0, hq, sq, v.shape[-1]
        )
        lse[b0:b1] = lse_c.reshape(b1 - b0, hq, sq, 1)
    return out, lse


@_dispatch
def sdpa_backward(q, k, v, grad_out, mask, lse, *, scale, is_causal, dropout_p, seed, grad_lse=None):
    q, k, v, go = _f32(q), _f32(k), _f32(v), _f32(grad_out)
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    threshold, keep = reference.dropout_params(dropout_p)
    key = reference.random_key(seed, reference.STREAM_DROPOUT)
    flat, strides = _mask(mask, (b, hq, sq, sk))
    lse = None if lse is None else _f32(lse).reshape(b, hq * sq)
    grad_lse = None if grad_lse is None else _f32(grad_lse).reshape(b, hq * sq)
    dq = np.empty_like(q)
    dk = np.empty_like(k)
    dv = np.empty((b, hkv, sk, v.shape[-1]), dtype=np.float32)
    sc = np.float32(scale)
    native = _native()
    for b0, b1 in _chunks(b, hq * sq * sk):
        # the products of a chunk go in two share-outs (numerics.matmul_f32_each): the same pieces, the same bits
        # as one after the other (the scores as reference.sdpa_scores computes them)
        qg, dog = reference._grouped(q[b0:b1], hkv), reference._grouped(go[b0:b1], hkv)
        raw, dpd = matmul_f32_each(
            [(qg, np.swapaxes(k[b0:b1], -1, -2)), (dog, np.swapaxes(v[b0:b1], -1, -2))]
        )
        raw = raw.reshape(b1 - b0, hq, sq, sk)
        dpd = dpd.reshape(raw.shape)
        pd, ds = np.empty_like(raw), np.empty_like(raw)
        native.sdpa_row_backward(
            raw,
            dpd,
            flat,
            strides,
            None if lse is None else np.ascontiguousarray(lse[b0:b1]).reshape(-1),
            None if grad_lse is None else np.ascontiguousarray(grad_lse[b0:b1]).reshape(-1),
            float(scale),
            bool(is_causal),
            threshold,
            keep,
            key,
            b0,
            b,
            pd,
            ds,
        )
        pdg, dsg = reference._grouped(pd, hkv), reference._grouped(ds, hkv)
        dv_c, dq_c, dk_c = matmul_f32_each(
            [(np.swapaxes(pdg, -1, -2), dog), (dsg, k[b0:b1]), (np.swapaxes(dsg, -1, -2), qg)]
        )
        dv[b0:b1] = dv_c
        dq[b0:b1] = (dq_c * sc).reshape(b1 - b0, hq, sq, d)
        dk[b0:b1] = dk_c * sc
    return dq, dk, dv


@_dispatch
def dropout_mask(shape: Sequence[int], p: float, seed: int):
    threshold, keep = reference.dropout_params(p)
    out = np.empty(math.prod(shape), dtype=np.float32)
    _native().dropout_mask(threshold, keep, reference.random_key(seed, reference.STREAM_DROPOUT), 0, out)
    return out.reshape(tuple(shape))


# --- embedding, sampling, optimizers ---------------------------------------------------------------------------------


@_dispatch
def embedding_backward(ids, grad, num_embeddings: int):
    g = _rows(grad)
    out = np.empty((int(num_embeddings), g.shape[1]), dtype=np.float32)
    _native().embedding_backward(_ids("embedding_backward", ids, g.shape[0]), g, out)
    return out


@_dispatch
def gumbel_argmax(logits, temperature: float, seed: int):
    x = _rows(logits)
    out = np.empty(x.shape[0], dtype=np.uint32)
    _native().gumbel_argmax(x, float(temperature), reference.random_key(seed, reference.STREAM_SAMPLE), out)
    return out.reshape(np.shape(logits)[:-1])


@_dispatch
def sgd_step(
    param,
    grad,
    momentum_buffer,
    *,
    lr,
    momentum=0.0,
    dampening=0.0,
    nesterov=False,
    weight_decay=0.0,
    first_step=False,
    bf16=(),
):
    _native().sgd_step(
        param,
        _f32(grad).reshape(np.shape(param)),
        momentum_buffer if momentum != 0 else None,
        float(lr),
        float(momentum),
        float(dampening),
        bool(nesterov),
        float(weight_decay),
        bool(first_step),
        "param" in bf16,
        "momentum_buffer" in bf16,
    )


@_dispatch
def adamw_step(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    max_exp_avg_sq,
    *,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    step,
    amsgrad=False,
    bf16=(),
):
    _native().adamw_step(
        param,
        _f32(grad).reshape(np.shape(param)),
        exp_avg,
        exp_avg_sq,
        max_exp_avg_sq if amsgrad else None,
        float(lr),
        float(beta1),
        float(beta2),
        float(eps),
        float(weight_decay),
        lr / (1.0 - beta1**step),
        math.sqrt(1.0 - beta2**step),
        "param" in bf16,
        "exp_avg" in bf16,
        "exp_avg_sq" in bf16,
        "max_exp_avg_sq" in bf16,
    )
