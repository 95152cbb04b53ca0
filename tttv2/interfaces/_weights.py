"""Hugging Face checkpoints as TT-NN weights: where each tensor is and how it is laid out.

``SafetensorsCheckpoint(path)`` reads a local ``.safetensors`` file or a directory of them (a sharded checkpoint)
without torch: the JSON header is parsed and each tensor is memory-mapped when it is first asked for (bfloat16
and float16 become float32, which is exact). ``HuggingFaceWeights(source)`` takes such a checkpoint, a state
dict (numpy arrays or torch tensors) or a path, and returns each block's weights in TT-NN layout: ``[in, out]``
matrices, Q and K rows of every head moved from Hugging Face's rotate-half order to the interleaved pairs
``rotary_embedding_llama`` uses, Phi-3's fused ``qkv_proj`` / ``gate_up_proj`` split. Keys may carry the
``model.`` prefix of a causal-LM checkpoint or not.

``RandomWeights(config, seed)`` is a checkpoint that is not there: the Hugging Face names and shapes of a
``config.json`` (``hf_param_shapes``), each tensor drawn from its own seed (the seed and the CRC-32 of its name)
when it is asked for and never kept. A model built from it holds one tensor on the host at a time, whatever its
size: real sizes run without a checkpoint (issue 24).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from tttv2.modules.lazy_weight import host_array

__all__ = [
    "HuggingFaceWeights",
    "RandomWeights",
    "SafetensorsCheckpoint",
    "hf_param_shapes",
    "interleave_rotary_rows",
]

_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": "bfloat16",
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


class SafetensorsCheckpoint(Mapping):
    """The tensors of a ``.safetensors`` file, or of every ``*.safetensors`` file in a directory, by name."""

    def __init__(self, path: str | os.PathLike) -> None:
        path = Path(path)
        files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
        if not files or not all(f.is_file() for f in files):
            raise FileNotFoundError(
                f"SafetensorsCheckpoint: path must be a .safetensors file or a directory holding some, got {path}"
            )
        self._where: dict[str, tuple[Path, int, dict]] = {}
        for file in files:
            with open(file, "rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                try:
                    header = json.loads(handle.read(size))
                except ValueError as exc:
                    raise ValueError(
                        f"SafetensorsCheckpoint: {file} has no valid safetensors header"
                    ) from exc
            header.pop("__metadata__", None)
            for name, entry in header.items():
                if name in self._where:
                    raise ValueError(
                        f"SafetensorsCheckpoint: tensor {name!r} is in both {self._where[name][0]} and {file}"
                    )
                self._where[name] = (file, 8 + size, entry)

    def __getitem__(self, name: str) -> np.ndarray:
        file, data_start, entry = self._where[name]
        kind = entry["dtype"]
        if kind not in _DTYPES:
            raise ValueError(
                f"SafetensorsCheckpoint: tensor {name!r} has dtype {kind}, which is not supported"
            )
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        if kind == "BF16":  # the upper half of a float32
            raw = np.memmap(file, dtype="<u2", mode="r", offset=data_start + begin, shape=shape)
            return (raw.astype(np.uint32) << 16).view(np.float32)
        dtype = np.dtype(_DTYPES[kind]).newbyteorder("<")
        if end - begin != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise ValueError(
                f"SafetensorsCheckpoint: tensor {name!r}: {end - begin} bytes do not hold {shape} {kind}"
            )
        array = np.memmap(file, dtype=dtype, mode="r", offset=data_start + begin, shape=shape)
        return array.astype(np.float32) if kind == "F16" else array

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def interleave_rotary_rows(rows: np.ndarray, head_dim: int) -> np.ndarray:
    """Rows (axis 0) of each head from rotate-half order (first half | second half) to interleaved pairs."""
    heads = rows.reshape(-1, 2, head_dim // 2, *rows.shape[1:])
    return np.swapaxes(heads, 1, 2).reshape(rows.shape)


class HuggingFaceWeights:
    """One model's weights by block, in TT-NN layout (see the module docstring). ``source``: a state dict, a
    ``SafetensorsCheckpoint``, or a path to a ``.safetensors`` file or directory."""

    def __init__(self, source) -> None:
        if isinstance(source, (str, os.PathLike)):
            source = SafetensorsCheckpoint(source)
        if not isinstance(source, Mapping):
            raise TypeError(
                f"weights must be a state dict, a SafetensorsCheckpoint or a path to safetensors, got {type(source).__name__}"
            )
        self._source = source
        self._prefix = "model." if any(k.startswith("model.") for k in source) else ""

    def _get(self, name: str, shape: tuple[int, ...] | None = None, *, top: bool = False) -> np.ndarray:
        key = name if top else self._prefix + name
        if key not in self._source:
            raise KeyError(f"weights: the checkpoint has no tensor {key!r}")
        value = self._source[key]  # read once: a RandomWeights or checkpoint makes it on each read
        array = np.asarray(value if isinstance(value, np.ndarray) else host_array(value))
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise ValueError(f"weights: {key!r} must have shape {tuple(shape)}, got {tuple(array.shape)}")
        return np.asarray(array, dtype=np.float32)

    def has(self, name: str) -> bool:
        return self._prefix + name in self._source

    def embedding(self, vocab: int, dim: int) -> np.ndarray:
        """[vocab, dim]."""
        return self._get("embed_tokens.weight", (vocab, dim))

    def lm_head(self, vocab: int, dim: int, tied: bool) -> np.ndarray:
        """[dim, vocab] (the embedding's transpose when the model ties them)."""
        if tied:
            return np.ascontiguousarray(self.embedding(vocab, dim).T)
        return np.ascontiguousarray(self._get("lm_head.weight", (vocab, dim), top=True).T)

    def final_norm(self, dim: int) -> np.ndarray:
        return self._get("norm.weight", (dim,))

    def attention_norm(self, layer: int, dim: int) -> np.ndarray:
        return self._get(f"layers.{layer}.input_layernorm.weight", (dim,))

    def ffn_norm(self, layer: int, dim: int) -> np.ndarray:
        return self._get(f"layers.{layer}.post_attention_layernorm.weight", (dim,))

    def attention(self, layer: int, dim: int, heads: int, kv_heads: int, head_dim: int, bias: bool) -> dict:
        """``wqkv`` [dim, (heads + 2·kv_heads)·head_dim] (Q | K | V columns, Q/K interleaved), ``wo``
        [heads·head_dim, dim], ``bias`` [Q | K | V] or None."""
        base = f"layers.{layer}.self_attn."
        nq, nkv = heads * head_dim, kv_heads * head_dim
        if self.has(base + "qkv_proj.weight"):  # Phi-3
            fused = self._get(base + "qkv_proj.weight", (nq + 2 * nkv, dim))
            q, k, v = fused[:nq], fused[nq : nq + nkv], fused[nq + nkv :]
        else:
            q = self._get(base + "q_proj.weight", (nq, dim))
            k = self._get(base + "k_proj.weight", (nkv, dim))
            v = self._get(base + "v_proj.weight", (nkv, dim))
        wqkv = np.concatenate(
            [interleave_rotary_rows(q, head_dim), interleave_rotary_rows(k, head_dim), v], axis=0
        ).T
        qkv_bias = None
        if bias:
            qkv_bias = np.concatenate(
                [
                    interleave_rotary_rows(self._get(base + "q_proj.bias", (nq,)), head_dim),
                    interleave_rotary_rows(self._get(base + "k_proj.bias", (nkv,)), head_dim),
                    self._get(base + "v_proj.bias", (nkv,)),
                ]
            )
        wo = self._get(base + "o_proj.weight", (dim, nq)).T
        return {"wqkv": np.ascontiguousarray(wqkv), "wo": np.ascontiguousarray(wo), "bias": qkv_bias}

    def mlp(self, layer: int, dim: int, hidden: int) -> dict:
        """``w1`` (gate) and ``w3`` (up) [dim, hidden], ``w2`` (down) [hidden, dim]."""
        base = f"layers.{layer}.mlp."
        if self.has(base + "gate_up_proj.weight"):  # Phi-3: gate first, then up
            gate, up = np.split(self._get(base + "gate_up_proj.weight", (2 * hidden, dim)), 2, axis=0)
            w1, w3 = np.ascontiguousarray(gate.T), np.ascontiguousarray(up.T)
            del gate, up
        else:
            # each read and transposed before the next is read: one source array in flight at a time, which a
            # RandomWeights (or a checkpoint reader) makes anew on every read
            w1 = np.ascontiguousarray(self._get(base + "gate_proj.weight", (hidden, dim)).T)
            w3 = np.ascontiguousarray(self._get(base + "up_proj.weight", (hidden, dim)).T)
        w2 = np.ascontiguousarray(self._get(base + "down_proj.weight", (dim, hidden)).T)
        return {"w1": w1, "w3": w3, "w2": w2}


def hf_param_shapes(config: Mapping) -> dict[str, tuple[int, ...]]:
    """Hugging Face parameter names and shapes of a Llama, Mistral, Qwen2 or Phi-3 ``config.json`` (fused
    ``qkv_proj`` / ``gate_up_proj`` for Phi-3, Q/K/V biases for Qwen2, no ``lm_head`` when embeddings are tied)."""
    dim, hidden = config["hidden_size"], config["intermediate_size"]
    nh = config["num_attention_heads"]
    nkv = config.get("num_key_value_heads") or nh
    hd = config.get("head_dim") or dim // nh
    vocab = config["vocab_size"]
    fused = config.get("model_type") == "phi3"
    shapes = {"model.embed_tokens.weight": (vocab, dim), "model.norm.weight": (dim,)}
    if not config.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (vocab, dim)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        if fused:
            shapes[f"{p}.self_attn.qkv_proj.weight"] = ((nh + 2 * nkv) * hd, dim)
            shapes[f"{p}.mlp.gate_up_proj.weight"] = (2 * hidden, dim)
        else:
            shapes[f"{p}.self_attn.q_proj.weight"] = (nh * hd, dim)
            shapes[f"{p}.self_attn.k_proj.weight"] = (nkv * hd, dim)
            shapes[f"{p}.self_attn.v_proj.weight"] = (nkv * hd, dim)
            shapes[f"{p}.mlp.gate_proj.weight"] = (hidden, dim)
            shapes[f"{p}.mlp.up_proj.weight"] = (hidden, dim)
            if config.get("model_type") == "qwen2":
                shapes[f"{p}.self_attn.q_proj.bias"] = (nh * hd,)
                shapes[f"{p}.self_attn.k_proj.bias"] = (nkv * hd,)
                shapes[f"{p}.self_attn.v_proj.bias"] = (nkv * hd,)
        shapes[f"{p}.self_attn.o_proj.weight"] = (dim, nh * hd)
        shapes[f"{p}.mlp.down_proj.weight"] = (dim, hidden)
        shapes[f"{p}.input_layernorm.weight"] = (dim,)
        shapes[f"{p}.post_attention_layernorm.weight"] = (dim,)
    return shapes


def random_weight_scale(name: str) -> tuple[float, float]:
    """(mean, std) of a random weight by its name: norms 1 ± 0.1 (a wrong norm weight shows), embeddings N(0, 1)
    (unit-scale activations), biases N(0, 0.1), Q/K N(0, 0.08) (peaked attention), other matrices N(0, 0.02)."""
    if name.endswith("norm.weight"):
        return 1.0, 0.1
    if "embed_tokens" in name:
        return 0.0, 1.0
    if name.endswith(".bias"):
        return 0.0, 0.1
    if any(p in name for p in ("q_proj", "k_proj", "qkv_proj")):
        return 0.0, 0.08
    return 0.0, 0.02


class RandomWeights(Mapping):
    """Seeded random float32 weights with the Hugging Face names and shapes of ``config``, made on demand: a
    tensor is drawn when it is asked for (from ``seed`` and the CRC-32 of its name, so the same name gives the
    same bits in any order) and nothing is cached."""

    def __init__(self, config: Mapping, seed: int = 0) -> None:
        self._shapes = hf_param_shapes(config)
        self.seed = int(seed)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def __getitem__(self, name: str) -> np.ndarray:
        shape = self._shapes[name]  # KeyError for a name the config does not have, as a dict would
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        mean, std = random_weight_scale(name)
        array = rng.standard_normal(shape, dtype=np.float32)
        array *= np.float32(std)
        if mean:
            array += np.float32(mean)
        return array

    def __contains__(self, name) -> bool:
        return name in self._shapes  # without making the tensor (Mapping's default reads it)

    def __iter__(self) -> Iterator[str]:
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)
