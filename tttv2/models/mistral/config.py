"""The Mistral architecture: Llama 3's layout plus a sliding attention window."""

from __future__ import annotations

from dataclasses import dataclass

from tttv2.models.llama3.config import Llama3Config

__all__ = ["MistralConfig"]


@dataclass(frozen=True)
class MistralConfig(Llama3Config):
    sliding_window: int | None = None  # each token attends to at most this many positions (itself included)

    MODEL_TYPES = ("mistral",)

    @classmethod
    def _extra_fields(cls, cfg: dict) -> dict:
        window = cfg.get("sliding_window")
        if window is not None and (not isinstance(window, int) or window < 1):
            raise ValueError(
                f"MistralConfig.from_huggingface: sliding_window must be a positive int or null, got {window!r}"
            )
        return {"sliding_window": window}
