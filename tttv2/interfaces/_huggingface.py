"""Hugging Face ``config.json`` (a dict, or a ``transformers`` config object) → ``ModelSpec``.

Families: Llama, Mistral, Qwen2, Phi-3. Every key of the config is accounted for: it maps to a spec field, is
metadata that does not change the architecture (token ids, dtype, dropout, training switches), or is rejected
with an error naming it. A key this table does not know is an error too (``ignore_fields`` acknowledges keys the
caller knows to be harmless), so a config whose architecture the library cannot build never converts silently.
Both rotary spellings are read: ``rope_theta`` + ``rope_scaling`` (config.json files) and ``rope_parameters``
(``transformers`` 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tttv2.interfaces._model_spec import ActivationType, LayerOverride, ModelSpec, NormType, RopeScaling

__all__ = ["SUPPORTED_MODEL_TYPES", "UnsupportedConfigError", "spec_from_huggingface"]

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "phi3")


class UnsupportedConfigError(ValueError):
    """A Hugging Face config the library cannot build: the message names the key and the value."""


_ACTIVATIONS = {
    "silu": ActivationType.SILU,
    "swish": ActivationType.SILU,
    "gelu": ActivationType.GELU,
    "gelu_pytorch_tanh": ActivationType.GELU_TANH,
    "gelu_new": ActivationType.GELU_TANH,
    "relu": ActivationType.RELU,
}

# keys that describe the checkpoint, tokenizer or training, not the architecture
_METADATA = frozenset(
    {
        "_name_or_path",
        "architectures",
        "attention_dropout",
        "auto_map",
        "bos_token_id",
        "chunk_size_feed_forward",
        "dtype",
        "embd_pdrop",
        "eos_token_id",
        "id2label",
        "initializer_range",
        "is_encoder_decoder",
        "label2id",
        "output_attentions",
        "output_hidden_states",
        "pad_token_id",
        "problem_type",
        "resid_pdrop",
        "return_dict",
        "torch_dtype",
        "transformers_version",
        "use_cache",
        # Phi-3: the pre-scaling context length, only read by the (unsupported) long-rope scalings
        "original_max_position_embeddings",
        # Qwen2: which layers would use the window when use_sliding_window is true (read below)
        "max_window_layers",
    }
)

# keys read into the spec (some only checked)
_MAPPED = frozenset(
    {
        "model_type",
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "hidden_act",
        "rms_norm_eps",
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "partial_rotary_factor",
        "max_position_embeddings",
        "tie_word_embeddings",
        "attention_bias",
        "mlp_bias",
        "pretraining_tp",
        "sliding_window",
        "use_sliding_window",
        "layer_types",
    }
)

_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


def _as_dict(config) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(
        config, "to_dict"
    ):  # a transformers PretrainedConfig (duck-typed: transformers is not imported)
        return dict(config.to_dict())
    raise TypeError(
        f"ModelFactory.from_huggingface: config must be a dict (config.json) or a transformers config, "
        f"got {type(config).__name__}"
    )


def _reject(key: str, value, why: str) -> UnsupportedConfigError:
    return UnsupportedConfigError(f"ModelFactory.from_huggingface: unsupported {key}={value!r}: {why}")


def _rope(cfg: dict) -> tuple[float, RopeScaling | None]:
    """(theta, scaling) from ``rope_parameters`` or ``rope_theta`` / ``rope_scaling``."""
    params = dict(cfg.get("rope_parameters") or {})
    legacy = cfg.get("rope_scaling") or {}
    if legacy:
        params = {**params, **legacy}
    theta = float(params.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
    rope_type = params.pop("rope_type", params.pop("type", "default"))
    factor = params.pop("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    if factor not in (None, 1, 1.0):
        raise _reject(
            "partial_rotary_factor", factor, "rotary embedding on part of each head is not supported"
        )
    if rope_type in (None, "default"):
        return theta, None
    if rope_type != "llama3":
        raise _reject(
            "rope_scaling.rope_type", rope_type, f"supported: default, {', '.join(RopeScaling.SUPPORTED)}"
        )
    known = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}
    unknown = sorted(set(params) - known)
    if unknown:
        raise _reject("rope_scaling", {k: params[k] for k in unknown}, "unknown llama3 scaling keys")
    return theta, RopeScaling(rope_type="llama3", **{k: params[k] for k in known if k in params})


def _window(cfg: dict, family: str, num_layers: int) -> tuple[int | None, dict[int, LayerOverride]]:
    """The model-wide sliding window and the layers that attend fully instead."""
    window = cfg.get("sliding_window")
    if family == "qwen2" and not cfg.get("use_sliding_window", False):
        window = None
    layer_types = cfg.get("layer_types")
    if window is None:
        if layer_types and any(t != "full_attention" for t in layer_types):
            raise _reject("layer_types", layer_types, "sliding-window layers need a sliding_window size")
        return None, {}
    if layer_types is None and family == "qwen2":  # older configs: the first max_window_layers attend fully
        first = int(cfg.get("max_window_layers", 0))
        layer_types = ["full_attention"] * first + ["sliding_attention"] * (num_layers - first)
    overrides = {}
    for index, kind in enumerate(layer_types or []):
        if kind not in ("full_attention", "sliding_attention"):
            raise _reject(f"layer_types[{index}]", kind, "supported: full_attention, sliding_attention")
        if kind == "full_attention":
            overrides[index] = LayerOverride(full_attention=True)
    if layer_types is not None and len(layer_types) != num_layers:
        raise _reject("layer_types", layer_types, f"must list the {num_layers} layers")
    if len(overrides) == num_layers:
        return None, {}
    return int(window), overrides


def spec_from_huggingface(config, *, ignore_fields: Iterable[str] = (), name: str | None = None) -> ModelSpec:
    """The ``ModelSpec`` of a Hugging Face config (see the module docstring)."""
    cfg = _as_dict(config)
    family = cfg.get("model_type")
    if family not in SUPPORTED_MODEL_TYPES:
        raise _reject("model_type", family, f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    unknown = sorted(set(cfg) - _METADATA - _MAPPED - set(ignore_fields))
    if unknown:
        raise UnsupportedConfigError(
            f"ModelFactory.from_huggingface: unknown {family} config field(s) {', '.join(unknown)}: the library "
            "does not know whether they change the architecture; pass ignore_fields=[...] if they do not"
        )
    missing = [key for key in _REQUIRED if cfg.get(key) is None]
    if missing:
        raise UnsupportedConfigError(
            f"ModelFactory.from_huggingface: missing required field(s) {', '.join(missing)}"
        )
    for key in ("attention_bias", "mlp_bias"):
        if cfg.get(key):
            raise _reject(key, cfg[key], "biases on the attention output / MLP projections are not supported")
    if cfg.get("pretraining_tp", 1) not in (None, 1):
        raise _reject("pretraining_tp", cfg["pretraining_tp"], "only 1 (an unsplit checkpoint) is supported")
    activation = cfg.get("hidden_act", "silu")
    if activation not in _ACTIVATIONS:
        raise _reject("hidden_act", activation, f"supported: {', '.join(_ACTIVATIONS)}")
    theta, scaling = _rope(cfg)
    heads = int(cfg["num_attention_heads"])
    num_layers = int(cfg["num_hidden_layers"])
    window, overrides = _window(cfg, family, num_layers)
    return ModelSpec(
        vocab_size=int(cfg["vocab_size"]),
        hidden_dim=int(cfg["hidden_size"]),
        num_layers=num_layers,
        num_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads),
        intermediate_dim=int(cfg["intermediate_size"]),
        activation=_ACTIVATIONS[activation],
        norm_type=NormType.RMS_NORM,
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_scaling=scaling,
        max_seq_len=int(cfg.get("max_position_embeddings", 4096)),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=family == "qwen2",
        sliding_window=window,
        layer_overrides=overrides,
        name=name or cfg.get("_name_or_path") or family,
    )
