"""The fused training kernels: C++ (tttv2._native.training, through tttv2.ttnn._kernels.training) against their
numpy references (tttv2.ttnn._kernels.training_reference), at every SIMD level of the CPU, plus the random
generator (determinism, keep rate), the kernels' own argument checks and the in-place optimizer steps.

Kernels without an exp (the norms forward and backward, softmax backward) match bit for bit: the reference's row
and column sums follow the C++ order (``training_reference._rowsum``, ``_column_sum``). Kernels with an exp: ``|err| <= 2e-6·m + 1e-7`` on the largest
reference magnitude ``m`` (the C++ exp is within ~2 ulp of numpy's); the products of the attention and SwiGLU
kernels are the same numpy matmuls in both. Integer results (ids, masks) must match exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tttv2 import _native
from tttv2.ttnn import _kernels
from tttv2.ttnn._kernels import training as tk
from tttv2.ttnn._kernels import training_reference as ref

RNG = np.random.default_rng(5)
NT = _native.training
LEVELS = _native.simd_levels()


def randn(*shape, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale, dtype=np.float32)


@pytest.fixture(params=LEVELS)
def simd(request):
    previous = _native.set_simd_level(request.param)
    yield request.param
    _native.set_simd_level(previous)


def both(name, *args, **kwargs):
    native = getattr(tk, name)(*args, **kwargs)
    with _kernels.use_backend("reference"):
        reference = getattr(tk, name)(*args, **kwargs)
    return native, reference


def agree(native, reference, tol=2e-6):
    native = native if isinstance(native, tuple) else (native,)
    reference = reference if isinstance(reference, tuple) else (reference,)
    assert len(native) == len(reference)
    for a, b in zip(native, reference):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        if a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b)
            continue
        assert np.array_equal(np.isfinite(a), np.isfinite(b))
        fin = np.isfinite(b)
        m = float(np.abs(b[fin]).max()) if fin.any() else 0.0
        err = float(np.abs(a[fin].astype(np.float64) - b[fin]).max()) if fin.any() else 0.0
        assert err <= tol * m + 1e-7, f"max error {err} vs max |ref| {m}"
        np.testing.assert_array_equal(a[~fin], b[~fin])


# --- row kernels -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 1, 5, 7), (2, 1, 32, 300), (64, 1024)])
def test_softmax_family_and_losses(simd, shape):
    x = randn(*shape, scale=4.0)
    x.reshape(-1, shape[-1])[0, :3] = [80.0, -90.0, 1e3]  # large logits stay finite (max shift)
    target = RNG.integers(0, shape[-1], shape[:-1])
    dy = randn(*shape)
    agree(*both("cross_entropy_forward", x, target))
    agree(*both("cross_entropy_backward", x, target, 0.25))
    agree(*both("cross_entropy_backward", x, target, randn(*shape[:-1], 1)))
    agree(*both("log_softmax", x))
    y = ref.log_softmax(x)
    agree(*both("log_softmax_backward", y, dy))
    same_bits(*both("softmax_backward", np.exp(y), dy))  # no exp inside: the same bits
    assert np.isfinite(tk.cross_entropy_forward(x, target)).all()


def same_bits(native, reference):
    native = native if isinstance(native, tuple) else (native,)
    reference = reference if isinstance(reference, tuple) else (reference,)
    assert len(native) == len(reference)
    for a, b in zip(native, reference):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32, (a.shape, b.shape, a.dtype, b.dtype)
        nan = np.isnan(b)
        assert np.array_equal(np.isnan(a), nan)  # a NaN's sign and payload are not specified
        np.testing.assert_array_equal(
            np.where(nan, 0, a).view(np.uint32), np.where(nan, 0, b).view(np.uint32)
        )


def norm_grads_agree(native, reference):
    """dx, dweight and dbias bit for bit (the column sums: training_reference._column_sum's chunk order)."""
    for a, b in zip(native, reference, strict=True):
        same_bits(a, b)


def column_sum_tie_dy(rows=64, d=1024):
    """dy whose column 0 sums differently in float32 depending on the row chunks: rows 0 and 1 make 1 + 2^-24 (a
    float32 tie) and rows 32..34 add 3 · 2^-54 (each lost on its own next to 1, together 0.75 of a float64 step),
    so one chunk of 64 rows gives 1.0 and two chunks of 32 give 1 + 2^-23. 64 × 1024 values: two chunks."""
    dy = np.zeros((rows, d), np.float32)
    dy[0, 0], dy[1, 0] = 1.0, 2.0**-24
    dy[32:35, 0] = 2.0**-54
    return dy


_DBIAS = """
import sys
import numpy as np
from tests.ttnn.test_training_kernels import column_sum_tie_dy
from tttv2.ttnn._kernels import training as tk
dy = column_sum_tie_dy()
x = np.random.default_rng(0).standard_normal(dy.shape).astype(np.float32)
print(int(tk.layer_norm_backward(x, None, None, None, dy, 1e-5)[2].view(np.uint32)[0]))
"""


def test_column_sums_do_not_depend_on_the_thread_count():
    """The norms' dweight / dbias chunks depend on the shape only: one thread gives the two-chunk sum too (with
    chunks per thread, one thread summed the 64 rows as one chunk and gave 1.0 here)."""
    dy = column_sum_tie_dy()
    x = np.random.default_rng(0).standard_normal(dy.shape).astype(np.float32)
    expected = ref.layer_norm_backward(x, None, None, None, dy, 1e-5)[2]
    assert expected[0] == np.float32(1 + 2.0**-23)
    same_bits(tk.layer_norm_backward(x, None, None, None, dy, 1e-5)[2], expected)
    env = {k: v for k, v in os.environ.items() if k != "TTTV2_KERNELS"}
    env["TTTV2_NUM_THREADS"] = "1"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _DBIAS], capture_output=True, text=True, env=env, cwd=root, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == int(expected.view(np.uint32)[0])


