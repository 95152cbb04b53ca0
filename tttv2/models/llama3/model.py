"""Llama 3 on TTTv2 building blocks: the reference template for a decoder-only model.

Everything here uses the public API only: the seed-style namespaces (``attention``, ``ffn``, ``normalization``,
``embeddings``, ``patterns``) for the blocks, ``interfaces.HuggingFaceWeights`` for the checkpoint layout.
The topology comes from the mesh: the 1D blocks on 1xN meshes, the 2D blocks on a Galaxy. Every block is built
from its config with the hardware defaults of ``hw_mode``; the layers are ``patterns.DecoderLayer`` and the model
is a ``patterns.CausalLM`` (prefill, decode, generate).
"""

from __future__ import annotations

from tttv2 import attention, embeddings, ffn, normalization, patterns
from tttv2.interfaces import HuggingFaceWeights
from tttv2.modules import LazyWeight

from .config import Llama3Config

__all__ = ["Llama3Model"]

# the block classes of each topology
_BLOCKS = {
    "1d": dict(
        embedding=(embeddings.Embedding1D, embeddings.Embedding1DConfig),
        rope=(embeddings.RotarySetup1D, embeddings.RotarySetup1DConfig),
        attention=(attention.Attention1D, attention.Attention1DConfig),
        mlp=(ffn.MLP1D, ffn.MLP1DConfig),
        norm=(normalization.RMSNorm1D, normalization.RMSNorm1DConfig),
        lm_head=(embeddings.LMHead1D, embeddings.LMHead1DConfig),
    ),
    "2d": dict(
        embedding=(embeddings.Embedding2D, embeddings.Embedding2DConfig),
        rope=(embeddings.RotarySetup2D, embeddings.RotarySetup2DConfig),
        attention=(attention.Attention2D, attention.Attention2DConfig),
        mlp=(ffn.MLP2D, ffn.MLP2DConfig),
        norm=(normalization.RMSNorm2D, normalization.RMSNorm2DConfig),
        lm_head=(embeddings.LMHead2D, embeddings.LMHead2DConfig),
    ),
}


class Llama3Model(patterns.CausalLM):
    """``Llama3Model(config, mesh_device, weights)``: ``weights`` is a Hugging Face state dict or the path of a
    local safetensors checkpoint. ``max_seq_len`` (a multiple of 128) sizes the KV caches and rotary tables."""

    config_class = Llama3Config

    def __init__(
        self,
        config: Llama3Config,
        mesh_device,
        weights,
        *,
        hw_mode: str = "performance",
        max_batch_size: int = 1,
        max_seq_len: int = 1024,
        weight_cache_dir=None,
    ) -> None:
        if not isinstance(config, self.config_class):
            raise TypeError(
                f"{type(self).__name__}: config must be a {self.config_class.__name__}, got {type(config).__name__}"
            )
        self.config = config
        self._mesh, self._hw_mode, self._cache = mesh_device, hw_mode, weight_cache_dir
        self._blocks = _BLOCKS["2d" if min(tuple(mesh_device.shape)) > 1 else "1d"]
        self._batch, self._seq_len = max_batch_size, max_seq_len
        self._weights = HuggingFaceWeights(weights)
        c, w = config, self._weights

        cos, sin = embeddings.rope_tables(c.head_dim, max_seq_len, c.rope_theta, c.rope_scaling)
        rope = self._block(
            "rope", cos_matrix=LazyWeight(cos), sin_matrix=LazyWeight(sin), max_batch_size=max_batch_size
        )
        layers = [self._layer(i, rope) for i in range(c.n_layers)]
        super().__init__(
            self._block("embedding", weights=self._lazy(w.embedding(c.vocab_size, c.dim), "embedding")),
            rope,
            layers,
            self._norm(w.final_norm(c.dim), "norm"),
            self._block(
                "lm_head", weight=self._lazy(w.lm_head(c.vocab_size, c.dim, c.tie_word_embeddings), "lm_head")
            ),
            vocab_size=c.vocab_size,
            max_seq_len=max_seq_len,
        )

    @classmethod
    def from_huggingface(cls, hf_config, mesh_device, weights, **options):
        """The model of a Hugging Face config.json (dict) and its weights."""
        return cls(cls.config_class.from_huggingface(hf_config), mesh_device, weights, **options)

    # --- building blocks --------------------------------------------------------------------------------------

    def _block(self, kind: str, **fields):
        cls, config_class = self._blocks[kind]
        return cls.from_config(config_class(mesh_device=self._mesh, **fields), hw_mode=self._hw_mode)

    def _lazy(self, array, name: str) -> LazyWeight:
        return LazyWeight(array, cache_dir=self._cache, name=f"{type(self).__name__}.{name}")

    def _norm(self, weight, name: str):
        return self._block("norm", weight=self._lazy(weight, name), eps=self.config.norm_eps)

    def _attention_fields(self, index: int) -> dict:
        """Config fields of layer ``index``'s attention beyond the weights and head geometry."""
        return {}

    def _layer(self, index: int, rope) -> patterns.DecoderLayer:
        c, w = self.config, self._weights
        qkv = w.attention(index, c.dim, c.n_heads, c.n_kv_heads, c.head_dim, bias=False)
        mlp = w.mlp(index, c.dim, c.hidden_dim)
        return patterns.DecoderLayer(
            attention=self._block(
                "attention",
                wqkv=self._lazy(qkv["wqkv"], f"layers.{index}.wqkv"),
                wo=self._lazy(qkv["wo"], f"layers.{index}.wo"),
                n_heads=c.n_heads,
                n_kv_heads=c.n_kv_heads,
                head_dim=c.head_dim,
                max_batch_size=self._batch,
                max_seq_len=self._seq_len,
                transformation_mat_decode=rope.config.decode_trans_mat,
                transformation_mat_prefill=rope.config.prefill_trans_mat,
                **self._attention_fields(index),
            ),
            ffn=self._block(
                "mlp",
                w1=self._lazy(mlp["w1"], f"layers.{index}.w1"),
                w2=self._lazy(mlp["w2"], f"layers.{index}.w2"),
                w3=self._lazy(mlp["w3"], f"layers.{index}.w3"),
            ),
            attention_norm=self._norm(w.attention_norm(index, c.dim), f"layers.{index}.attention_norm"),
            ffn_norm=self._norm(w.ffn_norm(index, c.dim), f"layers.{index}.ffn_norm"),
        )
