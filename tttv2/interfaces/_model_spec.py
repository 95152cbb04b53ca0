"""``ModelSpec``: the architecture of a decoder-only transformer, with no hardware in it.

Dimensions, activation, norm, rotary embedding, tied embeddings, QKV bias, sliding window, and per-layer
overrides (``LayerOverride``: a layer with its own sliding window or intermediate size). ``ModelSpec.layer(i)``
gives the resolved ``LayerSpec`` of layer i. Validation happens at construction: every error names the field,
what was expected and what was given.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = ["ActivationType", "LayerOverride", "LayerSpec", "ModelSpec", "NormType", "RopeScaling"]


class ActivationType(enum.Enum):
    """The activation of the gated MLP's gate projection."""

    SILU = "silu"
    GELU = "gelu"
    GELU_TANH = "gelu_tanh"
    RELU = "relu"


class NormType(enum.Enum):
    RMS_NORM = "rms_norm"
    LAYER_NORM = "layer_norm"


@dataclass(frozen=True)
class RopeScaling:
    """Rotary frequency scaling. ``rope_type`` "llama3" (Llama 3.1+ long context: ``factor``,
    ``low_freq_factor``, ``high_freq_factor``, ``original_max_position_embeddings``)."""

    rope_type: str
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    SUPPORTED = ("llama3",)

    def __post_init__(self):
        if self.rope_type not in self.SUPPORTED:
            raise ValueError(
                f"RopeScaling: rope_type must be one of {', '.join(self.SUPPORTED)}, got {self.rope_type!r}"
            )
        if self.factor <= 0:
            raise ValueError(f"RopeScaling: factor must be > 0, got {self.factor}")

    def as_dict(self) -> dict[str, Any]:
        """The Hugging Face ``rope_scaling`` dict (what ``tttv2.modules.rope_tables`` takes)."""
        return {
            "rope_type": self.rope_type,
            "factor": self.factor,
            "low_freq_factor": self.low_freq_factor,
            "high_freq_factor": self.high_freq_factor,
            "original_max_position_embeddings": self.original_max_position_embeddings,
        }


@dataclass(frozen=True)
class LayerOverride:
    """What one layer does differently from the model-wide values (``None``: the model's value).
    ``full_attention=True`` turns the model's sliding window off for this layer."""

    sliding_window: int | None = None
    full_attention: bool = False
    intermediate_dim: int | None = None


@dataclass(frozen=True)
class LayerSpec:
    """The resolved architecture of one decoder layer."""

    index: int
    hidden_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_dim: int
    activation: ActivationType
    norm_type: NormType
    norm_eps: float
    qkv_bias: bool
    sliding_window: int | None


def _positive(owner: str, name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer: pure architecture (no device, no dtypes, no memory configs)."""

    vocab_size: int
    hidden_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_dim: int
    activation: ActivationType = ActivationType.SILU
    norm_type: NormType = NormType.RMS_NORM
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_seq_len: int = 4096  # the longest sequence (positions) the model is meant for
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    sliding_window: int | None = None
    layer_overrides: Mapping[int, LayerOverride] = field(default_factory=dict)
    name: str = "model"

    def __post_init__(self):
        owner = "ModelSpec"
        for name in ("vocab_size", "hidden_dim", "num_layers", "num_heads", "num_kv_heads", "head_dim"):
            _positive(owner, name, getattr(self, name))
        _positive(owner, "intermediate_dim", self.intermediate_dim)
        _positive(owner, "max_seq_len", self.max_seq_len)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"{owner}: num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"{owner}: head_dim must be even (rotary pairs), got {self.head_dim}")
        for name, enum_type in (("activation", ActivationType), ("norm_type", NormType)):
            if not isinstance(getattr(self, name), enum_type):
                raise TypeError(
                    f"{owner}: {name} must be a {enum_type.__name__}, got {getattr(self, name)!r}"
                )
        if not self.norm_eps > 0:
            raise ValueError(f"{owner}: norm_eps must be > 0, got {self.norm_eps}")
        if not self.rope_theta > 0:
            raise ValueError(f"{owner}: rope_theta must be > 0, got {self.rope_theta}")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
            raise TypeError(f"{owner}: rope_scaling must be a RopeScaling or None, got {self.rope_scaling!r}")
        if self.sliding_window is not None:
            _positive(owner, "sliding_window", self.sliding_window)
        for index, override in dict(self.layer_overrides).items():
            if not isinstance(index, int) or not 0 <= index < self.num_layers:
                raise ValueError(
                    f"{owner}: layer_overrides keys must be layer indices 0..{self.num_layers - 1}, got {index!r}"
                )
            if not isinstance(override, LayerOverride):
                raise TypeError(
                    f"{owner}: layer_overrides[{index}] must be a LayerOverride, got {override!r}"
                )
            for name in ("sliding_window", "intermediate_dim"):
                if getattr(override, name) is not None:
                    _positive(owner, f"layer_overrides[{index}].{name}", getattr(override, name))
        object.__setattr__(self, "layer_overrides", dict(self.layer_overrides))

    @classmethod
    def uniform(
        cls,
        *,
        vocab_size: int,
        hidden_dim: int,
        num_layers: int,
        num_heads: int,
        intermediate_dim: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        **rest,
    ) -> ModelSpec:
        """Every layer the same. ``num_kv_heads`` defaults to ``num_heads`` (multi-head attention), ``head_dim``
        to ``hidden_dim / num_heads``; the other fields keep the dataclass defaults unless given."""
        if head_dim is None:
            if hidden_dim % num_heads:
                raise ValueError(
                    f"ModelSpec.uniform: hidden_dim ({hidden_dim}) must be a multiple of num_heads ({num_heads}) "
                    "when head_dim is not given"
                )
            head_dim = hidden_dim // num_heads
        unknown = set(rest) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"ModelSpec.uniform: unknown fields {', '.join(sorted(unknown))}")
        if rest.get("layer_overrides"):
            raise ValueError("ModelSpec.uniform: a uniform spec has no layer_overrides")
        return cls(
            vocab_size=vocab_size,
            hidden_dim=hidden_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads or num_heads,
            head_dim=head_dim,
            intermediate_dim=intermediate_dim,
            **rest,
        )

    def layer(self, index: int) -> LayerSpec:
        """The resolved spec of layer ``index`` (model-wide values with its override applied)."""
        if not isinstance(index, int) or not 0 <= index < self.num_layers:
            raise IndexError(f"ModelSpec.layer: index must be 0..{self.num_layers - 1}, got {index!r}")
        override = self.layer_overrides.get(index, LayerOverride())
        window = None if override.full_attention else (override.sliding_window or self.sliding_window)
        return LayerSpec(
            index=index,
            hidden_dim=self.hidden_dim,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            intermediate_dim=override.intermediate_dim or self.intermediate_dim,
            activation=self.activation,
            norm_type=self.norm_type,
            norm_eps=self.norm_eps,
            qkv_bias=self.qkv_bias,
            sliding_window=window,
        )

    @property
    def layers(self) -> list[LayerSpec]:
        return [self.layer(i) for i in range(self.num_layers)]

    def with_changes(self, **changes) -> ModelSpec:
        """A copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)