@pytest.mark.parametrize("shape", [(2, 1, 16, 48), (256, 512), (3, 1001)])
def test_norm_kernels(simd, shape):
    d = shape[-1]
    x = randn(*shape) + 2.0
    w, b, dy = randn(d), randn(d), randn(*shape)
    same_bits(*both("rms_norm_forward", x, w, 1e-6))
    same_bits(*both("rms_norm_forward", x, None, 1e-6))
    rms = ref.rms_norm_forward(x, w, 1e-6)[1]
    norm_grads_agree(*both("rms_norm_backward", x, w, rms, dy, 1e-6))
    norm_grads_agree(*both("rms_norm_backward", x, None, None, dy, 1e-6))
    same_bits(*both("layer_norm_forward", x, w, b, 1e-5))
    same_bits(*both("layer_norm_forward", x, None, None, 1e-5))
    _, mean, rstd = ref.layer_norm_forward(x, w, b, 1e-5)
    norm_grads_agree(*both("layer_norm_backward", x, w, mean, rstd, dy, 1e-5))
    norm_grads_agree(*both("layer_norm_backward", x, None, None, None, dy, 1e-5))
    same_bits(*both("softmax_backward", np.exp(ref.log_softmax(x)), dy))
    # recomputed statistics give the same gradients as saved ones
    np.testing.assert_allclose(
        tk.rms_norm_backward(x, w, None, dy, 1e-6)[0],
        tk.rms_norm_backward(x, w, rms, dy, 1e-6)[0],
        rtol=1e-6,
        atol=1e-6,
    )


