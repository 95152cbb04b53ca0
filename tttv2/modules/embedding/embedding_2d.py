"""Embedding2D: token ids → rows of the embedding table on a Galaxy (2-D mesh), optionally scaled.

The table is split along dim over the mesh columns and replicated over the rows, like the residual stream the
2-D blocks keep (fractured over the columns, replicated over the rows): each device returns its column's slice of
every row. Decode and prefill run the same lookup; the scale is bound at construction (no multiply when 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tttv2 import ttnn
from tttv2.modules import _ccl
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, mode_name
from tttv2.modules._topology import mesh_shape, require_2d_mesh, resolve_mesh_device
from tttv2.modules.embedding._table import check_weights, resolve_table
from tttv2.modules.lazy_weight import LazyWeight

__all__ = ["Embedding2D", "Embedding2DConfig"]

_OWNER = "Embedding2D"


@dataclass
class Embedding2DConfig:
    """Everything Embedding2D needs; ``None`` fields are resolved by ``Embedding2D``."""

    weights: LazyWeight  # [vocab, dim]
    mesh_device: Any = None
    embed_scale: float = 1.0
    vocab_size: int | None = None
    dim: int | None = None
    weights_dtype: Any = None
    weights_memcfg: Any = None
    output_memcfg: Any = None
    input_memcfg: Any = None  # where LazyWeight token ids are placed


def _resolve_embedding2d_config(config: Embedding2DConfig) -> Embedding2DConfig:
    check_weights(_OWNER, config.weights)
    mesh = resolve_mesh_device(_OWNER, config.mesh_device, config.weights)
    require_2d_mesh(_OWNER, mesh, "Embedding1D")
    rows, cols = mesh_shape(mesh)
    mapper = ttnn.MeshMapperConfig(
        [ttnn.PlacementReplicate(), ttnn.PlacementShard(3)], ttnn.MeshShape(rows, cols)
    )
    return resolve_table(
        config, _OWNER, mesh, parts=cols, parts_name="mesh columns", mesh_mapper_config=mapper
    )


class Embedding2D(TTModule):
    """``Embedding2D(weights, embed_scale=1.0)``: weights [vocab, dim], on an R×C mesh."""

    CONFIG_CLASS = Embedding2DConfig
    HARDWARE = HardwareGroups(
        dtypes={"weights_dtype": ttnn.bfloat16},
        placement={
            "weights_memcfg": Placement("DRAM", "interleaved"),
            "output_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, weights: LazyWeight, embed_scale: float = 1.0) -> None:
        self._setup(Embedding2DConfig(weights=weights, embed_scale=embed_scale))

    _resolve_config = staticmethod(_resolve_embedding2d_config)

    def _bind(self) -> None:
        self._scale = _ccl.unchanged if self.config.embed_scale == 1.0 else self._scaled

    def forward(self, x, mode="prefill"):
        """Decode and prefill are the same lookup; ``mode`` is accepted for the common module interface."""
        mode_name(_OWNER, mode)
        return self._lookup(x)

    def decode_forward(self, x):
        """uint32 ids [1, 1, 1, users] (replicated) → [1, 1, users, dim / columns] per device."""
        return self._lookup(x)

    def prefill_forward(self, x):
        """uint32 ids [1, 1, 1, seq_len] (replicated) → [1, 1, seq_len, dim / columns] per device."""
        return self._lookup(x)

    def _lookup(self, x):
        cfg = self.config
        ids = load_input(
            x,
            owner=_OWNER,
            device=cfg.mesh_device,
            memory_config=cfg.input_memcfg,
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
        )
        rows = ttnn.embedding(
            ids, cfg.weights.get_device_weight(), layout=ttnn.TILE_LAYOUT, memory_config=cfg.output_memcfg
        )
        return ttnn.unsqueeze_to_4D(self._scale(rows))

    def _scaled(self, rows):
        return ttnn.multiply(rows, self.config.embed_scale, memory_config=self.config.output_memcfg)
