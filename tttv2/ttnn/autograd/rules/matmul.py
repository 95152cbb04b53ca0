"""Backward rules of ``matmul`` / ``linear`` / ``experimental.minimal_matmul``.

For ``C = act(op_a(A) · op_b(B) + bias)`` with ``op_x`` an optional transpose of the last two dims: the
upstream gradient first goes back through the fused activation (evaluated at the float32 pre-activation), then

* ``d op_a(A) = dC · op_b(B)ᵀ`` and ``d op_b(B) = op_a(A)ᵀ · dC``, batched with numpy broadcasting and summed
  over the batch dims an operand was broadcast along (a ``[K, N]`` weight used by a ``[B, 1, M, K]``
  activation gets the sum over B), then transposed back for ``transpose_a`` / ``transpose_b``. Written out for
  the four transpose combinations (2-D): ``(F,F) dA = dC·Bᵀ, dB = Aᵀ·dC``; ``(F,T) dA = dC·B, dB = dCᵀ·A``;
  ``(T,F) dA = B·dCᵀ, dB = A·dC``; ``(T,T) dA = Bᵀ·dCᵀ, dB = dCᵀ·Aᵀ``;
* ``d bias`` is ``dC`` summed over every row (a one-row bias) or over the batch dims only (a bias with one row
  per output row, as the forward adds it).

Gradients are computed in float32 (no fidelity truncation: the backward is the exact derivative of the op).
"""

from __future__ import annotations

import numpy as np

from ...numerics import matmul_f32, matmul_f32_each
from ..engine import register_backward
from ._util import act_chain, arrays, grad_like, per_device, unbroadcast


def _swap(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def matmul_grads(a, b, g, *, transpose_a, transpose_b, bias=None, activation=None, need=(True, True, True)):
    """Per-device float32 gradients ``(dA, dB, dBias)`` of ``act(op_a(A) · op_b(B) + bias)``."""
    a2 = _swap(a) if transpose_a else a
    b2 = _swap(b) if transpose_b else b
    if activation is not None:
        pre = matmul_f32(a2, b2)
        if bias is not None:
            pre = pre + _bias_rows(bias, pre)
        _, back = act_chain(pre, activation)
        g = back(g)
    products = []  # the gradient products, computed in one share-out (numerics.matmul_f32_each)
    if need[0]:
        products.append((g, _swap(b2)))
    flat_weight = b2.ndim == 2  # one weight for every batch: one flat [K, rows] x [rows, N] product
    if need[1]:
        products.append(
            (a2.reshape(-1, a2.shape[-1]).T, g.reshape(-1, g.shape[-1])) if flat_weight else (_swap(a2), g)
        )
    dbias = None

    def bias_grad() -> None:  # the caller's own work while the workers take product pieces
        nonlocal dbias
        n = g.shape[-1]
        rows = bias.reshape(-1, n)
        out = np.zeros(rows.shape, dtype=np.float32)
        if rows.shape[0] != g.shape[-2]:
            out[0] = g.reshape(-1, n).sum(axis=0, dtype=np.float32)
        else:
            out[:] = g.reshape(-1, rows.shape[0], n).sum(axis=0, dtype=np.float32)
        dbias = out.reshape(bias.shape)

    results = matmul_f32_each(products, side=bias_grad if need[2] and bias is not None else None)
    da = db = None
    if need[0]:
        da = unbroadcast(results.pop(0), a2.shape)
        da = _swap(da) if transpose_a else da
    if need[1]:
        db = results.pop(0)
        if flat_weight:
            db = db.T if transpose_b else db
        else:
            db = unbroadcast(db, b2.shape)
            db = _swap(db) if transpose_b else db
    return da, db, dbias


def _bias_rows(bias: np.ndarray, out: np.ndarray) -> np.ndarray:
    n = out.shape[-1]
    rows = bias.reshape(-1, n)
    return rows[:1] if rows.shape[0] != out.shape[-2] else rows


def fused_activation(ctx):
    """The activation fused into the matmul: ``activation=`` or the program config's ``fused_activation``."""
    act = ctx.args.get("activation")
    if act is None:
        act = getattr(ctx.args.get("program_config"), "fused_activation", None)
    return act


def _rule(a_name: str, b_name: str, bias_name: str | None, fixed_transposes: bool):
    def rule(ctx, grad):
        a, b = ctx.args[a_name], ctx.args[b_name]
        bias = ctx.args.get(bias_name) if bias_name else None
        ta = False if fixed_transposes else bool(ctx.args["transpose_a"])
        tb = False if fixed_transposes else bool(ctx.args["transpose_b"])
        need = (
            ctx.needs_grad(a_name),
            ctx.needs_grad(b_name),
            bias_name is not None and ctx.needs_grad(bias_name),
        )
        act = None if fixed_transposes else fused_activation(ctx)

        def one(g, x, w, bs):
            return matmul_grads(x, w, g, transpose_a=ta, transpose_b=tb, bias=bs, activation=act, need=need)

        results = per_device(one, arrays(grad), arrays(a), arrays(b), arrays(bias))
        out = {}
        for index, (name, like) in enumerate(((a_name, a), (b_name, b), (bias_name, bias))):
            if need[index]:
                out[name] = grad_like(ctx, like, [r[index] for r in results])
        return out

    return rule


register_backward("ttnn.matmul")(_rule("input_tensor_a", "input_tensor_b", None, False))
register_backward("ttnn.linear")(_rule("input_tensor_a", "input_tensor_b", "bias", False))
register_backward("ttnn.experimental.minimal_matmul")(
    _rule("input_tensor", "weight_tensor", "bias_tensor", True)
)
