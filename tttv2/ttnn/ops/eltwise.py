"""Elementwise ops: binary arithmetic with broadcasting and fused activations, and unary math."""

from __future__ import annotations

import math

import numpy as np

from .. import _kernels
from ..errors import op_error
from ..memory import DRAM_MEMORY_CONFIG, MemoryConfig
from ..tensor import Tensor
from ..types import DataType, UnaryOpType, UnaryWithParam
from ._common import (
    activation_fn,
    check_output_mem_config,
    expect_tensor,
    map_shards,
    output_like,
    same_mesh,
    ttnn_op,
)

__all__ = [
    "abs",
    "add",
    "clamp",
    "clip",
    "cos",
    "div",
    "divide",
    "eq",
    "eqz",
    "erf",
    "exp",
    "ge",
    "gelu",
    "gt",
    "le",
    "log",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "multiply",
    "ne",
    "neg",
    "pow",
    "reciprocal",
    "relu",
    "rsqrt",
    "rsub",
    "sigmoid",
    "silu",
    "sin",
    "softplus",
    "sqrt",
    "square",
    "squared_difference",
    "sub",
    "subtract",
    "tanh",
    "where",
]
__experimental__: list[str] = []
__transformer__: list[str] = []
# the tt_lib era's ``ttnn.experimental.tensor`` ops (namespaces.py): (name there, function here)
__tt_lib_tensor__ = [("mul", "tt_lib_mul")]

_FLOAT_TYPES = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B, DataType.BFLOAT4_B)


def _activations(acts, op: str, arg: str):
    if acts is None:
        return None
    if isinstance(acts, (UnaryOpType, UnaryWithParam, str)):
        acts = [acts]
    try:
        return activation_fn(list(acts), op)
    except Exception as exc:
        raise op_error(op, arg, "a list of ttnn.UnaryOpType / UnaryWithParam", repr(acts)) from exc


def _write_output(
    op: str, result: Tensor, output_tensor: Tensor | None, name: str = "output_tensor"
) -> Tensor:
    """``output_tensor=`` (the argument ``name``) receives the result (ttnn writes in place); its shape and dtype
    must match."""
    if output_tensor is None:
        return result
    expect_tensor(op, name, output_tensor, on_device=False)
    if output_tensor.device() is not result.device():
        raise op_error(
            op, name, f"a tensor on the inputs' device ({result.device()})", output_tensor.device()
        )
    if tuple(output_tensor.shape) != tuple(result.shape) or output_tensor.dtype is not result.dtype:
        raise op_error(
            op,
            name,
            f"shape {list(result.shape)} {result.dtype.name}",
            f"{list(output_tensor.shape)} {output_tensor.dtype.name}",
        )
    shards = output_tensor.stored_shards(op)
    output_tensor._mark_modified(op)
    for i, shard in enumerate(result.stored_shards(op)):
        shards[i] = shard
    return output_tensor


def _binary(op: str, fn, a, b, *, dtype, memory_config, output_tensor, activations, a_acts, b_acts) -> Tensor:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise op_error(
            op,
            "input_tensor_a",
            "at least one ttnn.Tensor operand",
            f"{type(a).__name__} and {type(b).__name__}",
        )
    like = a if isinstance(a, Tensor) else b
    for name, t in (("input_tensor_a", a), ("input_tensor_b", b)):
        if isinstance(t, Tensor):
            expect_tensor(op, name, t, on_device=False)
        elif not isinstance(t, (int, float, np.floating, np.integer)):
            raise op_error(op, name, "a ttnn.Tensor or a Python scalar", type(t).__name__)
    same_mesh(
        op,
        input_tensor_a=a if isinstance(a, Tensor) else None,
        input_tensor_b=b if isinstance(b, Tensor) else None,
    )
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        try:
            out_shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        except ValueError:
            raise op_error(
                op, "input_tensor_b", f"a shape broadcastable to {list(a.shape)}", list(b.shape)
            ) from None
    else:
        out_shape = tuple(like.shape)
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    pre_a = _activations(a_acts, op, "input_tensor_a_activations")
    pre_b = _activations(b_acts, op, "input_tensor_b_activations")
    post = _activations(activations, op, "activations")
    silu_gate = (
        fn is np.multiply
        and isinstance(a, Tensor)
        and isinstance(b, Tensor)
        and tuple(a.shape) == tuple(b.shape)
        and _is_single_silu(a_acts)
        and b_acts is None
    )

    def compute(x, y):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if silu_gate:
                r = _kernels.silu_mul(
                    np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(y, dtype=np.float32)
                )
            else:
                xv = pre_a(np.asarray(x, dtype=np.float32)) if pre_a else x
                yv = pre_b(np.asarray(y, dtype=np.float32)) if pre_b else y
                r = fn(np.float32(xv) if np.isscalar(xv) else xv, np.float32(yv) if np.isscalar(yv) else yv)
            if post:
                r = post(np.asarray(r, dtype=np.float32))
        r = np.asarray(r, dtype=np.float32)
        return r if r.shape == out_shape else r.reshape(out_shape)

    shards = map_shards(compute, a, b)
    out_dtype = dtype if dtype is not None else _result_dtype(a, b)
    same_shape = tuple(like.shape) == tuple(out_shape)
    mem = memory_config if memory_config is not None else (like.memory_config() if same_shape else None)
    result = output_like(op, shards, like, dtype=out_dtype, memory_config=mem)
    return _write_output(op, result, output_tensor)


