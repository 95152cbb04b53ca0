"""Rotary position embedding: ``RotarySetup1D`` (1xN meshes), ``RotarySetup2D`` (Galaxy), ``rope_tables``,
``rotation_tile``."""

from tttv2.modules.rope.rope_1d import RotarySetup1D, RotarySetup1DConfig, rope_tables, rotation_tile
from tttv2.modules.rope.rope_2d import RotarySetup2D, RotarySetup2DConfig

__all__ = [
    "RotarySetup1D",
    "RotarySetup1DConfig",
    "RotarySetup2D",
    "RotarySetup2DConfig",
    "rope_tables",
    "rotation_tile",
]
