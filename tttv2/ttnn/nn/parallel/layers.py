"""Megatron-style tensor-parallel layers: ``ColumnParallelLinear``, ``RowParallelLinear``, ``VocabParallelEmbedding``.

The tensor-parallel (TP) group is the whole mesh (``cluster_axis=None``) or one axis of a 2-D mesh; its N
devices each hold 1/N of the layer's weight. Inputs that are not split are replicated over the group.

* ``ColumnParallelLinear``: ``W [in, out]`` split by columns (device k holds ``W[:, k·out/N : (k+1)·out/N]``
  and that slice of the bias); the output is split along its last dim, or all-gathered (``gather_output``).
* ``RowParallelLinear``: ``W`` split by rows; the input is split along its last dim (``input_is_parallel``: it
  already is, e.g. a column-parallel output; otherwise each device takes its slice); the partial products are
  summed with an all-reduce, then the (replicated) bias is added.
* ``VocabParallelEmbedding``: the table split by rows (vocabulary ranges); each device looks up the ids in its
  range (others give zeros) and an all-reduce sums the pieces.

The backward of each collective is its registered autograd rule (all-gather ↔ reduce-scatter, all-reduce ↔
all-reduce). Those rules are exact for the sum of the per-device losses, so a model built from these layers is
trained inside :class:`~tttv2.ttnn.nn.parallel.TensorParallel` or ``DistributedDataParallel``, whose gradient
reduction turns that into the gradient of the loss (see ``reducer.py``); a layer refuses to record a backward
outside one rather than give gradients N times too large.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from .... import ttnn
from ...autograd import Function, is_grad_enabled
from ...device import MeshDevice
from ...distribution import from_numpy, to_numpy
from ...errors import ValidationError
from ...ops._common import output_like
from ...program_configs import WormholeComputeKernelConfig
from ...tensor import Tensor
from ...types import DataType, Layout
from .. import _random
from ..layers import TRAINING_COMPUTE_CONFIG, Embedding, Linear, _check_dtype, _positive
from ..module import Module, make_parameter, resolve_device
from ._mesh import collective_axis, group_size, groups_along, nontrivial_axes, resolve_axes, shard_mapper

__all__ = [
    "ColumnParallelLinear",
    "RowParallelLinear",
    "TensorParallelLayer",
    "VocabParallelEmbedding",
    "host_array",
]


def host_array(p: Tensor, what: str) -> np.ndarray:
    """The full value of a replicated tensor, on the host (float32)."""
    try:
        return np.asarray(to_numpy(p), dtype=np.float32)
    except ValidationError:
        raise ValidationError(
            f"{what}: expected a replicated (unsharded) tensor, got {p.tensor_topology()}"
        ) from None


class TensorParallelLayer(Module):
    """Base of the TP layers: the group (``tp_axes``, ``tp_size``, ``ccl_axis``) and the training guard."""

    mesh: MeshDevice
    tp_axes: tuple[int, ...]

    def _init_group(self, owner: str, device: MeshDevice | None, cluster_axis) -> MeshDevice:
        mesh = resolve_device(device, owner)
        self.cluster_axis = cluster_axis
        self.mesh = mesh
        self.tp_axes = resolve_axes(owner, mesh, cluster_axis)
        self.tp_size = group_size(mesh, self.tp_axes)
        self.ccl_axis = collective_axis(mesh, self.tp_axes) if self.tp_axes else None
        self._reducer = None
        return mesh

    def _divisible(self, owner: str, name: str, value: int) -> int:
        value = _positive(owner, name, value)
        if value % self.tp_size:
            raise ValidationError(
                f"{owner}: {name}: expected a multiple of the tensor-parallel size {self.tp_size} "
                f"({'x'.join(map(str, self.mesh.shape))} mesh, cluster_axis={self.cluster_axis}), got {value}"
            )
        return value

    def _check_training(self) -> None:
        if self._reducer is None and is_grad_enabled() and any(p.requires_grad for p in self.parameters()):
            raise ValidationError(
                f"ttnn.nn.parallel.{type(self).__name__}: its gradients need the tensor-parallel reduction; wrap "
                "the model in ttnn.nn.parallel.TensorParallel (or DistributedDataParallel) before training, or run "
                "it under ttnn.autograd.no_grad()"
            )

    def _sharded(self, array: np.ndarray, dim: int, dtype: DataType):
        return make_parameter(
            array, device=self.mesh, dtype=dtype, mesh_mapper=shard_mapper(self.mesh, self.tp_axes, dim)
        )

    # parameter name -> the dim it is split along (absent: replicated), set by each layer
    shard_dims: ClassVar[dict[str, int]] = {}
    column_order: np.ndarray | None = None

    def full_value(self, name: str, tensor: Tensor) -> np.ndarray:
        """The whole (unsplit) value of ``tensor`` — parameter ``name`` of this layer or its gradient — as a host
        array in the layout of the dense layer (columns back in their original order)."""
        shards = tensor.shards(f"ttnn.nn.parallel.{type(self).__name__}.full_value")
        dim = self.shard_dims.get(name)
        if dim is None:
            return np.array(shards[0], dtype=np.float32)
        full = np.concatenate([np.asarray(shards[i], np.float32) for i in self._first_group()], axis=dim)
        if self.column_order is not None and dim in (-1, len(full.shape) - 1):
            full = full[..., np.argsort(self.column_order)]
        return full

    def _first_group(self) -> list[int]:
        """The devices (row-major indices) of the TP group that holds device 0, in ring order."""
        if tuple(self.tp_axes) == nontrivial_axes(self.mesh):
            return list(range(self.mesh.get_num_devices()))
        return [int(i) for i in groups_along(self.mesh, self.tp_axes[0])[0]]

    def _ranks(self) -> list[int]:
        """Each device's position in its TP group (row-major device order)."""
        if tuple(self.tp_axes) == nontrivial_axes(self.mesh):
            return list(range(self.mesh.get_num_devices()))
        out = [0] * self.mesh.get_num_devices()
        for group in groups_along(self.mesh, self.tp_axes[0]):
            for rank, index in enumerate(group):
                out[int(index)] = rank
        return out


