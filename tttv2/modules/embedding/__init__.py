"""Token embedding: ``Embedding1D`` (1xN meshes), ``Embedding2D`` (Galaxy)."""

from tttv2.modules.embedding.embedding_1d import Embedding1D, Embedding1DConfig
from tttv2.modules.embedding.embedding_2d import Embedding2D, Embedding2DConfig

__all__ = ["Embedding1D", "Embedding1DConfig", "Embedding2D", "Embedding2DConfig"]
