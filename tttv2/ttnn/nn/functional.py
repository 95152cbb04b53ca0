"""Functional forms used by the layers (the layers are thin wrappers around these)."""

from .layers import dropout

__all__ = ["dropout"]
