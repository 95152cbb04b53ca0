"""Deprecated ``ttml.common``."""

from . import config, data, utils

__all__ = ["config", "data", "utils"]
