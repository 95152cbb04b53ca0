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
    """``x`` rounded up to a multiple of ``multiple``."""
    return -(-x // multiple) * multiple


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
    widest = max(8 // out_subblock_h, 1)
    fitting = [w for w in range(1, widest + 1) if per_core_N % w == 0]
    return fitting[-1]


def num_to_core_range_set(x: int) -> ttnn.CoreRangeSet:
    """``x`` cores on an 8-wide grid, row-major (TTTv1 shards small per-device tensors this way)."""
    rows, partial = divmod(x, 8)
    if rows == 0:
        last = ttnn.CoreCoord(x - 1, 0)
    else:
        assert partial == 0, f"num_to_core_range_set: {x} cores do not fill whole rows of 8"
        last = ttnn.CoreCoord(7, rows - 1)
    return ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), last)})


def calculate_hidden_dim(dim: int, ffn_dim_multiplier: float | None, multiple_of: int) -> int:
    """Meta-checkpoint rule for the MLP width when a config gives no intermediate_size: two thirds of 4 × dim,
    optionally scaled, rounded up to ``multiple_of``."""
    width = int(8 * dim / 3)
    if ffn_dim_multiplier is not None:
        width = int(width * ffn_dim_multiplier)
    return nearest_multiple(width, multiple_of)


def get_padded_prefill_len(seq_len: int) -> int:
    """Prefill runs on 128 / power-of-two / multiple-of-2048 lengths (attention asserts ``% 128``)."""
    if seq_len <= 128:
        return 128
    if seq_len <= 1024:
        return 2 ** math.ceil(math.log2(seq_len))
    return nearest_multiple(seq_len, 2048)


def num_blocks_in_seq(seq_len: int, block_size: int) -> int:
    """Pages of ``block_size`` tokens needed to hold ``seq_len`` tokens."""
    return nearest_multiple(seq_len, block_size) // block_size


def get_block_size(kv_cache) -> int:
    """Page size of a paged cache: the token axis of layer 0's K tensor [blocks, kv_heads, block, head_dim]."""
    first_k = kv_cache[0][0]
    return first_k.shape[2]


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
    """Llama-3 long-context frequency scaling. Each frequency is multiplied by a weight between 1/factor and 1:
    1/factor when fewer than ``low_freq_factor`` of its periods fit in the original context, 1 when more than
    ``high_freq_factor`` fit, and linear in the number of periods in between."""
    periods_in_context = freqs * scaling.original_max_position_embeddings / (2 * math.pi)
    band = scaling.high_freq_factor - scaling.low_freq_factor
    keep = ((periods_in_context - scaling.low_freq_factor) / band).clamp(0.0, 1.0)
    return freqs * (keep + (1 - keep) / scaling.factor)


def precompute_freqs(dim: int, end: int, theta: float, rope_scaling: RopeScaling | None = None):
    """cos/sin of position × frequency, shape [end, dim // 2]."""
    exponents = torch.arange(dim // 2, dtype=torch.float64) * 2 / dim
    freqs = torch.pow(float(theta), -exponents)
    if rope_scaling is not None:
        freqs = apply_llama3_scaling(freqs, rope_scaling)
    positions = torch.arange(end, dtype=torch.float64)
    angles = positions[:, None] * freqs[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def gather_cos_sin(position_ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rows ``position_ids`` of the tables, each frequency repeated twice (interleaved pairs): [1, 1, S, dim]."""

    def pairwise(table):
        rows = table[position_ids]
        return rows.repeat_interleave(2, dim=-1)[None, None]

    return pairwise(cos), pairwise(sin)


def compute_gather_cos_sin(dhead: int, end: int, theta: float, rope_scaling: RopeScaling | None):
    cos, sin = precompute_freqs(dhead, end, theta, rope_scaling)
    return gather_cos_sin(torch.arange(end), cos, sin)


def get_rot_transformation_mat(dhead: int = 32) -> torch.Tensor:
    """The 32×32 tile that ``rotary_embedding_llama`` multiplies each head tile by: (x @ M) swaps each
    interleaved pair with a sign, (x0, x1) -> (-x1, x0). One tile is used whatever the head dim."""
    size = ttnn.TILE_SIZE
    pair_block = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    mat = torch.block_diag(*([pair_block] * (size // 2)))
    return mat.reshape(1, 1, size, size)


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
