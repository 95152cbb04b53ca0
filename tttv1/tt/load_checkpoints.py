"""Loading Hugging Face checkpoints into the Meta-style names the tttv1 modules read.

TTTv1 modules read ``layers.{i}.attention.wq.weight`` etc. and apply RoPE on adjacent pairs, so Hugging Face
weights are renamed and the Q/K rows permuted from the rotate-half layout to the interleaved layout. Fused
Phi-3 projections (``qkv_proj``, ``gate_up_proj``) are split first. Nothing is downloaded: checkpoints are
read from a local directory (``*.safetensors`` or ``pytorch_model*.bin`` plus ``config.json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

_HF_TO_META = (
    (r"^model\.embed_tokens\.weight$", "tok_embeddings.weight"),
    (r"^model\.norm\.weight$", "norm.weight"),
    (r"^lm_head\.weight$", "output.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)$", r"layers.\1.attention.wq.\2"),
    (r"^model\.layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)$", r"layers.\1.attention.wk.\2"),
    (r"^model\.layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)$", r"layers.\1.attention.wv.\2"),
    (r"^model\.layers\.(\d+)\.self_attn\.o_proj\.weight$", r"layers.\1.attention.wo.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.q_norm\.weight$", r"layers.\1.attention.q_norm.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.k_norm\.weight$", r"layers.\1.attention.k_norm.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.gate_proj\.weight$", r"layers.\1.feed_forward.w1.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.down_proj\.weight$", r"layers.\1.feed_forward.w2.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.up_proj\.weight$", r"layers.\1.feed_forward.w3.weight"),
    (r"^model\.layers\.(\d+)\.input_layernorm\.weight$", r"layers.\1.attention_norm.weight"),
    (r"^model\.layers\.(\d+)\.post_attention_layernorm\.weight$", r"layers.\1.ffn_norm.weight"),
)


def load_hf_state_dict(ckpt_dir: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a local checkpoint directory (safetensors preferred)."""
    ckpt_dir = Path(ckpt_dir)
    files = sorted(ckpt_dir.glob("*.safetensors"))
    state_dict: dict[str, torch.Tensor] = {}
    if files:
        from safetensors.torch import load_file

        for f in files:
            state_dict.update(load_file(str(f)))
        return state_dict
    bins = sorted(ckpt_dir.glob("pytorch_model*.bin"))
    if not bins:
        raise FileNotFoundError(f"no *.safetensors or pytorch_model*.bin files in {ckpt_dir}")
    for f in bins:
        state_dict.update(torch.load(f, map_location="cpu", weights_only=True))
    return state_dict


