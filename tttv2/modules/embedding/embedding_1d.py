"""Embedding1D: token ids → rows of the embedding table, optionally scaled (Gemma-style ``embed_scale``).

The table is split over the devices along dim, like the residual stream it feeds: each device returns its
slice of every row. Decode (one token per user) and prefill (a prompt) run the same lookup; whether to scale is
bound at construction (no multiply at all when ``embed_scale == 1``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tttv2 import ttnn
from tttv2.modules import _ccl
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, mode_name
from tttv2.modules._topology import num_devices, require_1d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight, host_array

__all__ = ["Embedding1D", "Embedding1DConfig"]

_NO_2D = "a 1-D submesh (there is no 2-D embedding module yet)"


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
    if not isinstance(config.weights, LazyWeight):
        raise TypeError(f"{owner}: weights must be a LazyWeight, got {type(config.weights).__name__}")
    mesh = resolve_mesh_device(owner, config.mesh_device, config.weights)
    require_1d_mesh(owner, mesh, _NO_2D)
    n = num_devices(mesh)
    shape = config.weights.shape
    if len(shape) not in (2, 4) or (len(shape) == 4 and shape[:2] != (1, 1)):
        raise ValueError(f"{owner}: weights must have shape (vocab, dim) or (1, 1, vocab, dim), got {shape}")
    vocab, dim = shape[-2:]
    if dim % n:
        raise ValueError(f"{owner}: dim {dim} must split evenly over the {n} devices")
    if config.embed_scale is None:
        raise ValueError(f"{owner}: embed_scale must be a number, got None")
    defaults = dict(
        mesh_device=mesh,
        vocab_size=vocab,
        dim=dim,
        weights_dtype=ttnn.bfloat16,
        weights_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
    weights = resolved.weights
    if len(shape) == 2:  # the lookup reads a [1, 1, vocab, dim] table
        weights = replace(weights, source=host_array(weights.source).reshape(1, 1, vocab, dim))
    weights = weights.with_defaults(
        device=mesh,
        dtype=resolved.weights_dtype,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        memory_config=resolved.weights_memcfg,
        mesh_mapper_config=ttnn.MeshMapperConfig([ttnn.PlacementShard(3)], ttnn.MeshShape(n)),
    )
    return replace(resolved, weights=weights)


class Embedding1D(TTModule):
    """``Embedding1D(weights, embed_scale=1.0)``: weights [vocab, dim]."""

    CONFIG_CLASS = Embedding1DConfig

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
            raise ValueError(f"Embedding1D cannot be used for Galaxy devices; run it on {_NO_2D}")
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
