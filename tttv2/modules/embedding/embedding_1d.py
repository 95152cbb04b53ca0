"""Embedding1D: token ids → rows of the embedding table, optionally scaled (Gemma-style ``embed_scale``).

The table is split over the devices along dim, like the residual stream it feeds: each device returns its
slice of every row. Decode (one token per user) and prefill (a prompt) run the same lookup; whether to scale is
bound at construction (no multiply at all when ``embed_scale == 1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tttv2 import ttnn
from tttv2.modules import _ccl
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, mode_name
from tttv2.modules._topology import num_devices, require_1d_mesh, resolve_mesh_device
from tttv2.modules.embedding._table import check_weights, resolve_table
from tttv2.modules.lazy_weight import LazyWeight, host_array

__all__ = ["Embedding1D", "Embedding1DConfig"]

_ON_2D = "Embedding2D"


@dataclass
class Embedding1DConfig:
    """Everything Embedding1D needs; ``None`` fields are resolved by ``Embedding1D``."""

    weights: LazyWeight  # [vocab, dim]
    mesh_device: Any = None
    embed_scale: float = 1.0
    vocab_size: int | None = None
    dim: int | None = None
    weights_dtype: Any = None
    weights_memcfg: Any = None
    output_memcfg: Any = None
    input_memcfg: Any = None  # where LazyWeight token ids are placed


def _resolve_embedding1d_config(config: Embedding1DConfig) -> Embedding1DConfig:
    owner = "Embedding1D"
    check_weights(owner, config.weights)
    mesh = resolve_mesh_device(owner, config.mesh_device, config.weights)
    require_1d_mesh(owner, mesh, _ON_2D)
    n = num_devices(mesh)
    mapper = ttnn.MeshMapperConfig([ttnn.PlacementShard(3)], ttnn.MeshShape(n))
    return resolve_table(config, owner, mesh, parts=n, parts_name="devices", mesh_mapper_config=mapper)


class Embedding1D(TTModule):
    """``Embedding1D(weights, embed_scale=1.0)``: weights [vocab, dim]."""

    CONFIG_CLASS = Embedding1DConfig
    HARDWARE = HardwareGroups(
        dtypes={"weights_dtype": ttnn.bfloat16},
        placement={
            "weights_memcfg": Placement("DRAM", "interleaved"),
            "output_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, weights: LazyWeight, embed_scale: float = 1.0) -> None:
        self._setup(Embedding1DConfig(weights=weights, embed_scale=embed_scale))

    _resolve_config = staticmethod(_resolve_embedding1d_config)

    def _bind(self) -> None:
        self._scale = _ccl.unchanged if self.config.embed_scale == 1.0 else self._scaled

    def forward(self, x, mode="prefill"):
        """Decode and prefill are the same lookup; ``mode`` is accepted for the common module interface."""
        mode_name("Embedding1D", mode)
        return self._lookup(x)

    def decode_forward(self, x):
        """uint32 ids [1, 1, 1, users] → [1, 1, users, dim / devices] per device."""
        return self._lookup(x)

    def prefill_forward(self, x):
        """uint32 ids [1, 1, 1, seq_len] → [1, 1, seq_len, dim / devices] per device."""
        return self._lookup(x)

    def _lookup(self, x):
        cfg = self.config
        ids = load_input(
            x,
            owner="Embedding1D",
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

    @classmethod
    def from_model_args(
        cls, mesh_device, args, weight_cache_path, state_dict, dtype, embed_scale=None
    ) -> Embedding1D:
        """tttv1's ``Embedding`` / ``ScaledEmbedding`` as an Embedding1D (``embed_scale=None``: the model's own,
        1.0 when it has none)."""
        if args.is_galaxy:
            raise ValueError(f"Embedding1D cannot be used for Galaxy devices; use {_ON_2D} instead")
        key = args.get_state_dict_prefix("", None) + "tok_embeddings.weight"
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path
        scale = embed_scale if embed_scale is not None else (args.embed_scale or 1.0)
        config = Embedding1DConfig(
            weights=LazyWeight(host_array(state_dict[key]), cache_dir=cache_dir, name=key),
            mesh_device=mesh_device,
            embed_scale=scale,
            weights_dtype=dtype,
            weights_memcfg=args.get_model_config()["EMB_WEIGHTS_MEMCFG"],
        )
        return cls.from_config(config)