def load_hf_config(ckpt_dir: str | Path) -> dict:
    path = Path(ckpt_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: a checkpoint directory needs a config.json")
    return json.loads(path.read_text())


def split_hf_keys(state_dict: dict, n_heads: int, n_kv_heads: int, head_dim: int) -> dict:
    """Split Phi-3 style fused projections into the separate q/k/v and gate/up tensors."""
    out = {}
    q_size, kv_size = n_heads * head_dim, n_kv_heads * head_dim
    for key, value in state_dict.items():
        if key.endswith("self_attn.qkv_proj.weight") or key.endswith("self_attn.qkv_proj.bias"):
            suffix = key.rsplit(".", 1)[1]
            base = key[: -len(f"qkv_proj.{suffix}")]
            q, k, v = torch.split(value, [q_size, kv_size, kv_size], dim=0)
            out[f"{base}q_proj.{suffix}"], out[f"{base}k_proj.{suffix}"], out[f"{base}v_proj.{suffix}"] = (
                q,
                k,
                v,
            )
        elif key.endswith("mlp.gate_up_proj.weight"):
            base = key[: -len("gate_up_proj.weight")]
            gate, up = torch.chunk(value, 2, dim=0)
            out[f"{base}gate_proj.weight"], out[f"{base}up_proj.weight"] = gate, up
        else:
            out[key] = value
    return out


def reverse_permute(tensor: torch.Tensor, n_heads: int, dim1: int, dim2: int) -> torch.Tensor:
    """Rows of each head from rotate-half order (first half | second half) to interleaved pairs."""
    head_rows = dim1 // n_heads
    # within one head, new row 2j comes from old row j and new row 2j + 1 from old row head_rows/2 + j
    order = torch.arange(head_rows).view(2, head_rows // 2).t().flatten()
    per_head = tensor.reshape(n_heads, head_rows, dim2)
    return per_head.index_select(1, order).reshape(dim1, dim2)


def _to_interleaved(tensor: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``reverse_permute`` over the leading axis of a weight [rows, cols] or a vector [rows]."""
    as_matrix = tensor if tensor.dim() == 2 else tensor[:, None]
    rows, cols = as_matrix.shape
    out = reverse_permute(as_matrix, rows // head_dim, rows, cols)
    return out if tensor.dim() == 2 else out[:, 0]


_ROPE_PERMUTED = ("self_attn.q_proj.", "self_attn.k_proj.")
_PER_HEAD_NORMS = ("q_norm.weight", "k_norm.weight")


def convert_hf_qkv_to_meta_format(state_dict: dict, head_dim: int) -> dict:
    """Permute q/k weights and biases (and q/k norms) so RoPE can act on adjacent pairs."""
    out = dict(state_dict)
    for key, tensor in state_dict.items():
        if any(marker in key for marker in _ROPE_PERMUTED):
            out[key] = _to_interleaved(tensor, head_dim)
        elif key.endswith(_PER_HEAD_NORMS):
            # a per-head norm weight is one head wide
            out[key] = _to_interleaved(tensor, tensor.shape[0])
    return out


def map_hf_to_meta_keys(state_dict: dict) -> dict:
    out = {}
    for key, tensor in state_dict.items():
        for pattern, repl in _HF_TO_META:
            if re.match(pattern, key):
                out[re.sub(pattern, repl, key)] = tensor
                break
        else:
            out[key] = tensor
    return out


def convert_hf_to_meta(
    state_dict: dict, head_dim: int, n_heads: int, n_kv_heads: int, tie_word_embeddings: bool
) -> dict:
    """HF names + rotate-half layout → Meta names + interleaved layout (float32 on host)."""
    state_dict = {k: v.float() for k, v in state_dict.items()}
    state_dict = split_hf_keys(state_dict, n_heads, n_kv_heads, head_dim)
    if (
        tie_word_embeddings
        and "lm_head.weight" not in state_dict
        and "model.embed_tokens.weight" in state_dict
    ):
        state_dict["lm_head.weight"] = state_dict["model.embed_tokens.weight"]
    state_dict = convert_hf_qkv_to_meta_format(state_dict, head_dim)
    return map_hf_to_meta_keys(state_dict)


def standardize_config(config: dict) -> dict:
    """Read a config.json written by any transformers version: ``rope_parameters`` (v5) or ``rope_theta`` +
    ``rope_scaling`` (v4), ``head_dim`` present or implied."""
    config = dict(config)
    rope = config.get("rope_parameters")
    if isinstance(rope, dict):
        config.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
        if rope.get("rope_type", "default") != "default" and not config.get("rope_scaling"):
            config["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    config.setdefault("rope_theta", 10000.0)
    if not config.get("head_dim"):
        config["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("tie_word_embeddings", False)
    return config


class StreamedMetaWeights(Mapping):
    """Meta-named float32 weights converted one at a time from a Hugging Face-named mapping (``RandomWeights``, a
    ``SafetensorsCheckpoint``): each is made when a module asks for it and dropped once that module has moved it
    to the devices, so the host never holds the whole model. The conversion is ``convert_hf_to_meta`` applied to
    the one source tensor; which source tensor each Meta name comes from is found once on shape-only ("meta")
    tensors."""

    def __init__(
        self, source: Mapping, head_dim: int, n_heads: int, n_kv_heads: int, tie_word_embeddings: bool
    ):
        self._source = source
        self._conversion = (head_dim, n_heads, n_kv_heads, tie_word_embeddings)
        self._origin: dict[str, str] = {}
        for hf_key in source:
            shape = source.shape(hf_key) if hasattr(source, "shape") else tuple(source[hf_key].shape)
            for meta_key in convert_hf_to_meta(
                {hf_key: torch.empty(shape, device="meta")}, *self._conversion
            ):
                self._origin.setdefault(meta_key, hf_key)

    def __getitem__(self, key: str) -> torch.Tensor:
        hf_key = self._origin[key]
        tensor = torch.as_tensor(self._source[hf_key])
        return convert_hf_to_meta({hf_key: tensor}, *self._conversion)[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._origin)

    def __len__(self) -> int:
        return len(self._origin)
