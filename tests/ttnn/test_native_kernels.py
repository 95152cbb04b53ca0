"""The C++ kernels (tttv2._native, via the tttv2.ttnn._kernels dispatcher) against the numpy reference.

Number formats (bfloat16, bfloat8_b, bfloat4_b), the rotary embedding and the norms (rms_norm, layer_norm) must
match bit for bit; the kernels with an exp (softmax, silu_mul) to a few float32 ulps (docs/numerics.md §2). Every comparison runs at each SIMD level the
CPU supports (baseline x86-64, AVX2, AVX-512), so all compiled versions of the kernels are covered.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# the C++ kernels are built by every install (pip install -e .): a missing module is a failure, never a skip
from tttv2 import _native as native
from tttv2.ttnn import _kernels
from tttv2.ttnn._kernels import reference

LEVELS = native.simd_levels()
BFP_BITS = [7, 3]


@pytest.fixture(params=LEVELS)
def simd(request):
    """Run the test with the native backend at one SIMD level."""
    previous = native.set_simd_level(request.param)
    try:
        with _kernels.use_backend("native"):
            yield request.param
    finally:
        native.set_simd_level(previous)


def ref(name, *args):
    """The reference kernel, with floating point warnings off (inf / NaN inputs are deliberate here)."""
    with np.errstate(all="ignore"):
        return getattr(reference, name)(*args)


def assert_same_bits(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.shape, expected.shape)
    a = actual.view(np.uint32) if actual.dtype == np.float32 else actual
    e = expected.view(np.uint32) if expected.dtype == np.float32 else expected
    bad = np.flatnonzero(a.ravel() != e.ravel())
    if bad.size:
        i = bad[:5]
        pytest.fail(
            f"{bad.size} mismatches, first at flat {i.tolist()}: got {[hex(v) for v in a.ravel()[i]]}, "
            f"expected {[hex(v) for v in e.ravel()[i]]}"
        )


def f32_from_bits(bits):
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def random_bits(rng, shape):
    """float32 values with uniformly random bit patterns: every exponent, denormals, inf and NaN."""
    return rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32).view(np.float32)


SPECIAL_BITS = [
    0x00000000, 0x80000000,  # ±0
    0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x00800000,  # denormals, smallest normal
    0x3F800000, 0xBF800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,  # ties to even and neighbours
    0xBF808000, 0xBF818000, 0x4B7F8000, 0x4B7E8000,
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x7F7EFFFF,  # max finite: rounds to inf or not
    0x7F800000, 0xFF800000,  # ±inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FC12345,  # NaNs
]  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# bfloat16


@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 7), (2, 3, 17), (1000,), (300, 1000)])
def test_round_bfloat16_bit_exact(simd, shape):
    rng = np.random.default_rng(1)
    x = random_bits(rng, shape)
    if x.size >= len(SPECIAL_BITS):
        x.reshape(-1)[: len(SPECIAL_BITS)] = f32_from_bits(SPECIAL_BITS)
    out = _kernels.round_bfloat16(x)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert_same_bits(out, ref("round_bfloat16", x))
    y = (rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, size=shape)).astype(np.float32)
    assert_same_bits(_kernels.round_bfloat16(y), ref("round_bfloat16", y))


def test_round_bfloat16_special_values(simd):
    x = f32_from_bits(SPECIAL_BITS)
    assert_same_bits(_kernels.round_bfloat16(x), ref("round_bfloat16", x))
    got = _kernels.round_bfloat16(x).view(np.uint32)
    assert got[0] == 0 and got[1] == 0x80000000  # signed zeros kept
    assert got[SPECIAL_BITS.index(0x3F808000)] == 0x3F800000  # tie, even below: down
    assert got[SPECIAL_BITS.index(0x3F818000)] == 0x3F820000  # tie, odd below: up
    assert got[SPECIAL_BITS.index(0x7F7FFFFF)] == 0x7F800000  # overflows to inf
    assert got[SPECIAL_BITS.index(0x7F800001)] == 0x7FC00000  # NaN: canonical quiet NaN, sign kept
    assert got[SPECIAL_BITS.index(0xFF800001)] == 0xFFC00000


def test_round_bfloat16_converts_inputs(simd):
    x = np.linspace(-3, 3, 64).reshape(8, 8).T  # float64, not C-contiguous
    out = _kernels.round_bfloat16(x)
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.shape == (8, 8)
    assert_same_bits(out, ref("round_bfloat16", x))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=40), elements=st.floats(width=32)))
def test_round_bfloat16_any_float(x):
    with _kernels.use_backend("native"):
        assert_same_bits(_kernels.round_bfloat16(x), ref("round_bfloat16", x))


# ---------------------------------------------------------------------------------------------------
# block floating point


def bfp_edge_blocks(rng, mantissa_bits):
    """[rows, 16 * k] float32 made of adversarial 16-value blocks."""
    m = mantissa_bits
    blocks = []

    def add(values):
        blocks.append(np.asarray(values, dtype=np.float32).reshape(16))

    for _ in range(4):
        add(rng.standard_normal(16))
        add(np.where(rng.random(16) < 0.5, -1, 1) * 2.0 ** rng.uniform(-60, 60, 16))  # mixed magnitudes
        add(random_bits(rng, 16))
        add(f32_from_bits(rng.integers(0, 0x00800000, 16)))  # positive denormals only
        add(f32_from_bits(rng.integers(0, 0x00800000, 16) | 0x80000000))  # negative denormals only
    add(np.zeros(16))
    add(np.full(16, -0.0))
    add(np.r_[-0.0, 1e-30, -1e-30, 0.0, rng.standard_normal(12)])
    add(np.r_[np.inf, -np.inf, np.nan, -np.nan, rng.standard_normal(12)])
    add(np.r_[np.inf, np.zeros(15)])  # only non-finite: shared exponent 0
    add(np.r_[np.nan, f32_from_bits([1, 0x80000002, 0x7FFFFF]), np.zeros(12)])
    add(np.full(16, np.float32(3.4028235e38)))  # exponent 254
    add(np.r_[np.float32(3.4028235e38), -np.float32(3.4028235e38), rng.standard_normal(14)])
    add(np.full(16, np.float32(1.1754944e-38)))  # exponent 1
    add(np.r_[np.float32(1.1754944e-38), f32_from_bits(rng.integers(0, 0x00800000, 15))])
    # ties: with the block max fixing E, k + 1/2 steps round to the even neighbour
    for e in (-130, -127, -20, 0, 7, 100, 127):
        step = 2.0 ** (e - (m - 1))
        k = rng.integers(0, 2**m - 1, 15)
        for offset in (0.5, 0.5 - 2**-20, 0.5 + 2**-20):
            add(np.r_[1.5 * 2.0**e, np.where(rng.random(15) < 0.5, -1, 1) * (k + offset) * step])
        # saturation: values just below 2^(e+1) round past 2^m - 1
        add(np.r_[2.0 ** (e + 1) * (1 - 2.0**-24), -(2.0 ** (e + 1)) * (1 - 2.0**-m / 3), (2**m - 0.5) * step,
                  (2**m - 0.5 - 2**-12) * step, np.full(12, (2**m - 1.5) * step)])  # fmt: skip
    while len(blocks) % 3:  # 3 blocks (48 values) per row: rows are not a multiple of anything nice
        add(rng.standard_normal(16))
    return np.stack(blocks).reshape(-1, 48)


@pytest.mark.parametrize("mantissa_bits", BFP_BITS)
def test_bfp_edge_cases_bit_exact(simd, mantissa_bits):
    x = bfp_edge_blocks(np.random.default_rng(2), mantissa_bits)
    exps, mants = _kernels.bfp_pack(x, mantissa_bits)
    ref_exps, ref_mants = ref("bfp_pack", x, mantissa_bits)
    assert exps.dtype == np.uint8 and mants.dtype == np.uint8
    assert_same_bits(exps, ref_exps)
    assert_same_bits(mants, ref_mants)
    assert_same_bits(
        _kernels.bfp_unpack(exps, mants, mantissa_bits), ref("bfp_unpack", exps, mants, mantissa_bits)
    )
    assert_same_bits(_kernels.bfp_quantize(x, mantissa_bits), ref("bfp_quantize", x, mantissa_bits))


@pytest.mark.parametrize("mantissa_bits", BFP_BITS)
@pytest.mark.parametrize("shape", [(1, 16), (3, 32), (7, 48), (5, 4096), (64, 4096), (0, 32)])
def test_bfp_random_bit_exact(simd, mantissa_bits, shape):
    rng = np.random.default_rng(3)
    for x in (rng.standard_normal(shape).astype(np.float32) * 5, random_bits(rng, shape)):
        exps, mants = _kernels.bfp_pack(x, mantissa_bits)
        ref_exps, ref_mants = ref("bfp_pack", x, mantissa_bits)
        assert_same_bits(exps, ref_exps)
        assert_same_bits(mants, ref_mants)
        unpacked = _kernels.bfp_unpack(exps, mants, mantissa_bits)
        assert_same_bits(unpacked, ref("bfp_unpack", ref_exps, ref_mants, mantissa_bits))
        quantized = _kernels.bfp_quantize(x, mantissa_bits)
        assert_same_bits(quantized, ref("bfp_quantize", x, mantissa_bits))
        assert_same_bits(quantized, unpacked)  # the fused kernel is pack + unpack


@pytest.mark.parametrize("mantissa_bits", BFP_BITS)
def test_bfp_unpack_any_bytes_bit_exact(simd, mantissa_bits):
    """Unpacking is defined for every byte, including exponent 255 (overflows to inf) and sign-only 0x80."""
    rng = np.random.default_rng(4)
    exps = rng.integers(0, 256, size=(9, 4), dtype=np.uint8)
    exps[0, :] = [0, 1, 254, 255]
    mants = rng.integers(0, 256, size=(9, 64), dtype=np.uint8)
    mants[0, :4] = [0x00, 0x80, 0x7F, 0xFF]
    assert_same_bits(
        _kernels.bfp_unpack(exps, mants, mantissa_bits), ref("bfp_unpack", exps, mants, mantissa_bits)
    )


def bfp_error_bound(x, mantissa_bits):
    """|q(x) − x| ≤ max(max|x_block| · 2^−m, 2^(−126−m)) (the second term for all-denormal blocks)."""
    blocks = np.abs(x.astype(np.float64)).reshape(x.shape[0], -1, 16)
    bound = np.maximum(blocks.max(axis=2, keepdims=True) * 2.0**-mantissa_bits, 2.0 ** (-126 - mantissa_bits))
    return np.broadcast_to(bound, blocks.shape).reshape(x.shape)


def check_bfp_error_bound(x, mantissa_bits):
    q = _kernels.bfp_quantize(x, mantissa_bits)
    err = np.abs(q.astype(np.float64) - x.astype(np.float64))
    bound = bfp_error_bound(x, mantissa_bits)
    assert (err <= bound).all(), np.max(err / bound)
    assert_same_bits(_kernels.bfp_quantize(q, mantissa_bits), q)  # already on the grid


@settings(max_examples=150, deadline=None)
@given(
    x=hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 3), st.integers(1, 3).map(lambda k: 16 * k)),
        elements=st.floats(width=32, allow_nan=False, allow_infinity=False),
    ),
    mantissa_bits=st.sampled_from(BFP_BITS),
)
def test_bfp_error_bound_hypothesis(x, mantissa_bits):
    with _kernels.use_backend("native"):
        check_bfp_error_bound(x, mantissa_bits)
        assert_same_bits(_kernels.bfp_quantize(x, mantissa_bits), ref("bfp_quantize", x, mantissa_bits))


@pytest.mark.parametrize("mantissa_bits", BFP_BITS)
def test_bfp_error_bound_random(simd, mantissa_bits):
    rng = np.random.default_rng(5)
    x = random_bits(rng, (64, 256))
    x[~np.isfinite(x)] = 0.0
    check_bfp_error_bound(x, mantissa_bits)
    check_bfp_error_bound(
        np.nan_to_num(bfp_edge_blocks(rng, mantissa_bits), nan=0, posinf=0, neginf=0), mantissa_bits
    )
    scaled = (rng.standard_normal((64, 256)) * 2.0 ** rng.integers(-140, 120, (64, 1))).astype(np.float32)
    check_bfp_error_bound(scaled, mantissa_bits)


# ---------------------------------------------------------------------------------------------------
# row kernels: rms_norm, layer_norm, softmax

ROW_SHAPES = [(1, 16), (7, 32), (3, 33), (5, 1), (64, 4096), (2, 3, 16), (9, 4096)]


def row_data(shape, seed=6):
    rng = np.random.default_rng(seed)
    d = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 0.5).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    b = rng.standard_normal(d).astype(np.float32)
    return x, w, b


EXP_RTOL = 1e-6  # softmax and silu_mul: only the exp's bits differ (docs/numerics.md §2); measured up to 5e-7
TINY = np.float32(2.0**-126)  # below the normal range the error is a few steps of 2^-149: compare absolutely


def assert_exp_close(actual, expected):
    """Within EXP_RTOL of the reference, or within 2^-126 for results below the normal range; NaN where it is NaN."""
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=EXP_RTOL, atol=TINY)


@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_matches_reference(simd, shape, with_weight):
    x, w, _ = row_data(shape)
    w = w if with_weight else None
    assert_same_bits(_kernels.rms_norm(x, w, 1e-5), ref("rms_norm", x, w, 1e-5))


@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize(
    ("with_weight", "with_bias"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_layer_norm_matches_reference(simd, shape, with_weight, with_bias):
    x, w, b = row_data(shape)
    w = w if with_weight else None
    b = b if with_bias else None
    assert_same_bits(_kernels.layer_norm(x, w, b, 1e-5), ref("layer_norm", x, w, b, 1e-5))


@pytest.mark.parametrize("shape", [(7, 2048), (7, 4096), (7, 8192), (5, 1000)])
@pytest.mark.parametrize(
    ("with_weight", "with_bias"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_layer_norm_rows_in_groups_same_bits_as_one_row_at_a_time(simd, shape, with_weight, with_bias):
    """layer_norm normalises rows in groups of 2 or 4 (weight and bias read once per group): each row must come
    out with the bits a call on that row alone gives, in whole groups and in the last, partial one."""
    x, w, b = row_data(shape, seed=14)
    w, b = (w if with_weight else None), (b if with_bias else None)
    got = _kernels.layer_norm(x, w, b, 1e-5)
    one_by_one = np.concatenate([_kernels.layer_norm(x[i : i + 1], w, b, 1e-5) for i in range(shape[0])])
    assert_same_bits(got, one_by_one)


def test_norms_edge_rows(simd):
    rng = np.random.default_rng(12)
    x = np.zeros((10, 1000), np.float32)
    x[1] = 1e-20  # tiny: eps dominates
    x[2] = 1e18  # huge: squares near the float32 limit
    x[3, ::2] = -7.0
    x[4] = rng.standard_normal(1000) + 1e4  # large offset
    x[5] = rng.standard_normal(1000)
    x[5, 0] = 1e4  # first element far from the mean (layer_norm's one-pass variance falls back)
    x[6] = rng.standard_normal(1000) * 1e-3 + 1e6
    x[7] = rng.standard_normal(1000)
    x[7, 600] = np.inf
    x[8] = rng.standard_normal(1000)
    x[8, 3] = np.nan
    x[9] = 3e38  # the sums overflow to inf
    for eps in (1e-5, 1e-6):
        assert_same_bits_or_nan(_kernels.rms_norm(x, None, eps), ref("rms_norm", x, None, eps))
        assert_same_bits_or_nan(
            _kernels.layer_norm(x, None, None, eps), ref("layer_norm", x, None, None, eps)
        )


def test_norm_weight_shapes(simd):
    x, w, b = row_data((2, 4, 32))
    expected = ref("layer_norm", x, w, b, 1e-5)
    got = _kernels.layer_norm(x, w.reshape(1, 1, 32), b.reshape(1, 32), 1e-5)
    assert got.shape == x.shape
    assert_same_bits(got, expected)
    assert_same_bits(_kernels.rms_norm(x, w.reshape(1, 32), 1e-6), ref("rms_norm", x, w, 1e-6))


@pytest.mark.parametrize("shape", [(3, 0), (2, 0, 8), (0, 4, 0)])
def test_norms_of_empty_rows(simd, shape):
    x = np.zeros(shape, np.float32)
    for name, args in (("layer_norm", (None, None, 1e-5)), ("rms_norm", (None, 1e-5))):
        got, expected = getattr(_kernels, name)(x, *args), ref(name, x, *args)
        assert got.shape == expected.shape == shape


def assert_same_bits_or_nan(actual, expected):
    """The same bits wherever the reference is not NaN, and NaN where it is (a NaN's sign and payload are not
    specified: which NaN operand an add passes on depends on the instruction's operand order)."""
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(actual), nan)
    assert_same_bits(np.where(nan, 0, actual), np.where(nan, 0, expected))


