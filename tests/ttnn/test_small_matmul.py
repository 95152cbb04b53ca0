"""Products with a small left operand (at most 32 rows: every decode product) run the native ``small_matmul``
kernel, whose result per output element is fixed by the numerics rule (docs/numerics.md §3): within a K block a
sum over k in order of float32 products, each add rounded to float32; across blocks ``acc + part`` and, without
fp32 accumulation, the bfloat16 rounding. The native kernel must give the numpy reference's bits for every weight
format, math fidelity, accumulation mode, K blocking, row count and repetition, at every SIMD level and thread
count; and a row's result must not depend on the rows around it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tttv2 import _native as native
from tttv2 import ttnn
from tttv2.ttnn import _kernels, numerics, storage
from tttv2.ttnn._kernels import reference
from tttv2.ttnn.ops import matmul as matmul_mod

KINDS = ["float32", "bfloat16", "bfloat8_b", "bfloat4_b"]
DTYPE_OF = {"bfloat16": ttnn.bfloat16, "bfloat8_b": ttnn.bfloat8_b, "bfloat4_b": ttnn.bfloat4_b}
# the weight's keep mask at each math fidelity (numerics.fidelity_bits' second value)
MASKS = sorted(
    {
        (0xFFFFFFFF << (23 - b)) & 0xFFFFFFFF if b < 23 else 0xFFFFFFFF
        for _, b in map(numerics.fidelity_bits, ttnn.MathFidelity)
    }
)


@pytest.fixture(params=native.simd_levels())
def simd(request):
    previous = native.set_simd_level(request.param)
    try:
        with _kernels.use_backend("native"):
            yield request.param
    finally:
        native.set_simd_level(previous)


def weight_parts(kind: str, w: np.ndarray) -> tuple:
    """The arrays a weight of ``kind`` is stored as (what numerics hands the kernel)."""
    if kind == "float32":
        return (np.ascontiguousarray(w, dtype=np.float32),)
    stored = storage.pack(w, DTYPE_OF[kind])
    if kind == "bfloat16":
        return (stored.bits,)
    return stored.exponents, stored.mantissas


def rows_with_repeats(rng, m: int, k: int, distinct: int) -> np.ndarray:
    """``m`` rows of K values drawn from ``distinct`` different rows, in a random order (every row of a 32-row
    batch-1 decode activation but the first is a padding row; here the repeats fall anywhere)."""
    pool = (rng.standard_normal((distinct, k)) * 2).astype(np.float32)
    pool[0, : min(3, k)] = [-0.0, 0.0, 1e-40][: min(3, k)]  # a negative zero and a subnormal among the values
    return np.ascontiguousarray(pool[rng.integers(0, distinct, size=m)])


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def same_bits_any_nan(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit, except that a NaN matches any NaN: which NaN comes out of an op on two NaNs (or 0 · inf) depends
    on the operand order the compiler picks for a commutative instruction; the rule does not fix it."""
    nan = np.isnan(want)
    return bool(
        np.array_equal(np.isnan(got), nan) and same_bits(np.where(nan, 0, got), np.where(nan, 0, want))
    )


def native_and_reference(a, kind, parts, k_block, mask):
    with _kernels.use_backend("native"):
        got = _kernels.small_matmul(a, kind, parts, k_block, mask)
    with np.errstate(all="ignore"):
        want = reference.small_matmul(a, kind, parts, k_block, mask)
    return got, want


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    mask=st.sampled_from(MASKS),
    m=st.integers(1, 32),
    distinct=st.integers(1, 4),
    k=st.integers(1, 130),
    k_block=st.sampled_from([0, 1, 3, 32, 64, 200]),
    n_blocks=st.integers(1, 5),
    seed=st.integers(0, 2**31),
)
def test_native_matches_the_reference_bit_for_bit(kind, mask, m, distinct, k, k_block, n_blocks, seed):
    """Any weight format and fidelity mask; K blocks that do not divide K (and single blocks: 0 or >= K); 1..32 rows
    drawn from a few distinct ones; widths of 16..80 columns (a partial last tile)."""
    rng = np.random.default_rng(seed)
    a = rows_with_repeats(rng, m, k, min(distinct, m))
    w = (rng.standard_normal((k, 16 * n_blocks)) * rng.choice([1e-3, 1.0, 1e3])).astype(np.float32)
    got, want = native_and_reference(a, kind, weight_parts(kind, w), k_block, mask)
    assert same_bits(got, want)


