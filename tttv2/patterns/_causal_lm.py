"""``CausalLM``: a decoder-only language model composed from its blocks, on either topology.

``CausalLM(embedding, rope, layers, norm, lm_head, vocab_size=, max_seq_len=)`` takes an embedding, a rotary
setup, a list of ``DecoderLayer``, the final norm and the LM head, checks that they share one topology and mesh,
and runs them with the library's decoder (``Decoder1D`` / ``Decoder2D``): ``prefill`` (one user's prompt → the
logits of its last token), ``decode`` (one token per user → logits per user) and greedy ``generate``. The blocks
stay reachable as attributes (``model.layers[0].attention``), which is what ``TestSuite`` tests.
"""

from __future__ import annotations

from tttv2.modules import (
    Decoder1D,
    Decoder2D,
    Embedding1D,
    Embedding2D,
    LMHead1D,
    LMHead2D,
    RMSNorm1D,
    RMSNorm2D,
    RotarySetup1D,
    RotarySetup2D,
)
from tttv2.patterns._decoder_layer import DecoderLayer

__all__ = ["CausalLM"]

# topology → (embedding, rope, norm, lm head, decoder)
_PARTS = {
    "1d": (Embedding1D, RotarySetup1D, RMSNorm1D, LMHead1D, Decoder1D),
    "2d": (Embedding2D, RotarySetup2D, RMSNorm2D, LMHead2D, Decoder2D),
}


class CausalLM:
    """See the module docstring. ``topology`` is "1d" or "2d"; ``decoder`` the ``Decoder1D`` / ``Decoder2D``."""

    def __init__(
        self,
        embedding,
        rope,
        layers: list[DecoderLayer],
        norm,
        lm_head,
        *,
        vocab_size: int,
        max_seq_len: int,
        max_prefill_chunk_size: int | None = None,
    ) -> None:
        layers = list(layers)
        if not layers or not all(isinstance(layer, DecoderLayer) for layer in layers):
            raise TypeError("CausalLM: layers must be a non-empty list of DecoderLayer")
        topology = layers[0].topology
        mesh = layers[0].attention.config.mesh_device
        embedding_class, rope_class, norm_class, head_class, decoder_class = _PARTS[topology]
        for name, part, cls in (
            ("embedding", embedding, embedding_class),
            ("rope", rope, rope_class),
            ("norm", norm, norm_class),
            ("lm_head", lm_head, head_class),
        ):
            if not isinstance(part, cls):
                raise TypeError(
                    f"CausalLM: on a {topology} mesh {name} must be a {cls.__name__}, got {type(part).__name__}"
                )
        for index, layer in enumerate(layers):
            if layer.topology != topology or layer.attention.config.mesh_device is not mesh:
                raise ValueError(f"CausalLM: layer {index} runs on another mesh or topology than layer 0")
        for name, part in (("embedding", embedding), ("rope", rope), ("norm", norm), ("lm_head", lm_head)):
            if part.config.mesh_device is not mesh:
                raise ValueError(f"CausalLM: {name} runs on another mesh than the layers")
        self.embedding, self.rope, self.layers, self.norm, self.lm_head = (
            embedding,
            rope,
            layers,
            norm,
            lm_head,
        )
        self.topology = topology
        self.mesh_device = mesh
        self.vocab_size = vocab_size
        self.max_seq_len = max_seq_len
        self.decoder = decoder_class(
            embedding,
            rope,
            [layer.block for layer in layers],
            norm,
            lm_head,
            vocab_size=vocab_size,
            max_seq_len=max_seq_len,
            max_prefill_chunk_size=max_prefill_chunk_size,
        )

    @property
    def max_batch_size(self) -> int:
        return self.decoder.dims.max_batch_size

    def load_device_weights(self) -> None:
        """Convert every weight now rather than on first use."""
        self.decoder.load_device_weights()

    def prefill(self, tokens, *, user_id: int = 0, page_table=None, block_size: int | None = None):
        """One user's prompt (token ids) → the logits of its last token [vocab] (float32)."""
        return self.decoder.prefill(tokens, user_id=user_id, page_table=page_table, block_size=block_size)

    def decode(self, tokens, positions, *, page_table=None):
        """One token per user at ``positions`` → logits [users, vocab] (float32)."""
        return self.decoder.decode(tokens, positions, page_table=page_table)

    def generate(
        self, prompts, max_new_tokens: int, *, page_table=None, block_size=None, return_logits=False
    ):
        """Greedy generation: prompts [users, S] → new tokens [users, max_new_tokens]."""
        return self.decoder.generate(
            prompts, max_new_tokens, page_table=page_table, block_size=block_size, return_logits=return_logits
        )
