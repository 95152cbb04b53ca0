"""Every backward rule against torch autograd on random inputs and random upstream gradients.

The reference runs torch autograd in float64 on the values the ttnn inputs hold (already quantised to their
dtype). Tolerances, on the largest reference magnitude ``m`` of each gradient:

* float32 gradients: ``|err| <= 1e-4·m + 1e-5`` (rtol 1e-4; the rules compute in float32);
* bfloat16 gradients: ``|err| <= 1e-2·m + 1e-3`` plus PCC >= 0.999 (the rule's float32 result is rounded once
  to bfloat16, 2^-9 relative, and chains see bfloat16 intermediates);
* bfloat8_b leaves (their ``.grad`` is stored as bfloat8_b): ``|err| <= 2e-2·m + 1e-3`` plus PCC >= 0.999 (one
  rounding to 7 mantissa bits under the block's shared exponent, ≤ 2^-7 of the block's largest value).

Gradients must have the input's shape and topology (sharded stays sharded), and dtype bfloat16 for bfloat16
inputs, float32 otherwise (checked on the rules' outputs; a leaf's ``.grad`` is then cast to the leaf's dtype).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn.autograd import engine

F32, BF16, BF8 = ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b
TILE, RM = ttnn.TILE_LAYOUT, ttnn.ROW_MAJOR_LAYOUT
U = ttnn.UnaryOpType
RNG = np.random.default_rng(7)


# --- helpers -------------------------------------------------------------------------------------------------


def randn(*shape, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale, dtype=np.float32)


def leaf(mesh, arr, dtype=F32, layout=TILE, mc=None, dim=None, grad=True):
    mapper = None if dim is None else ttnn.ShardTensorToMesh(mesh, dim=dim)
    t = ttnn.from_numpy(
        np.asarray(arr, np.float32),
        dtype=dtype,
        layout=layout,
        device=mesh,
        memory_config=mc,
        mesh_mapper=mapper,
    )
    t.requires_grad = grad
    return t


def composer(t, dim):
    return None if dim is None else ttnn.ConcatMeshToTensor(t.device(), dim=dim)


def value(t, dim=None):
    return ttnn.to_numpy(t, mesh_composer=composer(t, dim)).astype(np.float64)


def ref(t, dim=None):
    return torch.tensor(value(t, dim), dtype=torch.float64, requires_grad=True)


def upstream(out, dim=None, scale=1.0):
    """A random upstream gradient for ``out`` (numpy, full shape) and its ttnn tensor distributed like out."""
    shape = list(out.shape)
    if dim is not None:
        shape[dim] *= out.device().get_num_devices()
    g = randn(*shape, scale=scale)
    mapper = None if dim is None else ttnn.ShardTensorToMesh(out.device(), dim=dim)
    gt = ttnn.from_numpy(g, dtype=F32, layout=out.layout, device=out.device(), mesh_mapper=mapper)
    return g, gt


def close(expected, actual, dtype=F32):
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    actual = np.asarray(actual, dtype=np.float64)
    assert expected.shape == actual.shape, (expected.shape, actual.shape)
    m = float(np.abs(expected).max()) if expected.size else 0.0
    rtol, atol = {BF16: (1e-2, 1e-3), BF8: (2e-2, 1e-3)}.get(dtype, (1e-4, 1e-5))
    err = float(np.abs(expected - actual).max()) if expected.size else 0.0
    assert err <= rtol * m + atol, f"max error {err} vs max |ref| {m}"
    if dtype in (BF16, BF8) and np.std(expected) > 0:
        assert pcc(expected, actual) >= 0.999


def check_grad(t, expected, dim=None):
    """``t.grad`` (a leaf) against the torch gradient: shape, topology, dtype, values."""
    assert t.grad is not None, "no gradient reached the leaf"
    assert t.grad.dtype is t.dtype and t.grad.layout is t.layout
    assert t.grad.tensor_topology() == t.tensor_topology()
    close(expected.grad if isinstance(expected, torch.Tensor) else expected, value(t.grad, dim), t.dtype)


def run(out, fn_ref, refs, dim=None):
    """Backward a random upstream gradient through ``out`` and through torch's ``fn_ref(*refs)``."""
    g, gt = upstream(out, dim)
    out.backward(gt)
    fn_ref(*refs).backward(torch.tensor(g, dtype=torch.float64))


@pytest.fixture
def mesh(open_mesh):
    return open_mesh((1, 1))


# --- elementwise binary ---------------------------------------------------------------------------------------

