"""Token embedding: ``Embedding1D`` (1xN meshes)."""

from tttv2.modules.embedding.embedding_1d import Embedding1D, Embedding1DConfig

__all__ = ["Embedding1D", "Embedding1DConfig"]
