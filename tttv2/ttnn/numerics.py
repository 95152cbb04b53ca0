"""The emulator's numerics model (documented in docs/numerics.md).

* Storing a tensor quantises it to its dtype (:func:`quantize`): bfloat16 rounds to nearest-even,
  bfloat8_b / bfloat4_b round to the block floating point grid, integer types convert.
* Ops read their inputs as float32 (already quantised), compute in float32, and the output tensor is
  quantised to the output dtype.
* Matmul-class ops additionally model the compute kernel config: math fidelity truncates operand
  mantissas (:func:`apply_fidelity`) and ``fp32_dest_acc_en=False`` rounds partial sums to bfloat16
  between K blocks (:func:`matmul_accumulate`).
* Products with a small left operand (at most one tile row, 32 rows, after flattening its leading dims: every
  decode product) do not go to BLAS: :func:`matmul_small` runs the native ``small_matmul`` kernel, whose
  summation order per output element is fixed (docs/numerics.md §3), so a row's result depends only on that row
  and the weight, and repeated rows are computed once.
* Results do not depend on threads: BLAS runs single-threaded inside emulator compute and large products
  and maps are cut into pieces fixed by their shapes (:mod:`._threads`).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import weakref

import numpy as np

from . import _kernels, _threads, storage
from .errors import ValidationError
from .types import TILE_SIZE, DataType, MathFidelity

__all__ = [
    "apply_fidelity",
    "check_integer_range",
    "fidelity_bits",
    "fill_in_pieces",
    "map_row_blocks",
    "matmul_accumulate",
    "matmul_f32",
    "matmul_f32_each",
    "matmul_small",
    "matmul_stored",
    "quantize",
    "small_product_fits",
    "store",
    "stored_weight_fits",
    "truncate_mantissa",
]

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


def store(values, dtype: DataType):
    """What a tensor of ``dtype`` holds for ``values``: a :class:`storage.Bf16Storage` or
    :class:`storage.BlockFloatStorage` (the device format) for bfloat16 and the block floats, else the array
    :func:`quantize` returns. Values unpacked from a storage of that dtype (or a reshape of them) give that
    storage back, shared, without packing again."""
    if dtype.is_packed:
        if isinstance(values, np.ndarray):
            known = storage.source_of(values, whole=True)
            if known is not None and known.dtype is dtype and known.shape == values.shape:
                return known
        return storage.pack(np.asarray(values, dtype=np.float32), dtype)
    return quantize(values, dtype)


def check_integer_range(values, dtype: DataType, what: str) -> None:
    """Raise if host ``values`` going into an integer ``dtype`` tensor hold a number it cannot store.

    Real ttnn's ``from_torch`` converts UINT32/INT32 data through ``torch.int32`` and UINT16 through
    ``torch.int16`` (then reinterprets the bits), so such values wrap around silently; the emulator refuses
    them instead. Floats are truncated towards zero first, as storing them does. Ops' integer results are not
    checked here (the device's integer arithmetic and typecast rules apply to them, see docs/numerics.md).
    """
    if dtype.is_float:
        return
    values = np.asarray(values)
    if values.size == 0 or values.dtype == dtype.numpy_dtype or values.dtype.kind == "b":
        return
    info = np.iinfo(dtype.numpy_dtype)
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)):
            raise ValidationError(
                f"{what}: expected finite values for a {dtype.name} tensor, got non-finite ones (inf or nan)"
            )
        values = np.trunc(values)
    low, high = values.min(), values.max()
    if low < info.min or high > info.max:
        bad = low if low < info.min else high
        raise ValidationError(
            f"{what}: expected values in [{info.min}, {info.max}] for a {dtype.name} tensor, got {bad} "
            "(out of range: real ttnn would wrap it around silently)"
        )


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


_BITS_USED: dict[int, tuple[weakref.ref, int]] = {}


def _read_only_throughout(array: np.ndarray) -> bool:
    """True when the array and every array under it are read-only ndarrays (no buffer of another kind)."""
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        array = array.base
    return array is None


def explicit_bits_used(values: np.ndarray) -> int | None:
    """The fewest explicit mantissa bits that hold every element of a float32 array exactly (23 minus the
    trailing zero bits of the OR of all mantissa fields, so subnormals count as they are stored), for an array
    that cannot change (read-only down to its last base, as ``Tensor`` seals the shards it quantises); remembered
    per array, so a weight is read once. None for any other array."""
    if values.dtype != np.float32 or not _read_only_throughout(values):
        return None
    key = id(values)
    known = _BITS_USED.get(key)
    if known is not None and known[0]() is values:
        return known[1]
    fields = int(np.bitwise_or.reduce(values.view(np.uint32), axis=None)) & 0x7FFFFF if values.size else 0
    used = 0 if fields == 0 else 23 - ((fields & -fields).bit_length() - 1)

    def forget(ref, key=key):
        if _BITS_USED.get(key, (None,))[0] is ref:
            del _BITS_USED[key]

    _BITS_USED[key] = (weakref.ref(values, forget), used)
    return used


def truncate_mantissa(values: np.ndarray, explicit_bits: int) -> np.ndarray:
    """Drop float32 mantissa bits below the top ``explicit_bits`` (round towards zero). An unchangeable array
    with no bit below them (a bfloat8_b weight at HiFi2, a bfloat4_b one at LoFi) is returned as it is, without
    the full-size copy: the same bits."""
    if explicit_bits >= 23:
        return values
    source = storage.source_of(values) if getattr(values, "dtype", None) == np.float32 else None
    if source is not None and storage.unpack_bits_bound(source.dtype) <= explicit_bits:
        return values  # unpacked from a bfloat16 / block float shard: no bit below the cut, no scan needed
    used = explicit_bits_used(values) if isinstance(values, np.ndarray) else None
    if used is not None and used <= explicit_bits:
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


def fidelity_bits(fidelity: MathFidelity) -> tuple[int, int]:
    """Explicit mantissa bits the multiplier keeps of (input A, input B) at ``fidelity`` (23: all)."""
    return _FIDELITY_BITS[fidelity]


def apply_fidelity(a: np.ndarray, b: np.ndarray, fidelity: MathFidelity) -> tuple[np.ndarray, np.ndarray]:
    """Truncate the operands of a multiply the way fewer multiplier passes do."""
    a_bits, b_bits = _FIDELITY_BITS[fidelity]
    return truncate_mantissa(a, a_bits), truncate_mantissa(b, b_bits)


# Products and elementwise maps are cut into pieces whose bounds depend on the shapes only, never on the
# worker count: one worker computes the same pieces serially and gets the same bits (see _threads.py).
_MATMUL_ROW_BLOCK = 256  # rows per piece of a product with one right-hand matrix (at most)
_MATMUL_MIN_WORK = 1 << 22  # multiply-adds below which a product stays one piece
_ELEMENTWISE_BLOCK = 1 << 18  # elements per piece of an elementwise map (at least)


def _bounds(n: int, pieces: int) -> list[int]:
    return [n * i // pieces for i in range(pieces + 1)]


def _run_pieces(fn, bounds: list[int], side=None) -> list:
    """``[fn(lo, hi) for each piece]``, the pieces shared between the caller and the workers.

    Each thread takes the next piece not taken yet until none is left, the caller included: with pieces of
    different sizes or counts (a weight gradient of 1536 rows is 6 pieces) no thread idles while another has
    several left, and a worker slow to start (a busy machine) leaves its pieces to the caller instead of being
    waited for. Which thread computes a piece never changes its bits.

    ``side``, if given, is work of the caller's own that needs none of the pieces (a bias gradient's sum): the
    caller runs it after handing the pieces out and before taking any, so the workers compute meanwhile."""
    pairs = list(itertools.pairwise(bounds))
    if _threads.WORKERS == 1 or len(pairs) == 1:
        if side is not None:
            side()
        return [fn(lo, hi) for lo, hi in pairs]
    results: list = [None] * len(pairs)
    tickets = itertools.count()  # next() of a count is atomic under the GIL: each index is taken once

    def take_pieces() -> None:
        for index in tickets:
            if index >= len(pairs):
                return
            results[index] = fn(*pairs[index])

    helpers = [_threads.submit(take_pieces) for _ in range(min(_threads.WORKERS, len(pairs)) - 1)]
    try:
        if side is not None:
            side()
    finally:
        take_pieces()
        for helper in helpers:
            helper.result()
    return results


def _matmul_pieces(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, object, list[int]] | None:
    """How :func:`matmul_f32` cuts ``a @ b``: ``(out, piece, bounds)`` with ``piece(lo, hi)`` writing its part of
    ``out``, or None for a product computed in one call (small, or shapes numpy has to broadcast)."""
    if a.ndim >= 2 and b.ndim >= 2 and b.shape[-2] == a.shape[-1]:
        k, n = a.shape[-1], b.shape[-1]
        m = math.prod(a.shape[:-1])
        if all(d == 1 for d in b.shape[:-2]):  # one matrix b: row blocks of a
            if m * k * n >= _MATMUL_MIN_WORK and m > _MATMUL_ROW_BLOCK:
                out = np.empty((1,) * (b.ndim - a.ndim) + a.shape[:-1] + (n,), dtype=np.float32)
                x, y, res = a.reshape(m, k), b.reshape(k, n), out.reshape(m, n)  # res: a view of out

                def rows(lo: int, hi: int) -> None:
                    np.matmul(x[lo:hi], y, out=res[lo:hi], dtype=np.float32)

                return out, rows, _bounds(m, -(-m // _MATMUL_ROW_BLOCK))
        elif a.shape[:-2] == b.shape[:-2] and a.shape[0] > 1 and m * k * n >= _MATMUL_MIN_WORK:
            out = np.empty((*a.shape[:-1], n), dtype=np.float32)

            def batches(lo: int, hi: int) -> None:
                np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi], dtype=np.float32)

            return out, batches, _bounds(a.shape[0], min(_threads.WORKERS, a.shape[0]))
    return None


def matmul_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float32 on one BLAS thread, with the same bits whatever the worker count.

    A large product with one right-hand matrix is computed in row blocks of ``a`` (all batch rows flattened;
    at most ``_MATMUL_ROW_BLOCK`` rows each, sizes fixed by the shape); one with matching batch dims per
    leading batch index (numpy computes each matrix of a batch on its own anyway). The pieces run on the
    emulator's workers."""
    with _threads.single_threaded_blas:
        plan = _matmul_pieces(a, b)
        if plan is None:
            return np.matmul(a, b, dtype=np.float32)
        out, piece, bounds = plan
        _run_pieces(piece, bounds)
        return out


