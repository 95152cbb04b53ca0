"""RMSNorm: ``RMSNorm1D`` (1xN meshes) and ``RMSNorm2D`` (Galaxy)."""

from tttv2.modules.rmsnorm.rmsnorm_1d import RMSNorm1D, RMSNorm1DConfig
from tttv2.modules.rmsnorm.rmsnorm_2d import RMSNorm2D, RMSNorm2DConfig

__all__ = ["RMSNorm1D", "RMSNorm1DConfig", "RMSNorm2D", "RMSNorm2DConfig"]
