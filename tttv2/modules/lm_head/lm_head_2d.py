"""LMHead2D: the final projection to the vocabulary on a Galaxy (2-D mesh).

The [dim, padded vocab] weight is split both ways: the vocab over the mesh rows, dim over the columns (the
residual stream arrives fractured over the columns). Each device's product is a partial sum over its slice of
dim; the partial sums are all-reduced over the columns (reduce-scatter, then all-gather). Concatenated over the
rows, the logits are the padded vocab in order; every column holds the same sum.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule
from tttv2.modules._topology import default_topology, mesh_shape, require_2d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight, host_array
from tttv2.modules.lm_head.lm_head_1d import HW_DTYPES, HW_MATH
from tttv2.modules.tt_ccl import (
    CCL_CHUNKS_PER_SYNC,
    CCL_NUM_BUFFERS_PER_CHANNEL,
    CCL_NUM_WORKERS_PER_LINK,
    get_tt_ccl,
)

__all__ = ["LMHead2D", "LMHead2DConfig"]

_OWNER = "LMHead2D"


@dataclass
class LMHead2DConfig:
    """Everything LMHead2D needs; ``None`` fields are resolved by ``LMHead2D``."""

    weight: LazyWeight  # [dim, vocab] (TT-NN's [in, out] layout)
    mesh_device: Any = None
    tt_ccl: Any = None
    topology: Any = None
    num_links: int = 1  # links of the all-gather over the columns
    ccl_chunks_per_sync: int = CCL_CHUNKS_PER_SYNC
    ccl_num_workers_per_link: int = CCL_NUM_WORKERS_PER_LINK
    ccl_num_buffers_per_channel: int = CCL_NUM_BUFFERS_PER_CHANNEL

    dim: int | None = None
    vocab_size: int | None = None
    padded_vocab_size: int | None = None  # a multiple of 32 × devices (each row's run whole tiles)

    weights_dtype: Any = None
    output_dtype: Any = None
    compute_kernel_config: Any = None
    weights_memcfg: Any = None
    input_memcfg: Any = None  # where LazyWeight inputs are placed
    decode_output_memcfg: Any = None
    prefill_output_memcfg: Any = None


def _resolve_lm_head_2d_config(config: LMHead2DConfig) -> LMHead2DConfig:
    if not isinstance(config.weight, LazyWeight):
        raise TypeError(f"{_OWNER}: weight must be a LazyWeight, got {type(config.weight).__name__}")
    mesh = resolve_mesh_device(_OWNER, config.mesh_device, config.weight)
    require_2d_mesh(_OWNER, mesh, "LMHead1D")
    rows, cols = mesh_shape(mesh)
    shape = config.weight.shape
    if len(shape) != 2:
        raise ValueError(f"{_OWNER}: weight must have shape (dim, vocab), got {shape}")
    dim, vocab = shape
    if dim % (_grids.TILE * cols):
        raise ValueError(
            f"{_OWNER}: dim must be a multiple of {_grids.TILE * cols} (32 × {cols} columns), got {dim}"
        )
    padded = config.padded_vocab_size or _grids.nearest_multiple(vocab, _grids.TILE * rows * cols)
    if padded < vocab or padded % (_grids.TILE * rows):
        raise ValueError(
            f"{_OWNER}: padded_vocab_size must be >= {vocab} and a multiple of {_grids.TILE * rows} "
            f"(32 × {rows} rows), got {padded}"
        )
    defaults = dict(
        mesh_device=mesh,
        tt_ccl=get_tt_ccl(mesh),
        topology=default_topology(mesh),
        dim=dim,
        vocab_size=vocab,
        padded_vocab_size=padded,
        weights_dtype=ttnn.bfloat8_b,
        output_dtype=ttnn.bfloat8_b,
        compute_kernel_config=_grids.compute_kernel_config(
            ttnn.MathFidelity.HiFi2, fp32_acc=False, l1_acc=True
        ),
        weights_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        decode_output_memcfg=ttnn.L1_MEMORY_CONFIG,
        prefill_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
    source = np.pad(host_array(resolved.weight.source), ((0, 0), (0, padded - vocab)))
    weight = replace(resolved.weight, source=np.ascontiguousarray(source.reshape(1, 1, dim, padded)))
    weight = weight.with_defaults(
        device=mesh,
        dtype=resolved.weights_dtype,
        layout=ttnn.TILE_LAYOUT,
        memory_config=resolved.weights_memcfg,
        mesh_mapper_config=ttnn.MeshMapperConfig(
            [ttnn.PlacementShard(3), ttnn.PlacementShard(2)], ttnn.MeshShape(rows, cols)
        ),
    )
    return replace(resolved, weight=weight)


class LMHead2D(TTModule):
    """``LMHead2D(weight)``: weight [dim, vocab], on an R×C mesh."""

    CONFIG_CLASS = LMHead2DConfig
    HARDWARE = HardwareGroups(
        dtypes=HW_DTYPES,
        math=HW_MATH,
        placement={
            "weights_memcfg": Placement("DRAM", "interleaved"),
            "decode_output_memcfg": Placement("L1", "interleaved"),
            "prefill_output_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, weight: LazyWeight) -> None:
        self._setup(LMHead2DConfig(weight=weight))

    _resolve_config = staticmethod(_resolve_lm_head_2d_config)

    def _bind(self) -> None:
        rows, cols = mesh_shape(self.config.mesh_device)
        # LazyWeight inputs: the column-fractured residual, replicated over the rows
        self._input_mapper = ttnn.MeshMapperConfig(
            [ttnn.PlacementReplicate(), ttnn.PlacementShard(3)], ttnn.MeshShape(rows, cols)
        )

    def decode_forward(self, x):
        """[1, 1, rows, dim / columns] per device → [1, 1, rows, padded vocab / mesh rows] (DRAM)."""
        return self._project(x, self.config.decode_output_memcfg)

    def prefill_forward(self, x):
        """[1, 1, S, dim / columns] per device → [1, 1, S, padded vocab / mesh rows] (DRAM)."""
        return self._project(x, self.config.prefill_output_memcfg)

    def _project(self, x, output_memcfg):
        cfg = self.config
        x = load_input(
            x,
            owner=_OWNER,
            device=cfg.mesh_device,
            memory_config=cfg.input_memcfg,
            mesh_mapper_config=self._input_mapper,
        )
        logits = ttnn.linear(
            x,
            cfg.weight.get_device_weight(),
            compute_kernel_config=cfg.compute_kernel_config,
            memory_config=ttnn.L1_MEMORY_CONFIG,
            dtype=cfg.output_dtype,
        )
        # TTTv1's sequence: the (single) chunk concatenated into the output placement, then to DRAM
        logits = ttnn.concat([logits], dim=-1, memory_config=output_memcfg)
        logits = ttnn.to_memory_config(logits, ttnn.DRAM_MEMORY_CONFIG)
        partial = _ccl.reduce_scatter(
            logits, cfg, dim=3, cluster_axis=1, memory_config=ttnn.DRAM_MEMORY_CONFIG, num_links=1
        )
        return _ccl.all_gather(
            partial,
            cfg,
            dim=3,
            cluster_axis=1,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            num_links=cfg.num_links,
        )