@st.composite
def norm_rows(draw):
    """[rows, d] float32 rows across row_sum's chunk (512) and lane (32) boundaries, any float32 values (mostly
    finite; a scale and an offset make the sums cancel or overflow), and optional weight and bias."""
    rows = draw(st.integers(1, 3))
    d = draw(st.sampled_from([1, 2, 31, 32, 33, 100, 511, 512, 513, 1024, 1057]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([1e-30, 1e-3, 1.0, 1e3, 1e19, 1e36]))
    offset = draw(st.sampled_from([0.0, 1.0, -1e4, 1e6, 1e30]))
    x = (rng.standard_normal((rows, d)) * scale + offset).astype(np.float32)
    specials = draw(st.lists(st.tuples(st.integers(0, rows * d - 1), st.floats(width=32)), max_size=3))
    for i, v in specials:
        x.reshape(-1)[i] = v
    w = rng.standard_normal(d).astype(np.float32) if draw(st.booleans()) else None
    b = rng.standard_normal(d).astype(np.float32) if draw(st.booleans()) else None
    eps = draw(st.sampled_from([1e-5, 1e-6, 1e-12, 0.0]))
    return x, w, b, eps


@settings(max_examples=80, deadline=None)
@given(norm_rows())
def test_norms_same_bits_as_reference_any_rows(data):
    """The numpy rms_norm and layer_norm define the native kernels' operation order (reference.row_sum): the same
    bits at every SIMD level, for any rows (NaN results: NaN in both)."""
    x, w, b, eps = data
    previous = native.set_simd_level(LEVELS[-1])
    try:
        with _kernels.use_backend("native"):
            for level in LEVELS:
                native.set_simd_level(level)
                assert_same_bits_or_nan(_kernels.layer_norm(x, w, b, eps), ref("layer_norm", x, w, b, eps))
                assert_same_bits_or_nan(_kernels.rms_norm(x, w, eps), ref("rms_norm", x, w, eps))
    finally:
        native.set_simd_level(previous)


@settings(max_examples=60, deadline=None)
@given(norm_rows())
def test_exp_kernels_within_tolerance_any_rows(data):
    """softmax and silu_mul differ from their numpy twins in the exp only: EXP_RTOL at every SIMD level."""
    x, w, _, _ = data
    b = np.broadcast_to(w if w is not None else np.float32(-1.5), x.shape)
    previous = native.set_simd_level(LEVELS[-1])
    try:
        with _kernels.use_backend("native"):
            for level in LEVELS:
                native.set_simd_level(level)
                assert_exp_close(_kernels.softmax(x), ref("softmax", x))
                assert_exp_close(_kernels.silu_mul(x, b), ref("silu_mul", x, b))
    finally:
        native.set_simd_level(previous)


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_matches_reference(simd, shape):
    x, _, _ = row_data(shape)
    assert_exp_close(_kernels.softmax(x * 4), ref("softmax", x * 4))


def test_softmax_edge_rows(simd):
    x = np.random.default_rng(7).standard_normal((6, 48)).astype(np.float32)
    x[0, 5:] = -np.inf  # causal mask
    x[1] *= 1e30  # huge logits: one-hot
    x[2] = 0.0  # uniform
    x[3, ::3] = -200.0  # exp underflows to 0 / denormals
    x[4] = np.float32(3e38)
    x[5, 7] = 90.0
    got, expected = _kernels.softmax(x), ref("softmax", x)
    assert_exp_close(got, expected)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-6)
    assert (got[0, 5:] == 0).all()


