"""Helpers shared by the tttv1 modules (the counterpart of ``models/tt_transformers/tt/common.py``).

Mode enum (G3 style), paged-attention config, padding/core-grid arithmetic used by model_config, the RoPE
tables (interleaved "Meta" layout, with llama3 frequency scaling) and the host-side input preparation used by
the generator and the demo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
import ttnn


class Mode(Enum):
    """G3 spelling of the forward mode; G2 modules use the strings "decode" / "prefill" instead."""

    DECODE = "decode"
    PREFILL = "prefill"


def mode_str(mode) -> str:
    """Normalise a mode given as ``Mode`` or string (a G2 decoder passes strings into G3 modules)."""
    return mode.value if isinstance(mode, Mode) else str(mode)


def as_mode(mode) -> Mode:
    return mode if isinstance(mode, Mode) else Mode(str(mode))


@dataclass
class PagedAttentionConfig:
    """Paged KV cache geometry: ``max_num_blocks`` blocks of ``block_size`` tokens shared by all users."""

    block_size: int = 32
    max_num_blocks: int = 1024


# --- integer helpers used by model_config ------------------------------------------------------------------


def nearest_multiple(x: int, multiple: int) -> int:
    return math.ceil(x / multiple) * multiple


def nearest_32(x: int) -> int:
    return nearest_multiple(x, 32)


def pad_to_size(x: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """Zero-pad ``dim`` of ``x`` up to ``size`` (used for the padded MLP hidden dim and vocab)."""
    dim = dim if dim >= 0 else x.dim() + dim
    current = x.shape[dim]
    if current >= size:
        return x
    pad = [0, 0] * (x.dim() - dim - 1) + [0, size - current]
    return torch.nn.functional.pad(x, pad, value=0)


def get_out_subblock_w(per_core_N: int, out_subblock_h: int) -> int:
    """Largest subblock width dividing per_core_N with h × w <= 8 destination tiles."""
    out_subblock_w = 8 // out_subblock_h
    while out_subblock_w > 1:
        if per_core_N % out_subblock_w == 0 and out_subblock_w * out_subblock_h <= 8:
            break
        out_subblock_w -= 1
    return max(out_subblock_w, 1)


def num_to_core_range_set(x: int) -> ttnn.CoreRangeSet:
    """``x`` cores on an 8-wide grid, row-major (TTTv1 shards small per-device tensors this way)."""
    num_x = min(x, 8)
    num_y = x // num_x
    assert num_x * num_y == x, f"num_to_core_range_set: {x} cores do not fill whole rows of 8"
    return ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(num_x - 1, num_y - 1))})


def calculate_hidden_dim(dim: int, ffn_dim_multiplier: float | None, multiple_of: int) -> int:
    """Meta-checkpoint rule for the MLP width when a config gives no intermediate_size."""
    hidden_dim = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden_dim = int(ffn_dim_multiplier * hidden_dim)
    return multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)


def get_padded_prefill_len(seq_len: int) -> int:
    """Prefill runs on 128 / power-of-two / multiple-of-2048 lengths (attention asserts ``% 128``)."""
    if seq_len <= 128:
        return 128
    if seq_len <= 1024:
        return 2 ** math.ceil(math.log2(seq_len))
    return nearest_multiple(seq_len, 2048)


def num_blocks_in_seq(seq_len: int, block_size: int) -> int:
    return math.ceil(seq_len / block_size)


def get_block_size(kv_cache) -> int:
    return kv_cache[0][0].shape[2]


# --- RoPE ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RopeScaling:
    """The rope scaling a Hugging Face config asks for; only "llama3" changes the frequencies here."""

    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


def rope_scaling_model_factory(rope_scaling: dict | None) -> RopeScaling | None:
    """Parse the HF ``rope_scaling`` / ``rope_parameters`` dict; None or "default" means no scaling."""
    if not rope_scaling:
        return None
    rope_type = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
    if rope_type == "default":
        return None
    if rope_type != "llama3":
        raise ValueError(f"tttv1 supports rope_type 'default' and 'llama3', got {rope_type!r}")
    return RopeScaling(
        rope_type=rope_type,
        factor=float(rope_scaling["factor"]),
        low_freq_factor=float(rope_scaling.get("low_freq_factor", 1.0)),
        high_freq_factor=float(rope_scaling.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(rope_scaling.get("original_max_position_embeddings", 8192)),
    )


def apply_llama3_scaling(freqs: torch.Tensor, scaling: RopeScaling) -> torch.Tensor:
    """Llama-3 long-context frequency scaling: long wavelengths are divided by ``factor``, short ones kept,
    the band in between interpolated (the same rule Hugging Face applies)."""
    low_wavelen = scaling.original_max_position_embeddings / scaling.low_freq_factor
    high_wavelen = scaling.original_max_position_embeddings / scaling.high_freq_factor
    wavelen = 2 * math.pi / freqs
    scaled = torch.where(wavelen > low_wavelen, freqs / scaling.factor, freqs)
    smooth = (scaling.original_max_position_embeddings / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
    blended = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    in_band = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(in_band, blended, scaled)


def precompute_freqs(dim: int, end: int, theta: float, rope_scaling: RopeScaling | None = None):
    """cos/sin of position × frequency, shape [end, dim // 2]."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].double() / dim))
    if rope_scaling is not None:
        freqs = apply_llama3_scaling(freqs, rope_scaling)
    t = torch.arange(end, dtype=torch.float64)
    angles = torch.outer(t, freqs)
    return torch.cos(angles).float(), torch.sin(angles).float()


def gather_cos_sin(position_ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rows ``position_ids`` of the tables, each frequency repeated twice (interleaved pairs): [1, 1, S, dim]."""
    cos = cos[position_ids]
    sin = sin[position_ids]
    cos = torch.stack([cos, cos], dim=-1).flatten(-2).unsqueeze(0).unsqueeze(0)
    sin = torch.stack([sin, sin], dim=-1).flatten(-2).unsqueeze(0).unsqueeze(0)
    return cos, sin


def compute_gather_cos_sin(dhead: int, end: int, theta: float, rope_scaling: RopeScaling | None):
    cos, sin = precompute_freqs(dhead, end, theta, rope_scaling)
    return gather_cos_sin(torch.arange(end), cos, sin)


def get_rot_transformation_mat(dhead: int = 32) -> torch.Tensor:
    """The 32×32 tile that ``rotary_embedding_llama`` multiplies each head tile by: (x @ M) swaps each
    interleaved pair with a sign, (x0, x1) -> (-x1, x0). One tile is used whatever the head dim."""
    dhead = ttnn.TILE_SIZE
    mat = torch.zeros(1, 1, dhead, dhead)
    mat[..., torch.arange(0, dhead, 2), torch.arange(1, dhead, 2)] = 1
    mat[..., torch.arange(1, dhead, 2), torch.arange(0, dhead, 2)] = -1
    return mat


def get_prefill_rot_mat(head_dim, mesh_device, seq_len, theta, rope_scaling, start_pos: int = 0):
    """cos/sin for positions [start_pos, start_pos + seq_len) on device, replicated: [1, 1, S, head_dim]."""
    cos, sin = precompute_freqs(head_dim, start_pos + seq_len, theta, rope_scaling)
    cos_g, sin_g = gather_cos_sin(torch.arange(start_pos, start_pos + seq_len), cos, sin)
    mapper = ttnn.ReplicateTensorToMesh(mesh_device)
    return [
        ttnn.from_torch(
            t, device=mesh_device, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper
        )
        for t in (cos_g, sin_g)
    ]


# --- host-side inputs ---------------------------------------------------------------------------------------


def copy_host_to_device(host_tensors, device_tensors=None, mesh_device=None):
    """Move prepared host tensors to the mesh (a fresh copy, or into existing device tensors for traces)."""
    if device_tensors is None:
        assert mesh_device is not None, (
            "copy_host_to_device needs mesh_device when no device tensors are given"
        )
        return [None if t is None else ttnn.to_device(t, mesh_device) for t in host_tensors]
    return [
        None if t is None else ttnn.to_device(t, d.device()) for t, d in zip(host_tensors, device_tensors)
    ]


def preprocess_inputs_prefill(
    input_prompts, tokenizer, model_args, instruct, max_generated_tokens, max_prefill_len=None
):
    """Tokenise prompts, left-align them and pad to the longest: (input_tokens [B, S_max], encoded, decoding_pos,
    prefill_lens). Prompts longer than ``max_prefill_len`` keep their last tokens."""
    if max_prefill_len is None:
        max_prefill_len = model_args.max_seq_len
    max_prefill_len = min(max_prefill_len, model_args.max_seq_len - max_generated_tokens)
    encoded = []
    for prompt in input_prompts:
        tokens = tokenizer.encode(prompt, bos=True) if instruct is False else tokenizer.encode_chat(prompt)
        if len(tokens) > max_prefill_len:
            tokens = tokens[-max_prefill_len:]
        encoded.append(tokens)
    prefill_lens = [len(t) for t in encoded]
    longest = max(prefill_lens)
    pad_id = tokenizer.pad_id
    input_tokens = torch.full((len(encoded), longest), pad_id, dtype=torch.long)
    for i, tokens in enumerate(encoded):
        input_tokens[i, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    decoding_pos = list(prefill_lens)
    return input_tokens, encoded, decoding_pos, prefill_lens


def sample_host(logits: torch.Tensor, temperature: float = 0.0, top_p: float = 1.0, seed: int = 0):
    """Greedy (temperature 0) or top-p sampling on host logits [..., vocab] → token ids [...]."""
    if temperature <= 0:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_probs, idx = torch.sort(probs, dim=-1, descending=True)
    keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < top_p
    sorted_probs = sorted_probs * keep
    sorted_probs = sorted_probs / sorted_probs.sum(dim=-1, keepdim=True)
    gen = torch.Generator().manual_seed(seed)
    choice = torch.multinomial(sorted_probs.reshape(-1, sorted_probs.shape[-1]), 1, generator=gen)
    return torch.gather(idx.reshape(-1, idx.shape[-1]), -1, choice).reshape(logits.shape[:-1])


def get_base_model_name(model_name: str) -> str:
    """Drop instruct/size suffixes so precision tables and device tables match ("Llama-3.1-8B-Instruct" →
    "Llama-3.1-8B"; the catalogue's "-tiny" models keep the family name of the model they imitate)."""
    for suffix in ("-Instruct", "-instruct", "-tiny", "-Tiny"):
        model_name = model_name.replace(suffix, "")
    return model_name