@st.composite
def training_rows(draw):
    """[rows, d] float32 rows (d across the 8-lane boundary), scaled and offset so that sums cancel or get large."""
    rows, d = draw(st.integers(1, 4)), draw(st.sampled_from([1, 7, 8, 9, 63, 300, 1029]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([1e-20, 1e-2, 1.0, 1e4, 1e15]))
    offset = draw(st.sampled_from([0.0, 1.0, -300.0, 1e5]))
    x = (rng.standard_normal((rows, d)) * scale + offset).astype(np.float32)
    w, b, dy = (rng.standard_normal(shape).astype(np.float32) for shape in (d, d, (rows, d)))
    return x, w, b, dy


@settings(max_examples=40, deadline=None)
@given(training_rows())
def test_norm_kernels_same_bits_any_rows(data):
    """The exp-free training kernels follow the C++ sum order (training_reference._rowsum): the same bits for any
    rows, at every SIMD level."""
    x, w, b, dy = data
    previous = _native.set_simd_level(LEVELS[-1])
    try:
        for level in LEVELS:
            _native.set_simd_level(level)
            with np.errstate(all="ignore"):
                same_bits(*both("rms_norm_forward", x, w, 1e-6))
                same_bits(*both("layer_norm_forward", x, w, b, 1e-5))
                for name, args in (("rms_norm_backward", (x, w, None, dy, 1e-6)),
                                   ("layer_norm_backward", (x, w, None, None, dy, 1e-5))):  # fmt: skip
                    native, reference = both(name, *args)
                    norm_grads_agree(native, reference)
                same_bits(*both("softmax_backward", np.abs(x), dy))
    finally:
        _native.set_simd_level(previous)


def test_activation_kernels(simd):
    x = randn(3, 1000, scale=6.0)
    x[0, :4] = [-200.0, 200.0, 0.0, -1e4]
    dy = randn(3, 1000)
    agree(*both("silu_backward", x, dy))
    a, b, dh = randn(40, 64, scale=4.0), randn(40, 64), randn(40, 64)
    agree(tk._gate_backward(a, b, dh), ref.swiglu_gate_backward(a, b, dh))
    x, w1, w3, w2 = (
        randn(2, 8, 32),
        randn(32, 48, scale=0.2),
        randn(32, 48, scale=0.2),
        randn(48, 32, scale=0.2),
    )
    dy = randn(2, 8, 32)
    agree(*both("swiglu_forward", x, w1, w2, w3), tol=1e-5)
    agree(*both("swiglu_backward", x, w1, w2, w3, dy), tol=1e-5)


# --- attention -------------------------------------------------------------------------------------------------------


ATTN = [
    # (B, Hq, Hkv, Sq, Sk, mask shape, causal, dropout)
    (2, 4, 2, 16, 16, (1, 1, 16, 16), True, 0.0),
    (2, 4, 1, 16, 24, (2, 4, 16, 24), False, 0.3),
    (3, 2, 2, 8, 8, (3, 1, 1, 8), True, 0.5),
    (1, 2, 1, 8, 8, (1, 1, 8, 1), False, 0.1),
    (2, 2, 2, 8, 8, None, False, 0.0),
]


@pytest.mark.parametrize(("b", "hq", "hkv", "sq", "sk", "mshape", "causal", "p"), ATTN)
def test_attention_kernels(simd, monkeypatch, b, hq, hkv, sq, sk, mshape, causal, p):
    monkeypatch.setattr(tk, "_SCORE_BUDGET", hq * sq * sk)  # one batch per chunk: exercises the offsets
    q, k, v = randn(b, hq, sq, 8), randn(b, hkv, sk, 8), randn(b, hkv, sk, 12)
    mask = None if mshape is None else np.where(RNG.random(mshape) < 0.2, -1e9, 0.0).astype(np.float32)
    kw = dict(scale=0.4, is_causal=causal, dropout_p=p, seed=9)
    out_n, out_r = both("sdpa_forward", q, k, v, mask, **kw)
    agree(out_n, out_r)
    lse = out_r[1]
    go, gl = randn(b, hq, sq, 12), randn(b, hq, sq, 1)
    agree(*both("sdpa_backward", q, k, v, go, mask, lse, **kw), tol=1e-5)
    agree(*both("sdpa_backward", q, k, v, go, mask, None, grad_lse=gl, **kw), tol=1e-5)


def test_attention_dead_rows_and_scalar_mask():
    q, k, v = randn(1, 1, 4, 8), randn(1, 1, 4, 8), randn(1, 1, 4, 8)
    mask = np.zeros((1, 1, 4, 4), np.float32)
    mask[..., 1, :] = -np.inf
    kw = dict(scale=1.0, is_causal=False, dropout_p=0.0, seed=0)
    (out, lse), (out_r, lse_r) = both("sdpa_forward", q, k, v, mask, **kw)
    assert np.all(out[0, 0, 1] == 0) and lse[0, 0, 1, 0] == -np.inf
    agree((out, lse), (out_r, lse_r))
    agree(*both("sdpa_backward", q, k, v, randn(1, 1, 4, 8), mask, lse, **kw))
    agree(*both("sdpa_forward", q, k, v, np.float32(0.5), **kw))


# --- randomness -------------------------------------------------------------------------------------------------------


def test_random_bits_match_the_scalar_definition():
    key = ref.random_key(12345, ref.STREAM_DROPOUT)
    bits = ref.random_bits(key, 5, 3)
    golden = 0x9E3779B97F4A7C15
    expect = [ref._mix64_int(key + (i + 1) * golden) for i in range(5, 8)]
    assert [int(b) for b in bits] == expect
    assert ref.random_key(2**64 + 3, 0) == ref.random_key(3, 0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_determinism_and_keep_rate(p):
    n, seed = 200_000, 17
    a, a_ref = both("dropout_mask", (n,), p, seed)
    np.testing.assert_array_equal(a, a_ref)
    np.testing.assert_array_equal(a, tk.dropout_mask((n,), p, seed))
    b = tk.dropout_mask((n,), p, seed + 1)
    assert np.mean(a != b) > 0.05
    kept = a > 0
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)
    assert np.all(a[kept] == np.float32(1 / (1 - p)))
    # element i does not depend on the shape it is drawn in
    np.testing.assert_array_equal(tk.dropout_mask((4, 50_000), p, seed).reshape(-1), a)
    np.testing.assert_array_equal(tk.dropout_mask((0,), p, seed), np.zeros(0, np.float32))
    assert np.all(tk.dropout_mask((1000,), 0.0, seed) == 1.0)


def test_dropout_probability_range():
    for p in (-0.1, 1.0):
        with pytest.raises(ValueError, match="dropout probability"):
            tk.dropout_mask((4,), p, 0)


def test_gumbel_argmax():
    x = randn(2, 30, 50, scale=3.0)
    for t in (0.0, 0.5, 2.0):
        agree(*both("gumbel_argmax", x, t, 4))
    np.testing.assert_array_equal(tk.gumbel_argmax(x, 0.0, 1), np.argmax(x, -1).astype(np.uint32))
    np.testing.assert_array_equal(tk.gumbel_argmax(x, 1.0, 1), tk.gumbel_argmax(x, 1.0, 1))
    assert not np.array_equal(tk.gumbel_argmax(x, 1.0, 1), tk.gumbel_argmax(x, 1.0, 2))


# --- embedding and optimizers --------------------------------------------------------------------------------------


def test_embedding_backward():
    ids = RNG.integers(0, 20, (4, 64))
    ids[0, :5] = 3  # repeated ids accumulate
    g = randn(4, 64, 40)
    n, r = both("embedding_backward", ids, g, 20)
    np.testing.assert_array_equal(n, r)  # same order of float32 additions
    expect = np.zeros((20, 40))
    np.add.at(expect, ids.reshape(-1), g.reshape(-1, 40).astype(np.float64))
    np.testing.assert_allclose(n, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "cfg",
    [
        dict(lr=0.1),
        dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.1, first_step=True),
        dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
    ],
)
@pytest.mark.parametrize("bf16", [(), ("param", "momentum_buffer")])
def test_sgd_step_in_place(simd, cfg, bf16):
    quant = _kernels.round_bfloat16 if bf16 else (lambda a: a)
    p, g, buf = quant(randn(100_000)), randn(100_000), quant(randn(100_000))
    arrays = {k: [p.copy(), buf.copy()] for k in ("native", "reference")}
    tk.sgd_step(arrays["native"][0], g, arrays["native"][1], bf16=bf16, **cfg)
    with _kernels.use_backend("reference"):
        tk.sgd_step(arrays["reference"][0], g, arrays["reference"][1], bf16=bf16, **cfg)
    for a, b in zip(arrays["native"], arrays["reference"]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(arrays["native"][0], p)


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("beta1", [0.9, 0.3])
def test_adamw_step_in_place(simd, amsgrad, beta1):
    bf16 = ("param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq") if beta1 < 0.5 else ()
    quant = _kernels.round_bfloat16 if bf16 else (lambda a: a)
    start = [
        quant(randn(50_000)),
        quant(randn(50_000)),
        quant(np.abs(randn(50_000))),
        quant(np.abs(randn(50_000))),
    ]
    g = randn(50_000)
    kw = dict(
        lr=1e-2, beta1=beta1, beta2=0.99, eps=1e-8, weight_decay=0.1, step=3, amsgrad=amsgrad, bf16=bf16
    )
    n = [a.copy() for a in start]
    r = [a.copy() for a in start]
    tk.adamw_step(n[0], g, n[1], n[2], n[3], **kw)
    with _kernels.use_backend("reference"):
        tk.adamw_step(r[0], g, r[1], r[2], r[3], **kw)
    for a, b in zip(n, r):
        np.testing.assert_array_equal(a, b)
    if not amsgrad:
        np.testing.assert_array_equal(n[3], start[3])


# --- argument checks ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_id_errors(backend):
    x = randn(4, 10)
    with _kernels.use_backend(backend):
        with pytest.raises(ValueError, match=r"id 10 is out of range \[0, 10\)"):
            tk.cross_entropy_forward(x, np.array([0, 1, 10, 2]))
        with pytest.raises(ValueError, match="id -1 is out of range"):
            tk.cross_entropy_backward(x, np.array([0, -1, 1, 2]), 1.0)
        with pytest.raises(ValueError, match="ids must be integers"):
            tk.cross_entropy_forward(x, np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="out of range"):
            tk.embedding_backward(np.array([0, 5]), randn(2, 3), 5)


def test_native_argument_checks():
    x, out = randn(4, 8), np.empty((4, 8), np.float32)
    t = np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="expected 4 ids, got 3"):
        tk.cross_entropy_forward(x, np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="rank >= 1"):
        tk.log_softmax(np.float32(1.0))
    with pytest.raises(TypeError):
        NT.log_softmax(x.astype(np.float64), out)
    with pytest.raises(ValueError, match="log_softmax: dst must have the shape of x"):
        NT.log_softmax(x, np.empty((4, 4), np.float32))
    with pytest.raises(ValueError, match="log_softmax: x must be 2-D"):
        NT.log_softmax(x.reshape(2, 2, 8), out.reshape(2, 2, 8))
    with pytest.raises(ValueError, match="dst must not overlap x"):
        NT.log_softmax(x, x)
    with pytest.raises(ValueError, match="at least one class"):
        NT.cross_entropy_forward(np.empty((4, 0), np.float32), t, np.empty(4, np.float32))
    with pytest.raises(ValueError, match="at least one class"):
        NT.cross_entropy_backward(
            np.empty((4, 0), np.float32), t, np.ones(1, np.float32), np.empty((4, 0), np.float32)
        )
    with pytest.raises(ValueError, match=r"scale must have shape \(1,\) or \(4,\)"):
        NT.cross_entropy_backward(x, t, np.ones(3, np.float32), out)
    with pytest.raises(ValueError, match=r"target has the wrong shape: expected \(4,\), got \(3,\)"):
        NT.cross_entropy_forward(x, np.zeros(3, np.int64), np.empty(4, np.float32))
    with pytest.raises(ValueError, match="mean and rstd must both be given"):
        NT.layer_norm_backward(
            x,
            None,
            np.zeros(4, np.float32),
            None,
            1e-5,
            x,
            out,
            np.empty(8, np.float32),
            np.empty(8, np.float32),
        )
    with pytest.raises(ValueError, match="weight has the wrong shape"):
        NT.rms_norm_forward(x, np.ones(4, np.float32), 1e-6, out, np.empty(4, np.float32))
    with pytest.raises(ValueError, match="dst must have 8 columns"):
        NT.embedding_backward(t, x, np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match="temperature must be finite"):
        NT.gumbel_argmax(x, -1.0, 0, np.empty(4, np.uint32))
    with pytest.raises(ValueError, match="logits need at least one class"):
        NT.gumbel_argmax(np.empty((4, 0), np.float32), 1.0, 0, np.empty(4, np.uint32))
    with pytest.raises(ValueError, match="momentum_buffer must have the shape of param"):
        NT.sgd_step(randn(8), randn(8), randn(4), 0.1, 0.9, 0.0, False, 0.0, False, False, False)
    with pytest.raises(ValueError, match="param must not overlap grad"):
        p = randn(8)
        NT.sgd_step(p, p, None, 0.1, 0.0, 0.0, False, 0.0, False, False, False)
    with pytest.raises(TypeError):  # in-place kernels need writable arrays
        ro = randn(8)
        ro.flags.writeable = False
        NT.sgd_step(ro, randn(8), None, 0.1, 0.0, 0.0, False, 0.0, False, False, False)
    with pytest.raises(ValueError, match="max_exp_avg_sq must not overlap exp_avg_sq"):
        v = randn(8)
        NT.adamw_step(
            randn(8),
            randn(8),
            randn(8),
            v,
            v,
            0.1,
            0.9,
            0.99,
            1e-8,
            0.0,
            0.1,
            0.5,
            False,
            False,
            False,
            False,
        )
    with pytest.raises(ValueError, match="h must have the shape of a"):
        NT.swiglu_gate_backward(x, x, x, np.empty_like(x), np.empty_like(x), np.empty((2, 2), np.float32))