@pytest.mark.parametrize("d", [48, 512, 700, 4096])
def test_softmax_rows_within_87_same_bits_as_the_general_exp(simd, d):
    """A row spanning at most 87 takes a cheaper exp (2^n added to the exponent bits); it must give the bits of the
    general exp, which a row spanning more takes. Appending max - 1000 to a row sends it down the general path
    and adds an exact 0 to its sum (e^-1000 rounds to 0), so its first d outputs must stay the same bits."""
    rng = np.random.default_rng(11)
    rows = [rng.standard_normal(d) * scale for scale in (0.01, 1, 8, 20)]
    rows.append(np.linspace(-86.99, 0, d))  # the edge of the range: n = -126, p > 1
    rows.append(np.linspace(-40, 47, d))
    rows.append(np.full(d, 3.5))
    x = np.array(rows, np.float32)
    x[1, 3] = -0.0
    wider = np.concatenate([x, x.max(axis=1, keepdims=True) - 1000], axis=1)
    fast, general = _kernels.softmax(x), _kernels.softmax(wider)
    assert_same_bits(fast, np.ascontiguousarray(general[:, :d]))
    assert (general[:, d] == 0).all()
    assert_exp_close(fast, ref("softmax", x))


def test_softmax_nan_or_inf_in_a_narrow_row_takes_the_general_path(simd):
    x = np.random.default_rng(12).standard_normal((4, 600)).astype(np.float32)
    x[0, 200] = np.nan  # max and min skip NaN: the row still must not take the bit-adding exp
    x[1, 3] = np.inf
    x[2, 599] = f32_from_bits([0x7FC001FF])[0]  # a NaN whose payload sits where the exp keeps n
    got, expected = _kernels.softmax(x), ref("softmax", x)
    assert np.isnan(got[[0, 2]]).all()
    assert_exp_close(got, expected)


