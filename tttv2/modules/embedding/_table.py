"""What Embedding1D and Embedding2D resolve alike: the table's shape, the scale, dtype and placements, and the
table as a [1, 1, vocab, dim] row-major LazyWeight split along dim as the topology's ``mesh_mapper_config`` says."""

from __future__ import annotations

from dataclasses import replace

from tttv2 import ttnn
from tttv2.modules.lazy_weight import LazyWeight, host_array


def resolve_table(config, owner: str, mesh, *, parts: int, parts_name: str, mesh_mapper_config):
    """A resolved copy of an embedding config; ``dim`` must split into ``parts`` (the devices / columns)."""
    shape = config.weights.shape
    if len(shape) not in (2, 4) or (len(shape) == 4 and shape[:2] != (1, 1)):
        raise ValueError(f"{owner}: weights must have shape (vocab, dim) or (1, 1, vocab, dim), got {shape}")
    vocab, dim = shape[-2:]
    if dim % parts:
        raise ValueError(f"{owner}: dim {dim} must split evenly over the {parts} {parts_name}")
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
        mesh_mapper_config=mesh_mapper_config,
    )
    return replace(resolved, weights=weights)


def check_weights(owner: str, weights) -> None:
    if not isinstance(weights, LazyWeight):
        raise TypeError(f"{owner}: weights must be a LazyWeight, got {type(weights).__name__}")
