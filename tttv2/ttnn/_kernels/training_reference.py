"""Numpy references of the fused training kernels (losses, norms, attention, optimizers, sampling).

Each function has a twin in :mod:`tttv2.ttnn._kernels.training` that runs the C++ kernels of
``native/src/training.cpp`` (submodule ``tttv2._native.training``); ``tests/ttnn/test_training_kernels.py``
checks that both agree. Conventions:

* arrays are float32; "rows" kernels work on the last dim of ``[..., d]`` arrays and return per-row statistics
  shaped ``[..., 1]``; row sums are accumulated in float64 and rounded to float32 (as the C++ kernels do);
* class ids / token ids are integer arrays; an id outside ``[0, n)`` raises ``ValueError``;
* the optimizer steps update their float32 arrays in place (the math is float32; arrays named in ``bf16`` are
  rounded to bfloat16 when stored, so a bfloat16 parameter keeps bfloat16 values);
* randomness (dropout masks, Gumbel noise) comes from a counter-based generator: element ``i`` of a draw with
  seed ``s`` gets the 64-bit value ``mix64(key(s, stream) + (i + 1) · φ)`` (SplitMix64's finaliser, φ the
  golden-ratio constant), so any element can be regenerated on its own — backward recomputes a dropout mask
  from the seed instead of storing it. Dropout keeps element ``i`` iff ``bits >> 40 ≥ round(p · 2^24)``;
  Gumbel noise uses ``u = ((bits >> 11) + ½) · 2^-53`` and ``g = −log(−log u)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from ..numerics import matmul_f32

__all__ = [
    "STREAM_DROPOUT",
    "STREAM_SAMPLE",
    "adamw_step",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "dropout_mask",
    "dropout_params",
    "embedding_backward",
    "gumbel_argmax",
    "layer_norm_backward",
    "layer_norm_forward",
    "log_softmax",
    "log_softmax_backward",
    "pointwise_loss",
    "pointwise_loss_backward",
    "random_bits",
    "random_key",
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

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
STREAM_DROPOUT = 0xD5A61266F0C9392C  # salts: dropout and sampling with one seed draw unrelated bits
STREAM_SAMPLE = 0x2545F4914F6CDD1D
_KEEP_BITS = 24


def _mix64_int(z: int) -> int:
    z &= _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def random_key(seed: int, stream: int) -> int:
    """The 64-bit key of a draw: ``mix64(seed ^ stream)`` (any Python int seed, taken modulo 2^64)."""
    return _mix64_int((int(seed) & _MASK64) ^ stream)


def _mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def random_bits(key: int, start: int, count: int) -> np.ndarray:
    """uint64 bits of elements ``start .. start + count − 1`` of the draw with ``key``."""
    idx = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    return _mix64(np.uint64(key) + idx * np.uint64(_GOLDEN))


def dropout_params(p: float) -> tuple[int, float]:
    """(threshold on the top 24 bits, float32 scale 1/(1 − p)) of dropout with probability ``p`` in [0, 1)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    return math.floor(p * (1 << _KEEP_BITS) + 0.5), float(np.float32(1.0) / np.float32(1.0 - p))


def dropout_mask(shape: Sequence[int], p: float, seed: int) -> np.ndarray:
    """The dropout multiplier of every element of a C-ordered array of ``shape``: 0 or ``1/(1 − p)``.

    This is the mask :func:`sdpa_forward` applies to the attention probabilities ``[B, Hq, Sq, Sk]``.
    """
    threshold, scale = dropout_params(p)
    n = math.prod(shape)
    keep = (random_bits(random_key(seed, STREAM_DROPOUT), 0, n) >> np.uint64(64 - _KEEP_BITS)) >= np.uint64(
        threshold
    )
    return np.where(keep, np.float32(scale), np.float32(0.0)).astype(np.float32).reshape(tuple(shape))


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


SUM_LANES = 8


