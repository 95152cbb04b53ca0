"""Reductions: sum, mean, max, min, std, var, argmax, topk.

Per device shard, computed in float32 (float inputs) or int64 (integer inputs) and rounded to the output
dtype. As in ttnn, ``dim=None`` reduces every dim, ``keepdim=False`` drops the reduced dims (all dims →
a rank-0 tensor) and ``scalar`` multiplies the result.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import op_error
from ..memory import MemoryConfig
from ..program_configs import WormholeComputeKernelConfig
from ..tensor import Tensor
from ..types import DataType, Layout
from ._common import expect_tensor, output_like, same_mesh, ttnn_op
from .data_movement import per_device

__all__ = ["argmax", "max", "mean", "min", "moe", "std", "sum", "topk", "var"]
__experimental__: list[str] = []
__transformer__: list[str] = []


def _dims(op: str, dim, rank: int) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(rank))
    items = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    out = []
    for d in items:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not -rank <= d < rank:
            raise op_error(op, "dim", f"None, or dims in [{-rank}, {rank - 1}]", repr(dim))
        out.append(int(d) % rank)
    if len(set(out)) != len(out):
        raise op_error(op, "dim", "distinct dims", repr(dim))
    return tuple(sorted(out))


def _check_common(op: str, memory_config, compute_kernel_config) -> None:
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    if compute_kernel_config is not None and not isinstance(
        compute_kernel_config, WormholeComputeKernelConfig
    ):
        raise op_error(
            op, "compute_kernel_config", "a ttnn.WormholeComputeKernelConfig", repr(compute_kernel_config)
        )


def _reduce(
    op: str,
    fn: Callable[[np.ndarray, tuple[int, ...]], np.ndarray],
    input_tensor,
    dim,
    keepdim: bool,
    memory_config,
    compute_kernel_config,
    scalar: float,
    *,
    float_only: bool = False,
) -> Tensor:
    dtypes = None
    if float_only:
        dtypes = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B, DataType.BFLOAT4_B)
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=dtypes)
    _check_common(op, memory_config, compute_kernel_config)
    dims = _dims(op, dim, len(x.shape))

    def run(s: np.ndarray) -> np.ndarray:
        v = np.asarray(s, dtype=np.float32) if x.dtype.is_float else np.asarray(s, dtype=np.int64)
        r = fn(v, dims)
        if scalar != 1.0:
            r = r * scalar
        if not keepdim:
            r = np.squeeze(r, axis=dims)
        return np.asarray(r)

    shards = per_device(run, x.shards(op))
    if not x.dtype.is_float:
        info = np.iinfo(x.dtype.numpy_dtype)
        shards = per_device(
            lambda s: np.clip(np.rint(s), info.min, info.max).astype(x.dtype.numpy_dtype), shards
        )
    return output_like(op, shards, x, memory_config=memory_config)


def _reduction_op(
    name: str, fn: Callable[[np.ndarray, tuple[int, ...]], np.ndarray], doc: str, float_only: bool
):
    """Build the public op ``ttnn.<name>``: one signature for every plain reduction."""

    def op(
        input_tensor: Tensor,
        dim=None,
        keepdim: bool = False,
        *,
        memory_config: MemoryConfig | None = None,
        compute_kernel_config: WormholeComputeKernelConfig | None = None,
        scalar: float = 1.0,
        sub_core_grids=None,
        **_speed_knobs,
    ) -> Tensor:
        return _reduce(
            f"ttnn.{name}",
            fn,
            input_tensor,
            dim,
            keepdim,
            memory_config,
            compute_kernel_config,
            scalar,
            float_only=float_only,
        )

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return ttnn_op(f"ttnn.{name}")(op)


sum = _reduction_op(
    "sum",
    lambda v, d: np.sum(v, axis=d, keepdims=True),
    "Sum over ``dim`` (an int, a list of ints, or None for all dims).",
    float_only=False,
)
mean = _reduction_op(
    "mean",
    lambda v, d: np.mean(v, axis=d, keepdims=True, dtype=np.float64).astype(np.float32),
    "Mean over ``dim``.",
    float_only=True,
)
max = _reduction_op(
    "max", lambda v, d: np.max(v, axis=d, keepdims=True), "Maximum over ``dim``.", float_only=False
)
min = _reduction_op(
    "min", lambda v, d: np.min(v, axis=d, keepdims=True), "Minimum over ``dim``.", float_only=False
)


def _variance(v: np.ndarray, dims: tuple[int, ...], correction: bool) -> np.ndarray:
    n = int(np.prod([v.shape[d] for d in dims]))
    ddof = 1 if correction and n > 1 else 0
    return np.var(v, axis=dims, keepdims=True, ddof=ddof, dtype=np.float64).astype(np.float32)


@ttnn_op("ttnn.var")
def var(
    input_tensor: Tensor,
    dim=None,
    keepdim: bool = False,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    scalar: float = 1.0,
    correction: bool = True,
    sub_core_grids=None,
) -> Tensor:
    """Variance over ``dim``; ``correction=True`` divides by N − 1 (Bessel), else by N."""
    return _reduce(
        "ttnn.var",
        lambda v, d: _variance(v, d, correction),
        input_tensor,
        dim,
        keepdim,
        memory_config,
        compute_kernel_config,
        scalar,
        float_only=True,
    )


@ttnn_op("ttnn.std")
def std(
    input_tensor: Tensor,
    dim=None,
    keepdim: bool = False,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    scalar: float = 1.0,
    correction: bool = True,
    sub_core_grids=None,
) -> Tensor:
    """Standard deviation over ``dim`` (see :func:`var` for ``correction``)."""
    return _reduce(
        "ttnn.std",
        lambda v, d: np.sqrt(_variance(v, d, correction)),
        input_tensor,
        dim,
        keepdim,
        memory_config,
        compute_kernel_config,
        scalar,
        float_only=True,
    )


_ARGMAX_TILE_DTYPES = (DataType.BFLOAT16, DataType.FLOAT32)
_ARGMAX_DTYPES = (DataType.BFLOAT16, DataType.FLOAT32, DataType.UINT32, DataType.INT32, DataType.UINT16)


@ttnn_op("ttnn.argmax")
def argmax(
    input_tensor: Tensor,
    *,
    dim: int | None = None,
    keepdim: bool = False,
    sub_core_grids=None,
    use_multicore: bool = False,
    memory_config: MemoryConfig | None = None,
    output_tensor=None,
) -> Tensor:
    """Index (UINT32, ROW_MAJOR) of the first maximum along the last dim, or over all elements (dim=None).

    As on hardware only the last dim can be reduced; TILE inputs must be bfloat16 or float32.
    ``use_multicore`` only changes speed.
    """
    op = "ttnn.argmax"
    x = expect_tensor(op, "input_tensor", input_tensor, dtypes=_ARGMAX_DTYPES)
    if x.layout is Layout.TILE and x.dtype not in _ARGMAX_TILE_DTYPES:
        raise op_error(op, "input_tensor.layout", f"ROW_MAJOR for a {x.dtype.name} input", "TILE")
    _check_common(op, memory_config, None)
    rank = len(x.shape)
    if dim is not None and (
        isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim not in (-1, rank - 1)
    ):
        raise op_error(op, "dim", f"None, -1 or {rank - 1} (only the last dim can be reduced)", repr(dim))

    def run(s: np.ndarray) -> np.ndarray:
        v = np.asarray(s)
        if dim is None:
            idx = np.asarray(np.argmax(v.reshape(-1)))
            return idx.reshape((1,) * rank) if keepdim else idx
        idx = np.argmax(v, axis=-1)
        return idx[..., None] if keepdim else idx

    shards = per_device(lambda s: run(s).astype(np.uint32), x.shards(op))
    return output_like(
        op, shards, x, dtype=DataType.UINT32, layout=Layout.ROW_MAJOR, memory_config=memory_config
    )


@ttnn_op("ttnn.topk")
def topk(
    input_tensor: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    out=None,
    memory_config: MemoryConfig | None = None,
    sub_core_grids=None,
    indices_tensor=None,
) -> tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, sorted, ties by lower index.

    Values keep the input dtype; indices are UINT16 (UINT32 when the dim has more than 65535 entries), both
    TILE like the input. ``sorted=False`` also returns sorted results (an allowed order).
    """
    op = "ttnn.topk"
    x = expect_tensor(
        op,
        "input_tensor",
        input_tensor,
        dtypes=(DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32),
        layouts=(Layout.TILE,),
    )
    _check_common(op, memory_config, None)
    rank = len(x.shape)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -rank <= dim < rank:
        raise op_error(op, "dim", f"a dim in [{-rank}, {rank - 1}]", repr(dim))
    axis = int(dim) % rank
    size = x.shape[axis]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= size:
        raise op_error(op, "k", f"an int in [1, {size}] (the size of dim {axis})", repr(k))
    index_dtype = DataType.UINT16 if size <= np.iinfo(np.uint16).max else DataType.UINT32

    def one(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = np.moveaxis(np.asarray(s, dtype=np.float32), axis, -1)
        order = np.argsort(-v if largest else v, axis=-1, kind="stable")[..., :k]
        vals = np.ascontiguousarray(np.moveaxis(np.take_along_axis(v, order, axis=-1), -1, axis))
        return vals, np.ascontiguousarray(np.moveaxis(order, -1, axis)).astype(index_dtype.numpy_dtype)

    pairs = per_device(one, x.shards(op))
    values, indices = [p[0] for p in pairs], [p[1] for p in pairs]
    out_values = output_like(op, values, x, memory_config=memory_config)
    out_indices = output_like(op, indices, x, dtype=index_dtype, memory_config=memory_config)
    return out_values, out_indices


@ttnn_op("ttnn.moe")
def moe(
    input_tensor: Tensor,
    expert_mask_tensor: Tensor,
    topk_mask_tensor: Tensor,
    k: int,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor=None,
) -> Tensor:
    """The weight of expert 0 per row: the ``k`` largest of ``input + expert_mask`` (ties by lower index), their
    softmax after adding ``topk_mask``, summed where the index is 0 (ttnn's documented reference). Shape
    ``[N, C, H, 1]``, bfloat16, TILE. As ttnn: 4D bfloat16 TILE tensors on a device, the input's rows a multiple
    of 32 and its last dim a power of two >= 64, ``k`` 32; the masks match the input's and ``k``'s width and
    broadcast over the rows; not sharded; no ``output_tensor``."""
    op = "ttnn.moe"
    tensors = {"input_tensor": input_tensor, "expert_mask_tensor": expert_mask_tensor}
    tensors["topk_mask_tensor"] = topk_mask_tensor
    for name, t in tensors.items():
        expect_tensor(op, name, t, dtypes=(DataType.BFLOAT16,), layouts=(Layout.TILE,))
        if t.memory_config().is_sharded():
            raise op_error(op, name, "an interleaved tensor (sharding is not supported)", t.memory_config())
    same_mesh(op, **tensors)
    _check_common(op, memory_config, None)
    if output_tensor is not None:
        raise op_error(op, "output_tensor", "None (the emulator allocates the output)", "a tensor")
    shape = list(input_tensor.shape)
    width = shape[-1] if shape else 0
    rows = int(np.prod(shape[:-1])) if len(shape) == 4 else 0
    if len(shape) != 4 or rows % 32 or width < 64 or width & (width - 1):
        raise op_error(
            op, "input_tensor", "a 4D tensor, N*C*H a multiple of 32, W a power of two >= 64", shape
        )
    if isinstance(k, bool) or k != 32:
        raise op_error(op, "k", "32", repr(k))
    for name, want in (("expert_mask_tensor", width), ("topk_mask_tensor", k)):
        got = list(tensors[name].shape)
        if not got or got[-1] != want or int(np.prod(got[:-1])) != 1:
            raise op_error(op, name, f"one row of width {want} (broadcast over the input's rows)", got)

    def one(x: np.ndarray, expert_mask: np.ndarray, topk_mask: np.ndarray) -> np.ndarray:
        scores = x.astype(np.float32) + expert_mask.astype(np.float32).reshape(-1)
        order = np.argsort(-scores, axis=-1, kind="stable")[..., :k]
        values = np.take_along_axis(scores, order, axis=-1) + topk_mask.astype(np.float32).reshape(-1)
        values = values - values.max(axis=-1, keepdims=True)
        weights = np.exp(values)
        weights /= weights.sum(axis=-1, keepdims=True)
        return np.sum(weights * (order == 0), axis=-1, keepdims=True).astype(np.float32)

    shards = per_device(one, *(t.shards(op) for t in tensors.values()))
    return output_like(op, shards, input_tensor, dtype=DataType.BFLOAT16, memory_config=memory_config)
