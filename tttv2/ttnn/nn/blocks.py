"""Transformer blocks: GPT (pre-LayerNorm, GELU MLP) and Llama (pre-RMSNorm, GQA, SwiGLU MLP)."""

from __future__ import annotations

import math

from ... import ttnn
from ..device import MeshDevice
from ..tensor import Tensor
from ..types import DataType
from . import _random
from .attention import GroupedQueryAttention, MultiHeadAttention, RotaryEmbedding
from .layers import Dropout, LayerNorm, Linear, RMSNorm, _positive
from .module import Module, make_parameter, resolve_device

__all__ = ["GPTMLP", "GPTBlock", "LlamaBlock", "LlamaMLP", "llama_hidden_dim"]


class GPTMLP(Module):
    """``fc = Linear(E, 4E)`` → GELU → ``proj = Linear(4E, E)`` → dropout. The GELU is GPT-2's tanh
    approximation (``approximate_gelu=True``, torch's ``gelu(approximate="tanh")``) or the exact erf form."""

    def __init__(
        self,
        embed_dim: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        hidden_dim: int | None = None,
        approximate_gelu: bool = True,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        hidden = 4 * embed_dim if hidden_dim is None else hidden_dim
        self.approximate_gelu = bool(approximate_gelu)
        device = resolve_device(device, "ttnn.nn.GPTMLP")
        self.fc = Linear(embed_dim, hidden, bias, device=device, dtype=dtype)
        self.proj = Linear(hidden, embed_dim, bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        h = ttnn.gelu(self.fc(x), fast_and_approximate_mode=self.approximate_gelu)
        return self.dropout(self.proj(h))


class GPTBlock(Module):
    """``x + attn(ln1(x))``, then ``+ mlp(ln2(·))`` (GPT-2 / nanoGPT)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        eps: float = 1e-5,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        device = resolve_device(device, "ttnn.nn.GPTBlock")
        self.ln1 = LayerNorm(embed_dim, eps, bias, device=device, dtype=dtype)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout, bias, device=device, dtype=dtype)
        self.ln2 = LayerNorm(embed_dim, eps, bias, device=device, dtype=dtype)
        self.mlp = GPTMLP(embed_dim, dropout, bias, device=device, dtype=dtype)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = ttnn.add(x, self.attn(self.ln1(x), mask))
        return ttnn.add(x, self.mlp(self.ln2(x)))


def llama_hidden_dim(embed_dim: int, multiple_of: int = 256) -> int:
    """Llama's MLP width: ⅔ of 4E rounded up to a multiple of ``multiple_of``."""
    hidden = int(2 * 4 * embed_dim / 3)
    return multiple_of * math.ceil(hidden / multiple_of)


class LlamaMLP(Module):
    """SwiGLU MLP ``(silu(x·w1) ⊙ (x·w3))·w2`` by the fused ``ttnn.swiglu``; weights ``[in, out]``, no bias."""

    def __init__(
        self,
        embed_dim: int,
        hidden_dim: int | None = None,
        dropout: float = 0.0,
        *,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.LlamaMLP"
        self.embed_dim = _positive(owner, "embed_dim", embed_dim)
        self.hidden_dim = (
            llama_hidden_dim(embed_dim) if hidden_dim is None else _positive(owner, "hidden_dim", hidden_dim)
        )
        device = resolve_device(device, owner)
        gen = _random.rng()
        up, down = 1.0 / math.sqrt(self.embed_dim), 1.0 / math.sqrt(self.hidden_dim)
        self.w1 = make_parameter(
            gen.uniform(-up, up, (self.embed_dim, self.hidden_dim)), device=device, dtype=dtype
        )
        self.w3 = make_parameter(
            gen.uniform(-up, up, (self.embed_dim, self.hidden_dim)), device=device, dtype=dtype
        )
        self.w2 = make_parameter(
            gen.uniform(-down, down, (self.hidden_dim, self.embed_dim)), device=device, dtype=dtype
        )
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(ttnn.swiglu(x, self.w1, self.w2, self.w3))

    @staticmethod
    def _from_torch(name: str, array):
        return array.T  # torch Linear weights are [out, in]

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, hidden_dim={self.hidden_dim}"


class LlamaBlock(Module):
    """``x + attn(rms1(x))``, then ``+ mlp(rms2(·))`` with grouped-query attention and a SwiGLU MLP."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int,
        *,
        hidden_dim: int | None = None,
        dropout: float = 0.0,
        rope: RotaryEmbedding | None = None,
        eps: float = 1e-5,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        device = resolve_device(device, "ttnn.nn.LlamaBlock")
        self.attention_norm = RMSNorm(embed_dim, eps, device=device, dtype=dtype)
        self.attn = GroupedQueryAttention(
            embed_dim, num_heads, num_kv_heads, dropout, rope=rope, device=device, dtype=dtype
        )
        self.mlp_norm = RMSNorm(embed_dim, eps, device=device, dtype=dtype)
        self.mlp = LlamaMLP(embed_dim, hidden_dim, dropout, device=device, dtype=dtype)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = ttnn.add(x, self.attn(self.attention_norm(x), mask))
        return ttnn.add(x, self.mlp(self.mlp_norm(x)))
