"""Program configs and compute-kernel configs: frozen, hashable, validated on construction.

Constructors only check what a config can know alone (positive sizes, types). Whether a config fits the
shapes of a particular call is checked by the op (see ``tttv2.ttnn.ops.matmul`` and friends), as on hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from .errors import ValidationError
from .memory import CoreCoord, CoreRangeSet
from .types import Arch, MathFidelity, UnaryOpType, UnaryWithParam

__all__ = [
    "BlackholeComputeKernelConfig",
    "DeviceComputeKernelConfig",
    "LayerNormDefaultProgramConfig",
    "LayerNormShardedMultiCoreProgramConfig",
    "MatmulMultiCoreReuseMultiCast1DProgramConfig",
    "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig",
    "MatmulMultiCoreReuseMultiCastProgramConfig",
    "MatmulMultiCoreReuseProgramConfig",
    "MinimalMatmulConfig",
    "SDPAProgramConfig",
    "SoftmaxDefaultProgramConfig",
    "SoftmaxShardedMultiCoreProgramConfig",
    "WormholeComputeKernelConfig",
    "init_device_compute_kernel_config",
]


def _grid(owner: str, value) -> CoreCoord:
    if isinstance(value, CoreCoord):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return CoreCoord(int(value[0]), int(value[1]))
    if hasattr(value, "x") and hasattr(value, "y"):
        return CoreCoord(int(value.x), int(value.y))
    raise ValidationError(
        f"{owner}: compute_with_storage_grid_size must be a CoreCoord or (x, y), got {value!r}"
    )


def _positive(owner: str, obj, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(f"{owner}: {name} must be a positive int, got {value!r}")


def _activation(owner: str, value):
    if value is None or isinstance(value, UnaryWithParam):
        return value
    if isinstance(value, UnaryOpType):
        return UnaryWithParam(value)
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], UnaryOpType):
        return UnaryWithParam(value[0], value[1] if len(value) > 1 else None)
    raise ValidationError(
        f"{owner}: fused_activation must be a UnaryWithParam, UnaryOpType or None, got {value!r}"
    )


class _Config:
    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"{type(self).__name__}({inner})"


@dataclass(frozen=True, repr=False)
class MatmulMultiCoreReuseProgramConfig(_Config):
    compute_with_storage_grid_size: CoreCoord
    in0_block_w: int
    out_subblock_h: int
    out_subblock_w: int
    per_core_M: int
    per_core_N: int

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        _positive(owner, self, "in0_block_w", "out_subblock_h", "out_subblock_w", "per_core_M", "per_core_N")


@dataclass(frozen=True, repr=False)
class MatmulMultiCoreReuseMultiCastProgramConfig(_Config):
    """2-D multicast matmul: the output is tiled over a grid of x × y cores."""

    compute_with_storage_grid_size: CoreCoord
    in0_block_w: int
    out_subblock_h: int
    out_subblock_w: int
    per_core_M: int
    per_core_N: int
    transpose_mcast: bool = False
    fused_activation: UnaryWithParam | None = None
    fuse_batch: bool = True
    out_block_h: int | None = None
    out_block_w: int | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        object.__setattr__(self, "fused_activation", _activation(owner, self.fused_activation))
        _positive(owner, self, "in0_block_w", "out_subblock_h", "out_subblock_w", "per_core_M", "per_core_N")
        _check_subblocks(owner, self)


@dataclass(frozen=True, repr=False)
class MatmulMultiCoreReuseMultiCast1DProgramConfig(_Config):
    """1-D multicast matmul: output blocks of per_core_M × per_core_N tiles are laid out over the grid in order."""

    compute_with_storage_grid_size: CoreCoord
    in0_block_w: int
    out_subblock_h: int
    out_subblock_w: int
    per_core_M: int
    per_core_N: int
    fuse_batch: bool = True
    fused_activation: UnaryWithParam | None = None
    mcast_in0: bool = True
    gather_in0: bool = False
    hop_cores: object = None
    num_global_cb_receivers: int = 1
    untilize_out: bool = False
    out_block_h: int | None = None
    out_block_w: int | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        object.__setattr__(self, "fused_activation", _activation(owner, self.fused_activation))
        _positive(owner, self, "in0_block_w", "out_subblock_h", "out_subblock_w", "per_core_M", "per_core_N")
        _check_subblocks(owner, self)


@dataclass(frozen=True, repr=False)
class MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(_Config):
    """Decode matmul whose weights are width-sharded over DRAM banks and activations width-sharded in L1."""

    in0_block_w: int
    per_core_M: int
    per_core_N: int
    fused_activation: UnaryWithParam | None = None
    num_workers_per_dram_bank: int = 1

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(self, "fused_activation", _activation(owner, self.fused_activation))
        _positive(owner, self, "in0_block_w", "per_core_M", "per_core_N", "num_workers_per_dram_bank")


def _check_subblocks(owner: str, cfg) -> None:
    if cfg.per_core_M % cfg.out_subblock_h:
        raise ValidationError(
            f"{owner}: out_subblock_h {cfg.out_subblock_h} must divide per_core_M {cfg.per_core_M}"
        )
    if cfg.per_core_N % cfg.out_subblock_w:
        raise ValidationError(
            f"{owner}: out_subblock_w {cfg.out_subblock_w} must divide per_core_N {cfg.per_core_N}"
        )
    if cfg.out_subblock_h * cfg.out_subblock_w > 8:
        raise ValidationError(
            f"{owner}: out_subblock_h × out_subblock_w must be <= 8 tiles (destination registers), "
            f"got {cfg.out_subblock_h} × {cfg.out_subblock_w}"
        )


@dataclass(frozen=True, repr=False)
class MinimalMatmulConfig(_Config):
    """Config of ``ttnn.experimental.minimal_matmul`` (block sizes in tiles)."""

    M_block_size: int = 8
    K_block_size: int = 8
    N_block_size: int = 8
    subblock_h: int = 2
    subblock_w: int = 2
    compute_with_storage_grid_size: CoreCoord = field(default_factory=lambda: CoreCoord(8, 8))

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        _positive(owner, self, "M_block_size", "K_block_size", "N_block_size", "subblock_h", "subblock_w")


@dataclass(frozen=True, repr=False)
class LayerNormDefaultProgramConfig(_Config):
    legacy_reduction: bool = False
    legacy_rsqrt: bool = False


@dataclass(frozen=True, repr=False)
class LayerNormShardedMultiCoreProgramConfig(_Config):
    """Sharded norm: each core holds block_h × block_w tiles of the input."""

    compute_with_storage_grid_size: CoreCoord
    subblock_w: int
    block_h: int
    block_w: int
    inplace: bool = False

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        _positive(owner, self, "subblock_w", "block_h", "block_w")
        if self.block_w % self.subblock_w:
            raise ValidationError(f"{owner}: subblock_w {self.subblock_w} must divide block_w {self.block_w}")


@dataclass(frozen=True, repr=False)
class SoftmaxDefaultProgramConfig(_Config):
    """Softmax on the interleaved (or any) layout, the op choosing its blocking."""


_SOFTMAX_SIZES = ("subblock_w", "block_h", "block_w")


@dataclass(eq=True, repr=False)
class SoftmaxShardedMultiCoreProgramConfig(_Config):
    """Sharded softmax: each core of the ``compute_with_storage_grid_size`` rectangle holds block_h × block_w
    tiles. Unlike the other configs its fields can be set after construction, as ttnn binds them read-write:
    tt-metal's Falcon-40B decode sets ``block_w`` to the KV length of each step (``progcfg.block_w = n // 32``).
    Each assignment is checked as the constructor checks it. Compared by value; not hashable (it can change)."""

    compute_with_storage_grid_size: CoreCoord
    subblock_w: int
    block_h: int
    block_w: int

    __hash__ = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_built", True)
        self._check()

    def __setattr__(self, name: str, value) -> None:
        if not getattr(self, "_built", False):
            object.__setattr__(self, name, value)
            return
        if name not in ("compute_with_storage_grid_size", *_SOFTMAX_SIZES):
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        old = getattr(self, name)
        object.__setattr__(self, name, value)
        try:
            self._check()
        except ValidationError:
            object.__setattr__(self, name, old)
            raise

    def _check(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        _positive(owner, self, *_SOFTMAX_SIZES)
        if self.block_w % self.subblock_w:
            raise ValidationError(f"{owner}: subblock_w {self.subblock_w} must divide block_w {self.block_w}")


@dataclass(frozen=True, repr=False)
class SDPAProgramConfig(_Config):
    """Flash-attention chunking: q_chunk_size / k_chunk_size in rows (0 = let the op choose, decode only).

    ``sub_core_grids`` (a CoreRangeSet) names the cores the op runs on instead of the
    ``compute_with_storage_grid_size`` rectangle, as the Llama-3 70B Galaxy demo's decode config does (its
    rectangle, 8x4, is wider than the Galaxy's 7x10 grid and is not used then)."""

    compute_with_storage_grid_size: CoreCoord
    q_chunk_size: int = 0
    k_chunk_size: int = 0
    exp_approx_mode: bool = True
    max_cores_per_head_batch: int = 16
    sub_core_grids: CoreRangeSet | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(
            self, "compute_with_storage_grid_size", _grid(owner, self.compute_with_storage_grid_size)
        )
        if self.sub_core_grids is not None and not isinstance(self.sub_core_grids, CoreRangeSet):
            raise ValidationError(
                f"{owner}: sub_core_grids must be a CoreRangeSet or None, got {self.sub_core_grids!r}"
            )
        for name in ("q_chunk_size", "k_chunk_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"{owner}: {name} must be a non-negative int, got {value!r}")
            if value and value % 32:
                raise ValidationError(f"{owner}: {name} must be a multiple of 32 (one tile), got {value}")


@dataclass(frozen=True, repr=False)
class WormholeComputeKernelConfig(_Config):
    """How the FPU computes: multiplier fidelity, approximate SFPU math and fp32 accumulation."""

    math_fidelity: MathFidelity = MathFidelity.HiFi4
    math_approx_mode: bool = False
    fp32_dest_acc_en: bool = False
    packer_l1_acc: bool = False
    dst_full_sync_en: bool = False
    throttle_level: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.math_fidelity, MathFidelity):
            raise ValidationError(
                f"{type(self).__name__}: math_fidelity must be a ttnn.MathFidelity, got {self.math_fidelity!r}"
            )


