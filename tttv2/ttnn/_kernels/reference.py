"""Numpy reference implementations of the emulator's hot kernels.

Every function here has a C++ twin in ``native/src`` (module ``tttv2._native``); the dispatcher in
``tttv2.ttnn._kernels`` picks one, and ``tests/ttnn/test_native_kernels.py`` checks that both agree.
All inputs and outputs are C-contiguous float32 arrays unless stated otherwise.

Block floating point (``bfloat8_b`` / ``bfloat4_b``), as implemented here and in C++:

* values are grouped in blocks of 16 consecutive elements of one row (the 16 values of one row of a
  16×16 tile face); ``cols`` must be a multiple of 16;
* each block stores one shared 8-bit exponent ``E``: the largest biased float32 exponent in the block;
* each value stores a sign bit and an ``m``-bit magnitude ``M`` (``m`` = 7 for bfloat8_b, 3 for
  bfloat4_b) with the hidden bit made explicit: ``value = ±M · 2^(E − 127 − (m − 1))``;
* ``M`` is ``|x| / 2^(E − 127 − (m − 1))`` rounded to nearest, ties to even, and saturated at ``2^m − 1``;
* denormal inputs have exponent 0 and therefore flush towards zero unless the whole block is tiny;
  infinities and NaNs are not representable and saturate to the largest magnitude of the block.

* the shared exponent only counts finite values (a non-finite value counts as exponent 0), and a value
  whose magnitude rounds to 0 is stored without its sign (``-0.0`` and tiny negatives come back ``+0.0``).

Error bound, for every finite value of a block whose values are all finite:
``|q(x) − x| ≤ max(max|x_block| · 2^(−m), 2^(−126−m))``. Values that do not saturate are within half a
step, ``2^(E − 127 − m)``, which is ≤ ``max|x_block| · 2^(−m)`` because ``max|x_block| ≥ 2^(E − 127)``
for ``E ≥ 1``. Values that round past ``2^m − 1`` lose up to a whole step, but they exceed
``(2^m − ½)`` steps themselves, so ``|x| · 2^(−m)`` still bounds their error. In an all-denormal block
(``E = 0``) the step is ``2^(−126−m)``, which bounds every error there.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

BFP_BLOCK = 16


def round_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 → nearest bfloat16 (ties to even), returned as float32."""
    with np.errstate(invalid="ignore"):  # signalling NaNs quieten (as in C++) instead of warning
        return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _check_bfp_input(x: np.ndarray, mantissa_bits: int) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] % BFP_BLOCK != 0:
        raise ValueError(
            f"bfp kernels need a 2-D array whose last dim is a multiple of 16, got shape {x.shape}"
        )
    if mantissa_bits not in (3, 7):
        raise ValueError(f"mantissa_bits must be 7 (bfloat8_b) or 3 (bfloat4_b), got {mantissa_bits}")
    return x