def _is_single_silu(acts) -> bool:
    if acts is None:
        return False
    if isinstance(acts, (UnaryOpType, UnaryWithParam)):
        acts = [acts]
    acts = list(acts)
    if len(acts) != 1:
        return False
    act = acts[0]
    kind = act.op_type if isinstance(act, UnaryWithParam) else act
    return kind is UnaryOpType.SILU


def _result_dtype(a, b) -> DataType:
    """ttnn keeps input a's dtype; an integer tensor combined with a float one gives the float type."""
    first = a if isinstance(a, Tensor) else b
    if not first.dtype.is_float and isinstance(b, Tensor) and b.dtype.is_float:
        return b.dtype
    return first.dtype


def _binary_op(name: str, fn):
    def op(
        input_tensor_a,
        input_tensor_b,
        *,
        dtype: DataType | None = None,
        memory_config: MemoryConfig | None = None,
        output_tensor: Tensor | None = None,
        activations=None,
        input_tensor_a_activations=None,
        input_tensor_b_activations=None,
        use_legacy=None,
        queue_id: int = 0,
        sub_core_grids=None,
    ) -> Tensor:
        return _binary(
            f"ttnn.{name}",
            fn,
            input_tensor_a,
            input_tensor_b,
            dtype=dtype,
            memory_config=memory_config,
            output_tensor=output_tensor,
            activations=activations,
            a_acts=input_tensor_a_activations,
            b_acts=input_tensor_b_activations,
        )

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` of two tensors (numpy broadcasting) or a tensor and a scalar."
    return ttnn_op(f"ttnn.{name}")(op)


def _compare(fn):
    return lambda x, y: fn(x, y).astype(np.float32)


add = _binary_op("add", np.add)
subtract = _binary_op("subtract", np.subtract)
sub = subtract
multiply = _binary_op("multiply", np.multiply)
mul = multiply
divide = _binary_op("divide", np.divide)
div = divide
rsub = _binary_op("rsub", lambda x, y: np.subtract(y, x))
maximum = _binary_op("maximum", np.maximum)
minimum = _binary_op("minimum", np.minimum)
squared_difference = _binary_op("squared_difference", lambda x, y: np.square(np.subtract(x, y)))
eq = _binary_op("eq", _compare(np.equal))
ne = _binary_op("ne", _compare(np.not_equal))
gt = _binary_op("gt", _compare(np.greater))
ge = _binary_op("ge", _compare(np.greater_equal))
lt = _binary_op("lt", _compare(np.less))
le = _binary_op("le", _compare(np.less_equal))


@ttnn_op("ttnn.experimental.tensor.mul")
def tt_lib_mul(
    input_a: Tensor,
    input_b: Tensor,
    fused_activations=None,
    output_mem_config: MemoryConfig = DRAM_MEMORY_CONFIG,
    output_dtype: DataType | None = None,
) -> Tensor:
    """The tt_lib era's ``ttnn.experimental.tensor.mul`` (tt-metal's T3000 Mixtral MLP): ``input_a * input_b``
    of two tensors of one shape (that API did not broadcast), ``fused_activations`` (a list of
    ``FusibleActivation`` / ``FusibleActivationWithParam``) applied to the product, the output in
    ``output_mem_config`` (default DRAM interleaved, that API's default, not the input's) and ``output_dtype``
    (default input_a's)."""
    op = "ttnn.experimental.tensor.mul"
    for name, t in (("input_a", input_a), ("input_b", input_b)):
        if not isinstance(t, Tensor):
            raise op_error(op, name, "a ttnn.Tensor (tt_lib's mul takes two tensors)", type(t).__name__)
    if tuple(input_a.shape) != tuple(input_b.shape):
        raise op_error(
            op,
            "input_b",
            f"the shape of input_a, {list(input_a.shape)} (tt_lib's binary ops do not broadcast)",
            list(input_b.shape),
        )
    check_output_mem_config(op, output_mem_config)
    return _binary(
        op,
        np.multiply,
        input_a,
        input_b,
        dtype=output_dtype,
        memory_config=output_mem_config,
        output_tensor=None,
        activations=fused_activations,
        a_acts=None,
        b_acts=None,
    )


@ttnn_op("ttnn.eqz")
def eqz(
    input_tensor: Tensor, *, memory_config: MemoryConfig | None = None, output_tensor=None, queue_id: int = 0
) -> Tensor:
    """1 where x == 0, else 0, in the input's dtype: float tensors and integer ones alike (tt-metal's Mixtral MoE
    applies it to ``ttnn.topk``'s uint16 indices to find the expert at index 0)."""
    expect_tensor("ttnn.eqz", "input_tensor", input_tensor, on_device=False)
    shards = map_shards(lambda v: (v == 0).astype(v.dtype), input_tensor)
    result = output_like("ttnn.eqz", shards, input_tensor, memory_config=memory_config)
    return _write_output("ttnn.eqz", result, output_tensor)


@ttnn_op("ttnn.pow")
def pow(
    input_tensor: Tensor, exponent, *, memory_config: MemoryConfig | None = None, output_tensor=None
) -> Tensor:
    """x ** exponent (scalar or tensor exponent)."""
    return _binary(
        "ttnn.pow",
        np.power,
        input_tensor,
        exponent,
        dtype=None,
        memory_config=memory_config,
        output_tensor=output_tensor,
        activations=None,
        a_acts=None,
        b_acts=None,
    )


# --- unary ---------------------------------------------------------------------------------------------------


def _unary(op: str, fn, x: Tensor, memory_config, output_tensor, dtype=None) -> Tensor:
    expect_tensor(op, "input_tensor", x, dtypes=_FLOAT_TYPES, on_device=False)

    def compute(v):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            return np.asarray(fn(v), dtype=np.float32)

    result = output_like(op, map_shards(compute, x), x, dtype=dtype, memory_config=memory_config)
    return _write_output(op, result, output_tensor)


def _unary_op(name: str, fn, doc: str):
    def op(
        input_tensor: Tensor,
        *,
        memory_config: MemoryConfig | None = None,
        output_tensor=None,
        queue_id: int = 0,
        **_ignored,
    ):
        return _unary(f"ttnn.{name}", fn, input_tensor, memory_config, output_tensor)

    op.__name__ = name
    op.__doc__ = doc
    return ttnn_op(f"ttnn.{name}")(op)


_silu = activation_fn(UnaryOpType.SILU, "ttnn.silu")
silu = _unary_op("silu", _silu, "x · sigmoid(x).")
relu = _unary_op("relu", lambda v: np.maximum(v, 0), "max(x, 0).")
sigmoid = _unary_op("sigmoid", lambda v: 1.0 / (1.0 + np.exp(-v)), "1 / (1 + e^-x).")
exp = _unary_op("exp", np.exp, "e^x.")
log = _unary_op("log", np.log, "Natural logarithm.")
reciprocal = _unary_op("reciprocal", lambda v: 1.0 / v, "1 / x.")
rsqrt = _unary_op("rsqrt", lambda v: 1.0 / np.sqrt(v), "1 / sqrt(x).")
sqrt = _unary_op("sqrt", np.sqrt, "Square root.")
neg = _unary_op("neg", np.negative, "−x.")
abs = _unary_op("abs", np.abs, "|x|.")
tanh = _unary_op("tanh", np.tanh, "Hyperbolic tangent.")
square = _unary_op("square", np.square, "x².")
sin = _unary_op("sin", np.sin, "Sine.")
cos = _unary_op("cos", np.cos, "Cosine.")
softplus = _unary_op("softplus", lambda v: np.logaddexp(0.0, v), "log(1 + e^x).")
erf = _unary_op("erf", np.vectorize(math.erf, otypes=[np.float32]), "Error function.")


@ttnn_op("ttnn.gelu")
def gelu(
    input_tensor: Tensor,
    *,
    fast_and_approximate_mode: bool = True,
    memory_config: MemoryConfig | None = None,
    output_tensor=None,
    queue_id: int = 0,
) -> Tensor:
    """GELU; the tanh approximation when ``fast_and_approximate_mode`` (ttnn's default), else the erf form."""
    fn = activation_fn(
        UnaryWithParam(UnaryOpType.GELU, 1.0 if fast_and_approximate_mode else None), "ttnn.gelu"
    )
    return _unary("ttnn.gelu", fn, input_tensor, memory_config, output_tensor)


@ttnn_op("ttnn.clamp")
def clamp(
    input_tensor: Tensor, min=None, max=None, *, memory_config: MemoryConfig | None = None, output_tensor=None
) -> Tensor:
    """Clip values to [min, max] (either bound may be None)."""
    if min is None and max is None:
        raise op_error("ttnn.clamp", "min/max", "at least one bound", "neither")
    return _unary("ttnn.clamp", lambda v: np.clip(v, min, max), input_tensor, memory_config, output_tensor)


clip = clamp


@ttnn_op("ttnn.where")
def where(
    condition: Tensor,
    true_value,
    false_value,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor=None,
) -> Tensor:
    """Elementwise select: ``true_value`` where condition != 0, else ``false_value`` (tensors or scalars)."""
    op = "ttnn.where"
    expect_tensor(op, "condition", condition, on_device=False)
    same_mesh(
        op,
        condition=condition,
        true_value=true_value if isinstance(true_value, Tensor) else None,
        false_value=false_value if isinstance(false_value, Tensor) else None,
    )
    like = true_value if isinstance(true_value, Tensor) else condition
    shards = map_shards(
        lambda c, t, f: np.where(c != 0, t, f).astype(np.float32), condition, true_value, false_value
    )
    result = output_like(op, shards, like, memory_config=memory_config)
    return _write_output(op, result, output_tensor)