class BlackholeComputeKernelConfig(WormholeComputeKernelConfig):
    """Blackhole uses the same knobs."""


DeviceComputeKernelConfig = WormholeComputeKernelConfig


def init_device_compute_kernel_config(
    arch: Arch,
    config: WormholeComputeKernelConfig | None = None,
    *,
    math_fidelity: MathFidelity = MathFidelity.LoFi,
    math_approx_mode: bool = True,
    fp32_dest_acc_en: bool = False,
    packer_l1_acc: bool = False,
    dst_full_sync_en: bool = False,
) -> WormholeComputeKernelConfig:
    """Return ``config`` if given, else a config for ``arch`` built from the keyword defaults."""
    if not isinstance(arch, Arch):
        raise ValidationError(f"init_device_compute_kernel_config: arch must be a ttnn.Arch, got {arch!r}")
    if config is not None:
        if not isinstance(config, WormholeComputeKernelConfig):
            raise ValidationError(
                f"init_device_compute_kernel_config: config must be a compute kernel config, got {config!r}"
            )
        return config
    cls = BlackholeComputeKernelConfig if arch is Arch.BLACKHOLE else WormholeComputeKernelConfig
    return cls(
        math_fidelity=math_fidelity,
        math_approx_mode=math_approx_mode,
        fp32_dest_acc_en=fp32_dest_acc_en,
        packer_l1_acc=packer_l1_acc,
        dst_full_sync_en=dst_full_sync_en,
    )
