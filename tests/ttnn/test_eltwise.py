"""Elementwise ops against numpy references, per dtype, with broadcasting, fused activations and errors.

Tolerances: the reference is computed in float64 from the inputs as stored (already quantised); the op computes
in float32 and rounds its output to the output dtype, so the largest error allowed is half an output step:
float32 ≈ 1e-6 relative, bfloat16 2^-8 relative to the value, bfloat8_b 2^-7 of the largest magnitude of its
16-value block (bounded here by 2^-7 of the largest magnitude overall). PCC must be ≥ 0.9999 (0.999 bfloat8_b).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn.ops import eltwise

DTYPES = [ttnn.bfloat16, ttnn.float32, ttnn.bfloat8_b]
SHAPE = (1, 2, 32, 64)


def _tol(dtype, ref):
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    rel = {ttnn.float32: 2e-6, ttnn.bfloat16: 2.0**-8, ttnn.bfloat8_b: 2.0**-7}[dtype]
    return rel * scale * 1.01 + 1e-6


def _check(out_tensor, ref, dtype, composer=None):
    out = ttnn.to_numpy(out_tensor, mesh_composer=composer).astype(np.float64)
    assert out.shape == ref.shape
    assert np.abs(out - ref).max() <= _tol(dtype, ref), f"max error {np.abs(out - ref).max()}"
    if np.std(ref) > 0:
        assert pcc(ref, out) >= (0.999 if dtype is ttnn.bfloat8_b else 0.9999)


def _put(mesh, x, dtype, **kwargs):
    return ttnn.from_numpy(
        np.asarray(x, np.float32), dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh, **kwargs
    )


def _stored(t):
    return ttnn.to_numpy(t).astype(np.float64)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


UNARY = {
    "abs": (np.abs, "any"),
    "cos": (np.cos, "any"),
    "erf": (np.vectorize(math.erf), "any"),
    "exp": (np.exp, "any"),
    "gelu": (_gelu_tanh, "any"),
    "log": (np.log, "positive"),
    "neg": (np.negative, "any"),
    "reciprocal": (lambda x: 1 / x, "positive"),
    "relu": (lambda x: np.maximum(x, 0), "any"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "positive"),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "any"),
    "silu": (lambda x: x / (1 + np.exp(-x)), "any"),
    "sin": (np.sin, "any"),
    "softplus": (lambda x: np.log1p(np.exp(x)), "any"),
    "sqrt": (np.sqrt, "positive"),
    "square": (np.square, "any"),
    "tanh": (np.tanh, "any"),
}
BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "sub": np.subtract,
    "multiply": np.multiply,
    "mul": np.multiply,
    "divide": np.divide,
    "div": np.divide,
    "rsub": lambda a, b: b - a,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "squared_difference": lambda a, b: (a - b) ** 2,
    "pow": np.power,
}
COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "lt": np.less,
    "le": np.less_equal,
}
OTHER = {"clamp", "clip", "eqz", "where"}


def test_every_op_is_covered():
    assert set(eltwise.__all__) == set(UNARY) | set(BINARY) | set(COMPARE) | OTHER
    for name in eltwise.__all__:
        assert getattr(ttnn, name) is getattr(eltwise, name)


def _inputs(rng, domain="any", shape=SHAPE):
    x = rng.standard_normal(shape) * 2
    if domain == "positive":
        x = np.abs(x) + 0.1
    return x.astype(np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops(open_mesh, rng, dtype, name):
    mesh = open_mesh((1, 2))
    fn, domain = UNARY[name]
    t = _put(mesh, _inputs(rng, domain), dtype)
    out = getattr(ttnn, name)(t)
    assert out.dtype is dtype and out.shape == SHAPE and out.device() is mesh
    _check(out, fn(_stored(t)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops(open_mesh, rng, dtype, name):
    mesh = open_mesh((1, 2))
    domain = "positive" if name in ("divide", "div", "pow") else "any"
    a = _put(mesh, _inputs(rng, domain), dtype)
    b_values = _inputs(rng, "positive" if name in ("divide", "div") else "any") / (2 if name == "pow" else 1)
    b = _put(mesh, b_values, dtype)
    out = getattr(ttnn, name)(a, b)
    assert out.dtype is dtype
    _check(out, BINARY[name](_stored(a), _stored(b)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_comparisons(open_mesh, rng, dtype, name):
    mesh = open_mesh((1, 1))
    a = _put(mesh, np.round(_inputs(rng)), dtype)  # rounded: many equal pairs
    b = _put(mesh, np.round(_inputs(rng)), dtype)
    out = getattr(ttnn, name)(a, b)
    expected = COMPARE[name](_stored(a), _stored(b)).astype(np.float32)
    np.testing.assert_array_equal(ttnn.to_numpy(out), expected)
    scalar = getattr(ttnn, name)(a, 0.0)
    np.testing.assert_array_equal(ttnn.to_numpy(scalar), COMPARE[name](_stored(a), 0.0).astype(np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_on_either_side(open_mesh, rng, dtype):
    mesh = open_mesh((1, 1))
    a = _put(mesh, _inputs(rng), dtype)
    x = _stored(a)
    cases = [
        (ttnn.add(a, 1.5), x + 1.5),
        (ttnn.add(2, a), x + 2),
        (ttnn.subtract(a, 0.25), x - 0.25),
        (ttnn.multiply(a, np.float32(3.0)), x * 3),
        (ttnn.multiply(np.int64(2), a), x * 2),
        (ttnn.rsub(a, 2.0), 2.0 - x),
        (ttnn.divide(a, 4.0), x / 4),
        (ttnn.maximum(a, 0.5), np.maximum(x, 0.5)),
        (ttnn.pow(ttnn.abs(a), 2), np.abs(x) ** 2),
        (ttnn.pow(ttnn.abs(a), 0.5), np.sqrt(np.abs(x))),
    ]
    for out, ref in cases:
        assert out.dtype is dtype
        _check(out, ref, dtype)


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [
        ((1, 1, 32, 64), (1, 1, 1, 64)),
        ((1, 1, 32, 64), (1, 1, 32, 1)),
        ((2, 1, 32, 64), (1, 3, 32, 64)),
        ((1, 1, 1, 64), (1, 1, 32, 64)),
        ((32, 64), (1, 1, 32, 64)),
    ],
)
def test_broadcasting(open_mesh, rng, shape_a, shape_b):
    mesh = open_mesh((1, 1))
    a, b = (
        _put(mesh, _inputs(rng, shape=shape_a), ttnn.float32),
        _put(mesh, _inputs(rng, shape=shape_b), ttnn.float32),
    )
    out = ttnn.add(a, b)
    ref = _stored(a) + _stored(b)
    assert out.shape == ref.shape
    _check(out, ref, ttnn.float32)
    _check(ttnn.multiply(b, a), _stored(b) * _stored(a), ttnn.float32)


def test_gelu_modes_and_clamp(open_mesh, rng):
    mesh = open_mesh((1, 1))
    t = _put(mesh, _inputs(rng), ttnn.float32)
    x = torch.from_numpy(_stored(t))
    _check(ttnn.gelu(t), torch.nn.functional.gelu(x, approximate="tanh").numpy(), ttnn.float32)
    _check(ttnn.gelu(t, fast_and_approximate_mode=False), torch.nn.functional.gelu(x).numpy(), ttnn.float32)
    _check(ttnn.silu(t), torch.nn.functional.silu(x).numpy(), ttnn.float32)
    _check(ttnn.softplus(t), torch.nn.functional.softplus(x).numpy(), ttnn.float32)
    _check(ttnn.clamp(t, -0.5, 0.5), np.clip(_stored(t), -0.5, 0.5), ttnn.float32)
    _check(ttnn.clamp(t, min=0.0), np.maximum(_stored(t), 0), ttnn.float32)
    _check(ttnn.clip(t, max=0.25), np.minimum(_stored(t), 0.25), ttnn.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_where(open_mesh, rng, dtype):
    mesh = open_mesh((1, 2))
    cond = _put(mesh, (rng.standard_normal(SHAPE) > 0), dtype)
    a, b = _put(mesh, _inputs(rng), dtype), _put(mesh, _inputs(rng), dtype)
    c = _stored(cond) != 0
    _check(ttnn.where(cond, a, b), np.where(c, _stored(a), _stored(b)), dtype)
    _check(ttnn.where(cond, 1.0, 0.0), np.where(c, 1.0, 0.0), dtype)
    _check(ttnn.where(cond, a, -1.0), np.where(c, _stored(a), -1.0), dtype)


def test_per_device_shards(open_mesh, rng):
    mesh = open_mesh((1, 4))
    x, y = _inputs(rng, shape=(1, 1, 32, 128)), _inputs(rng, shape=(1, 1, 32, 32))
    a = _put(mesh, x, ttnn.float32, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    b = _put(mesh, y, ttnn.float32)  # replicated
    out = ttnn.multiply(a, b)
    assert out.shape == (1, 1, 32, 32) and out.tensor_topology() == a.tensor_topology()
    composer = ttnn.ConcatMeshToTensor(mesh, dim=3)
    ref = x.astype(np.float64) * np.tile(y, (1, 1, 1, 4))
    _check(out, ref, ttnn.float32, composer=composer)


# --- fused activations ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
@pytest.mark.parametrize(
    "acts", [[ttnn.UnaryOpType.SILU], ttnn.UnaryOpType.SILU, [ttnn.UnaryWithParam(ttnn.UnaryOpType.SILU)]]
)
def test_silu_gate(open_mesh, rng, dtype, acts):
    mesh = open_mesh((1, 2))
    a, b = _put(mesh, _inputs(rng), dtype), _put(mesh, _inputs(rng), dtype)
    fused = ttnn.mul(a, b, input_tensor_a_activations=acts, dtype=ttnn.bfloat16)
    xa, xb = _stored(a), _stored(b)
    ref = xa / (1 + np.exp(-xa)) * xb
    _check(fused, ref, ttnn.bfloat16)
    # one rounding (of the product), not two: at least as close as silu, round, multiply
    unfused = ttnn.to_numpy(ttnn.mul(ttnn.silu(a), b, dtype=ttnn.bfloat16))
    assert np.abs(ttnn.to_numpy(fused) - ref).mean() <= np.abs(unfused - ref).mean()


def test_activation_arguments(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a, b = _put(mesh, _inputs(rng), ttnn.float32), _put(mesh, _inputs(rng), ttnn.float32)
    xa, xb = _stored(a), _stored(b)
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    _check(ttnn.add(a, b, activations=[ttnn.UnaryOpType.RELU]), relu(xa + xb), ttnn.float32)
    _check(
        ttnn.add(a, b, activations=ttnn.UnaryWithParam(ttnn.UnaryOpType.RELU)), relu(xa + xb), ttnn.float32
    )
    _check(ttnn.add(a, b, activations="relu"), relu(xa + xb), ttnn.float32)
    _check(ttnn.mul(a, b, input_tensor_a_activations=[ttnn.UnaryOpType.RELU]), relu(xa) * xb, ttnn.float32)
    _check(ttnn.mul(a, b, input_tensor_b_activations=[ttnn.UnaryOpType.NEG]), -xa * xb, ttnn.float32)
    sig = 1 / (1 + np.exp(-xa))
    _check(
        ttnn.mul(a, b, input_tensor_a_activations=[ttnn.UnaryOpType.SIGMOID, ttnn.UnaryOpType.EXP]),
        np.exp(sig) * xb,
        ttnn.float32,
    )
    # SiLU on a with an activation on b, or with broadcasting, takes the general path
    silu = xa / (1 + np.exp(-xa))
    _check(
        ttnn.mul(
            a,
            b,
            input_tensor_a_activations=[ttnn.UnaryOpType.SILU],
            input_tensor_b_activations=[ttnn.UnaryOpType.IDENTITY],
        ),
        silu * xb,
        ttnn.float32,
    )
    _check(ttnn.mul(a, 2.0, input_tensor_a_activations=[ttnn.UnaryOpType.SILU]), silu * 2, ttnn.float32)
    _check(
        ttnn.mul(a, b, input_tensor_a_activations=[ttnn.UnaryOpType.SILU, ttnn.UnaryOpType.NEG]),
        -silu * xb,
        ttnn.float32,
    )
    gelu = ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0)
    _check(ttnn.add(a, b, activations=[gelu]), _gelu_tanh(xa + xb), ttnn.float32)
    for act, fn in [
        (ttnn.UnaryOpType.TANH, np.tanh),
        (ttnn.UnaryOpType.SQRT, np.sqrt),
        (ttnn.UnaryOpType.RSQRT, lambda v: 1 / np.sqrt(v)),
        (ttnn.UnaryOpType.RECIP, lambda v: 1 / v),
    ]:
        out = ttnn.mul(ttnn.abs(a), 1.0, activations=[act])
        _check(out, fn(np.abs(xa)), ttnn.float32)


# --- output arguments ------------------------------------------------------------------------------------------


def test_dtype_memory_config_and_output_tensor(open_mesh, rng):
    mesh = open_mesh((1, 2))
    a, b = _put(mesh, _inputs(rng), ttnn.bfloat16), _put(mesh, _inputs(rng), ttnn.bfloat16)
    ref = _stored(a) + _stored(b)
    out8 = ttnn.add(a, b, dtype=ttnn.bfloat8_b)
    assert out8.dtype is ttnn.bfloat8_b
    _check(out8, ref, ttnn.bfloat8_b)
    assert ttnn.add(a, b, dtype=ttnn.float32).dtype is ttnn.float32
    l1 = ttnn.add(a, b, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert l1.memory_config() == ttnn.L1_MEMORY_CONFIG
    sharded = ttnn.add(a, b, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert sharded.is_sharded() and sharded.shard_spec() is not None
    _check(sharded, ref, ttnn.bfloat16)
    assert ttnn.relu(a, memory_config=ttnn.L1_MEMORY_CONFIG).memory_config() == ttnn.L1_MEMORY_CONFIG
    # sharded inputs keep their config; a sharded spec does not carry over to a broadcast shape
    cfg = ttnn.create_sharded_memory_config(SHAPE, ttnn.CoreGrid(x=2, y=1), ttnn.ShardStrategy.WIDTH)
    s = _put(mesh, _inputs(rng), ttnn.bfloat16, memory_config=cfg)
    assert ttnn.add(s, s).memory_config() == cfg
    assert ttnn.add(s, 1.0).memory_config() == cfg
    row = _put(mesh, _inputs(rng, shape=(1, 1, 1, 64)), ttnn.bfloat16)
    assert ttnn.add(row, a).memory_config() == ttnn.DRAM_MEMORY_CONFIG
    # output_tensor receives the result
    dest = _put(mesh, np.zeros(SHAPE), ttnn.bfloat16)
    returned = ttnn.add(a, b, output_tensor=dest)
    assert returned is dest
    _check(dest, ref, ttnn.bfloat16)
    unary_dest = _put(mesh, np.zeros(SHAPE), ttnn.bfloat16)
    assert ttnn.neg(a, output_tensor=unary_dest) is unary_dest
    np.testing.assert_array_equal(ttnn.to_numpy(unary_dest), -ttnn.to_numpy(a))


def test_integer_and_host_operands(open_mesh):
    mesh = open_mesh((1, 1))
    i = ttnn.from_numpy(
        np.arange(32 * 32, dtype=np.int32).reshape(32, 32), layout=ttnn.TILE_LAYOUT, device=mesh
    )
    out = ttnn.add(i, 1)
    assert out.dtype is ttnn.int32
    np.testing.assert_array_equal(ttnn.to_numpy(out), np.arange(32 * 32).reshape(32, 32) + 1)
    f = _put(mesh, np.full((32, 32), 0.5), ttnn.bfloat16)
    mixed = ttnn.add(i, f)
    assert mixed.dtype is ttnn.bfloat16  # an integer and a float tensor give the float type
    assert ttnn.add(f, i).dtype is ttnn.bfloat16
    # host tensors work with host tensors
    ha, hb = ttnn.from_numpy(np.ones((2, 3), np.float32)), ttnn.from_numpy(np.full((2, 3), 2.0, np.float32))
    h = ttnn.add(ha, hb)
    assert h.device() is None and np.all(ttnn.to_numpy(h) == 3)
    assert np.all(ttnn.to_numpy(ttnn.exp(ttnn.from_numpy(np.zeros(3, np.float32)))) == 1)


def test_eqz_on_floats_and_on_topk_indices(open_mesh, rng):
    """``eqz``: 1 where the value is 0, in the input's dtype; tt-metal's Mixtral MoE applies it to the uint16
    indices of ``topk`` (which expert is at index 0) and typecasts the mask to bfloat16."""
    mesh = open_mesh((1, 2))
    f = _put(mesh, np.round(_inputs(rng)), ttnn.bfloat16)
    out = ttnn.eqz(f)
    assert out.dtype is ttnn.bfloat16
    np.testing.assert_array_equal(ttnn.to_numpy(out), (_stored(f) == 0).astype(np.float32))
    values = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    _top, indices = ttnn.topk(_put(mesh, values, ttnn.bfloat16), 32)
    mask = ttnn.eqz(indices)
    assert mask.dtype is indices.dtype
    expected = (ttnn.to_numpy(indices) == 0).astype(np.float32)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.typecast(mask, dtype=ttnn.bfloat16)), expected)
    assert expected.sum() > 0  # some rows have expert 0 among their top 32


# --- errors --------------------------------------------------------------------------------------------------


def test_errors(open_mesh, rng):
    mesh = open_mesh((1, 2))
    other = open_mesh((1, 2))
    a = _put(mesh, _inputs(rng), ttnn.bfloat16)
    with pytest.raises(
        ValidationError,
        match=r"ttnn\.add: input_tensor_b: expected a shape broadcastable to \[1, 2, 32, 64\], got \[1, 1, 32, 32\]",
    ):
        ttnn.add(a, _put(mesh, np.zeros((1, 1, 32, 32)), ttnn.bfloat16))
    with pytest.raises(
        ValidationError, match=r"ttnn\.multiply: input_tensor_b: expected a tensor on the same device"
    ):
        ttnn.multiply(a, _put(other, _inputs(rng), ttnn.bfloat16))
    with pytest.raises(ValidationError, match=r"ttnn\.add: input_tensor_b: .* got None"):
        ttnn.add(a, ttnn.from_numpy(_inputs(rng), dtype=ttnn.bfloat16))  # host with device
    with pytest.raises(
        ValidationError, match=r"ttnn\.where: true_value: expected a tensor on the same device"
    ):
        ttnn.where(a, _put(other, _inputs(rng), ttnn.bfloat16), 0.0)
    with pytest.raises(
        ValidationError,
        match=r"ttnn\.multiply: input_tensor_a_activations: expected a list of ttnn\.UnaryOpType",
    ):
        ttnn.multiply(a, a, input_tensor_a_activations=["bogus"])
    with pytest.raises(ValidationError, match=r"ttnn\.add: activations: expected"):
        ttnn.add(a, a, activations=[42])
    with pytest.raises(
        ValidationError, match=r"input_tensor_b: expected a ttnn\.Tensor or a Python scalar, got str"
    ):
        ttnn.add(a, "1")
    with pytest.raises(
        ValidationError,
        match=r"input_tensor_a: expected at least one ttnn\.Tensor operand, got int and float",
    ):
        ttnn.add(1, 2.0)
    with pytest.raises(ValidationError, match=r"memory_config: expected a ttnn\.MemoryConfig"):
        ttnn.add(a, a, memory_config="L1")
    with pytest.raises(ValidationError, match=r"ttnn\.add: dtype: expected a ttnn\.DataType"):
        ttnn.add(a, a, dtype="bfloat16")
    with pytest.raises(ValidationError, match=r"ttnn\.relu: input_tensor\.dtype: expected one of BFLOAT16"):
        ttnn.relu(ttnn.from_numpy(np.zeros((2, 2), np.int32), device=mesh))
    with pytest.raises(ValidationError, match=r"ttnn\.clamp: min/max: expected at least one bound"):
        ttnn.clamp(a)
    with pytest.raises(ValidationError, match=r"ttnn\.add: dtype: expected a dtype valid for ROW_MAJOR"):
        ttnn.add(
            _put(mesh, np.zeros((2, 2)), ttnn.float32).to_layout(ttnn.ROW_MAJOR_LAYOUT),
            1.0,
            dtype=ttnn.bfloat8_b,
        )
    with pytest.raises(
        ValidationError, match=r"ttnn\.sigmoid: input_tensor: expected a ttnn\.Tensor, got ndarray"
    ):
        ttnn.sigmoid(np.zeros(3))
    # output_tensor must match the result and live on the same mesh
    with pytest.raises(
        ValidationError,
        match=r"output_tensor: expected shape \[1, 2, 32, 64\] BFLOAT16, got \[1, 2, 32, 64\] FLOAT32",
    ):
        ttnn.add(a, a, output_tensor=_put(mesh, np.zeros(SHAPE), ttnn.float32))
    with pytest.raises(ValidationError, match=r"output_tensor: expected shape"):
        ttnn.add(a, a, output_tensor=_put(mesh, np.zeros((1, 1, 32, 64)), ttnn.bfloat16))
    with pytest.raises(
        ValidationError, match=r"ttnn\.add: output_tensor: expected a tensor on the inputs' device"
    ):
        ttnn.add(a, a, output_tensor=_put(open_mesh((1, 1)), np.zeros(SHAPE), ttnn.bfloat16))
    dead = _put(mesh, np.zeros(SHAPE), ttnn.bfloat16)
    dead.deallocate()
    with pytest.raises(
        ValidationError, match=r"ttnn\.add: output_tensor: the input tensor .* was deallocated"
    ):
        ttnn.add(a, a, output_tensor=dead)


def test_no_runtime_warnings_on_edge_values(open_mesh):
    mesh = open_mesh((1, 1))
    z = _put(mesh, np.zeros((32, 32)), ttnn.float32)
    assert np.all(np.isinf(ttnn.to_numpy(ttnn.reciprocal(z))))
    assert np.all(np.isneginf(ttnn.to_numpy(ttnn.log(z))))
    assert np.all(np.isnan(ttnn.to_numpy(ttnn.sqrt(ttnn.neg(ttnn.add(z, 1.0))))))
    assert np.all(np.isinf(ttnn.to_numpy(ttnn.exp(ttnn.add(z, 200.0)))))
    assert np.all(np.isnan(ttnn.to_numpy(ttnn.divide(z, z))))
    assert np.all(
        np.isnan(
            ttnn.to_numpy(ttnn.add(ttnn.neg(ttnn.add(z, 1.0)), 0.0, activations=[ttnn.UnaryOpType.SQRT]))
        )
    )
    big = _put(mesh, np.full((32, 32), -200.0), ttnn.bfloat16)
    assert np.all(ttnn.to_numpy(ttnn.mul(big, big, input_tensor_a_activations=[ttnn.UnaryOpType.SILU])) == 0)