def _rowsum(a: np.ndarray) -> np.ndarray:
    """Sum over the last dim in float64, kept as ``[..., 1]``, in the C++ kernels' order (``sum_d`` / ``dot_d`` in
    ``native/src/training.cpp``): 8 float64 lanes start at +0.0; lane j adds the values at positions ≡ j (mod 8)
    below the last multiple of 8, in increasing position; the remaining values go to lane 0, in order; then
    ``((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))``. Each add is one IEEE float64 add, so the same float32
    terms (e.g. products rounded to float32 first) give the same bits in both."""
    a = np.asarray(a, dtype=np.float64)
    lead, d = a.shape[:-1], a.shape[-1]
    full = d - d % SUM_LANES
    blocks = a[..., :full].reshape(*lead, full // SUM_LANES, SUM_LANES)
    start = np.zeros((*lead, 1, SUM_LANES))
    lanes = np.cumsum(np.concatenate([start, blocks], axis=-2), axis=-2)[..., -1, :]  # accumulate: in order
    for k in range(full, d):
        lanes[..., 0] += a[..., k]
    lane = [lanes[..., j] for j in range(SUM_LANES)]
    return (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])))[
        ..., None
    ]


COLUMN_SUM_CHUNKS = 8  # kColumnSumChunks in native/src/training.cpp
COLUMN_SUM_CHUNK_VALUES = 1 << 15  # kMinElemsPerThread in native/src/kernels.hpp


