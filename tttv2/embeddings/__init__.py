"""Embeddings in and out of the model: token embedding, rotary position embedding, and the LM head (the
projection back to the vocabulary). The seed-style spelling; the implementation is ``tttv2.modules``."""

from tttv2.modules import (
    Embedding1D,
    Embedding1DConfig,
    Embedding2D,
    Embedding2DConfig,
    LMHead1D,
    LMHead1DConfig,
    LMHead2D,
    LMHead2DConfig,
    RotarySetup1D,
    RotarySetup1DConfig,
    RotarySetup2D,
    RotarySetup2DConfig,
    rope_tables,
    rotation_tile,
)

__all__ = [
    "Embedding1D",
    "Embedding1DConfig",
    "Embedding2D",
    "Embedding2DConfig",
    "LMHead1D",
    "LMHead1DConfig",
    "LMHead2D",
    "LMHead2DConfig",
    "RotarySetup1D",
    "RotarySetup1DConfig",
    "RotarySetup2D",
    "RotarySetup2DConfig",
    "rope_tables",
    "rotation_tile",
]
