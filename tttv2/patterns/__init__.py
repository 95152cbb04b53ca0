"""Architectural patterns composed from the building blocks: ``DecoderLayer`` (one pre-norm decoder layer) and
``CausalLM`` (embedding, decoder layers, final norm, LM head with prefill / decode / generate). See
docs/library.md."""

from tttv2.patterns._causal_lm import CausalLM
from tttv2.patterns._decoder_layer import RESIDUAL_PATTERNS, DecoderLayer

__all__ = ["RESIDUAL_PATTERNS", "CausalLM", "DecoderLayer"]