def test_native_attention_argument_checks():
    raw = randn(2, 2, 4, 4)
    probs, lse = np.empty_like(raw), np.empty(16, np.float32)
    args = dict(scale=1.0, causal=False, threshold=0, keep_scale=1.0, key=0)
    with pytest.raises(ValueError, match="scores must be 4-D"):
        NT.sdpa_row_forward(raw.reshape(4, 4, 4), None, None, **args, b0=0, total_b=2, probs=probs, lse=lse)
    with pytest.raises(ValueError, match="exceeds the batch"):
        NT.sdpa_row_forward(raw, None, None, **args, b0=1, total_b=2, probs=probs, lse=lse)
    with pytest.raises(ValueError, match="a mask needs its strides"):
        NT.sdpa_row_forward(raw, randn(16), None, **args, b0=0, total_b=2, probs=probs, lse=lse)
    with pytest.raises(ValueError, match="mask strides must be >= 0"):
        NT.sdpa_row_forward(raw, randn(16), (0, -1, 4), **args, b0=0, total_b=2, probs=probs, lse=lse)
    with pytest.raises(ValueError, match="must have at least 32 elements"):
        NT.sdpa_row_forward(raw, randn(16), (16, 0, 4), **args, b0=0, total_b=2, probs=probs, lse=lse)
    with pytest.raises(ValueError, match="lse has the wrong shape"):
        NT.sdpa_row_forward(
            raw, None, None, **args, b0=0, total_b=2, probs=probs, lse=np.empty(8, np.float32)
        )
    with pytest.raises(ValueError, match="probs must not overlap mask"):
        NT.sdpa_row_forward(raw, probs.reshape(-1), (0, 0, 4), **args, b0=0, total_b=2, probs=probs, lse=lse)
    with pytest.raises(ValueError, match="grad_lse has the wrong shape"):
        NT.sdpa_row_backward(
            raw,
            randn(2, 2, 4, 4),
            None,
            None,
            None,
            randn(3),
            **args,
            b0=0,
            total_b=2,
            pd=probs,
            ds=np.empty_like(raw),
        )


