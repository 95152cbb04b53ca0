"""Basic layers: Linear, LayerNorm, RMSNorm, Embedding, Dropout (and the functional ``dropout``).

Activations are 4-D ``[B, 1, S, E]`` TILE tensors, as in TT transformer code. Parameters are created on
``device`` (default: ``ttnn.GetDefaultDevice()``), replicated over the mesh, in ``dtype`` (float32 by
default; bfloat16 trains like TTML, with bfloat16 gradients). Weights of linear maps are stored
``[in, out]`` (``y = x @ W``), the TT-NN convention — the transpose of ``torch.nn.Linear.weight``;
:meth:`Module.load_torch_state_dict` transposes for you.
"""

from __future__ import annotations

import math

import numpy as np

from ... import ttnn
from ..device import MeshDevice
from ..errors import ValidationError
from ..numerics import fill_in_pieces
from ..ops._common import output_like
from ..ops.creation import check_seed
from ..ops.data_movement import per_device
from ..program_configs import WormholeComputeKernelConfig
from ..tensor import Tensor
from ..types import DataType, Layout, MathFidelity
from . import _random
from .module import Module, make_parameter, resolve_device

__all__ = ["TRAINING_COMPUTE_CONFIG", "Dropout", "Embedding", "LayerNorm", "Linear", "RMSNorm", "dropout"]

# training matmuls run at full fidelity with float32 accumulation (TTML's "matmul" config): the emulator's
# default (LoFi, as on hardware) truncates operand mantissas, which a training step cannot afford
TRAINING_COMPUTE_CONFIG = WormholeComputeKernelConfig(
    math_fidelity=MathFidelity.HiFi4, math_approx_mode=False, fp32_dest_acc_en=True, packer_l1_acc=True
)

_FLOAT_DTYPES = (DataType.FLOAT32, DataType.BFLOAT16)


def _check_dtype(owner: str, dtype) -> DataType:
    if dtype not in _FLOAT_DTYPES:
        raise ValidationError(f"{owner}: dtype: expected ttnn.float32 or ttnn.bfloat16, got {dtype!r}")
    return dtype


