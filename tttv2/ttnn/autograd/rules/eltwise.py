"""Backward rules of the elementwise ops: binary arithmetic (broadcasting, scalar operands, fused
activations), unary math, clamp and where.

Binary ops compute ``post(f(pre_a(a), pre_b(b)))``; the rule recomputes the float32 intermediates, runs the
chain rule back through ``activations``, then through ``f``, then through ``input_tensor_a_activations`` /
``input_tensor_b_activations``, and sums each gradient over the dims broadcasting stretched.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...numerics import map_row_blocks
from ..engine import register_backward
from ._util import _normalize_acts, act_chain, arrays, gelu_grad, grad_like, per_device, sigmoid, unbroadcast

_TWO_OVER_SQRT_PI = np.float32(2.0 / math.sqrt(math.pi))


def _tie_split(mask_strict: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """torch's max/min convention: the gradient goes to the winner, half to each side on a tie."""
    return mask_strict.astype(np.float32) + 0.5 * ties.astype(np.float32)


def _pow_base_grad(u, v, gz):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = v * np.power(u, v - 1.0)
    return gz * np.where(np.asarray(v) == 0, np.float32(0), d)


def _pow_exponent_grad(u, v, gz):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = np.power(u, v) * np.log(u)
    return gz * np.where((np.asarray(u) == 0) & (np.asarray(v) >= 0), np.float32(0), d)


# op -> (forward f(u, v), d/du given (u, v, gz), d/dv given (u, v, gz))
_BINARY = {
    "add": (np.add, lambda u, v, g: g, lambda u, v, g: g),
    "subtract": (np.subtract, lambda u, v, g: g, lambda u, v, g: -g),
    "multiply": (np.multiply, lambda u, v, g: g * v, lambda u, v, g: g * u),
    "divide": (np.divide, lambda u, v, g: g / v, lambda u, v, g: -g * u / (v * v)),
    "rsub": (lambda u, v: v - u, lambda u, v, g: -g, lambda u, v, g: g),
    "maximum": (
        np.maximum,
        lambda u, v, g: g * _tie_split(np.greater(u, v), np.equal(u, v)),
        lambda u, v, g: g * _tie_split(np.greater(v, u), np.equal(u, v)),
    ),
    "minimum": (
        np.minimum,
        lambda u, v, g: g * _tie_split(np.less(u, v), np.equal(u, v)),
        lambda u, v, g: g * _tie_split(np.less(v, u), np.equal(u, v)),
    ),
    "squared_difference": (
        lambda u, v: np.square(u - v),
        lambda u, v, g: 2.0 * g * (u - v),
        lambda u, v, g: -2.0 * g * (u - v),
    ),
    "pow": (np.power, _pow_base_grad, _pow_exponent_grad),
}


def _binary_grads(ctx, grad, name: str, a_name: str, b_name: str, pre_a, pre_b, post):
    fwd, da, db = _BINARY[name]
    a, b = ctx.args[a_name], ctx.args[b_name]
    need_a, need_b = ctx.needs_grad(a_name), ctx.needs_grad(b_name)
    n = len(grad.shards())
    a_list = arrays(a) if hasattr(a, "shards") else [np.float32(a)] * n
    b_list = arrays(b) if hasattr(b, "shards") else [np.float32(b)] * n
    post_chain = _normalize_acts(post)

    def one(g, x, y):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            u, back_a = act_chain(x, pre_a)
            v, back_b = act_chain(y, pre_b)
            if post_chain:
                _, back_post = act_chain(np.asarray(fwd(u, v), dtype=np.float32), post)
                gz = back_post(g)
            else:  # no fused activation after f: the forward value is not needed (the same gz, no recompute)
                gz = g
            ga = unbroadcast(back_a(da(u, v, gz)), np.shape(x)) if need_a else None
            gb = unbroadcast(back_b(db(u, v, gz)), np.shape(y)) if need_b else None
        return ga, gb

    results = per_device(one, arrays(grad), a_list, b_list)
    out = {}
    if need_a:
        out[a_name] = grad_like(ctx, a, [r[0] for r in results])
    if need_b:
        out[b_name] = grad_like(ctx, b, [r[1] for r in results])
    return out


def _binary_rule(name: str):
    def rule(ctx, grad):
        return _binary_grads(
            ctx,
            grad,
            name,
            "input_tensor_a",
            "input_tensor_b",
            ctx.args.get("input_tensor_a_activations"),
            ctx.args.get("input_tensor_b_activations"),
            ctx.args.get("activations"),
        )

    rule.__name__ = f"{name}_backward"
    return rule


for _name in ("add", "subtract", "multiply", "divide", "rsub", "maximum", "minimum", "squared_difference"):
    register_backward(f"ttnn.{_name}")(_binary_rule(_name))


@register_backward("ttnn.pow")
def pow_backward(ctx, grad):
    return _binary_grads(ctx, grad, "pow", "input_tensor", "exponent", None, None, None)


# --- unary ---------------------------------------------------------------------------------------------------


def _erf_grad(x):
    return _TWO_OVER_SQRT_PI * np.exp(-x * x)


# op -> d/dx as a function of (x, ctx.args)
_UNARY = {
    "silu": lambda x, a: sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x))),
    "relu": lambda x, a: (x > 0).astype(np.float32),
    "sigmoid": lambda x, a: sigmoid(x) * (1.0 - sigmoid(x)),
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: 1.0 / x,
    "reciprocal": lambda x, a: -1.0 / (x * x),
    "rsqrt": lambda x, a: -0.5 / (x * np.sqrt(x)),
    "sqrt": lambda x, a: 0.5 / np.sqrt(x),
    "neg": lambda x, a: np.full_like(x, -1.0),
    "abs": lambda x, a: np.sign(x),
    "tanh": lambda x, a: 1.0 - np.tanh(x) ** 2,
    "square": lambda x, a: 2.0 * x,
    "sin": lambda x, a: np.cos(x),
    "cos": lambda x, a: -np.sin(x),
    "softplus": lambda x, a: sigmoid(x),
    "erf": lambda x, a: _erf_grad(x),
    "gelu": lambda x, a: map_row_blocks(
        functools.partial(gelu_grad, approximate=bool(a.get("fast_and_approximate_mode", True))), x
    ),
    "clamp": lambda x, a: (
        (x >= (-np.inf if a["min"] is None else a["min"])) & (x <= (np.inf if a["max"] is None else a["max"]))
    ).astype(np.float32),
}


def _unary_rule(name: str):
    derivative = _UNARY[name]

    def rule(ctx, grad):
        x = ctx.args["input_tensor"]

        def one(g, xs):
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                return g * derivative(xs, ctx.args)

        return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad), arrays(x)))}

    rule.__name__ = f"{name}_backward"
    return rule


for _name in _UNARY:
    register_backward(f"ttnn.{_name}")(_unary_rule(_name))


@register_backward("ttnn.where")
def where_backward(ctx, grad):
    """Each branch gets the gradient where it was selected; the condition gets none."""
    cond = ctx.args["condition"]
    out = {}
    for name, selected in (("true_value", True), ("false_value", False)):
        if not ctx.needs_grad(name):
            continue
        value = ctx.args[name]

        def one(g, c, shape=tuple(value.shape), selected=selected):
            mask = (c != 0) if selected else (c == 0)
            return unbroadcast(np.where(mask, g, np.float32(0)), shape)

        out[name] = grad_like(ctx, value, per_device(one, arrays(grad), arrays(cond)))
    return out
