"""Helpers shared by the backward rules: per-device float32 arrays in, gradient tensors out.

Conventions of every rule:

* the rule reads the forward arguments from ``ctx.args`` (by parameter name) and the upstream gradient;
* it computes per device on float32 numpy arrays (the stored, already quantised values), so a sharded tensor's
  gradient is computed shard by shard and stays distributed exactly like the tensor;
* a gradient is built like its input (:func:`grad_like`): same shape, layout, memory config, mesh topology; its
  dtype is bfloat16 for a bfloat16 input and float32 otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from ...ops._common import output_like
from ...ops.data_movement import per_device
from ...tensor import Tensor
from ...types import DataType, UnaryOpType, UnaryWithParam

__all__ = [
    "act_chain",
    "arrays",
    "grad_dtype",
    "grad_like",
    "per_device",
    "unbroadcast",
]


def grad_dtype(t: Tensor) -> DataType:
    """bfloat16 gradients for bfloat16 tensors, float32 for every other float type (block floats included)."""
    return DataType.BFLOAT16 if t.dtype is DataType.BFLOAT16 else DataType.FLOAT32


def arrays(t: Tensor | None) -> list[np.ndarray] | None:
    """The per-device shards of ``t`` as float32 arrays (replicated shards stay one shared object)."""
    if t is None:
        return None
    return [s.astype(np.float32, copy=False) for s in t.shards("autograd backward")]


def grad_like(ctx, like: Tensor, shards: list[np.ndarray]) -> Tensor:
    """A gradient tensor distributed, laid out and placed like ``like`` (see the module docstring for dtype)."""
    shape = tuple(like.shape)
    shards = [np.asarray(s, dtype=np.float32) for s in shards]
    shards = [s if s.shape == shape else s.reshape(shape) for s in shards]
    return output_like(
        f"backward of {ctx.op_name}",
        shards,
        like,
        dtype=grad_dtype(like),
        layout=like.layout,
        memory_config=like.memory_config(),
        padded_shape=like._padded_shape,
    )


def unbroadcast(g: np.ndarray, shape) -> np.ndarray:
    """Sum a gradient over the dims numpy broadcasting added or stretched, back to ``shape``."""
    shape = tuple(shape)
    g = np.asarray(g, dtype=np.float32)
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)), dtype=np.float32)
    axes = tuple(i for i, (gs, s) in enumerate(zip(g.shape, shape)) if s == 1 and gs != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True, dtype=np.float32)
    return g.reshape(shape)


# --- activations: forward and derivative ---------------------------------------------------------------------

_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))
_GELU_C = np.float32(0.044715)
_INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float32 (Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7): vectorised, unlike math.erf."""
    a = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    poly = t * (
        np.float32(0.254829592)
        + t
        * (
            np.float32(-0.284496736)
            + t * (np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))
        )
    )
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def _float_array(x) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0 and x.dtype in (np.float32, np.float64)


def gelu_grad(x: np.ndarray, approximate: bool) -> np.ndarray:
    """d/dx of GELU: the tanh approximation or the exact erf form."""
    if approximate and not _float_array(x):
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * (x * x * x)))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * x * x)
    if approximate:
        # the same expression evaluated in place, in the same order (identical rounding, fewer temporaries)
        t = x * x
        t *= x
        t *= _GELU_C
        t += x
        t *= _SQRT_2_OVER_PI
        np.tanh(t, out=t)
        slope = t * t
        np.subtract(1.0, slope, out=slope)
        out = 0.5 * x
        out *= slope
        out *= _SQRT_2_OVER_PI
        np.multiply(3.0 * _GELU_C, x, out=slope)
        slope *= x
        slope += 1.0
        out *= slope
        t += 1.0
        t *= 0.5
        out += t
        return out
    cdf = 0.5 * (1.0 + _erf(x * _INV_SQRT2))
    return cdf + x * _INV_SQRT_2PI * np.exp(-0.5 * x * x)


def gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * (x * x * x))))
    return 0.5 * x * (1.0 + _erf(x * _INV_SQRT2))


def _silu_grad(x):
    s = sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _sigmoid_grad(x):
    s = sigmoid(x)
    return s * (1.0 - s)


# UnaryOpType -> (f(x, param), f'(x, param))
_ACTIVATIONS = {
    UnaryOpType.SILU: (lambda x, p: x * sigmoid(x), lambda x, p: _silu_grad(x)),
    UnaryOpType.GELU: (lambda x, p: gelu(x, bool(p)), lambda x, p: gelu_grad(x, bool(p))),
    UnaryOpType.RELU: (lambda x, p: np.maximum(x, 0), lambda x, p: (x > 0).astype(np.float32)),
    UnaryOpType.SIGMOID: (lambda x, p: sigmoid(x), lambda x, p: _sigmoid_grad(x)),
    UnaryOpType.EXP: (lambda x, p: np.exp(x), lambda x, p: np.exp(x)),
    UnaryOpType.TANH: (lambda x, p: np.tanh(x), lambda x, p: 1.0 - np.tanh(x) ** 2),
    UnaryOpType.IDENTITY: (lambda x, p: x, lambda x, p: np.ones_like(x)),
    UnaryOpType.RECIP: (lambda x, p: 1.0 / x, lambda x, p: -1.0 / (x * x)),
    UnaryOpType.RSQRT: (lambda x, p: 1.0 / np.sqrt(x), lambda x, p: -0.5 / (x * np.sqrt(x))),
    UnaryOpType.SQRT: (lambda x, p: np.sqrt(x), lambda x, p: 0.5 / np.sqrt(x)),
    UnaryOpType.NEG: (lambda x, p: -x, lambda x, p: -np.ones_like(x)),
}


def _normalize_acts(acts) -> list[tuple[UnaryOpType, float | None]]:
    if acts is None:
        return []
    if isinstance(acts, (UnaryOpType, UnaryWithParam, str)):
        acts = [acts]
    out = []
    for act in acts:
        if isinstance(act, UnaryWithParam):
            out.append((act.op_type, act.param))
        elif isinstance(act, UnaryOpType):
            out.append((act, None))
        else:  # a name: the forward op already validated it
            out.append((UnaryOpType[str(act).upper()], None))
    return out


def act_chain(x, acts):
    """Apply fused activations (a UnaryOpType / UnaryWithParam / name, or a list applied in order) to ``x``.

    Returns ``(y, back)`` where ``back(g)`` is the gradient with respect to ``x`` given the gradient of ``y``
    (chain rule through every activation, evaluated at the float32 intermediates).
    """
    chain = _normalize_acts(acts)
    if not chain or not isinstance(x, np.ndarray):
        return x, (lambda g: g)
    inputs = []
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for kind, param in chain:
            inputs.append(x)
            x = np.asarray(_ACTIVATIONS[kind][0](x, param), dtype=np.float32)

    def back(g):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            for (kind, param), xi in zip(reversed(chain), reversed(inputs)):
                g = g * _ACTIVATIONS[kind][1](xi, param)
        return np.asarray(g, dtype=np.float32)

    return x, back