def test_softmax_all_masked_row_is_nan_like_reference(simd):
    x = np.full((2, 32), -np.inf, np.float32)
    x[1, 3] = np.nan
    assert np.isnan(_kernels.softmax(x)).all() and np.isnan(ref("softmax", x)).all()


# ---------------------------------------------------------------------------------------------------
# element-wise kernels


@pytest.mark.parametrize(("n", "d", "m", "inner"), [(1, 2, 1, 1), (12, 16, 3, 2), (8, 32, 8, 1), (40, 4096, 5, 3),
                                                    (6, 1026, 2, 100), (256, 128, 32, 8)])  # fmt: skip
def test_rotary_interleaved_bit_exact(simd, n, d, m, inner):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((n, d)).astype(np.float32)
    angles = rng.uniform(0, 2 * np.pi, (m, d)).astype(np.float32)
    cos, sin = np.cos(angles), np.sin(angles)
    assert_same_bits(
        _kernels.rotary_interleaved(x, cos, sin, inner), ref("rotary_interleaved", x, cos, sin, inner)
    )


def test_rotary_row_mapping(simd):
    """Row i of x uses row (i // inner) % m of cos/sin: check with identity / negation rows."""
    x = np.arange(1, 1 + 6 * 4, dtype=np.float32).reshape(6, 4)
    cos = np.array([[1, 1, 1, 1], [-1, -1, -1, -1]], np.float32)
    sin = np.zeros((2, 4), np.float32)
    got = _kernels.rotary_interleaved(x, cos, sin, 2)
    np.testing.assert_array_equal(got, x * np.array([1, 1, -1, -1, 1, 1], np.float32)[:, None])


