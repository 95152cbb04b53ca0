"""``ttnn.avg_pool2d`` against torch's ``avg_pool2d`` (Gemma-3's multi-modal projector pools its vision tokens with
it), and ``ttnn.Device``, the chip type of a mesh's ``get_devices()``.

The emulator sums each window of the stored bfloat16 values in float64 and divides once, then rounds to the output
dtype: against torch's float32 result on the same values it is exact in bfloat16 for these sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn import ValidationError


def _nhwc_rows(mesh, x: torch.Tensor, layout=ttnn.ROW_MAJOR_LAYOUT):
    n, c, h, w = x.shape
    rows = x.permute(0, 2, 3, 1).reshape(1, 1, n * h * w, c)
    return ttnn.from_torch(
        rows, dtype=ttnn.bfloat16, layout=layout, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )


def _nchw(t, n, c, h, w, mesh):
    out = ttnn.to_torch(ttnn.get_device_tensors(t)[-1]).float()
    assert list(t.shape) == [1, 1, n * h * w, c]
    return out.reshape(n, h, w, c).permute(0, 3, 1, 2)


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "ceil_mode", "count_include_pad", "divisor"),
    [
        # Gemma-3: 64x64 patches to 16x16 tokens, here 8x8 to 2x2
        ((4, 4), (4, 4), (0, 0), False, True, None),
        ((3, 3), (2, 2), (1, 1), True, True, None),  # a last window past the input (ceil_mode)
        ((3, 3), (2, 2), (1, 1), True, False, None),  # only the input's own elements counted
        ((3, 2), (2, 3), (1, 1), False, True, None),  # unequal kernel and stride
        ((2, 2), (1, 1), (0, 0), False, True, 3),  # divisor_override
    ],
)
def test_avg_pool2d_matches_torch(open_mesh, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    mesh = open_mesh((1, 2))
    n, c, h, w = 2, 64, 8, 8
    x = torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(3)).bfloat16().float()
    out = ttnn.avg_pool2d(
        _nhwc_rows(mesh, x), n, h, w, c, kernel, stride, padding, ceil_mode, count_include_pad, divisor,
        memory_config=ttnn.DRAM_MEMORY_CONFIG, applied_shard_scheme=ttnn.TensorMemoryLayout.BLOCK_SHARDED,
    )  # fmt: skip
    ref = torch.nn.functional.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    assert out.layout == ttnn.ROW_MAJOR_LAYOUT and out.dtype == ttnn.bfloat16
    got = _nchw(out, n, c, ref.shape[2], ref.shape[3], mesh)
    assert torch.equal(got, ref.bfloat16().float())


def test_avg_pool2d_four_paddings_tile_output_and_input_layout(open_mesh):
    mesh = open_mesh((1, 1))
    n, c, h, w = 1, 32, 6, 6
    x = torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(4)).bfloat16().float()
    out = ttnn.avg_pool2d(
        _nhwc_rows(mesh, x, ttnn.TILE_LAYOUT), n, h, w, c, [2, 2], [2, 2], [1, 0, 0, 1],
        output_layout=ttnn.TILE_LAYOUT, dtype=ttnn.float32,
    )  # fmt: skip
    ref = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(x, (0, 1, 1, 0)), 2, 2)
    assert out.layout == ttnn.TILE_LAYOUT and out.dtype == ttnn.float32
    assert torch.allclose(_nchw(out, n, c, 3, 3, mesh), ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"channels": 48},
            r"input_tensor_a.shape: expected \[1, 1, batch_size \* input_h \* input_w, channels\]",
        ),
        ({"kernel_size": (2,)}, r"kernel_size: expected a list of 2 ints >= 1"),
        ({"stride": (0, 1)}, r"stride: expected a list of 2 ints >= 1"),
        ({"padding": (2, 2)}, r"padding: expected at most half the kernel"),
        ({"batch_size": 0}, r"batch_size: expected an int >= 1"),
        ({"divisor_override": 0}, r"divisor_override: expected an int >= 1"),
        (
            {"applied_shard_scheme": ttnn.TensorMemoryLayout.INTERLEAVED},
            r"applied_shard_scheme: expected None or",
        ),
        ({"dtype": "bf16"}, r"dtype: expected a ttnn.DataType"),
        ({"output_layout": "tile"}, r"output_layout: expected a ttnn.Layout"),
        ({"dtype": ttnn.bfloat8_b}, r"for a BFLOAT8_B tensor"),
        (
            {"compute_kernel_config": {}},
            r"compute_kernel_config: expected a ttnn.WormholeComputeKernelConfig",
        ),
        (
            {"kernel_size": (3, 3), "stride": (1, 1), "input_h": 2, "input_w": 8, "batch_size": 1},
            r"kernel_size",
        ),
    ],
)
def test_avg_pool2d_refuses_bad_arguments_in_one_line(open_mesh, change, message):
    mesh = open_mesh((1, 1))
    x = _nhwc_rows(mesh, torch.zeros(1, 32, 4, 4))
    args = {
        "batch_size": 1,
        "input_h": 4,
        "input_w": 4,
        "channels": 32,
        "kernel_size": (2, 2),
        "stride": (2, 2),
    }
    args.update({"padding": (0, 0)})
    args.update(change)
    if args["input_h"] != 4:
        x = _nhwc_rows(mesh, torch.zeros(1, 32, args["input_h"], args["input_w"]))
    with pytest.raises(ValidationError, match=message) as info:
        ttnn.avg_pool2d(x, **args)
    assert "\n" not in str(info.value)


def test_device_is_the_type_of_a_meshs_chips(open_mesh):
    """``ttnn.Device`` is exported, as ttnn has it (tt-metal's utilities annotate with
    ``Union[ttnn.MeshDevice, ttnn.Device]`` at import); a mesh is not one."""
    mesh = open_mesh((1, 2))
    assert all(type(d) is ttnn.Device for d in mesh.get_devices())
    assert not isinstance(mesh, ttnn.Device)
    assert np.isfinite(mesh.get_devices()[0].id())