BINARY = {
    "add": torch.add,
    "subtract": torch.sub,
    "multiply": torch.mul,
    "divide": torch.div,
    "rsub": lambda a, b: b - a,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "squared_difference": lambda a, b: (a - b) ** 2,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_binary_broadcasting(mesh, name, dtype):
    a = leaf(mesh, randn(2, 3, 32, 64), dtype)
    b_np = randn(1, 3, 1, 64)
    if name == "divide":
        b_np = np.sign(b_np) * (np.abs(b_np) + 0.5)
    if name in ("maximum", "minimum"):
        b_np[..., :8] = value(a)[:1, :, :1, :8]  # ties split the gradient evenly
    b = leaf(mesh, b_np, dtype)
    ra, rb = ref(a), ref(b)
    run(getattr(ttnn, name)(a, b), BINARY[name], (ra, rb))
    check_grad(a, ra)
    check_grad(b, rb)


def test_binary_broadcast_rank_and_scalars(mesh):
    a = leaf(mesh, randn(2, 1, 32, 32))
    b = leaf(mesh, randn(32))  # lower rank: summed over the leading dims
    ra, rb = ref(a), ref(b)
    out = ttnn.multiply(ttnn.add(a, 2.0), ttnn.subtract(3.0, b))
    run(out, lambda x, y: (x + 2.0) * (3.0 - y), (ra, rb))
    check_grad(a, ra)
    check_grad(b, rb)
    c = leaf(mesh, np.abs(randn(1, 1, 32, 32)) + 0.5)
    rc = ref(c)
    out = ttnn.add(ttnn.divide(2.0, c), ttnn.rsub(ttnn.multiply(c, 0.5), 1.0))
    run(out, lambda x: 2.0 / x + (1.0 - 0.5 * x), (rc,))
    check_grad(c, rc)


def test_binary_only_one_side_requires_grad(mesh):
    a = leaf(mesh, randn(1, 1, 32, 32))
    b = leaf(mesh, randn(1, 1, 32, 32), grad=False)
    ra = ref(a)
    run(ttnn.multiply(a, b), lambda x: x * torch.tensor(value(b)), (ra,))
    check_grad(a, ra)
    assert b.grad is None


ACT = {
    U.SILU: torch.nn.functional.silu,
    U.RELU: torch.relu,
    U.SIGMOID: torch.sigmoid,
    U.EXP: torch.exp,
    U.TANH: torch.tanh,
    U.IDENTITY: lambda x: x,
    U.RECIP: torch.reciprocal,
    U.RSQRT: torch.rsqrt,
    U.SQRT: torch.sqrt,
    U.NEG: torch.neg,
}


@pytest.mark.parametrize("act", sorted(ACT, key=lambda a: a.name))
def test_fused_activations_each(mesh, act):
    positive = act in (U.RECIP, U.RSQRT, U.SQRT)
    a_np = np.abs(randn(1, 1, 32, 64)) + 0.5 if positive else randn(1, 1, 32, 64)
    a, b = leaf(mesh, a_np), leaf(mesh, randn(1, 1, 32, 64))
    ra, rb = ref(a), ref(b)
    out = ttnn.add(a, b, input_tensor_a_activations=[act], activations=[ttnn.UnaryWithParam(U.TANH)])
    run(out, lambda x, y: torch.tanh(ACT[act](x) + y), (ra, rb))
    check_grad(a, ra)
    check_grad(b, rb)


def test_fused_activation_chains_and_gelu(mesh):
    a, b = leaf(mesh, randn(1, 2, 32, 64)), leaf(mesh, randn(1, 2, 32, 64))
    ra, rb = ref(a), ref(b)
    # the fused silu-multiply kernel path, b activations, a post-activation chain, gelu both ways
    out = ttnn.multiply(
        a,
        b,
        input_tensor_a_activations=[U.SILU],
        input_tensor_b_activations=[ttnn.UnaryWithParam(U.GELU, 1.0)],
        activations=[ttnn.UnaryWithParam(U.GELU), U.SIGMOID],
    )

    def fn(x, y):
        z = torch.nn.functional.silu(x) * torch.nn.functional.gelu(y, approximate="tanh")
        return torch.sigmoid(torch.nn.functional.gelu(z))

    run(out, fn, (ra, rb))
    check_grad(a, ra)
    check_grad(b, rb)
    c, d = leaf(mesh, randn(1, 1, 32, 32)), leaf(mesh, randn(1, 1, 32, 32))
    rc, rd = ref(c), ref(d)
    run(
        ttnn.multiply(c, d, input_tensor_a_activations=U.SILU),
        lambda x, y: torch.nn.functional.silu(x) * y,
        (rc, rd),
    )
    check_grad(c, rc)
    check_grad(d, rd)


def test_pow(mesh):
    a = leaf(mesh, np.abs(randn(1, 1, 32, 32)) + 0.2)
    e = leaf(mesh, randn(1, 1, 32, 32, scale=0.5))
    ra, re = ref(a), ref(e)
    run(ttnn.add(ttnn.pow(a, 3.0), ttnn.pow(a, e)), lambda x, y: x**3.0 + x**y, (ra, re))
    check_grad(a, ra)
    check_grad(e, re)
    z = leaf(mesh, np.zeros((1, 1, 32, 32), np.float32))
    rz = ref(z)
    run(ttnn.pow(z, 0.0), lambda x: x**0.0, (rz,))
    check_grad(z, rz)


# --- unary --------------------------------------------------------------------------------------------------

UNARY = {
    "silu": (torch.nn.functional.silu, "any"),
    "relu": (torch.relu, "any"),
    "sigmoid": (torch.sigmoid, "any"),
    "exp": (torch.exp, "any"),
    "log": (torch.log, "positive"),
    "reciprocal": (torch.reciprocal, "positive"),
    "rsqrt": (torch.rsqrt, "positive"),
    "sqrt": (torch.sqrt, "positive"),
    "neg": (torch.neg, "any"),
    "abs": (torch.abs, "any"),
    "tanh": (torch.tanh, "any"),
    "square": (torch.square, "any"),
    "sin": (torch.sin, "any"),
    "cos": (torch.cos, "any"),
    "softplus": (torch.nn.functional.softplus, "any"),
    "erf": (torch.erf, "any"),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_unary(mesh, name, dtype):
    fn, domain = UNARY[name]
    x_np = np.abs(randn(1, 2, 32, 32)) + 0.3 if domain == "positive" else randn(1, 2, 32, 32)
    x = leaf(mesh, x_np, dtype)
    rx = ref(x)
    run(getattr(ttnn, name)(x), fn, (rx,))
    check_grad(x, rx)


def test_gelu_clamp_where(mesh):
    x = leaf(mesh, randn(1, 1, 32, 64, scale=2.0))
    rx = ref(x)

    def fn(v):
        a = torch.nn.functional.gelu(v, approximate="tanh") + torch.nn.functional.gelu(v)
        return a + torch.clamp(v, -0.5, 0.7) + torch.clamp(v, min=0.1) + torch.clamp(v, max=-0.2)

    out = ttnn.add(
        ttnn.add(ttnn.gelu(x), ttnn.gelu(x, fast_and_approximate_mode=False)),
        ttnn.add(ttnn.add(ttnn.clamp(x, -0.5, 0.7), ttnn.clamp(x, min=0.1)), ttnn.clamp(x, max=-0.2)),
    )
    run(out, fn, (rx,))
    check_grad(x, rx)
    cond_np = (randn(1, 1, 32, 64) > 0).astype(np.float32)
    cond = leaf(mesh, cond_np, grad=False)
    t, f = leaf(mesh, randn(1, 1, 32, 64)), leaf(mesh, randn(1, 1, 1, 64))
    rt, rf = ref(t), ref(f)
    mask = torch.tensor(cond_np != 0)
    run(ttnn.where(cond, t, f), lambda a, b: torch.where(mask, a, b), (rt, rf))
    check_grad(t, rt)
    check_grad(f, rf)
    only_false = leaf(mesh, randn(1, 1, 32, 64))
    ro = ref(only_false)
    run(
        ttnn.where(cond, 1.0, only_false),
        lambda b: torch.where(mask, torch.tensor(1.0, dtype=b.dtype), b),
        (ro,),
    )
    check_grad(only_false, ro)


# --- matmul ---------------------------------------------------------------------------------------------------


def _op(x, transpose):
    return x.transpose(-1, -2) if transpose else x


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("weight_batch", [(2, 3), (1, 3), ()])
def test_matmul_transposes_batched(mesh, ta, tb, weight_batch):
    m, k, n = 32, 64, 96
    a = leaf(mesh, randn(2, 3, *((k, m) if ta else (m, k))))
    b = leaf(mesh, randn(*weight_batch, *((n, k) if tb else (k, n))))
    ra, rb = ref(a), ref(b)
    out = ttnn.matmul(a, b, transpose_a=ta, transpose_b=tb)
    run(out, lambda x, w: _op(x, ta) @ _op(w, tb), (ra, rb))
    check_grad(a, ra)
    check_grad(b, rb)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_linear_bias_activation(mesh, dtype):
    x = leaf(mesh, randn(1, 2, 32, 64), dtype)
    w = leaf(mesh, randn(96, 64, scale=0.2), dtype)
    bias = leaf(mesh, randn(1, 1, 1, 96), dtype)
    rx, rw, rbias = ref(x), ref(w), ref(bias)
    out = ttnn.linear(x, w, bias=bias, transpose_b=True, activation="silu")
    run(out, lambda a, b, c: torch.nn.functional.silu(a @ b.T + c), (rx, rw, rbias))
    for t, r in ((x, rx), (w, rw), (bias, rbias)):
        check_grad(t, r)


def test_linear_row_bias_and_program_config_activation(mesh):
    x = leaf(mesh, randn(1, 1, 32, 64))
    w = leaf(mesh, randn(64, 64, scale=0.2))
    rows = leaf(mesh, randn(1, 1, 32, 64))  # one bias row per output row
    rx, rw, rr = ref(x), ref(w), ref(rows)
    run(ttnn.linear(x, w, bias=rows), lambda a, b, c: a @ b + c, (rx, rw, rr))
    for t, r in ((x, rx), (w, rw), (rows, rr)):
        check_grad(t, r)
    x2 = leaf(mesh, randn(1, 1, 32, 64))
    flat_bias = leaf(mesh, randn(64))
    rx2, rf = ref(x2), ref(flat_bias)
    cfg = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=ttnn.CoreCoord(2, 1),
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        fuse_batch=True,
        fused_activation=ttnn.UnaryWithParam(U.RELU),
        mcast_in0=True,
    )
    wt = w.detach()
    run(
        ttnn.linear(x2, wt, bias=flat_bias, program_config=cfg),
        lambda a, c: torch.relu(a @ torch.tensor(value(wt)) + c),
        (rx2, rf),
    )
    check_grad(x2, rx2)
    check_grad(flat_bias, rf)


def test_minimal_matmul(mesh):
    x, w, b = leaf(mesh, randn(1, 1, 64, 64)), leaf(mesh, randn(1, 1, 64, 32)), leaf(mesh, randn(1, 1, 1, 32))
    rx, rw, rb = ref(x), ref(w), ref(b)
    run(ttnn.experimental.minimal_matmul(x, w, bias_tensor=b), lambda a, c, d: a @ c + d, (rx, rw, rb))
    for t, r in ((x, rx), (w, rw), (b, rb)):
        check_grad(t, r)


# --- reductions -----------------------------------------------------------------------------------------------

REDUCE = {
    "sum": lambda x, d, k: x.sum(dim=d, keepdim=k) if d is not None else x.sum(),
    "mean": lambda x, d, k: x.mean(dim=d, keepdim=k) if d is not None else x.mean(),
    "max": lambda x, d, k: x.amax(dim=d, keepdim=k) if d is not None else x.amax(),
    "min": lambda x, d, k: x.amin(dim=d, keepdim=k) if d is not None else x.amin(),
    "var": lambda x, d, k: x.var(dim=d, keepdim=k, correction=1),
    "std": lambda x, d, k: x.std(dim=d, keepdim=k, correction=1),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("dim,keepdim", [(-1, True), ((1, 2), False), (None, False)])
def test_reductions(mesh, name, dim, keepdim):
    x_np = randn(2, 3, 4, 32)
    x_np[0, 0, 0, :4] = 5.0  # a tie at the maximum
    x_np[1, 2, 3, 5:7] = -6.0  # and at the minimum
    x = leaf(mesh, x_np, layout=RM)
    rx = ref(x)
    tdim = None if dim is None else (list(dim) if isinstance(dim, tuple) else dim)
    if name in ("var", "std") and dim is None:
        tdim = [0, 1, 2, 3]
    out = getattr(ttnn, name)(x, dim=dim, keepdim=keepdim)
    run(out, lambda v: REDUCE[name](v, tdim, keepdim), (rx,))
    check_grad(x, rx)


def test_reduction_scalar_and_uncorrected(mesh):
    x = leaf(mesh, randn(1, 1, 8, 32), layout=RM)
    rx = ref(x)
    out = ttnn.add(ttnn.sum(x, dim=-1, scalar=0.5), ttnn.std(x, dim=-1, correction=False, scalar=2.0))
    run(out, lambda v: 0.5 * v.sum(-1) + 2.0 * v.std(-1, correction=0), (rx,))
    check_grad(x, rx)
    y = leaf(mesh, randn(1, 1, 8, 32), layout=RM)
    ry = ref(y)
    run(ttnn.var(y, dim=-1, correction=False, scalar=3.0), lambda v: 3.0 * v.var(-1, correction=0), (ry,))
    check_grad(y, ry)


def test_topk(mesh):
    x = leaf(mesh, randn(1, 1, 32, 64))
    rx = ref(x)
    values, indices = ttnn.topk(x, 5, dim=-1)
    assert indices.requires_grad is False  # integer outputs carry no gradient
    run(values, lambda v: torch.topk(v, 5, dim=-1).values, (rx,))
    check_grad(x, rx)
    y = leaf(mesh, randn(1, 1, 32, 64))
    _, idx = ttnn.topk(y, 3, dim=2, largest=False)
    with pytest.raises(ValidationError, match="does not require grad"):
        idx.backward()


# --- data movement ------------------------------------------------------------------------------------------


def test_shape_ops(mesh):
    x = leaf(mesh, randn(2, 3, 32, 64))
    rx = ref(x)

    def ours(t):
        a = ttnn.reshape(t, (6, 32, 64))
        a = ttnn.unsqueeze(ttnn.squeeze(ttnn.unsqueeze_to_4D(a), 0), 0)
        a = ttnn.permute(a, (0, 2, 3, 1))  # [1, 32, 64, 6]
        a = ttnn.transpose(a, 1, -1)  # [1, 6, 64, 32]
        a = ttnn.slice(a, [0, 1, 0, 4], [1, 6, 64, 30], [1, 2, 1, 1])  # [1, 3, 64, 26]
        b = ttnn.view(t, (6, 32, 64))
        return a, b

    def theirs(t):
        a = t.reshape(6, 32, 64)[None].permute(0, 2, 3, 1).transpose(1, -1)[:, 1:6:2, :, 4:30]
        return a, t.reshape(6, 32, 64)

    (a, b), (ra, rb) = ours(x), theirs(rx)
    ga, gta = upstream(a)
    gb, gtb = upstream(b)
    a.backward(gta)
    b.backward(gtb)
    torch.autograd.backward(
        [ra, rb], [torch.tensor(ga, dtype=torch.float64), torch.tensor(gb, dtype=torch.float64)]
    )
    check_grad(x, rx)


def test_getitem_concat_split_chunk(mesh):
    x, y = leaf(mesh, randn(1, 2, 32, 64)), leaf(mesh, randn(1, 2, 32, 32))
    rx, ry = ref(x), ref(y)
    cat = ttnn.concat([x, y], dim=-1)  # [1, 2, 32, 96]
    parts = ttnn.split(cat, [32, 64], dim=3)
    chunks = ttnn.chunk(parts[1], 3, dim=-1)  # three [.., 22/22/20]... 64 -> 22, 22, 20
    item = x[0, 1, 4:20]
    g_items = [upstream(t) for t in (parts[0], chunks[0], chunks[2], item)]
    for t, (_, gt) in zip((parts[0], chunks[0], chunks[2], item), g_items):
        t.backward(gt, retain_graph=True)
    rcat = torch.cat([rx, ry], dim=-1)
    rparts = torch.split(rcat, [32, 64], dim=3)
    rchunks = torch.chunk(rparts[1], 3, dim=-1)
    torch.autograd.backward(
        [rparts[0], rchunks[0], rchunks[2], rx[0, 1, 4:20]],
        [torch.tensor(g, dtype=torch.float64) for g, _ in g_items],
    )
    check_grad(x, rx)
    check_grad(y, ry)
    fixed = leaf(mesh, randn(1, 2, 32, 64), grad=False)
    run(ttnn.concat([fixed, x], dim=2), lambda v: torch.cat([torch.tensor(value(fixed)), v], dim=2), (rx,))
    check_grad(x, rx)
    assert fixed.grad is None
    z = leaf(mesh, randn(1, 1, 32, 64))
    rz = ref(z)
    halves = ttnn.split(z, 32, dim=-1)
    run(halves[1], lambda v: torch.split(v, 32, dim=-1)[1], (rz,))
    check_grad(z, rz)


def test_pad_repeat(mesh):
    x = leaf(mesh, randn(1, 2, 30, 20), layout=RM)
    rx = ref(x)
    p1 = ttnn.pad(x, padding=[(1, 1), (2, 10)], value=0.0)
    p2 = ttnn.pad(x, [1, 2, 32, 32], [0, 0, 1, 3], 0.5)
    p3 = ttnn.pad(x, output_padded_shape=[1, 3, 32, 24], input_tensor_start=[0, 1, 0, 0], value=1.0)
    r1 = ttnn.repeat(x, (2, 1, 1, 1, 3))
    r2 = ttnn.repeat_interleave(x, 3, dim=2)
    outs = (p1, p2, p3, r1, r2)
    grads = [upstream(t) for t in outs]
    for t, (_, gt) in zip(outs, grads):
        t.backward(gt)
    refs = (
        torch.nn.functional.pad(rx, (2, 10, 1, 1)),
        torch.nn.functional.pad(rx, (3, 9, 1, 1)),
        torch.nn.functional.pad(rx, (0, 4, 0, 2, 1, 0)),
        rx.repeat(2, 1, 1, 1, 3),
        rx.repeat_interleave(3, dim=2),
    )
    torch.autograd.backward(list(refs), [torch.tensor(g, dtype=torch.float64) for g, _ in grads])
    check_grad(x, rx)


def test_layout_dtype_memory_moves(mesh):
    x = leaf(mesh, randn(1, 1, 64, 64), dtype=BF16, layout=RM)
    rx = ref(x)
    a = ttnn.tilize(x)
    a = ttnn.typecast(a, F32)
    a = ttnn.to_layout(a, RM)
    a = ttnn.to_layout(a, TILE, dtype=BF16)
    a = ttnn.to_memory_config(a, ttnn.L1_MEMORY_CONFIG)
    a = ttnn.interleaved_to_sharded(a, ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert a.is_sharded() and a.requires_grad
    b = ttnn.reshard(
        a,
        ttnn.create_sharded_memory_config(
            (32, 64),
            ttnn.num_cores_to_corerangeset(2, mesh.compute_with_storage_grid_size(), True),
            ttnn.ShardStrategy.HEIGHT,
            use_height_and_width_as_shard_shape=True,
        ),
    )
    b = ttnn.sharded_to_interleaved(b)
    b = ttnn.clone(ttnn.untilize(b), dtype=F32)
    run(ttnn.multiply(b, 2.0), lambda v: 2.0 * v, (rx,))
    check_grad(x, rx)
    s = leaf(mesh, randn(1, 1, 64, 64), mc=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    rs = ref(s)
    run(ttnn.sharded_to_interleaved(s), lambda v: v, (rs,))
    check_grad(s, rs)
    assert s.grad.memory_config() == s.memory_config()


def test_reshape_tile_padding_view(mesh):
    x = leaf(mesh, randn(1, 1, 32, 64))
    view = ttnn.reshape(x, [1, 1, 8, 64], [1, 1, 32, 64])  # rows 8..31 move into the padding
    g, gt = upstream(view)
    view.backward(gt)
    expected = np.zeros((1, 1, 32, 64))
    expected[0, 0, :8] = g[0, 0]
    close(expected, value(x.grad))
    # and back: the padding rows become logical rows again; the view gets the gradient of its 8 rows
    small = view.detach().requires_grad_()
    grown = ttnn.reshape(small, [1, 1, 32, 64], [1, 1, 32, 64])
    g2, gt2 = upstream(grown)
    grown.backward(gt2)
    close(g2[:, :, :8], value(small.grad))


# --- embedding --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [BF16, BF8])
def test_embedding(mesh, dtype):
    vocab, dim = 40, 64
    ids_np = RNG.integers(0, vocab, size=(2, 16))
    ids_np[0, :3] = 7  # repeated ids accumulate
    ids_np[1, 5] = 3  # padding rows get no gradient
    ids = ttnn.from_numpy(ids_np.astype(np.uint32), dtype=ttnn.uint32, layout=RM, device=mesh)
    w = leaf(mesh, randn(vocab, dim), dtype)
    rw = ref(w)
    out = ttnn.embedding(ids, w, padding_idx=3)
    run(out, lambda table: torch.nn.functional.embedding(torch.tensor(ids_np), table, padding_idx=3), (rw,))
    check_grad(w, rw)
    # bfloat16 ids may be marked too: they get no gradient (and the table none when it is not marked)
    float_ids = leaf(mesh, ids_np.astype(np.float32), BF16, layout=RM)
    ttnn.sum(ttnn.embedding(float_ids, w.detach())).backward()
    assert float_ids.grad is None


# --- norms and softmax -------------------------------------------------------------------------------------


def test_softmax(mesh):
    x = leaf(mesh, randn(1, 2, 32, 64, scale=3.0))
    y = leaf(mesh, randn(1, 2, 32, 64))
    rx, ry = ref(x), ref(y)
    out = ttnn.add(ttnn.softmax(x, dim=-1), ttnn.softmax(y, dim=2, numeric_stable=False))
    run(out, lambda a, b: torch.softmax(a, -1) + torch.softmax(b, 2), (rx, ry))
    check_grad(x, rx)
    check_grad(y, ry)


def _rms(v, w, b, eps):
    out = v * torch.rsqrt((v * v).mean(-1, keepdim=True) + eps)
    out = out if w is None else out * w.reshape(-1)[: v.shape[-1]]
    return out if b is None else out + b.reshape(-1)[: v.shape[-1]]


def _ln(v, w, b, eps):
    w = None if w is None else w.reshape(-1)[: v.shape[-1]]
    b = None if b is None else b.reshape(-1)[: v.shape[-1]]
    return torch.nn.functional.layer_norm(v, (v.shape[-1],), w, b, eps)


@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_norms(mesh, kind, dtype):
    d = 64
    x, r = leaf(mesh, randn(1, 2, 32, d), dtype), leaf(mesh, randn(1, 2, 32, d), dtype)
    w, b = leaf(mesh, randn(d), dtype, layout=RM), leaf(mesh, randn(1, 1, 1, d), dtype)
    refs = [ref(t) for t in (x, r, w, b)]
    op, fn = (ttnn.rms_norm, _rms) if kind == "rms" else (ttnn.layer_norm, _ln)
    out = op(x, epsilon=1e-5, weight=w, bias=b, residual_input_tensor=r)
    run(out, lambda a, c, e, f: fn(a + c, e, f, 1e-5), refs)
    for t, rt in zip((x, r, w, b), refs):
        check_grad(t, rt)


def test_norm_weight_forms(mesh):
    d = 64
    x = leaf(mesh, randn(1, 1, 32, d))
    w_rows = leaf(mesh, randn(1, 1, d // 32, 32), layout=RM)  # TTTv1's flattened ROW_MAJOR storage
    w_tile = leaf(mesh, randn(1, 1, 4, d))  # a TILE weight: only its first row is used
    rx, rr, rt = ref(x), ref(w_rows), ref(w_tile)
    out = ttnn.add(ttnn.rms_norm(x, weight=w_rows), ttnn.layer_norm(x, weight=w_tile))
    run(out, lambda a, e, f: _rms(a, e, None, 1e-12) + _ln(a, f[0, 0, 0], None, 1e-12), (rx, rr, rt))
    check_grad(x, rx)
    check_grad(w_rows, rr)
    check_grad(w_tile, rt)
    y = leaf(mesh, randn(1, 1, 32, d))
    ry = ref(y)
    run(ttnn.layer_norm(y), lambda a: _ln(a, None, None, 1e-12), (ry,))
    check_grad(y, ry)


@pytest.mark.parametrize("kind", ["rms", "layer"])
def test_distributed_norm_through_all_gather(open_mesh, kind):
    """pre_all_gather → all_gather → post_all_gather on a width-split activation: the gradient of the full norm."""
    mesh = open_mesh((1, 2))
    d = 128
    x = leaf(mesh, randn(1, 1, 32, d), BF16, dim=3)
    w = leaf(mesh, randn(1, 1, 1, d), F32, layout=RM, dim=3)
    b = leaf(mesh, randn(1, 1, 1, d), F32, layout=RM, dim=3)
    rx, rw, rb = ref(x, 3), ref(w, 3), ref(b, 3)
    pre = ttnn.rms_norm_pre_all_gather if kind == "rms" else ttnn.layer_norm_pre_all_gather
    post = ttnn.rms_norm_post_all_gather if kind == "rms" else ttnn.layer_norm_post_all_gather
    stats = ttnn.all_gather(pre(x, dtype=F32), dim=3)
    out = post(x, stats, epsilon=1e-5, weight=w, bias=b)
    fn = _rms if kind == "rms" else _ln
    run(out, lambda a, e, f: fn(a, e, f, 1e-5), (rx, rw, rb), dim=3)
    for t, r in ((x, rx), (w, rw), (b, rb)):
        check_grad(t, r, dim=3)
    assert x.grad.tensor_topology() == x.tensor_topology()


def test_pre_all_gather_residual_and_post_stats_rows(open_mesh):
    mesh = open_mesh((1, 1))
    x, r = leaf(mesh, randn(1, 1, 8, 64)), leaf(mesh, randn(1, 1, 8, 64))
    rx, rr = ref(x), ref(r)
    stats = ttnn.layer_norm_pre_all_gather(x, residual_input_tensor=r, dtype=F32)
    padded_stats = ttnn.pad(stats, padding=[(0, 4), (0, 0)], value=0.0)  # more rows than the input
    out = ttnn.layer_norm_post_all_gather(ttnn.add(x, r), padded_stats, epsilon=1e-5)
    run(out, lambda a, c: _ln(a + c, None, None, 1e-5), (rx, rr))
    check_grad(x, rx)
    check_grad(r, rr)
    y = leaf(mesh, randn(1, 1, 8, 64))
    ry = ref(y)
    st = ttnn.slice(ttnn.rms_norm_pre_all_gather(y, dtype=F32), [0, 0, 0, 0], [1, 1, 4, 32])
    out = ttnn.rms_norm_post_all_gather(ttnn.slice(y, [0, 0, 0, 0], [1, 1, 4, 64]), st, epsilon=1e-5)
    run(out, lambda a: _rms(a[:, :, :4], None, None, 1e-5), (ry,))
    check_grad(y, ry)


# --- collectives on a mesh --------------------------------------------------------------------------------------


def _semaphores(mesh, n):
    grid = mesh.compute_with_storage_grid_size()
    cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(grid.x - 1, grid.y - 1))})
    return [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(n)]


def _per_device(x, n):
    """Split a torch tensor's dim 0 blocks: the per-device shards of a ShardTensorToMesh(dim=0) tensor."""
    return list(torch.chunk(x, n, dim=0))


def test_ccl_adjoints_1x4(open_mesh):
    """Per-device semantics: the loss is the sum over devices; torch replays each device's computation."""
    mesh = open_mesh((1, 4))
    n = 4
    x = leaf(mesh, randn(4 * n, 1, 32, 64), dim=0)  # device i holds x_i [4, 1, 32, 64]
    rx = ref(x, 0)
    gathered = ttnn.all_gather(x, dim=1)  # every device: [4, 4, 32, 64]
    scattered = ttnn.reduce_scatter(x, 3)  # device k: slice k of the sum, [4, 1, 32, 16]
    reduced = ttnn.all_reduce(x)
    summed = ttnn.experimental.fast_reduce_nc(x, dims=[0])
    outs = (gathered, scattered, reduced, summed)
    grads = [upstream(t, dim=0) for t in outs]
    for t, (_, gt) in zip(outs, grads):
        t.backward(gt)
    xs = _per_device(rx, n)
    total = sum(xs)
    loss = 0
    for dev in range(n):
        pieces = [torch.tensor(g, dtype=torch.float64).chunk(n, dim=0)[dev] for g, _ in grads]
        loss = loss + (torch.cat(xs, dim=1) * pieces[0]).sum()
        loss = loss + (total.chunk(n, dim=3)[dev] * pieces[1]).sum()
        loss = loss + (total * pieces[2]).sum()
        loss = loss + (xs[dev].sum(0, keepdim=True) * pieces[3]).sum()
    loss.backward()
    check_grad(x, rx, dim=0)


def test_ccl_cluster_axis_and_async(open_mesh):
    mesh = open_mesh((2, 2))
    x = leaf(mesh, randn(1, 1, 32, 64))  # replicated: every device holds the same x
    sems2, sems3 = _semaphores(mesh, 2), _semaphores(mesh, 3)
    a = ttnn.experimental.all_gather_async(x, 3, sems2, cluster_axis=1, topology=ttnn.Topology.Linear)
    b = ttnn.experimental.all_gather_async(x, None, 2, sems2, cluster_axis=1)  # (t, buffer, dim, semaphores)
    b2 = ttnn.experimental.all_gather_async(x, 2, 1, mesh, ttnn.Topology.Ring, sems2)
    c = ttnn.experimental.reduce_scatter_minimal_async(x, None, 3, sems3, cluster_axis=0)
    d = ttnn.reduce_scatter(x, 2, 1, mesh)
    e = ttnn.reduce_scatter(x, 3, ttnn.ReduceType.Sum, cluster_axis=1)
    f = ttnn.all_reduce(x, cluster_axis=0)
    outs = (a, b, b2, c, d, e, f)
    for t in outs:
        g = np.ones(t.shape, np.float32)
        t.backward(ttnn.from_numpy(g, dtype=F32, layout=TILE, device=mesh))
    # replicated x, all-ones upstream, 2 devices per group:
    # all-gather and all-reduce: the sum over the group's devices (2); reduce-scatter: the concatenation (1)
    expected = np.full((1, 1, 32, 64), 2.0 + 2.0 + 2.0 + 1.0 + 1.0 + 1.0 + 2.0)
    for shard in x.grad.shards():
        close(expected, shard)


def test_all_gather_matmul_async(open_mesh):
    mesh = open_mesh((1, 2))
    x = leaf(mesh, randn(1, 1, 32, 64), dim=3)  # each device: [1, 1, 32, 32]
    w = leaf(mesh, randn(1, 1, 64, 64, scale=0.2), dim=3)  # column-parallel weight
    bias = leaf(mesh, randn(1, 1, 1, 64), dim=3)
    rx, rw, rb = ref(x, 3), ref(w, 3), ref(bias, 3)
    gathered, out = ttnn.experimental.all_gather_matmul_async(
        x, w, None, 3, _semaphores(mesh, 2), ttnn.CoreCoord(0, 4), bias=bias, activation="relu"
    )
    g_out, gt_out = upstream(out, dim=3)
    g_gat, gt_gat = upstream(gathered, dim=3)
    out.backward(gt_out, retain_graph=True)
    gathered.backward(gt_gat)
    ws, bs = rw.chunk(2, dim=3), rb.chunk(2, dim=3)
    loss = 0
    for dev in range(2):
        y = torch.relu(rx @ ws[dev] + bs[dev])
        loss = loss + (y * torch.tensor(g_out, dtype=torch.float64).chunk(2, dim=3)[dev]).sum()
        loss = loss + (rx * torch.tensor(g_gat, dtype=torch.float64).chunk(2, dim=3)[dev]).sum()
    loss.backward()
    for t, r in ((x, rx), (w, rw), (bias, rb)):
        check_grad(t, r, dim=3)
    y = leaf(mesh, randn(1, 1, 32, 64), dim=3)
    ry = ref(y, 3)
    gathered, _ = ttnn.experimental.all_gather_matmul_async(
        y, w.detach(), None, 3, _semaphores(mesh, 2), ttnn.CoreCoord(0, 4)
    )
    g, gt = upstream(gathered, dim=3)
    gathered.backward(gt)
    (ry * torch.tensor(g, dtype=torch.float64).chunk(2, dim=3)[0]).sum().add(
        (ry * torch.tensor(g, dtype=torch.float64).chunk(2, dim=3)[1]).sum()
    ).backward()
    check_grad(y, ry, dim=3)


def test_tensor_parallel_mlp_1x8(open_mesh):
    """Column-parallel w1, row-parallel w2 on a 1×8 mesh (reduce-scatter output): grads sharded like the weights."""
    mesh = open_mesh((1, 8))
    x = leaf(mesh, randn(1, 1, 32, 64))
    w1 = leaf(mesh, randn(64, 256, scale=0.1), BF16, dim=1)
    w2 = leaf(mesh, randn(256, 64, scale=0.1), BF16, dim=0)
    rx, rw1, rw2 = ref(x), ref(w1, 1), ref(w2, 0)
    hifi = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)
    h = ttnn.linear(x, w1, activation="silu", compute_kernel_config=hifi)  # exact h: dW2 = hᵀ·dY reads it
    out = ttnn.reduce_scatter(ttnn.linear(h, w2, compute_kernel_config=hifi), dim=3)
    run(out, lambda a, b, c: torch.nn.functional.silu(a @ b) @ c, (rx, rw1, rw2), dim=3)
    check_grad(w1, rw1, dim=1)
    check_grad(w2, rw2, dim=0)
    assert w1.grad.tensor_topology() == w1.tensor_topology()
    # x is replicated: each device holds the gradient of its own copy; their sum is the full gradient
    close(rx.grad, sum(value(ttnn.get_device_tensors(x.grad)[i]) for i in range(8)))


# --- attention ----------------------------------------------------------------------------------------------------


def test_create_and_concat_heads(mesh):
    nh, nkv, hd = 4, 2, 32
    x = leaf(mesh, randn(2, 1, 32, (nh + 2 * nkv) * hd))
    rx = ref(x)
    q, k, _ = ttnn.experimental.nlp_create_qkv_heads(x, num_heads=nh, num_kv_heads=nkv)  # K transposed
    merged = ttnn.experimental.nlp_concat_heads(q)
    gm, gtm = upstream(merged)
    gk, gtk = upstream(k)
    merged.backward(gtm, retain_graph=True)
    k.backward(gtk)  # V gets no gradient: zeros
    flat = rx.reshape(2, 32, nh + 2 * nkv, hd)
    rq = flat[:, :, :nh].permute(0, 2, 1, 3)
    rk = flat[:, :, nh : nh + nkv].permute(0, 2, 3, 1)
    rmerged = rq.permute(0, 2, 1, 3).reshape(2, 1, 32, nh * hd)
    torch.autograd.backward(
        [rmerged, rk], [torch.tensor(gm, dtype=torch.float64), torch.tensor(gk, dtype=torch.float64)]
    )
    check_grad(x, rx)


def test_create_heads_separate_kv_and_sharded(mesh):
    nh, nkv, hd = 4, 2, 32
    xq, xkv = leaf(mesh, randn(1, 1, 32, nh * hd)), leaf(mesh, randn(1, 1, 32, 2 * nkv * hd))
    rq, rkv = ref(xq), ref(xkv)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        xq, xkv, num_heads=nh, num_kv_heads=nkv, transpose_k_heads=False
    )
    out = ttnn.add(ttnn.sum(ttnn.multiply(q, q)), ttnn.add(ttnn.sum(k), ttnn.sum(ttnn.multiply(v, 3.0))))
    out.backward()
    kvf = rkv.reshape(32, 2 * nkv, hd)
    ((rq * rq).sum() + kvf[:, :nkv].sum() + 3.0 * kvf[:, nkv:].sum()).backward()
    check_grad(xq, rq)
    check_grad(xkv, rkv)
    # sharded inputs: one group per core ([q heads of the group, k, v]) and the separate-KV pair layout
    grid = mesh.compute_with_storage_grid_size()
    crs = ttnn.num_cores_to_corerangeset(nkv, grid, row_wise=True)
    group_w = (nh // nkv + 2) * hd
    mc = ttnn.create_sharded_memory_config(
        (32, group_w), crs, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    xs = leaf(mesh, randn(1, 1, 32, nkv * group_w), BF16, mc=mc)
    rxs = ref(xs)
    outs = ttnn.experimental.nlp_create_qkv_heads(
        xs,
        num_heads=nh,
        num_kv_heads=nkv,
        transpose_k_heads=False,
        memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    )
    grads = [upstream(t) for t in outs]
    for t, (_, gt) in zip(outs, grads):
        t.backward(gt, retain_graph=True)
    groups = rxs.reshape(32, nkv, nh // nkv + 2, hd)
    refs = [
        groups[:, :, : nh // nkv].reshape(32, nh, hd).transpose(0, 1)[None],
        groups[:, :, nh // nkv].transpose(0, 1)[None],
        groups[:, :, nh // nkv + 1].transpose(0, 1)[None],
    ]
    torch.autograd.backward(refs, [torch.tensor(g, dtype=torch.float64) for g, _ in grads])
    check_grad(xs, rxs)
    assert xs.grad.memory_config() == xs.memory_config()
    mcq = ttnn.create_sharded_memory_config(
        (32, 2 * hd), crs, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    sq, skv = (
        leaf(mesh, randn(1, 1, 32, nh * hd), BF16, mc=mcq),
        leaf(mesh, randn(1, 1, 32, 2 * nkv * hd), BF16, mc=mcq),
    )
    rskv = ref(skv)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        sq,
        skv,
        num_heads=nh,
        num_kv_heads=nkv,
        transpose_k_heads=False,
        memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    )
    gv, gtv = upstream(v)
    v.backward(gtv)
    pairs = rskv.reshape(32, nkv, 2, hd)
    pairs[:, :, 1].transpose(0, 1)[None].backward(torch.tensor(gv, dtype=torch.float64))
    check_grad(skv, rskv)
    assert sq.grad is None


def test_decode_heads(open_mesh):
    mesh = open_mesh((1, 2))
    users, nh, nkv, hd = 8, 4, 2, 32
    width = (nh + 2 * nkv) * hd
    x = leaf(mesh, randn(1, 1, users, 2 * width), BF16, dim=3)
    rx = ref(x, 3)
    q, _, v = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, memory_config=ttnn.L1_MEMORY_CONFIG
    )
    merged = ttnn.experimental.nlp_concat_heads_decode(q, num_heads=nh)
    gm, gtm = upstream(merged, dim=3)
    gv, gtv = upstream(v, dim=2)
    merged.backward(gtm, retain_graph=True)
    v.backward(gtv)
    stored = rx.reshape(users, 2, nh + 2 * nkv, hd)
    rq = stored[:, :, :nh]  # [users, dev, nh, hd]
    rv = stored[:, :, nh + nkv :].reshape(users, 2 * nkv, hd)[None]
    rmerged = torch.zeros(32, 2, nh * hd, dtype=torch.float64)
    rmerged = torch.cat([rq.reshape(users, 2, nh * hd), rmerged[users:]], dim=0).reshape(
        1, 1, 32, 2 * nh * hd
    )
    torch.autograd.backward(
        [rmerged, rv], [torch.tensor(gm, dtype=torch.float64), torch.tensor(gv, dtype=torch.float64)]
    )
    check_grad(x, rx, dim=3)


def test_decode_heads_batch_offset(mesh):
    users, nh, nkv, hd = 4, 8, 1, 32
    width = (nh + 2 * nkv) * hd
    crs = ttnn.num_cores_to_corerangeset(width // 32, mesh.compute_with_storage_grid_size(), row_wise=True)
    mc = ttnn.create_sharded_memory_config(
        (32, 32), crs, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    x = leaf(mesh, randn(1, 1, users, width), BF16, mc=mc)
    rx = ref(x)
    off = ttnn.from_numpy(np.array([1], np.uint32), dtype=ttnn.uint32, layout=RM, device=mesh)
    _, k, _ = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, batch_offset=off, slice_size=2
    )
    g, gt = upstream(k)
    k.backward(gt)
    rx[0, 0, 1:3].reshape(2, nh + 2 * nkv, hd)[None, :, nh : nh + nkv].backward(
        torch.tensor(g, dtype=torch.float64)
    )
    check_grad(x, rx)


def _trans_mat(tiles=1):
    t = np.zeros((32, 32), np.float32)
    t[np.arange(0, 32, 2), np.arange(1, 32, 2)] = 1
    t[np.arange(1, 32, 2), np.arange(0, 32, 2)] = -1
    return np.tile(t, (tiles, 1))[None, None]


def _torch_rope(x, c, s, t):
    """x·c + (x @ T)·s per 32-wide tile; t [32, 32] or per-row-group tiles handled by the caller."""
    tiles = x.reshape(*x.shape[:-1], -1, 32)
    return x * c + (tiles @ t).reshape(x.shape) * s


def test_rotary_llama_prefill(mesh):
    nh, s, hd = 2, 32, 64
    x = leaf(mesh, randn(2, nh, s, hd), BF16)
    cos = leaf(mesh, randn(1, 1, 2 * s, hd), BF16)  # a longer cache: rows past S get no gradient
    sin = leaf(mesh, randn(1, 1, 2 * s, hd), BF16)
    trans = leaf(mesh, _trans_mat(), BF16)
    refs = [ref(t) for t in (x, cos, sin, trans)]
    out = ttnn.experimental.rotary_embedding_llama(x, cos, sin, trans)
    run(out, lambda a, c, d, t: _torch_rope(a, c[:, :, :s], d[:, :, :s], t[0, 0]), refs)
    for t, r in zip((x, cos, sin, trans), refs):
        check_grad(t, r)
    # per-head cos/sin and a non-standard matrix (the general matmul path)
    y = leaf(mesh, randn(1, nh, s, hd), BF16)
    ch, sh = leaf(mesh, randn(1, nh, s, hd), BF16), leaf(mesh, randn(1, nh, s, hd), BF16)
    eye = leaf(mesh, np.eye(32, dtype=np.float32)[None, None] * 0.5, BF16, grad=False)
    refs = [ref(t) for t in (y, ch, sh)]
    run(
        ttnn.experimental.rotary_embedding_llama(y, ch, sh, eye),
        lambda a, c, d: _torch_rope(a, c, d, torch.eye(32, dtype=torch.float64) * 0.5),
        refs,
    )
    for t, r in zip((y, ch, sh), refs):
        check_grad(t, r)


def _height_mc(mesh, n_cores, shard, start=0):
    grid = mesh.compute_with_storage_grid_size()
    cores = [ttnn.CoreCoord(i % grid.x, i // grid.x) for i in range(start, start + n_cores)]
    crs = ttnn.CoreRangeSet([ttnn.CoreRange(c, c) for c in cores])
    return ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(crs, shard)
    )


def test_rotary_llama_decode_and_fused(mesh):
    users, nh, nkv, hd = 4, 4, 2, 64
    q = leaf(mesh, randn(1, users, nh, hd), BF16, mc=_height_mc(mesh, users, (32, hd)))
    k = leaf(mesh, randn(1, users, nkv, hd), BF16, mc=_height_mc(mesh, users, (32, hd), start=users))
    cos = leaf(mesh, randn(1, users, 1, hd), BF16, mc=_height_mc(mesh, users, (32, hd)))
    sin = leaf(mesh, randn(1, users, 1, hd), BF16, mc=_height_mc(mesh, users, (32, hd)))
    tm_np = _trans_mat(users)
    tm_np[0, 0, 32:64] = np.eye(32)  # user 1: a non-standard matrix
    trans = leaf(mesh, tm_np, BF16, mc=_height_mc(mesh, users, (32, 32)))
    refs = [ref(t) for t in (q, cos, sin, trans)]

    def rope_users(a, c, d, t, rows):
        outs = []
        for b in range(a.shape[1]):
            r = rows[b]
            outs.append(_torch_rope(a[0, b], c[0, r, 0], d[0, r, 0], t[0, 0, 32 * r : 32 * r + 32]))
        return torch.stack(outs)[None]

    out = ttnn.experimental.rotary_embedding_llama(q, cos, sin, trans, is_decode_mode=True)
    run(out, lambda a, c, d, t: rope_users(a, c, d, t, list(range(users))), refs)
    for t, r in zip((q, cos, sin, trans), refs):
        check_grad(t, r)
    # fused Q/K: cos/sin rows [0, B) for Q, [B, 2B) for K; trans tiles likewise
    fc = leaf(mesh, randn(1, 2 * users, 1, hd), BF16, mc=_height_mc(mesh, 2 * users, (32, hd)))
    fs = leaf(mesh, randn(1, 2 * users, 1, hd), BF16, mc=_height_mc(mesh, 2 * users, (32, hd)))
    ft = leaf(mesh, _trans_mat(2 * users), BF16, mc=_height_mc(mesh, 2 * users, (32, 32)))
    q2, k2 = (t.detach().requires_grad_() for t in (q, k))
    rq, rk, rc, rs, rt = (ref(t) for t in (q2, k2, fc, fs, ft))
    fq, fk = ttnn.experimental.rotary_embedding_llama_fused_qk(q2, k2, fc, fs, ft)
    gq, gtq = upstream(fq)
    gk, gtk = upstream(fk)
    fq.backward(gtq, retain_graph=True)
    fk.backward(gtk)
    oq = rope_users(rq, rc, rs, rt, list(range(users)))
    ok = rope_users(rk, rc, rs, rt, list(range(users, 2 * users)))
    torch.autograd.backward(
        [oq, ok], [torch.tensor(gq, dtype=torch.float64), torch.tensor(gk, dtype=torch.float64)]
    )
    for t, r in ((q2, rq), (k2, rk), (fc, rc), (fs, rs), (ft, rt)):
        check_grad(t, r)


def test_rotary_embedding_hf(mesh):
    x = leaf(mesh, randn(1, 2, 32, 64))
    cos, sin = leaf(mesh, randn(1, 1, 64, 64)), leaf(mesh, randn(1, 1, 64, 64))
    refs = [ref(t) for t in (x, cos, sin)]

    def rot(a):
        return torch.cat([-a[..., 32:], a[..., :32]], dim=-1)

    run(
        ttnn.experimental.rotary_embedding(x, cos, sin),
        lambda a, c, d: a * c[:, :, :32] + rot(a) * d[:, :, :32],
        refs,
    )
    for t, r in zip((x, cos, sin), refs):
        check_grad(t, r)
    y = leaf(mesh, randn(1, 2, 8, 64))
    c2, s2 = leaf(mesh, randn(1, 1, 16, 64)), leaf(mesh, randn(1, 1, 16, 64))
    refs = [ref(t) for t in (y, c2, s2)]
    run(
        ttnn.experimental.rotary_embedding(y, c2, s2, 5),
        lambda a, c, d: a * c[0, 0, 5] + rot(a) * d[0, 0, 5],
        refs,
    )
    for t, r in zip((y, c2, s2), refs):
        check_grad(t, r)


def _sdpa_ref(q, k, v, causal, mask=None, scale=None, window=None):
    nh, nkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(nh // nkv, dim=1)
    v = v.repeat_interleave(nh // nkv, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    bias = torch.zeros(sq, sk, dtype=torch.float64)
    qp, kp = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
    if causal:
        bias[kp > qp] = -math.inf
        if window:
            bias[kp <= qp - window] = -math.inf
    elif window:
        bias[(kp - qp).abs() > window // 2] = -math.inf
    if mask is not None:
        bias = bias + mask
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


@pytest.mark.parametrize(
    "causal,window,with_mask,nkv",
    [(True, None, False, 2), (True, 16, False, 1), (False, 24, False, 4), (False, None, True, 2)],
)
def test_sdpa(mesh, causal, window, with_mask, nkv):
    b, nh, s, d = 2, 4, 64, 32
    q = leaf(mesh, randn(b, nh, s, d), BF16)
    k, v = leaf(mesh, randn(b, nkv, s, d), BF16), leaf(mesh, randn(b, nkv, s, d), BF8)
    mask = leaf(mesh, randn(1, nh, s, s), BF16) if with_mask else None
    tensors = [t for t in (q, k, v, mask) if t is not None]
    refs = [ref(t) for t in tensors]
    out = ttnn.transformer.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, sliding_window_size=window, scale=0.2
    )
    run(out, lambda a, c, e, *m: _sdpa_ref(a, c, e, causal, m[0] if m else None, 0.2, window), refs)
    for t, r in zip(tensors, refs):
        check_grad(t, r)


def test_sdpa_mask_broadcast_over_heads_and_batch(mesh):
    q, k, v = (leaf(mesh, randn(2, 2, 32, 32), BF16) for _ in range(3))
    mask = leaf(mesh, randn(1, 1, 32, 32), BF16)
    refs = [ref(t) for t in (q, k, v, mask)]
    out = ttnn.transformer.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=False)
    run(out, lambda a, c, e, m: _sdpa_ref(a, c, e, False, m), refs)
    for t, r in zip((q, k, v, mask), refs):
        check_grad(t, r)


def test_sdpa_on_head_sharded_mesh(open_mesh):
    mesh = open_mesh((1, 2))
    q = leaf(mesh, randn(1, 4, 32, 32), BF16, dim=1)
    k, v = leaf(mesh, randn(1, 2, 32, 32), BF16, dim=1), leaf(mesh, randn(1, 2, 32, 32), BF16, dim=1)
    refs = [ref(t, 1) for t in (q, k, v)]
    out = ttnn.transformer.scaled_dot_product_attention(q, k, v)
    run(out, lambda a, c, e: _sdpa_ref(a, c, e, True), refs, dim=1)
    for t, r in zip((q, k, v), refs):
        check_grad(t, r, dim=1)


# --- rule outputs: dtypes, and ops without a backward ---------------------------------------------------------


def test_rule_gradient_dtypes(mesh):
    """Rules return bfloat16 for bfloat16 inputs and float32 for everything else (block floats included)."""
    a, b, c = (
        leaf(mesh, randn(1, 1, 32, 32), BF16),
        leaf(mesh, randn(1, 1, 32, 32), BF8),
        leaf(mesh, randn(1, 1, 32, 32)),
    )
    out = ttnn.add(ttnn.multiply(a, b), c)
    node = out.grad_fn
    g = ttnn.from_numpy(np.ones((1, 1, 32, 32), np.float32), dtype=BF16, layout=TILE, device=mesh)
    with ttnn.autograd.no_grad():
        grads = node.rule(node.ctx, g)
        mul_node = node.ctx.args["input_tensor_a"].grad_fn
        inner = mul_node.rule(mul_node.ctx, g)
    assert grads["input_tensor_b"].dtype is F32
    assert inner["input_tensor_a"].dtype is BF16 and inner["input_tensor_b"].dtype is F32
    out.backward()
    assert b.grad.dtype is BF8  # the leaf's own dtype


def test_ops_without_backward_raise(mesh):
    q = leaf(mesh, randn(1, 1, 4, 32), BF16)
    kc = ttnn.from_numpy(randn(1, 1, 64, 32), dtype=BF16, layout=TILE, device=mesh)
    with pytest.raises(ValidationError, match="has no backward"):
        ttnn.transformer.scaled_dot_product_attention_decode(q, kc, kc, cur_pos=[3])
    x = leaf(mesh, randn(1, 1, 32, 32))
    # non-differentiable ops record nothing
    assert not ttnn.argmax(ttnn.typecast(x, BF16), dim=-1).requires_grad
    assert not ttnn.ones_like(x).requires_grad
    assert not ttnn.gt(x, 0.0).requires_grad
    cache = ttnn.from_numpy(np.zeros((1, 1, 64, 32), np.float32), dtype=BF16, layout=TILE, device=mesh)
    ttnn.fill_cache(cache, ttnn.typecast(x, BF16), 0)
    assert cache.is_leaf and not cache.requires_grad
    assert engine.has_backward("ttnn.linear") and not engine.has_backward("ttnn.fill_cache")
