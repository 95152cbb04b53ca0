"""Attention layers: multi-head (GPT) and grouped-query (Llama, with rotary position embedding).

Both split heads with ``ttnn.experimental.nlp_create_qkv_heads`` (Q heads, then K heads, then V heads along
the last dim — the same order as splitting a torch ``[q | k | v]`` projection), attend with the fused
``ttnn.transformer.scaled_dot_product_attention_forward`` (causal by default, attention dropout drawn from
a seed of ``ttnn.nn``'s stream in training mode) and merge heads with ``nlp_concat_heads``.
"""

from __future__ import annotations

import numpy as np

from ... import ttnn
from ..device import MeshDevice
from ..errors import ValidationError
from ..tensor import Tensor
from ..types import DataType, Layout
from . import _random
from .layers import Dropout, Linear, _positive, _probability
from .module import Module, resolve_device

__all__ = ["GroupedQueryAttention", "MultiHeadAttention", "RotaryEmbedding"]


def _attend(module: Module, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    p = module.attention_dropout if module.training else 0.0
    out = ttnn.transformer.scaled_dot_product_attention_forward(
        q,
        k,
        v,
        attn_mask=mask,
        is_causal=mask is None and module.causal,
        dropout_probability=p,
        seed=_random.next_seed() if p > 0.0 else 0,
        return_intermediates=True,  # the backward reuses the log-sum-exp instead of recomputing it
    )
    out = out[0] if isinstance(out, (tuple, list)) else out
    return ttnn.experimental.nlp_concat_heads(out)


class MultiHeadAttention(Module):
    """GPT attention: ``qkv = Linear(E, 3E)``, per-head SDPA, ``out_proj = Linear(E, E)``, residual dropout.

    ``forward(x, mask=None)``: ``x [B, 1, S, E]``; ``mask`` is an additive ``[1|B, 1|H, S, S]`` mask (0 where
    attention is allowed, a large negative number elsewhere) that replaces the causal mask.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        causal: bool = True,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.MultiHeadAttention"
        self.embed_dim = _positive(owner, "embed_dim", embed_dim)
        self.num_heads = _positive(owner, "num_heads", num_heads)
        if self.embed_dim % self.num_heads:
            raise ValidationError(f"{owner}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.head_dim = self.embed_dim // self.num_heads
        self.attention_dropout = _probability(owner, dropout)
        self.causal = bool(causal)
        device = resolve_device(device, owner)
        self.qkv = Linear(self.embed_dim, 3 * self.embed_dim, bias, device=device, dtype=dtype)
        self.out_proj = Linear(self.embed_dim, self.embed_dim, bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = ttnn.experimental.nlp_create_qkv_heads(
            self.qkv(x), num_heads=self.num_heads, transpose_k_heads=False
        )
        return self.dropout(self.out_proj(_attend(self, q, k, v, mask)))

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.attention_dropout}"


class RotaryEmbedding(Module):
    """Rotary position embedding tables (HF "rotate half" form): ``cos``/``sin`` ``[1, 1, max_seq_len, head_dim]``
    buffers, applied with ``ttnn.experimental.rotary_embedding`` (head_dim must be a multiple of 64)."""

    def __init__(
        self,
        head_dim: int,
        max_seq_len: int,
        theta: float = 10000.0,
        *,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.RotaryEmbedding"
        self.head_dim = _positive(owner, "head_dim", head_dim)
        if self.head_dim % 64:
            raise ValidationError(
                f"{owner}: head_dim: expected a multiple of 64 (two halves of whole tiles), got {head_dim}"
            )
        self.max_seq_len = _positive(owner, "max_seq_len", max_seq_len)
        self.theta = float(theta)
        device = resolve_device(device, owner)
        inv_freq = 1.0 / (self.theta ** (np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim))
        angles = np.outer(np.arange(self.max_seq_len, dtype=np.float64), inv_freq)
        angles = np.concatenate([angles, angles], axis=-1)[None, None]
        for name, table in (("cos", np.cos(angles)), ("sin", np.sin(angles))):
            t = ttnn.from_numpy(table.astype(np.float32), dtype=dtype, layout=Layout.TILE, device=device)
            self.register_buffer(name, t, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """Rotate ``x [B, H, S, head_dim]`` by position (row s uses position s)."""
        seq = x.shape[-2]
        if seq > self.max_seq_len:
            raise ValidationError(
                f"ttnn.nn.RotaryEmbedding: sequence length {seq} exceeds max_seq_len {self.max_seq_len}"
            )
        return ttnn.experimental.rotary_embedding(x, self.cos, self.sin)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_seq_len={self.max_seq_len}, theta={self.theta}"


class GroupedQueryAttention(Module):
    """Llama attention: ``q_proj = Linear(E, E)``, ``kv_proj = Linear(E, 2·G·D)`` (K heads then V heads),
    optional rotary embedding on Q and K, SDPA where query head h reads KV head ⌊h·G/H⌋, ``out_proj``.

    ``num_kv_heads`` (G) must divide ``num_heads`` (H); G = H is plain multi-head attention.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        *,
        rope: RotaryEmbedding | None = None,
        causal: bool = True,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.GroupedQueryAttention"
        self.embed_dim = _positive(owner, "embed_dim", embed_dim)
        self.num_heads = _positive(owner, "num_heads", num_heads)
        self.num_kv_heads = _positive(owner, "num_kv_heads", num_kv_heads)
        if self.embed_dim % self.num_heads:
            raise ValidationError(f"{owner}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValidationError(
                f"{owner}: num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}"
            )
        self.head_dim = self.embed_dim // self.num_heads
        if rope is not None and rope.head_dim != self.head_dim:
            raise ValidationError(
                f"{owner}: rope.head_dim {rope.head_dim} differs from head_dim {self.head_dim}"
            )
        self.attention_dropout = _probability(owner, dropout)
        self.causal = bool(causal)
        device = resolve_device(device, owner)
        kv_dim = 2 * self.num_kv_heads * self.head_dim
        self.q_proj = Linear(self.embed_dim, self.embed_dim, bias, device=device, dtype=dtype)
        self.kv_proj = Linear(self.embed_dim, kv_dim, bias, device=device, dtype=dtype)
        self.out_proj = Linear(self.embed_dim, self.embed_dim, bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        # a rope shared by every layer is referenced, not owned: its tables are buffers of the model
        object.__setattr__(self, "rope", rope)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = ttnn.experimental.nlp_create_qkv_heads(
            self.q_proj(x),
            self.kv_proj(x),
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            transpose_k_heads=False,
        )
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        return self.dropout(self.out_proj(_attend(self, q, k, v, mask)))

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"dropout={self.attention_dropout}, rope={self.rope is not None}"
        )
