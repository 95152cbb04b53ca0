"""The Llama-3 architecture in the model's own terms, read from a Hugging Face ``config.json``.

A model translates its config into the parameters the building blocks take; TTTv2 itself holds no
model-specific configuration. Only what Llama 3 / 3.1 / 3.2 checkpoints use is accepted: anything else is
an error naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Llama3Config"]


@dataclass(frozen=True)
class Llama3Config:
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_dim: int  # the MLP's intermediate size
    norm_eps: float
    rope_theta: float
    rope_scaling: dict | None  # Hugging Face's rope_scaling dict ("llama3"), or None
    tie_word_embeddings: bool
    max_position_embeddings: int

    MODEL_TYPES = ("llama",)

    @classmethod
    def from_huggingface(cls, config) -> Llama3Config:
        """From a config.json dict (or a ``transformers`` config object)."""
        cfg = dict(config) if isinstance(config, Mapping) else config.to_dict()
        if cfg.get("model_type") not in cls.MODEL_TYPES:
            raise ValueError(
                f"{cls.__name__}.from_huggingface: model_type must be one of {', '.join(cls.MODEL_TYPES)}, "
                f"got {cfg.get('model_type')!r}"
            )
        for key in ("attention_bias", "mlp_bias"):
            if cfg.get(key):
                raise ValueError(f"{cls.__name__}.from_huggingface: {key}=True is not a Llama-3 layout")
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(
                f"{cls.__name__}.from_huggingface: hidden_act must be 'silu', got {cfg['hidden_act']!r}"
            )
        # transformers 5 keeps theta and scaling together in rope_parameters; config.json files split them
        rope = {**(cfg.get("rope_parameters") or {}), **(cfg.get("rope_scaling") or {})}
        theta = float(rope.pop("rope_theta", cfg.get("rope_theta", 500000.0)))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", "llama3"):
            raise ValueError(
                f"{cls.__name__}.from_huggingface: rope_scaling type {rope_type!r} is not Llama-3's"
            )
        heads = int(cfg["num_attention_heads"])
        return cls(
            vocab_size=int(cfg["vocab_size"]),
            dim=int(cfg["hidden_size"]),
            n_layers=int(cfg["num_hidden_layers"]),
            n_heads=heads,
            n_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads),
            hidden_dim=int(cfg["intermediate_size"]),
            norm_eps=float(cfg.get("rms_norm_eps", 1e-5)),
            rope_theta=theta,
            rope_scaling=rope if rope_type == "llama3" else None,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 8192)),
            **cls._extra_fields(cfg),
        )

    @classmethod
    def _extra_fields(cls, cfg: dict) -> dict:
        """Fields a derived architecture adds (Mistral: the sliding window)."""
        return {}