# --- pointwise losses (mse / l1) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [0, 1])
def test_pointwise_loss_kernels_match_reference_bit_exactly(simd, kind):
    pred, target, grad = randn(3, 1, 40, 70), randn(3, 1, 40, 70), randn(3, 1, 40, 70)
    target[0, 0, 0, :6] = pred[0, 0, 0, :6]  # zero differences: L1's derivative is 0 there, as torch's
    native, reference = both("pointwise_loss", pred, target, kind)
    np.testing.assert_array_equal(native, reference)
    for g, scale in ((grad, 1.0), (None, 0.125)):
        native, reference = both("pointwise_loss_backward", pred, target, g, scale, kind)
        np.testing.assert_array_equal(native, reference)
    d = pred.astype(np.float64) - target
    expected = d * d if kind == 0 else np.abs(d)
    np.testing.assert_allclose(reference, (2 * d if kind == 0 else np.sign(d)) * 0.125, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(both("pointwise_loss", pred, target, kind)[1], expected, rtol=1e-6, atol=1e-7)


def test_pointwise_loss_argument_checks():
    x, y = randn(4, 8), randn(4, 8)
    with pytest.raises(ValueError, match="kind"):
        tk.pointwise_loss(x, y, 2)
    with pytest.raises(ValueError, match="kind"):
        tk.pointwise_loss_backward(x, y, None, 1.0, 5)
    with _kernels.use_backend("reference"):
        with pytest.raises(ValueError, match="kind"):
            tk.pointwise_loss(x, y, 2)
        with pytest.raises(ValueError, match="kind"):
            tk.pointwise_loss_backward(x, y, None, 1.0, 5)
    with pytest.raises(ValueError, match="pointwise_loss: dst must not overlap pred"):
        NT.pointwise_loss(x, y, 0, x)
    with pytest.raises(ValueError, match="pointwise_loss_backward"):
        NT.pointwise_loss_backward(x, y, randn(4, 4), 1.0, 0, np.empty((4, 8), np.float32))
