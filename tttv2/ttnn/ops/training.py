"""Fused training ops: losses, log-softmax, norms that return their statistics, SiLU backward, SwiGLU, attention
with dropout and log-sum-exp, sampling, a profiler marker and the fused SGD / AdamW steps.

Every differentiable op registers a backward rule that calls the fused backward kernel of
:mod:`tttv2.ttnn._kernels.training` (C++, with a numpy reference). Everything runs per device: each device
computes on its own shards, exactly as the device kernels would (a mean loss divides by the rows of the local
shard; a vocab-sharded logits tensor gives per-device partial softmaxes). Numerics: inputs are read as stored
(already quantised), computed in float32 (row sums in float64), and outputs are quantised to their dtype;
statistics (``rms``, ``mean``, ``rstd``, ``lse``) are float32. Gradients have their input's shape, layout,
memory config and topology, and dtype bfloat16 for bfloat16 inputs, float32 otherwise.

Timing a fused op in isolation (benchmarks): call the op on device tensors for the forward; for the backward
call the kernel in :data:`BACKWARD_KERNELS` on numpy arrays, or run ``out.backward(grad)`` on an output whose
inputs require grad.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from .._kernels import training as _tk
from ..autograd.engine import register_backward, register_non_differentiable
from ..errors import op_error
from ..memory import DRAM_MEMORY_CONFIG, MemoryConfig
from ..tensor import Tensor
from ..types import DataType, Layout
from ._common import check_memory_config, expect, expect_tensor, output_like, same_mesh, ttnn_op
from .data_movement import per_device

__all__ = [
    "adamw_step_",
    "cross_entropy_loss",
    "l1_loss",
    "layer_norm_forward",
    "log_softmax",
    "mse_loss",
    "profiler_no_op",
    "rms_norm_forward",
    "sample",
    "sgd_step_",
    "silu_bw",
    "swiglu",
]
__experimental__: list[str] = []
__transformer__: list[str] = ["scaled_dot_product_attention_forward"]

_FLOAT = (DataType.FLOAT32, DataType.BFLOAT16)
_IDS = (DataType.UINT32, DataType.INT32)
_TILE = (Layout.TILE,)
_REDUCTIONS = ("none", "mean", "sum")

# the fused backward kernel of each differentiable op (numpy arrays in and out; see _kernels.training)
BACKWARD_KERNELS = {
    "ttnn.cross_entropy_loss": _tk.cross_entropy_backward,
    "ttnn.log_softmax": _tk.log_softmax_backward,
    "ttnn.rms_norm_forward": _tk.rms_norm_backward,
    "ttnn.layer_norm_forward": _tk.layer_norm_backward,
    "ttnn.silu_bw": _tk.silu_backward,
    "ttnn.swiglu": _tk.swiglu_backward,
    "ttnn.transformer.scaled_dot_product_attention_forward": _tk.sdpa_backward,
}

register_non_differentiable("ttnn.sample", "ttnn.sgd_step_", "ttnn.adamw_step_")


# --- shared helpers --------------------------------------------------------------------------------------------


def _float(op: str, arg: str, value, rank=None, layouts=_TILE) -> Tensor:
    return expect_tensor(op, arg, value, dtypes=_FLOAT, layouts=layouts, rank=rank)


def _number(
    op: str, arg: str, value, *, low: float | None = None, high: float | None = None, open_high=False
):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    ok = ok and math.isfinite(float(value))
    if ok and low is not None:
        ok = float(value) >= low
    if ok and high is not None:
        ok = float(value) < high if open_high else float(value) <= high
    if not ok:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise op_error(op, arg, f"a finite number in [{lo}, {hi}{')' if open_high else ']'}", repr(value))
    return float(value)


def _integer(op: str, arg: str, value, low: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or (low is not None and int(value) < low):
        raise op_error(op, arg, "an int" + ("" if low is None else f" >= {low}"), repr(value))
    return int(value)


def _flag(op: str, arg: str, value) -> bool:
    expect(isinstance(value, (bool, np.bool_)), op, arg, "a bool", repr(value))
    return bool(value)


def _reduction(op: str, value) -> str:
    """ "mean" / "sum" / "none" (any case), or an enum member with one of those names (e.g. ttml's ReduceType)."""
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if not isinstance(name, str) or name.lower() not in _REDUCTIONS:
        raise op_error(op, "reduction", "'mean', 'sum' or 'none' (or a ReduceType)", repr(value))
    return name.lower()


def _arrays(t: Tensor | None, op: str) -> list[np.ndarray] | None:
    if t is None:
        return None
    return [s.astype(np.float32, copy=False) for s in t.shards(op)]


def _grad_dtype(t: Tensor) -> DataType:
    return DataType.BFLOAT16 if t.dtype is DataType.BFLOAT16 else DataType.FLOAT32


def _grad(ctx, like: Tensor, shards: list[np.ndarray]) -> Tensor:
    """A gradient tensor shaped, laid out, placed and distributed like ``like``."""
    shape = tuple(like.shape)
    shards = [np.asarray(s, dtype=np.float32) for s in shards]
    shards = [s if s.shape == shape else s.reshape(shape) for s in shards]
    return output_like(
        f"backward of {ctx.op_name}",
        shards,
        like,
        dtype=_grad_dtype(like),
        layout=like.layout,
        memory_config=like.memory_config(),
        padded_shape=like._padded_shape,
    )


def _unzip(results: list, n: int) -> list[list]:
    return [[r[i] for r in results] for i in range(n)]


def _zeros_like_shards(t: Tensor, op: str) -> list[np.ndarray]:
    return per_device(lambda s: np.zeros(s.shape, dtype=np.float32), t.shards(op))


def _stat_output(op: str, shards, like: Tensor, memory_config) -> Tensor:
    return output_like(
        op,
        shards,
        like,
        dtype=DataType.FLOAT32,
        layout=Layout.TILE,
        memory_config=memory_config or DRAM_MEMORY_CONFIG,
    )


def _weight(op: str, arg: str, value, width: int) -> Tensor | None:
    """A per-channel parameter: None or a float tensor of ``width`` values along its last dim ([1, .., 1, C])."""
    if value is None:
        return None
    w = expect_tensor(op, arg, value, dtypes=_FLOAT)
    shape = list(w.shape)
    if not shape or shape[-1] != width or math.prod(shape) != width:
        raise op_error(op, arg, f"a [1, 1, 1, {width}] (or [{width}]) tensor", shape)
    return w


def _vector(t: Tensor | None, op: str) -> list | None:
    if t is None:
        return None
    return [s.astype(np.float32, copy=False).reshape(-1) for s in t.shards(op)]


def _weight_grad(ctx, name: str, vectors: list[np.ndarray]) -> Tensor:
    w = ctx.args[name]
    return _grad(ctx, w, [v.reshape(tuple(w.shape)) for v in vectors])


# --- losses ------------------------------------------------------------------------------------------------------


def _class_ids(op: str, target: Tensor, rows: int, classes: int) -> list[np.ndarray]:
    """The target shards as int64 [rows] arrays, with every id checked against the class count."""
    out, seen = [], {}
    for dev, shard in enumerate(target.shards(op)):
        if id(shard) not in seen:
            ids = np.asarray(shard).astype(np.int64).reshape(rows)
            bad = (ids < 0) | (ids >= classes)
            if bad.any():
                raise op_error(
                    op,
                    "target",
                    f"class ids in [0, {classes}) (the logits have {classes} classes)",
                    f"id {int(ids[bad][0])} on device {dev}",
                )
            seen[id(shard)] = ids
        out.append(seen[id(shard)])
    return out


@ttnn_op("ttnn.cross_entropy_loss")
def cross_entropy_loss(
    logits: Tensor, target: Tensor, *, reduction="mean", memory_config: MemoryConfig | None = None
) -> Tensor:
    """Cross-entropy of logits ``[B, 1, S, V]`` against class ids (uint32/int32, ``[B, S]`` as in TTML, or
    ``[B, 1, S, 1]`` / ``[B, 1, 1, S]``; any layout): per row ``logsumexp(x) − x[target]``.

    ``reduction="mean"`` (default) / ``"sum"`` → ``[1, 1, 1, 1]``; ``"none"`` → per row ``[B, 1, S, 1]``
    (logits' dtype, TILE). Backward: ``upstream · scaler · (softmax(x) − onehot(target))`` with scaler 1/rows for
    mean; for ``"none"`` the upstream gradient is per row.
    """
    op = "ttnn.cross_entropy_loss"
    x = _float(op, "logits", logits, rank=(2, 3, 4))
    t = expect_tensor(op, "target", target, dtypes=_IDS)
    same_mesh(op, logits=x, target=t)
    red = _reduction(op, reduction)
    check_memory_config(op, memory_config)
    rows, classes = math.prod(x.shape[:-1]), x.shape[-1]
    if t.volume != rows:
        raise op_error(op, "target", f"{rows} class ids ([B, S] for logits {list(x.shape)})", list(t.shape))
    ids = _class_ids(op, t, rows, classes)
    losses = per_device(_tk.cross_entropy_forward, _arrays(x, op), ids)
    if red == "none":
        return output_like(
            op, losses, x, layout=Layout.TILE, memory_config=memory_config or DRAM_MEMORY_CONFIG
        )
    reduce = np.mean if red == "mean" else np.sum
    shards = per_device(
        lambda v: np.asarray(reduce(v, dtype=np.float64), np.float32).reshape(1, 1, 1, 1), losses
    )
    return output_like(op, shards, x, layout=Layout.TILE, memory_config=memory_config or DRAM_MEMORY_CONFIG)


@register_backward("ttnn.cross_entropy_loss")
def _cross_entropy_backward(ctx, grad):
    x, t = ctx.args["logits"], ctx.args["target"]
    red = _reduction(ctx.op_name, ctx.args["reduction"])
    rows = math.prod(x.shape[:-1])
    ids = _class_ids(ctx.op_name, t, rows, x.shape[-1])
    scaler = 1.0 / rows if red == "mean" else 1.0

    def one(xs, ts, gs):
        scale = gs.reshape(-1) * np.float32(scaler) if red != "none" else gs.reshape(rows)
        return _tk.cross_entropy_backward(xs, ts, scale)

    return {
        "logits": _grad(ctx, x, per_device(one, _arrays(x, ctx.op_name), ids, _arrays(grad, ctx.op_name)))
    }


def _pointwise_loss(op: str, pred, target, reduction, memory_config, kind: int) -> Tensor:
    """kind 0: squared error, kind 1: absolute error (the fused kernel ``_kernels.training.pointwise_loss``)."""
    p = _float(op, "pred", pred)
    t = _float(op, "target", target)
    same_mesh(op, pred=p, target=t)
    expect(
        tuple(p.shape) == tuple(t.shape), op, "target", f"the shape of pred {list(p.shape)}", list(t.shape)
    )
    red = _reduction(op, reduction)
    check_memory_config(op, memory_config)
    vals = per_device(lambda a, b: _tk.pointwise_loss(a, b, kind), _arrays(p, op), _arrays(t, op))
    if red == "none":
        return output_like(op, vals, p, memory_config=memory_config)
    reduce = np.mean if red == "mean" else np.sum
    shards = per_device(
        lambda v: np.asarray(reduce(v, dtype=np.float64), np.float32).reshape(1, 1, 1, 1), vals
    )
    return output_like(op, shards, p, memory_config=memory_config or DRAM_MEMORY_CONFIG)


def _pointwise_loss_backward(ctx, grad, kind: int):
    p, t = ctx.args["pred"], ctx.args["target"]
    red = _reduction(ctx.op_name, ctx.args["reduction"])
    scaler = np.float32(1.0 / p.volume if red == "mean" else 1.0)

    def one(a, b, g):
        if red == "none":
            return _tk.pointwise_loss_backward(a, b, g, 1.0, kind)
        return _tk.pointwise_loss_backward(a, b, None, np.float32(g.reshape(()) * scaler), kind)

    dp = per_device(one, _arrays(p, ctx.op_name), _arrays(t, ctx.op_name), _arrays(grad, ctx.op_name))
    out = {}
    if ctx.needs_grad("pred"):
        out["pred"] = _grad(ctx, p, dp)
    if ctx.needs_grad("target"):
        out["target"] = _grad(ctx, t, [-d for d in dp])
    return out


@ttnn_op("ttnn.mse_loss")
def mse_loss(
    pred: Tensor, target: Tensor, *, reduction="mean", memory_config: MemoryConfig | None = None
) -> Tensor:
    """Squared error ``(pred − target)²``, reduced by ``"mean"`` (default) / ``"sum"`` to ``[1, 1, 1, 1]`` or kept
    elementwise (``"none"``). Backward: ``2·(pred − target)·upstream·scaler`` (and its negative for target)."""
    return _pointwise_loss("ttnn.mse_loss", pred, target, reduction, memory_config, 0)


@ttnn_op("ttnn.l1_loss")
def l1_loss(
    pred: Tensor, target: Tensor, *, reduction="mean", memory_config: MemoryConfig | None = None
) -> Tensor:
    """Absolute error ``|pred − target|``, reduced like :func:`mse_loss`. Backward: ``sign(pred − target)``
    (0 where equal, as torch) times the upstream gradient and scaler."""
    return _pointwise_loss("ttnn.l1_loss", pred, target, reduction, memory_config, 1)


register_backward("ttnn.mse_loss")(lambda ctx, grad: _pointwise_loss_backward(ctx, grad, 0))
register_backward("ttnn.l1_loss")(lambda ctx, grad: _pointwise_loss_backward(ctx, grad, 1))


# --- log-softmax -----------------------------------------------------------------------------------------------------


def _axis(op: str, dim, rank: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -rank <= dim < rank:
        raise op_error(op, "dim", f"a dim in [{-rank}, {rank - 1}]", repr(dim))
    return int(dim) % rank


def _along(fn, axis: int):
    """Apply a last-dim row kernel along ``axis``."""

    def run(*arrays):
        moved = [np.ascontiguousarray(np.moveaxis(a, axis, -1)) for a in arrays]
        return np.ascontiguousarray(np.moveaxis(fn(*moved), -1, axis))

    return run


@ttnn_op("ttnn.log_softmax")
def log_softmax(x: Tensor, dim: int = -1, *, memory_config: MemoryConfig | None = None) -> Tensor:
    """Numerically stable ``x − max − log Σ exp(x − max)`` along ``dim``. Backward: ``dy − exp(y)·Σdy``."""
    op = "ttnn.log_softmax"
    t = _float(op, "x", x)
    axis = _axis(op, dim, len(t.shape))
    check_memory_config(op, memory_config)
    return output_like(
        op, per_device(_along(_tk.log_softmax, axis), _arrays(t, op)), t, memory_config=memory_config
    )


@register_backward("ttnn.log_softmax")
def _log_softmax_backward(ctx, grad):
    x = ctx.args["x"]
    axis = int(ctx.args["dim"]) % len(x.shape)
    y = ctx.output
    if y is not None and y.dtype is DataType.FLOAT32:
        ys = _arrays(y, ctx.op_name)
    else:  # a bfloat16 output lost precision: recompute y in float32
        ys = per_device(_along(_tk.log_softmax, axis), _arrays(x, ctx.op_name))
    dx = per_device(_along(_tk.log_softmax_backward, axis), ys, _arrays(grad, ctx.op_name))
    return {"x": _grad(ctx, x, dx)}


# --- norms with statistics --------------------------------------------------------------------------------------------


@ttnn_op("ttnn.rms_norm_forward")
def rms_norm_forward(
    x: Tensor,
    weight: Tensor | None,
    *,
    epsilon: float = 1e-6,
    return_intermediates: bool = True,
    memory_config: MemoryConfig | None = None,
):
    """RMSNorm over the last dim (TTML's ``rmsnorm_fw``): ``y = x / rms · weight``, ``rms = sqrt(mean(x²) + ε)``.

    Returns ``(y, rms)`` with ``rms [..., S, 1]`` float32, or ``y`` alone with ``return_intermediates=False``
    (the backward then recomputes rms). ``weight``: ``[1, 1, 1, C]`` or None. Backward: ``g = weight·dy/rms``,
    ``dx = g − x·Σ(x·g)/(C·rms²)``, ``dweight = Σ_rows dy·x/rms`` (a gradient reaching ``rms`` adds
    ``d rms · x/(C·rms)``).
    """
    op = "ttnn.rms_norm_forward"
    t = _float(op, "x", x)
    w = _weight(op, "weight", weight, t.shape[-1])
    same_mesh(op, x=t, weight=w)
    eps = _number(op, "epsilon", epsilon, low=0.0)
    inter = _flag(op, "return_intermediates", return_intermediates)
    check_memory_config(op, memory_config)
    ys, rms = _unzip(
        per_device(
            lambda a, g: _tk.rms_norm_forward(a, g, eps),
            _arrays(t, op),
            _vector(w, op) or [None] * t.num_shards,
        ),
        2,
    )
    y = output_like(op, ys, t, memory_config=memory_config)
    return (y, _stat_output(op, rms, t, None)) if inter else y


@register_backward("ttnn.rms_norm_forward")
def _rms_norm_backward(ctx, grads):
    op = ctx.op_name
    x, w = ctx.args["x"], ctx.args["weight"]
    eps = float(ctx.args["epsilon"])
    outputs = ctx.output if isinstance(ctx.output, tuple) else None
    gy, grms = grads if isinstance(grads, tuple) else (grads, None)
    xs = _arrays(x, op)
    n = len(xs)
    rms = _arrays(outputs[1], op) if outputs is not None else [None] * n
    gys = _arrays(gy, op) if gy is not None else _zeros_like_shards(x, op)
    grms_s = _arrays(grms, op) if grms is not None else [None] * n

    def one(xa, wa, ra, ga, gr):
        dx, dw = _tk.rms_norm_backward(xa, wa, ra, ga, eps)
        if gr is not None:
            r = ra if ra is not None else _tk.rms_norm_forward(xa, None, eps)[1]
            dx = dx + gr * xa / (np.float32(xa.shape[-1]) * r)
        return dx, dw

    dx, dw = _unzip(per_device(one, xs, _vector(w, op) or [None] * n, rms, gys, grms_s), 2)
    out = {"x": _grad(ctx, x, dx)}
    if ctx.needs_grad("weight"):
        out["weight"] = _weight_grad(ctx, "weight", dw)
    return out


@ttnn_op("ttnn.layer_norm_forward")
def layer_norm_forward(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    *,
    epsilon: float = 1e-5,
    return_intermediates: bool = True,
    memory_config: MemoryConfig | None = None,
):
    """LayerNorm over the last dim (TTML's ``layernorm_fw``): ``y = (x − mean)·rstd·weight + bias``.

    Returns ``(y, mean, rstd)`` (statistics ``[..., S, 1]`` float32), or ``y`` with ``return_intermediates=False``.
    Backward (``x̂ = (x − mean)·rstd``, ``g = dy·weight``): ``dx = rstd·(g − mean(g) − x̂·mean(g·x̂))``,
    ``dweight = Σ_rows dy·x̂``, ``dbias = Σ_rows dy`` (gradients reaching mean / rstd are chained too).
    """
    op = "ttnn.layer_norm_forward"
    t = _float(op, "x", x)
    w = _weight(op, "weight", weight, t.shape[-1])
    b = _weight(op, "bias", bias, t.shape[-1])
    same_mesh(op, x=t, weight=w, bias=b)
    eps = _number(op, "epsilon", epsilon, low=0.0)
    inter = _flag(op, "return_intermediates", return_intermediates)
    check_memory_config(op, memory_config)
    n = t.num_shards
    ys, mean, rstd = _unzip(
        per_device(
            lambda a, g, c: _tk.layer_norm_forward(a, g, c, eps),
            _arrays(t, op),
            _vector(w, op) or [None] * n,
            _vector(b, op) or [None] * n,
        ),
        3,
    )
    y = output_like(op, ys, t, memory_config=memory_config)
    return (y, _stat_output(op, mean, t, None), _stat_output(op, rstd, t, None)) if inter else y


@register_backward("ttnn.layer_norm_forward")
def _layer_norm_backward(ctx, grads):
    op = ctx.op_name
    x, w = ctx.args["x"], ctx.args["weight"]
    eps = float(ctx.args["epsilon"])
    outputs = ctx.output if isinstance(ctx.output, tuple) else None
    gy, gmean, grstd = grads if isinstance(grads, tuple) else (grads, None, None)
    xs = _arrays(x, op)
    n = len(xs)
    means = _arrays(outputs[1], op) if outputs is not None else [None] * n
    rstds = _arrays(outputs[2], op) if outputs is not None else [None] * n
    gys = _arrays(gy, op) if gy is not None else _zeros_like_shards(x, op)

    def one(xa, wa, ma, ra, ga, gm, gr):
        dx, dw, db = _tk.layer_norm_backward(xa, wa, ma, ra, ga, eps)
        if gm is not None or gr is not None:
            if ma is None:
                _, ma, ra = _tk.layer_norm_forward(xa, None, None, eps)
            c = np.float32(xa.shape[-1])
            if gm is not None:
                dx = dx + gm / c
            if gr is not None:
                dx = dx - gr * ra * ra * ra * (xa - ma) / c
        return dx, dw, db

    dx, dw, db = _unzip(
        per_device(
            one,
            xs,
            _vector(w, op) or [None] * n,
            means,
            rstds,
            gys,
            _arrays(gmean, op) if gmean is not None else [None] * n,
            _arrays(grstd, op) if grstd is not None else [None] * n,
        ),
        3,
    )
    out = {"x": _grad(ctx, x, dx)}
    if ctx.needs_grad("weight"):
        out["weight"] = _weight_grad(ctx, "weight", dw)
    if ctx.needs_grad("bias"):
        out["bias"] = _weight_grad(ctx, "bias", db)
    return out


# --- SiLU backward and SwiGLU ------------------------------------------------------------------------------------------


@ttnn_op("ttnn.silu_bw")
def silu_bw(
    grad_tensor: Tensor, input_tensor: Tensor, *, memory_config: MemoryConfig | None = None
) -> list[Tensor]:
    """Gradient of ``silu`` at ``input_tensor``: ``[grad · σ(x) · (1 + x·(1 − σ(x)))]`` — a one-element list, as
    ttnn's backward ops return. Differentiable again (second order: ``∂/∂x = grad · silu''(x)``)."""
    op = "ttnn.silu_bw"
    g = _float(op, "grad_tensor", grad_tensor)
    x = _float(op, "input_tensor", input_tensor)
    same_mesh(op, grad_tensor=g, input_tensor=x)
    expect(
        tuple(g.shape) == tuple(x.shape),
        op,
        "grad_tensor",
        f"the shape of input_tensor {list(x.shape)}",
        list(g.shape),
    )
    check_memory_config(op, memory_config)
    dx = per_device(_tk.silu_backward, _arrays(x, op), _arrays(g, op))
    return [output_like(op, dx, x, memory_config=memory_config)]


@register_backward("ttnn.silu_bw")
def _silu_bw_backward(ctx, grads):
    op = ctx.op_name
    g, x = ctx.args["grad_tensor"], ctx.args["input_tensor"]
    up = grads[0]

    def one(xa, ga, ua):
        with np.errstate(over="ignore"):
            s = (1.0 / (1.0 + np.exp(-xa))).astype(np.float32)
        first = s * (1.0 + xa * (1.0 - s))  # silu'
        second = s * (1.0 - s) * (2.0 + xa * (1.0 - 2.0 * s))  # silu''
        return ua * first, ua * ga * second

    dg, dx = _unzip(per_device(one, _arrays(x, op), _arrays(g, op), _arrays(up, op)), 2)
    out = {}
    if ctx.needs_grad("grad_tensor"):
        out["grad_tensor"] = _grad(ctx, g, dg)
    if ctx.needs_grad("input_tensor"):
        out["input_tensor"] = _grad(ctx, x, dx)
    return out


def _matrix(op: str, arg: str, value, rows: int | None) -> tuple[Tensor, tuple[int, int]]:
    w = _float(op, arg, value)
    shape = list(w.shape)
    if len(shape) < 2 or any(d != 1 for d in shape[:-2]) or (rows is not None and shape[-2] != rows):
        want = f"[1, 1, {rows if rows is not None else 'in'}, out]"
        raise op_error(op, arg, f"a {want} weight (stored [in, out])", shape)
    return w, (shape[-2], shape[-1])


@ttnn_op("ttnn.swiglu")
def swiglu(
    x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor, *, memory_config: MemoryConfig | None = None
) -> Tensor:
    """SwiGLU MLP ``(silu(x·w1) ⊙ (x·w3))·w2`` with weights stored ``[in, out]`` (TTML's layout):
    x ``[B, 1, S, E]``, w1/w3 ``[1, 1, E, H]``, w2 ``[1, 1, H, E]``. Backward recomputes ``x·w1``, ``x·w3`` and the gate.
    Products run in float32 (per device: tensor-parallel weights give partial sums, as on hardware)."""
    op = "ttnn.swiglu"
    t = _float(op, "x", x)
    e = t.shape[-1]
    m1, (_, h) = _matrix(op, "w1", w1, e)
    m3, (_, h3) = _matrix(op, "w3", w3, e)
    expect(h3 == h, op, "w3", f"[1, 1, {e}, {h}] (the shape of w1)", list(m3.shape))
    m2, _ = _matrix(op, "w2", w2, h)
    same_mesh(op, x=t, w1=m1, w2=m2, w3=m3)
    check_memory_config(op, memory_config)

    def run(a, p1, p2, p3):
        return _tk.swiglu_forward(
            a, p1.reshape(p1.shape[-2:]), p2.reshape(p2.shape[-2:]), p3.reshape(p3.shape[-2:])
        )

    ys = per_device(run, _arrays(t, op), _arrays(m1, op), _arrays(m2, op), _arrays(m3, op))
    return output_like(op, ys, t, memory_config=memory_config)


@register_backward("ttnn.swiglu")
def _swiglu_backward(ctx, grad):
    op = ctx.op_name
    names = ("x", "w1", "w2", "w3")
    tensors = [ctx.args[n] for n in names]

    def run(a, p1, p2, p3, g):
        return _tk.swiglu_backward(
            a, p1.reshape(p1.shape[-2:]), p2.reshape(p2.shape[-2:]), p3.reshape(p3.shape[-2:]), g
        )

    parts = _unzip(per_device(run, *[_arrays(t, op) for t in tensors], _arrays(grad, op)), 4)
    return {n: _grad(ctx, t, p) for n, t, p in zip(names, tensors, parts) if ctx.needs_grad(n)}


# --- attention ------------------------------------------------------------------------------------------------------------


def _attention_args(op, q, k, v, attn_mask, scale, dropout_probability, seed):
    qt = _float(op, "q", q, rank=4)
    kt = _float(op, "k", k, rank=4)
    vt = _float(op, "v", v, rank=4)
    mt = None if attn_mask is None else _float(op, "attn_mask", attn_mask, rank=4)
    same_mesh(op, q=qt, k=kt, v=vt, attn_mask=mt)
    b, hq, sq, d = qt.shape
    _, hkv, sk, dk = kt.shape
    expect(
        kt.shape[0] == b and dk == d,
        op,
        "k",
        f"[{b}, Hkv, Sk, {d}] (batch and head dim of q)",
        list(kt.shape),
    )
    expect(hq % hkv == 0, op, "k", f"a KV head count dividing the {hq} query heads", hkv)
    expect(tuple(vt.shape[:3]) == (b, hkv, sk), op, "v", f"[{b}, {hkv}, {sk}, Dv] (like k)", list(vt.shape))
    if mt is not None:
        full = (b, hq, sq, sk)
        ok = all(m in (1, f) for m, f in zip(mt.shape, full)) and mt.shape[-1] == sk
        expect(ok, op, "attn_mask", f"an additive mask broadcastable to {list(full)}", list(mt.shape))
    sc = 1.0 / math.sqrt(d) if scale is None else _number(op, "scale", scale)
    p = _number(op, "dropout_probability", dropout_probability, low=0.0, high=1.0, open_high=True)
    s = _integer(op, "seed", seed, low=0)
    return qt, kt, vt, mt, sc, p, s


@ttnn_op("ttnn.transformer.scaled_dot_product_attention_forward")
def scaled_dot_product_attention_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_probability: float = 0.0,
    seed: int = 0,
    return_intermediates: bool = False,
    memory_config: MemoryConfig | None = None,
):
    """Training attention (TTML's ``sdpa_fw``): q ``[B, Hq, S, D]``, k/v ``[B, Hkv, S, D]`` (GQA: query head h
    reads KV head ``h // (Hq/Hkv)``) → out ``[B, Hq, S, Dv]`` in q's dtype, or ``(out, lse)`` with
    ``return_intermediates=True`` (lse = log Σ exp(scores), ``[B, Hq, S, 1]`` float32).

    ``attn_mask`` is additive (0 keeps, −inf / −1e9 masks; shape broadcastable to ``[B, Hq, Sq, Sk]``, like
    ``ttnn.transformer.scaled_dot_product_attention``); ``is_causal`` masks keys after the query (top-left aligned,
    as torch); ``scale`` defaults to 1/√D. Dropout is applied to the probabilities: element ``(b, h, i, j)`` is kept
    iff the counter-based generator seeded by ``seed`` says so (see ``_kernels.training_reference``) and kept ones
    are scaled by ``1/(1 − p)``; the backward regenerates the same mask from the seed (nothing is stored). The mask
    is indexed by the per-device position, so every device draws the same pattern for the same seed.
    """
    op = "ttnn.transformer.scaled_dot_product_attention_forward"
    qt, kt, vt, mt, sc, p, s = _attention_args(op, q, k, v, attn_mask, scale, dropout_probability, seed)
    causal = _flag(op, "is_causal", is_causal)
    inter = _flag(op, "return_intermediates", return_intermediates)
    check_memory_config(op, memory_config)

    def run(qa, ka, va, ma):
        return _tk.sdpa_forward(qa, ka, va, ma, scale=sc, is_causal=causal, dropout_p=p, seed=s)

    n = qt.num_shards
    outs, lses = _unzip(
        per_device(run, _arrays(qt, op), _arrays(kt, op), _arrays(vt, op), _arrays(mt, op) or [None] * n), 2
    )
    out = output_like(op, outs, qt, memory_config=memory_config)
    return (out, _stat_output(op, lses, qt, None)) if inter else out


@register_backward("ttnn.transformer.scaled_dot_product_attention_forward")
def _sdpa_backward(ctx, grads):
    op = ctx.op_name
    if ctx.needs_grad("attn_mask"):
        raise op_error(
            op, "attn_mask", "a mask that does not require grad (no mask gradient)", "requires_grad=True"
        )
    args = ctx.args
    q, k, v, mask = args["q"], args["k"], args["v"], args["attn_mask"]
    d = q.shape[-1]
    sc = 1.0 / math.sqrt(d) if args["scale"] is None else float(args["scale"])
    outputs = ctx.output if isinstance(ctx.output, tuple) else None
    gout, glse = grads if isinstance(grads, tuple) else (grads, None)
    n = q.num_shards
    lse = _arrays(outputs[1], op) if outputs is not None else [None] * n
    gos = _arrays(gout, op) if gout is not None else _zeros_like_shards(ctx.output[0], op)

    def run(qa, ka, va, ma, la, ga, gl):
        return _tk.sdpa_backward(
            qa,
            ka,
            va,
            ga,
            ma,
            la,
            scale=sc,
            is_causal=bool(args["is_causal"]),
            dropout_p=float(args["dropout_probability"]),
            seed=int(args["seed"]),
            grad_lse=gl,
        )

    dq, dk, dv = _unzip(
        per_device(
            run,
            _arrays(q, op),
            _arrays(k, op),
            _arrays(v, op),
            _arrays(mask, op) or [None] * n,
            lse,
            gos,
            _arrays(glse, op) if glse is not None else [None] * n,
        ),
        3,
    )
    grads_by_name = {"q": (q, dq), "k": (k, dk), "v": (v, dv)}
    return {name: _grad(ctx, t, g) for name, (t, g) in grads_by_name.items() if ctx.needs_grad(name)}


# --- sampling and the profiler marker ---------------------------------------------------------------------------------------


@ttnn_op("ttnn.sample")
def sample(
    logits: Tensor, *, temperature: float = 1.0, seed: int = 0, memory_config: MemoryConfig | None = None
) -> Tensor:
    """Gumbel-max sampling (TTML's ``sample_op``): ``argmax(x/T + g)`` over the last dim with Gumbel noise
    ``g = −log(−log u)`` drawn from the counter-based generator seeded by ``seed`` (deterministic: same seed, same
    ids). ``temperature=0`` is greedy ``argmax(x)``. Returns uint32 ROW_MAJOR ids ``[..., 1]``; not differentiable."""
    op = "ttnn.sample"
    x = _float(op, "logits", logits, layouts=(Layout.TILE, Layout.ROW_MAJOR))
    temp = _number(op, "temperature", temperature, low=0.0)
    s = _integer(op, "seed", seed, low=0)
    check_memory_config(op, memory_config)
    ids = per_device(lambda a: _tk.gumbel_argmax(a, temp, s)[..., None], _arrays(x, op))
    return output_like(
        op,
        ids,
        x,
        dtype=DataType.UINT32,
        layout=Layout.ROW_MAJOR,
        memory_config=memory_config or DRAM_MEMORY_CONFIG,
    )


def _marker_label(*args, **kwargs) -> str:
    return str(kwargs.get("identifier", args[1] if len(args) > 1 else "profiler_no_op"))


@ttnn_op("ttnn.profiler_no_op", label=_marker_label)
def profiler_no_op(input_tensor: Tensor, identifier: str = "profiler_no_op") -> Tensor:
    """A named marker: returns ``input_tensor`` unchanged (a new tensor sharing its shards, no copy) and shows up in
    ``ttnn.OpTrace`` as ``("ttnn.profiler_no_op", shapes, identifier)``. Its backward passes the gradient through."""
    op = "ttnn.profiler_no_op"
    x = expect_tensor(op, "input_tensor", input_tensor)
    expect(isinstance(identifier, str), op, "identifier", "a str", repr(identifier))
    return Tensor(
        x.stored_shards(op),
        x.dtype,
        x.layout,
        x.device(),
        x.memory_config(),
        x.tensor_topology(),
        padded_shape=x._padded_shape,
        quantized=True,
        view_of=x,
    )


@register_backward("ttnn.profiler_no_op")
def _profiler_no_op_backward(ctx, grad):
    return {"input_tensor": grad}


# --- optimizer steps ------------------------------------------------------------------------------------------------------------


def _state(op: str, arg: str, value, param: Tensor, *, writable: bool) -> Tensor:
    t = _float(op, arg, value, layouts=(Layout.TILE, Layout.ROW_MAJOR))
    same_mesh(op, param=param, **{arg: t})
    expect(
        tuple(t.shape) == tuple(param.shape),
        op,
        arg,
        f"the shape of param {list(param.shape)}",
        list(t.shape),
    )
    if writable:
        expect(t is not param, op, arg, "a tensor other than param", "param itself")
    return t


def _bf16(**tensors: Tensor | None) -> tuple[str, ...]:
    return tuple(name for name, t in tensors.items() if t is not None and t.dtype is DataType.BFLOAT16)


@ttnn_op("ttnn.sgd_step_")
def sgd_step_(
    param: Tensor,
    grad: Tensor,
    momentum_buffer: Tensor | None = None,
    *,
    lr: float,
    momentum: float = 0.0,
    dampening: float = 0.0,
    nesterov: bool = False,
    weight_decay: float = 0.0,
    first_step: bool = False,
) -> Tensor:
    """Fused ``torch.optim.SGD`` step, in place on ``param`` (and ``momentum_buffer``), per device; returns ``param``.

    ``g = grad + wd·θ``; with ``momentum ≠ 0`` (a ``momentum_buffer`` tensor is then required):
    ``buf = g`` when ``first_step`` else ``μ·buf + (1 − dampening)·g``, and ``g = g + μ·buf`` (Nesterov) or ``buf``;
    ``θ = θ − lr·g``. The math is float32; bfloat16 parameters / buffers are rounded once when stored.
    """
    op = "ttnn.sgd_step_"
    p = _float(op, "param", param, layouts=(Layout.TILE, Layout.ROW_MAJOR))
    g = _state(op, "grad", grad, p, writable=False)
    lr = _number(op, "lr", lr, low=0.0)
    mom = _number(op, "momentum", momentum, low=0.0)
    damp = _number(op, "dampening", dampening)
    wd = _number(op, "weight_decay", weight_decay, low=0.0)
    nest = _flag(op, "nesterov", nesterov)
    first = _flag(op, "first_step", first_step)
    expect(
        not nest or (mom > 0 and damp == 0),
        op,
        "nesterov",
        "momentum > 0 and dampening = 0",
        f"momentum={mom:g}, dampening={damp:g}",
    )
    buf = None
    if mom != 0:
        expect(momentum_buffer is not None, op, "momentum_buffer", "a tensor when momentum != 0", "None")
        buf = _state(op, "momentum_buffer", momentum_buffer, p, writable=True)
    bf16 = _bf16(param=p, momentum_buffer=buf)
    grads = g.shards(op)
    for i in range(p.num_shards):
        with contextlib.ExitStack() as stack:
            _tk.sgd_step(
                stack.enter_context(p._updated_shard(i, op)),
                grads[i],
                None if buf is None else stack.enter_context(buf._updated_shard(i, op)),
                lr=lr,
                momentum=mom,
                dampening=damp,
                nesterov=nest,
                weight_decay=wd,
                first_step=first,
                bf16=bf16,
            )
    return p


@ttnn_op("ttnn.adamw_step_")
def adamw_step_(
    param: Tensor,
    grad: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    max_exp_avg_sq: Tensor | None = None,
    *,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    step: int,
    amsgrad: bool = False,
) -> Tensor:
    """Fused ``torch.optim.AdamW`` step ``step`` (≥ 1), in place on ``param`` and the state tensors; returns ``param``.

    ``θ = θ·(1 − lr·wd)``; ``m = lerp(m, g, 1 − β1)``; ``v = β2·v + (1 − β2)·g²``; with ``amsgrad``
    ``v̂ = max(max_exp_avg_sq, v)`` (stored); ``θ = θ − lr/(1 − β1^t) · m / (sqrt(v̂)/sqrt(1 − β2^t) + eps)``.
    The math is float32 in torch's order; bfloat16 tensors are rounded once when stored.
    """
    op = "ttnn.adamw_step_"
    p = _float(op, "param", param, layouts=(Layout.TILE, Layout.ROW_MAJOR))
    g = _state(op, "grad", grad, p, writable=False)
    m = _state(op, "exp_avg", exp_avg, p, writable=True)
    v = _state(op, "exp_avg_sq", exp_avg_sq, p, writable=True)
    expect(m is not v, op, "exp_avg_sq", "a tensor other than exp_avg", "exp_avg itself")
    lr = _number(op, "lr", lr, low=0.0)
    b1 = _number(op, "beta1", beta1, low=0.0, high=1.0, open_high=True)
    b2 = _number(op, "beta2", beta2, low=0.0, high=1.0, open_high=True)
    eps = _number(op, "eps", eps, low=0.0)
    wd = _number(op, "weight_decay", weight_decay, low=0.0)
    t = _integer(op, "step", step, low=1)
    ams = _flag(op, "amsgrad", amsgrad)
    vmax = None
    if ams:
        expect(max_exp_avg_sq is not None, op, "max_exp_avg_sq", "a tensor when amsgrad=True", "None")
        vmax = _state(op, "max_exp_avg_sq", max_exp_avg_sq, p, writable=True)
        expect(
            vmax is not m and vmax is not v, op, "max_exp_avg_sq", "its own tensor", "exp_avg or exp_avg_sq"
        )
    bf16 = _bf16(param=p, exp_avg=m, exp_avg_sq=v, max_exp_avg_sq=vmax)
    grads = g.shards(op)
    for i in range(p.num_shards):
        with contextlib.ExitStack() as stack:
            _tk.adamw_step(
                stack.enter_context(p._updated_shard(i, op)),
                grads[i],
                stack.enter_context(m._updated_shard(i, op)),
                stack.enter_context(v._updated_shard(i, op)),
                None if vmax is None else stack.enter_context(vmax._updated_shard(i, op)),
                lr=lr,
                beta1=b1,
                beta2=b2,
                eps=eps,
                weight_decay=wd,
                step=t,
                amsgrad=ams,
                bf16=bf16,
            )
    return p
