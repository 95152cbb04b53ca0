"""Attention building blocks (the seed-style spelling; the implementation is ``tttv2.modules``)."""

from tttv2.modules import Attention1D, Attention1DConfig, Attention2D, Attention2DConfig, PagedAttentionConfig

__all__ = ["Attention1D", "Attention1DConfig", "Attention2D", "Attention2DConfig", "PagedAttentionConfig"]
