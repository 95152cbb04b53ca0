"""Normalisation ops: rms_norm, layer_norm, their distributed pre/post all-gather halves, and softmax.

Numerics: inputs are read as stored (already quantised), the residual is added in float32, statistics and
the normalisation are computed in float32 by the ``_kernels`` (``rms_norm`` / ``layer_norm`` / ``softmax``),
and the output is rounded to the output dtype. The compute kernel config is validated but, unlike matmul,
does not change the numerics here (the norm kernels accumulate in float32).

Sharding follows the hardware: a sharded input (width or block sharded, never height sharded) runs the
sharded kernel with a ``LayerNormShardedMultiCoreProgramConfig`` (derived from the shard spec when none is
given) whose block sizes must match the shard spec; an interleaved input with a sharded program config, or
an interleaved input asked to produce a sharded output, is an error.

Distributed norms (a tensor whose last dim is split over devices): ``*_pre_all_gather`` returns per-row
statistics laid out as on hardware — one 32-wide tile column per statistic with the value in column 0 and
zeros elsewhere: RMSNorm ``[..., S, 32]`` holding Σx²; LayerNorm ``[..., S, 64]`` holding Σx² then Σx.
After an all-gather along dim 3 each device holds the statistics of every device side by side, and
``*_post_all_gather`` sums every tile of a kind (all columns, so the zero columns do not matter), divides by
(padded local width × number of devices) and normalises its local slice.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import _kernels
from ..errors import op_error
from ..memory import CoreCoord, CoreRange, CoreRangeSet, MemoryConfig, ShardSpec
from ..program_configs import (
    LayerNormDefaultProgramConfig,
    LayerNormShardedMultiCoreProgramConfig,
    SoftmaxDefaultProgramConfig,
    SoftmaxShardedMultiCoreProgramConfig,
    WormholeComputeKernelConfig,
)
from ..tensor import Tensor
from ..types import TILE_SIZE, BufferType, DataType, Layout, ShardOrientation, TensorMemoryLayout
from ._common import check_compute_config, expect, expect_tensor, map_shards, output_like, same_mesh, ttnn_op
from .data_movement import per_device

__all__ = [
    "layer_norm",
    "layer_norm_post_all_gather",
    "layer_norm_pre_all_gather",
    "rms_norm",
    "rms_norm_post_all_gather",
    "rms_norm_pre_all_gather",
    "scale_mask_softmax_in_place",
    "softmax",
]
__experimental__: list[str] = []
# the tt_lib era's ``ttnn.experimental.operations.primary`` distributed RMSNorm (assembled in ``tttv2.ttnn._compat``)
__primary__ = [
    ("rmsnorm_pre_allgather", "primary_rmsnorm_pre_allgather"),
    ("rmsnorm_post_allgather", "primary_rmsnorm_post_allgather"),
]
__transformer__: list[str] = []

_INPUT_DTYPES = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B)
_PARAM_DTYPES = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B)
_STATS_DTYPES = (DataType.BFLOAT16, DataType.FLOAT32)
_RMS, _LAYER = "rms", "layer"


# --- argument checks -----------------------------------------------------------------------------------------


def _input(op: str, value, *, rank=None) -> Tensor:
    return expect_tensor(op, "input_tensor", value, dtypes=_INPUT_DTYPES, layouts=(Layout.TILE,), rank=rank)


def _epsilon(op: str, epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)) or not epsilon >= 0:
        raise op_error(op, "epsilon", "a non-negative float", repr(epsilon))
    return float(epsilon)


def _residual(op: str, residual, x: Tensor) -> Tensor | None:
    if residual is None:
        return None
    r = expect_tensor(op, "residual_input_tensor", residual, dtypes=_INPUT_DTYPES, layouts=(Layout.TILE,))
    if r.padded_shape != x.padded_shape or r.shape != x.shape:
        raise op_error(
            op,
            "residual_input_tensor",
            f"the input's shape {list(x.shape)} (padded {list(x.padded_shape)})",
            list(r.shape),
        )
    if x.is_sharded() and r.memory_config() != x.memory_config():
        raise op_error(
            op,
            "residual_input_tensor",
            f"the input's sharded memory config {x.memory_config()}",
            r.memory_config(),
        )
    return r


def _param(op: str, arg: str, value, x: Tensor) -> list[np.ndarray] | None:
    """Per-device gamma/beta vectors of the input width.

    Accepted forms (as on hardware, plus the plain 1-D form): a TILE or ROW_MAJOR tensor whose last dim is the
    input width (only its first row is used: ``[dim]``, ``[1, 1, 1, dim]``; a TILE tensor may have up to 32
    rows, as one tile row), or a ROW_MAJOR tensor of width 32 holding the flattened vector
    (``[1, 1, dim/32, 32]``, TTTv1's storage form).
    """
    if value is None:
        return None
    w = expect_tensor(op, arg, value, dtypes=_PARAM_DTYPES)
    width = x.shape[-1]
    padded_width = x.padded_shape[-1]
    shape = list(w.shape)
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    if shape[-1] == width and (
        rows == 1 or (w.layout is Layout.TILE and w.padded_shape[-2] == TILE_SIZE and rows <= TILE_SIZE)
    ):
        return per_device(lambda s: np.asarray(s, dtype=np.float32).reshape(rows, width)[0], w.shards(op))
    if w.layout is Layout.ROW_MAJOR and shape[-1] == TILE_SIZE and w.volume == padded_width:
        return per_device(lambda s: np.asarray(s, dtype=np.float32).reshape(-1)[:width], w.shards(op))
    raise op_error(
        op,
        arg,
        f"a [{width}] / [1, 1, 1, {width}] tensor (last dim = input width {width}) or a ROW_MAJOR "
        f"[1, 1, {padded_width // TILE_SIZE}, 32] tensor",
        f"{shape} {w.layout.name}",
    )


def _default_sharded_config(x: Tensor) -> LayerNormShardedMultiCoreProgramConfig:
    """What ttnn builds from the shard spec when a sharded input comes without a program config."""
    spec = x.shard_spec()
    box = spec.grid.bounding_box()
    block_h, block_w = spec.shape[0] // TILE_SIZE, spec.shape[1] // TILE_SIZE
    subblock_w = max(d for d in range(1, min(block_w, 4) + 1) if block_w % d == 0)
    return LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=CoreCoord(box.end.x + 1, box.end.y + 1),
        subblock_w=subblock_w,
        block_h=block_h,
        block_w=block_w,
        inplace=False,
    )


def _validate_sharded_config(
    op: str, x: Tensor, pc: LayerNormShardedMultiCoreProgramConfig, out_mem: MemoryConfig, distributed: bool
) -> None:
    """The checks the sharded layernorm kernel makes against its input."""
    spec = x.shard_spec()
    padded = list(x.padded_shape)
    k = padded[-1]
    m = math.prod(padded[:-1]) if len(padded) > 1 else 1
    mt, kt = m // TILE_SIZE, k // TILE_SIZE
    box = spec.grid.bounding_box()
    grid = pc.compute_with_storage_grid_size
    device_grid = x.device().compute_with_storage_grid_size()
    if grid.x > device_grid.x or grid.y > device_grid.y:
        raise op_error(
            op,
            "program_config",
            f"a compute grid within the device grid {device_grid.x}x{device_grid.y}",
            f"{grid.x}x{grid.y}",
        )
    if box.end.x >= grid.x or box.end.y >= grid.y:
        raise op_error(
            op,
            "program_config",
            f"a compute grid {grid.x}x{grid.y} containing the input's shard grid {spec.grid}",
            f"shard cores up to ({box.end.x}, {box.end.y})",
        )
    if (
        out_mem.buffer_type is not x.memory_config().buffer_type
        or out_mem.memory_layout is not x.memory_config().memory_layout
    ):
        raise op_error(
            op,
            "memory_config",
            f"the input's {x.memory_config().memory_layout.name}/{x.memory_config().buffer_type.name} for a sharded norm",
            f"{out_mem.memory_layout.name}/{out_mem.buffer_type.name}",
        )
    if m == pc.block_h * TILE_SIZE:  # one row of blocks: the width is split over all shard cores
        n = spec.num_cores()
        want_w, want_h = -(-kt // n), mt
        how_w = f"ceil(K tiles {kt} / {n} cores)"
    else:
        cols, rows = box.end.x + 1, box.end.y + 1
        if spec.orientation is ShardOrientation.COL_MAJOR:
            cols, rows = rows, cols
        want_w, want_h = -(-kt // cols), mt // rows
        how_w = f"ceil(K tiles {kt} / {cols} core columns)"
    if pc.block_w != want_w:
        raise op_error(
            op,
            "program_config.block_w",
            f"{want_w} = {how_w} so that the grid covers the width {k}",
            pc.block_w,
        )
    if pc.block_h != want_h:
        raise op_error(op, "program_config.block_h", f"{want_h} (M tiles {mt} per core row)", pc.block_h)
    if pc.block_h * TILE_SIZE != spec.shape[0] or pc.block_w * TILE_SIZE != spec.shape[1]:
        raise op_error(
            op,
            "program_config",
            f"block_h × 32, block_w × 32 equal to the input shard shape {spec.shape}",
            f"({pc.block_h * TILE_SIZE}, {pc.block_w * TILE_SIZE})",
        )
    if distributed and m != TILE_SIZE:
        raise op_error(
            op, "input_tensor", "a padded height of 32 rows for a sharded distributed norm", f"{m} rows"
        )


def _sharding(
    op: str,
    x: Tensor,
    program_config,
    memory_config,
    *,
    distributed: bool = False,
) -> tuple[MemoryConfig, LayerNormShardedMultiCoreProgramConfig | None]:
    """Validate program/memory configs against the input; returns (output memory config, sharded config)."""
    if program_config is not None and not isinstance(
        program_config, (LayerNormDefaultProgramConfig, LayerNormShardedMultiCoreProgramConfig)
    ):
        raise op_error(
            op,
            "program_config",
            "a LayerNormShardedMultiCoreProgramConfig, LayerNormDefaultProgramConfig or None",
            repr(program_config),
        )
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    out_mem = memory_config or x.memory_config()
    sharded_pc = isinstance(program_config, LayerNormShardedMultiCoreProgramConfig)
    if not x.is_sharded():
        if sharded_pc:
            raise op_error(
                op,
                "program_config",
                "a sharded input_tensor for a LayerNormShardedMultiCoreProgramConfig",
                f"an interleaved input {list(x.shape)} (use ttnn.interleaved_to_sharded or drop the program config)",
            )
        if out_mem.is_sharded():
            raise op_error(
                op,
                "memory_config",
                "an interleaved output for an interleaved input (reshard the result instead)",
                out_mem.memory_layout.name,
            )
        return out_mem, None
    kind = x.memory_config().memory_layout
    if kind is TensorMemoryLayout.HEIGHT_SHARDED:
        raise op_error(op, "input_tensor", "an interleaved, width- or block-sharded input", "HEIGHT_SHARDED")
    if isinstance(program_config, LayerNormDefaultProgramConfig):
        raise op_error(
            op,
            "program_config",
            "a LayerNormShardedMultiCoreProgramConfig (or None) for a sharded input",
            repr(program_config),
        )
    if not out_mem.is_sharded() or out_mem.memory_layout is TensorMemoryLayout.HEIGHT_SHARDED:
        raise op_error(
            op,
            "memory_config",
            "a width- or block-sharded output for a sharded input",
            out_mem.memory_layout.name,
        )
    pc = program_config if sharded_pc else _default_sharded_config(x)
    _validate_sharded_config(op, x, pc, out_mem, distributed)
    if pc.inplace or out_mem.shard_spec is None:
        out_mem = MemoryConfig(out_mem.memory_layout, out_mem.buffer_type, x.shard_spec())
    return out_mem, pc


# --- full norms ------------------------------------------------------------------------------------------------


def _apply_norm(kind: str, xs: np.ndarray, gamma, beta, eps: float) -> np.ndarray:
    rows = xs.reshape(-1, xs.shape[-1]) if xs.ndim != 2 else xs
    if kind == _RMS:
        y = _kernels.rms_norm(rows, gamma, eps)
        if beta is not None:
            y = y + beta
    else:
        y = _kernels.layer_norm(rows, gamma, beta, eps)
    return np.asarray(y, dtype=np.float32).reshape(xs.shape)


def _norm(
    op: str,
    kind: str,
    input_tensor,
    epsilon,
    weight,
    bias,
    residual_input_tensor,
    memory_config,
    program_config,
    compute_kernel_config,
) -> Tensor:
    x = _input(op, input_tensor)
    eps = _epsilon(op, epsilon)
    check_compute_config(op, compute_kernel_config)
    same_mesh(op, input_tensor=x, weight=weight, bias=bias, residual_input_tensor=residual_input_tensor)
    r = _residual(op, residual_input_tensor, x)
    gammas = _param(op, "weight", weight, x)
    betas = _param(op, "bias", bias, x)
    out_mem, _ = _sharding(op, x, program_config, memory_config)

    def one(xs, rs, g, b):
        v = np.asarray(xs, dtype=np.float32)
        if rs is not None:
            v = v + np.asarray(rs, dtype=np.float32)
        return _apply_norm(kind, v, g, b, eps)

    shards = per_device(one, x.shards(op), None if r is None else r.shards(op), gammas, betas)
    return output_like(op, shards, x, memory_config=out_mem)


def _norm_op(kind: str, doc: str) -> Callable[..., Tensor]:
    """The public op ``ttnn.<kind>_norm``: RMS and layer norm take the same arguments and differ only in ``kind``."""
    name = f"{kind}_norm"
    op = f"ttnn.{name}"

    def norm(
        input_tensor: Tensor,
        *,
        epsilon: float = 1e-12,
        weight: Tensor | None = None,
        bias: Tensor | None = None,
        residual_input_tensor: Tensor | None = None,
        memory_config: MemoryConfig | None = None,
        program_config=None,
        compute_kernel_config: WormholeComputeKernelConfig | None = None,
    ) -> Tensor:
        return _norm(
            op,
            kind,
            input_tensor,
            epsilon,
            weight,
            bias,
            residual_input_tensor,
            memory_config,
            program_config,
            compute_kernel_config,
        )

    norm.__name__ = norm.__qualname__ = name
    norm.__doc__ = doc
    return ttnn_op(op)(norm)


rms_norm = _norm_op(
    _RMS,
    """``y = (x + residual) / sqrt(mean((x + residual)², last dim) + epsilon) · weight + bias``.

    The input is TILE (bfloat16, float32 or bfloat8_b); the output has the input's dtype and, by default, its
    memory config. See the module docstring for the accepted weight forms and sharding rules.
    """,
)
layer_norm = _norm_op(
    _LAYER,
    """``y = (v − mean(v)) / sqrt(var(v) + epsilon) · weight + bias`` with ``v = x + residual`` (biased
    variance over the last dim). Same arguments and rules as :func:`rms_norm`.""",
)


# --- distributed norms -----------------------------------------------------------------------------------------


def _stat_tiles(kind: str) -> int:
    return 1 if kind == _RMS else 2


def _pre_all_gather(
    op: str,
    kind: str,
    input_tensor,
    dtype,
    residual_input_tensor,
    compute_kernel_config,
    program_config,
    memory_config,
) -> Tensor:
    x = _input(op, input_tensor, rank=4)
    expect(isinstance(dtype, DataType), op, "dtype", "a ttnn.DataType", repr(dtype))
    check_compute_config(op, compute_kernel_config)
    same_mesh(op, input_tensor=x, residual_input_tensor=residual_input_tensor)
    r = _residual(op, residual_input_tensor, x)
    out_mem, pc = _sharding(op, x, program_config, memory_config, distributed=True)
    width = TILE_SIZE * _stat_tiles(kind)
    if pc is not None:
        # sharded kernel: the stats land on the first core of the input's grid, as bfloat16
        spec = x.shard_spec()
        start = spec.grid.bounding_box().start
        one_core = CoreRangeSet({CoreRange(start, start)})
        out_mem = MemoryConfig(
            out_mem.memory_layout,
            BufferType.L1,
            ShardSpec(one_core, (spec.shape[0], width), spec.orientation),
        )
        dtype = DataType.BFLOAT16

    def one(xs, rs):
        v = np.asarray(xs, dtype=np.float32)
        if rs is not None:
            v = v + np.asarray(rs, dtype=np.float32)
        stats = np.zeros((*v.shape[:-1], width), dtype=np.float32)
        stats[..., 0] = np.sum(v * v, axis=-1, dtype=np.float32)
        if kind == _LAYER:
            stats[..., TILE_SIZE] = np.sum(v, axis=-1, dtype=np.float32)
        return stats

    shards = per_device(one, x.shards(op), None if r is None else r.shards(op))
    return output_like(op, shards, x, dtype=dtype, memory_config=out_mem)


def _post_all_gather(
    op: str,
    kind: str,
    input_tensor,
    stats,
    epsilon,
    weight,
    bias,
    memory_config,
    compute_kernel_config,
    program_config,
    dtype,
) -> Tensor:
    x = _input(op, input_tensor, rank=4)
    s = expect_tensor(op, "stats", stats, dtypes=_STATS_DTYPES, layouts=(Layout.TILE,), rank=4)
    eps = _epsilon(op, epsilon)
    check_compute_config(op, compute_kernel_config)
    if dtype is not None:
        expect(isinstance(dtype, DataType), op, "dtype", "a ttnn.DataType", repr(dtype))
    same_mesh(op, input_tensor=x, stats=s, weight=weight, bias=bias)
    stat_width = TILE_SIZE * _stat_tiles(kind)
    if list(s.padded_shape[:-1]) != list(x.padded_shape[:-1]):
        raise op_error(
            op,
            "stats",
            f"padded dims {list(x.padded_shape[:-1])} + [k·{stat_width}] like the input",
            list(s.padded_shape),
        )
    if s.shape[-1] % stat_width:
        what = (
            "one 32-wide Σx² tile per device" if kind == _RMS else "a 64-wide (Σx², Σx) tile pair per device"
        )
        raise op_error(op, "stats", f"a last dim that is a multiple of {stat_width} ({what})", s.shape[-1])
    gammas = _param(op, "weight", weight, x)
    betas = _param(op, "bias", bias, x)
    out_mem, pc = _sharding(op, x, program_config, memory_config, distributed=True)
    if pc is not None and (not s.is_sharded() or s.shard_spec().num_cores() != 1):
        raise op_error(
            op,
            "stats",
            "stats sharded on exactly one core for a sharded input (ttnn runs a sharded input through its sharded"
            " norm kernel, which refuses DRAM or interleaved stats: gather them into a one-core L1 shard, or"
            " normalise an interleaved input)",
            s.memory_config(),
        )
    n_devices = s.shape[-1] // stat_width
    total_width = x.padded_shape[-1] * n_devices

    def one(xs, ss, g, b):
        v = np.asarray(xs, dtype=np.float32)
        st = np.asarray(ss, dtype=np.float32)
        if st.shape[-2] != v.shape[-2]:  # same padded rows, different logical rows: padding rows hold zeros
            extra = max(v.shape[-2] - st.shape[-2], 0)
            st = np.pad(st, [(0, 0)] * (st.ndim - 2) + [(0, extra), (0, 0)])[..., : v.shape[-2], :]
        st = st.reshape(*st.shape[:-1], n_devices, _stat_tiles(kind), TILE_SIZE)
        mean_sq = st[..., 0, :].sum(axis=(-1, -2), dtype=np.float32)[..., None] / np.float32(total_width)
        if kind == _RMS:
            y = v / np.sqrt(mean_sq + np.float32(eps))
        else:
            mean = st[..., 1, :].sum(axis=(-1, -2), dtype=np.float32)[..., None] / np.float32(total_width)
            var = mean_sq - mean * mean
            y = (v - mean) / np.sqrt(var + np.float32(eps))
        if g is not None:
            y = y * g
        if b is not None:
            y = y + b
        return np.asarray(y, dtype=np.float32)

    shards = per_device(one, x.shards(op), s.shards(op), gammas, betas)
    return output_like(op, shards, x, dtype=dtype or x.dtype, memory_config=out_mem)


@ttnn_op("ttnn.rms_norm_pre_all_gather")
def rms_norm_pre_all_gather(
    input_tensor: Tensor,
    *,
    dtype: DataType = DataType.BFLOAT16,
    residual_input_tensor: Tensor | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    program_config=None,
    memory_config: MemoryConfig | None = None,
    use_2d_core_grid: bool | None = None,
    fast_and_approximate_mode: bool = False,
) -> Tensor:
    """Per-row Σx² of this device's slice of a width-split activation: ``[1, 1, S, D/n]`` → ``[1, 1, S, 32]``
    (Σx² in column 0, zeros elsewhere). All-gather the result along dim 3, then call
    :func:`rms_norm_post_all_gather`. ``use_2d_core_grid`` / ``fast_and_approximate_mode`` are speed knobs."""
    return _pre_all_gather(
        "ttnn.rms_norm_pre_all_gather",
        _RMS,
        input_tensor,
        dtype,
        residual_input_tensor,
        compute_kernel_config,
        program_config,
        memory_config,
    )


def _post_all_gather_op(kind: str, doc: str) -> Callable[..., Tensor]:
    """The public op ``ttnn.<kind>_norm_post_all_gather``: the RMS and layer norm variants take the same arguments
    and differ only in ``kind`` (which statistics the gathered tensor holds, see :func:`_post_all_gather`)."""
    name = f"{kind}_norm_post_all_gather"
    op = f"ttnn.{name}"

    def post_all_gather(
        input_tensor: Tensor,
        stats: Tensor,
        *,
        epsilon: float = 1e-12,
        weight: Tensor | None = None,
        bias: Tensor | None = None,
        memory_config: MemoryConfig | None = None,
        compute_kernel_config: WormholeComputeKernelConfig | None = None,
        program_config=None,
        dtype: DataType | None = None,
        use_2d_core_grid: bool | None = None,
    ) -> Tensor:
        return _post_all_gather(
            op,
            kind,
            input_tensor,
            stats,
            epsilon,
            weight,
            bias,
            memory_config,
            compute_kernel_config,
            program_config,
            dtype,
        )

    post_all_gather.__name__ = post_all_gather.__qualname__ = name
    post_all_gather.__doc__ = doc
    return ttnn_op(op)(post_all_gather)


rms_norm_post_all_gather = _post_all_gather_op(
    _RMS,
    """Normalise this device's slice with the gathered statistics ``[1, 1, S, 32·n]`` of all n devices:
    ``y = x / sqrt(ΣΣx² / (n · local padded width) + epsilon) · weight + bias`` (``weight`` is this device's
    slice of gamma).""",
)


@ttnn_op("ttnn.experimental.operations.primary.rmsnorm_pre_allgather")
def primary_rmsnorm_pre_allgather(
    input_tensor: Tensor,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    output_dtype: DataType = DataType.BFLOAT16,
) -> Tensor:
    """tt_lib's ``operations.primary.rmsnorm_pre_allgather`` (the Llama-2-70B T3000 decoder's prefill norm): the
    statistics of :func:`rms_norm_pre_all_gather`, under that era's ``output_dtype``."""
    return _pre_all_gather(
        "ttnn.experimental.operations.primary.rmsnorm_pre_allgather",
        _RMS,
        input_tensor,
        output_dtype,
        None,
        compute_kernel_config,
        None,
        None,
    )