def matmul_f32_each(products: list[tuple[np.ndarray, np.ndarray]], side=None) -> list[np.ndarray]:
    """``[matmul_f32(a, b) for a, b in products]`` with all their pieces in one share-out, and ``side`` (see
    :func:`_run_pieces`) run by the caller meanwhile: the same pieces, hence the same bits, as one product after
    the other, without a wait for the workers between products. A backward's input and weight gradients go
    together this way."""
    with _threads.single_threaded_blas:
        tasks = []
        outs: list = [None] * len(products)
        for index, (a, b) in enumerate(products):
            plan = _matmul_pieces(a, b)
            if plan is None:

                def whole(index=index, a=a, b=b) -> None:
                    outs[index] = np.matmul(a, b, dtype=np.float32)

                tasks.append(whole)
            else:
                outs[index], piece, bounds = plan
                tasks.extend(functools.partial(piece, lo, hi) for lo, hi in itertools.pairwise(bounds))
        _run_pieces(lambda lo, _hi: tasks[lo](), list(range(len(tasks) + 1)), side)
        return outs


def fill_in_pieces(fill, count: int) -> None:
    """``fill(lo, hi)`` over ``range(count)`` cut into pieces of at least ``_ELEMENTWISE_BLOCK // 4`` elements
    (bounds fixed by ``count``), spread over the emulator's workers: for fills whose values do not depend on the
    cut (a random stream drawn from its position)."""
    pieces = count // (_ELEMENTWISE_BLOCK // 4)
    if pieces < 2:
        fill(0, count)
        return
    _run_pieces(fill, _bounds(count, pieces))