def _linear_arrays(owner: str, in_features: int, out_features: int, bias: bool, init) -> tuple:
    """The full ``[in, out]`` weight and ``[1, out]`` bias: given (``init``) or drawn like ``ttnn.nn.Linear``."""
    if init is None:
        bound = 1.0 / math.sqrt(in_features)
        gen = _random.rng()
        weight = gen.uniform(-bound, bound, (in_features, out_features))
        return weight, (gen.uniform(-bound, bound, (1, out_features)) if bias else None)
    weight, bias_value = init
    weight = np.asarray(weight, dtype=np.float32)
    if weight.shape != (in_features, out_features):
        raise ValidationError(
            f"{owner}: init: expected a weight of shape {[in_features, out_features]}, got {list(weight.shape)}"
        )
    if bias and (bias_value is None or np.asarray(bias_value).size != out_features):
        raise ValidationError(f"{owner}: init: expected a bias of {out_features} values")
    return weight, (np.asarray(bias_value, dtype=np.float32).reshape(1, out_features) if bias else None)


class ColumnParallelLinear(TensorParallelLayer):
    """``y = x @ W + b`` with ``W [in, out]`` split by columns over the TP group (see the module docstring).

    ``x`` is replicated over the group. The output is ``[…, out/N]`` per device, or ``[…, out]`` everywhere with
    ``gather_output=True`` (all-gather; its backward is a reduce-scatter). ``init=(weight, bias)`` gives the full
    host arrays to split instead of drawing them like ``ttnn.nn.Linear``; ``column_order`` permutes the columns
    before the split (so that a device's slice holds whole heads of a fused QKV projection; the gathered output
    is then in that order too).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        gather_output: bool = False,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        compute_kernel_config: WormholeComputeKernelConfig | None = None,
        init: tuple | None = None,
        column_order: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.ColumnParallelLinear"
        self._init_group(owner, device, cluster_axis)
        self.in_features = _positive(owner, "in_features", in_features)
        self.out_features = self._divisible(owner, "out_features", out_features)
        self.gather_output = bool(gather_output)
        self.compute_kernel_config = compute_kernel_config or TRAINING_COMPUTE_CONFIG
        dtype = _check_dtype(owner, dtype)
        weight, bias_value = _linear_arrays(owner, self.in_features, self.out_features, bias, init)
        if column_order is not None:
            order = np.asarray(column_order)
            if sorted(order.tolist()) != list(range(self.out_features)):
                raise ValidationError(
                    f"{owner}: column_order: expected a permutation of range({self.out_features}), got {order!r}"
                )
            weight = weight[:, order]
            bias_value = None if bias_value is None else bias_value[:, order]
            self.column_order = order
        self.shard_dims = {"weight": -1, "bias": -1}
        self.weight = self._sharded(weight, -1, dtype)
        if bias_value is not None:
            self.bias = self._sharded(bias_value, -1, dtype)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_dense(
        cls,
        linear: Linear,
        *,
        gather_output: bool = False,
        cluster_axis: int | None = None,
        column_order: np.ndarray | None = None,
    ) -> ColumnParallelLinear:
        """The same map as the replicated ``linear``, split by columns (``column_order`` permutes the columns
        first, so that each device's slice holds whole heads)."""
        what = "ttnn.nn.parallel.ColumnParallelLinear.from_dense"
        weight = host_array(linear.weight, what)
        bias = None if linear.bias is None else host_array(linear.bias, what)
        return cls(
            linear.in_features,
            linear.out_features,
            linear.bias is not None,
            gather_output=gather_output,
            cluster_axis=cluster_axis,
            device=linear.weight.device(),
            dtype=linear.weight.dtype,
            compute_kernel_config=linear.compute_kernel_config,
            init=(weight, bias),
            column_order=column_order,
        )

    def forward(self, x: Tensor) -> Tensor:
        self._check_training()
        y = ttnn.linear(x, self.weight, bias=self.bias, compute_kernel_config=self.compute_kernel_config)
        if self.gather_output:
            y = ttnn.all_gather(y, dim=len(y.shape) - 1, cluster_axis=self.ccl_axis)
        return y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"gather_output={self.gather_output}, tp_size={self.tp_size}"
        )


