"""The gated feed-forward block: ``MLP1D`` (1xN meshes) and ``MLP2D`` (Galaxy)."""

from tttv2.modules.mlp.mlp_1d import MLP1D, MLP1DConfig
from tttv2.modules.mlp.mlp_2d import MLP2D, MLP2DConfig

__all__ = ["MLP1D", "MLP2D", "MLP1DConfig", "MLP2DConfig"]
