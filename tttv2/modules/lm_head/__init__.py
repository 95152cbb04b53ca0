"""The output projection: ``LMHead1D`` (1xN meshes), ``LMHead2D`` (Galaxy)."""

from tttv2.modules.lm_head.lm_head_1d import LMHead1D, LMHead1DConfig
from tttv2.modules.lm_head.lm_head_2d import LMHead2D, LMHead2DConfig

__all__ = ["LMHead1D", "LMHead1DConfig", "LMHead2D", "LMHead2DConfig"]