class _SplitLastDim(Function):
    """Each device keeps its TP rank's slice of the last dim of a replicated tensor (no communication); the
    backward puts each device's gradient back into its slice of a zero tensor (the exact adjoint)."""

    @staticmethod
    def forward(ctx, x, layer):
        ctx.ranks, ctx.n, ctx.like = layer._ranks(), layer.tp_size, x
        shards = [
            np.split(np.asarray(s, np.float32), ctx.n, axis=-1)[r] for s, r in zip(x.shards(), ctx.ranks)
        ]
        topology = shard_mapper(layer.mesh, layer.tp_axes, -1).topology
        return output_like(
            "ttnn.nn.parallel.RowParallelLinear",
            [np.ascontiguousarray(s) for s in shards],
            x,
            topology=topology,
        )

    @staticmethod
    def backward(ctx, grad):
        out = []
        for g, rank in zip(grad.shards(), ctx.ranks):
            full = np.zeros((*g.shape[:-1], g.shape[-1] * ctx.n), dtype=np.float32)
            full[..., rank * g.shape[-1] : (rank + 1) * g.shape[-1]] = g
            out.append(full)
        return output_like(
            "backward of ttnn.nn.parallel.RowParallelLinear", out, ctx.like, dtype=grad.dtype
        ), None


