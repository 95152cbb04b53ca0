"""Attention: grouped-query attention with a KV cache, split by topology (``Attention1D`` for 1-D meshes,
``Attention2D`` for Galaxy-style 2-D meshes)."""

from tttv2.modules.attention._shared import PagedAttentionConfig
from tttv2.modules.attention.attention_1d import Attention1D, Attention1DConfig
from tttv2.modules.attention.attention_2d import Attention2D, Attention2DConfig

__all__ = ["Attention1D", "Attention1DConfig", "Attention2D", "Attention2DConfig", "PagedAttentionConfig"]