@pytest.mark.parametrize("shape", [(5,), (3, 17), (32, 4096), (2, 3, 40), (0, 4)])
def test_silu_mul_matches_reference(simd, shape):
    rng = np.random.default_rng(9)
    a = (rng.standard_normal(shape) * 8).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    assert_exp_close(_kernels.silu_mul(a, b), ref("silu_mul", a, b))


def test_silu_mul_extremes(simd):
    a = np.array([0.0, -0.0, 1e-30, -1e-30, 20, -20, 87, -87, 88.8, -88.8, 100, -100, 1e30, -1e30, np.inf, -np.inf],
                 np.float32)  # fmt: skip
    b = np.full_like(a, 1.5)
    got, expected = _kernels.silu_mul(a, b), ref("silu_mul", a, b)
    assert_exp_close(got, expected)
    assert_same_bits(np.signbit(got), np.signbit(expected))


def test_silu_mul_at_the_edges_of_exps_range(simd):
    """silu's exp applies 2^n with one power of two (n clamped to [-125, 129]): e^88.4 … e^88.72 are finite and
    need n = 128 exactly (silu of -88.5 is -3.3e-37, not -0), e^88.73 and beyond overflow (-0), and e^-x below
    2^-125 must still leave 1 + e^-x == 1."""
    edge = [
        86.9,
        87.4,
        88.0,
        88.37,
        88.4,
        88.5,
        88.6,
        88.7,
        88.72,
        88.73,
        89.0,
        89.5,
        103.9,
        104.0,
        104.1,
        150.0,
    ]
    a = np.array(edge + [-v for v in edge], np.float32)
    b = np.linspace(-2, 2, a.size, dtype=np.float32)
    got, expected = _kernels.silu_mul(a, b), ref("silu_mul", a, b)
    assert_exp_close(got, expected)
    assert_same_bits(np.signbit(got), np.signbit(expected))