def map_row_blocks(fn, x: np.ndarray) -> np.ndarray:
    """``fn(x)`` for an elementwise ``fn``, computed on row blocks of a large ``x`` (block bounds fixed by the
    shape) spread over the emulator's workers."""
    if not isinstance(x, np.ndarray) or x.ndim == 0 or x.size < 2 * _ELEMENTWISE_BLOCK:
        return fn(x)
    flat = x.reshape(-1, x.shape[-1])
    pieces = min(flat.shape[0], x.size // _ELEMENTWISE_BLOCK)
    if pieces < 2:
        return fn(x)
    blocks = _run_pieces(lambda lo, hi: fn(flat[lo:hi]), _bounds(flat.shape[0], pieces))
    out = np.empty(x.shape, dtype=blocks[0].dtype)
    np.concatenate(blocks, out=out.reshape(flat.shape))
    return out


def matmul_accumulate(a: np.ndarray, b: np.ndarray, k_block: int | None, fp32_acc: bool) -> np.ndarray:
    """``a @ b`` in float32; without fp32 accumulation, partial sums are rounded to bfloat16 per K block. A small
    left operand times one matrix (:func:`small_product_fits`) goes to :func:`matmul_small`."""
    if small_product_fits(a, b):
        return matmul_small(a, b, k_block, fp32_acc, 23)
    k = a.shape[-1]
    if fp32_acc or k_block is None or k_block >= k:
        return matmul_f32(a, b)
    acc = None
    for start in range(0, k, k_block):
        part = matmul_f32(a[..., start : start + k_block], b[..., start : start + k_block, :])
        acc = part if acc is None else acc + part
        acc = _kernels.round_bfloat16(np.ascontiguousarray(acc))
    return acc


_SCRATCH = threading.local()
# a panel larger than this (64 MiB of float32) gets a buffer of its own, dropped after the op, instead of growing the
# thread's reused one: threads that run devices side by side would otherwise each keep the largest panel they saw
_SCRATCH_MAX_ELEMENTS = 1 << 24


def _scratch(elements: int) -> np.ndarray:
    """This thread's reused float32 buffer, at least ``elements`` long (grown up to the cap, never shrunk)."""
    if elements > _SCRATCH_MAX_ELEMENTS:
        return np.empty(elements, dtype=np.float32)
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < elements:
        buf = _SCRATCH.buf = np.empty(max(elements, 1), dtype=np.float32)
    return buf


def stored_weight_fits(w, transpose: bool) -> bool:
    """Whether :func:`matmul_stored` takes this shard as the right operand: a bfloat16 / block-float storage of
    one matrix (leading dims 1) whose last dim needs no tile padding, not transposed."""
    return (
        storage.is_storage(w)
        and not transpose
        and len(w.shape) >= 2
        and all(d == 1 for d in w.shape[:-2])
        and w.shape[-1] % TILE_SIZE == 0
        and w.shape[-1] > 0
        and w.shape[-2] > 0
    )


def _panel(w, lo: int, hi: int, explicit_bits: int) -> np.ndarray:
    """Rows ``lo:hi`` of a stored weight as float32 in this thread's scratch, the mantissas truncated for the
    math fidelity in place: the values ``truncate_mantissa(unpacked weight, bits)[lo:hi]`` holds."""
    n = w.shape[-1]
    out = _scratch((hi - lo) * n)[: (hi - lo) * n].reshape(hi - lo, n)
    keep = storage.ALL_BITS
    if explicit_bits < 23 and storage.unpack_bits_bound(w.dtype) > explicit_bits:
        keep = (0xFFFFFFFF << (23 - explicit_bits)) & 0xFFFFFFFF
    w.unpack_rows_into(lo, hi, out, keep)
    return out.reshape(*w.shape[:-2], hi - lo, n)


def matmul_stored(a: np.ndarray, w, k_block: int | None, fp32_acc: bool, w_bits: int) -> np.ndarray:
    """``matmul_accumulate(a, truncate_mantissa(unpacked w, w_bits), k_block, fp32_acc)`` reading the weight from
    its storage (see :func:`stored_weight_fits`): each K block of rows (the whole of K with fp32 accumulation) is
    unpacked into a reused per-thread buffer, so no full-size float32 weight is allocated per op. The same BLAS
    calls on the same values in the same C-contiguous layout: the same bits (tests/ttnn/test_packed_matmul.py).
    A small left operand goes to :func:`matmul_small`, which decodes the packed blocks itself."""
    if small_product_fits(a, w):
        return matmul_small(a, w, k_block, fp32_acc, w_bits)
    k = w.shape[-2]
    if fp32_acc or k_block is None or k_block >= k:
        return matmul_f32(a, _panel(w, 0, k, w_bits))
    acc = None
    for start in range(0, k, k_block):
        stop = min(k, start + k_block)
        part = matmul_f32(a[..., start:stop], _panel(w, start, stop, w_bits))
        acc = part if acc is None else acc + part
        acc = _kernels.round_bfloat16(np.ascontiguousarray(acc))
    return acc


SMALL_MATMUL_ROWS = _kernels.reference.SMALL_MATMUL_ROWS  # one tile row


def small_product_fits(a, w) -> bool:
    """Whether ``a @ w`` follows the small-product rule: ``a`` has at most :data:`SMALL_MATMUL_ROWS` rows after
    flattening its leading dims and K >= 1; ``w`` is one matrix (leading dims 1: a float32 array, or a storage
    :func:`stored_weight_fits` takes) whose rows match ``a``'s K. Other products (a batched right operand, a
    prefill) keep BLAS."""
    if not isinstance(a, np.ndarray) or a.ndim < 2 or a.shape[-1] == 0:
        return False
    if math.prod(a.shape[:-1]) > SMALL_MATMUL_ROWS or len(w.shape) < 2 or w.shape[-2] != a.shape[-1]:
        return False
    if storage.is_storage(w):
        return stored_weight_fits(w, False)
    return isinstance(w, np.ndarray) and w.dtype == np.float32 and all(d == 1 for d in w.shape[:-2])


def _weight_parts(w, k: int) -> tuple[str, tuple]:
    """The kernel's view of a weight: its kind and the arrays it reads, as ``[K, ...]`` matrices."""
    if isinstance(w, storage.Bf16Storage):
        return "bfloat16", (w.bits.reshape(k, w.shape[-1]),)
    if isinstance(w, storage.BlockFloatStorage):
        return w.dtype.name.lower(), (w.exponents, w.mantissas)
    return "float32", (w.reshape(k, w.shape[-1]),)


def matmul_small(a: np.ndarray, w, k_block: int | None, fp32_acc: bool, w_bits: int) -> np.ndarray:
    """``a @ w`` for a product :func:`small_product_fits` takes, by the small-product rule (docs/numerics.md §3):
    per output element, a sum over k in increasing order of float32 products, each add rounded to float32, within
    each K block (one block, the whole of K, with fp32 accumulation); across blocks today's ``acc + part`` with the
    bfloat16 rounding. ``w`` (a storage or a float32 array) is read as stored, its mantissas truncated to
    ``w_bits`` on the way (``a`` is truncated by the caller, as for BLAS). Byte-equal rows of ``a`` are computed
    once; the columns are cut between the native kernels' threads, which never changes a bit."""
    k, n = a.shape[-1], w.shape[-1]
    kind, parts = _weight_parts(w, k)
    keep = storage.ALL_BITS if w_bits >= 23 else (0xFFFFFFFF << (23 - w_bits)) & 0xFFFFFFFF
    block = 0 if fp32_acc or k_block is None or k_block >= k else k_block
    out = _kernels.small_matmul(
        np.ascontiguousarray(a, dtype=np.float32).reshape(-1, k), kind, parts, block, keep
    )
    return out.reshape((1,) * (len(w.shape) - a.ndim) + a.shape[:-1] + (n,))
