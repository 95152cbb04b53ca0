"""``ttnn.matmul`` / ``ttnn.linear``: batched matmul with program-config validation and the fidelity model.

Program configs are checked the way the hardware kernels require: the grid × per-core block must cover the
output tiles, ``in0_block_w`` must divide K in tiles, subblocks must divide blocks, DRAM-sharded matmuls need a
width-sharded L1 activation. The arithmetic follows ``tttv2.ttnn.numerics`` (fidelity truncation, bf16
accumulation between K blocks unless ``fp32_dest_acc_en``).
"""

from __future__ import annotations

import math

import numpy as np

from ..device import SubDeviceId
from ..errors import op_error
from ..memory import (
    DRAM_MEMORY_CONFIG,
    CoreCoord,
    CoreGrid,
    CoreRange,
    CoreRangeSet,
    MemoryConfig,
    ShardSpec,
    num_cores_to_corerangeset,
)
from ..numerics import fidelity_bits, matmul_accumulate, matmul_stored, stored_weight_fits, truncate_mantissa
from ..placement import PlacementReplicate, PlacementShard, TensorTopology
from ..program_configs import (
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig,
    MinimalMatmulConfig,
)
from ..tensor import Tensor
from ..types import (
    TILE_SIZE,
    BufferType,
    DataType,
    Layout,
    ShardOrientation,
    TensorMemoryLayout,
    UnaryOpType,
    UnaryWithParam,
)
from ._common import (
    activation_fn,
    check_memory_config,
    check_output_mem_config,
    default_compute_config,
    device_grid,
    expect,
    expect_tensor,
    map_shards,
    output_like,
    same_mesh,
    ttnn_op,
)
from .data_movement import to_layout
from .eltwise import _write_output
from .prefetch import GlobalCircularBuffer

__all__ = ["linear", "matmul"]
__experimental__ = ["group_attn_matmul", "minimal_matmul"]
# the tt_lib era's ``ttnn.experimental.operations.primary`` (assembled in ``tttv2.ttnn._compat``): (name there,
# function here)
__primary__ = [("matmul", "primary_matmul"), ("matmul_1d", "matmul_1d")]
__transformer__: list[str] = []

_FLOATS = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B, DataType.BFLOAT4_B)
_PROGRAM_CONFIGS = (
    MatmulMultiCoreReuseProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
)


