"""Tensor-parallel transformer blocks: attention heads and the MLP hidden dim split over the TP group.

Each block computes the same function as its ``ttnn.nn`` counterpart (``from_dense`` converts one, keeping its
weights): the norms and residual stream are replicated, QKV and the MLP's up-projections are column-parallel
(device k holds heads ``[k·H/N, (k+1)·H/N)`` and that slice of the hidden dim), the attention output and the MLP's
down-projection are row-parallel, ending in one all-reduce each. Heads, KV heads and the hidden dim must divide
by the TP size.
"""

from __future__ import annotations

import numpy as np

from .... import ttnn
from ...device import MeshDevice
from ...errors import ValidationError
from ...tensor import Tensor
from ...types import DataType
from .. import _random
from ..attention import RotaryEmbedding, _attend
from ..blocks import GPTBlock as DenseGPTBlock
from ..blocks import LlamaBlock as DenseLlamaBlock
from ..blocks import llama_hidden_dim
from ..layers import Dropout, LayerNorm, RMSNorm, _positive, _probability
from ..module import Module, assign_, resolve_device
from ._mesh import group_size, resolve_axes
from .layers import ColumnParallelLinear, RowParallelLinear, TensorParallelLayer, host_array

__all__ = [
    "GPTMLP",
    "GPTBlock",
    "GroupedQueryAttention",
    "LlamaBlock",
    "LlamaMLP",
    "MultiHeadAttention",
    "head_major_columns",
]


def head_major_columns(parts: list[int], tp_size: int) -> np.ndarray:
    """Column order that turns a projection laid out as consecutive parts (e.g. ``[q | k | v]``) into one where
    device k's contiguous slice holds part slice k of every part (``[q_k | k_k | v_k]``)."""
    offsets = np.cumsum([0, *parts])
    order = []
    for rank in range(tp_size):
        for start, size in zip(offsets[:-1], parts):
            step = size // tp_size
            order.extend(range(start + rank * step, start + (rank + 1) * step))
    return np.asarray(order)


def _state(module: Module, what: str) -> dict[str, np.ndarray]:
    return {name: host_array(p, f"{what}: {name}") for name, p in module.named_parameters()}


def _linear_init(state: dict | None, prefix: str):
    if state is None:
        return None
    return state[f"{prefix}.weight"], state.get(f"{prefix}.bias")


def _random_linear(gen, in_features: int, out_features: int, bias: bool):
    bound = 1.0 / np.sqrt(in_features)
    weight = gen.uniform(-bound, bound, (in_features, out_features))
    return weight, (gen.uniform(-bound, bound, (1, out_features)) if bias else None)


def _heads(owner: str, name: str, value: int, tp_size: int) -> int:
    value = _positive(owner, name, value)
    if value % tp_size:
        raise ValidationError(
            f"{owner}: {name}: expected a multiple of the tensor-parallel size {tp_size}, got {value}"
        )
    return value


class _ParallelAttention(Module):
    """What both attention variants share: dropout and the SDPA call of ``ttnn.nn.attention``."""

    def _group(self, owner: str, device, cluster_axis) -> MeshDevice:
        mesh = resolve_device(device, owner)
        self.tp_size = group_size(mesh, resolve_axes(owner, mesh, cluster_axis))
        return mesh