@ttnn_op("ttnn.experimental.operations.primary.rmsnorm_post_allgather")
def primary_rmsnorm_post_allgather(
    input_tensor: Tensor,
    stats: Tensor,
    eps: float,
    gamma: Tensor | None = None,
    *,
    output_mem_config: MemoryConfig | None = None,
    program_config=None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """tt_lib's ``operations.primary.rmsnorm_post_allgather``: :func:`rms_norm_post_all_gather` with that era's
    positional ``eps`` and ``gamma`` (this device's slice of the norm weight) and ``output_mem_config``."""
    return _post_all_gather(
        "ttnn.experimental.operations.primary.rmsnorm_post_allgather",
        _RMS,
        input_tensor,
        stats,
        eps,
        gamma,
        None,
        output_mem_config,
        compute_kernel_config,
        program_config,
        None,
    )


@ttnn_op("ttnn.layer_norm_pre_all_gather")
def layer_norm_pre_all_gather(
    input_tensor: Tensor,
    *,
    dtype: DataType = DataType.BFLOAT16,
    residual_input_tensor: Tensor | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    program_config=None,
    memory_config: MemoryConfig | None = None,
    use_2d_core_grid: bool | None = None,
    recip_tensor=None,
) -> Tensor:
    """Per-row (Σx², Σx) of this device's slice: ``[1, 1, S, 64]`` with Σx² in column 0 and Σx in column 32."""
    return _pre_all_gather(
        "ttnn.layer_norm_pre_all_gather",
        _LAYER,
        input_tensor,
        dtype,
        residual_input_tensor,
        compute_kernel_config,
        program_config,
        memory_config,
    )


layer_norm_post_all_gather = _post_all_gather_op(
    _LAYER,
    """LayerNorm of this device's slice from gathered ``[1, 1, S, 64·n]`` stats: ``E[x] = ΣΣx / N``,
    ``var = ΣΣx² / N − E[x]²`` with ``N`` = n · local padded width.""",
)


# --- softmax -------------------------------------------------------------------------------------------------


@ttnn_op("ttnn.softmax")
def softmax(
    input_tensor: Tensor,
    dim: int = -1,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    numeric_stable: bool = True,
) -> Tensor:
    """Softmax along ``dim`` (TILE input; interleaved or height-sharded).

    ``numeric_stable=True`` subtracts the row max first; ``False`` exponentiates the raw values as the fast
    hardware kernel does (large inputs then overflow to inf/nan, as on hardware).
    """
    op = "ttnn.softmax"
    x = _input(op, input_tensor)
    check_compute_config(op, compute_kernel_config)
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    kind = x.memory_config().memory_layout
    if kind in (TensorMemoryLayout.WIDTH_SHARDED, TensorMemoryLayout.BLOCK_SHARDED):
        raise op_error(op, "input_tensor", "an interleaved or height-sharded input", kind.name)
    rank = len(x.shape)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -rank <= dim < rank:
        raise op_error(op, "dim", f"a dim in [{-rank}, {rank - 1}]", repr(dim))
    axis = int(dim) % rank

    def run(s: np.ndarray) -> np.ndarray:
        a = np.moveaxis(np.asarray(s, dtype=np.float32), axis, -1)
        y = _softmax_last(a, numeric_stable)
        return np.ascontiguousarray(np.moveaxis(y, -1, axis))

    return output_like(op, per_device(run, x.shards(op)), x, memory_config=memory_config)


def _softmax_last(a: np.ndarray, numeric_stable: bool) -> np.ndarray:
    """Softmax over the last dim in float32: the row max subtracted first (``numeric_stable``), or the raw values
    exponentiated, as ttnn's fast kernel does (large inputs then overflow to inf/nan, as on hardware)."""
    if numeric_stable:
        return np.asarray(_kernels.softmax(np.ascontiguousarray(a)), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(a)
        return np.asarray(e / np.sum(e, axis=-1, keepdims=True), dtype=np.float32)


def _check_sharded_softmax(op: str, x: Tensor, pc: SoftmaxShardedMultiCoreProgramConfig) -> None:
    """ttnn's rules for the sharded softmax program: tile-aligned M and K, a block as wide as the input, one
    block_h × block_w shard of the input per core of the grid."""
    padded = x.padded_shape
    k = padded[-1]
    m = int(np.prod(padded[:-1]))
    expect(
        pc.block_w * TILE_SIZE == k,
        op,
        "program_config.block_w",
        f"the input's width in tiles, {k // TILE_SIZE} (block_w × 32 == shape[3])",
        pc.block_w,
    )
    grid = pc.compute_with_storage_grid_size
    cores = grid.x * grid.y
    blocks = (m // TILE_SIZE) * (k // TILE_SIZE) // (pc.block_h * pc.block_w)
    expect(
        blocks == cores and (m // TILE_SIZE) % pc.block_h == 0,
        op,
        "program_config",
        f"one block_h × block_w block per core of the {grid.x}×{grid.y} grid ({cores} blocks)",
        f"{m // TILE_SIZE}×{k // TILE_SIZE} tiles in blocks of {pc.block_h}×{pc.block_w}",
    )
    spec = x.shard_spec()
    expect(
        spec is not None,
        op,
        "input_tensor.memory_config",
        "a sharded input for SoftmaxShardedMultiCoreProgramConfig",
        x.memory_config(),
    )
    expect(
        tuple(spec.shape) == (pc.block_h * TILE_SIZE, pc.block_w * TILE_SIZE) and spec.num_cores() == cores,
        op,
        "input_tensor shard spec",
        f"{cores} shards of ({pc.block_h * TILE_SIZE}, {pc.block_w * TILE_SIZE}), one per core of the program grid",
        f"{spec.num_cores()} shards of {tuple(spec.shape)}",
    )


def _softmax_mask(op: str, mask, x: Tensor, pc, is_causal_mask: bool) -> tuple[Tensor, bool]:
    """Check the mask as ttnn does; returns it and whether it is added element for element (a causal or sharded
    mask) rather than its first row broadcast over the rows (a padding mask)."""
    m = expect_tensor(op, "mask", mask, dtypes=(DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32))
    same_mesh(op, input_tensor=x, mask=m)
    xp, mp = tuple(x.padded_shape), tuple(m.padded_shape)
    if m.is_sharded():
        expect(m.layout is Layout.TILE, op, "mask.layout", "TILE for a sharded mask", m.layout.name)
        expect(mp == xp, op, "mask.padded_shape", f"the input's {list(xp)} for a sharded mask", list(mp))
        return m, True
    expect(len(mp) == len(xp), op, "mask rank", f"the input's rank {len(xp)}", len(mp))
    if m.layout is Layout.ROW_MAJOR:
        want = (mp[0], 1, xp[-1] // TILE_SIZE, TILE_SIZE)
        expect(
            len(xp) == 4 and mp == want and not is_causal_mask,
            op,
            "mask.padded_shape",
            f"a ROW_MAJOR padding mask {list(want)} (the row of {xp[-1]} in rows of 32), not causal",
            list(mp),
        )
        return m, False
    for i in range(1, len(xp) - 2):
        expect(mp[i] == 1, op, "mask.padded_shape", f"1 in dim {i} for an interleaved mask", list(mp))
    expect(mp[0] in (1, xp[0]), op, "mask.padded_shape[0]", f"1 or the input's batch {xp[0]}", mp[0])
    if isinstance(pc, SoftmaxDefaultProgramConfig):
        expect(mp[0] == xp[0], op, "mask.padded_shape[0]", f"the input's batch {xp[0]}", mp[0])
    expect(mp[-1] == xp[-1], op, "mask width", f"the input's padded width {xp[-1]}", mp[-1])
    if is_causal_mask:
        expect(
            mp[-2] == xp[-2], op, "mask height", f"the input's padded height {xp[-2]} (a causal mask)", mp[-2]
        )
    return m, is_causal_mask


@ttnn_op("ttnn.scale_mask_softmax_in_place")
def scale_mask_softmax_in_place(
    input_tensor: Tensor,
    scale: float | None = None,
    mask: Tensor | None = None,
    *,
    program_config: SoftmaxDefaultProgramConfig | SoftmaxShardedMultiCoreProgramConfig | None = None,
    is_causal_mask: bool = False,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    numeric_stable: bool = False,
) -> Tensor:
    """``softmax(input_tensor * scale + mask)`` over the last dim, written into ``input_tensor`` (returned).

    The mask (optional; ``scale`` needs it, as in ttnn) is added element for element when ``is_causal_mask`` or
    when it is sharded (then its padded shape is the input's); otherwise it is a padding mask: its first row per
    batch (a TILE ``[B, 1, 1, W]`` or a ROW_MAJOR ``[B, 1, W / 32, 32]``) is added to every row of every head. A
    ``SoftmaxShardedMultiCoreProgramConfig`` needs a sharded input of one block_h × block_w block per core of
    its grid, and block_w × 32 equal to the width. ``numeric_stable=False`` (ttnn's default here) exponentiates
    the raw values. Computed in float32, stored in the input's dtype."""
    op = "ttnn.scale_mask_softmax_in_place"
    x = _input(op, input_tensor)
    check_compute_config(op, compute_kernel_config)
    pc = SoftmaxDefaultProgramConfig() if program_config is None else program_config
    expect(
        isinstance(pc, (SoftmaxDefaultProgramConfig, SoftmaxShardedMultiCoreProgramConfig)),
        op,
        "program_config",
        "a ttnn.SoftmaxDefaultProgramConfig or ttnn.SoftmaxShardedMultiCoreProgramConfig",
        repr(pc),
    )
    for name, flag in (("is_causal_mask", is_causal_mask), ("numeric_stable", numeric_stable)):
        expect(isinstance(flag, bool), op, name, "a bool", repr(flag))
    if scale is not None:
        expect(
            not isinstance(scale, bool)
            and isinstance(scale, (int, float, np.floating))
            and math.isfinite(scale),
            op,
            "scale",
            "a finite float or None",
            repr(scale),
        )
        expect(
            mask is not None, op, "scale", "no scale without a mask (ttnn applies it with the mask)", scale
        )
    if isinstance(pc, SoftmaxShardedMultiCoreProgramConfig):
        _check_sharded_softmax(op, x, pc)
    whole = False
    m = None
    if mask is not None:
        m, whole = _softmax_mask(op, mask, x, pc, is_causal_mask)
    factor = None if scale is None else np.float32(scale)
    rows = x.shape[-2]

    def run(values: np.ndarray, mask_values=None) -> np.ndarray:
        a = values if factor is None else values * factor
        if mask_values is not None:
            if m.layout is Layout.ROW_MAJOR:
                mask_values = mask_values.reshape(mask_values.shape[0], 1, 1, -1)
            add = mask_values[..., :rows, : a.shape[-1]] if whole else mask_values[..., :1, : a.shape[-1]]
            a = a + add
        return _softmax_last(np.asarray(a, dtype=np.float32), numeric_stable)

    results = map_shards(run, x) if m is None else map_shards(run, x, m)
    for i, values in enumerate(results):
        x._writable_shard(i, op)[...] = values
    return x
