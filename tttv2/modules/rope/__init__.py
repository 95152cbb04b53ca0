"""Rotary position embedding: ``RotarySetup1D`` (1xN meshes), ``rope_tables``, ``rotation_tile``."""

from tttv2.modules.rope.rope_1d import RotarySetup1D, RotarySetup1DConfig, rope_tables, rotation_tile

__all__ = ["RotarySetup1D", "RotarySetup1DConfig", "rope_tables", "rotation_tile"]