class MultiHeadAttention(_ParallelAttention):
    """GPT attention with heads split over the TP group: QKV column-parallel (each device's slice holds the
    Q, K and V of its heads), local SDPA, output projection row-parallel."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        causal: bool = True,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: dict | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.MultiHeadAttention"
        mesh = self._group(owner, device, cluster_axis)
        self.embed_dim = _positive(owner, "embed_dim", embed_dim)
        self.num_heads = _heads(owner, "num_heads", num_heads, self.tp_size)
        if self.embed_dim % self.num_heads:
            raise ValidationError(f"{owner}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.local_heads = self.num_heads // self.tp_size
        self.head_dim = self.embed_dim // self.num_heads
        self.attention_dropout = _probability(owner, dropout)
        self.causal = bool(causal)
        e = self.embed_dim
        if init is None:
            gen = _random.rng()
            init = {"qkv": _random_linear(gen, e, 3 * e, bias), "out_proj": _random_linear(gen, e, e, bias)}
        group = {"cluster_axis": cluster_axis, "device": mesh, "dtype": dtype}
        order = head_major_columns([e, e, e], self.tp_size)  # device k's slice: [q_k | k_k | v_k]
        self.qkv = ColumnParallelLinear(e, 3 * e, bias, init=init["qkv"], column_order=order, **group)
        self.out_proj = RowParallelLinear(e, e, bias, input_is_parallel=True, init=init["out_proj"], **group)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = ttnn.experimental.nlp_create_qkv_heads(
            self.qkv(x), num_heads=self.local_heads, transpose_k_heads=False
        )
        return self.dropout(self.out_proj(_attend(self, q, k, v, mask)))

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, tp_size={self.tp_size}"


class GPTMLP(Module):
    """``fc`` column-parallel → GELU on the local hidden slice → ``proj`` row-parallel → dropout."""

    def __init__(
        self,
        embed_dim: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        hidden_dim: int | None = None,
        approximate_gelu: bool = True,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: dict | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.GPTMLP"
        hidden = 4 * _positive(owner, "embed_dim", embed_dim) if hidden_dim is None else hidden_dim
        self.approximate_gelu = bool(approximate_gelu)
        device = resolve_device(device, owner)
        _heads(owner, "hidden_dim", hidden, group_size(device, resolve_axes(owner, device, cluster_axis)))
        if init is None:
            gen = _random.rng()
            init = {
                "fc": _random_linear(gen, embed_dim, hidden, bias),
                "proj": _random_linear(gen, hidden, embed_dim, bias),
            }
        self.fc = ColumnParallelLinear(
            embed_dim, hidden, bias, cluster_axis=cluster_axis, device=device, dtype=dtype, init=init["fc"]
        )
        self.proj = RowParallelLinear(
            hidden, embed_dim, bias, input_is_parallel=True, cluster_axis=cluster_axis, device=device, dtype=dtype,
            init=init["proj"],
        )  # fmt: skip
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        h = ttnn.gelu(self.fc(x), fast_and_approximate_mode=self.approximate_gelu)
        return self.dropout(self.proj(h))


class GPTBlock(DenseGPTBlock):
    """Tensor-parallel ``ttnn.nn.GPTBlock`` (its forward): ``x + attn(ln1(x))``, then ``+ mlp(ln2(·))``, heads and
    MLP hidden split over the TP group (LayerNorms replicated)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        eps: float = 1e-5,
        hidden_dim: int | None = None,
        approximate_gelu: bool = True,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: dict | None = None,
    ) -> None:
        Module.__init__(self)  # the dense block's layers are built here, split
        device = resolve_device(device, "ttnn.nn.parallel.GPTBlock")
        group = {"cluster_axis": cluster_axis, "device": device, "dtype": dtype}
        self.ln1 = LayerNorm(embed_dim, eps, bias, device=device, dtype=dtype)
        attn_init = mlp_init = None
        if init is not None:
            attn_init = {n: _linear_init(init, f"attn.{n}") for n in ("qkv", "out_proj")}
            mlp_init = {n: _linear_init(init, f"mlp.{n}") for n in ("fc", "proj")}
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout, bias, init=attn_init, **group)
        self.ln2 = LayerNorm(embed_dim, eps, bias, device=device, dtype=dtype)
        self.mlp = GPTMLP(
            embed_dim,
            dropout,
            bias,
            hidden_dim=hidden_dim,
            approximate_gelu=approximate_gelu,
            init=mlp_init,
            **group,
        )
        if init is not None:
            _load_replicated(self, init)

    @classmethod
    def from_dense(cls, block: DenseGPTBlock, *, cluster_axis: int | None = None) -> GPTBlock:
        """The tensor-parallel version of a ``ttnn.nn.GPTBlock`` (replicated), with the same weights."""
        attn, mlp = block.attn, block.mlp
        return cls(
            attn.embed_dim,
            attn.num_heads,
            attn.attention_dropout,
            attn.qkv.bias is not None,
            eps=block.ln1.eps,
            hidden_dim=mlp.fc.out_features,
            approximate_gelu=mlp.approximate_gelu,
            cluster_axis=cluster_axis,
            device=block.ln1.weight.device(),
            dtype=block.ln1.weight.dtype,
            init=_state(block, "ttnn.nn.parallel.GPTBlock.from_dense"),
        )