def test_silu_mul_blocks_within_87_same_bits_as_the_general_exp(simd):
    """Blocks of values with |a| <= 87 take a cheaper exp; a block holding a larger value, an infinity or a NaN is
    redone with the general one. Both must give the bits a call on one value gives (a one-value call never
    takes the cheaper exp), here on every kind of block and on the values at the edge of the range."""
    rng = np.random.default_rng(13)
    a = (rng.standard_normal(4096) * 20).astype(np.float32)
    a[:256] = np.linspace(-87, 87, 256)  # the whole range, one block
    a[1000] = 87.01  # a block just out of range
    a[1700] = np.nan
    a[2300] = -np.inf
    a[3000] = f32_from_bits([0x7FC001FF])[0]
    a[3500:3800] = rng.uniform(-100, 100, 300)
    b = rng.standard_normal(4096).astype(np.float32)
    got = _kernels.silu_mul(a, b)
    one_by_one = np.concatenate([_kernels.silu_mul(a[i : i + 1], b[i : i + 1]) for i in range(a.size)])
    assert_same_bits(got, one_by_one)
    with np.errstate(invalid="ignore"):
        assert_exp_close(got, ref("silu_mul", a, b))


def test_silu_mul_broadcasts_like_reference(simd):
    a = np.linspace(-5, 5, 24, dtype=np.float32).reshape(4, 6)
    b = np.arange(6, dtype=np.float32)
    assert_exp_close(_kernels.silu_mul(a, b), ref("silu_mul", a, b))


# ---------------------------------------------------------------------------------------------------
# argument checking: ValueError naming the kernel and the argument, before any memory is touched

