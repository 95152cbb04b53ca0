"""``ModelFactory``: Hugging Face configs → ``ModelSpec``, and ``ModelSpec`` + mesh + weights → a runnable model.

``from_spec`` chooses the topology from the mesh (1D blocks on 1xN meshes, 2D blocks on a Galaxy), builds every
block from its config with the hardware defaults of ``hw_mode`` (a field the blocks resolve themselves, such as
a grid, is never set here), takes the weights as ``LazyWeight``s from a state dict or a local safetensors
checkpoint (converted to the device on first use), and composes them with ``patterns.DecoderLayer`` and
``patterns.CausalLM``. Per-layer differences of the spec (sliding window, intermediate size) reach each layer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from tttv2 import ttnn
from tttv2.interfaces._huggingface import spec_from_huggingface
from tttv2.interfaces._model_spec import ActivationType, ModelSpec, NormType
from tttv2.interfaces._weights import HuggingFaceWeights, RandomWeights
from tttv2.modules import (
    MLP1D,
    MLP2D,
    Attention1D,
    Attention1DConfig,
    Attention2D,
    Attention2DConfig,
    Embedding1D,
    Embedding1DConfig,
    Embedding2D,
    Embedding2DConfig,
    LazyWeight,
    LMHead1D,
    LMHead1DConfig,
    LMHead2D,
    LMHead2DConfig,
    MLP1DConfig,
    MLP2DConfig,
    RMSNorm1D,
    RMSNorm1DConfig,
    RMSNorm2D,
    RMSNorm2DConfig,
    RotarySetup1D,
    RotarySetup1DConfig,
    RotarySetup2D,
    RotarySetup2DConfig,
    rope_tables,
)
from tttv2.modules._module import TTModule, lazy_weights_of
from tttv2.patterns import CausalLM, DecoderLayer

__all__ = ["ModelFactory"]

_ACTIVATIONS = {
    ActivationType.SILU: ttnn.UnaryOpType.SILU,
    ActivationType.GELU: ttnn.UnaryOpType.GELU,
    ActivationType.RELU: ttnn.UnaryOpType.RELU,
}

# topology → the block classes and their configs
_BLOCKS = {
    "1d": dict(
        embedding=(Embedding1D, Embedding1DConfig),
        rope=(RotarySetup1D, RotarySetup1DConfig),
        attention=(Attention1D, Attention1DConfig),
        mlp=(MLP1D, MLP1DConfig),
        norm=(RMSNorm1D, RMSNorm1DConfig),
        lm_head=(LMHead1D, LMHead1DConfig),
    ),
    "2d": dict(
        embedding=(Embedding2D, Embedding2DConfig),
        rope=(RotarySetup2D, RotarySetup2DConfig),
        attention=(Attention2D, Attention2DConfig),
        mlp=(MLP2D, MLP2DConfig),
        norm=(RMSNorm2D, RMSNorm2DConfig),
        lm_head=(LMHead2D, LMHead2DConfig),
    ),
}


def topology_of(mesh_device) -> str:
    """ "1d" for a 1xN (or Nx1) mesh, "2d" for a mesh with more than one device along both axes."""
    if mesh_device is None or not hasattr(mesh_device, "get_num_devices"):
        raise TypeError(
            f"ModelFactory.from_spec: mesh_device must be a ttnn.MeshDevice, got {type(mesh_device).__name__}"
        )
    return "2d" if min(tuple(mesh_device.shape)) > 1 else "1d"


class _Builder:
    """Builds the blocks of one model: one place for the mesh, the hardware mode and the weight cache."""

    def __init__(
        self,
        spec: ModelSpec,
        mesh,
        weights: HuggingFaceWeights,
        hw_mode,
        cache_dir,
        max_batch_size,
        max_seq_len,
        stream=False,
    ):
        self.spec, self.mesh, self.weights, self.hw_mode = spec, mesh, weights, hw_mode
        self.stream = stream
        self.cache_dir, self.max_batch_size, self.max_seq_len = cache_dir, max_batch_size, max_seq_len
        self.blocks = _BLOCKS[topology_of(mesh)]

    def lazy(self, array, name: str) -> LazyWeight:
        return LazyWeight(array, cache_dir=self.cache_dir, name=f"{self.spec.name}.{name}".replace("/", "_"))

    def build(self, kind: str, **fields):
        cls, config_class = self.blocks[kind]
        return cls.from_config(config_class(mesh_device=self.mesh, **fields), hw_mode=self.hw_mode)

    def norm(self, array, name: str):
        return self.build("norm", weight=self.lazy(array, name), eps=self.spec.norm_eps)

    def streamed(self, *blocks):
        """Streaming: each block's weights go to the devices now and their host arrays are dropped, so the host
        holds one block's weights at a time (plus, on 1D meshes, the LM head's [dim, vocab] source, which its
        config keeps). A block that loads its weights one by one from its config (the default
        ``load_device_weights``: the MLPs, the norms) drops each host array as soon as that weight is on the
        devices, before converting the next. Otherwise the blocks convert on first use."""
        if self.stream:
            for block in blocks:
                weights = lazy_weights_of(block.config)
                if type(block).load_device_weights is TTModule.load_device_weights:
                    for weight in weights:
                        weight.get_device_weight()
                        weight.release_host()
                    continue
                block.load_device_weights()
                for weight in weights:
                    if weight.is_loaded():  # LMHead1D's whole-vocab weight is only its chunks' source
                        weight.release_host()
        return blocks[0]

    def layer(self, index: int, rope) -> DecoderLayer:
        """One decoder layer. Streaming, the attention's weights go to the devices (and their host arrays are
        dropped) before the MLP's are made, so the host holds one block's float32 weights at a time, not the
        layer's (a Llama-3.1-70B layer: the MLP's 2.8 GB instead of 3.4 GB, on top of what the devices hold)."""
        spec, w = self.spec.layer(index), self.weights
        dim = spec.hidden_dim
        attn = w.attention(index, dim, spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.qkv_bias)
        wqkv_bias = attn.pop("bias")
        attention = self.build(
            "attention",
            wqkv=self.lazy(attn.pop("wqkv"), f"layers.{index}.wqkv"),
            wo=self.lazy(attn.pop("wo"), f"layers.{index}.wo"),
            wqkv_bias=None if wqkv_bias is None else self.lazy(wqkv_bias, f"layers.{index}.wqkv_bias"),
            n_heads=spec.num_heads,
            n_kv_heads=spec.num_kv_heads,
            head_dim=spec.head_dim,
            max_batch_size=self.max_batch_size,
            max_seq_len=self.max_seq_len,
            sliding_window=spec.sliding_window,
            transformation_mat_decode=rope.config.decode_trans_mat,
            transformation_mat_prefill=rope.config.prefill_trans_mat,
        )
        self.streamed(attention)
        mlp = w.mlp(index, dim, spec.intermediate_dim)
        ffn = self.build(
            "mlp",
            w1=self.lazy(mlp.pop("w1"), f"layers.{index}.w1"),
            w2=self.lazy(mlp.pop("w2"), f"layers.{index}.w2"),
            w3=self.lazy(mlp.pop("w3"), f"layers.{index}.w3"),
            activation=_ACTIVATIONS[spec.activation],
        )
        attention_norm = self.norm(w.attention_norm(index, dim), f"layers.{index}.attention_norm")
        ffn_norm = self.norm(w.ffn_norm(index, dim), f"layers.{index}.ffn_norm")
        self.streamed(ffn, attention_norm, ffn_norm)
        return DecoderLayer(attention=attention, ffn=ffn, attention_norm=attention_norm, ffn_norm=ffn_norm)

    def model(self) -> CausalLM:
        spec, w = self.spec, self.weights
        cos, sin = rope_tables(
            spec.head_dim,
            self.max_seq_len,
            spec.rope_theta,
            None if spec.rope_scaling is None else spec.rope_scaling.as_dict(),
        )
        rope = self.build(
            "rope", cos_matrix=LazyWeight(cos), sin_matrix=LazyWeight(sin), max_batch_size=self.max_batch_size
        )
        embedding = self.streamed(
            self.build(
                "embedding", weights=self.lazy(w.embedding(spec.vocab_size, spec.hidden_dim), "embedding")
            )
        )
        layers = [self.layer(i, rope) for i in range(spec.num_layers)]
        norm = self.streamed(self.norm(w.final_norm(spec.hidden_dim), "norm"))
        lm_head = self.streamed(
            self.build(
                "lm_head",
                weight=self.lazy(
                    w.lm_head(spec.vocab_size, spec.hidden_dim, spec.tie_word_embeddings), "lm_head"
                ),
            )
        )
        return CausalLM(
            embedding, rope, layers, norm, lm_head, vocab_size=spec.vocab_size, max_seq_len=self.max_seq_len
        )


class ModelFactory:
    """Model specs from Hugging Face configs, and runnable models from specs (see the module docstring)."""

    @staticmethod
    def from_huggingface(config, *, ignore_fields: Iterable[str] = (), name: str | None = None) -> ModelSpec:
        """The ``ModelSpec`` of a Hugging Face config dict (``config.json``) or ``transformers`` config object:
        Llama, Mistral, Qwen2 and Phi-3. An unsupported ``model_type``, field or value raises
        ``UnsupportedConfigError`` naming it."""
        return spec_from_huggingface(config, ignore_fields=ignore_fields, name=name)

    @staticmethod
    def from_spec(
        spec: ModelSpec,
        mesh_device,
        *,
        weights,
        hw_mode: str = "performance",
        max_batch_size: int = 1,
        max_seq_len: int | None = None,
        weight_cache_dir: str | os.PathLike | None = None,
        stream_weights: bool = False,
    ) -> CausalLM:
        """A ``patterns.CausalLM`` of ``spec`` on ``mesh_device``.

        ``weights``: a Hugging Face state dict (numpy arrays or torch tensors), a ``SafetensorsCheckpoint`` or the
        path of a local ``.safetensors`` file or directory. ``hw_mode``: "performance" or "accuracy" (each
        block's ``get_default_hw_config``). ``max_seq_len`` (default: the spec's, at most 4096) sizes the KV
        caches and rotary tables; ``weight_cache_dir`` keeps the converted device weights on disk.
        ``stream_weights``: move each block's weights to the devices as soon as it is built and drop their host
        arrays (with a ``RandomWeights`` or a ``SafetensorsCheckpoint`` source, the host never holds the model);
        by default each weight converts on first use."""
        if not isinstance(spec, ModelSpec):
            raise TypeError(f"ModelFactory.from_spec: spec must be a ModelSpec, got {type(spec).__name__}")
        if spec.norm_type is not NormType.RMS_NORM:
            raise ValueError(
                f"ModelFactory.from_spec: norm_type {spec.norm_type.value} has no building block yet (rms_norm)"
            )
        if spec.activation not in _ACTIVATIONS:
            raise ValueError(
                f"ModelFactory.from_spec: activation {spec.activation.value} has no building block yet "
                f"({', '.join(a.value for a in _ACTIVATIONS)})"
            )
        if not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ValueError(
                f"ModelFactory.from_spec: max_batch_size must be a positive int, got {max_batch_size!r}"
            )
        max_seq_len = max_seq_len or min(spec.max_seq_len, 4096)
        if max_seq_len < 128 or max_seq_len % 128:
            raise ValueError(
                f"ModelFactory.from_spec: max_seq_len must be a multiple of 128, got {max_seq_len}"
            )
        topology_of(mesh_device)
        builder = _Builder(
            spec,
            mesh_device,
            HuggingFaceWeights(weights),
            hw_mode,
            weight_cache_dir,
            max_batch_size,
            max_seq_len,
            stream=bool(stream_weights),
        )
        return builder.model()

    @staticmethod
    def from_config(config, mesh_device, *, seed: int = 0, **options) -> CausalLM:
        """A model at the real size of a Hugging Face config alone (a ``config.json`` path, its directory or the
        dict), with seeded random weights (``RandomWeights``) streamed to the devices block by block: no
        checkpoint, and never the whole float32 model on the host. ``options`` are ``from_spec``'s."""
        if isinstance(config, (str, os.PathLike)):
            path = Path(config) / "config.json" if Path(config).is_dir() else Path(config)
            try:
                config = json.loads(path.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"ModelFactory.from_config: cannot read {path}: {exc}") from None
        if not isinstance(config, Mapping):
            raise TypeError(
                f"ModelFactory.from_config: config must be a mapping or a path, got {type(config).__name__}"
            )
        spec = spec_from_huggingface(dict(config))
        return ModelFactory.from_spec(
            spec, mesh_device, weights=RandomWeights(config, seed=seed), stream_weights=True, **options
        )
