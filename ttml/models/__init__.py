"""Deprecated ``ttml.models``: use ``ttnn.nn.Linear`` / ``ttnn.nn.GPT``."""

from . import linear_regression, nanogpt
from .nanogpt import NanoGPTConfig, create_nanogpt

__all__ = ["NanoGPTConfig", "create_nanogpt", "linear_regression", "nanogpt"]