BAD_CALLS = [
    ("bfp_pack", lambda: _kernels.bfp_pack(np.zeros((2, 20), np.float32), 7), r"bfp_pack: src .*multiple of 16.*\(2, 20\)"),
    ("bfp_pack", lambda: _kernels.bfp_pack(np.zeros(32, np.float32), 7), r"bfp_pack: src must be 2-D"),
    ("bfp_pack", lambda: _kernels.bfp_pack(np.zeros((2, 16), np.float32), 5), r"bfp_pack: mantissa_bits .* got 5"),
    ("bfp_quantize", lambda: _kernels.bfp_quantize(np.zeros((2, 24)), 3), r"bfp_quantize: src .*multiple of 16"),
    ("bfp_quantize", lambda: _kernels.bfp_quantize(np.zeros((2, 16)), 8), r"bfp_quantize: mantissa_bits"),
    ("bfp_unpack", lambda: _kernels.bfp_unpack(np.zeros((2, 3), np.uint8), np.zeros((2, 32), np.uint8), 7),
     r"bfp_unpack: exponents .*expected \(2, 2\), got \(2, 3\)"),
    ("bfp_unpack", lambda: _kernels.bfp_unpack(np.zeros((2, 2)), np.zeros((2, 32), np.uint8), 7),
     r"bfp_unpack: exponents must be uint8, got float64"),
    ("bfp_unpack", lambda: _kernels.bfp_unpack(np.zeros((2, 2), np.uint8), np.zeros((2, 32), np.int8), 7),
     r"bfp_unpack: mantissas must be uint8, got int8"),
    ("bfp_unpack", lambda: _kernels.bfp_unpack(np.zeros((2, 1), np.uint8), np.zeros((2, 20), np.uint8), 7),
     r"bfp_unpack: mantissas .*multiple of 16"),
    ("rms_norm", lambda: _kernels.rms_norm(np.zeros((2, 8)), np.ones(7), 1e-5), r"rms_norm: weight .*expected \(8,\), got \(7,\)"),
    ("rms_norm", lambda: _kernels.rms_norm(np.float32(1), None, 1e-5), r"rms_norm: x must be 2-D"),
    ("layer_norm", lambda: _kernels.layer_norm(np.zeros((2, 8)), None, np.ones((2, 8)), 1e-5), r"layer_norm: bias .*got \(2, 8\)"),
    ("softmax", lambda: _kernels.softmax(np.float32(3)), r"softmax: x must be 2-D"),
    ("rotary_interleaved", lambda: _kernels.rotary_interleaved(np.zeros((4, 8)), np.ones((2, 8)), np.ones((3, 8)), 1),
     r"rotary_interleaved: sin .*expected \(2, 8\), got \(3, 8\)"),
    ("rotary_interleaved", lambda: _kernels.rotary_interleaved(np.zeros((4, 8)), np.ones((2, 6)), np.ones((2, 6)), 1),
     r"rotary_interleaved: cos .*expected \(2, 8\)"),
    ("rotary_interleaved", lambda: _kernels.rotary_interleaved(np.zeros((4, 7)), np.ones((2, 7)), np.ones((2, 7)), 1),
     r"rotary_interleaved: x must have an even last dim"),
    ("rotary_interleaved", lambda: _kernels.rotary_interleaved(np.zeros((4, 8)), np.ones((2, 8)), np.ones((2, 8)), 0),
     r"rotary_interleaved: inner must be >= 1, got 0"),
    ("rotary_interleaved", lambda: _kernels.rotary_interleaved(np.zeros((4, 8)), np.ones((0, 8)), np.ones((0, 8)), 1),
     r"rotary_interleaved: cos and sin need at least one row"),
    ("rotary_interleaved", lambda: _kernels.rotary_interleaved(np.zeros(8), np.ones((1, 8)), np.ones((1, 8)), 1),
     r"rotary_interleaved: x must be 2-D"),
    ("silu_mul", lambda: _kernels.silu_mul(np.zeros((2, 3)), np.zeros((2, 4))), r"silu_mul: shapes .* do not broadcast"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kernel", "call", "message"), BAD_CALLS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BAD_CALLS)]
)
def test_bad_arguments_raise_value_error(kernel, call, message):
    with _kernels.use_backend("native"), pytest.raises(ValueError, match=message):
        call()


def test_native_checks_outputs():
    x = np.zeros((4, 32), np.float32)
    with pytest.raises(
        ValueError, match=r"round_bfloat16: dst must have the shape of src: expected \(4, 32\), got \(4, 31\)"
    ):
        native.round_bfloat16(x, np.empty((4, 31), np.float32))
    with pytest.raises(ValueError, match=r"softmax: dst must not overlap x"):
        native.softmax(x, x)
    with pytest.raises(
        ValueError, match=r"bfp_pack: mantissas has the wrong shape: expected \(4, 32\), got \(4, 16\)"
    ):
        native.bfp_pack(x, 7, np.empty((4, 2), np.uint8), np.empty((4, 16), np.uint8))
    with pytest.raises(ValueError, match=r"bfp_unpack: dst has the wrong shape"):
        native.bfp_unpack(
            np.zeros((4, 2), np.uint8), np.zeros((4, 32), np.uint8), 7, np.empty((4, 16), np.float32)
        )
    with pytest.raises(ValueError, match=r"silu_mul: b must have the shape of a"):
        native.silu_mul(x, np.zeros((4, 16), np.float32), np.empty_like(x))


@pytest.mark.parametrize(
    "call",
    [
        lambda: native.round_bfloat16(np.zeros(4), np.empty(4, np.float32)),  # float64 input
        lambda: native.round_bfloat16(np.zeros(4, np.float32), np.empty(4)),  # float64 output
        lambda: native.softmax(np.zeros((4, 4), np.float32).T, np.empty((4, 4), np.float32)),  # not C-contiguous
        lambda: native.round_bfloat16(np.zeros(4, np.float32), np.empty(4, np.float32)[::-1]),
        lambda: native.bfp_unpack(np.zeros((1, 1), np.int8), np.zeros((1, 16), np.uint8), 7, np.empty((1, 16), np.float32)),
        lambda: native.silu_mul(np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float16)),
    ],
)  # fmt: skip
def test_native_rejects_wrong_dtypes_and_layouts_without_copying(call):
    """The extension never converts silently (a converted `dst` would be written and lost)."""
    with pytest.raises(TypeError):
        call()


