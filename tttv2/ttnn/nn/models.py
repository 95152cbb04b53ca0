"""Models: GPT (NanoGPT) and Llama, with optional gradient checkpointing per block and greedy generation.

Both take token ids (uint32 ttnn tensor ``[B, S]`` / ``[B, 1, 1, S]``, or an integer numpy array ``[B, S]``)
and return logits ``[B, 1, S, vocab_size]``; train them with ``ttnn.cross_entropy_loss(logits, targets)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import ttnn
from ..autograd import no_grad
from ..device import MeshDevice
from ..errors import ValidationError
from ..tensor import Tensor
from ..types import TILE_SIZE, DataType, Layout
from . import _random
from .attention import RotaryEmbedding
from .blocks import GPTBlock, LlamaBlock
from .checkpoint import checkpoint
from .layers import TRAINING_COMPUTE_CONFIG, Dropout, Embedding, LayerNorm, Linear, RMSNorm
from .module import Module, ModuleList, assign_, make_parameter, resolve_device

__all__ = ["GPT", "GPTConfig", "Llama", "LlamaConfig"]


@dataclass
class GPTConfig:
    """NanoGPT hyper-parameters (defaults: the 6-layer, 384-wide character model)."""

    vocab_size: int = 96
    block_size: int = 128
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.2
    bias: bool = True
    weight_tying: bool = False
    checkpointing: bool = False


@dataclass
class LlamaConfig:
    """Llama hyper-parameters (``hidden_dim`` None: ⅔·4·dim rounded up to 256; head_dim must be a multiple of 64)."""

    vocab_size: int = 96
    max_seq_len: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int = 2
    dim: int = 256
    hidden_dim: int | None = None
    dropout: float = 0.0
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    weight_tying: bool = False
    checkpointing: bool = False


def _ids(model: Module, idx, device: MeshDevice) -> Tensor:
    if isinstance(idx, Tensor):
        return idx
    array = np.asarray(idx)
    if array.dtype.kind not in "iu" or array.ndim != 2:
        raise ValidationError(
            f"{type(model).__name__}: idx: expected a uint32 ttnn.Tensor or an integer array [B, S], got "
            f"{array.dtype} {list(array.shape)}"
        )
    return ttnn.from_numpy(array.astype(np.uint32), dtype=ttnn.uint32, layout=Layout.ROW_MAJOR, device=device)


class _LanguageModel(Module):
    """Shared parts: block loop (optionally checkpointed), head, greedy generation."""

    config: object
    context: int

    def _run_blocks(self, x: Tensor, mask: Tensor | None) -> Tensor:
        for block in self.blocks:
            if self.config.checkpointing and self.training:
                x = checkpoint(block, x, mask)
            else:
                x = block(x, mask)
        return x

    def _head(self, x: Tensor) -> Tensor:
        if self.config.weight_tying:
            return ttnn.linear(
                x, self.embed.weight, transpose_b=True, compute_kernel_config=TRAINING_COMPUTE_CONFIG
            )
        return self.lm_head(x)

    def generate(self, idx, max_new_tokens: int, temperature: float = 0.0, seed: int = 0) -> np.ndarray:
        """Append ``max_new_tokens`` tokens to ``idx`` (integers ``[B, S]``): greedy (``temperature=0``) or sampled
        with ``ttnn.sample`` (Gumbel-max, seeded). Returns the extended ids ``[B, S + max_new_tokens]``.

        Each step runs the model on the last ``context`` tokens padded to a whole tile (the causal mask keeps the
        padding from influencing the real positions) and picks from the logits of the last real position.
        """
        tokens = np.asarray(idx, dtype=np.int64)
        if tokens.ndim != 2:
            raise ValidationError(
                f"{type(self).__name__}.generate: idx: expected integers [B, S], got {list(tokens.shape)}"
            )
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                for step in range(int(max_new_tokens)):
                    window = tokens[:, -self.context :]
                    length = window.shape[1]
                    padded = min(self.context, TILE_SIZE * math.ceil(length / TILE_SIZE))
                    batch = np.zeros((tokens.shape[0], padded), dtype=np.uint32)
                    batch[:, :length] = window
                    logits = self(batch)
                    last = ttnn.slice(
                        logits, [0, 0, length - 1, 0], [tokens.shape[0], 1, length, logits.shape[-1]]
                    )
                    ids = ttnn.sample(last, temperature=temperature, seed=seed + step)
                    nxt = ttnn.to_numpy(ids).reshape(tokens.shape[0], 1).astype(np.int64)
                    tokens = np.concatenate([tokens, nxt], axis=1)
        finally:
            self.train(was_training)
        return tokens


class GPT(_LanguageModel):
    """NanoGPT: token + learned position embeddings → ``n_layer`` :class:`GPTBlock` → LayerNorm → LM head.

    ``forward(idx, mask=None)``: ``idx`` ``[B, S]`` with S ≤ block_size → logits ``[B, 1, S, vocab_size]``;
    ``mask`` (additive ``[1, 1, S, S]``) replaces the causal mask. With ``weight_tying`` the head reuses the
    token embedding (``x @ embedᵀ``); with ``checkpointing`` each block is recomputed in backward.
    """

    def __init__(
        self, config: GPTConfig, *, device: MeshDevice | None = None, dtype: DataType = DataType.FLOAT32
    ) -> None:
        super().__init__()
        device = resolve_device(device, "ttnn.nn.GPT")
        self.config = config
        self.context = config.block_size
        c = config
        self.embed = Embedding(c.vocab_size, c.n_embd, device=device, dtype=dtype)
        self.pos_embed = make_parameter(np.zeros((1, 1, c.block_size, c.n_embd)), device=device, dtype=dtype)
        self.drop = Dropout(c.dropout)
        self.blocks = ModuleList(
            GPTBlock(c.n_embd, c.n_head, c.dropout, c.bias, device=device, dtype=dtype)
            for _ in range(c.n_layer)
        )
        self.ln_f = LayerNorm(c.n_embd, bias=c.bias, device=device, dtype=dtype)
        if not c.weight_tying:
            self.lm_head = Linear(c.n_embd, c.vocab_size, bias=False, device=device, dtype=dtype)
        self._init_weights()

    def _init_weights(self) -> None:
        gen = _random.rng()
        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if name.startswith("ln_f") or ".ln" in name:
                continue
            if leaf == "bias":
                assign_(p, np.zeros(p.shape), name)
                continue
            std = (
                0.02 / math.sqrt(2 * self.config.n_layer)
                if name.endswith(("out_proj.weight", "mlp.proj.weight"))
                else 0.02
            )
            assign_(p, gen.normal(0.0, std, tuple(p.shape)), name)

    def forward(self, idx, mask: Tensor | None = None) -> Tensor:
        ids = _ids(self, idx, self.pos_embed.device())
        x = self.embed(ids)
        seq = x.shape[2]
        if seq > self.config.block_size:
            raise ValidationError(
                f"ttnn.nn.GPT: sequence length {seq} exceeds block_size {self.config.block_size}"
            )
        pos = self.pos_embed
        if seq < self.config.block_size:
            pos = ttnn.slice(pos, [0, 0, 0, 0], [1, 1, seq, self.config.n_embd])
        x = self.drop(ttnn.add(x, pos))
        x = self._run_blocks(x, mask)
        return self._head(self.ln_f(x))


class Llama(_LanguageModel):
    """Llama: token embedding → ``n_layer`` :class:`LlamaBlock` (RoPE, GQA, SwiGLU) → RMSNorm → LM head."""

    def __init__(
        self, config: LlamaConfig, *, device: MeshDevice | None = None, dtype: DataType = DataType.FLOAT32
    ) -> None:
        super().__init__()
        device = resolve_device(device, "ttnn.nn.Llama")
        self.config = config
        self.context = config.max_seq_len
        c = config
        self.embed = Embedding(c.vocab_size, c.dim, device=device, dtype=dtype)
        self.rope = RotaryEmbedding(
            c.dim // c.n_head, c.max_seq_len, c.rope_theta, device=device, dtype=dtype
        )
        self.blocks = ModuleList(
            LlamaBlock(
                c.dim,
                c.n_head,
                c.n_kv_head,
                hidden_dim=c.hidden_dim,
                dropout=c.dropout,
                rope=self.rope,
                eps=c.norm_eps,
                device=device,
                dtype=dtype,
            )
            for _ in range(c.n_layer)
        )
        self.norm = RMSNorm(c.dim, c.norm_eps, device=device, dtype=dtype)
        if not c.weight_tying:
            self.lm_head = Linear(c.dim, c.vocab_size, bias=False, device=device, dtype=dtype)
        gen = _random.rng()
        for name, p in self.named_parameters():
            if "norm" not in name:
                assign_(p, gen.normal(0.0, 0.02, tuple(p.shape)), name)

    def forward(self, idx, mask: Tensor | None = None) -> Tensor:
        ids = _ids(self, idx, self.embed.weight.device())
        x = self.embed(ids)
        if x.shape[2] > self.config.max_seq_len:
            raise ValidationError(
                f"ttnn.nn.Llama: sequence length {x.shape[2]} exceeds max_seq_len {self.config.max_seq_len}"
            )
        x = self._run_blocks(x, mask)
        return self._head(self.norm(x))
