"""LMHead1D: the output projection ``x @ W`` (W [dim, vocab]) on a 1-D mesh.

The vocab is padded with zero columns to a multiple of 32 × devices and split evenly over the devices; each
device's run is cut into chunks of at most ``max_columns_per_device`` columns, one matmul each (DRAM-sharded
on an L1 width-sharded input). Each device returns the logits of its own vocab run, [1, 1, rows, padded vocab /
devices]: concatenated over the devices they are the padded vocab in order (the caller gathers and drops the
padding). No collective runs here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _grids
from tttv2.modules._hardware import HardwareGroups, MathSetting, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule
from tttv2.modules._topology import num_devices, require_1d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight, host_array

__all__ = ["LMHead1D", "LMHead1DConfig"]

# TTTv1's default chunk: Llama-3's 128256-column vocab over 8 devices
DEFAULT_MAX_COLUMNS_PER_DEVICE = 128256 // 8
_ON_2D = "LMHead2D"


# the same in both modes (TTTv1's presets leave the LM head alone; its ModelArgs sets lm_head_dtype bfloat16);
# LMHead2D has the same fields
HW_DTYPES = {"weights_dtype": ttnn.bfloat8_b, "output_dtype": ttnn.bfloat16}
HW_MATH = {
    "compute_kernel_config": MathSetting(ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=False, packer_l1_acc=True)
}


@dataclass
class LMHead1DConfig:
    """Everything LMHead1D needs; ``None`` fields are resolved by ``LMHead1D``."""

    weight: LazyWeight  # [dim, vocab] (TT-NN's [in, out] layout)
    mesh_device: Any = None
    max_columns_per_device: int = DEFAULT_MAX_COLUMNS_PER_DEVICE
    max_batch_size: int = 32
    dim: int | None = None
    vocab_size: int | None = None
    padded_vocab_size: int | None = None

    weights_dtype: Any = None
    output_dtype: Any = None
    compute_kernel_config: Any = None

    # per chunk (resolved from weight): the chunk weights, their per-device widths, programs and placements
    output_weights: list | None = None
    split_sizes: list | None = None
    program_configs: list | None = None
    weights_memcfgs: list | None = None

    input_memcfg: Any = None  # the activation the DRAM-sharded matmuls read
    matmul_output_memcfg: Any = None
    decode_output_memcfg: Any = None
    prefill_output_memcfg: Any = None


def _chunks(per_device: int, max_columns: int) -> list[int]:
    """Widths of the column chunks of one device's vocab run: all ``max_columns`` wide but the last."""
    count = math.ceil(per_device / max_columns)
    width = min(per_device, max_columns)
    return [width] * (count - 1) + [per_device - width * (count - 1)]