class GroupedQueryAttention(_ParallelAttention):
    """Llama attention with query heads and KV heads split over the TP group (each device keeps the KV heads its
    query heads read): ``q_proj``/``kv_proj`` column-parallel, rotary embedding, local SDPA, ``out_proj``
    row-parallel."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        *,
        rope: RotaryEmbedding | None = None,
        causal: bool = True,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: dict | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.GroupedQueryAttention"
        mesh = self._group(owner, device, cluster_axis)
        self.embed_dim = _positive(owner, "embed_dim", embed_dim)
        self.num_heads = _heads(owner, "num_heads", num_heads, self.tp_size)
        self.num_kv_heads = _heads(owner, "num_kv_heads", num_kv_heads, self.tp_size)
        if self.embed_dim % self.num_heads:
            raise ValidationError(f"{owner}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValidationError(
                f"{owner}: num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}"
            )
        self.head_dim = self.embed_dim // self.num_heads
        if rope is not None and rope.head_dim != self.head_dim:
            raise ValidationError(
                f"{owner}: rope.head_dim {rope.head_dim} differs from head_dim {self.head_dim}"
            )
        self.local_heads = self.num_heads // self.tp_size
        self.local_kv_heads = self.num_kv_heads // self.tp_size
        self.attention_dropout = _probability(owner, dropout)
        self.causal = bool(causal)
        e, kv = self.embed_dim, self.num_kv_heads * self.head_dim
        if init is None:
            gen = _random.rng()
            init = {
                "q_proj": _random_linear(gen, e, e, bias),
                "kv_proj": _random_linear(gen, e, 2 * kv, bias),
                "out_proj": _random_linear(gen, e, e, bias),
            }
        group = {"cluster_axis": cluster_axis, "device": mesh, "dtype": dtype}
        self.q_proj = ColumnParallelLinear(e, e, bias, init=init["q_proj"], **group)
        kv_order = head_major_columns([kv, kv], self.tp_size)
        self.kv_proj = ColumnParallelLinear(
            e, 2 * kv, bias, init=init["kv_proj"], column_order=kv_order, **group
        )
        self.out_proj = RowParallelLinear(e, e, bias, input_is_parallel=True, init=init["out_proj"], **group)
        self.dropout = Dropout(dropout)
        object.__setattr__(self, "rope", rope)  # shared by the layers, referenced not owned (as in ttnn.nn)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = ttnn.experimental.nlp_create_qkv_heads(
            self.q_proj(x),
            self.kv_proj(x),
            num_heads=self.local_heads,
            num_kv_heads=self.local_kv_heads,
            transpose_k_heads=False,
        )
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        return self.dropout(self.out_proj(_attend(self, q, k, v, mask)))

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"tp_size={self.tp_size}"
        )


class LlamaMLP(TensorParallelLayer):
    """SwiGLU MLP with the hidden dim split: ``w1``/``w3`` by columns, ``w2`` by rows; the fused ``ttnn.swiglu``
    runs on each device's slice and an all-reduce sums the partial outputs."""

    def __init__(
        self,
        embed_dim: int,
        hidden_dim: int | None = None,
        dropout: float = 0.0,
        *,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: dict | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.LlamaMLP"
        self._init_group(owner, device, cluster_axis)
        self.embed_dim = _positive(owner, "embed_dim", embed_dim)
        self.hidden_dim = self._divisible(
            owner, "hidden_dim", llama_hidden_dim(embed_dim) if hidden_dim is None else hidden_dim
        )
        if init is None:
            gen = _random.rng()
            up, down = 1.0 / np.sqrt(self.embed_dim), 1.0 / np.sqrt(self.hidden_dim)
            init = {
                "w1": gen.uniform(-up, up, (self.embed_dim, self.hidden_dim)),
                "w3": gen.uniform(-up, up, (self.embed_dim, self.hidden_dim)),
                "w2": gen.uniform(-down, down, (self.hidden_dim, self.embed_dim)),
            }
        self.shard_dims = {"w1": -1, "w3": -1, "w2": 0}
        self.w1 = self._sharded(np.asarray(init["w1"]), -1, dtype)
        self.w3 = self._sharded(np.asarray(init["w3"]), -1, dtype)
        self.w2 = self._sharded(np.asarray(init["w2"]), 0, dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        self._check_training()
        partial = ttnn.swiglu(x, self.w1, self.w2, self.w3)
        return self.dropout(ttnn.all_reduce(partial, cluster_axis=self.ccl_axis))

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, hidden_dim={self.hidden_dim}, tp_size={self.tp_size}"


class LlamaBlock(DenseLlamaBlock):
    """Tensor-parallel ``ttnn.nn.LlamaBlock`` (its forward): ``x + attn(rms1(x))``, then ``+ mlp(rms2(·))`` with query
    and KV heads and the SwiGLU hidden dim split over the TP group (RMSNorms replicated)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int,
        *,
        hidden_dim: int | None = None,
        dropout: float = 0.0,
        rope: RotaryEmbedding | None = None,
        eps: float = 1e-5,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: dict | None = None,
    ) -> None:
        Module.__init__(self)  # the dense block's layers are built here, split
        device = resolve_device(device, "ttnn.nn.parallel.LlamaBlock")
        group = {"cluster_axis": cluster_axis, "device": device, "dtype": dtype}
        self.attention_norm = RMSNorm(embed_dim, eps, device=device, dtype=dtype)
        attn_init = mlp_init = None
        if init is not None:
            attn_init = {n: _linear_init(init, f"attn.{n}") for n in ("q_proj", "kv_proj", "out_proj")}
            mlp_init = {n: init[f"mlp.{n}"] for n in ("w1", "w2", "w3")}
        self.attn = GroupedQueryAttention(
            embed_dim, num_heads, num_kv_heads, dropout, rope=rope, init=attn_init, **group
        )
        self.mlp_norm = RMSNorm(embed_dim, eps, device=device, dtype=dtype)
        self.mlp = LlamaMLP(embed_dim, hidden_dim, dropout, init=mlp_init, **group)
        if init is not None:
            _load_replicated(self, init)

    @classmethod
    def from_dense(cls, block: DenseLlamaBlock, *, cluster_axis: int | None = None) -> LlamaBlock:
        """The tensor-parallel version of a ``ttnn.nn.LlamaBlock`` (replicated), with the same weights and rope."""
        attn = block.attn
        return cls(
            attn.embed_dim,
            attn.num_heads,
            attn.num_kv_heads,
            hidden_dim=block.mlp.hidden_dim,
            dropout=attn.attention_dropout,
            rope=attn.rope,
            eps=block.attention_norm.eps,
            cluster_axis=cluster_axis,
            device=block.attention_norm.weight.device(),
            dtype=block.attention_norm.weight.dtype,
            init=_state(block, "ttnn.nn.parallel.LlamaBlock.from_dense"),
        )


def _load_replicated(block: Module, init: dict) -> None:
    """Copy the replicated parameters (norms) of ``init`` into ``block``."""
    for name, p in block.named_parameters():
        if name in init and isinstance(block.get_submodule(name.rpartition(".")[0]), (LayerNorm, RMSNorm)):
            assign_(p, init[name], name)