def _tiles(n: int) -> int:
    return -(-n // TILE_SIZE)


def _largest_divisor(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def _one_block_per_core(op, cfg, blocks_m, blocks_n, cores, mt, nt, grid) -> CoreRangeSet:
    """The cores of a config that deals its output blocks one per core, in row order (1-D multicast and reuse):
    refused when there are more blocks than cores."""
    expect(
        blocks_m * blocks_n <= cores,
        op,
        "program_config",
        f"at most {cores} output blocks of {cfg.per_core_M}x{cfg.per_core_N} tiles for a {mt}x{nt}-tile output",
        f"{blocks_m * blocks_n} blocks",
    )
    return num_cores_to_corerangeset(max(blocks_m * blocks_n, 1), grid, row_wise=True)


def _validate_program_config(
    op: str, cfg, a: Tensor, m_rows: int, k: int, n: int, batch: int, device
) -> tuple[int, object]:
    """Check ``cfg`` against the problem; returns (in0_block_w, output shard grid or None)."""
    kt, nt = _tiles(k), _tiles(n)
    grid_limit = device.compute_with_storage_grid_size()
    if isinstance(cfg, MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig):
        mem = a.memory_config()
        expect(
            mem is not None
            and mem.memory_layout is TensorMemoryLayout.WIDTH_SHARDED
            and mem.buffer_type is BufferType.L1,
            op,
            "input_tensor_a.memory_config",
            "an L1 WIDTH_SHARDED activation for MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig",
            mem,
        )
        grid = mem.shard_spec.grid
        cores = grid.num_cores()
        mt = _tiles(m_rows) * batch
        expect(cfg.per_core_M >= mt, op, "program_config.per_core_M", f">= {mt} (M in tiles)", cfg.per_core_M)
        expect(
            cfg.per_core_N * cores >= nt,
            op,
            "program_config.per_core_N",
            f"per_core_N × {cores} cores >= {nt} (N in tiles)",
            cfg.per_core_N,
        )
        k_per_core = _tiles(mem.shard_spec.shape[1])
        expect(
            k_per_core % cfg.in0_block_w == 0,
            op,
            "program_config.in0_block_w",
            f"a divisor of the {k_per_core} K tiles each core holds",
            cfg.in0_block_w,
        )
        return cfg.in0_block_w, grid
    # the multicast / reuse family
    grid = cfg.compute_with_storage_grid_size
    expect(
        grid.x <= grid_limit.x and grid.y <= grid_limit.y,
        op,
        "program_config.compute_with_storage_grid_size",
        f"a grid within the device's {grid_limit.x}x{grid_limit.y} cores",
        f"{grid.x}x{grid.y}",
    )
    expect(
        kt % cfg.in0_block_w == 0,
        op,
        "program_config.in0_block_w",
        f"a divisor of K in tiles ({kt})",
        cfg.in0_block_w,
    )
    fuse_batch = getattr(cfg, "fuse_batch", True)
    mt = _tiles(m_rows) * (batch if fuse_batch else 1)
    blocks_m = -(-mt // cfg.per_core_M)
    blocks_n = -(-nt // cfg.per_core_N)
    if isinstance(cfg, MatmulMultiCoreReuseMultiCast1DProgramConfig):
        cores = grid.x * grid.y
        if cfg.mcast_in0:
            expect(
                cfg.per_core_M >= mt,
                op,
                "program_config.per_core_M",
                f">= {mt} (M in tiles; mcast_in0 keeps all of M on every core)",
                cfg.per_core_M,
            )
        else:
            expect(
                cfg.per_core_N >= nt,
                op,
                "program_config.per_core_N",
                f">= {nt} (N in tiles; mcast_in1 keeps all of N on every core)",
                cfg.per_core_N,
            )
        return cfg.in0_block_w, _one_block_per_core(op, cfg, blocks_m, blocks_n, cores, mt, nt, grid)
    if isinstance(cfg, MatmulMultiCoreReuseProgramConfig):
        # the batched reuse matmul (no multicast) deals its (B * Mt / per_core_M) * (Nt / per_core_N) output blocks
        # to the grid's cores one each, in row order (tt-metal's bmm "reuse optimized" program); the Llama-2-70B
        # T3000 attention rotates 32 users' heads so, one user per core of an 8x4 grid
        cores = grid.x * grid.y
        return cfg.in0_block_w, _one_block_per_core(op, cfg, blocks_m, blocks_n, cores, mt, nt, grid)
    rows, cols = (grid.x, grid.y) if getattr(cfg, "transpose_mcast", False) else (grid.y, grid.x)
    expect(
        blocks_m <= rows and blocks_n <= cols,
        op,
        "program_config",
        f"a {cols}x{rows} grid of {cfg.per_core_M}x{cfg.per_core_N}-tile blocks covering the {mt}x{nt}-tile output",
        f"{blocks_n}x{blocks_m} blocks needed",
    )
    return cfg.in0_block_w, CoreGrid(x=max(blocks_n, 1), y=max(blocks_m, 1)) if not getattr(
        cfg, "transpose_mcast", False
    ) else CoreGrid(x=max(blocks_m, 1), y=max(blocks_n, 1))


def _activation(op: str, activation, cfg):
    fused = getattr(cfg, "fused_activation", None) if cfg is not None else None
    if activation is not None and fused is not None:
        raise op_error(
            op,
            "activation",
            "either activation= or program_config.fused_activation, not both",
            repr(activation),
        )
    act = activation if activation is not None else fused
    if act is None:
        return None
    if isinstance(act, str):
        name = act.upper()
        if name not in UnaryOpType.__members__:
            raise op_error(
                op, "activation", "one of " + ", ".join(m.lower() for m in UnaryOpType.__members__), repr(act)
            )
        act = UnaryWithParam(UnaryOpType[name])
    return activation_fn(act, op)


def _matmul(
    op: str,
    a: Tensor,
    b: Tensor,
    *,
    bias: Tensor | None,
    transpose_a: bool,
    transpose_b: bool,
    memory_config: MemoryConfig | None,
    dtype: DataType | None,
    program_config,
    compute_kernel_config,
    core_grid,
    activation,
) -> Tensor:
    expect_tensor(op, "input_tensor_a", a, dtypes=_FLOATS, layouts=(Layout.TILE,))
    expect_tensor(op, "input_tensor_b", b, dtypes=_FLOATS, layouts=(Layout.TILE,))
    if bias is not None:
        expect_tensor(op, "bias", bias, dtypes=_FLOATS, layouts=(Layout.TILE,))
    device = same_mesh(op, input_tensor_a=a, input_tensor_b=b, bias=bias)
    expect(len(a.shape) >= 2, op, "input_tensor_a rank", ">= 2", len(a.shape))
    expect(len(b.shape) >= 2, op, "input_tensor_b rank", ">= 2", len(b.shape))
    a_shape = list(a.shape)
    b_shape = list(b.shape)
    if transpose_a:
        a_shape[-1], a_shape[-2] = a_shape[-2], a_shape[-1]
    if transpose_b:
        b_shape[-1], b_shape[-2] = b_shape[-2], b_shape[-1]
    m_rows, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    expect(
        b_shape[-2] == k,
        op,
        "input_tensor_b",
        f"inner dim {k} (input_tensor_a is {list(a.shape)})",
        f"{list(b.shape)}",
    )
    try:
        batch_shape = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        raise op_error(
            op, "input_tensor_b", f"batch dims broadcastable with {a_shape[:-2]}", b_shape[:-2]
        ) from None
    batch = math.prod(batch_shape) if batch_shape else 1
    if core_grid is not None:
        expect(
            isinstance(core_grid, (CoreGrid, CoreRangeSet)),
            op,
            "core_grid",
            "a ttnn.CoreGrid",
            repr(core_grid),
        )
        limit = device.compute_with_storage_grid_size()
        if isinstance(core_grid, CoreGrid):
            expect(
                core_grid.x <= limit.x and core_grid.y <= limit.y,
                op,
                "core_grid",
                f"a grid within {limit.x}x{limit.y}",
                f"{core_grid.x}x{core_grid.y}",
            )
    shard_grid = None
    if program_config is not None:
        expect(
            isinstance(program_config, _PROGRAM_CONFIGS),
            op,
            "program_config",
            "a matmul program config",
            type(program_config).__name__,
        )
        in0_block_w, shard_grid = _validate_program_config(op, program_config, a, m_rows, k, n, batch, device)
    else:
        in0_block_w = _largest_divisor(_tiles(k), 8)
    compute = default_compute_config(compute_kernel_config, op)
    act = _activation(op, activation, program_config)
    if bias is not None:
        expect(bias.shape[-1] == n, op, "bias", f"last dim {n}", list(bias.shape))
        expect(
            all(d == 1 for d in bias.shape[:-2]),
            op,
            "bias",
            "leading dims of 1 ([1, 1, rows, N] or [N])",
            list(bias.shape),
        )
    k_block = in0_block_w * TILE_SIZE

    a_bits, b_bits = fidelity_bits(compute.math_fidelity)

    def run(x, w, *rest):
        if transpose_a:
            x = np.swapaxes(x, -1, -2)
        x = truncate_mantissa(np.ascontiguousarray(x), a_bits)
        if stored_weight_fits(w, transpose_b):  # unpacked block by block into a reused buffer
            out = matmul_stored(x, w, k_block, compute.fp32_dest_acc_en, b_bits)
        else:
            if transpose_b:
                w = np.swapaxes(w, -1, -2)
            w = truncate_mantissa(np.ascontiguousarray(w), b_bits)
            out = matmul_accumulate(x, w, k_block, compute.fp32_dest_acc_en)
        return _finish(out, *rest)

    def _finish(out, *rest):
        if rest:
            bias_rows = rest[0].reshape(-1, n)
            out += bias_rows[:1] if bias_rows.shape[0] != out.shape[-2] else bias_rows  # out is a fresh array
        if act is not None:
            with np.errstate(over="ignore"):
                out = act(out)
        return out.astype(np.float32, copy=False)

    weights = b.stored_shards(op)
    if all(stored_weight_fits(w, transpose_b) for w in weights):
        # the weight is read from its storage (never unpacked whole); the other operands as float32
        xs = a.shards(op)
        extra = [bias.shards(op)] if bias is not None else []
        shards = [run(xs[i], weights[i], *(e[i] for e in extra)) for i in range(len(weights))]
    else:
        shards = map_shards(run, a, b, *([bias] if bias is not None else []))
    out_dtype = dtype if dtype is not None else a.dtype
    mem = (
        memory_config if memory_config is not None else DRAM_MEMORY_CONFIG
    )  # ttnn's default output placement
    if isinstance(mem, MemoryConfig) and mem.is_sharded():  # a bad config is refused by output_like
        if isinstance(program_config, MatmulMultiCoreReuseMultiCast1DProgramConfig):
            mem = _one_d_output_config(mem, program_config, shard_grid)
        elif isinstance(
            program_config, (MatmulMultiCoreReuseMultiCastProgramConfig, MatmulMultiCoreReuseProgramConfig)
        ):
            mem = _blocked_output_config(op, mem, program_config, a, b, _tiles(m_rows) * batch, _tiles(n))
    topology = _output_topology(a, b)
    return output_like(
        op,
        shards,
        a,
        dtype=out_dtype,
        layout=Layout.TILE,
        memory_config=mem,
        shard_grid=shard_grid,
        topology=topology,
    )


def _one_d_output_config(mem: MemoryConfig, cfg, grid: CoreRangeSet) -> MemoryConfig:
    """A 1D program config decides its sharded output's spec, as ttnn's matmul does (its output spec, of every era
    from the tt_lib one through today's, which logs "Using computed config" when a given spec differs): one
    ``per_core_M × per_core_N``-tile block per core of the first blocks' cores of the grid, row by row, ROW_MAJOR.
    Falcon-40B's decode QKV output config gives a ``(32, 144)`` shard that the 8 blocks of 5 tiles replace."""
    spec = ShardSpec(
        grid, (cfg.per_core_M * TILE_SIZE, cfg.per_core_N * TILE_SIZE), ShardOrientation.ROW_MAJOR
    )
    return MemoryConfig(mem.memory_layout, mem.buffer_type, spec)


def _blocked_output_config(
    op: str, mem: MemoryConfig, cfg, a: Tensor, b: Tensor, mt: int, nt: int
) -> MemoryConfig:
    """The 2D multicast and the reuse program configs decide a sharded output's spec too, as ttnn's matmul does
    (its output spec; "Using computed config" when a given spec differs): shards of ``per_core_M × per_core_N``
    tiles, one per output block of the whole (batch-fused, ``mt × nt``-tile) output. The 2D config lays its
    blocks on the rectangle of cores they fill, ``blocks_n × blocks_m`` (``blocks_m × blocks_n``, COL_MAJOR, with
    ``transpose_mcast``), ROW_MAJOR; the reuse config takes the first ``blocks_m × blocks_n`` cores of its grid in
    the orientation of the sharded input (``a`` first, then ``b``; COL_MAJOR, column by column, if neither is
    sharded). The memory layout and buffer type stay the caller's; as in ttnn, the 2D config's must be
    BLOCK_SHARDED and the reuse config's not WIDTH_SHARDED."""
    two_d = isinstance(cfg, MatmulMultiCoreReuseMultiCastProgramConfig)
    layout = mem.memory_layout
    if two_d and layout is not TensorMemoryLayout.BLOCK_SHARDED:
        raise op_error(
            op,
            "memory_config",
            "BLOCK_SHARDED (or interleaved) for a 2D multicast program config",
            layout.name,
        )
    if not two_d and layout is TensorMemoryLayout.WIDTH_SHARDED:
        raise op_error(
            op,
            "memory_config",
            "not WIDTH_SHARDED for a reuse program config",
            layout.name,
        )
    blocks_m, blocks_n = -(-mt // cfg.per_core_M), -(-nt // cfg.per_core_N)
    shape = (cfg.per_core_M * TILE_SIZE, cfg.per_core_N * TILE_SIZE)
    if two_d:
        cols, rows = (blocks_m, blocks_n) if cfg.transpose_mcast else (blocks_n, blocks_m)
        grid = CoreRangeSet([CoreRange(CoreCoord(0, 0), CoreCoord(cols - 1, rows - 1))])
        orientation = ShardOrientation.COL_MAJOR if cfg.transpose_mcast else ShardOrientation.ROW_MAJOR
    else:
        specs = [
            mc.shard_spec for mc in (a.memory_config(), b.memory_config()) if mc is not None and mc.shard_spec
        ]
        orientation = specs[0].orientation if specs else ShardOrientation.COL_MAJOR
        grid = num_cores_to_corerangeset(
            blocks_m * blocks_n,
            cfg.compute_with_storage_grid_size,
            row_wise=orientation is ShardOrientation.ROW_MAJOR,
        )
    return MemoryConfig(mem.memory_layout, mem.buffer_type, ShardSpec(grid, shape, orientation))


def _output_topology(a: Tensor, b: Tensor):
    """The output is distributed like the activation unless the weight is sharded on its N dim."""
    ta, tb = a.tensor_topology(), b.tensor_topology()
    if ta is None or tb is None:
        return ta

    def on_n(p) -> bool:
        return isinstance(p, PlacementShard) and p.dim in (-1, len(b.shape) - 1)

    placements = list(ta.placements())
    wp = tb.placements()
    if len(wp) == len(placements) and tb.distribution_shape == ta.distribution_shape:
        for i, p in enumerate(wp):
            if on_n(p) and isinstance(placements[i], PlacementReplicate):
                placements[i] = PlacementShard(-1)
    elif (
        all(isinstance(p, PlacementReplicate) for p in placements)
        and tb.distribution_shape.mesh_size() == ta.distribution_shape.mesh_size()
        and any(on_n(p) for p in wp)
    ):
        # a replicated activation times a weight distributed over another view of the mesh (e.g. a 1-D
        # ShardTensorToMesh on a 1x8 mesh): the output columns are distributed the way the weight's are
        return TensorTopology(
            tb.distribution_shape, tuple(PlacementShard(-1) if on_n(p) else PlacementReplicate() for p in wp)
        )
    return TensorTopology(ta.distribution_shape, tuple(placements))


def _check_prefetch(op: str, a, global_cb, sub_device_id) -> None:
    """The prefetcher's plumbing (docs/emulator.md: checked, never changes a value): ``global_cb`` None or a
    ``GlobalCircularBuffer`` of the input's mesh, ``sub_device_id`` None or a sub-device of its loaded manager.
    (An input that is not a tensor on a device is left to the op's own check.)"""
    mesh = a.device() if isinstance(a, Tensor) else None
    if mesh is None:
        return
    if global_cb is not None and not (
        isinstance(global_cb, GlobalCircularBuffer) and global_cb.mesh_device is mesh
    ):
        raise op_error(op, "global_cb", "None or a ttnn.GlobalCircularBuffer of the input's mesh", global_cb)
    valid = mesh.get_sub_device_ids()
    if sub_device_id is not None and not (isinstance(sub_device_id, SubDeviceId) and sub_device_id in valid):
        raise op_error(
            op,
            "sub_device_id",
            f"None or a ttnn.SubDeviceId of the loaded sub-device manager ({', '.join(map(repr, valid))})",
            repr(sub_device_id),
        )


@ttnn_op("ttnn.matmul")
def matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    transpose_a: bool = False,
    transpose_b: bool = False,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    program_config=None,
    compute_kernel_config=None,
    core_grid=None,
    activation=None,
    output_tile=None,
    optional_output_tensor=None,
    global_cb=None,
    sub_device_id=None,
    queue_id: int = 0,
) -> Tensor:
    """a @ b over the last two dims, broadcasting batch dims. ``global_cb`` / ``sub_device_id`` (prefetcher
    plumbing) are checked and do not change the result; ``optional_output_tensor`` (same shape and dtype)
    receives the result in place and is returned, as in ttnn."""
    _check_prefetch("ttnn.matmul", input_tensor_a, global_cb, sub_device_id)
    result = _matmul(
        "ttnn.matmul",
        input_tensor_a,
        input_tensor_b,
        bias=None,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        memory_config=memory_config,
        dtype=dtype,
        program_config=program_config,
        compute_kernel_config=compute_kernel_config,
        core_grid=core_grid,
        activation=activation,
    )
    return _write_output("ttnn.matmul", result, optional_output_tensor, "optional_output_tensor")


@ttnn_op("ttnn.linear")
def linear(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    bias: Tensor | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    program_config=None,
    compute_kernel_config=None,
    core_grid=None,
    activation=None,
    output_tile=None,
    optional_output_tensor=None,
    global_cb=None,
    sub_device_id=None,
    queue_id: int = 0,
) -> Tensor:
    """x @ W (+ bias) with W stored [in, out], as TT-NN weights are; the optional activation is fused.
    ``global_cb`` / ``sub_device_id`` (prefetcher plumbing) are checked and do not change the result;
    ``optional_output_tensor`` receives the result in place, as for :func:`matmul`."""
    _check_prefetch("ttnn.linear", input_tensor_a, global_cb, sub_device_id)
    result = _matmul(
        "ttnn.linear",
        input_tensor_a,
        input_tensor_b,
        bias=bias,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        memory_config=memory_config,
        dtype=dtype,
        program_config=program_config,
        compute_kernel_config=compute_kernel_config,
        core_grid=core_grid,
        activation=activation,
    )
    return _write_output("ttnn.linear", result, optional_output_tensor, "optional_output_tensor")


def _tt_lib_matmul(
    op,
    input_tensor_a,
    input_tensor_b,
    bias,
    program_config,
    output_mem_config,
    output_dtype,
    compute_kernel_config,
) -> Tensor:
    """The tt_lib era's matmuls: :func:`linear`'s math and program config checks under that era's keywords
    (``output_mem_config``, default DRAM interleaved, tt_lib's default output memory config; ``output_dtype``)."""
    check_output_mem_config(op, output_mem_config)
    return _matmul(
        op,
        input_tensor_a,
        input_tensor_b,
        bias=bias,
        transpose_a=False,
        transpose_b=False,
        memory_config=output_mem_config,
        dtype=output_dtype,
        program_config=program_config,
        compute_kernel_config=compute_kernel_config,
        core_grid=None,
        activation=None,
    )


@ttnn_op("ttnn.experimental.operations.primary.matmul")
def primary_matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    bias: Tensor | None = None,
    program_config=None,
    output_mem_config: MemoryConfig = DRAM_MEMORY_CONFIG,
    output_dtype: DataType | None = None,
    compute_kernel_config=None,
    untilize_out: bool = False,
) -> Tensor:
    """The tt_lib era's matmul (``tt_lib.operations.primary.matmul``, reached as
    ``ttnn.experimental.operations.primary.matmul`` by models of that era), :func:`_tt_lib_matmul`, and
    ``untilize_out`` (a ROW_MAJOR output)."""
    op = "ttnn.experimental.operations.primary.matmul"
    expect(isinstance(untilize_out, bool), op, "untilize_out", "a bool", repr(untilize_out))
    result = _tt_lib_matmul(
        op,
        input_tensor_a,
        input_tensor_b,
        bias,
        program_config,
        output_mem_config,
        output_dtype,
        compute_kernel_config,
    )
    if untilize_out:
        result = to_layout(result, Layout.ROW_MAJOR)
    return result


@ttnn_op("ttnn.experimental.operations.primary.matmul_1d")
def matmul_1d(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    bias: Tensor | None = None,
    program_config: MatmulMultiCoreReuseMultiCast1DProgramConfig | None = None,
    output_mem_config: MemoryConfig = DRAM_MEMORY_CONFIG,
    output_dtype: DataType | None = None,
    compute_kernel_config=None,
) -> Tensor:
    """The tt_lib era's 1-D multicast matmul, ``ttnn.experimental.operations.primary.matmul_1d`` (tt-metal's T3000
    Mixtral MLP calls it): ``a @ b`` (+ ``bias``, ``[1, 1, 1, N]``), checked and computed as :func:`linear` with
    the same 1-D program config, whose ``fused_activation`` is applied to the product. ``program_config`` None
    (that API then chose a 1-D config itself) computes with the default K block, as ``linear`` without a config.
    Its older keywords as :func:`_tt_lib_matmul`."""
    op = "ttnn.experimental.operations.primary.matmul_1d"
    expect(
        program_config is None or isinstance(program_config, MatmulMultiCoreReuseMultiCast1DProgramConfig),
        op,
        "program_config",
        "None or a MatmulMultiCoreReuseMultiCast1DProgramConfig (matmul_1d takes only the 1-D multicast config)",
        type(program_config).__name__,
    )
    return _tt_lib_matmul(
        op,
        input_tensor_a,
        input_tensor_b,
        bias,
        program_config,
        output_mem_config,
        output_dtype,
        compute_kernel_config,
    )


@ttnn_op("ttnn.experimental.minimal_matmul")
def minimal_matmul(
    input_tensor: Tensor,
    weight_tensor: Tensor,
    *,
    bias_tensor: Tensor | None = None,
    config: MinimalMatmulConfig | None = None,
    compute_kernel_config=None,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
) -> Tensor:
    """The long-prefill matmul of the newer TTTv1 MLP: same math as ``linear``; block sizes must divide K."""
    op = "ttnn.experimental.minimal_matmul"
    if config is not None:
        expect(
            isinstance(config, MinimalMatmulConfig),
            op,
            "config",
            "a ttnn.MinimalMatmulConfig",
            type(config).__name__,
        )
        expect_tensor(op, "input_tensor", input_tensor)
        kt = _tiles(input_tensor.shape[-1])
        expect(
            kt % config.K_block_size == 0 or config.K_block_size >= kt,
            op,
            "config.K_block_size",
            f"a divisor of K in tiles ({kt})",
            config.K_block_size,
        )
    return _matmul(
        op,
        input_tensor,
        weight_tensor,
        bias=bias_tensor,
        transpose_a=False,
        transpose_b=False,
        memory_config=memory_config,
        dtype=dtype,
        program_config=None,
        compute_kernel_config=compute_kernel_config,
        core_grid=None,
        activation=None,
    )


def _check_height_shard(
    op: str, arg: str, t: Tensor, orientation, cores: int, shape: tuple, what: str
) -> None:
    spec = t.shard_spec()
    mem = t.memory_config()
    expect(
        mem.memory_layout is TensorMemoryLayout.HEIGHT_SHARDED,
        op,
        f"{arg}.memory_config",
        "HEIGHT_SHARDED (or interleaved)",
        mem.memory_layout.name,
    )
    expect(
        spec.orientation is orientation,
        op,
        f"{arg} shard orientation",
        f"{orientation.name}, as every sharded operand of the op",
        spec.orientation.name,
    )
    expect(spec.num_cores() == cores, op, f"{arg} shard cores", f"{cores} ({what})", spec.num_cores())
    expect(tuple(spec.shape) == shape, op, f"{arg} shard shape", str(shape), tuple(spec.shape))


@ttnn_op("ttnn.experimental.group_attn_matmul")
def group_attn_matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    compute_with_storage_grid_size,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    compute_kernel_config=None,
    optional_output_tensor: Tensor | None = None,
) -> Tensor:
    """Grouped-query attention's decode products: ``a`` ``[1, q_heads, batch, K]`` times ``b``
    ``[batch, kv_heads, K, N]`` gives ``[1, q_heads, batch, N]``, query head ``h`` of user ``u`` using KV head
    ``h // (q_heads / kv_heads)`` of that user (``torch.matmul(a.transpose(0, 2), b).transpose(0, 2)`` with the KV
    heads repeated). Used twice per step: the query times the transposed keys, the scores times the values.

    ttnn's limits: TILE operands, a query length of 1, ``q_heads`` a multiple of ``kv_heads``, batch 32 (equal in
    both), ``max(q_heads, 32)`` cores within ``compute_with_storage_grid_size``; sharded operands HEIGHT_SHARDED with
    one orientation (a: one ``(batch, K)`` shard per query head; b: one ``(kv_heads·K, N)`` shard per user); a
    HEIGHT_SHARDED output gets one ``(batch, N)`` shard per query head on the grid's first cores (row by row when
    the operands' shards are ROW_MAJOR). Each product row follows the matmul numerics (docs/numerics.md §3: the
    fidelity of ``compute_kernel_config``, default LoFi, and the whole of K in one block); output ``dtype``
    defaults to a's, memory to DRAM interleaved."""
    op = "ttnn.experimental.group_attn_matmul"
    a = expect_tensor(op, "input_tensor_a", input_tensor_a, dtypes=_FLOATS, layouts=(Layout.TILE,), rank=4)
    b = expect_tensor(op, "input_tensor_b", input_tensor_b, dtypes=_FLOATS, layouts=(Layout.TILE,), rank=4)
    device = same_mesh(op, input_tensor_a=a, input_tensor_b=b)
    grid = device_grid(op, "compute_with_storage_grid_size", compute_with_storage_grid_size, device)
    check_memory_config(op, memory_config)
    expect(dtype is None or isinstance(dtype, DataType), op, "dtype", "a ttnn.DataType or None", repr(dtype))
    expect(optional_output_tensor is None, op, "optional_output_tensor", "None (not emulated)", "a tensor")
    compute = default_compute_config(compute_kernel_config, op)
    ap, bp = tuple(a.padded_shape), tuple(b.padded_shape)
    q_heads, users, k = ap[1], ap[2], ap[3]
    kv_heads, n = bp[1], bp[3]
    expect(ap[0] == 1, op, "input_tensor_a.shape[0]", "1 (the query length)", ap[0])
    expect(
        q_heads % kv_heads == 0, op, "input_tensor_a.shape[1]", f"a multiple of kv_heads {kv_heads}", q_heads
    )
    expect(users == bp[0], op, "input_tensor_b.shape[0]", f"the users of input_tensor_a ({users})", bp[0])
    expect(
        bp[0] == TILE_SIZE, op, "input_tensor_b.shape[0]", "32 users (the only batch ttnn supports)", bp[0]
    )
    expect(k == bp[2], op, "input_tensor_b.shape[2]", f"K of input_tensor_a ({k})", bp[2])
    cores = max(q_heads, TILE_SIZE)
    expect(
        cores <= grid.x * grid.y,
        op,
        "compute_with_storage_grid_size",
        f"at least {cores} cores (one per query head, 32 at least)",
        f"{grid.x}x{grid.y}",
    )
    mem = DRAM_MEMORY_CONFIG if memory_config is None else memory_config
    spec_source = next((t.shard_spec() for t in (a, b) if t.is_sharded()), None) or mem.shard_spec
    orientation = spec_source.orientation if spec_source is not None else ShardOrientation.COL_MAJOR
    row_major = orientation is ShardOrientation.ROW_MAJOR
    if a.is_sharded():
        _check_height_shard(op, "input_tensor_a", a, orientation, q_heads, (users, k), "one per query head")
    if b.is_sharded():
        _check_height_shard(op, "input_tensor_b", b, orientation, users, (kv_heads * k, n), "one per user")
    shard_grid = None
    if isinstance(mem, MemoryConfig) and mem.is_sharded():  # a bad config is refused by output_like
        expect(
            mem.memory_layout is TensorMemoryLayout.HEIGHT_SHARDED,
            op,
            "memory_config",
            "HEIGHT_SHARDED (or interleaved)",
            mem.memory_layout.name,
        )
        shard_grid = num_cores_to_corerangeset(q_heads, grid, row_major)
        if mem.shard_spec is not None:
            expect(
                mem.shard_spec.grid == shard_grid
                and mem.shard_spec.orientation is orientation
                and tuple(mem.shard_spec.shape) == (users, n),
                op,
                "memory_config.shard_spec",
                f"({users}, {n}) shards on the first {q_heads} cores of the grid, {orientation.name}",
                mem.shard_spec,
            )
        else:
            mem = MemoryConfig(
                mem.memory_layout, mem.buffer_type, ShardSpec(shard_grid, (users, n), orientation)
            )
    a_bits, b_bits = fidelity_bits(compute.math_fidelity)
    group = q_heads // kv_heads

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        x = truncate_mantissa(np.ascontiguousarray(x), a_bits)
        w = truncate_mantissa(np.ascontiguousarray(w), b_bits)
        rows, cols = x.shape[2], w.shape[3]
        out = np.empty((1, x.shape[1], rows, cols), dtype=np.float32)
        for user in range(rows):
            for head in range(w.shape[1]):
                heads = slice(head * group, (head + 1) * group)
                product = matmul_accumulate(
                    np.ascontiguousarray(x[0, heads, user, :]), w[user, head], None, compute.fp32_dest_acc_en
                )
                out[0, heads, user, :] = product
        return out

    shards = map_shards(run, a, b)
    return output_like(
        op,
        shards,
        a,
        dtype=a.dtype if dtype is None else dtype,
        layout=Layout.TILE,
        memory_config=mem,
        topology=_output_topology(a, b),
    )
