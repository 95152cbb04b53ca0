"""Deprecated ``ttml.common``."""

from . import data

__all__ = ["data"]
