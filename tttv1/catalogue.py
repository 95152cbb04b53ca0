"""Built-in model catalogue: small configs with the architecture and ratios of real families.

Each entry is a ``config.json``-style dict (the keys a Hugging Face checkpoint ships), scaled down so that a
2-layer forward runs in well under a second on the emulator, even on an 8×4 mesh. Every model keeps 8 KV heads,
because TTTv1 splits KV heads over the devices (1×8 needs 8) and over the 8 rows of a Galaxy; dims are
multiples of 32 per device on every supported mesh. Weights are random but deterministic (``random_state_dict``);
``hf_config`` builds the matching ``transformers`` config object locally (never ``from_pretrained``).

What is kept from the real family: activation and norm, GQA where the head count allows, MLP ratio,
rope theta and llama3 scaling, QKV bias (Qwen2.5), tied embeddings (Llama-3.2-1B), fused projections and a
vocab that is not a tile multiple (Phi-3). The other models keep dim 512; ``Llama-3.1-70B-tiny`` has dim 1024, the
smallest that tt-metal's own Galaxy configs accept (a multiple of 1024), so the 8×4 paths see real Galaxy shapes.
"""

from __future__ import annotations

import copy

import torch

__all__ = [
    "CATALOGUE",
    "DEFAULT_MODEL",
    "catalogue_names",
    "config_dict",
    "hf_config",
    "hf_model_class",
    "random_state_dict",
]

DEFAULT_MODEL = "Llama-3.2-1B-tiny"

_LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

CATALOGUE: dict[str, dict] = {
    # Llama-3.2-1B: dim 2048, 32 q / 8 kv heads, hidden 4×dim, tied embeddings, theta 5e5 + llama3 scaling ×32
    "Llama-3.2-1B-tiny": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 32,
        "num_hidden_layers": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": dict(_LLAMA3_SCALING),
        "tie_word_embeddings": True,
        "hidden_act": "silu",
    },
    # Llama-3.1-8B: hidden 3.5×dim (14336/4096; padded on Galaxy), untied, llama3 scaling ×8
    "Llama-3.1-8B-tiny": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1792,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 32,
        "num_hidden_layers": 2,
        "vocab_size": 2048,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": dict(_LLAMA3_SCALING, factor=8.0),
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    },
    # Llama-3.1-70B, the Galaxy model: GQA with one KV head per mesh row of an 8×4 Galaxy, hidden 3.5×dim
    # (28672/8192), llama3 scaling ×8, untied. dim 1024 is a multiple of 1024, as tt-metal's TG norm needs (dim/4
    # per mesh column over a (dim/1024)×8 core grid); 16 heads of 64 put two query heads and one KV head on each
    # mesh row, 256 QKV columns per device (tt-metal's TG attention takes at most 12 cores × 32 below dim 3072); the
    # 70B class keeps BFP4 MLP weights in both precision presets.
    "Llama-3.1-70B-tiny": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "vocab_size": 2048,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": dict(_LLAMA3_SCALING, factor=8.0),
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    },
    # Qwen2.5-7B: QKV bias, theta 1e6, hidden ≈5.3×dim, head_dim 128 → 64 here (8 heads)
    "Qwen2.5-7B-tiny": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 512,
        "intermediate_size": 2688,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "vocab_size": 1536,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "use_sliding_window": False,
    },
    # Mistral-7B (v0.3): hidden 3.5×dim, theta 1e6, no sliding window
    "Mistral-7B-tiny": {
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "hidden_size": 512,
        "intermediate_size": 1792,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 32,
        "num_hidden_layers": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    },
    # Phi-3-mini: fused qkv_proj / gate_up_proj, MHA, hidden 8/3×dim, vocab 32064 (not a tile multiple)
    "Phi-3-mini-tiny": {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "pad_token_id": 999,
        "eos_token_id": 998,
        "bos_token_id": 1,
    },
}


def catalogue_names() -> list[str]:
    return list(CATALOGUE)


def config_dict(name: str) -> dict:
    """A copy of the catalogue entry, as a checkpoint's config.json would hold it (plus ``_name_or_path``)."""
    if name not in CATALOGUE:
        raise KeyError(f"unknown catalogue model {name!r}; known: {', '.join(CATALOGUE)}")
    config = copy.deepcopy(CATALOGUE[name])
    config["_name_or_path"] = name
    if "head_dim" not in config:
        config["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    return config


def hf_model_class(name_or_config):
    """The ``transformers`` causal-LM class of an architecture (imported lazily: tests and references only)."""
    import transformers

    config = config_dict(name_or_config) if isinstance(name_or_config, str) else name_or_config
    return getattr(transformers, config["architectures"][0])


def hf_config(name_or_config):
    """The matching ``transformers`` config object, built locally."""
    import transformers

    config = config_dict(name_or_config) if isinstance(name_or_config, str) else dict(name_or_config)
    cls = {
        "llama": transformers.LlamaConfig,
        "qwen2": transformers.Qwen2Config,
        "mistral": transformers.MistralConfig,
        "phi3": transformers.Phi3Config,
    }[config["model_type"]]
    kwargs = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "_name_or_path")}
    if config["model_type"] == "phi3":
        kwargs.pop("head_dim", None)
    hf = cls(**kwargs)
    hf.architectures = list(config["architectures"])
    hf._name_or_path = config.get("_name_or_path", "")
    return hf


def _param_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Hugging Face parameter names and shapes of a catalogue architecture (the one table, in tttv2)."""
    # imported here, not at the top: importing tttv2.interfaces builds the whole library
    from tttv2.interfaces._weights import hf_param_shapes

    return hf_param_shapes(config)


def random_state_dict(name_or_config, seed: int = 0) -> dict[str, torch.Tensor]:
    """Deterministic random weights with Hugging Face names (float32).

    Linear weights are N(0, 0.02) like HF's init, except Q/K (N(0, 0.08)) so attention is peaked; embeddings are
    N(0, 1) so the first layer sees unit-scale activations; norm weights are 1 ± 0.1 so that a wrong norm weight
    shows up in the comparisons.
    """
    config = config_dict(name_or_config) if isinstance(name_or_config, str) else name_or_config
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, shape in _param_shapes(config).items():
        if key.endswith("norm.weight"):
            out[key] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif "embed_tokens" in key:
            out[key] = torch.randn(shape, generator=gen)
        elif key.endswith(".bias"):
            out[key] = 0.1 * torch.randn(shape, generator=gen)
        elif any(p in key for p in ("q_proj", "k_proj", "qkv_proj")):
            # sharper attention than HF's init: a near-uniform softmax would hide KV-cache and position bugs
            out[key] = 0.08 * torch.randn(shape, generator=gen)
        else:
            out[key] = 0.02 * torch.randn(shape, generator=gen)
    return out
