"""The gated feed-forward block: ``MLP1D`` (1xN meshes) and ``MLP2D`` (Galaxy)."""

from tttv2.modules.mlp.mlp_1d import MLP1D, MLP1DConfig

__all__ = ["MLP1D", "MLP1DConfig"]
