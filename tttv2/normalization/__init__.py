"""Normalization building blocks (the seed-style spelling; the implementation is ``tttv2.modules``)."""

from tttv2.modules import RMSNorm1D, RMSNorm1DConfig, RMSNorm2D, RMSNorm2DConfig

__all__ = ["RMSNorm1D", "RMSNorm1DConfig", "RMSNorm2D", "RMSNorm2DConfig"]
