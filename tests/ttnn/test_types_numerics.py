"""Data types and the numerics model: bfloat16 rounding, block floating point error bounds, integer storage,
math fidelity and bfloat16 accumulation (tttv2.ttnn.types, tttv2.ttnn.numerics)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn import _kernels, numerics, storage
from tttv2.ttnn.types import DataType, Layout

BACKENDS = ["native", "reference"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    with _kernels.use_backend(request.param):
        yield request.param


# --- types ----------------------------------------------------------------------------------------------


def test_dtype_properties():
    floats = {ttnn.bfloat16, ttnn.float32, ttnn.bfloat8_b, ttnn.bfloat4_b}
    for dt in DataType:
        assert dt.is_float == (dt in floats)
        assert dt.is_block_float == (dt in (ttnn.bfloat8_b, ttnn.bfloat4_b))
        # packed types are held as a storage object, the others as an array of their numpy dtype
        held = numerics.store(np.ones((2, 32), dtype=np.float32), dt)
        assert (
            dt.is_packed
            == storage.is_storage(held)
            == (dt in (ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b))
        )
    assert ttnn.bfloat16.numpy_dtype == np.float32  # read as float32 holding bf16-representable values
    assert ttnn.bfloat8_b.numpy_dtype == np.float32
    assert ttnn.int32.numpy_dtype == np.int32
    assert ttnn.uint32.numpy_dtype == np.uint32
    assert ttnn.uint16.numpy_dtype == np.uint16
    assert ttnn.uint8.numpy_dtype == np.uint8
    assert repr(ttnn.bfloat16) == "DataType.BFLOAT16"
    assert str(ttnn.TILE_LAYOUT) == "Layout.TILE"
    assert ttnn.ROW_MAJOR_LAYOUT is Layout.ROW_MAJOR
    assert ttnn.TILE_SIZE == 32


@pytest.mark.parametrize(
    ("dtype", "tile_bytes"),
    [
        (ttnn.bfloat16, 2048),
        (ttnn.float32, 4096),
        (ttnn.bfloat8_b, 1088),
        (ttnn.bfloat4_b, 576),
        (ttnn.uint32, 4096),
        (ttnn.int32, 4096),
        (ttnn.uint16, 2048),
        (ttnn.uint8, 1024),
    ],
)
def test_element_bytes_per_tile(dtype, tile_bytes):
    assert dtype.element_bytes(Layout.TILE) * 1024 == tile_bytes


def test_block_float_element_bytes_need_tile_layout():
    assert ttnn.bfloat16.element_bytes(Layout.ROW_MAJOR) == 2
    with pytest.raises(ValueError, match=r"TILE"):
        ttnn.bfloat8_b.element_bytes(Layout.ROW_MAJOR)


def test_unary_with_param():
    act = ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0)
    assert act.op_type is ttnn.UnaryOpType.GELU and act.param == 1.0
    assert ttnn.UnaryWithParam(ttnn.UnaryOpType.SILU) == ttnn.UnaryWithParam(ttnn.UnaryOpType.SILU)
    assert hash(ttnn.UnaryWithParam(ttnn.UnaryOpType.SILU)) == hash(
        ttnn.UnaryWithParam(ttnn.UnaryOpType.SILU)
    )
    with pytest.raises(TypeError, match=r"UnaryOpType"):
        ttnn.UnaryWithParam("silu")


# --- bfloat16 -------------------------------------------------------------------------------------------


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def _same_bits_or_nan(a: np.ndarray, b: np.ndarray) -> None:
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    np.testing.assert_array_equal(nan_a, nan_b)
    np.testing.assert_array_equal(_bits(a)[~nan_a], _bits(b)[~nan_b])


SPECIALS = np.array(
    [
        1.0,
        -0.0,
        0.0,
        np.inf,
        -np.inf,
        np.nan,
        1 + 2**-8,  # tie between 1 and 1 + 2^-7: even mantissa (1) wins
        1 + 3 * 2**-8,  # tie between 1 + 2^-7 and 1 + 2^-6: even mantissa (1 + 2^-6) wins
        -(1 + 3 * 2**-8),
        1 + 2**-8 + 2**-20,  # just above a tie: rounds up
        3.4e38,  # above the largest bfloat16: overflows to inf
        -3.4e38,
        1e-40,  # subnormal
        -1e-40,
        np.finfo(np.float32).tiny,
        65504.0,
    ],
    dtype=np.float32,
)


def test_bfloat16_specials_match_ml_dtypes_and_torch(backend):
    q = numerics.quantize(SPECIALS, ttnn.bfloat16)
    _same_bits_or_nan(q, SPECIALS.astype(ml_dtypes.bfloat16).astype(np.float32))
    _same_bits_or_nan(q, torch.from_numpy(SPECIALS).to(torch.bfloat16).float().numpy())
    assert q[6] == 1.0
    assert q[7] == 1 + 2**-6
    assert q[8] == -(1 + 2**-6)
    assert q[9] == 1 + 2**-7
    assert np.isposinf(q[10]) and np.isneginf(q[11])
    assert np.signbit(q[1]) and q[1] == 0  # negative zero keeps its sign
    assert np.isnan(q[5])


def test_bfloat16_random_bit_patterns_match_torch(backend, rng):
    # every float32 class: normals of all exponents, subnormals, inf and nan
    x = rng.integers(0, 2**32, size=50_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    q = numerics.quantize(x, ttnn.bfloat16)
    _same_bits_or_nan(q, torch.from_numpy(x.copy()).to(torch.bfloat16).float().numpy())
    # the result is a bfloat16: the low 16 bits are zero
    assert not np.any(_bits(q)[~np.isnan(q)] & 0xFFFF)


def test_bfloat16_through_from_torch_and_from_numpy(rng):
    x = rng.standard_normal((3, 40)).astype(np.float32) * 100
    expected = torch.from_numpy(x).to(torch.bfloat16)
    t = ttnn.from_torch(torch.from_numpy(x), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
    back = ttnn.to_torch(t)
    assert back.dtype == torch.bfloat16
    assert torch.equal(back, expected)
    n = ttnn.to_numpy(ttnn.from_numpy(x, dtype=ttnn.bfloat16))
    np.testing.assert_array_equal(n, expected.float().numpy())
    # a torch.bfloat16 input is stored unchanged
    t2 = ttnn.from_torch(expected)
    assert t2.dtype is ttnn.bfloat16 and torch.equal(ttnn.to_torch(t2), expected)


# --- block floating point -------------------------------------------------------------------------------

MANTISSA = {ttnn.bfloat8_b: 7, ttnn.bfloat4_b: 3}


def _blocks(x: np.ndarray) -> np.ndarray:
    """[..., W] → [rows, blocks, 16] with the last dim zero-padded to a multiple of 32 (as TILE pads it)."""
    width = x.shape[-1]
    flat = x.reshape(-1, width)
    padded = -(-width // 32) * 32
    flat = np.pad(flat, ((0, 0), (0, padded - width)))
    return flat.reshape(flat.shape[0], padded // 16, 16)


def _bfp_roundtrip(x: np.ndarray, dtype) -> np.ndarray:
    t = ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT)
    assert t.dtype is dtype and t.layout is ttnn.TILE_LAYOUT
    out = ttnn.to_numpy(t)
    assert out.shape == x.shape and out.dtype == np.float32
    return out


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat4_b])
@pytest.mark.parametrize("shape", [(64, 64), (2, 3, 40), (5,), (1, 1, 32, 8), (7, 33)])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e4])
def test_bfp_error_bound_per_block(backend, rng, dtype, shape, scale):
    m = MANTISSA[dtype]
    # mixed magnitudes inside blocks make the shared exponent matter
    x = (rng.standard_normal(shape) * scale * np.exp(rng.uniform(-3, 3, shape))).astype(np.float32)
    q = _bfp_roundtrip(x, dtype)
    xb, qb = _blocks(x), _blocks(q)
    block_max = np.abs(xb).max(axis=-1, keepdims=True)
    err = np.abs(qb - xb)
    assert np.all(err <= block_max * 2.0**-m), f"max excess {(err - block_max * 2.0**-m).max()}"
    # shared exponent: every value of a block is an integer multiple of the block's step, within m bits
    nz = block_max[..., 0] > 0
    exp = np.floor(np.log2(np.where(nz, block_max[..., 0], 1.0)))
    step = np.exp2(exp - (m - 1))[..., None]
    mags = np.abs(qb) / step
    assert np.all(mags[nz] == np.round(mags[nz]))
    assert mags[nz].max() <= 2**m - 1


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat4_b])
def test_bfp_is_coarser_than_bfloat16(rng, dtype):
    x = rng.standard_normal((32, 64)).astype(np.float32)
    err_bf16 = np.abs(ttnn.to_numpy(ttnn.from_numpy(x, dtype=ttnn.bfloat16)) - x).max()
    err_bfp = np.abs(_bfp_roundtrip(x, dtype) - x).max()
    assert err_bfp > err_bf16


def test_bfp8_keeps_small_integers_exactly():
    # a block whose largest magnitude is < 128 has step 1 in bfloat8_b: integers survive
    x = np.arange(-64, 64, dtype=np.float32).reshape(4, 32)
    np.testing.assert_array_equal(_bfp_roundtrip(x, ttnn.bfloat8_b), x)


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat4_b])
def test_bfp_blocks_are_16_values_along_the_last_dim(dtype):
    x = np.full((2, 64), 0.3, dtype=np.float32)
    x[0, 0] = 1000.0  # only the block x[0, 0:16] shares this exponent
    q = _bfp_roundtrip(x, dtype)
    assert np.all(q[0, 1:16] == 0)  # 0.3 is below half a step of a block holding 1000: flushed
    small = _bfp_roundtrip(np.full((1, 16), 0.3, dtype=np.float32), dtype)[0, 0]
    assert np.all(q[0, 16:] == small)  # the next block along the row is unaffected
    assert np.all(q[1] == small)  # so is the next row (blocks do not run down columns)
    # the transpose: a large value in a column affects only the block of its own row
    qt = _bfp_roundtrip(np.ascontiguousarray(x.T), dtype)
    assert qt[0, 0] != 0 and np.all(qt[1:, 0] == small)


def test_bfp_last_dim_not_multiple_of_32(rng):
    x = rng.standard_normal((3, 40)).astype(np.float32)
    q = _bfp_roundtrip(x, ttnn.bfloat8_b)
    # columns 32..39 form a block of their own (padded with zeros), independent of columns 16..31
    x2 = x.copy()
    x2[:, 16:32] *= 1000
    q2 = _bfp_roundtrip(x2, ttnn.bfloat8_b)
    np.testing.assert_array_equal(q[:, 32:], q2[:, 32:])
    np.testing.assert_array_equal(q[:, :16], q2[:, :16])


def test_bfp_non_finite_saturate_to_block_max(backend):
    x = np.zeros((1, 32), dtype=np.float32)
    x[0, :3] = [np.inf, 2.0, -np.inf]
    q = _bfp_roundtrip(x, ttnn.bfloat8_b)
    top = 127 / 32  # 2.0 has exponent 1: step 2^(1-6), 127 steps at most
    assert q[0, 0] == top and q[0, 2] == -top and q[0, 1] == 2.0


def test_bfp_empty_and_scalar_shapes():
    assert numerics.quantize(np.zeros((0, 32), np.float32), ttnn.bfloat8_b).shape == (0, 32)
    assert numerics.quantize(np.float32(1.5), ttnn.bfloat8_b) == 1.5


# --- float32 and integer types --------------------------------------------------------------------------


def test_float32_is_copied_exactly(rng):
    x = rng.standard_normal(100).astype(np.float64)
    q = numerics.quantize(x, ttnn.float32)
    assert q.dtype == np.float32 and q.flags.c_contiguous
    np.testing.assert_array_equal(q, x.astype(np.float32))
    src = np.ones(3, np.float32)
    assert numerics.quantize(src, ttnn.float32) is not src


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (ttnn.int32, np.array([-(2**31), -5, 0, 7, 2**31 - 1], np.int32)),
        (ttnn.uint32, np.array([0, 1, 2**32 - 1], np.uint32)),
        (ttnn.uint16, np.array([0, 1, 65535], np.uint16)),
        (ttnn.uint8, np.array([0, 1, 255], np.uint8)),
    ],
)
def test_integer_types_round_trip(dtype, values):
    t = ttnn.from_numpy(values)
    assert t.dtype is dtype
    out = ttnn.to_numpy(t)
    assert out.dtype == dtype.numpy_dtype
    np.testing.assert_array_equal(out, values)


def test_float_to_integer_truncates_and_rejects_non_finite():
    t = ttnn.from_numpy(np.array([1.7, -1.7, 2.0, -0.2], np.float32), dtype=ttnn.int32)
    np.testing.assert_array_equal(ttnn.to_numpy(t), [1, -1, 2, 0])
    with pytest.raises(ValueError, match=r"non-finite"):
        ttnn.from_numpy(np.array([1.0, np.nan], np.float32), dtype=ttnn.int32)
    with pytest.raises(ValueError, match=r"non-finite"):
        numerics.quantize(np.array([np.inf]), ttnn.uint32)


def test_int64_and_bool_inputs_are_converted():
    t = ttnn.from_numpy(np.array([3, -4], np.int64))
    assert t.dtype is ttnn.int32 and ttnn.to_numpy(t).dtype == np.int32
    b = ttnn.from_numpy(np.array([True, False]))
    assert b.dtype is ttnn.uint8
    np.testing.assert_array_equal(ttnn.to_numpy(b), [1, 0])


# --- fidelity and accumulation --------------------------------------------------------------------------


def test_truncate_mantissa():
    x = np.array([1 + 2**-1 + 2**-8 + 2**-23, -(1 + 2**-8 + 2**-9), 3.0], np.float32)
    assert numerics.truncate_mantissa(x, 23) is x
    t7 = numerics.truncate_mantissa(x, 7)
    np.testing.assert_array_equal(_bits(t7), _bits(x) & 0xFFFF0000)  # bf16 truncation, towards zero
    assert t7[0] == 1.5 and t7[1] == -1.0
    t1 = numerics.truncate_mantissa(x, 1)
    np.testing.assert_array_equal(t1, [1.5, -1.0, 3.0])
    assert np.all(np.abs(numerics.truncate_mantissa(x, 4)) <= np.abs(x))


def test_fidelity_error_ordering(rng):
    a = numerics.quantize(rng.standard_normal((64, 256)), ttnn.bfloat16)
    b = numerics.quantize(rng.standard_normal((256, 64)), ttnn.bfloat16)
    exact = a.astype(np.float64) @ b.astype(np.float64)

    def err(fid):
        fa, fb = numerics.apply_fidelity(a, b, fid)
        return np.abs(numerics.matmul_accumulate(fa, fb, None, True) - exact).max()

    lofi, hifi2, hifi3, hifi4 = (err(f) for f in ttnn.MathFidelity)
    assert lofi > hifi2 >= hifi3 >= hifi4
    # HiFi4 leaves the operands alone: the plain float32 product
    fa, fb = numerics.apply_fidelity(a, b, ttnn.MathFidelity.HiFi4)
    assert fa is a and fb is b
    # HiFi3 keeps all 7 explicit mantissa bits of bfloat16 operands: exact for bf16 inputs
    fa, fb = numerics.apply_fidelity(a, b, ttnn.MathFidelity.HiFi3)
    np.testing.assert_array_equal(fa, a)
    np.testing.assert_array_equal(fb, b)
    # LoFi drops operand bits (in1 keeps 4 explicit bits, in0 keeps 6)
    fa, fb = numerics.apply_fidelity(a, b, ttnn.MathFidelity.LoFi)
    np.testing.assert_array_equal(_bits(fb), _bits(b) & 0xFFF80000)
    np.testing.assert_array_equal(_bits(fa), _bits(a) & 0xFFFE0000)


def test_matmul_accumulate_rounds_partial_sums_to_bfloat16():
    # K = 64 in two 32-wide blocks: 256 + 1 = 257 is a bf16 tie and rounds to 256 after each block
    a = np.ones((1, 64), np.float32)
    b = np.zeros((64, 1), np.float32)
    b[0, 0], b[1, 0], b[32, 0] = 256.0, 1.0, 1.0
    assert numerics.matmul_accumulate(a, b, 32, fp32_acc=True)[0, 0] == 258.0
    assert numerics.matmul_accumulate(a, b, None, fp32_acc=False)[0, 0] == 258.0
    assert numerics.matmul_accumulate(a, b, 64, fp32_acc=False)[0, 0] == 258.0  # one block: no rounding
    assert numerics.matmul_accumulate(a, b, 32, fp32_acc=False)[0, 0] == 256.0


def test_matmul_accumulate_bf16_error_is_bounded(rng):
    a = rng.standard_normal((2, 32, 256)).astype(np.float32)
    b = rng.standard_normal((256, 32)).astype(np.float32)
    exact = np.matmul(a, b, dtype=np.float32)
    rounded = numerics.matmul_accumulate(a, b, 32, fp32_acc=False)
    assert rounded.shape == exact.shape
    assert not np.array_equal(rounded, exact)
    # 8 roundings of a partial sum, each at most half a bf16 ulp of the running sum
    assert np.all(np.abs(rounded - exact) <= 8 * 2.0**-8 * np.abs(a).sum(-1, keepdims=True) * np.abs(b).max())