@pytest.mark.parametrize("kind", KINDS)
def test_every_simd_level_fidelity_and_accumulation(simd, kind):
    """A decode-shaped slice (32 rows, 2 distinct; K = 320 in blocks of 64 = 5 blocks, or one block), each mask."""
    rng = np.random.default_rng(len(kind))
    a = rows_with_repeats(rng, 32, 320, 2)
    w = (rng.standard_normal((320, 96)) * 0.05).astype(np.float32)
    parts = weight_parts(kind, w)
    for mask in MASKS:
        for k_block in (0, 64, 96):
            got = _kernels.small_matmul(a, kind, parts, k_block, mask)
            with np.errstate(all="ignore"):
                want = reference.small_matmul(a, kind, parts, k_block, mask)
            assert same_bits(got, want), (mask, k_block)


def test_special_values_follow_the_reference(simd):
    """inf, NaN, -0.0, subnormals and overflow in both operands (float32 weight: the only format that stores them
    all); NaN results are NaN in both, whatever their sign and payload. A sum starts at +0.0, so a row of -0.0
    gives +0.0."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 40)).astype(np.float32)
    a[0, 5] = np.inf
    a[1, 7] = np.nan
    a[2, :10] = [-0.0, 1e-45, -1e-40, 3e38, -3e38, 0.0, 1e-38, -1e-45, 2.0, -2.0]
    a[3] = -0.0
    w = rng.standard_normal((40, 48)).astype(np.float32)
    w[3, 1] = -np.inf
    w[9, 2] = np.nan
    w[:, 3] = 3e38  # overflows to inf in the sum
    w[:, 4] = 1e-44  # products underflow to zero or subnormals
    w[5, 6] = 0.0  # inf * 0 in row 0: NaN
    for mask in MASKS:
        for k_block in (0, 8):
            got = _kernels.small_matmul(a, "float32", (w,), k_block, mask)
            with np.errstate(all="ignore"):
                want = reference.small_matmul(a, "float32", (w,), k_block, mask)
            assert same_bits_any_nan(got, want)
            assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want).any()
            assert (want[3, 3:].view(np.uint32) == 0).all()  # (columns 1, 2: -0 · inf and NaN)


@pytest.mark.parametrize("kind", KINDS)
def test_a_rows_result_does_not_depend_on_its_neighbours(kind):
    """The same row alone, and among 31 others at every position: the same bits (what OpenBLAS did not give)."""
    rng = np.random.default_rng(11)
    k, n = 256, 64
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    parts = weight_parts(kind, w)
    row = rng.standard_normal((1, k)).astype(np.float32)
    for k_block in (0, 64):
        alone = _kernels.small_matmul(row, kind, parts, k_block, MASKS[0])
        others = rng.standard_normal((32, k)).astype(np.float32)
        for position in range(32):
            batch = others.copy()
            batch[position] = row[0]
            among = _kernels.small_matmul(batch, kind, parts, k_block, MASKS[0])
            assert same_bits(among[position : position + 1], alone), (k_block, position)
        padded = np.repeat(row, 32, axis=0)  # a batch-1 decode: every row the same
        assert same_bits(
            _kernels.small_matmul(padded, kind, parts, k_block, MASKS[0]), np.repeat(alone, 32, 0)
        )


_THREADED = r"""
import hashlib, json
import numpy as np
from tttv2 import _native, ttnn
from tttv2.ttnn import _kernels, storage
rng = np.random.default_rng(2)
k, n = 2048, 1024  # one distinct row: 2 M multiply-adds a thread, so up to 3 threads take columns
w = (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
out = {"threads": _native.max_threads()}
for dtype in (ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b):
    s = storage.pack(w, dtype)
    kind = dtype.name.lower()
    parts = (s.bits,) if dtype is ttnn.bfloat16 else (s.exponents, s.mantissas)
    for distinct in (1, 2, 32):
        a = np.ascontiguousarray(rng.standard_normal((distinct, k)).astype(np.float32)[np.arange(32) % distinct])
        for k_block in (0, 256):
            got = _kernels.small_matmul(a, kind, parts, k_block, 0xFFFFFFFF)
            out[f"{kind}/{distinct}/{k_block}"] = hashlib.sha256(got.tobytes()).hexdigest()
print(json.dumps(out))
"""


def _threaded_digests(threads: int) -> dict:
    env = {key: v for key, v in os.environ.items() if key != "TTTV2_KERNELS"}
    env["TTTV2_NUM_THREADS"] = str(threads)
    run = subprocess.run(
        [sys.executable, "-c", _THREADED], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_one_and_several_threads_give_the_same_bits():
    runs = {threads: _threaded_digests(threads) for threads in (1, 3)}
    assert [run.pop("threads") for run in runs.values()] == [1, 3]
    assert runs[1] == runs[3]
    assert len(runs[1]) == 18


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a, w: _kernels.small_matmul(np.zeros((33, 4), np.float32), "float32", (w,), 0), "at most 32"),
        (lambda a, w: _kernels.small_matmul(np.zeros((2, 0), np.float32), "float32", (w[:0],), 0), "K >= 1"),
        (lambda a, w: _kernels.small_matmul(a, "int8", (w,), 0), "kind must be"),
        (lambda a, w: _kernels.small_matmul(a, "float32", (w[:3],), 0), "4 rows"),
        (lambda a, w: _kernels.small_matmul(a, "bfloat16", (w,), 0), "uint16 bit patterns"),
        (
            lambda a, w: _kernels.small_matmul(a, "bfloat8_b", (np.zeros((4, 1), np.uint8),), 0),
            "exponents and codes",
        ),
        (
            lambda a, w: _kernels.small_matmul(
                a, "bfloat4_b", (np.zeros((4, 1), np.uint8), np.zeros((4, 16), np.uint8)), 0
            ),
            "codes must be (4, 8)",
        ),
        (
            lambda a, w: native.small_matmul(a, "float32", w, None, 0, 0, np.zeros((2, 5), np.float32)),
            "dst must be",
        ),
        (
            lambda a, w: native.small_matmul(a[0], "float32", w, None, 0, 0, np.zeros((2, 16), np.float32)),
            "2-D",
        ),
        (
            lambda a, w: native.small_matmul(
                a, "float32", w, np.zeros((4, 1), np.uint8), 0, 0, np.zeros((2, 16), np.float32)
            ),
            "one array",
        ),
    ],
)
def test_bad_arguments_raise_one_line_errors(call, message):
    a = np.ones((2, 4), np.float32)
    w = np.ones((4, 16), np.float32)
    with (
        _kernels.use_backend("native"),
        pytest.raises(ValueError, match="small_matmul: .*" + message.replace("(", r"\(").replace(")", r"\)")),
    ):
        call(a, w)


def test_dst_overlapping_a_is_refused():
    buf = np.ones(64, np.float32)
    a = buf[:32].reshape(2, 16)
    dst = buf[16:48].reshape(2, 16)
    with pytest.raises(ValueError, match="small_matmul: dst must not overlap a"):
        native.small_matmul(a, "float32", np.ones((16, 16), np.float32), None, 0, 0, dst)


def test_zero_rows_and_the_reference_errors():
    w = np.ones((4, 16), np.float32)
    with _kernels.use_backend("native"):
        assert _kernels.small_matmul(np.zeros((0, 4), np.float32), "float32", (w,), 0).shape == (0, 16)
    with pytest.raises(ValueError, match="small_matmul: kind must be one of"):
        reference.small_matmul(np.ones((1, 4), np.float32), "int8", (w,), 0)
    with pytest.raises(ValueError, match=r"small_matmul: a must be \[rows <= 32, K >= 1\]"):
        reference.small_matmul(np.ones((33, 4), np.float32), "float32", (w,), 0)
    with pytest.raises(ValueError, match="small_matmul: the weight must be 2-D with 4 rows"):
        reference.small_matmul(np.ones((1, 4), np.float32), "float32", (w[:3],), 0)


# ---- the rule inside the ops --------------------------------------------------------------------------------


def quantised_operands(x, w, dtype, fidelity):
    a_bits, b_bits = numerics.fidelity_bits(fidelity)
    qa = numerics.truncate_mantissa(np.ascontiguousarray(numerics.quantize(x, ttnn.bfloat16)), a_bits)
    qw = numerics.truncate_mantissa(np.ascontiguousarray(numerics.quantize(w, dtype)), b_bits)
    return qa, qw


@pytest.mark.parametrize(
    "dtype", [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b, ttnn.float32], ids=lambda d: d.name
)
def test_decode_linear_follows_the_small_product_rule(open_mesh, dtype, monkeypatch):
    """A batch-1 decode linear in the style of tttv1's MLP (a [1, 1, 32, dim] activation whose rows 1..31 repeat
    row 0's padding, a w1-like weight sharded over a 1x2 mesh): per device, the reference kernel on the quantised
    and truncated operands; BLAS is never called."""
    mesh = open_mesh((1, 2))
    rng = np.random.default_rng(21)
    dim, hidden = 320, 384  # K = 10 tiles: blocks of 5 tiles (the largest divisor <= 8), two of them
    x = np.zeros((1, 1, 32, dim), np.float32)
    x[..., 0, :] = rng.standard_normal(dim)
    w = (rng.standard_normal((dim, hidden)) * 0.05).astype(np.float32)
    blas = []
    real = numerics.matmul_f32
    monkeypatch.setattr(numerics, "matmul_f32", lambda *args: blas.append(args) or real(*args))
    tx = ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    tw = ttnn.from_numpy(
        w, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1)
    )
    for fidelity in ttnn.MathFidelity:
        for fp32_acc in (False, True):
            config = ttnn.WormholeComputeKernelConfig(math_fidelity=fidelity, fp32_dest_acc_en=fp32_acc)
            out = ttnn.linear(tx, tw, compute_kernel_config=config, dtype=ttnn.float32)
            shards = [ttnn.to_numpy(s) for s in ttnn.get_device_tensors(out)]
            qa, qw = quantised_operands(x, w, dtype, fidelity)
            for device, shard in enumerate(shards):
                cols = qw[:, device * hidden // 2 : (device + 1) * hidden // 2]
                want = reference.small_matmul(
                    qa.reshape(32, dim), "float32", (np.ascontiguousarray(cols),), 0 if fp32_acc else 160
                )
                assert same_bits(shard.reshape(32, -1), want), (fidelity, fp32_acc, device)
    assert blas == []


def test_33_rows_and_batched_weights_keep_blas(open_mesh, monkeypatch):
    """Past one tile row of the left operand (a 33-row prefill chunk, or 2 x 32 rows flattened), and a batched
    right operand, the product stays on BLAS (matmul_f32); at 32 rows it does not."""
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(5)
    calls = []
    real = numerics.matmul_f32

    def spy(a, b):
        calls.append(a.shape)
        return real(a, b)

    monkeypatch.setattr(numerics, "matmul_f32", spy)
    w = ttnn.from_numpy(
        rng.standard_normal((64, 64)).astype(np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
    )
    for rows, expect_blas in ((32, False), (33, True)):
        calls.clear()
        x = ttnn.from_numpy(
            rng.standard_normal((1, 1, rows, 64)).astype(np.float32),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
        )
        ttnn.linear(x, w)
        assert bool(calls) is expect_blas, rows
    calls.clear()
    x2 = ttnn.from_numpy(
        rng.standard_normal((1, 2, 32, 64)).astype(np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
    )
    ttnn.linear(x2, w)
    assert calls  # 64 rows after flattening
    calls.clear()
    x1 = ttnn.from_numpy(
        rng.standard_normal((1, 2, 16, 64)).astype(np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
    )
    wb = ttnn.from_numpy(
        rng.standard_normal((1, 2, 64, 64)).astype(np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
    )
    ttnn.matmul(x1, wb)
    assert calls  # a batched right operand


def test_matmul_small_shapes_and_fits():
    """Leading dims of either operand, a float32 weight given as an array, and what small_product_fits refuses."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 1, 8, 64)).astype(np.float32)  # 16 rows after flattening
    w = rng.standard_normal((1, 1, 1, 64, 48)).astype(np.float32)
    assert numerics.small_product_fits(a, w)
    out = numerics.matmul_small(a, w, 32, False, 23)
    assert out.shape == (1, 2, 1, 8, 48)
    want = reference.small_matmul(a.reshape(16, 64), "float32", (w.reshape(64, 48),), 32)
    assert same_bits(out.reshape(16, 48), want)
    assert same_bits(numerics.matmul_accumulate(a, w, 32, False).reshape(16, 48), want)
    stored = storage.pack(w.reshape(64, 48)[:, :32].copy(), ttnn.bfloat8_b)
    got = numerics.matmul_stored(a, stored, 64, True, 4)
    ref_parts = (stored.exponents, stored.mantissas)
    assert same_bits(
        got.reshape(16, 32), reference.small_matmul(a.reshape(16, 64), "bfloat8_b", ref_parts, 0, MASKS[0])
    )
    assert same_bits(
        numerics.matmul_accumulate(a, w, None, False).reshape(16, 48),
        want_one_block := reference.small_matmul(a.reshape(16, 64), "float32", (w.reshape(64, 48),), 0),
    )
    assert same_bits(
        numerics.matmul_small(a, w, 64, False, 23).reshape(16, 48), want_one_block
    )  # K block >= K
    assert not numerics.small_product_fits(a[0, 0, 0], w)  # a vector
    assert not numerics.small_product_fits(a.tolist(), w)
    assert not numerics.small_product_fits(rng.standard_normal((33, 64)).astype(np.float32), w)
    assert not numerics.small_product_fits(a, rng.standard_normal((2, 64, 48)).astype(np.float32))
    assert not numerics.small_product_fits(a, w.astype(np.float64))
    assert not numerics.small_product_fits(a, w.reshape(64, 48)[:32])
    assert not numerics.small_product_fits(np.zeros((4, 0), np.float32), np.zeros((0, 8), np.float32))
    assert not numerics.small_product_fits(
        a, storage.pack(rng.standard_normal((64, 40)).astype(np.float32), ttnn.bfloat8_b)
    )


def test_matmul_op_module_uses_the_rule_for_a_transposed_weight(open_mesh):
    """A transposed bfloat16 weight (not read from storage) still follows the small-product rule."""
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 1, 32, 96)).astype(np.float32)
    wt = rng.standard_normal((64, 96)).astype(np.float32)
    fid = ttnn.MathFidelity.HiFi2
    out = ttnn.matmul(
        ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh),
        ttnn.from_numpy(wt, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh),
        transpose_b=True,
        compute_kernel_config=ttnn.WormholeComputeKernelConfig(math_fidelity=fid),
        dtype=ttnn.float32,
    )
    qa, qw = quantised_operands(x, wt.T, ttnn.bfloat16, fid)
    want = reference.small_matmul(qa.reshape(32, 96), "float32", (np.ascontiguousarray(qw),), 96)
    assert same_bits(ttnn.to_numpy(out).reshape(32, 64), want)
    assert matmul_mod.matmul_stored is numerics.matmul_stored
