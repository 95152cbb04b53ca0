"""Hugging Face reference modules built locally from configs with seeded random weights (nothing is downloaded).

Four families, scaled down with their real ratios: Llama (GQA, llama3 rope scaling), Qwen2 (QKV bias, eps 1e-6),
Mistral, Phi-3 (fused ``gate_up_proj`` / ``qkv_proj``, a hidden dim and a vocab that are not tile multiples).
Each builder returns the float32 ``transformers`` module; the ``*_weights`` helpers return its weights as numpy
arrays in TT-NN layout (``[in, out]``), ready for ``LazyWeight``. torch and transformers are imported lazily:
importing this file needs neither.
"""

from __future__ import annotations

import copy

import numpy as np

__all__ = [
    "FAMILIES",
    "family_config",
    "hf_causal_lm",
    "hf_config",
    "hf_embedding",
    "hf_lm_head",
    "hf_mlp",
    "hf_rmsnorm",
    "hf_rotary",
    "mlp_weights",
    "random_activations",
    "rope_reference",
    "run_reference",
]

FAMILIES = ("llama", "qwen2", "mistral", "phi3")

_LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

# config.json-style entries; dims split into tiles on 1x1, 1x2, 1x8 and on the 4 columns of an 8x4 mesh
_FAMILY_CONFIGS: dict[str, dict] = {
    # Llama-3.1-8B: hidden 3.5×dim, 32:8 GQA (4:1), theta 5e5 + llama3 scaling
    "llama": {
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 896,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "vocab_size": 512,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": _LLAMA3_SCALING,
        "max_position_embeddings": 131072,
        "hidden_act": "silu",
    },
    # Qwen2.5-7B: QKV bias, eps 1e-6, theta 1e6, hidden ≈5.3×dim
    "qwen2": {
        "model_type": "qwen2",
        "hidden_size": 256,
        "intermediate_size": 1344,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "vocab_size": 640,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
        "use_sliding_window": False,
    },
    # Mistral-7B v0.3: hidden 3.5×dim, theta 1e6
    "mistral": {
        "model_type": "mistral",
        "hidden_size": 256,
        "intermediate_size": 896,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "vocab_size": 512,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
        "sliding_window": None,
    },
    # Phi-3-mini: fused projections, MHA, hidden 8/3×dim (not a tile multiple per device), vocab not a tile multiple
    "phi3": {
        "model_type": "phi3",
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "vocab_size": 500,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "hidden_act": "silu",
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    },
}

_CLASS_PREFIX = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "phi3": "Phi3"}


def family_config(family: str, **overrides) -> dict:
    """A copy of the family's tiny config dict, with ``overrides`` applied."""
    if family not in _FAMILY_CONFIGS:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    config = copy.deepcopy(_FAMILY_CONFIGS[family])
    config.update(overrides)
    config.setdefault("num_hidden_layers", 1)
    return config


def _family_of(config) -> str:
    family = config["model_type"] if isinstance(config, dict) else config.model_type
    if family not in _CLASS_PREFIX:
        raise ValueError(f"model_type must be one of {', '.join(FAMILIES)}, got {family!r}")
    return family


def hf_config(family_or_config, **overrides):
    """The ``transformers`` config object of a family (or of a config dict), built locally."""
    import transformers

    config = (
        family_config(family_or_config, **overrides)
        if isinstance(family_or_config, str)
        else {**family_or_config, **overrides}
    )
    family = _family_of(config)
    cls = getattr(transformers, f"{_CLASS_PREFIX[family]}Config")
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    return cls(**kwargs)


def _modeling(config):
    import importlib

    family = _family_of(config)
    return importlib.import_module(f"transformers.models.{family}.modeling_{family}"), _CLASS_PREFIX[family]


def _randomise(module, seed: int):
    """Seeded random weights: norm weights 1 ± 0.1 (a wrong norm weight shows), everything else N(0, 1/fan_in)
    (unit-scale activations through any depth), embeddings N(0, 1)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            if "norm" in name or (param.dim() == 1 and "bias" not in name):
                param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=gen))
            elif "bias" in name:
                param.copy_(0.1 * torch.randn(param.shape, generator=gen))
            elif isinstance(module, torch.nn.Embedding):
                param.copy_(torch.randn(param.shape, generator=gen))
            else:
                param.copy_(torch.randn(param.shape, generator=gen) / param.shape[-1] ** 0.5)
    return module.float().eval()


def hf_causal_lm(family_or_config, seed: int = 0, **overrides):
    """(config, the whole ``<Family>ForCausalLM``) with seeded random weights, float32, eager attention (the one
    that honours a sliding window exactly). ``overrides`` change the family's tiny config (e.g.
    ``num_hidden_layers=2``)."""
    import torch

    config = hf_config(family_or_config, **overrides)
    config._attn_implementation = "eager"
    modeling, prefix = _modeling(config)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = getattr(modeling, f"{prefix}ForCausalLM")(config)
    return config, _randomise(model, seed)


def hf_mlp(config, seed: int = 0):
    modeling, prefix = _modeling(config)
    return _randomise(getattr(modeling, f"{prefix}MLP")(config), seed)


def hf_rmsnorm(config, seed: int = 0, dim: int | None = None):
    modeling, prefix = _modeling(config)
    norm = getattr(modeling, f"{prefix}RMSNorm")(dim or config.hidden_size, eps=config.rms_norm_eps)
    return _randomise(norm, seed)


def hf_embedding(config, seed: int = 0):
    import torch

    return _randomise(torch.nn.Embedding(config.vocab_size, config.hidden_size), seed)


def hf_lm_head(config, seed: int = 0):
    import torch

    return _randomise(torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False), seed)


def hf_rotary(config):
    modeling, prefix = _modeling(config)
    return getattr(modeling, f"{prefix}RotaryEmbedding")(config=config)


def mlp_weights(mlp) -> dict[str, np.ndarray]:
    """w1 (gate) and w3 (up) as [dim, hidden], w2 (down) as [hidden, dim], float32 numpy."""

    def t(weight):
        return weight.detach().float().numpy().T.copy()

    if hasattr(mlp, "gate_up_proj"):  # Phi-3: one fused [2·hidden, dim] projection, gate first
        gate, up = np.split(mlp.gate_up_proj.weight.detach().float().numpy(), 2, axis=0)
        return {"w1": gate.T.copy(), "w3": up.T.copy(), "w2": t(mlp.down_proj.weight)}
    return {"w1": t(mlp.gate_proj.weight), "w3": t(mlp.up_proj.weight), "w2": t(mlp.down_proj.weight)}


def rope_reference(config, positions) -> tuple[np.ndarray, np.ndarray]:
    """HF's cos/sin [len(positions), head_dim] for ``positions`` (rotate-half layout: the frequencies of the
    first half repeated in the second half)."""
    import torch

    rotary = hf_rotary(config)
    pos = torch.as_tensor(np.asarray(positions), dtype=torch.long).reshape(1, -1)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    x = torch.zeros(1, 1, pos.shape[-1], head_dim)
    with torch.no_grad():
        cos, sin = rotary(x, pos)
    return cos[0].float().numpy(), sin[0].float().numpy()


def run_reference(module, x) -> np.ndarray:
    """Run a torch module on a numpy (or torch) input in float32; returns numpy."""
    import torch

    tensor = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    with torch.no_grad():
        out = module(tensor.float() if tensor.is_floating_point() else tensor)
    return out.detach().float().numpy()


def random_activations(shape, seed: int = 0) -> np.ndarray:
    """Unit-scale float32 activations."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
