"""The output projection: ``LMHead1D`` (1xN meshes)."""

from tttv2.modules.lm_head.lm_head_1d import LMHead1D, LMHead1DConfig

__all__ = ["LMHead1D", "LMHead1DConfig"]
