"""Core coordinates and memory configs: validated, value-comparable, hashable metadata."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import InitVar, dataclass, field

from .errors import ValidationError
from .types import TILE_SIZE, BufferType, ShardOrientation, ShardStrategy, TensorMemoryLayout

__all__ = [
    "DRAM_MEMORY_CONFIG",
    "L1_BLOCK_SHARDED_MEMORY_CONFIG",
    "L1_HEIGHT_SHARDED_MEMORY_CONFIG",
    "L1_MEMORY_CONFIG",
    "L1_WIDTH_SHARDED_MEMORY_CONFIG",
    "CoreCoord",
    "CoreGrid",
    "CoreRange",
    "CoreRangeSet",
    "MemoryConfig",
    "ShardSpec",
    "create_sharded_memory_config",
    "num_cores_to_corerangeset",
    "num_cores_to_corerangeset_in_subcoregrids",
]


def _check_int(owner: str, name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{owner}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise ValidationError(f"{owner}: {name} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True, order=True)
class CoreCoord:
    """A Tensix core position: x is the column, y is the row."""

    x: int
    y: int

    def __post_init__(self) -> None:
        _check_int("CoreCoord", "x", self.x)
        _check_int("CoreCoord", "y", self.y)

    def __repr__(self) -> str:
        return f"CoreCoord(x={self.x}, y={self.y})"


@dataclass(frozen=True)
class CoreGrid:
    """A rectangular grid of x columns by y rows starting at (0, 0)."""

    x: int
    y: int

    def __post_init__(self) -> None:
        _check_int("CoreGrid", "x", self.x, 1)
        _check_int("CoreGrid", "y", self.y, 1)

    @property
    def num_cores(self) -> int:
        return self.x * self.y

    def to_core_range_set(self) -> CoreRangeSet:
        return CoreRangeSet({CoreRange(CoreCoord(0, 0), CoreCoord(self.x - 1, self.y - 1))})


@dataclass(frozen=True)
class CoreRange:
    """An inclusive rectangle of cores from ``start`` to ``end``."""

    start: CoreCoord
    end: CoreCoord

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if isinstance(value, tuple) and len(value) == 2:
                object.__setattr__(self, name, CoreCoord(*value))
            elif not isinstance(value, CoreCoord):
                raise ValidationError(f"CoreRange: {name} must be a CoreCoord, got {value!r}")
        if self.end.x < self.start.x or self.end.y < self.start.y:
            raise ValidationError(f"CoreRange: end {self.end} must not be before start {self.start}")

    def num_cores(self) -> int:
        return (self.end.x - self.start.x + 1) * (self.end.y - self.start.y + 1)

    def grid_size(self) -> CoreCoord:
        return CoreCoord(self.end.x - self.start.x + 1, self.end.y - self.start.y + 1)

    def cores(self, row_wise: bool = True) -> list[CoreCoord]:
        xs = range(self.start.x, self.end.x + 1)
        ys = range(self.start.y, self.end.y + 1)
        if row_wise:
            return [CoreCoord(x, y) for y in ys for x in xs]
        return [CoreCoord(x, y) for x in xs for y in ys]

    def intersects(self, other: CoreRange) -> bool:
        return not (
            other.start.x > self.end.x
            or other.end.x < self.start.x
            or other.start.y > self.end.y
            or other.end.y < self.start.y
        )

    def __repr__(self) -> str:
        return f"CoreRange(start={self.start!r}, end={self.end!r})"


@dataclass(frozen=True)
class CoreRangeSet:
    """A set of non-overlapping core ranges (order-insensitive for comparison and hashing)."""

    ranges: frozenset[CoreRange] = field(default_factory=frozenset)

    def __init__(self, ranges: Iterable[CoreRange] | CoreRange = ()) -> None:
        if isinstance(ranges, CoreRange):
            ranges = [ranges]
        items = list(ranges)
        for item in items:
            if not isinstance(item, CoreRange):
                raise ValidationError(f"CoreRangeSet: expected CoreRange items, got {item!r}")
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                if a.intersects(b):
                    raise ValidationError(f"CoreRangeSet: ranges {a} and {b} overlap")
        object.__setattr__(self, "ranges", frozenset(items))

    def num_cores(self) -> int:
        return sum(r.num_cores() for r in self.ranges)

    def bounding_box(self) -> CoreRange:
        if not self.ranges:
            raise ValidationError("CoreRangeSet.bounding_box: the set is empty")
        return CoreRange(
            CoreCoord(min(r.start.x for r in self.ranges), min(r.start.y for r in self.ranges)),
            CoreCoord(max(r.end.x for r in self.ranges), max(r.end.y for r in self.ranges)),
        )

    def cores(self, row_wise: bool = True) -> list[CoreCoord]:
        """All cores, sorted row by row (or column by column)."""
        cores = [c for r in self.ranges for c in r.cores()]
        key = (lambda c: (c.y, c.x)) if row_wise else (lambda c: (c.x, c.y))
        return sorted(cores, key=key)

    def contains(self, core: CoreCoord) -> bool:
        return any(r.start.x <= core.x <= r.end.x and r.start.y <= core.y <= r.end.y for r in self.ranges)

    def __repr__(self) -> str:
        inner = ", ".join(repr(r) for r in sorted(self.ranges, key=lambda r: (r.start.y, r.start.x)))
        return f"CoreRangeSet({{{inner}}})"


def _as_core_range_set(owner: str, grid) -> CoreRangeSet:
    if isinstance(grid, CoreRangeSet):
        return grid
    if isinstance(grid, CoreRange):
        return CoreRangeSet({grid})
    if isinstance(grid, CoreGrid):
        return grid.to_core_range_set()
    raise ValidationError(f"{owner}: grid must be a CoreRangeSet, CoreRange or CoreGrid, got {grid!r}")


@dataclass(frozen=True)
class ShardSpec:
    """Which cores hold the shards and the (height, width) of one shard, in elements.

    ``halo`` is the older API's fourth argument (``ShardSpec(grid, shape, orientation, False)`` in tt_lib-era
    model configs): only ``False`` is accepted (halo shards belong to convolutions, not emulated) and it is not
    kept."""

    grid: CoreRangeSet
    shape: tuple[int, int]
    orientation: ShardOrientation = ShardOrientation.ROW_MAJOR
    halo: InitVar[bool] = False

    def __post_init__(self, halo: bool) -> None:
        if halo is not False:
            raise ValidationError(
                f"ShardSpec: halo must be False (halo shards are not emulated), got {halo!r}"
            )
        object.__setattr__(self, "grid", _as_core_range_set("ShardSpec", self.grid))
        shape = tuple(self.shape)
        if len(shape) != 2:
            raise ValidationError(f"ShardSpec: shape must be (height, width), got {self.shape!r}")
        for dim in shape:
            _check_int("ShardSpec", "shape", dim, 1)
        object.__setattr__(self, "shape", shape)
        if not isinstance(self.orientation, ShardOrientation):
            raise ValidationError(
                f"ShardSpec: orientation must be a ShardOrientation, got {self.orientation!r}"
            )

    def num_cores(self) -> int:
        return self.grid.num_cores()


@dataclass(frozen=True)
class MemoryConfig:
    """Where a tensor lives (DRAM or L1) and how it is spread (interleaved or sharded)."""

    memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED
    buffer_type: BufferType = BufferType.DRAM
    shard_spec: ShardSpec | None = None

    def __init__(
        self,
        memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED,
        buffer_type: BufferType = BufferType.DRAM,
        shard_spec: ShardSpec | None = None,
        *,
        layout: TensorMemoryLayout | None = None,
    ) -> None:
        if layout is not None:
            memory_layout = layout
        if not isinstance(memory_layout, TensorMemoryLayout):
            raise ValidationError(
                f"MemoryConfig: memory_layout must be a TensorMemoryLayout, got {memory_layout!r}"
            )
        if not isinstance(buffer_type, BufferType):
            raise ValidationError(f"MemoryConfig: buffer_type must be a BufferType, got {buffer_type!r}")
        if shard_spec is not None and not isinstance(shard_spec, ShardSpec):
            raise ValidationError(f"MemoryConfig: shard_spec must be a ShardSpec or None, got {shard_spec!r}")
        if memory_layout is TensorMemoryLayout.INTERLEAVED and shard_spec is not None:
            raise ValidationError("MemoryConfig: an INTERLEAVED memory config cannot have a shard_spec")
        object.__setattr__(self, "memory_layout", memory_layout)
        object.__setattr__(self, "buffer_type", buffer_type)
        object.__setattr__(self, "shard_spec", shard_spec)

    def is_sharded(self) -> bool:
        return self.memory_layout is not TensorMemoryLayout.INTERLEAVED

    @property
    def interleaved(self) -> bool:
        return not self.is_sharded()

    def __repr__(self) -> str:
        return (
            f"MemoryConfig(memory_layout={self.memory_layout!r}, buffer_type={self.buffer_type!r}, "
            f"shard_spec={self.shard_spec!r})"
        )


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)
# shard-spec-less sharded configs: the op that produces the tensor chooses the grid
L1_WIDTH_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.WIDTH_SHARDED, BufferType.L1)
L1_HEIGHT_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.HEIGHT_SHARDED, BufferType.L1)
L1_BLOCK_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.BLOCK_SHARDED, BufferType.L1)


def _round_up(value: int, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def create_sharded_memory_config(
    shape: Sequence[int],
    core_grid: CoreGrid | CoreRangeSet,
    strategy: ShardStrategy,
    orientation: ShardOrientation | None = None,
    use_height_and_width_as_shard_shape: bool = False,
    halo: bool = False,
    tile_layout: bool = False,
) -> MemoryConfig:
    """Build an L1 sharded memory config the way ``ttnn.create_sharded_memory_config`` does.

    ``shape`` is the tensor shape: the last dim is the width, the product of the others the height, and the
    shard shape is that 2-D extent divided exactly over the grid (HEIGHT: all cores, WIDTH: all cores, BLOCK:
    rows × columns, swapped for COL_MAJOR); a grid that does not divide it is rejected, as in ttnn. With
    ``use_height_and_width_as_shard_shape`` the last two dims of ``shape`` are the shard shape itself
    ((width, height) for COL_MAJOR, as ttnn does). ``tile_layout=True`` selects the lenient rounding of
    ttnn's ``create_sharded_memory_config_`` (shards rounded up to whole tiles, the last one padded).
    ``halo`` is accepted for older callers and has no effect.
    """
    owner = "create_sharded_memory_config"
    if not isinstance(strategy, ShardStrategy):
        raise ValidationError(f"{owner}: strategy must be a ttnn.ShardStrategy, got {strategy!r}")
    orientation = orientation or ShardOrientation.ROW_MAJOR
    if not isinstance(orientation, ShardOrientation):
        raise ValidationError(f"{owner}: orientation must be a ttnn.ShardOrientation, got {orientation!r}")
    shape = [int(s) for s in shape]
    if len(shape) < 2:
        raise ValidationError(f"{owner}: shape must have at least 2 dims (height, width), got {shape}")
    grid = _as_core_range_set(owner, core_grid)
    num_cores = grid.num_cores()
    layout = {
        ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
        ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
        ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED,
    }[strategy]
    col_major = orientation is ShardOrientation.COL_MAJOR
    if use_height_and_width_as_shard_shape:
        shard = (shape[-1], shape[-2]) if col_major else (shape[-2], shape[-1])
    else:
        if not tile_layout and not isinstance(core_grid, CoreGrid):
            raise ValidationError(
                f"{owner}: a CoreRangeSet grid needs use_height_and_width_as_shard_shape=True "
                f"(the shard shape cannot be derived from it), got {core_grid!r}"
            )
        width = shape[-1]
        height = math.prod(shape[:-1])
        box = grid.bounding_box().grid_size()
        cols, rows = box.x, box.y
        if col_major:
            cols, rows = rows, cols
        parts = {
            ShardStrategy.HEIGHT: (num_cores, 1),
            ShardStrategy.WIDTH: (1, num_cores),
            ShardStrategy.BLOCK: (rows, cols),
        }[strategy]
        if tile_layout:
            split_h = strategy is not ShardStrategy.WIDTH
            split_w = strategy is not ShardStrategy.HEIGHT
            shard = (
                _round_up(math.ceil(height / parts[0]), TILE_SIZE) if split_h else height,
                _round_up(math.ceil(width / parts[1]), TILE_SIZE) if split_w else width,
            )
        else:
            for extent, count, what in ((height, parts[0], "height"), (width, parts[1], "width")):
                if extent % count:
                    raise ValidationError(
                        f"{owner}: the tensor {what} {extent} (shape {shape}) does not divide over {count} "
                        f"cores for {strategy.name} sharding on {core_grid!r}"
                    )
            shard = (height // parts[0], width // parts[1])
    return MemoryConfig(layout, BufferType.L1, ShardSpec(grid, shard, orientation))


def num_cores_to_corerangeset(
    target_num_cores: int, grid_size: CoreCoord | CoreGrid | Sequence[int], row_wise: bool = False
) -> CoreRangeSet:
    """The first ``target_num_cores`` cores of a grid, filled row by row (or column by column)."""
    owner = "num_cores_to_corerangeset"
    _check_int(owner, "target_num_cores", target_num_cores, 1)
    if isinstance(grid_size, (CoreCoord, CoreGrid)):
        gx, gy = grid_size.x, grid_size.y
    else:
        gx, gy = (int(v) for v in grid_size)
    if target_num_cores > gx * gy:
        raise ValidationError(
            f"{owner}: target_num_cores {target_num_cores} exceeds the {gx}x{gy} grid ({gx * gy} cores)"
        )
    ranges = []
    if row_wise:
        full_rows, rem = divmod(target_num_cores, gx)
        if full_rows:
            ranges.append(CoreRange(CoreCoord(0, 0), CoreCoord(gx - 1, full_rows - 1)))
        if rem:
            ranges.append(CoreRange(CoreCoord(0, full_rows), CoreCoord(rem - 1, full_rows)))
    else:
        full_cols, rem = divmod(target_num_cores, gy)
        if full_cols:
            ranges.append(CoreRange(CoreCoord(0, 0), CoreCoord(full_cols - 1, gy - 1)))
        if rem:
            ranges.append(CoreRange(CoreCoord(full_cols, 0), CoreCoord(full_cols, rem - 1)))
    return CoreRangeSet(ranges)


def subgrid_cores(
    start_core: CoreCoord, target_num_cores: int, sub_core_grids: CoreRangeSet, row_wise: bool = False
) -> list[CoreCoord]:
    """The cores :func:`num_cores_to_corerangeset_in_subcoregrids` takes, in the order it takes them."""
    owner = "num_cores_to_corerangeset_in_subcoregrids"
    _check_int(owner, "target_num_cores", target_num_cores, 1)
    if not isinstance(start_core, CoreCoord):
        raise ValidationError(f"{owner}: start_core must be a CoreCoord, got {start_core!r}")
    grids = _as_core_range_set(owner, sub_core_grids)
    order = []
    # a CoreRangeSet keeps no order: the ranges are walked by their start core (row, then column)
    for rng in sorted(grids.ranges, key=lambda r: (r.start.y, r.start.x)):
        xs = range(rng.start.x, rng.end.x + 1)
        ys = range(rng.start.y, rng.end.y + 1)
        if row_wise:
            order += [CoreCoord(x, y) for y in ys for x in xs]
        else:
            order += [CoreCoord(x, y) for x in xs for y in ys]
    if start_core not in order:
        raise ValidationError(f"{owner}: start_core {start_core!r} is not in sub_core_grids {grids!r}")
    taken = order[order.index(start_core) :][:target_num_cores]
    if len(taken) < target_num_cores:
        raise ValidationError(
            f"{owner}: only {len(taken)} cores of sub_core_grids follow {start_core!r}, {target_num_cores} asked"
        )
    return taken


def num_cores_to_corerangeset_in_subcoregrids(
    start_core: CoreCoord, target_num_cores: int, sub_core_grids: CoreRangeSet, row_wise: bool = False
) -> CoreRangeSet:
    """``target_num_cores`` cores taken in order from ``start_core`` through the ranges of ``sub_core_grids`` (each
    range row by row with ``row_wise``, else column by column; the ranges by their start core, row then column,
    since a CoreRangeSet keeps no order), as single-core ranges. ``start_core`` must lie in one of the ranges,
    and enough cores must follow it."""
    taken = subgrid_cores(start_core, target_num_cores, sub_core_grids, row_wise)
    return CoreRangeSet([CoreRange(c, c) for c in taken])