class RowParallelLinear(TensorParallelLayer):
    """``y = all_reduce(x_k @ W_k) + b`` with ``W [in, out]`` split by rows over the TP group.

    ``input_is_parallel=True``: ``x`` is already split along its last dim (``[…, in/N]`` per device, e.g. a
    :class:`ColumnParallelLinear` output); False (Megatron's default): ``x [… , in]`` is replicated and each
    device takes its slice. The output is replicated over the group; the bias (replicated) is added after the
    all-reduce, so it counts once.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        input_is_parallel: bool = False,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        compute_kernel_config: WormholeComputeKernelConfig | None = None,
        init: tuple | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.RowParallelLinear"
        mesh = self._init_group(owner, device, cluster_axis)
        self.in_features = self._divisible(owner, "in_features", in_features)
        self.out_features = _positive(owner, "out_features", out_features)
        self.input_is_parallel = bool(input_is_parallel)
        self.compute_kernel_config = compute_kernel_config or TRAINING_COMPUTE_CONFIG
        dtype = _check_dtype(owner, dtype)
        weight, bias_value = _linear_arrays(owner, self.in_features, self.out_features, bias, init)
        self.shard_dims = {"weight": 0}
        self.weight = self._sharded(weight, 0, dtype)
        if bias_value is not None:
            self.bias = make_parameter(bias_value, device=mesh, dtype=dtype)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_dense(
        cls,
        linear: Linear,
        *,
        input_is_parallel: bool = False,
        cluster_axis: int | None = None,
    ) -> RowParallelLinear:
        """The same map as the replicated ``linear``, split by rows."""
        what = "ttnn.nn.parallel.RowParallelLinear.from_dense"
        return cls(
            linear.in_features,
            linear.out_features,
            linear.bias is not None,
            input_is_parallel=input_is_parallel,
            cluster_axis=cluster_axis,
            device=linear.weight.device(),
            dtype=linear.weight.dtype,
            compute_kernel_config=linear.compute_kernel_config,
            init=(
                host_array(linear.weight, what),
                None if linear.bias is None else host_array(linear.bias, what),
            ),
        )

    def forward(self, x: Tensor) -> Tensor:
        self._check_training()
        if not self.input_is_parallel:
            if not isinstance(x, Tensor) or x.shape[-1] != self.in_features:
                got = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValidationError(
                    f"ttnn.nn.parallel.RowParallelLinear: x: expected a replicated tensor [..., {self.in_features}] "
                    f"(input_is_parallel=False), got {got}"
                )
            x = _SplitLastDim.apply(x, self)
        y = ttnn.linear(x, self.weight, compute_kernel_config=self.compute_kernel_config)
        y = ttnn.all_reduce(y, cluster_axis=self.ccl_axis)
        return y if self.bias is None else ttnn.add(y, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"input_is_parallel={self.input_is_parallel}, tp_size={self.tp_size}"
        )


class VocabParallelEmbedding(TensorParallelLayer):
    """Token embedding with the table ``[V, E]`` split by rows: device k holds ids ``[k·V/N, (k+1)·V/N)``.

    ``forward(ids)``: uint32 ids ``[B, S]`` (or ``[B, 1, 1, S]``) replicated over the group → ``[B, 1, S, E]``
    replicated. Each device looks up the ids of its range (others read row 0 and are zeroed by a mask), an
    all-reduce sums the pieces. A float32 table is looked up through a bfloat16 copy, as in ``ttnn.nn.Embedding``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        cluster_axis: int | None = None,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        init: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.VocabParallelEmbedding"
        mesh = self._init_group(owner, device, cluster_axis)
        self.num_embeddings = self._divisible(owner, "num_embeddings", num_embeddings)
        self.embedding_dim = _positive(owner, "embedding_dim", embedding_dim)
        dtype = _check_dtype(owner, dtype)
        if init is None:
            table = _random.rng().standard_normal((self.num_embeddings, self.embedding_dim))
        else:
            table = np.asarray(init, dtype=np.float32)
            if table.shape != (self.num_embeddings, self.embedding_dim):
                raise ValidationError(
                    f"{owner}: init: expected a table of shape {[self.num_embeddings, self.embedding_dim]}, "
                    f"got {list(table.shape)}"
                )
        self.shard_dims = {"weight": 0}
        self.weight = self._sharded(table, 0, dtype)
        self.rows_per_device = self.num_embeddings // self.tp_size
        starts = (np.arange(self.tp_size, dtype=np.uint32) * self.rows_per_device).reshape(self.tp_size, 1)
        start = from_numpy(
            starts, dtype=DataType.UINT32, device=mesh, mesh_mapper=shard_mapper(mesh, self.tp_axes, 0)
        )
        self.register_buffer("vocab_start", start, persistent=False)

    @classmethod
    def from_dense(cls, embedding: Embedding, *, cluster_axis: int | None = None) -> VocabParallelEmbedding:
        """The replicated ``embedding``'s table, split by rows (``padding_idx`` is not supported)."""
        what = "ttnn.nn.parallel.VocabParallelEmbedding.from_dense"
        if embedding.padding_idx is not None:
            raise ValidationError(
                f"{what}: embedding: padding_idx is not supported, got {embedding.padding_idx}"
            )
        return cls(
            embedding.num_embeddings,
            embedding.embedding_dim,
            cluster_axis=cluster_axis,
            device=embedding.weight.device(),
            dtype=embedding.weight.dtype,
            init=host_array(embedding.weight, what),
        )

    def forward(self, ids: Tensor) -> Tensor:
        self._check_training()
        if not isinstance(ids, Tensor):
            raise ValidationError(
                f"ttnn.nn.parallel.VocabParallelEmbedding: ids: expected a ttnn.Tensor of uint32 ids, "
                f"got {type(ids).__name__}"
            )
        start = self.vocab_start
        in_range = ttnn.multiply(ttnn.ge(ids, start), ttnn.lt(ids, ttnn.add(start, self.rows_per_device)))
        local = ttnn.subtract(ttnn.where(in_range, ids, start), start)
        table = self.weight
        if table.dtype is not DataType.BFLOAT16:
            table = ttnn.typecast(table, DataType.BFLOAT16)
        rows = ttnn.embedding(local, table, layout=Layout.TILE, dtype=self.weight.dtype)
        batch, seq = (1, rows.shape[0]) if len(rows.shape) == 2 else (rows.shape[0], rows.shape[1])
        rows = ttnn.reshape(rows, (batch, 1, seq, self.embedding_dim))
        mask = ttnn.reshape(ttnn.typecast(in_range, DataType.FLOAT32), (batch, 1, seq, 1))
        return ttnn.all_reduce(ttnn.multiply(rows, mask), cluster_axis=self.ccl_axis)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, tp_size={self.tp_size}"
