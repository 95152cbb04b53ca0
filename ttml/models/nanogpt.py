"""Deprecated ``ttml.models.nanogpt``: use ``ttnn.nn.GPT(ttnn.nn.GPTConfig(...))``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tttv2 import ttnn

from .._deprecation import deprecated
from ..autograd import AutoContext, Tensor, _value
from ._shim import ModelShim

__all__ = ["NanoGPT", "NanoGPTConfig", "create_nanogpt"]


@dataclass
class NanoGPTConfig:
    """TTML's NanoGPT configuration; use ``ttnn.nn.GPTConfig`` (same field names, plus weight tying and
    gradient checkpointing)."""

    vocab_size: int = 50304
    block_size: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    dropout: float = 0.2
    bias: bool = True

    def __post_init__(self) -> None:
        deprecated("ttml.models.nanogpt.NanoGPTConfig", "ttnn.nn.GPTConfig", stacklevel=4)


class NanoGPT(ModelShim):
    """``model(idx [B, 1, 1, S] uint32, mask [1, 1, S, S] 0/1)`` → logits ``[B, 1, S, vocab]``; TTML's
    multiplicative 0/1 mask becomes the causal default (lower-triangular) or an additive mask."""

    def __init__(self, config: NanoGPTConfig) -> None:
        device = AutoContext._shared().get_device()
        gpt_config = ttnn.nn.GPTConfig(
            vocab_size=config.vocab_size,
            block_size=config.block_size,
            n_layer=config.n_layer,
            n_head=config.n_head,
            n_embd=config.n_embd,
            dropout=config.dropout,
            bias=config.bias,
        )
        super().__init__(ttnn.nn.GPT(gpt_config, device=device, dtype=ttnn.bfloat16))
        self._masks: dict[int, ttnn.Tensor | None] = {}

    def _additive(self, mask) -> ttnn.Tensor | None:
        mask = _value(mask)
        if mask is None:
            return None
        key = id(mask)
        if key not in self._masks:
            m = ttnn.to_numpy(mask).astype(np.float32)
            size = m.shape[-1]
            if m.shape[-2] == size and np.array_equal(
                m.reshape(-1, size, size)[0], np.tril(np.ones((size, size)))
            ):
                self._masks[key] = None
            else:
                additive = np.where(m > 0, 0.0, -1e9).astype(np.float32)
                self._masks[key] = ttnn.from_numpy(
                    additive, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mask.device()
                )
        return self._masks[key]

    def __call__(self, idx, mask=None) -> Tensor:
        return Tensor(self.module(_value(idx), self._additive(mask)))


def create_nanogpt(config: NanoGPTConfig) -> NanoGPT:
    deprecated("ttml.models.nanogpt.create_nanogpt", "ttnn.nn.GPT(ttnn.nn.GPTConfig(...), device=mesh)")
    return NanoGPT(config)
