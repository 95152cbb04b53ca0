"""Mistral on TTTv2 building blocks: the Llama-3 template with the attention's sliding window set."""

from __future__ import annotations

from tttv2.models.llama3 import Llama3Model

from .config import MistralConfig

__all__ = ["MistralModel"]


class MistralModel(Llama3Model):
    """``MistralModel(config, mesh_device, weights)`` (see ``Llama3Model``)."""

    config_class = MistralConfig

    def _attention_fields(self, index: int) -> dict:
        return {"sliding_window": self.config.sliding_window}