# ---------------------------------------------------------------------------------------------------
# dispatcher and runtime


def test_use_backend_switches_and_restores():
    x = np.random.default_rng(10).standard_normal((3, 40)).astype(np.float32)
    with _kernels.use_backend("native"):
        with _kernels.use_backend("reference") as name:
            assert name == "reference" and _kernels.BACKEND == "reference"
            np.testing.assert_array_equal(_kernels.softmax(x), reference.softmax(x))
            with pytest.raises(ValueError, match="multiple of 16"):
                _kernels.bfp_pack(x, 7)  # the reference's own check
        assert _kernels.BACKEND == "native"
        _kernels.use_backend("reference")  # plain call: a permanent switch (undone by the outer with)
        assert _kernels.BACKEND == "reference"
        _kernels.use_backend("native")
        with pytest.raises(ValueError, match="unknown kernel backend"):
            _kernels.use_backend("cuda")
        assert _kernels.BACKEND == "native"
    assert (
        _kernels.silu_mul.__name__ == "silu_mul" and _kernels.silu_mul.__doc__ == reference.silu_mul.__doc__
    )


def test_missing_native_module_raises_import_error(monkeypatch):
    before = _kernels.BACKEND
    monkeypatch.setattr(_kernels, "_native", None)
    with pytest.raises(ImportError, match=r"pip install -e \."):
        _kernels.use_backend("native")
    assert before == _kernels.BACKEND


@pytest.mark.parametrize(("value", "expected"), [("reference", "reference"), ("", "native")])
def test_environment_selects_backend(value, expected):
    code = "from tttv2.ttnn import _kernels; print(_kernels.BACKEND)"
    env = {**os.environ, "TTTV2_KERNELS": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_concurrent_calls_from_python_threads():
    """Kernels release the GIL; concurrent callers share the worker pool or run inline, same results."""
    x = np.random.default_rng(11).standard_normal((128, 1024)).astype(np.float32)
    with _kernels.use_backend("native"):
        expected = _kernels.softmax(x), _kernels.bfp_quantize(x, 7)
        results, errors = [], []

        def work():
            try:
                for _ in range(5):
                    results.append((_kernels.softmax(x), _kernels.bfp_quantize(x, 7)))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and len(results) == 20
    for soft, quant in results:
        assert_same_bits(soft, expected[0])
        assert_same_bits(quant, expected[1])


FORK_SCRIPT = """
import os, numpy as np
from tttv2.ttnn import _kernels
x = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
expected = _kernels.softmax(x)  # starts the worker pool in the parent
pid = os.fork()
if pid == 0:  # the child has no worker threads: it must get a pool of its own, not hang
    os._exit(0 if np.array_equal(_kernels.softmax(x), expected) else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_kernels_work_in_forked_child():
    out = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "0"


def test_simd_levels():
    assert LEVELS[0] == "baseline" and native.simd_level() == LEVELS[-1]
    with pytest.raises(ValueError, match="set_simd_level: level must be one of"):
        native.set_simd_level("sse9")
    assert native.max_threads() >= 1