def _positive(owner: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValidationError(f"{owner}: {name}: expected a positive int, got {value!r}")
    return int(value)


def _probability(owner: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValidationError(f"{owner}: p: expected a probability in [0, 1), got {p!r}")
    return float(p)


class Linear(Module):
    """``y = x @ weight + bias`` with ``weight [in_features, out_features]`` and ``bias [1, out_features]``.

    Initialised like ``torch.nn.Linear``: U(−1/√in, 1/√in) for both. The product runs with
    ``compute_kernel_config`` (default :data:`TRAINING_COMPUTE_CONFIG`: HiFi4, float32 accumulation).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
        compute_kernel_config: WormholeComputeKernelConfig | None = None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.Linear"
        self.compute_kernel_config = compute_kernel_config or TRAINING_COMPUTE_CONFIG
        self.in_features = _positive(owner, "in_features", in_features)
        self.out_features = _positive(owner, "out_features", out_features)
        device = resolve_device(device, owner)
        dtype = _check_dtype(owner, dtype)
        bound = 1.0 / math.sqrt(self.in_features)
        gen = _random.rng()
        self.weight = make_parameter(
            gen.uniform(-bound, bound, (self.in_features, self.out_features)), device=device, dtype=dtype
        )
        if bias:
            self.bias = make_parameter(
                gen.uniform(-bound, bound, (1, self.out_features)), device=device, dtype=dtype
            )
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return ttnn.linear(x, self.weight, bias=self.bias, compute_kernel_config=self.compute_kernel_config)

    @staticmethod
    def _from_torch(name: str, array: np.ndarray) -> np.ndarray:
        return array.T if name == "weight" else array

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


class LayerNorm(Module):
    """Layer normalisation over the last dim (``weight``/``bias`` ``[1, 1, 1, C]``, ones and zeros), computed by
    the fused ``ttnn.layer_norm_forward`` (its backward reuses the saved mean and rstd)."""

    def __init__(
        self,
        normalized_shape: int,
        eps: float = 1e-5,
        bias: bool = True,
        *,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.LayerNorm"
        self.normalized_shape = _positive(owner, "normalized_shape", normalized_shape)
        self.eps = float(eps)
        device = resolve_device(device, owner)
        dtype = _check_dtype(owner, dtype)
        shape = (1, 1, 1, self.normalized_shape)
        self.weight = make_parameter(np.ones(shape), device=device, dtype=dtype)
        if bias:
            self.bias = make_parameter(np.zeros(shape), device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return _first(ttnn.layer_norm_forward(x, self.weight, self.bias, epsilon=self.eps))

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(Module):
    """RMS normalisation over the last dim (``weight [1, 1, 1, C]``, ones) by the fused ``ttnn.rms_norm_forward``."""

    def __init__(
        self,
        normalized_shape: int,
        eps: float = 1e-6,
        *,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.RMSNorm"
        self.normalized_shape = _positive(owner, "normalized_shape", normalized_shape)
        self.eps = float(eps)
        device = resolve_device(device, owner)
        dtype = _check_dtype(owner, dtype)
        self.weight = make_parameter(np.ones((1, 1, 1, self.normalized_shape)), device=device, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return _first(ttnn.rms_norm_forward(x, self.weight, epsilon=self.eps))

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


def _first(result):
    return result[0] if isinstance(result, (tuple, list)) else result


class Embedding(Module):
    """Token embedding: ``weight [num_embeddings, embedding_dim]`` (N(0, 1) like torch); ids → ``[B, 1, S, E]``.

    ``ttnn.embedding`` reads bfloat16 tables; a float32 table is looked up through a bfloat16 copy (the
    gradient still reaches the float32 weight). Ids are uint32 ``[B, S]`` or ``[B, 1, 1, S]``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        *,
        device: MeshDevice | None = None,
        dtype: DataType = DataType.FLOAT32,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.Embedding"
        self.num_embeddings = _positive(owner, "num_embeddings", num_embeddings)
        self.embedding_dim = _positive(owner, "embedding_dim", embedding_dim)
        if padding_idx is not None and not 0 <= padding_idx < self.num_embeddings:
            raise ValidationError(
                f"{owner}: padding_idx: expected an id in [0, {num_embeddings}), got {padding_idx!r}"
            )
        self.padding_idx = padding_idx
        device = resolve_device(device, owner)
        dtype = _check_dtype(owner, dtype)
        table = _random.rng().standard_normal((self.num_embeddings, self.embedding_dim))
        if padding_idx is not None:
            table[padding_idx] = 0.0
        self.weight = make_parameter(table, device=device, dtype=dtype)

    def forward(self, ids: Tensor) -> Tensor:
        if not isinstance(ids, Tensor):
            raise ValidationError(
                f"ttnn.nn.Embedding: ids: expected a ttnn.Tensor of uint32 ids, got {type(ids).__name__}"
            )
        table = self.weight
        if table.dtype is not DataType.BFLOAT16:
            table = ttnn.typecast(table, DataType.BFLOAT16)
        out = ttnn.embedding(
            ids, table, padding_idx=self.padding_idx, layout=Layout.TILE, dtype=self.weight.dtype
        )
        batch, seq = (1, out.shape[0]) if len(out.shape) == 2 else (out.shape[0], out.shape[1])
        return ttnn.reshape(out, (batch, 1, seq, self.embedding_dim))

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


def dropout(x: Tensor, p: float, seed: int | None = None, *, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1 − p)``.

    The mask is drawn on the device from ``seed`` (default: the next seed of ``ttnn.nn``'s stream), so the
    same seed gives the same mask — what gradient checkpointing relies on. The mask is the same on every
    device of the mesh (per-device shape). Identity when not ``training`` or ``p == 0``.
    """
    p = _probability("ttnn.nn.functional.dropout", p)
    if not training or p == 0.0:
        return x
    if not isinstance(x, Tensor):
        raise ValidationError(
            f"ttnn.nn.functional.dropout: x: expected a ttnn.Tensor, got {type(x).__name__}"
        )
    if x.dtype not in _FLOAT_DTYPES:
        # ttnn's dropout keeps the input's dtype (its output dtype must equal the input's) and its kernel only
        # handles floats: an integer tensor is refused rather than silently returned as float32
        raise ValidationError(
            f"ttnn.nn.functional.dropout: x.dtype: expected ttnn.float32 or ttnn.bfloat16, got {x.dtype!r}"
        )
    seed = _random.next_seed() if seed is None else check_seed("ttnn.nn.functional.dropout", "seed", seed)
    uniform = ttnn.rand(tuple(x.shape), device=x.device(), dtype=DataType.FLOAT32, layout=x.layout, seed=seed)
    return ttnn.multiply(x, _dropout_mask(uniform, p))


def _dropout_mask(uniform: Tensor, p: float) -> Tensor:
    """``ttnn.multiply(ttnn.ge(uniform, p), 1 / (1 − p))`` in one pass and without the two ops' dispatch (a
    NanoGPT training step draws 13 masks): the same float32 values — 1.0 or 0.0 times the scale rounded to
    float32 — and the same layout and memory config."""
    threshold, scale = np.float32(p), np.float32(1.0 / (1.0 - p))

    def mask(u: np.ndarray) -> np.ndarray:  # elementwise, so computed in pieces on the workers, same values
        flat, out = u.reshape(-1), np.empty(u.shape, dtype=np.float32)
        res = out.reshape(-1)

        def piece(lo: int, hi: int) -> None:
            np.multiply(np.greater_equal(flat[lo:hi], threshold), scale, out=res[lo:hi], dtype=np.float32)

        fill_in_pieces(piece, flat.size)
        return out

    shards = per_device(mask, uniform.shards("ttnn.nn.functional.dropout"))
    return output_like("ttnn.nn.functional.dropout", shards, uniform)


class Dropout(Module):
    """:func:`dropout` in training mode, identity in eval mode; one fresh seed per call."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = _probability("ttnn.nn.Dropout", p)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, training=self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
