"""Feed-forward building blocks: the gated MLP (SwiGLU) per topology (the seed-style spelling; the implementation
is ``tttv2.modules``)."""

from tttv2.modules import MLP1D, MLP2D, MLP1DConfig, MLP2DConfig

__all__ = ["MLP1D", "MLP2D", "MLP1DConfig", "MLP2DConfig"]
