"""The emulator's numerics model (documented in docs/numerics.md).

* Storing a tensor quantises it to its dtype (:func:`quantize`): bfloat16 rounds to nearest-even,
  bfloat8_b / bfloat4_b round to the block floating point grid, integer types convert.
* Ops read their inputs as float32 (already quantised), compute in float32, and the output tensor is
  quantised to the output dtype.
* Matmul-class ops additionally model the compute kernel config: math fidelity truncates operand
  mantissas (:func:`apply_fidelity`) and ``fp32_dest_acc_en=False`` rounds partial sums to bfloat16
  between K blocks (:func:`matmul_accumulate`).
"""

from __future__ import annotations

import numpy as np

from . import _kernels
from .types import TILE_SIZE, DataType, MathFidelity

__all__ = ["apply_fidelity", "matmul_accumulate", "quantize", "truncate_mantissa"]

_MANTISSA_BITS = {DataType.BFLOAT8_B: 7, DataType.BFLOAT4_B: 3}


def quantize(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """Return the values a device tensor of ``dtype`` would hold, in the emulator's storage dtype."""
    values = np.asarray(values)
    if dtype is DataType.FLOAT32:
        return np.array(values, dtype=np.float32, order="C", copy=True)
    if dtype is DataType.BFLOAT16:
        # reshape: keeps 0-d (rank-0) values 0-d, which ascontiguousarray / the kernel promote to 1-d
        return _kernels.round_bfloat16(np.ascontiguousarray(values, dtype=np.float32)).reshape(values.shape)
    if dtype.is_block_float:
        return _quantize_bfp(np.asarray(values, dtype=np.float32), _MANTISSA_BITS[dtype])
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)):
            raise ValueError(f"cannot store non-finite values in a {dtype.name} tensor")
        values = np.trunc(values)
    return np.ascontiguousarray(values.astype(dtype.numpy_dtype)).reshape(values.shape)


def _quantize_bfp(values: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """Blocks are 16 values along the last dim (one row of a tile face); pad that dim to the tile width."""
    if values.size == 0:
        return np.ascontiguousarray(values, dtype=np.float32)
    shape = values.shape
    width = shape[-1] if values.ndim else 1
    flat = values.reshape(-1, width)
    padded_width = -(-width // TILE_SIZE) * TILE_SIZE
    if padded_width != width:
        flat = np.pad(flat, ((0, 0), (0, padded_width - width)))
    out = _kernels.bfp_quantize(np.ascontiguousarray(flat), mantissa_bits)
    if padded_width != width:
        out = out[:, :width]
    return np.ascontiguousarray(out).reshape(shape)


def truncate_mantissa(values: np.ndarray, explicit_bits: int) -> np.ndarray:
    """Drop float32 mantissa bits below the top ``explicit_bits`` (round towards zero)."""
    if explicit_bits >= 23:
        return values
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    mask = np.uint32((0xFFFFFFFF << (23 - explicit_bits)) & 0xFFFFFFFF)
    return (bits & mask).view(np.float32)


# explicit mantissa bits the multiplier sees for (in0 = srcB, in1 = srcA) per fidelity
_FIDELITY_BITS = {
    MathFidelity.LoFi: (6, 4),
    MathFidelity.HiFi2: (6, 7),
    MathFidelity.HiFi3: (7, 7),
    MathFidelity.HiFi4: (23, 23),
}


def apply_fidelity(a: np.ndarray, b: np.ndarray, fidelity: MathFidelity) -> tuple[np.ndarray, np.ndarray]:
    """Truncate the operands of a multiply the way fewer multiplier passes do."""
    a_bits, b_bits = _FIDELITY_BITS[fidelity]
    return truncate_mantissa(a, a_bits), truncate_mantissa(b, b_bits)


def matmul_accumulate(a: np.ndarray, b: np.ndarray, k_block: int | None, fp32_acc: bool) -> np.ndarray:
    """``a @ b`` in float32; without fp32 accumulation, partial sums are rounded to bfloat16 per K block."""
    k = a.shape[-1]
    if fp32_acc or k_block is None or k_block >= k:
        return np.matmul(a, b, dtype=np.float32)
    acc = None
    for start in range(0, k, k_block):
        part = np.matmul(
            a[..., start : start + k_block], b[..., start : start + k_block, :], dtype=np.float32
        )
        acc = part if acc is None else acc + part
        acc = _kernels.round_bfloat16(np.ascontiguousarray(acc))
    return acc
