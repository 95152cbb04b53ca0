"""Mistral (sliding-window attention) built from TTTv2's public blocks."""

from tttv2.models.mistral.config import MistralConfig
from tttv2.models.mistral.model import MistralModel

__all__ = ["MistralConfig", "MistralModel"]
