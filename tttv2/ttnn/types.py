"""Enums and small value types of the ttnn API: data types, layouts, buffer kinds, fidelities, topologies."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ROW_MAJOR_LAYOUT",
    "TILE_LAYOUT",
    "TILE_SIZE",
    "Arch",
    "BcastOpDim",
    "BcastOpMath",
    "BufferType",
    "DataType",
    "Layout",
    "MathFidelity",
    "ReduceType",
    "ShardOrientation",
    "ShardStrategy",
    "StorageType",
    "TensorMemoryLayout",
    "Topology",
    "UnaryOpType",
    "UnaryWithParam",
    "bfloat4_b",
    "bfloat8_b",
    "bfloat16",
    "float32",
    "int32",
    "uint8",
    "uint16",
    "uint32",
]

TILE_SIZE = 32


class _NamedEnum(enum.Enum):
    """Enum whose repr matches ttnn's (``DataType.BFLOAT16``)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    __str__ = __repr__


class DataType(_NamedEnum):
    """Element types; ``bytes_per_tile`` is what one 32×32 tile occupies in device memory."""

    BFLOAT16 = 0
    FLOAT32 = 1
    UINT32 = 2
    BFLOAT8_B = 3
    BFLOAT4_B = 4
    UINT8 = 5
    UINT16 = 6
    INT32 = 7

    @property
    def is_float(self) -> bool:
        return self in (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B, DataType.BFLOAT4_B)

    @property
    def is_block_float(self) -> bool:
        return self in (DataType.BFLOAT8_B, DataType.BFLOAT4_B)

    @property
    def is_packed(self) -> bool:
        """Whether shards of this type are held packed in the device format (a ``storage`` object: bfloat16 and
        the block floats) rather than as a numpy array of :attr:`numpy_dtype`."""
        return self is DataType.BFLOAT16 or self.is_block_float

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of a shard's values as ops see them: float32 for the float types (holding values exactly
        representable in the device type; bfloat16 and the block floats are held packed, see :attr:`is_packed`,
        and unpacked to float32 for reads), integer types as themselves."""
        return np.dtype(_STORAGE[self])

    def element_bytes(self, layout: Layout) -> float:
        """Average bytes per element on device (block floats include their shared exponents)."""
        if self.is_block_float:
            if layout is not Layout.TILE:
                raise ValueError(f"{self} only exists in TILE layout")
            return _BFP_TILE_BYTES[self] / (TILE_SIZE * TILE_SIZE)
        return float(_DEVICE_BYTES[self])


_STORAGE = {
    DataType.BFLOAT16: np.float32,
    DataType.FLOAT32: np.float32,
    DataType.UINT32: np.uint32,
    DataType.BFLOAT8_B: np.float32,
    DataType.BFLOAT4_B: np.float32,
    DataType.UINT8: np.uint8,
    DataType.UINT16: np.uint16,
    DataType.INT32: np.int32,
}
# bytes per element on device (bfloat16 is stored as float32 on the host but takes 2 bytes on device)
_DEVICE_BYTES = {
    DataType.BFLOAT16: 2,
    DataType.FLOAT32: 4,
    DataType.UINT32: 4,
    DataType.UINT8: 1,
    DataType.UINT16: 2,
    DataType.INT32: 4,
}
# one tile: 1024 sign|mantissa fields (8 or 4 bits) + 64 shared exponents (one per 16-value face row)
_BFP_TILE_BYTES = {DataType.BFLOAT8_B: 1024 + 64, DataType.BFLOAT4_B: 512 + 64}

bfloat16 = DataType.BFLOAT16
float32 = DataType.FLOAT32
uint32 = DataType.UINT32
bfloat8_b = DataType.BFLOAT8_B
bfloat4_b = DataType.BFLOAT4_B
uint8 = DataType.UINT8
uint16 = DataType.UINT16
int32 = DataType.INT32


class Layout(_NamedEnum):
    ROW_MAJOR = 0
    TILE = 1


ROW_MAJOR_LAYOUT = Layout.ROW_MAJOR
TILE_LAYOUT = Layout.TILE


class StorageType(_NamedEnum):
    """Where a tensor's data lives. As in current ttnn (``ttnn/api/ttnn/tensor/types.hpp``), host tensors are
    HOST whether they hold one buffer or one per device; there is no separate multi-device host storage."""

    HOST = 0
    DEVICE = 1


class BufferType(_NamedEnum):
    DRAM = 0
    L1 = 1


class TensorMemoryLayout(_NamedEnum):
    INTERLEAVED = 0
    HEIGHT_SHARDED = 2
    WIDTH_SHARDED = 3
    BLOCK_SHARDED = 4


class ShardOrientation(_NamedEnum):
    ROW_MAJOR = 0
    COL_MAJOR = 1


class ShardStrategy(_NamedEnum):
    HEIGHT = 0
    WIDTH = 1
    BLOCK = 2


class MathFidelity(_NamedEnum):
    """How many multiplier passes the FPU makes; see docs/numerics.md for the emulated effect."""

    LoFi = 0
    HiFi2 = 2
    HiFi3 = 3
    HiFi4 = 4


class Topology(_NamedEnum):
    Ring = 0
    Linear = 1
    Mesh = 2


class ReduceType(_NamedEnum):
    Sum = 0
    Mean = 1
    Max = 2
    Min = 3


class BcastOpMath(_NamedEnum):
    """``ttnn.bcast``'s arithmetic."""

    ADD = 0
    SUB = 1
    MUL = 2


class BcastOpDim(_NamedEnum):
    """Which dims of ``ttnn.bcast``'s second operand are broadcast: its first row (H), first column (W) or first
    element (HW) of each 32 × 32 tile."""

    H = 0
    W = 1
    HW = 2


class Arch(_NamedEnum):
    GRAYSKULL = 1
    WORMHOLE_B0 = 2
    BLACKHOLE = 3


class UnaryOpType(_NamedEnum):
    SILU = 0
    GELU = 1
    RELU = 2
    SIGMOID = 3
    EXP = 4
    TANH = 5
    IDENTITY = 6
    RECIP = 7
    RSQRT = 8
    SQRT = 9
    NEG = 10


@dataclass(frozen=True)
class UnaryWithParam:
    """A fused activation: op type plus optional scalar parameter (e.g. GELU approximation flag)."""

    op_type: UnaryOpType
    param: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.op_type, UnaryOpType):
            raise TypeError(f"UnaryWithParam: op_type must be a ttnn.UnaryOpType, got {self.op_type!r}")