def _column_sum(terms: np.ndarray) -> np.ndarray:
    """Sum of float32 ``terms [..., d]`` over all rows → float32 ``[d]``, in the C++ order (``rows_with_column_sums``):
    the rows are cut into ``max(1, min(8, rows·d // 32768, rows))`` chunks (chunk c: rows ``[rows·c // n,
    rows·(c + 1) // n)``); each chunk sums its rows from +0.0 in order in float64; the chunk sums are added from +0.0 in
    chunk order. The chunks depend on the shape only, never on the thread count."""
    a = _flat_rows(np.asarray(terms, dtype=np.float64))
    rows, d = a.shape
    chunks = max(1, min(COLUMN_SUM_CHUNKS, rows * max(d, 1) // COLUMN_SUM_CHUNK_VALUES, rows))
    total = np.zeros(d)
    for c in range(chunks):
        part = a[rows * c // chunks : rows * (c + 1) // chunks]
        total = total + np.cumsum(np.concatenate([np.zeros((1, d)), part]), axis=0)[-1]
    return total.astype(np.float32)


def _rowsum_in_order(a: np.ndarray) -> np.ndarray:
    """Sum over the last dim in float64, kept as ``[..., 1]``: from +0.0, one value after the other."""
    a = np.asarray(a, dtype=np.float64)
    start = np.zeros((*a.shape[:-1], 1))
    return np.cumsum(np.concatenate([start, a], axis=-1), axis=-1)[..., -1:]


def _ids(name: str, ids, n: int, shape: tuple) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise ValueError(f"{name}: ids must be integers, got {ids.dtype}")
    ids = ids.astype(np.int64).reshape(shape)
    bad = (ids < 0) | (ids >= n)
    if bad.any():
        raise ValueError(f"{name}: id {int(ids[bad][0])} is out of range [0, {n})")
    return ids


# --- losses and softmax family ---------------------------------------------------------------------------------


def cross_entropy_forward(logits: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-row loss ``logsumexp(x) − x[target]`` of logits ``[..., V]`` and class ids ``[...]`` → ``[..., 1]``."""
    x = _f32(logits)
    t = _ids("cross_entropy_forward", target, x.shape[-1], (*x.shape[:-1], 1))
    m = np.max(x, axis=-1, keepdims=True)
    with np.errstate(under="ignore"):
        s = _rowsum(np.exp(x - m))
    lse = m.astype(np.float64) + np.log(s)
    return (lse - np.take_along_axis(x, t, axis=-1).astype(np.float64)).astype(np.float32)


def cross_entropy_backward(logits: np.ndarray, target: np.ndarray, scale) -> np.ndarray:
    """``scale · (softmax(x) − onehot(target))``; ``scale`` is a scalar or per row (``[..., 1]`` / ``[...]``)."""
    x = _f32(logits)
    t = _ids("cross_entropy_backward", target, x.shape[-1], (*x.shape[:-1], 1))
    scale = _f32(scale)
    scale = scale.reshape(()) if scale.size == 1 else scale.reshape((*x.shape[:-1], 1))
    m = np.max(x, axis=-1, keepdims=True)
    with np.errstate(under="ignore"):
        e = np.exp(x - m)
    inv = (1.0 / _rowsum(e)).astype(np.float32)
    p = e * inv
    np.put_along_axis(p, t, np.take_along_axis(p, t, axis=-1) - np.float32(1.0), axis=-1)
    return (scale * p).astype(np.float32)


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Stable ``x − max − log Σ exp(x − max)`` over the last dim."""
    x = _f32(x)
    if x.shape[-1] == 0:
        return x.copy()  # empty rows (np.max has no identity)
    m = np.max(x, axis=-1, keepdims=True)
    with np.errstate(under="ignore"):
        s = _rowsum(np.exp(x - m))
    return (x - (m.astype(np.float64) + np.log(s)).astype(np.float32)).astype(np.float32)


def log_softmax_backward(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dy − exp(y) · Σ dy`` for ``y = log_softmax(x)``."""
    y, dy = _f32(y), _f32(dy)
    with np.errstate(under="ignore"):
        return (dy - np.exp(y) * _rowsum(dy).astype(np.float32)).astype(np.float32)


def softmax_backward(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``y · (dy − Σ dy·y)`` for ``y = softmax(x)`` along the last dim."""
    y, dy = _f32(y), _f32(dy)
    return (y * (dy - _rowsum(dy * y).astype(np.float32))).astype(np.float32)


# --- norms --------------------------------------------------------------------------------------------------------


def _vec(v, d: int) -> np.ndarray | None:
    return None if v is None else _f32(v).reshape(d)


def rms_norm_forward(x: np.ndarray, weight, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``y = x / rms · weight`` with ``rms = sqrt(mean(x²) + eps)`` over the last dim → (y, rms ``[..., 1]``)."""
    x = _f32(x)
    w = _vec(weight, x.shape[-1])
    rms = np.sqrt((_rowsum(x * x) / x.shape[-1]).astype(np.float32) + np.float32(eps)).astype(np.float32)
    y = x * (np.float32(1.0) / rms)
    if w is not None:
        y = y * w
    return y.astype(np.float32), rms


def _flat_rows(a: np.ndarray) -> np.ndarray:
    """``[..., d]`` → ``[rows, d]`` (not ``reshape(-1, d)``, which fails for d = 0)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def rms_norm_backward(x, weight, rms, dy, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dweight ``[d]``): ``g = weight·dy/rms``, ``dx = g − x · Σ(x·g)/(d·rms²)``, ``dweight = Σ_rows dy·x/rms``.

    ``rms`` (``[..., 1]``) is recomputed from ``x`` and ``eps`` when None.
    """
    x, dy = _f32(x), _f32(dy)
    d = x.shape[-1]
    if d == 0:  # empty rows: nothing to differentiate (and no 0/0 means)
        return x.copy(), np.zeros(0, np.float32)
    w = _vec(weight, d)
    rms = rms_norm_forward(x, None, eps)[1] if rms is None else _f32(rms).reshape((*x.shape[:-1], 1))
    inv = np.float32(1.0) / rms
    g = (dy if w is None else dy * w) * inv
    c = (_rowsum(x * g) / d).astype(np.float32) * inv * inv
    dx = g - x * c
    dw = _column_sum(dy * x * inv)
    return dx.astype(np.float32), dw


def layer_norm_forward(x, weight, bias, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``y = (x − mean) · rstd · weight + bias`` over the last dim → (y, mean ``[..., 1]``, rstd ``[..., 1]``)."""
    x = _f32(x)
    d = x.shape[-1]
    w, b = _vec(weight, d), _vec(bias, d)
    mean = (_rowsum(x) / d).astype(np.float32)
    c = x - mean
    var = (_rowsum_in_order(c * c) / d).astype(np.float32)  # the C++ mean_rstd's second pass
    rstd = (np.float32(1.0) / np.sqrt(var + np.float32(eps))).astype(np.float32)
    y = c * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(np.float32), mean, rstd


def layer_norm_backward(x, weight, mean, rstd, dy, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dweight, dbias): with ``x̂ = (x − mean)·rstd`` and ``g = dy·weight``,
    ``dx = rstd · (g − mean(g) − x̂ · mean(g·x̂))``, ``dweight = Σ_rows dy·x̂``, ``dbias = Σ_rows dy``.

    ``mean`` and ``rstd`` are recomputed from ``x`` and ``eps`` when None.
    """
    x, dy = _f32(x), _f32(dy)
    d = x.shape[-1]
    if d == 0:  # empty rows: nothing to differentiate (and no 0/0 means)
        return x.copy(), np.zeros(0, np.float32), np.zeros(0, np.float32)
    w = _vec(weight, d)
    if mean is None or rstd is None:
        _, mean, rstd = layer_norm_forward(x, None, None, eps)
    stat = (*x.shape[:-1], 1)
    mean, rstd = _f32(mean).reshape(stat), _f32(rstd).reshape(stat)
    xhat = (x - mean) * rstd
    g = dy if w is None else dy * w
    a = (_rowsum(g) / d).astype(np.float32)
    b = (_rowsum(g * xhat) / d).astype(np.float32)
    dx = rstd * (g - a - xhat * b)
    dw = _column_sum(dy * xhat)
    db = _column_sum(dy)
    return dx.astype(np.float32), dw, db


# --- activations and the SwiGLU MLP --------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(np.float32)


def pointwise_loss(pred: np.ndarray, target: np.ndarray, kind: int) -> np.ndarray:
    """Element-wise loss terms: ``(pred − target)²`` (kind 0, MSE) or ``|pred − target|`` (kind 1, L1)."""
    if kind not in (0, 1):
        raise ValueError(f"pointwise_loss: kind: expected 0 (squared) or 1 (absolute), got {kind!r}")
    d = (_f32(pred) - _f32(target)).astype(np.float32)
    return (d * d if kind == 0 else np.abs(d)).astype(np.float32)


def pointwise_loss_backward(
    pred: np.ndarray, target: np.ndarray, grad: np.ndarray | None, scale: float, kind: int
) -> np.ndarray:
    """``loss'(pred − target) · (grad · scale)``: ``2·d`` for MSE, ``sign(d)`` (0 where equal) for L1; a missing
    ``grad`` counts as ones (the reduced losses pass their scalar upstream gradient folded into ``scale``)."""
    if kind not in (0, 1):
        raise ValueError(f"pointwise_loss_backward: kind: expected 0 (squared) or 1 (absolute), got {kind!r}")
    d = (_f32(pred) - _f32(target)).astype(np.float32)
    deriv = np.float32(2.0) * d if kind == 0 else np.sign(d).astype(np.float32)
    gs = np.float32(scale) if grad is None else (_f32(grad) * np.float32(scale)).astype(np.float32)
    return (deriv * gs).astype(np.float32)


def silu_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dy · σ(x) · (1 + x · (1 − σ(x)))``."""
    x, dy = _f32(x), _f32(dy)
    s = _sigmoid(x)
    return (dy * (s * (np.float32(1.0) + x * (np.float32(1.0) - s)))).astype(np.float32)


def _silu_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * _sigmoid(a) * b).astype(np.float32)


def swiglu_forward(x, w1, w2, w3) -> np.ndarray:
    """``(silu(x·w1) ⊙ (x·w3)) · w2`` for x ``[..., E]``, w1/w3 ``[E, H]``, w2 ``[H, E_out]`` (weights [in, out])."""
    x = _f32(x)
    a = np.matmul(x, _f32(w1))
    b = np.matmul(x, _f32(w3))
    return np.matmul(_silu_mul(a, b), _f32(w2)).astype(np.float32)


def swiglu_gate_backward(a, b, dh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gate ``h = silu(a)·b``: (da, db, h) from the upstream ``dh`` (h recomputed for the w2 gradient)."""
    a, b, dh = _f32(a), _f32(b), _f32(dh)
    s = _sigmoid(a)
    sw = a * s
    da = (dh * b) * (s * (np.float32(1.0) + a * (np.float32(1.0) - s)))
    return da.astype(np.float32), (dh * sw).astype(np.float32), (sw * b).astype(np.float32)


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])


def swiglu_backward(x, w1, w2, w3, dy, gate_backward=swiglu_gate_backward):
    """(dx, dw1, dw2, dw3) of :func:`swiglu_forward`, recomputing ``x·w1``, ``x·w3`` and the gate.

    ``dG = dy·w2ᵀ``; ``da, db`` from the gate; ``dx = da·w1ᵀ + db·w3ᵀ``; ``dw1 = xᵀ·da``, ``dw3 = xᵀ·db``,
    ``dw2 = hᵀ·dy`` (summed over every row).
    """
    x, w1, w2, w3, dy = (_f32(v) for v in (x, w1, w2, w3, dy))
    xf = _flat(x)
    a = np.matmul(xf, w1)
    b = np.matmul(xf, w3)
    dyf = _flat(dy)
    dh = np.matmul(dyf, w2.T)
    da, db, h = gate_backward(a, b, dh)
    dx = np.matmul(da, w1.T) + np.matmul(db, w3.T)
    return (
        dx.reshape(x.shape).astype(np.float32),
        np.matmul(xf.T, da).astype(np.float32),
        np.matmul(h.T, dyf).astype(np.float32),
        np.matmul(xf.T, db).astype(np.float32),
    )


# --- scaled dot-product attention ----------------------------------------------------------------------------------


def _grouped(a: np.ndarray, hkv: int) -> np.ndarray:
    """[B, Hq, S, D] → [B, Hkv, group·S, D] (query heads of one KV head stacked)."""
    b, hq, s, d = a.shape
    return a.reshape(b, hkv, (hq // hkv) * s, d)


def sdpa_scores(q, k, hkv: int) -> np.ndarray:
    """Raw ``q·kᵀ`` for every query head against its KV head → ``[B, Hq, Sq, Sk]`` (float32)."""
    b, hq, sq, _ = q.shape
    s = matmul_f32(_grouped(q, hkv), np.swapaxes(k, -1, -2))
    return s.reshape(b, hq, sq, k.shape[2])


def _masked_scores(raw, mask, scale: float, causal: bool) -> np.ndarray:
    s = raw * np.float32(scale)
    if mask is not None:
        s = s + mask
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], s, np.float32(-np.inf))
    return s.astype(np.float32)


def _keep(shape, b0: int, p: float, seed: int) -> np.ndarray | None:
    """The dropout multiplier of batch rows ``b0 ..`` of a ``[B, H, Sq, Sk]`` probability array, or None."""
    if p == 0.0:
        return None
    threshold, scale = dropout_params(p)
    per_batch = math.prod(shape[1:])
    bits = random_bits(random_key(seed, STREAM_DROPOUT), b0 * per_batch, math.prod(shape))
    keep = (bits >> np.uint64(64 - _KEEP_BITS)) >= np.uint64(threshold)
    return np.where(keep, np.float32(scale), np.float32(0.0)).astype(np.float32).reshape(shape)


def sdpa_row_forward(raw, mask, scale: float, causal: bool, p: float, seed: int, b0: int = 0):
    """Row part of the forward: (dropped probabilities ``[B, H, Sq, Sk]``, lse ``[B, H, Sq, 1]``).

    ``s = raw·scale + mask`` (causal: keys after the query get −inf); ``P = softmax(s)``; lse = log Σ exp(s);
    rows with no attendable key give P = 0 and lse = −inf. ``b0`` is the batch offset of ``raw`` in the full
    tensor (the dropout mask is indexed over the full ``[B, H, Sq, Sk]``).
    """
    s = _masked_scores(_f32(raw), mask, scale, causal)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)  # no key at all (Sk = 0): a dead row
    dead = ~np.isfinite(m)
    m = np.where(dead, np.float32(0.0), m)
    with np.errstate(under="ignore"):
        e = np.exp(s - m)
    total = _rowsum(e)
    with np.errstate(divide="ignore"):
        inv = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0).astype(np.float32)
        lse = np.where(dead, -np.inf, m.astype(np.float64) + np.log(np.where(total > 0, total, 1.0)))
    probs = e * inv
    keep = _keep(probs.shape, b0, p, seed)
    if keep is not None:
        probs = probs * keep
    return probs.astype(np.float32), lse.astype(np.float32)


def sdpa_row_backward(
    raw, dpd, mask, lse, grad_lse, scale: float, causal: bool, p: float, seed: int, b0: int = 0
):
    """Row part of the backward: (dropped probabilities Pd, dS = ∂L/∂s), both ``[B, H, Sq, Sk]``.

    ``P = exp(s − lse)`` (lse recomputed when None), ``Pd = P ⊙ Z`` with the dropout multiplier Z,
    ``u = Σ_j Pd·dPd`` (= rowsum(dO ⊙ O)), ``dS = P ⊙ (Z ⊙ dPd − u + grad_lse)``.
    """
    s = _masked_scores(_f32(raw), mask, scale, causal)
    if lse is None:
        lse = sdpa_row_forward(raw, mask, scale, causal, 0.0, seed)[1]
    lse = _f32(lse).reshape((*s.shape[:-1], 1))
    dead = ~np.isfinite(lse)
    with np.errstate(under="ignore", invalid="ignore"):
        probs = np.where(dead, np.float32(0.0), np.exp(s - np.where(dead, np.float32(0.0), lse)))
    probs = probs.astype(np.float32)
    dpd = _f32(dpd)
    keep = _keep(probs.shape, b0, p, seed)
    pd = probs if keep is None else probs * keep
    dp = dpd if keep is None else dpd * keep
    u = _rowsum(pd * dpd).astype(np.float32)
    if grad_lse is not None:
        u = u - _f32(grad_lse).reshape(u.shape)
    return pd.astype(np.float32), (probs * (dp - u)).astype(np.float32)


def sdpa_forward(q, k, v, mask, *, scale: float, is_causal: bool, dropout_p: float, seed: int):
    """Attention of q ``[B, Hq, Sq, D]`` over k/v ``[B, Hkv, Sk, D/Dv]`` (GQA: head h reads KV head
    ``h // (Hq/Hkv)``) with an additive ``mask`` broadcastable to ``[B, Hq, Sq, Sk]`` → (out, lse ``[.., Sq, 1]``).

    Dropout drops probabilities with the counter-based mask of :func:`dropout_mask` over ``[B, Hq, Sq, Sk]``
    and scales the kept ones by ``1/(1 − p)``.
    """
    q, k, v = _f32(q), _f32(k), _f32(v)
    b, hq, sq, _ = q.shape
    hkv = k.shape[1]
    mask = None if mask is None else _f32(mask)
    probs, lse = sdpa_row_forward(sdpa_scores(q, k, hkv), mask, scale, is_causal, dropout_p, seed, 0)
    out = np.matmul(_grouped(probs, hkv), v).reshape(b, hq, sq, v.shape[-1])
    return out.astype(np.float32), lse


def sdpa_backward(
    q, k, v, grad_out, mask, lse, *, scale: float, is_causal: bool, dropout_p: float, seed: int, grad_lse=None
):
    """(dq, dk, dv) of :func:`sdpa_forward` with the same dropout mask (regenerated from ``seed``).

    ``dV = Pdᵀ·dO``, ``dPd = dO·Vᵀ``, ``dS`` from :func:`sdpa_row_backward`, ``dQ = scale·dS·K``,
    ``dK = scale·dSᵀ·Q``; K and V gradients are summed over the query heads of their group. ``lse`` may be None
    (recomputed); ``grad_lse`` is the gradient reaching the returned log-sum-exp, if any.
    """
    q, k, v, go = _f32(q), _f32(k), _f32(v), _f32(grad_out)
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    mask = None if mask is None else _f32(mask)
    raw = sdpa_scores(q, k, hkv)
    dog = _grouped(go, hkv)
    dpd = np.matmul(dog, np.swapaxes(v, -1, -2)).reshape(b, hq, sq, sk)
    pd, ds = sdpa_row_backward(raw, dpd, mask, lse, grad_lse, scale, is_causal, dropout_p, seed, 0)
    pdg, dsg = _grouped(pd, hkv), _grouped(ds, hkv)
    sc = np.float32(scale)
    dv = np.matmul(np.swapaxes(pdg, -1, -2), dog)
    dq = (np.matmul(dsg, k) * sc).reshape(b, hq, sq, d)
    dk = np.matmul(np.swapaxes(dsg, -1, -2), _grouped(q, hkv)) * sc
    return dq.astype(np.float32), dk.astype(np.float32), dv.astype(np.float32)


# --- embedding, sampling ------------------------------------------------------------------------------------------


def embedding_backward(ids, grad, num_embeddings: int) -> np.ndarray:
    """Scatter-add: row ``ids[i]`` of the ``[num_embeddings, D]`` result accumulates ``grad[i]`` (in id order)."""
    grad = _f32(grad)
    d = grad.shape[-1]
    g = _flat_rows(grad)
    t = _ids("embedding_backward", ids, num_embeddings, (g.shape[0],))
    out = np.zeros((num_embeddings, d), dtype=np.float32)
    np.add.at(out, t, g)
    return out


def gumbel_argmax(logits, temperature: float, seed: int) -> np.ndarray:
    """Gumbel-max sample of each row of logits ``[..., V]`` → uint32 ``[...]``: ``argmax(x/T + g)`` with the
    counter-based Gumbel noise ``g`` of element ``i`` (flat index); ``T = 0`` gives ``argmax(x)``."""
    x = _f32(logits)
    if temperature == 0:
        return np.argmax(x, axis=-1).astype(np.uint32)
    bits = random_bits(random_key(seed, STREAM_SAMPLE), 0, x.size).reshape(x.shape)
    u = ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    g = -np.log(-np.log(u))
    return np.argmax(x.astype(np.float64) / float(temperature) + g, axis=-1).astype(np.uint32)


# --- optimizer steps ----------------------------------------------------------------------------------------------


def _store(dst: np.ndarray, value: np.ndarray, bf16: bool) -> None:
    if bf16:
        value = value.astype(ml_dtypes.bfloat16).astype(np.float32)
    dst[...] = value


def sgd_step(
    param,
    grad,
    momentum_buffer,
    *,
    lr: float,
    momentum: float = 0.0,
    dampening: float = 0.0,
    nesterov: bool = False,
    weight_decay: float = 0.0,
    first_step: bool = False,
    bf16: Sequence[str] = (),
) -> None:
    """One ``torch.optim.SGD`` step, in place on ``param`` and ``momentum_buffer`` (float32 math):

    ``g = grad + wd·θ``; with momentum: ``buf = g`` on the first step, else ``buf = μ·buf + (1 − dampening)·g``;
    ``g = g + μ·buf`` (Nesterov) or ``g = buf``; ``θ = θ − lr·g``. ``bf16`` names the arrays ("param",
    "momentum_buffer") that hold bfloat16 values: they are rounded once, when stored.
    """
    f = np.float32
    g = _f32(grad)
    p = _f32(param)
    if weight_decay != 0:
        g = g + p * f(weight_decay)
    if momentum != 0:
        buf = g.copy() if first_step else momentum_buffer * f(momentum) + g * f(1.0 - dampening)
        _store(momentum_buffer, buf, "momentum_buffer" in bf16)
        g = g + buf * f(momentum) if nesterov else buf
    _store(param, p + g * f(-lr), "param" in bf16)


def adamw_step(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    max_exp_avg_sq,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    amsgrad: bool = False,
    bf16: Sequence[str] = (),
) -> None:
    """One ``torch.optim.AdamW`` step (step ≥ 1), in place, float32 math in torch's order:

    ``θ = θ·(1 − lr·wd)``; ``m = lerp(m, g, 1 − β1)``; ``v = β2·v + (1 − β2)·g²``; amsgrad: ``v̂max = max(v̂max, v)``;
    ``denom = sqrt(v or v̂max) / sqrt(1 − β2^t) + eps``; ``θ = θ − (lr / (1 − β1^t))·m / denom``.
    ``bf16`` names the arrays ("param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq") that hold bfloat16 values: the
    step computes in float32 from the stored values and rounds each updated array once, when storing it.
    """
    f = np.float32
    g = _f32(grad)
    w = 1.0 - beta1
    step_size = lr / (1.0 - beta1**step)
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    p = _f32(param) * f(1.0 - lr * weight_decay)
    m = exp_avg + f(w) * (g - exp_avg) if w < 0.5 else g - (g - exp_avg) * f(1.0 - w)
    v = exp_avg_sq * f(beta2) + f(1.0 - beta2) * g * g
    _store(exp_avg, m, "exp_avg" in bf16)
    _store(exp_avg_sq, v, "exp_avg_sq" in bf16)
    if amsgrad:
        v = np.maximum(max_exp_avg_sq, v)
        _store(max_exp_avg_sq, v, "max_exp_avg_sq" in bf16)
    denom = np.sqrt(v) / f(bc2_sqrt) + f(eps)
    _store(param, p + f(-step_size) * m / denom, "param" in bf16)
