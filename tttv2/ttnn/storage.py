"""How a device tensor's shard is held in host memory: in the device's own number format.

This is the emulator's bottom layer (it imports the dtypes and the kernels, never the tensor or the ops).

* ``bfloat16``: :class:`Bf16Storage`, the 16-bit patterns (2 bytes per value).
* ``bfloat8_b`` / ``bfloat4_b``: :class:`BlockFloatStorage`, packed blocks of 16 values along the last dim (one
  row of a tile face): one shared exponent byte per block, then per value a sign and a 7-bit magnitude in one
  byte (bfloat8_b) or a sign and a 3-bit magnitude in one 4-bit code, two codes per byte (bfloat4_b). With the
  last dim padded to the tile width that is 1.0625 and 0.5625 bytes per value, as on the device.
* ``float32`` and the integer types are held as numpy arrays of their own dtype (no storage class).

Ops compute in float32: :meth:`to_float32` unpacks a fresh float32 array for each read, which is dropped after
the op; no float32 copy is kept alongside the packed form. ``unpack(pack(x))`` is bit for bit what
``numerics.quantize(x, dtype)`` returns (tests/ttnn/test_storage.py).
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from . import _kernels
from .types import TILE_SIZE, DataType

__all__ = [
    "BFP_BLOCK",
    "Bf16Storage",
    "BlockFloatStorage",
    "Storage",
    "constant",
    "empty",
    "is_storage",
    "pack",
    "source_of",
    "unpack_bits_bound",
    "unpacked",
]

BFP_BLOCK = 16
ALL_BITS = 0xFFFFFFFF  # a keep-mask that keeps every float32 bit
_MANTISSA_BITS = {DataType.BFLOAT8_B: 7, DataType.BFLOAT4_B: 3}


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 → the uint16 patterns of the nearest bfloat16 (ties to even), in the input's shape."""
    rounded = _kernels.round_bfloat16(np.ascontiguousarray(values, dtype=np.float32))
    return np.right_shift(rounded.view(np.uint32), 16).astype(np.uint16).reshape(np.shape(values))


class Bf16Storage:
    """A bfloat16 shard: the uint16 bit patterns, in the shard's shape."""

    __slots__ = ("__weakref__", "_unpacked", "bits")
    dtype = DataType.BFLOAT16

    def __init__(self, bits: np.ndarray) -> None:
        if not isinstance(bits, np.ndarray) or bits.dtype != np.uint16:
            raise TypeError(f"Bf16Storage: expected a uint16 array, got {getattr(bits, 'dtype', type(bits))}")
        self.bits = bits
        self._unpacked = None

    @classmethod
    def from_float32(cls, values: np.ndarray) -> Bf16Storage:
        return cls(_bf16_bits(values))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.bits.shape

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes

    @property
    def writeable(self) -> bool:
        return self.bits.flags.writeable

    def seal(self) -> None:
        self.bits.flags.writeable = False

    def copy(self) -> Bf16Storage:
        return Bf16Storage(self.bits.copy())

    def reshape(self, *shape) -> Bf16Storage:
        return Bf16Storage(self.bits.reshape(*shape))

    def to_float32(self) -> np.ndarray:
        return _kernels.bf16_unpack(self.bits)

    def take_rows(self, rows: np.ndarray) -> np.ndarray:
        """float32 ``[len(rows), last dim]``: the given rows of the shard seen as ``[rows, last dim]`` (a lookup
        table's rows, unpacked alone)."""
        return _kernels.bf16_unpack(self.bits.reshape(-1, _last(self.bits.shape))[rows])

    def unpack_rows_into(self, lo: int, hi: int, out: np.ndarray, keep_mask: int = ALL_BITS) -> np.ndarray:
        """Rows ``lo:hi`` of the shard seen as ``[rows, last dim]``, unpacked into ``out`` (float32, C-contiguous,
        ``[hi - lo, last dim]``), the float32 bits ANDed with ``keep_mask``."""
        rows = self.bits.reshape(-1, _last(self.bits.shape))[lo:hi]
        return _kernels.bf16_unpack(rows, keep_mask, out=out)

    def __setitem__(self, index, values) -> None:
        _forget_unpacked(self)
        self.bits[index] = _bf16_bits(np.asarray(values, dtype=np.float32))

    def __repr__(self) -> str:
        return f"Bf16Storage(shape={list(self.shape)})"


