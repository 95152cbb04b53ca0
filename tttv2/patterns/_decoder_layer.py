"""``DecoderLayer``: one transformer decoder layer composed from four building blocks, on either topology.

``DecoderLayer(attention, ffn, attention_norm, ffn_norm, residual_pattern="pre_norm")`` checks that the blocks
fit together (one topology, one mesh, one model width) and runs them as the library's transformer block
(``TransformerBlock1D`` on 1xN meshes, ``TransformerBlock2D`` on a Galaxy): norm → attention → residual add →
norm → FFN → residual add, on the residual stream fractured over the devices.

On a 1xN mesh the decode path hands each norm's width-sharded output straight to the next matmul, so the norm must
write the layout that matmul reads. A norm built with another layout is rebuilt from its own (resolved) config
with the consumer's layout: same weights, same settings; ``layer.attention_norm`` / ``layer.ffn_norm`` are then
the rebuilt modules.
"""

from __future__ import annotations

from dataclasses import replace

from tttv2.modules import (
    MLP1D,
    MLP2D,
    Attention1D,
    Attention2D,
    RMSNorm1D,
    RMSNorm2D,
    TransformerBlock1D,
    TransformerBlock2D,
)

__all__ = ["RESIDUAL_PATTERNS", "DecoderLayer"]

RESIDUAL_PATTERNS = ("pre_norm",)

# topology → (attention, ffn, norm, block)
_TOPOLOGIES = {
    "1d": (Attention1D, MLP1D, RMSNorm1D, TransformerBlock1D),
    "2d": (Attention2D, MLP2D, RMSNorm2D, TransformerBlock2D),
}


def _topology_of(attention) -> str:
    for name, (attention_class, *_) in _TOPOLOGIES.items():
        if isinstance(attention, attention_class):
            return name
    raise TypeError(
        f"DecoderLayer: attention must be an Attention1D or Attention2D, got {type(attention).__name__}"
    )


def _feeding(norm, consumer_layout):
    """``norm``, or a copy built from its config that writes ``consumer_layout`` in decode."""
    if norm.config.decode_memory_config == consumer_layout:
        return norm
    config = replace(
        norm.config,
        decode_memory_config=consumer_layout,
        decode_program_config=None,
        decode_input_memcfg=None,
    )
    return type(norm).from_config(config)


class DecoderLayer:
    """See the module docstring. ``topology`` is "1d" or "2d"; ``block`` the transformer block that runs."""

    def __init__(self, attention, ffn, attention_norm, ffn_norm, residual_pattern: str = "pre_norm") -> None:
        if residual_pattern not in RESIDUAL_PATTERNS:
            raise ValueError(
                f"DecoderLayer: residual_pattern must be one of {', '.join(RESIDUAL_PATTERNS)}, got "
                f"{residual_pattern!r} (the library's transformer blocks are pre-norm)"
            )
        self.topology = _topology_of(attention)
        _, ffn_class, norm_class, block_class = _TOPOLOGIES[self.topology]
        for name, part, cls in (
            ("ffn", ffn, ffn_class),
            ("attention_norm", attention_norm, norm_class),
            ("ffn_norm", ffn_norm, norm_class),
        ):
            if not isinstance(part, cls):
                raise TypeError(
                    f"DecoderLayer: with a {type(attention).__name__}, {name} must be a {cls.__name__}, got "
                    f"{type(part).__name__}"
                )
        mesh = attention.config.mesh_device
        dim = attention.config.dim
        for name, part in (("ffn", ffn), ("attention_norm", attention_norm), ("ffn_norm", ffn_norm)):
            if part.config.mesh_device is not mesh:
                raise ValueError(f"DecoderLayer: {name} runs on another mesh than the attention")
            if part.config.dim != dim:
                raise ValueError(f"DecoderLayer: {name} has dim {part.config.dim}, the attention {dim}")
        if self.topology == "1d":
            attention_norm = _feeding(attention_norm, attention.config.decode_input_memcfg)
            ffn_norm = _feeding(ffn_norm, ffn.config.decode_input_memcfg)
        self.attention, self.ffn = attention, ffn
        self.attention_norm, self.ffn_norm = attention_norm, ffn_norm
        self.residual_pattern = residual_pattern
        self.block = block_class(attention_norm, attention, ffn_norm, ffn)
        # the block's paths, bound once: forward(x, current_pos, rot_mats, user_id=0, mode="decode", ...),
        # decode_forward(x, current_pos, rot_mats, ...), prefill_forward(x, rot_mats, user_id=0, ...)
        self.forward = self.block.forward
        self.decode_forward = self.block.decode_forward
        self.prefill_forward = self.block.prefill_forward

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def load_device_weights(self) -> None:
        self.block.load_device_weights()

    def parts(self) -> dict:
        """The four blocks by role."""
        return {
            "attention": self.attention,
            "ffn": self.ffn,
            "attention_norm": self.attention_norm,
            "ffn_norm": self.ffn_norm,
        }