def _resolve_lm_head_1d_config(config: LMHead1DConfig) -> LMHead1DConfig:
    owner = "LMHead1D"
    if not isinstance(config.weight, LazyWeight):
        raise TypeError(f"{owner}: weight must be a LazyWeight, got {type(config.weight).__name__}")
    mesh = resolve_mesh_device(owner, config.mesh_device, config.weight)
    require_1d_mesh(owner, mesh, _ON_2D)
    n = num_devices(mesh)
    if len(config.weight.shape) != 2:
        raise ValueError(f"{owner}: weight must have shape (dim, vocab), got {config.weight.shape}")
    dim, vocab = config.weight.shape
    if config.dim is not None and config.dim != dim:
        raise ValueError(f"{owner}: dim {config.dim} does not match the weight's {dim} rows")
    if dim % _grids.TILE:
        raise ValueError(f"{owner}: dim must be a multiple of 32, got {dim}")
    max_columns = config.max_columns_per_device
    if max_columns < _grids.TILE or max_columns % _grids.TILE:
        raise ValueError(
            f"{owner}: max_columns_per_device must be a positive multiple of 32, got {max_columns}"
        )
    padded = config.padded_vocab_size or _grids.nearest_multiple(vocab, _grids.TILE * n)
    if padded < vocab or padded % (_grids.TILE * n):
        raise ValueError(
            f"{owner}: padded_vocab_size must be >= {vocab} and a multiple of {_grids.TILE * n}, got {padded}"
        )
    per_device = padded // n
    splits = config.split_sizes or _chunks(per_device, max_columns)
    if sum(splits) != per_device:
        raise ValueError(
            f"{owner}: split_sizes {splits} must add up to the {per_device} columns each device owns"
        )
    rows = _grids.nearest_multiple(config.max_batch_size, _grids.TILE)
    grid = _grids.grid_dividing(dim // _grids.TILE, per_device // _grids.TILE)
    dram_banks = mesh.dram_grid_size().x
    defaults = dict(
        mesh_device=mesh,
        dim=dim,
        vocab_size=vocab,
        padded_vocab_size=padded,
        split_sizes=splits,
        weights_dtype=ttnn.bfloat8_b,
        output_dtype=ttnn.bfloat8_b,
        compute_kernel_config=_grids.default_matmul_compute_config(),
        program_configs=[_grids.dram_sharded_matmul(rows, dim, width, grid.num_cores) for width in splits],
        weights_memcfgs=[_grids.dram_width_sharded(dim, width, dram_banks) for width in splits],
        input_memcfg=_grids.width_sharded(rows, dim, grid),
        matmul_output_memcfg=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
        decode_output_memcfg=ttnn.L1_MEMORY_CONFIG,
        prefill_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
    for name in ("program_configs", "weights_memcfgs"):
        if len(getattr(resolved, name)) != len(splits):
            raise ValueError(
                f"{owner}: {name} must have one entry per chunk ({len(splits)}), got {len(getattr(resolved, name))}"
            )
    output_weights = resolved.output_weights or _split_weight(resolved, n)
    return replace(resolved, output_weights=output_weights)


def _split_weight(config: LMHead1DConfig, n: int) -> list[LazyWeight]:
    """Chunk i holds, for every device in turn, that device's columns [offset_i, offset_i + width_i) of its
    vocab run; sharding the chunk's columns over the devices hands each its own."""
    source = host_array(config.weight.source)
    source = np.pad(source, ((0, 0), (0, config.padded_vocab_size - source.shape[-1])))
    per_device = config.padded_vocab_size // n
    chunks, offset = [], 0
    for index, (width, memcfg) in enumerate(zip(config.split_sizes, config.weights_memcfgs)):
        columns = [source[:, d * per_device + offset : d * per_device + offset + width] for d in range(n)]
        name = (
            f"{config.weight.name}.chunk{index}_of{len(config.split_sizes)}" if config.weight.name else None
        )
        chunk = replace(config.weight, source=np.concatenate(columns, axis=-1), name=name)
        chunks.append(
            chunk.with_defaults(
                device=config.mesh_device,
                dtype=config.weights_dtype,
                layout=ttnn.TILE_LAYOUT,
                memory_config=memcfg,
                mesh_mapper_config=ttnn.MeshMapperConfig([ttnn.PlacementShard(-1)], ttnn.MeshShape(n)),
            )
        )
        offset += width
    return chunks


class LMHead1D(TTModule):
    """``LMHead1D(weight, *, max_columns_per_device=16032)``: weight [dim, vocab]."""

    CONFIG_CLASS = LMHead1DConfig
    HARDWARE = HardwareGroups(
        dtypes=HW_DTYPES,
        math=HW_MATH,
        placement={
            "input_memcfg": Placement("L1", "width_sharded"),
            "decode_output_memcfg": Placement("L1", "interleaved"),
            "prefill_output_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(
        self, weight: LazyWeight, *, max_columns_per_device: int = DEFAULT_MAX_COLUMNS_PER_DEVICE
    ) -> None:
        self._setup(LMHead1DConfig(weight=weight, max_columns_per_device=max_columns_per_device))

    _resolve_config = staticmethod(_resolve_lm_head_1d_config)

    def load_device_weights(self) -> None:
        """Convert the vocab chunks now; ``weight`` is only their host source and is never converted whole."""
        for chunk in self.config.output_weights:
            chunk.get_device_weight()

    def _bind(self) -> None:
        cfg = self.config
        unshard = cfg.matmul_output_memcfg.is_sharded()
        self._unshard = ttnn.sharded_to_interleaved if unshard else _keep_layout
        self._chunks = list(zip(cfg.output_weights, cfg.program_configs))

    def decode_forward(self, x):
        """[1, 1, rows, dim] → [1, 1, rows, padded vocab / devices] per device, in L1."""
        return self._logits(x, self.config.decode_output_memcfg, "LMHead1D.decode_forward")

    def prefill_forward(self, x):
        """The same projection for the rows prefill keeps (the last token's tile), out to DRAM."""
        return self._logits(x, self.config.prefill_output_memcfg, "LMHead1D.prefill_forward")

    def _logits(self, x, output_memcfg, owner):
        cfg = self.config
        x = load_input(x, owner=owner, device=cfg.mesh_device, memory_config=cfg.input_memcfg)
        pieces = []
        for weight, program_config in self._chunks:
            piece = ttnn.linear(
                x,
                weight.get_device_weight(),
                program_config=program_config,
                compute_kernel_config=cfg.compute_kernel_config,
                memory_config=cfg.matmul_output_memcfg,
                dtype=cfg.output_dtype,
            )
            pieces.append(self._unshard(piece, memory_config=output_memcfg))
        return ttnn.concat(pieces, dim=-1, memory_config=output_memcfg)

    @classmethod
    def from_model_args(
        cls,
        mesh_device,
        args,
        state_dict,
        state_dict_prefix: str,
        weight_cache_path,
        max_columns_per_device: int,
        dtype=None,
    ) -> LMHead1D:
        """tttv1's ``LMHead`` (non-Galaxy) as an LMHead1D: same padding, chunks, program configs and dtypes."""
        if args.is_galaxy:
            raise ValueError(f"LMHead1D cannot be used for Galaxy devices; use {_ON_2D} instead")
        from tttv1.tt.common import Mode

        key = f"{state_dict_prefix}output.weight"
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path
        per_device = args.padded_vocab_size // args.num_devices
        splits = _chunks(per_device, max_columns_per_device)
        config = LMHead1DConfig(
            weight=LazyWeight(host_array(state_dict[key]).T.copy(), cache_dir=cache_dir, name=key),
            mesh_device=mesh_device,
            max_columns_per_device=max_columns_per_device,
            max_batch_size=args.max_batch_size,
            padded_vocab_size=args.padded_vocab_size,
            split_sizes=splits,
            weights_dtype=dtype or ttnn.bfloat8_b,
            output_dtype=args.lm_head_dtype or ttnn.bfloat8_b,
            compute_kernel_config=_grids.compute_kernel_config(
                ttnn.MathFidelity.HiFi2, fp32_acc=False, l1_acc=True
            ),
            program_configs=[args.get_lm_head_program_config(width, None) for width in splits],
            weights_memcfgs=[args.create_dram_sharded_mem_config(k=args.dim, n=width) for width in splits],
            input_memcfg=args.get_model_config()["LM_HEAD_INPUT_MEMCFG"],
            matmul_output_memcfg=args.get_lm_head_sharded_output_mem_config(None),
            decode_output_memcfg=args.get_lm_head_output_mem_config(Mode.DECODE, None),
            prefill_output_memcfg=args.get_lm_head_output_mem_config(Mode.PREFILL, None),
        )
        return cls.from_config(config)


def _keep_layout(piece, memory_config):
    return piece