def bfp_pack(x: np.ndarray, mantissa_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Pack a [rows, cols] float32 array into (exponents uint8 [rows, cols/16], sign|magnitude uint8 [rows, cols])."""
    x = _check_bfp_input(x, mantissa_bits)
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // BFP_BLOCK, BFP_BLOCK)
    finite = np.where(np.isfinite(blocks), blocks, 0.0).astype(np.float32)
    bits = finite.view(np.uint32)
    exps = ((bits >> 23) & 0xFF).astype(np.int32)
    shared = exps.max(axis=2)  # [rows, nblocks]
    # scale so that the block's largest exponent maps onto the top mantissa bit
    step_exp = shared.astype(np.int32) - 127 - (mantissa_bits - 1)
    step = np.ldexp(np.float32(1.0), step_exp).astype(np.float32)[..., None]
    max_mag = (1 << mantissa_bits) - 1
    with np.errstate(over="ignore", invalid="ignore"):
        mag = np.rint(np.abs(blocks) / step)
    mag = np.where(np.isfinite(mag), mag, max_mag)
    mag = np.minimum(mag, max_mag).astype(np.uint8)
    sign = (np.signbit(blocks) & (mag > 0)).astype(np.uint8) << 7
    mant = (sign | mag).reshape(rows, cols)
    return shared.astype(np.uint8), mant


def bfp_unpack(
    exponents: np.ndarray, mantissas: np.ndarray, mantissa_bits: int, out: np.ndarray | None = None
) -> np.ndarray:
    """Inverse of :func:`bfp_pack`; written into ``out`` (float32 [rows, cols], C-contiguous) when given."""
    if out is not None:
        out[...] = bfp_unpack(exponents, mantissas, mantissa_bits)
        return out
    rows, cols = mantissas.shape
    if exponents.shape != (rows, cols // BFP_BLOCK):
        raise ValueError(
            f"exponents shape {exponents.shape} does not match mantissas shape {mantissas.shape}"
        )
    mag = (mantissas & 0x7F).astype(np.float32).reshape(rows, cols // BFP_BLOCK, BFP_BLOCK)
    step_exp = exponents.astype(np.int32) - 127 - (mantissa_bits - 1)
    vals = np.ldexp(mag, step_exp[..., None]).astype(np.float32)
    neg = (mantissas >> 7).astype(bool).reshape(vals.shape)
    vals = np.where(neg, -vals, vals)
    return vals.reshape(rows, cols)


ALL_BITS = 0xFFFFFFFF


def _kept(values: np.ndarray, keep_mask: int, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        out = np.empty(values.shape, dtype=np.float32)  # owns its data, like the native twin's result
    out.view(np.uint32)[...] = values.view(np.uint32) & np.uint32(keep_mask)
    return out


def bf16_unpack(bits: np.ndarray, keep_mask: int = ALL_BITS, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 bit patterns (uint16) → float32 of the same shape, the float32 bits ANDed with ``keep_mask``
    (the math-fidelity truncation), into ``out`` when given."""
    values = (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    return _kept(values, keep_mask, out)


def bfp_unpack_codes(
    exponents: np.ndarray,
    codes: np.ndarray,
    mantissa_bits: int,
    nibbles: bool,
    keep_mask: int = ALL_BITS,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Block floats → float32 [rows, cols], the bits ANDed with ``keep_mask``. ``codes`` holds one sign|magnitude
    byte per value, or with ``nibbles`` (bfloat4_b) two 4-bit codes per byte (sign in bit 3, the even column in
    the low nibble)."""
    codes = np.asarray(codes, dtype=np.uint8)
    if nibbles:
        if mantissa_bits != 3:
            raise ValueError("4-bit codes hold a 3-bit magnitude: mantissa_bits must be 3 with nibbles=True")
        split = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(codes.shape[0], 2 * codes.shape[1])
        codes = ((split & 0x8) << 4) | (split & 0x7)
    return _kept(bfp_unpack(exponents, codes, mantissa_bits), keep_mask, out)


SMALL_MATMUL_ROWS = 32  # one tile row: the largest left operand small_matmul takes
_WEIGHT_KINDS = ("float32", "bfloat16", "bfloat8_b", "bfloat4_b")


def small_weight(kind: str, parts: tuple, keep_mask: int = ALL_BITS) -> np.ndarray:
    """A small_matmul weight as float32 ``[K, N]``, its bits ANDed with ``keep_mask``: ``parts`` is ``(w,)`` (float32),
    ``(bits,)`` (bfloat16 patterns, uint16) or ``(exponents, codes)`` (bfloat8_b: a sign|magnitude byte per value;
    bfloat4_b: two 4-bit codes per byte)."""
    if kind not in _WEIGHT_KINDS:
        raise ValueError(f"small_matmul: kind must be one of {', '.join(_WEIGHT_KINDS)}, got {kind!r}")
    if kind == "float32":
        return _kept(np.asarray(parts[0], dtype=np.float32), keep_mask, None)
    if kind == "bfloat16":
        return bf16_unpack(parts[0], keep_mask)
    nibbles = kind == "bfloat4_b"
    return bfp_unpack_codes(parts[0], parts[1], 3 if nibbles else 7, nibbles, keep_mask)


def small_matmul(
    a: np.ndarray, kind: str, parts: tuple, k_block: int, keep_mask: int = ALL_BITS
) -> np.ndarray:
    """``a [M <= 32, K] @ weight [K, N]`` (the weight as :func:`small_weight` reads it) with a fixed summation order
    per output element: K is cut into blocks of ``k_block`` rows (0, or at least K: one block); within a block the
    sum starts at +0.0 and adds the float32 product ``a[i, k] * w[k, j]`` for k in increasing order, each add
    rounded to float32 (never fused); the blocks' sums are added in float32, the running sum rounded to bfloat16
    after every block when there is more than one. A row's result depends on that row and the weight only."""
    a = np.asarray(a, dtype=np.float32)
    if a.ndim != 2 or a.shape[0] > SMALL_MATMUL_ROWS or a.shape[1] == 0:
        raise ValueError(f"small_matmul: a must be [rows <= 32, K >= 1], got shape {a.shape}")
    w = small_weight(kind, parts, keep_mask)
    depth = a.shape[1]
    if w.ndim != 2 or w.shape[0] != depth:
        raise ValueError(f"small_matmul: the weight must be 2-D with {depth} rows (a's K), got {w.shape}")
    step = k_block if 0 < k_block < depth else depth
    acc = None
    for start in range(0, depth, step):
        part = np.zeros((a.shape[0], w.shape[1]), dtype=np.float32)
        for k in range(start, min(depth, start + step)):
            part += a[:, k : k + 1] * w[k]  # a float32 product, then a float32 add
        acc = part if acc is None else acc + part
        if step < depth:
            acc = round_bfloat16(acc)
    return acc


def bfp_quantize(x: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """Round-trip through the block floating point format (what storing a tensor as bfp does to it)."""
    return bfp_unpack(*bfp_pack(x, mantissa_bits), mantissa_bits)


ROW_SUM_LANES = 32  # the norms' row sums: independent float32 accumulators ...
ROW_SUM_CHUNK = ROW_SUM_LANES * 16  # ... each adding 16 terms before its sum moves to a float64 total


def row_sum(terms: np.ndarray) -> np.ndarray:
    """The norms' sum over the last dim of float32 ``terms [rows, d]``, as float64 ``[rows]``, in this order:

    * the row is cut into chunks of 512 terms (and a tail of ``d mod 512``); 32 lanes, lane j taking the terms
      at positions ``≡ j (mod 32)``;
    * in each chunk, each lane starts at +0.0 and adds its 16 terms in increasing position, in float32; the
      lane's float32 sum is then added to the lane's float64 total (chunks in order);
    * each tail term is added to its lane's float64 total, in increasing position;
    * the 32 totals are added in lane order to a float64 +0.0.

    Every add is one IEEE add rounded to its type (no reassociation, no FMA), so the C++ twin
    (``row_sum`` in ``native/src/norms.cpp``), whose lanes are its vector lanes, gives the same bits.
    """
    terms = np.asarray(terms, dtype=np.float32)
    rows, d = terms.shape
    full = d - d % ROW_SUM_CHUNK
    total = np.zeros((rows, ROW_SUM_LANES), dtype=np.float64)
    if full:
        chunks = terms[:, :full].reshape(
            rows, full // ROW_SUM_CHUNK, ROW_SUM_CHUNK // ROW_SUM_LANES, ROW_SUM_LANES
        )
        acc = np.zeros((rows, chunks.shape[1], ROW_SUM_LANES), dtype=np.float32)
        for k in range(chunks.shape[2]):
            acc += chunks[:, :, k, :]  # float32 adds, lane by lane
        for c in range(acc.shape[1]):
            total += acc[:, c, :]  # float32 → float64 is exact; one float64 add per lane
    for k in range(full, d, ROW_SUM_LANES):
        n = min(ROW_SUM_LANES, d - k)
        total[:, :n] += terms[:, k : k + n]
    out = np.zeros(rows, dtype=np.float64)
    for j in range(ROW_SUM_LANES):
        out += total[:, j]
    return out


def _as_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1]) if x.ndim != 2 else x


def rms_norm(x: np.ndarray, weight: np.ndarray | None, eps: float) -> np.ndarray:
    """y = x · inv · weight for x [..., d], per row ``inv = 1 / sqrt(mean_sq + eps)`` with
    ``mean_sq = float32(row_sum(x · x) / d)`` (:func:`row_sum` of the float32 squares, divided in float64);
    every other step one float32 operation, in this order."""
    x = np.asarray(x, dtype=np.float32)
    x2 = _as_rows(x)
    mean_sq = (row_sum(x2 * x2) / x2.shape[1]).astype(np.float32)
    inv = np.float32(1.0) / np.sqrt(mean_sq + np.float32(eps))
    y = x2 * inv[:, None]
    if weight is not None:
        y = y * np.asarray(weight, dtype=np.float32).reshape(-1)
    return y.reshape(x.shape)


def layer_norm(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> np.ndarray:
    """y = (x − mean) · inv · weight + bias for x [..., d] (biased variance), each step one float32 operation in
    this order, with the row statistics computed as follows (float64 unless stated):

    * ``c = x − x[0]`` in float32 (the row shifted by its first value); ``s1 = row_sum(c)``, ``s2 = row_sum(c · c)``
      (:func:`row_sum`, the squares rounded to float32); ``mc = s1 / d``; ``var = s2 / d − mc · mc``;
      ``mean = float32(x[0] + mc)``;
    * unless ``8 · var ≥ mc²`` (false when the mean is far from x[0] in standard deviations, or for NaN),
      ``var = row_sum((x − mean)²) / d`` with the difference and its square rounded to float32;
    * ``inv = 1 / sqrt(float32(var) + eps)`` in float32.
    """
    x = np.asarray(x, dtype=np.float32)
    x2 = _as_rows(x)
    d = x2.shape[1]
    if d == 0:
        return x.copy()
    shift = x2[:, :1]
    c = x2 - shift
    mean_c = row_sum(c) / d
    var = row_sum(c * c) / d - mean_c * mean_c
    mean = (shift[:, 0].astype(np.float64) + mean_c).astype(np.float32)[:, None]
    again = ~(8.0 * var >= mean_c * mean_c)
    if again.any():
        centred = x2[again] - mean[again]
        var[again] = row_sum(centred * centred) / d
    inv = np.float32(1.0) / np.sqrt(var.astype(np.float32) + np.float32(eps))
    y = (x2 - mean) * inv[:, None]
    if weight is not None:
        y = y * np.asarray(weight, dtype=np.float32).reshape(-1)
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float32).reshape(-1)
    return y.reshape(x.shape)


def softmax(x: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last dim of x [..., d]: per row ``e = exp(x − max)`` (float32),
    ``inv = float32(1 / row_sum(e))`` (:func:`row_sum`, the division in float64), ``y = e · inv`` (float32); a row
    holding a NaN comes out NaN. The C++ twin takes the same steps in this order, with its own float32 exp (see
    docs/numerics.md §2: the exp is the only step whose bits differ)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim and x.shape[-1] == 0:
        return x.copy()  # empty rows (np.max has no identity)
    x2 = _as_rows(x)
    e = np.exp(x2 - np.max(x2, axis=-1, keepdims=True))
    inv = (1.0 / row_sum(e)).astype(np.float32)
    return (e * inv[:, None]).reshape(x.shape)


def rotary_interleaved(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, inner: int) -> np.ndarray:
    """Rotary embedding on adjacent pairs (Meta layout), as ``rotary_embedding_llama`` computes it.

    x is [n, d]; cos and sin are [m, d]; row i of x uses row ``(i // inner) % m`` of cos/sin.
    out[2j] = x[2j]·cos[2j] − x[2j+1]·sin[2j];  out[2j+1] = x[2j+1]·cos[2j+1] + x[2j]·sin[2j+1].
    """
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[0]
    m = cos.shape[0]
    idx = (np.arange(n) // inner) % m
    c = cos[idx]
    s = sin[idx]
    swapped = np.empty_like(x)
    swapped[:, 0::2] = -x[:, 1::2]
    swapped[:, 1::2] = x[:, 0::2]
    return (x * c + swapped * s).astype(np.float32)


def silu_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """silu(a) · b elementwise (the fused gate of a SwiGLU MLP)."""
    a = np.asarray(a, dtype=np.float32)
    return (a / (1.0 + np.exp(-a)) * b).astype(np.float32)