def _nibbles(mantissas: np.ndarray) -> np.ndarray:
    """bfloat4_b: sign|magnitude bytes (sign in bit 7, magnitude ≤ 7) → 4-bit codes, two per byte (even column
    in the low nibble)."""
    codes = ((mantissas >> 4) & 0x8) | (mantissas & 0x7)
    return codes[:, 0::2] | (codes[:, 1::2] << 4)


def _bytes(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_nibbles`."""
    rows, half = packed.shape
    codes = np.empty((rows, half, 2), dtype=np.uint8)
    codes[..., 0] = packed & 0xF
    codes[..., 1] = packed >> 4
    codes = codes.reshape(rows, 2 * half)
    return ((codes & 0x8) << 4) | (codes & 0x7)


class BlockFloatStorage:
    """A bfloat8_b / bfloat4_b shard: ``exponents`` uint8 ``[rows, padded_width / 16]`` and ``mantissas`` uint8
    ``[rows, padded_width]`` (bfloat8_b: sign|magnitude per byte) or ``[rows, padded_width / 2]`` (bfloat4_b: two
    4-bit sign|magnitude codes per byte); rows are all dims but the last, the last dim is padded with zeros to a
    multiple of 32 (the tile width), which never changes a block's exponent."""

    __slots__ = ("__weakref__", "_unpacked", "dtype", "exponents", "mantissas", "shape")

    def __init__(self, dtype: DataType, shape, exponents: np.ndarray, mantissas: np.ndarray) -> None:
        if dtype not in _MANTISSA_BITS:
            raise TypeError(f"BlockFloatStorage: {dtype} is not a block float type")
        rows, padded = _rows_and_padded_width(tuple(shape))
        per_row = _mantissa_bytes(dtype, padded)
        if exponents.dtype != np.uint8 or mantissas.dtype != np.uint8:
            raise ValueError(
                f"BlockFloatStorage: exponents and mantissas must be uint8, got {exponents.dtype} and {mantissas.dtype}"
            )
        if exponents.shape != (rows, padded // BFP_BLOCK) or mantissas.shape != (rows, per_row):
            raise ValueError(
                f"BlockFloatStorage: {dtype.name} {list(shape)} needs exponents {(rows, padded // BFP_BLOCK)} and "
                f"mantissas {(rows, per_row)}, got {exponents.shape} and {mantissas.shape}"
            )
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)
        self.exponents = exponents
        self.mantissas = mantissas
        self._unpacked = None

    @property
    def mantissa_bits(self) -> int:
        return _MANTISSA_BITS[self.dtype]

    @classmethod
    def from_float32(cls, values: np.ndarray, dtype: DataType) -> BlockFloatStorage:
        values = np.asarray(values, dtype=np.float32)
        rows = _rows_and_padded_width(values.shape)[0]
        exps, mants = _pack_rows(values.reshape(rows, _last(values.shape)), dtype)
        return cls(dtype, values.shape, exps, mants)

    @classmethod
    def from_packed(
        cls, dtype: DataType, shape, exponents: np.ndarray, sign_magnitude: np.ndarray
    ) -> BlockFloatStorage:
        """From ``bfp_pack``'s output (one sign|magnitude byte per value), e.g. a tensor file's arrays."""
        if dtype is DataType.BFLOAT4_B:
            sign_magnitude = _nibbles(sign_magnitude)
        return cls(dtype, shape, exponents, sign_magnitude)

    def sign_magnitude(self) -> np.ndarray:
        """One sign|magnitude byte per value, ``[rows, padded_width]`` (``bfp_unpack``'s input)."""
        return self.mantissas if self.dtype is DataType.BFLOAT8_B else _bytes(self.mantissas)

    @property
    def nbytes(self) -> int:
        return self.exponents.nbytes + self.mantissas.nbytes

    @property
    def writeable(self) -> bool:
        return self.mantissas.flags.writeable

    def seal(self) -> None:
        self.exponents.flags.writeable = False
        self.mantissas.flags.writeable = False

    def copy(self) -> BlockFloatStorage:
        return BlockFloatStorage(self.dtype, self.shape, self.exponents.copy(), self.mantissas.copy())

    def reshape(self, *shape) -> BlockFloatStorage:
        """The same blocks under another shape with the same last dim (free); other reshapes re-block the
        values, so they go through float32 and are packed again."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        shape = tuple(int(d) for d in shape)
        if shape.count(-1) == 1:
            known = math.prod(d for d in shape if d != -1)
            shape = tuple(math.prod(self.shape) // known if d == -1 and known else d for d in shape)
        if math.prod(shape) != math.prod(self.shape):
            raise ValueError(f"cannot reshape {list(self.shape)} to {list(shape)}")
        if _last(shape) == _last(self.shape):
            return BlockFloatStorage(self.dtype, shape, self.exponents, self.mantissas)
        return BlockFloatStorage.from_float32(self.to_float32().reshape(shape), self.dtype)

    def to_float32(self) -> np.ndarray:
        rows, padded = _rows_and_padded_width(self.shape)
        width = _last(self.shape)
        if rows * padded == 0:
            return np.zeros(self.shape, dtype=np.float32)
        nibbles = self.dtype is DataType.BFLOAT4_B
        if (
            padded == width
        ):  # unpacked straight into an array that owns its data (views of it name it as base)
            out = np.empty(self.shape, dtype=np.float32)
            _kernels.bfp_unpack_codes(
                self.exponents, self.mantissas, self.mantissa_bits, nibbles, out=out.reshape(rows, padded)
            )
            return out
        flat = _kernels.bfp_unpack_codes(self.exponents, self.mantissas, self.mantissa_bits, nibbles)
        out = np.empty(self.shape, dtype=np.float32)
        out.reshape(rows, width)[...] = flat[:, :width]
        return out

    def take_rows(self, rows: np.ndarray) -> np.ndarray:
        """float32 ``[len(rows), last dim]``: the given rows (all dims but the last flattened), unpacked alone."""
        flat = _kernels.bfp_unpack_codes(
            self.exponents[rows], self.mantissas[rows], self.mantissa_bits, self.dtype is DataType.BFLOAT4_B
        )
        width = _last(self.shape)
        return flat if flat.shape[1] == width else np.ascontiguousarray(flat[:, :width])

    def unpack_rows_into(self, lo: int, hi: int, out: np.ndarray, keep_mask: int = ALL_BITS) -> np.ndarray:
        """Rows ``lo:hi`` (all dims but the last flattened) unpacked into ``out`` (float32, C-contiguous,
        ``[hi - lo, padded width]``: the last dim padded to 32, its padding unpacked as zeros), the float32 bits
        ANDed with ``keep_mask``."""
        return _kernels.bfp_unpack_codes(
            self.exponents[lo:hi],
            self.mantissas[lo:hi],
            self.mantissa_bits,
            self.dtype is DataType.BFLOAT4_B,
            keep_mask,
            out=out,
        )

    def __setitem__(self, index, values) -> None:
        """Write values (quantised as stored). An index that takes whole blocks of rows (every column, or a column
        range starting on a 16-value block boundary and ending on one or at the row's end) packs just those
        blocks (a block never spans two rows); any other index rewrites the shard."""
        if not self.writeable:
            raise ValueError("assignment destination is read-only")
        _forget_unpacked(self)
        selection = _block_selection(self.shape, index)
        if selection is None:
            full = self.to_float32().copy()
            full[index] = values
            exps, mants = _pack_rows(full.reshape(self.exponents.shape[0], -1), self.dtype)
            self.exponents[...] = exps
            self.mantissas[...] = mants
            return
        rows, lo, hi = selection
        block = np.broadcast_to(np.asarray(values, dtype=np.float32), (*rows.shape, hi - lo))
        exps, mants = _pack_rows(block.reshape(-1, hi - lo), self.dtype, align=BFP_BLOCK)
        flat_rows = rows.reshape(-1)
        b0, per_value = lo // BFP_BLOCK, 1 if self.dtype is DataType.BFLOAT8_B else 2
        self.exponents[flat_rows, b0 : b0 + exps.shape[1]] = exps
        self.mantissas[flat_rows, lo // per_value : lo // per_value + mants.shape[1]] = mants

    def __repr__(self) -> str:
        return f"BlockFloatStorage({self.dtype.name}, shape={list(self.shape)})"


Storage = Bf16Storage | BlockFloatStorage


def _last(shape: tuple[int, ...]) -> int:
    return shape[-1] if shape else 1


def _mantissa_bytes(dtype: DataType, width: int) -> int:
    """Bytes of mantissa codes for ``width`` values of a block float: one each (bfloat8_b), two per byte
    (bfloat4_b)."""
    return width if dtype is DataType.BFLOAT8_B else width // 2


def _rows_and_padded_width(shape: tuple[int, ...]) -> tuple[int, int]:
    width = _last(shape)
    return (math.prod(shape[:-1]) if len(shape) > 1 else 1), -(-width // TILE_SIZE) * TILE_SIZE


def _pack_rows(flat: np.ndarray, dtype: DataType, align: int = TILE_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """[rows, width] float32 → (exponents, mantissas) of the rows padded to a multiple of ``align`` (the tile
    width for whole rows, a block for a piece of a row), in the storage's layout."""
    rows, width = flat.shape
    padded = -(-width // align) * align
    if rows * padded == 0:
        return np.zeros((rows, padded // BFP_BLOCK), np.uint8), np.zeros(
            (rows, _mantissa_bytes(dtype, padded)), np.uint8
        )
    if padded != width:
        flat = np.pad(flat, ((0, 0), (0, padded - width)))
    exps, mants = _kernels.bfp_pack(np.ascontiguousarray(flat, dtype=np.float32), _MANTISSA_BITS[dtype])
    return exps, (mants if dtype is DataType.BFLOAT8_B else _nibbles(mants))


def _block_selection(shape: tuple[int, ...], index) -> tuple[np.ndarray, int, int] | None:
    """For an index that takes whole blocks of whole rows: (the flat row numbers, shaped like the selection
    without its last dim; first column; end column). None for any other index."""
    if len(shape) < 1:
        return None
    if not isinstance(index, tuple):
        index = (index,)
    ellipses = [k for k, i in enumerate(index) if i is Ellipsis]
    if len(ellipses) > 1:
        return None
    if ellipses:
        at = ellipses[0]
        fill = len(shape) - (len(index) - 1)
        if fill < 0:
            return None
        index = index[:at] + (slice(None),) * fill + index[at + 1 :]
    if len(index) < len(shape):
        index = index + (slice(None),) * (len(shape) - len(index))
    if len(index) != len(shape) or not isinstance(index[-1], slice):
        return None
    if any(i is None or isinstance(i, (bool, np.bool_)) for i in index):
        return None
    width = shape[-1]
    cols = range(width)[index[-1]]
    if cols.step != 1 or not cols or cols.start % BFP_BLOCK or (cols.stop % BFP_BLOCK and cols.stop != width):
        return None
    rows = np.arange(math.prod(shape[:-1]), dtype=np.intp).reshape(shape[:-1])[index[:-1]]
    return rows, cols.start, cols.stop


def empty(shape, dtype: DataType) -> Storage:
    """A writeable storage of zeros, for a fill to write into."""
    shape = tuple(int(d) for d in shape)
    if dtype is DataType.BFLOAT16:
        return Bf16Storage(np.zeros(shape, dtype=np.uint16))
    rows, padded = _rows_and_padded_width(shape)
    return BlockFloatStorage(
        dtype,
        shape,
        np.zeros((rows, padded // BFP_BLOCK), np.uint8),
        np.zeros((rows, _mantissa_bytes(dtype, padded)), np.uint8),
    )


def constant(shape, value: float, dtype: DataType) -> Storage:
    """Every element ``value`` (already quantised to ``dtype``: a block of equal values keeps them exactly)."""
    shape = tuple(int(d) for d in shape)
    if dtype is DataType.BFLOAT16:
        return Bf16Storage(np.full(shape, _bf16_bits(np.float32(value)), dtype=np.uint16))
    rows, _ = _rows_and_padded_width(shape)
    exps, mants = _pack_rows(np.full((1, _last(shape)), value, dtype=np.float32), dtype)
    return BlockFloatStorage(dtype, shape, np.repeat(exps, rows, axis=0), np.repeat(mants, rows, axis=0))


def pack(values: np.ndarray, dtype: DataType) -> Storage:
    """The storage of a float32 array as a ``dtype`` shard (bfloat16 or a block float)."""
    if dtype is DataType.BFLOAT16:
        return Bf16Storage.from_float32(values)
    return BlockFloatStorage.from_float32(values, dtype)


def unpack_bits_bound(dtype: DataType) -> int:
    """At most how many explicit float32 mantissa bits an unpacked value of ``dtype`` uses (23 minus the
    trailing zero bits of its mantissa field): bfloat16 keeps the top 7 field bits; a block float's magnitude
    has ``m`` bits, so a normal value uses at most ``m − 1`` and a subnormal one (magnitude · 2^(E−127−(m−1))
    below 2^−126, its field the magnitude shifted left by E + 23 − m ≥ 23 − m) at most ``m``."""
    return 7 if dtype is DataType.BFLOAT16 else _MANTISSA_BITS[dtype]


def is_storage(shard) -> bool:
    return isinstance(shard, (Bf16Storage, BlockFloatStorage))


# float32 arrays unpacked for a read, by id: (weakref to the array, its storage). An entry lives as long as its
# array; it lets a shard that an op passes on unchanged (a reshape, a copy to the device) keep its storage, and
# lets numerics know how many mantissa bits the values can use without scanning them.
_UNPACKED: dict[int, tuple[weakref.ref, Storage]] = {}


def unpacked(storage: Storage) -> np.ndarray:
    """A read-only float32 array of the storage's values, remembered (while it lives) as coming from it. While
    an earlier such array is still alive (held by whoever asked for it), the same array is given again, so reads
    of one shard within an op see one array object; once it is dropped, the next read unpacks afresh."""
    previous = storage._unpacked() if storage._unpacked is not None else None
    if previous is not None:
        return previous
    array = storage.to_float32()
    base = array
    while isinstance(base, np.ndarray):
        base.flags.writeable = False
        base = base.base
    key = id(array)

    def forget(ref, key=key):
        if _UNPACKED.get(key, (None,))[0] is ref:
            del _UNPACKED[key]

    ref = weakref.ref(array, forget)
    _UNPACKED[key] = (ref, storage)
    storage._unpacked = ref
    return array


def _forget_unpacked(storage: Storage) -> None:
    """Before a write: the values unpacked so far no longer stand for the storage."""
    ref, storage._unpacked = storage._unpacked, None
    array = ref() if ref is not None else None
    if array is not None and _UNPACKED.get(id(array), (None,))[0] is ref:
        del _UNPACKED[id(array)]


def _registered(array) -> Storage | None:
    entry = _UNPACKED.get(id(array))
    return entry[1] if entry is not None and entry[0]() is array else None


def source_of(array, *, whole: bool = False) -> Storage | None:
    """The storage an array was unpacked from, if it is such an array or a view of one (``whole``: only a view
    of all of its values in order, i.e. a reshape, given back as the storage reshaped)."""
    if not isinstance(array, np.ndarray):
        return None
    found = _registered(array)
    if found is not None:
        return found
    base = array.base
    while isinstance(base, np.ndarray):
        found = _registered(base)
        if found is not None:
            if not whole:
                return found
            if array.size == base.size and array.flags.c_contiguous and base.flags.c_contiguous:
                return found.reshape(array.shape)
            return None
        base = base.base
    return None
