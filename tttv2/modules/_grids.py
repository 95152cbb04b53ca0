"""Core-grid and config arithmetic the resolvers share: how many cores divide a tensor, DRAM-sharded weight
layouts, width-sharded activations, matmul program configs and compute-kernel configs.

Pure integer arithmetic over ttnn config objects; nothing here touches a device. Core counts are always chosen
to divide the tensor in whole tiles, so no shard is ever empty (the emulator checks it, as the kernels do).
"""

from __future__ import annotations

import math

from tttv2 import ttnn

TILE = 32
MAX_GRID_SIDE = 8


def nearest_multiple(x: int, multiple: int) -> int:
    return -(-int(x) // multiple) * multiple


def tiles(n: int) -> int:
    return -(-int(n) // TILE)


def largest_divisor(n: int, limit: int = MAX_GRID_SIDE) -> int:
    """The largest d <= limit dividing n (1 always does)."""
    return next((d for d in range(min(limit, n), 1, -1) if n % d == 0), 1)


def grid_near_32_cores(n_tiles: int) -> ttnn.CoreGrid:
    """A rows×cols grid (each side <= 8) whose core count divides ``n_tiles``, as close to 32 cores as possible."""
    shapes = [(r, c) for r in range(1, 9) for c in range(1, 9) if n_tiles % (r * c) == 0]
    rows, cols = min(shapes, key=lambda rc: (abs(rc[0] * rc[1] - 32), -rc[0] * rc[1], rc[0]))
    return ttnn.CoreGrid(y=rows, x=cols)


def grid_dividing(k_tiles: int, n_tiles: int) -> ttnn.CoreGrid:
    """The largest rows×cols grid (each side <= 8) whose core count divides both ``k_tiles`` and ``n_tiles``."""
    shapes = [
        (r, c) for r in range(1, 9) for c in range(1, 9) if k_tiles % (r * c) == 0 and n_tiles % (r * c) == 0
    ]
    rows, cols = max(shapes, key=lambda rc: (rc[0] * rc[1], -rc[0]))
    return ttnn.CoreGrid(y=rows, x=cols)


def shard_grid(memory_config: ttnn.MemoryConfig) -> ttnn.CoreGrid | None:
    """The rectangle of cores (from (0, 0)) a sharded memory config uses; None when it is not one."""
    spec = memory_config.shard_spec
    if spec is None:
        return None
    box = spec.grid.bounding_box()
    start, end = box.start, box.end
    grid = ttnn.CoreGrid(y=end.y - start.y + 1, x=end.x - start.x + 1)
    if (start.x, start.y) != (0, 0) or grid.num_cores != spec.grid.num_cores():
        return None
    return grid


def width_sharded(rows: int, width: int, grid: ttnn.CoreGrid) -> ttnn.MemoryConfig:
    """L1 width-sharded over ``grid``: each core holds ``rows`` × (width / cores)."""
    return ttnn.create_sharded_memory_config(
        shape=(rows, width // grid.num_cores),
        core_grid=grid,
        strategy=ttnn.ShardStrategy.WIDTH,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def dram_width_sharded(k: int, n: int, dram_banks: int) -> ttnn.MemoryConfig:
    """A [k, n] weight split by columns over as many DRAM banks (<= ``dram_banks``) as divide n in tiles."""
    banks = largest_divisor(tiles(n), dram_banks)
    spec = ttnn.ShardSpec(
        ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(banks - 1, 0))}),
        (k, n // banks),
        ttnn.ShardOrientation.ROW_MAJOR,
    )
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.DRAM, spec)


def dram_sharded_matmul(m: int, k: int, n: int, cores: int):
    """DRAM-sharded matmul: the activation [m, k] is width-sharded over ``cores``; each streams its weight slice."""
    k_tiles_per_core = k // TILE // cores
    return ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(
        in0_block_w=largest_divisor(k_tiles_per_core),
        per_core_M=tiles(m),
        per_core_N=math.ceil(n / TILE / cores),
        fused_activation=None,
    )


def multicast_matmul(m: int, k: int, n: int, grid: tuple[int, int], *, fuse_batch: bool = False):
    """2-D multicast matmul over ``grid`` = (cols, rows): the [m, n] output is cut into cols × rows blocks."""
    cols, rows = grid
    per_core_m = math.ceil(tiles(m) / rows)
    per_core_n = math.ceil(tiles(n) / cols)
    k_tiles = tiles(k)
    return ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(cols, rows),
        in0_block_w=largest_divisor(k_tiles, min(4, max(1, k_tiles // cols))),
        out_subblock_h=1,
        out_subblock_w=largest_divisor(per_core_n, 4),
        per_core_M=per_core_m,
        per_core_N=per_core_n,
        transpose_mcast=False,
        fused_activation=None,
        fuse_batch=fuse_batch,
    )


def prefill_grid(seq_rows: int, n: int) -> tuple[int, int]:
    """(cols, rows) of a prefill matmul: cols divide the output tiles, one row per 32 tokens, at most 8 each."""
    rows = min(max(seq_rows // TILE, 1), MAX_GRID_SIDE)
    return largest_divisor(tiles(n)), largest_divisor(rows)


def compute_kernel_config(fidelity, *, fp32_acc: bool, l1_acc: bool):
    return ttnn.WormholeComputeKernelConfig(
        math_fidelity=fidelity, math_approx_mode=False, fp32_dest_acc_en=fp32_acc, packer_l1_acc=l1_acc
    )


def default_matmul_compute_config():
    """HiFi2, 16-bit accumulation, L1 packer accumulation: the decoder matmuls' default."""
    return compute_kernel_config(ttnn.MathFidelity.HiFi2, fp32_acc=False, l1_acc=True)
