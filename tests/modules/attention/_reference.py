"""Hugging Face attention references for the attention tests, and the device-side rotary inputs they need.

The reference is the ``transformers`` attention module itself (Llama, Qwen2 with QKV bias, Mistral with a sliding
window, Phi-3 with a fused ``qkv_proj``, Qwen3 with per-head q/k norms), built from a tiny config with seeded
random weights. It runs on the whole sequence with an explicit causal (and sliding-window) mask, so decode step t
is compared with row t of the reference. Q/K rows are moved from HF's rotate-half order to the interleaved-pair
order ``rotary_embedding_llama`` uses; cos/sin come from HF's own rotary embedding, interleaved the same way.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import torch

from tttv2 import ttnn
from tttv2.modules import LazyWeight
from tttv2.modules.attention._shared import per_user_height_sharded
from tttv2.testing import references

_PREFIX = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "phi3": "Phi3", "qwen3": "Qwen3"}


def attention_config(
    family: str, *, n_heads: int, n_kv_heads: int, head_dim: int = 32, dim: int = 256, **extra
):
    """A one-layer HF config of ``family`` with the given head geometry (eager attention, fp32)."""
    overrides = dict(
        hidden_size=dim,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        head_dim=head_dim,
        **extra,
    )
    if family == "qwen3":
        import transformers

        base = references.family_config("qwen2")
        base.pop("model_type")
        base.pop("use_sliding_window")
        config = transformers.Qwen3Config(**{**base, **overrides})
    else:
        if family == "phi3":
            overrides.pop("head_dim")  # Phi-3 derives it from hidden_size / heads
            overrides["hidden_size"] = n_heads * head_dim
        config = references.hf_config(family, **overrides)
    config._attn_implementation = "eager"
    return config


@functools.cache
def hf_attention(config_key: tuple, seed: int = 0):
    """(config, the HF attention module of layer 0 with seeded random weights), cached per geometry."""
    family, kwargs = config_key[0], dict(config_key[1])
    config = attention_config(family, **kwargs)
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    module = getattr(modeling, f"{_PREFIX[family]}Attention")(config, layer_idx=0)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            if "norm" in name:
                param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=gen))
            elif name.endswith("bias"):
                param.copy_(0.5 * torch.randn(param.shape, generator=gen))
            else:
                # Q/K sharper than 1/sqrt(fan_in) so that attention is peaked (a position bug shows)
                scale = 2.0 if any(k in name for k in ("q_proj", "k_proj", "qkv_proj")) else 1.0
                param.copy_(scale * torch.randn(param.shape, generator=gen) / param.shape[-1] ** 0.5)
    return config, module.float().eval()


def _rotary(config):
    """The family's own rotary embedding module (Qwen3 included, which ``references`` does not list)."""
    family = config.model_type
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    return getattr(modeling, f"{_PREFIX[family]}RotaryEmbedding")(config=config)


def _hf_cos_sin(config, positions, like):
    with torch.no_grad():
        return _rotary(config)(like, torch.as_tensor(np.asarray(positions), dtype=torch.long).reshape(1, -1))


def key(family: str, **kwargs) -> tuple:
    return (family, tuple(sorted(kwargs.items())))


def interleave_rows(rows: np.ndarray, head_dim: int) -> np.ndarray:
    """Rows (axis 0) of each head from rotate-half order (first half | second half) to interleaved pairs."""
    heads = rows.reshape(-1, 2, head_dim // 2, *rows.shape[1:])
    return np.swapaxes(heads, 1, 2).reshape(rows.shape)


def attention_weights(module, config) -> dict[str, np.ndarray | None]:
    """wqkv [dim, Q|K|V], wo [heads·hd, dim], bias [Q|K|V] or None, q_norm / k_norm [hd] or None."""
    hd = (
        config.head_dim
        if getattr(config, "head_dim", None)
        else config.hidden_size // config.num_attention_heads
    )
    nq, nkv = config.num_attention_heads * hd, config.num_key_value_heads * hd

    def arr(t):
        return t.detach().float().numpy()

    if hasattr(module, "qkv_proj"):
        fused = arr(module.qkv_proj.weight)
        q, k, v = fused[:nq], fused[nq : nq + nkv], fused[nq + nkv :]
        bias = None
    else:
        q, k, v = arr(module.q_proj.weight), arr(module.k_proj.weight), arr(module.v_proj.weight)
        bias = None
        if module.q_proj.bias is not None:
            bias = np.concatenate(
                [
                    interleave_rows(arr(module.q_proj.bias), hd),
                    interleave_rows(arr(module.k_proj.bias), hd),
                    arr(module.v_proj.bias),
                ]
            )
    wqkv = np.concatenate([interleave_rows(q, hd), interleave_rows(k, hd), v], axis=0).T.copy()
    norms = {
        name: interleave_rows(arr(getattr(module, name).weight), hd) if hasattr(module, name) else None
        for name in ("q_norm", "k_norm")
    }
    return {"wqkv": wqkv, "wo": arr(module.o_proj.weight).T.copy(), "bias": bias, **norms}


def config_from_weights(config_class, weights: dict, **fields):
    """``config_class`` (Attention1DConfig / Attention2DConfig) with ``attention_weights``' wqkv and wo as
    LazyWeights and ``fields``."""
    return config_class(wqkv=LazyWeight(weights["wqkv"]), wo=LazyWeight(weights["wo"]), **fields)


def reference_attention(module, config, x: np.ndarray, sliding_window: int | None = None) -> np.ndarray:
    """HF attention over the whole sequence x [batch, T, dim] at positions 0..T-1 → [batch, T, dim]."""
    t = x.shape[1]
    allowed = torch.ones(t, t).tril().bool()
    if sliding_window is not None:
        allowed &= ~torch.ones(t, t).tril(-sliding_window).bool()
    mask = torch.zeros(t, t).masked_fill(~allowed, float("-inf"))[None, None]
    hidden = torch.as_tensor(x).float()
    cos, sin = _hf_cos_sin(config, np.arange(t), hidden)
    with torch.no_grad():
        out = module(hidden, position_embeddings=(cos, sin), attention_mask=mask)[0]
    return out.numpy()


def rot_tables(config, positions) -> tuple[np.ndarray, np.ndarray]:
    """HF's cos/sin for ``positions`` [len, hd], moved to the interleaved-pair order."""
    cos, sin = (t[0].numpy() for t in _hf_cos_sin(config, positions, torch.zeros(1)))
    half = cos.shape[-1] // 2
    return np.repeat(cos[:, :half], 2, axis=-1), np.repeat(sin[:, :half], 2, axis=-1)


def prefill_rot_mats(mesh, config, start: int, seq_len: int) -> list:
    """[cos, sin] [1, 1, S, hd] for positions start .. start + S - 1, replicated."""
    tables = rot_tables(config, np.arange(start, start + seq_len))
    return [
        ttnn.from_numpy(
            t[None, None].astype(np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
        )
        for t in tables
    ]


def decode_rot_mats(mesh, config, positions, mesh_mapper_config=None) -> list:
    """[cos, sin] [1, users, 1, hd], one user per core (the layout RotarySetup's decode lookup produces)."""
    users = len(positions)
    tables = rot_tables(config, np.asarray(positions))
    memory_config = per_user_height_sharded(mesh, users, tables[0].shape[-1])
    return [
        LazyWeight(
            t[None, :, None, :].astype(np.float32),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            memory_config=memory_config,
            mesh_mapper_config=mesh_mapper_config,
            device=mesh,
        ).get_device_weight()
        for t in tables
    ]
