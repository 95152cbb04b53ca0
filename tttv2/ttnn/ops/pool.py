"""Pooling: ``ttnn.avg_pool2d``.

ttnn's pooling ops take the activation flattened as ``[1, 1, N * H * W, C]`` (rows in N, H, W order, one column per
channel) with ``batch_size``, ``input_h``, ``input_w`` and ``channels`` given, and return ``[1, 1, N * Hout * Wout,
C]`` in the same order. Computed per device shard in float32, rounded to the output dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import op_error
from ..memory import MemoryConfig
from ..program_configs import WormholeComputeKernelConfig
from ..tensor import Tensor
from ..types import DataType, Layout, TensorMemoryLayout
from ._common import expect_tensor, output_like, ttnn_op
from .data_movement import _map, _no_block_float_row_major

__all__ = ["avg_pool2d"]
__experimental__: list[str] = []
__transformer__: list[str] = []


def _pair(op: str, arg: str, value, lengths: tuple[int, ...], minimum: int) -> tuple[int, ...]:
    items = list(value) if isinstance(value, (list, tuple)) else None
    if (
        items is None
        or len(items) not in lengths
        or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum for v in items)
    ):
        sizes = " or ".join(str(n) for n in lengths)
        raise op_error(op, arg, f"a list of {sizes} ints >= {minimum}", repr(value))
    return tuple(int(v) for v in items)


def _positive(op: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise op_error(op, arg, "an int >= 1", repr(value))
    return int(value)


def _out_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int, ceil_mode: bool) -> int:
    """Output length of one axis, as torch and ttnn count it: with ``ceil_mode`` a last window may run past the
    input, but one that would start in the trailing padding is dropped."""
    span = size + pad_before + pad_after - kernel
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_before:
        out -= 1
    return out


def _windows(size: int, out: int, kernel: int, stride: int, pad_before: int, pad_after: int):
    """Per output position: the window's first and last+1 index in the padded-by-``pad_before`` axis, clipped to
    the end of the trailing padding (the count ``count_include_pad`` divides by), and clipped to the input."""
    starts = np.arange(out) * stride - pad_before
    ends_padded = np.minimum(starts + kernel, size + pad_after)
    return starts, ends_padded, np.maximum(starts, 0), np.minimum(starts + kernel, size)


@ttnn_op("ttnn.avg_pool2d")
def avg_pool2d(
    input_tensor_a: Tensor,
    batch_size: int,
    input_h: int,
    input_w: int,
    channels: int,
    kernel_size,
    stride,
    padding,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
    *,
    memory_config: MemoryConfig | None = None,
    applied_shard_scheme: TensorMemoryLayout | None = None,
    deallocate_input: bool = False,
    reallocate_halo_output: bool = True,
    dtype: DataType = DataType.BFLOAT16,
    output_layout: Layout = Layout.ROW_MAJOR,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """The mean of each ``kernel_size`` window of each channel, the windows ``stride`` apart, over the input
    zero-padded by ``padding`` ((h, w), or (top, bottom, left, right)). ``count_include_pad`` counts the padding
    in the divisor (the window clipped to the end of the padding); else only the input's own elements count;
    ``divisor_override`` replaces the divisor. ``applied_shard_scheme`` (height, width or block sharded) and the
    halo options choose how the kernel spreads over cores: tuning only here. The output is in
    ``memory_config`` (default: the input's), ``dtype`` and ``output_layout``."""
    op = "ttnn.avg_pool2d"
    t = expect_tensor(op, "input_tensor_a", input_tensor_a, rank=4)
    n = _positive(op, "batch_size", batch_size)
    h = _positive(op, "input_h", input_h)
    w = _positive(op, "input_w", input_w)
    c = _positive(op, "channels", channels)
    kh, kw = _pair(op, "kernel_size", kernel_size, (2,), 1)
    sh, sw = _pair(op, "stride", stride, (2,), 1)
    pads = _pair(op, "padding", padding, (2, 4), 0)
    top, bottom, left, right = (pads[0], pads[0], pads[1], pads[1]) if len(pads) == 2 else pads
    if max(top, bottom) * 2 > kh or max(left, right) * 2 > kw:
        raise op_error(op, "padding", f"at most half the kernel ({kh}, {kw})", repr(padding))
    if divisor_override is not None:
        _positive(op, "divisor_override", divisor_override)
    if tuple(t.shape) != (1, 1, n * h * w, c):
        raise op_error(
            op, "input_tensor_a.shape", f"[1, 1, batch_size * input_h * input_w, channels] = [1, 1, {n * h * w}, {c}]",
            list(t.shape),
        )  # fmt: skip
    if applied_shard_scheme is not None and applied_shard_scheme not in (
        TensorMemoryLayout.HEIGHT_SHARDED,
        TensorMemoryLayout.WIDTH_SHARDED,
        TensorMemoryLayout.BLOCK_SHARDED,
    ):
        raise op_error(
            op,
            "applied_shard_scheme",
            "None or a sharded ttnn.TensorMemoryLayout",
            repr(applied_shard_scheme),
        )
    if not isinstance(dtype, DataType):
        raise op_error(op, "dtype", "a ttnn.DataType", repr(dtype))
    if not isinstance(output_layout, Layout):
        raise op_error(op, "output_layout", "a ttnn.Layout", repr(output_layout))
    _no_block_float_row_major(op, dtype, output_layout)
    if compute_kernel_config is not None and not isinstance(
        compute_kernel_config, WormholeComputeKernelConfig
    ):
        raise op_error(
            op, "compute_kernel_config", "a ttnn.WormholeComputeKernelConfig", repr(compute_kernel_config)
        )
    hout = _out_size(h, kh, sh, top, bottom, bool(ceil_mode))
    wout = _out_size(w, kw, sw, left, right, bool(ceil_mode))
    if hout < 1 or wout < 1:
        raise op_error(
            op, "kernel_size", f"a window that fits the padded input ({h}, {w})", repr(kernel_size)
        )
    rows = _windows(h, hout, kh, sh, top, bottom)
    cols = _windows(w, wout, kw, sw, left, right)
    if divisor_override is not None:
        divisor = np.full((hout, wout), float(divisor_override))
    elif count_include_pad:
        divisor = np.outer(rows[1] - rows[0], cols[1] - cols[0]).astype(np.float64)
    else:
        divisor = np.outer(rows[3] - rows[2], cols[3] - cols[2]).astype(np.float64)

    def pool(shard: np.ndarray) -> np.ndarray:
        x = shard.astype(np.float32, copy=False).reshape(n, h, w, c)
        # prefix sums over H and W: each window's sum from four corners (the input's own part of the window)
        s = np.zeros((n, h + 1, w + 1, c), dtype=np.float64)
        s[:, 1:, 1:] = x.cumsum(axis=1, dtype=np.float64).cumsum(axis=2)
        r0, r1 = rows[2][:, None], rows[3][:, None]
        c0, c1 = cols[2][None, :], cols[3][None, :]
        total = s[:, r1, c1] - s[:, r0, c1] - s[:, r1, c0] + s[:, r0, c0]
        out = (total / divisor[None, :, :, None]).astype(np.float32)
        return out.reshape(1, 1, n * hout * wout, c)

    shards = _map(t, op, pool)
    return output_like(op, shards, t, dtype=dtype, layout=output_layout, memory_config=memory_config)
