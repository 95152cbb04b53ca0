"""The fused training ops (tttv2/ttnn/ops/training.py) against torch: forward values and gradients, dropout,
sampling, the profiler marker, the optimizer steps over 20 steps, sharded meshes and the error paths.

The torch reference runs in float64 on the values the ttnn inputs hold (already quantised to their dtype).
Tolerances on the largest reference magnitude ``m`` of each compared array:

* float32: ``|err| <= 1e-4·m + 1e-5`` (the ops compute in float32 with float64 row sums);
* bfloat16: ``|err| <= 1.6e-2·m + 1e-3`` and PCC >= 0.999 (the float32 result is rounded once to bfloat16,
  2^-9 relative, and the bfloat16 forward output feeds nothing else);
* optimizer trajectories (20 steps, float32): ``|err| <= 1e-5·m + 1e-6`` against torch.optim (same float32 math
  order; torch may fuse a multiply-add); bfloat16 parameters and states: ``rtol 2^-8`` (one bfloat16 rounding)
  against a torch float32 step on the stored values whose updated arrays are rounded to bfloat16 when stored.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn._kernels import training as tk
from tttv2.ttnn.ops import training as training_ops

F32, BF16 = ttnn.float32, ttnn.bfloat16
TILE, RM = ttnn.TILE_LAYOUT, ttnn.ROW_MAJOR_LAYOUT
RNG = np.random.default_rng(11)
F = torch.nn.functional


def randn(*shape, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale, dtype=np.float32)


@pytest.fixture
def mesh(open_mesh):
    return open_mesh((1, 1))


def leaf(mesh, arr, dtype=F32, grad=True, dim=None, layout=TILE):
    mapper = None if dim is None else ttnn.ShardTensorToMesh(mesh, dim=dim)
    t = ttnn.from_numpy(
        np.asarray(arr, np.float32), dtype=dtype, layout=layout, device=mesh, mesh_mapper=mapper
    )
    t.requires_grad = grad
    return t


def ids(mesh, arr, dim=None, dtype=ttnn.uint32):
    mapper = None if dim is None else ttnn.ShardTensorToMesh(mesh, dim=dim)
    return ttnn.from_numpy(
        np.asarray(arr).astype(np.uint32 if dtype is ttnn.uint32 else np.int32),
        dtype=dtype,
        device=mesh,
        mesh_mapper=mapper,
    )


def value(t, dim=None):
    comp = None if dim is None else ttnn.ConcatMeshToTensor(t.device(), dim=dim)
    return ttnn.to_numpy(t, mesh_composer=comp).astype(np.float64)


def ref(t, dim=None):
    return torch.tensor(value(t, dim), dtype=torch.float64, requires_grad=True)


def close(expected, actual, dtype=F32):
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    actual = np.asarray(actual, dtype=np.float64)
    assert expected.shape == actual.shape, (expected.shape, actual.shape)
    m = float(np.abs(expected).max())
    rtol, atol = (1.6e-2, 1e-3) if dtype is BF16 else (1e-4, 1e-5)
    err = float(np.abs(expected - actual).max())
    assert err <= rtol * m + atol, f"max error {err} vs max |ref| {m}"
    if dtype is BF16 and np.std(expected) > 0:
        assert pcc(expected, actual) >= 0.999


def grad_of(t, dim=None):
    assert t.grad is not None
    assert t.grad.dtype is t.dtype and tuple(t.grad.shape) == tuple(t.shape)
    assert t.grad.tensor_topology() == t.tensor_topology()
    return value(t.grad, dim)


def upstream(out, dim=None):
    shape = list(out.shape)
    if dim is not None:
        shape[dim] *= out.device().get_num_devices()
    g = randn(*shape)
    mapper = None if dim is None else ttnn.ShardTensorToMesh(out.device(), dim=dim)
    return g, ttnn.from_numpy(g, dtype=F32, layout=out.layout, device=out.device(), mesh_mapper=mapper)


# --- losses ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_forward_backward(mesh, dtype, reduction):
    b, s, v = 2, 8, 40
    x = leaf(mesh, randn(b, 1, s, v, scale=3.0), dtype)
    tgt = RNG.integers(0, v, (b, s))
    loss = ttnn.cross_entropy_loss(x, ids(mesh, tgt), reduction=reduction)
    assert loss.dtype is dtype and loss.layout is TILE
    assert tuple(loss.shape) == ((b, 1, s, 1) if reduction == "none" else (1, 1, 1, 1))
    g, gt = upstream(loss)
    loss.backward(gt)
    xr = ref(x)
    lr = F.cross_entropy(xr.reshape(-1, v), torch.tensor(tgt.reshape(-1)), reduction=reduction)
    lr.reshape(-1).backward(torch.tensor(g, dtype=torch.float64).reshape(-1)[: lr.numel()])
    close(lr.reshape(loss.shape), value(loss), dtype)
    close(xr.grad, grad_of(x), dtype)


@pytest.mark.parametrize("shape", [(2, 1, 1, 8), (2, 1, 8, 1)])
def test_cross_entropy_target_layouts_and_enum_reduction(mesh, shape):
    import enum

    class ReduceType(enum.Enum):
        NONE = 0
        MEAN = 1

    x = leaf(mesh, randn(2, 1, 8, 16), grad=False)
    tgt = RNG.integers(0, 16, (2, 8))
    a = ttnn.cross_entropy_loss(x, ids(mesh, tgt.reshape(shape), dtype=ttnn.int32), reduction=ReduceType.NONE)
    b = ttnn.cross_entropy_loss(x, ids(mesh, tgt), reduction="NONE")
    np.testing.assert_array_equal(value(a), value(b))
    m = ttnn.cross_entropy_loss(x, ids(mesh, tgt), reduction=ReduceType.MEAN)
    np.testing.assert_allclose(value(m).reshape(()), value(a).mean(), rtol=1e-6)


def test_cross_entropy_sharded_batch(open_mesh):
    mesh = open_mesh((1, 2))
    x = leaf(mesh, randn(4, 1, 8, 24), dim=0)
    tgt = RNG.integers(0, 24, (4, 8))
    loss = ttnn.cross_entropy_loss(x, ids(mesh, tgt, dim=0), reduction="none")
    g, gt = upstream(loss, dim=0)
    loss.backward(gt)
    xr = ref(x, dim=0)
    lr = F.cross_entropy(xr.reshape(-1, 24), torch.tensor(tgt.reshape(-1)), reduction="none")
    lr.backward(torch.tensor(g.reshape(-1), dtype=torch.float64))
    close(lr.reshape(4, 1, 8, 1), value(loss, 0))
    close(xr.grad, grad_of(x, 0))
    # mean is per device: each device divides by its own rows
    per_dev = ttnn.cross_entropy_loss(x, ids(mesh, tgt, dim=0))
    close(lr.detach().reshape(2, -1).mean(dim=1).reshape(2, 1, 1, 1), value(per_dev, 0))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(mesh, name, reduction):
    p = leaf(mesh, randn(2, 1, 8, 32))
    t_np = randn(2, 1, 8, 32)
    t_np[0, 0, 0, :4] = value(p)[0, 0, 0, :4]  # zero differences: l1's gradient is 0 there, as torch's
    t = leaf(mesh, t_np)
    out = getattr(ttnn, name)(p, t, reduction=reduction)
    g, gt = upstream(out)
    out.backward(gt)
    pr, tr = ref(p), ref(t)
    lr = getattr(F, name)(pr, tr, reduction=reduction)
    lr.backward(torch.tensor(g, dtype=torch.float64).reshape(lr.shape))
    close(lr.reshape(out.shape), value(out))
    close(pr.grad, grad_of(p))
    close(tr.grad, grad_of(t))


# --- log-softmax and norms ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("dim", [-1, 2])
def test_log_softmax(mesh, dtype, dim):
    x = leaf(mesh, randn(2, 3, 32, 48, scale=4.0), dtype)
    y = ttnn.log_softmax(x, dim)
    g, gt = upstream(y)
    y.backward(gt)
    xr = ref(x)
    yr = F.log_softmax(xr, dim=dim)
    yr.backward(torch.tensor(g, dtype=torch.float64))
    close(yr, value(y), dtype)
    close(xr.grad, grad_of(x), dtype)


def _rms_ref(x, w, eps):
    rms = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return x / rms * w.reshape(-1), rms


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_rms_norm_forward_backward(mesh, dtype):
    x = leaf(mesh, randn(2, 1, 32, 64), dtype)
    w = leaf(mesh, randn(1, 1, 1, 64) + 1.0, dtype)
    y, rms = ttnn.rms_norm_forward(x, w, epsilon=1e-6)
    assert rms.dtype is F32 and tuple(rms.shape) == (2, 1, 32, 1)
    g, gt = upstream(y)
    grms, grmst = upstream(rms)
    # both outputs take part: gradients through the saved statistic are chained too
    y.backward(gt, retain_graph=True)
    rms.backward(grmst)
    xr, wr = ref(x), ref(w)
    yr, rr = _rms_ref(xr, wr, 1e-6)
    torch.autograd.backward(
        [yr, rr], [torch.tensor(g, dtype=torch.float64), torch.tensor(grms, dtype=torch.float64)]
    )
    close(yr, value(y), dtype)
    close(rr, value(rms), dtype)
    close(xr.grad, grad_of(x), dtype)
    close(wr.grad, grad_of(w), dtype)


def test_rms_norm_without_intermediates_and_weight(mesh):
    x = leaf(mesh, randn(1, 1, 32, 48))
    y = ttnn.rms_norm_forward(x, None, epsilon=1e-5, return_intermediates=False)
    assert isinstance(y, ttnn.Tensor)
    g, gt = upstream(y)
    y.backward(gt)
    xr = ref(x)
    yr, _ = _rms_ref(xr, torch.ones(48, dtype=torch.float64), 1e-5)
    yr.backward(torch.tensor(g, dtype=torch.float64))
    close(yr, value(y))
    close(xr.grad, grad_of(x))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_layer_norm_forward_backward(mesh, dtype):
    x = leaf(mesh, randn(2, 1, 32, 64) + 0.5, dtype)
    w = leaf(mesh, randn(1, 1, 1, 64) + 1.0, dtype)
    b = leaf(mesh, randn(64), dtype, layout=RM)
    y, mean, rstd = ttnn.layer_norm_forward(x, w, b, epsilon=1e-5)
    g, gt = upstream(y)
    gm, gmt = upstream(mean)
    gr, grt = upstream(rstd)
    y.backward(gt, retain_graph=True)
    mean.backward(gmt, retain_graph=True)
    rstd.backward(grt)
    xr, wr, br = ref(x), ref(w), ref(b)
    mr = xr.mean(-1, keepdim=True)
    rr = 1.0 / torch.sqrt(((xr - mr) ** 2).mean(-1, keepdim=True) + 1e-5)
    yr = (xr - mr) * rr * wr.reshape(-1) + br
    torch.autograd.backward([yr, mr, rr], [torch.tensor(a, dtype=torch.float64) for a in (g, gm, gr)])
    close(yr, value(y), dtype)
    close(mr, value(mean))
    close(rr, value(rstd))
    for t, r in ((x, xr), (w, wr), (b, br)):
        close(r.grad, grad_of(t), dtype)


def test_layer_norm_without_intermediates(mesh):
    x = leaf(mesh, randn(2, 1, 32, 32))
    y = ttnn.layer_norm_forward(x, return_intermediates=False)
    g, gt = upstream(y)
    y.backward(gt)
    xr = ref(x)
    yr = F.layer_norm(xr, (32,), eps=1e-5)
    yr.backward(torch.tensor(g, dtype=torch.float64))
    close(yr, value(y))
    close(xr.grad, grad_of(x))


# --- SiLU backward and SwiGLU ------------------------------------------------------------------------------------------


def test_silu_bw_and_its_second_order(mesh):
    x = leaf(mesh, randn(1, 1, 32, 64, scale=3.0))
    g = leaf(mesh, randn(1, 1, 32, 64))
    (dx,) = ttnn.silu_bw(g, x)
    xr, gr = ref(x), ref(g)
    (dxr,) = torch.autograd.grad(F.silu(xr), xr, gr, create_graph=True)
    close(dxr, value(dx))
    up, upt = upstream(dx)
    dx.backward(upt)
    dxr.backward(torch.tensor(up, dtype=torch.float64))
    close(xr.grad, grad_of(x))
    close(gr.grad, grad_of(g))
    # extreme inputs stay finite
    (big,) = ttnn.silu_bw(
        leaf(mesh, np.full((1, 1, 32, 32), 1e4), grad=False),
        leaf(mesh, np.full((1, 1, 32, 32), -200.0), grad=False),
    )
    assert np.all(value(big) == 0.0)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_swiglu(mesh, dtype):
    e, h = 32, 64
    x = leaf(mesh, randn(2, 1, 16, e), dtype)
    w1, w3 = leaf(mesh, randn(1, 1, e, h, scale=0.2), dtype), leaf(mesh, randn(1, 1, e, h, scale=0.2), dtype)
    w2 = leaf(mesh, randn(1, 1, h, e, scale=0.2), dtype)
    y = ttnn.swiglu(x, w1, w2, w3)
    g, gt = upstream(y)
    y.backward(gt)
    xr, r1, r2, r3 = (ref(t) for t in (x, w1, w2, w3))
    yr = (F.silu(xr @ r1) * (xr @ r3)) @ r2
    yr.backward(torch.tensor(g, dtype=torch.float64))
    close(yr, value(y), dtype)
    for t, r in ((x, xr), (w1, r1), (w2, r2), (w3, r3)):
        close(r.grad, grad_of(t), dtype)


def test_swiglu_only_weights_need_grad(mesh):
    x = leaf(mesh, randn(1, 1, 8, 16), grad=False)
    w1, w2, w3 = leaf(mesh, randn(16, 8)), leaf(mesh, randn(8, 16), grad=False), leaf(mesh, randn(16, 8))
    y = ttnn.swiglu(x, w1, w2, w3)
    y.backward(upstream(y)[1])
    assert w1.grad is not None and w3.grad is not None and w2.grad is None and x.grad is None


# --- attention ------------------------------------------------------------------------------------------------------------


def _attn_ref(q, k, v, mask, scale, causal, drop=None):
    hq, hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    s = q @ k.transpose(-1, -2) * scale
    if mask is not None:
        s = s + mask
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool).tril(), float("-inf"))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.softmax(s, dim=-1)
    if drop is not None:
        p = p * torch.tensor(drop, dtype=torch.float64)
    return p @ v, lse


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(
    ("hq", "hkv", "causal", "with_mask"), [(4, 4, False, True), (4, 2, True, False), (4, 1, True, True)]
)
def test_sdpa_forward_backward(mesh, dtype, hq, hkv, causal, with_mask):
    b, s, d = 2, 32, 16
    q, k, v = (
        leaf(mesh, randn(b, hq, s, d), dtype),
        leaf(mesh, randn(b, hkv, s, d), dtype),
        leaf(mesh, randn(b, hkv, s, d), dtype),
    )
    mask_np = np.where(RNG.random((b, 1, s, s)) < 0.2, -1e9, 0.0).astype(np.float32) if with_mask else None
    mask = None if mask_np is None else leaf(mesh, mask_np, grad=False)
    out, lse = ttnn.transformer.scaled_dot_product_attention_forward(
        q, k, v, mask, is_causal=causal, return_intermediates=True
    )
    assert out.dtype is dtype and lse.dtype is F32 and tuple(lse.shape) == (b, hq, s, 1)
    g, gt = upstream(out)
    gl, glt = upstream(lse)
    out.backward(gt, retain_graph=True)
    lse.backward(glt)
    qr, kr, vr = ref(q), ref(k), ref(v)
    mr = None if mask is None else torch.tensor(value(mask))
    o, l_ = _attn_ref(qr, kr, vr, mr, 1 / math.sqrt(d), causal)
    torch.autograd.backward(
        [o, l_], [torch.tensor(g, dtype=torch.float64), torch.tensor(gl, dtype=torch.float64)]
    )
    close(o, value(out), dtype)
    close(l_, value(lse))
    for t, r in ((q, qr), (k, kr), (v, vr)):
        close(r.grad, grad_of(t), dtype)


def test_sdpa_dropout_is_real_seeded_and_replayed_in_backward(mesh):
    b, h, s, d, p = 1, 4, 32, 8, 0.25
    q, k, v = leaf(mesh, randn(b, h, s, d)), leaf(mesh, randn(b, 2, s, d)), leaf(mesh, randn(b, 2, s, d))
    sdpa = ttnn.transformer.scaled_dot_product_attention_forward
    out = sdpa(q, k, v, is_causal=True, dropout_probability=p, seed=7, scale=0.5)
    again = sdpa(q, k, v, is_causal=True, dropout_probability=p, seed=7, scale=0.5)
    other = sdpa(q, k, v, is_causal=True, dropout_probability=p, seed=8, scale=0.5)
    plain = sdpa(q, k, v, is_causal=True, scale=0.5)
    np.testing.assert_array_equal(value(out), value(again))
    assert not np.array_equal(value(out), value(other))
    assert not np.allclose(value(out), value(plain))
    # the mask the op used: the kernel's dropout mask over [B, H, Sq, Sk] with the same seed
    drop = tk.dropout_mask((b, h, s, s), p, 7)
    assert set(np.unique(drop)) == {0.0, np.float32(1 / (1 - p))}
    g, gt = upstream(out)
    out.backward(gt)
    qr, kr, vr = ref(q), ref(k), ref(v)
    o, _ = _attn_ref(qr, kr, vr, None, 0.5, True, drop)
    o.backward(torch.tensor(g, dtype=torch.float64))
    close(o, value(out))
    for t, r in ((q, qr), (k, kr), (v, vr)):
        close(r.grad, grad_of(t))


def test_sdpa_heads_sharded_over_mesh(open_mesh):
    mesh = open_mesh((1, 2))
    q, k, v = (leaf(mesh, randn(1, 4, 32, 8), dim=1) for _ in range(3))
    out = ttnn.transformer.scaled_dot_product_attention_forward(q, k, v, is_causal=True)
    g, gt = upstream(out, dim=1)
    out.backward(gt)
    qr, kr, vr = ref(q, 1), ref(k, 1), ref(v, 1)
    o, _ = _attn_ref(qr, kr, vr, None, 1 / math.sqrt(8), True)
    o.backward(torch.tensor(g, dtype=torch.float64))
    close(o, value(out, 1))
    for t, r in ((q, qr), (k, kr), (v, vr)):
        close(r.grad, grad_of(t, 1))


def test_sdpa_fully_masked_rows_and_lse_only_gradient(mesh):
    q, k, v = (leaf(mesh, randn(1, 1, 32, 8)) for _ in range(3))
    mask = np.zeros((1, 1, 32, 32), np.float32)
    mask[0, 0, 3] = -np.inf
    out, lse = ttnn.transformer.scaled_dot_product_attention_forward(
        q, k, v, leaf(mesh, mask, grad=False), return_intermediates=True
    )
    assert np.all(value(out)[0, 0, 3] == 0.0) and value(lse)[0, 0, 3, 0] == -np.inf
    # only the statistic is used downstream: the output gradient is taken as zero
    gl = np.ones((1, 1, 32, 1), np.float32)
    lse.backward(leaf(mesh, gl, grad=False))
    qr, kr = ref(q), ref(k)
    s = qr @ kr.transpose(-1, -2) / math.sqrt(8) + torch.tensor(mask, dtype=torch.float64)
    keep = torch.ones(32, dtype=torch.bool)
    keep[3] = False
    torch.logsumexp(s[0, 0, keep], dim=-1).sum().backward()
    close(qr.grad, grad_of(q))
    close(kr.grad, grad_of(k))
    assert np.all(grad_of(v) == 0.0)


# --- sampling and the profiler marker ---------------------------------------------------------------------------------


def test_sample_deterministic_greedy_and_distributed(mesh):
    logits = randn(1, 1, 64, 50, scale=2.0)
    x = leaf(mesh, logits, grad=True)
    a = ttnn.sample(x, temperature=1.0, seed=3)
    assert a.dtype is ttnn.uint32 and a.layout is RM and tuple(a.shape) == (1, 1, 64, 1)
    np.testing.assert_array_equal(value(a), value(ttnn.sample(x, temperature=1.0, seed=3)))
    assert not np.array_equal(value(a), value(ttnn.sample(x, temperature=1.0, seed=4)))
    greedy = ttnn.sample(x, temperature=0, seed=3)
    np.testing.assert_array_equal(value(greedy)[..., 0], np.argmax(value(x), axis=-1))
    assert a.grad_fn is None  # ids carry no gradient even though the logits require grad
    # frequencies follow softmax(x / T)
    row = np.array([1.0, 0.0, -1.0, 2.0, 0.5], np.float32)
    many = leaf(mesh, np.tile(row, (1, 1, 4000, 1)), grad=False)
    drawn = value(ttnn.sample(many, temperature=0.7, seed=1)).astype(int).ravel()
    freq = np.bincount(drawn, minlength=5) / drawn.size
    expect = torch.softmax(torch.tensor(row / 0.7, dtype=torch.float64), 0).numpy()
    assert np.abs(freq - expect).max() < 0.03


def test_profiler_no_op(mesh):
    x = leaf(mesh, randn(1, 1, 32, 32))
    with ttnn.OpTrace() as trace:
        y = ttnn.profiler_no_op(x, "block0/attn")
        z = ttnn.profiler_no_op(y, identifier="kw")
        ttnn.profiler_no_op(y)
    assert trace.entries[0] == ("ttnn.profiler_no_op", ((1, 1, 32, 32),), "block0/attn")
    assert trace.entries[1][2] == "kw" and trace.entries[2][2] == "profiler_no_op"
    assert trace.names == ["ttnn.profiler_no_op"] * 3
    assert y is not x and y.shards()[0] is x.shards()[0]
    g, gt = upstream(z)
    z.backward(gt)
    np.testing.assert_array_equal(grad_of(x), g)


# --- optimizers -------------------------------------------------------------------------------------------------------------

SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05),
]


def _mesh_param(mesh, arr, dtype=F32):
    return ttnn.from_numpy(arr, dtype=dtype, layout=TILE, device=mesh)


@pytest.mark.parametrize("cfg", SGD_CASES)
def test_sgd_matches_torch_over_20_steps(open_mesh, cfg):
    mesh = open_mesh((1, 2))  # replicated parameters: every device takes the same step
    p0 = randn(32, 64)
    p = _mesh_param(mesh, p0)
    buf = _mesh_param(mesh, np.zeros_like(p0)) if cfg.get("momentum") else None
    tp = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.SGD([tp], **cfg)
    for step in range(20):
        g = randn(32, 64)
        out = ttnn.sgd_step_(p, _mesh_param(mesh, g), buf, first_step=step == 0, **cfg)
        assert out is p
        tp.grad = torch.tensor(g)
        opt.step()
    for shard in p.shards():
        close(tp.detach().numpy(), shard)
        np.testing.assert_allclose(shard, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adamw_matches_torch_over_20_steps(mesh, amsgrad):
    p0 = randn(32, 64)
    cfg = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, amsgrad=amsgrad)
    p = _mesh_param(mesh, p0)
    m, v = _mesh_param(mesh, np.zeros_like(p0)), _mesh_param(mesh, np.zeros_like(p0))
    vmax = _mesh_param(mesh, np.zeros_like(p0)) if amsgrad else None
    tp = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.AdamW([tp], **cfg)
    for step in range(1, 21):
        g = randn(32, 64, scale=10.0 ** RNG.uniform(-2, 1))
        ttnn.adamw_step_(
            p,
            _mesh_param(mesh, g),
            m,
            v,
            vmax,
            lr=1e-2,
            beta1=0.9,
            beta2=0.95,
            eps=1e-8,
            weight_decay=0.1,
            step=step,
            amsgrad=amsgrad,
        )
        tp.grad = torch.tensor(g)
        opt.step()
    np.testing.assert_allclose(value(p), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    st = opt.state[tp]
    np.testing.assert_allclose(value(m), st["exp_avg"].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(value(v), st["exp_avg_sq"].numpy(), rtol=1e-5, atol=1e-9)
    if amsgrad:
        np.testing.assert_allclose(value(vmax), st["max_exp_avg_sq"].numpy(), rtol=1e-5, atol=1e-9)


def _bf16(a):
    return torch.tensor(a).bfloat16().float()


def test_bfloat16_parameters_quantise_on_store(mesh):
    """bf16 parameter and states: float32 math, each stored array rounded to bfloat16 once per step."""
    p0 = randn(32, 32)
    p = _mesh_param(mesh, p0, BF16)
    m, v = _mesh_param(mesh, np.zeros_like(p0), BF16), _mesh_param(mesh, np.zeros_like(p0), BF16)
    ps = _mesh_param(mesh, p0, BF16)
    buf = _mesh_param(mesh, np.zeros_like(p0), BF16)
    tp, tm, tv = _bf16(p0), torch.zeros(32, 32), torch.zeros(32, 32)
    tps, tbuf = _bf16(p0), torch.zeros(32, 32)
    for step in range(1, 21):
        g = randn(32, 32)
        gb = _bf16(g)
        ttnn.adamw_step_(p, _mesh_param(mesh, g, BF16), m, v, lr=1e-2, step=step)
        ttnn.sgd_step_(ps, _mesh_param(mesh, g, BF16), buf, lr=0.05, momentum=0.9, first_step=step == 1)
        # reference: torch float32 math on the stored values; each updated array rounded once when stored
        pd = tp * (1 - 1e-2 * 0.01)
        m32 = tm + 0.1 * (gb - tm)
        v32 = tv * 0.999 + 0.001 * gb * gb
        denom = v32.sqrt() / math.sqrt(1 - 0.999**step) + 1e-8
        tp = (pd - (1e-2 / (1 - 0.9**step)) * m32 / denom).bfloat16().float()
        tm, tv = m32.bfloat16().float(), v32.bfloat16().float()
        b32 = gb.clone() if step == 1 else tbuf * 0.9 + gb
        tps = (tps - 0.05 * b32).bfloat16().float()
        tbuf = b32.bfloat16().float()
        assert p.dtype is BF16
        for t, r in ((p, tp), (ps, tps), (m, tm), (buf, tbuf)):
            got = value(t)
            np.testing.assert_array_equal(got, _bf16(got).numpy())  # still bfloat16 values
            np.testing.assert_allclose(got, r.numpy(), rtol=2**-8, atol=1e-6)


def test_optimizer_steps_do_not_touch_aliases(mesh):
    p0 = randn(32, 32)
    p = _mesh_param(mesh, p0)
    view = p.detach()
    ttnn.sgd_step_(p, _mesh_param(mesh, np.ones_like(p0)), lr=0.5)
    np.testing.assert_array_equal(value(view), p0)  # the detached view keeps the old values
    np.testing.assert_allclose(value(p), p0 - 0.5)


# --- benchmark hook ---------------------------------------------------------------------------------------------------------


def test_backward_kernels_table_names_registered_ops():
    from tttv2.ttnn.autograd import engine

    for name, kernel in training_ops.BACKWARD_KERNELS.items():
        assert engine.has_backward(name) and callable(kernel)


# --- errors ------------------------------------------------------------------------------------------------------------------------


def test_errors_losses(mesh):
    x = leaf(mesh, randn(2, 1, 8, 16), grad=False)
    t = ids(mesh, RNG.integers(0, 16, (2, 8)))
    with pytest.raises(ValidationError, match=r"target: expected class ids in \[0, 16\).*id 16 on device 0"):
        ttnn.cross_entropy_loss(x, ids(mesh, np.full((2, 8), 16)))
    with pytest.raises(ValidationError, match=r"logits\.dtype"):
        ttnn.cross_entropy_loss(ids(mesh, np.zeros((2, 1, 8, 16))), t)
    with pytest.raises(ValidationError, match=r"logits\.layout"):
        ttnn.cross_entropy_loss(leaf(mesh, randn(2, 1, 8, 16), layout=RM, grad=False), t)
    with pytest.raises(ValidationError, match=r"target\.dtype"):
        ttnn.cross_entropy_loss(x, leaf(mesh, np.zeros((2, 8)), grad=False))
    with pytest.raises(ValidationError, match=r"target: expected 16 class ids"):
        ttnn.cross_entropy_loss(x, ids(mesh, np.zeros((2, 4))))
    with pytest.raises(ValidationError, match="reduction"):
        ttnn.cross_entropy_loss(x, t, reduction="avg")
    with pytest.raises(ValidationError, match="memory_config"):
        ttnn.cross_entropy_loss(x, t, memory_config="dram")
    with pytest.raises(ValidationError, match="target: expected the shape of pred"):
        ttnn.mse_loss(x, leaf(mesh, randn(2, 1, 8, 8), grad=False))
    with pytest.raises(ValidationError, match="reduction"):
        ttnn.l1_loss(x, x, reduction=3)


def test_errors_norms_and_activations(mesh):
    x = leaf(mesh, randn(1, 1, 32, 32), grad=False)
    with pytest.raises(ValidationError, match=r"weight: expected a \[1, 1, 1, 32\]"):
        ttnn.rms_norm_forward(x, leaf(mesh, randn(1, 1, 1, 16), grad=False))
    with pytest.raises(ValidationError, match="epsilon"):
        ttnn.rms_norm_forward(x, None, epsilon=-1.0)
    with pytest.raises(ValidationError, match="return_intermediates"):
        ttnn.layer_norm_forward(x, return_intermediates=1)
    with pytest.raises(ValidationError, match="dim"):
        ttnn.log_softmax(x, 4)
    with pytest.raises(ValidationError, match="grad_tensor: expected the shape"):
        ttnn.silu_bw(leaf(mesh, randn(1, 1, 32, 64), grad=False), x)
    with pytest.raises(ValidationError, match=r"w1: expected a \[1, 1, 32, out\]"):
        ttnn.swiglu(x, leaf(mesh, randn(16, 8), grad=False), x, x)
    with pytest.raises(ValidationError, match="w3: expected"):
        ttnn.swiglu(
            x,
            leaf(mesh, randn(32, 8), grad=False),
            leaf(mesh, randn(8, 32), grad=False),
            leaf(mesh, randn(32, 16), grad=False),
        )
    with pytest.raises(ValidationError, match="input_tensor"):
        ttnn.profiler_no_op(np.zeros(3), "x")
    with pytest.raises(ValidationError, match="identifier"):
        ttnn.profiler_no_op(x, 3)


def test_errors_attention(mesh):
    q = leaf(mesh, randn(1, 4, 32, 8), grad=False)
    k = leaf(mesh, randn(1, 3, 32, 8), grad=False)
    kv = leaf(mesh, randn(1, 2, 32, 8), grad=False)
    sdpa = ttnn.transformer.scaled_dot_product_attention_forward
    with pytest.raises(ValidationError, match="dividing the 4 query heads"):
        sdpa(q, k, k)
    with pytest.raises(ValidationError, match=r"k: expected \[1, Hkv, Sk, 8\]"):
        sdpa(q, leaf(mesh, randn(1, 2, 32, 16), grad=False), kv)
    with pytest.raises(ValidationError, match="v: expected"):
        sdpa(q, kv, leaf(mesh, randn(1, 2, 16, 8), grad=False))
    with pytest.raises(ValidationError, match="attn_mask: expected an additive mask"):
        sdpa(q, kv, kv, leaf(mesh, randn(1, 2, 32, 32), grad=False))
    with pytest.raises(ValidationError, match="dropout_probability"):
        sdpa(q, kv, kv, dropout_probability=1.0)
    with pytest.raises(ValidationError, match="seed"):
        sdpa(q, kv, kv, seed=-1)
    with pytest.raises(ValidationError, match="scale"):
        sdpa(q, kv, kv, scale=float("nan"))
    with pytest.raises(ValidationError, match="q rank"):
        sdpa(leaf(mesh, randn(4, 32, 8), grad=False), kv, kv)
    qg = leaf(mesh, randn(1, 4, 32, 8))
    mask = leaf(mesh, np.zeros((1, 1, 32, 32)))
    out = sdpa(qg, kv, kv, mask)
    with pytest.raises(ValidationError, match="attn_mask: expected a mask that does not require grad"):
        out.backward(upstream(out)[1])
    with pytest.raises(ValidationError, match="temperature"):
        ttnn.sample(q, temperature=-1.0)
    with pytest.raises(ValidationError, match="seed"):
        ttnn.sample(q, seed=True)


def test_errors_optimizers(mesh):
    p = _mesh_param(mesh, randn(32, 32))
    g = _mesh_param(mesh, randn(32, 32))
    with pytest.raises(ValidationError, match="nesterov: expected momentum > 0"):
        ttnn.sgd_step_(p, g, lr=0.1, nesterov=True)
    with pytest.raises(ValidationError, match="momentum_buffer: expected a tensor when momentum != 0"):
        ttnn.sgd_step_(p, g, lr=0.1, momentum=0.9)
    with pytest.raises(ValidationError, match="momentum_buffer: expected a tensor other than param"):
        ttnn.sgd_step_(p, g, p, lr=0.1, momentum=0.9)
    with pytest.raises(ValidationError, match="grad: expected the shape of param"):
        ttnn.sgd_step_(p, _mesh_param(mesh, randn(32, 16)), lr=0.1)
    with pytest.raises(ValidationError, match="lr"):
        ttnn.sgd_step_(p, g, lr=-1.0)
    with pytest.raises(ValidationError, match="first_step"):
        ttnn.sgd_step_(p, g, lr=0.1, first_step=None)
    m, v = _mesh_param(mesh, np.zeros((32, 32))), _mesh_param(mesh, np.zeros((32, 32)))
    with pytest.raises(ValidationError, match="step: expected an int >= 1"):
        ttnn.adamw_step_(p, g, m, v, lr=0.1, step=0)
    with pytest.raises(ValidationError, match="beta2"):
        ttnn.adamw_step_(p, g, m, v, lr=0.1, beta2=1.0, step=1)
    with pytest.raises(ValidationError, match="max_exp_avg_sq: expected a tensor when amsgrad=True"):
        ttnn.adamw_step_(p, g, m, v, lr=0.1, step=1, amsgrad=True)
    with pytest.raises(ValidationError, match="max_exp_avg_sq: expected its own tensor"):
        ttnn.adamw_step_(p, g, m, v, m, lr=0.1, step=1, amsgrad=True)
    with pytest.raises(ValidationError, match="exp_avg_sq: expected a tensor other than exp_avg"):
        ttnn.adamw_step_(p, g, m, m, lr=0.1, step=1)
    with pytest.raises(ValidationError, match=r"param\.dtype"):
        ttnn.adamw_step_(ids(mesh, np.zeros((32, 32))), g, m, v, lr=0.1, step=1)
