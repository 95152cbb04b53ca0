"""The tt_lib era's names that older tt-metal demos still call (tt-metal's T3000 Mixtral MLP, written in the style of
``models/demos/t3000/mixtral8x7b/tt/mixtral_mlp.py``): ``ttnn.experimental.operations.primary.matmul_1d`` with its
1-D multicast program config and a ``FusibleActivation``, and ``ttnn.experimental.tensor.mul``
(docs/emulator.md, "The T3000 demos' older ops")."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError

primary = ttnn.experimental.operations.primary
tt_lib = ttnn.experimental.tensor
LOFI = ttnn.WormholeComputeKernelConfig(
    math_fidelity=ttnn.MathFidelity.LoFi, fp32_dest_acc_en=True, packer_l1_acc=True
)
EXACT = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)


def _put(mesh, x, dtype=ttnn.bfloat16, memory_config=None):
    return ttnn.from_numpy(
        np.asarray(x, np.float32),
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config,
    )


def _ff1_config(activation, per_core_n=11):
    """The T3000 Mixtral MLP's decode config: 6 x 7 cores, one row tile of M, in0 multicast."""
    return primary.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(6, 7),
        in0_block_w=4,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=per_core_n,
        fuse_batch=True,
        fused_activation=activation,
        mcast_in0=True,
    )


@pytest.fixture
def decode(open_mesh, rng):
    """A decode step of a small expert: 32 rows, K = 256 (8 tiles), N = 512 (16 tiles), bfloat8_b weights."""
    mesh = open_mesh((1, 1))
    x = _put(mesh, rng.standard_normal((1, 1, 32, 256)), memory_config=ttnn.L1_MEMORY_CONFIG)
    w = _put(mesh, rng.standard_normal((1, 1, 256, 512)) / 16, ttnn.bfloat8_b)
    return mesh, x, w


def test_the_names_resolve_as_the_older_api_spelled_them():
    assert (
        primary.MatmulMultiCoreReuseMultiCast1DProgramConfig
        is ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig
    )
    assert (
        primary.MatmulMultiCoreReuseMultiCastProgramConfig is ttnn.MatmulMultiCoreReuseMultiCastProgramConfig
    )
    assert tt_lib.FusibleActivation.SILU is ttnn.UnaryOpType.SILU
    assert tt_lib.FusibleActivationWithParam is ttnn.UnaryWithParam
    assert tt_lib.WormholeComputeKernelConfig is ttnn.WormholeComputeKernelConfig
    # the bound types stay where the Falcon-40B demo's annotations read them
    assert tt_lib.Tensor is ttnn.Tensor and tt_lib.MemoryConfig is ttnn.MemoryConfig
    assert "matmul_1d" in primary.__all__ and "mul" in tt_lib.__all__
    # importable as modules, as `import ttnn.experimental.operations.primary` needs (the emulator as `ttnn`)
    assert importlib.import_module("tttv2.ttnn.experimental.operations.primary") is primary
    assert importlib.import_module("tttv2.ttnn.experimental.tensor") is tt_lib
    # the newer path to the bound types did not gain tt_lib's ops
    assert not hasattr(ttnn._ttnn.tensor, "mul")


def test_matmul_1d_is_the_linear_of_its_config(decode):
    _, x, w = decode
    config = _ff1_config(tt_lib.FusibleActivation.SILU)
    out = primary.matmul_1d(
        x,
        w,
        program_config=config,
        output_mem_config=ttnn.L1_MEMORY_CONFIG,
        compute_kernel_config=LOFI,
        output_dtype=ttnn.bfloat8_b,
    )
    same = ttnn.linear(
        x,
        w,
        program_config=config,
        memory_config=ttnn.L1_MEMORY_CONFIG,
        compute_kernel_config=LOFI,
        dtype=ttnn.bfloat8_b,
    )
    np.testing.assert_array_equal(ttnn.to_numpy(out), ttnn.to_numpy(same))
    assert out.dtype is ttnn.bfloat8_b and out.memory_config() == ttnn.L1_MEMORY_CONFIG
    assert list(out.shape) == [1, 1, 32, 512]
    # the fused activation is applied: silu of the product (HiFi4 + fp32 accumulation against float64)
    exact = primary.matmul_1d(x, w, program_config=config, compute_kernel_config=EXACT)
    ref = ttnn.to_numpy(x).astype(np.float64) @ ttnn.to_numpy(w).astype(np.float64)
    silu = ref / (1 + np.exp(-ref))
    np.testing.assert_allclose(ttnn.to_numpy(exact), silu, atol=2.0**-7 * np.abs(silu).max())


def test_matmul_1d_defaults_are_the_older_api_s(decode, rng):
    mesh, x, w = decode
    out = primary.matmul_1d(x, w)  # no config: that API chose one itself
    assert out.memory_config() == ttnn.DRAM_MEMORY_CONFIG  # not the input's L1
    assert out.dtype is ttnn.bfloat16  # the input's dtype
    np.testing.assert_array_equal(ttnn.to_numpy(out), ttnn.to_numpy(ttnn.linear(x, w)))
    bias = _put(mesh, rng.standard_normal((1, 1, 1, 512)))
    with_bias = primary.matmul_1d(x, w, bias=bias, program_config=_ff1_config(None))
    np.testing.assert_array_equal(
        ttnn.to_numpy(with_bias),
        ttnn.to_numpy(ttnn.linear(x, w, bias=bias, program_config=_ff1_config(None))),
    )


def test_matmul_1d_refuses_what_the_older_api_refused(decode, open_mesh, rng):
    mesh, x, w = decode
    two_d = ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(8, 2),
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=2,
        per_core_M=1,
        per_core_N=2,
    )
    with pytest.raises(
        ValidationError, match=r"matmul_1d: program_config: expected None or a MatmulMultiCoreReuse"
    ):
        primary.matmul_1d(x, w, program_config=two_d)
    with pytest.raises(ValidationError, match=r"matmul_1d: output_mem_config: expected a ttnn.MemoryConfig"):
        primary.matmul_1d(x, w, output_mem_config=None)
    # the Mixtral decode config keeps one row tile of M on every core: a 64-row prefill does not fit it
    tall = _put(mesh, rng.standard_normal((1, 1, 64, 256)))
    with pytest.raises(ValidationError, match=r"matmul_1d: program_config.per_core_M: expected >= 2"):
        primary.matmul_1d(tall, w, program_config=_ff1_config(None))
    # 43 N tiles in blocks of one need 43 cores, the config has 6 x 7: checked as linear checks it
    with pytest.raises(
        ValidationError, match=r"matmul_1d: program_config: expected at most 42 output blocks"
    ):
        primary.matmul_1d(
            x, _put(mesh, rng.standard_normal((1, 1, 256, 32 * 43))), program_config=_ff1_config(None, 1)
        )


def test_tt_lib_mul(open_mesh, rng):
    mesh = open_mesh((1, 2))
    a = _put(mesh, rng.standard_normal((1, 1, 32, 64)), ttnn.bfloat8_b, ttnn.L1_MEMORY_CONFIG)
    b = _put(mesh, rng.standard_normal((1, 1, 32, 64)), ttnn.bfloat8_b, ttnn.L1_MEMORY_CONFIG)
    out = tt_lib.mul(a, b)
    np.testing.assert_array_equal(ttnn.to_numpy(out), ttnn.to_numpy(ttnn.mul(a, b)))
    assert out.memory_config() == ttnn.DRAM_MEMORY_CONFIG  # that API's default, not the inputs' L1
    assert out.dtype is ttnn.bfloat8_b
    relu = tt_lib.mul(
        a,
        b,
        [tt_lib.FusibleActivationWithParam(tt_lib.FusibleActivation.RELU)],
        ttnn.L1_MEMORY_CONFIG,
        ttnn.bfloat16,
    )
    assert relu.dtype is ttnn.bfloat16 and relu.memory_config() == ttnn.L1_MEMORY_CONFIG
    np.testing.assert_array_equal(
        ttnn.to_numpy(relu),
        ttnn.to_numpy(ttnn.mul(a, b, activations=[ttnn.UnaryOpType.RELU], dtype=ttnn.bfloat16)),
    )
    assert (ttnn.to_numpy(relu) >= 0).all()


def test_tt_lib_mul_refuses_what_tt_lib_refused(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a = _put(mesh, rng.standard_normal((1, 1, 32, 64)))
    row = _put(mesh, rng.standard_normal((1, 1, 1, 64)))
    with pytest.raises(
        ValidationError, match=r"tensor.mul: input_b: expected the shape of input_a, \[1, 1, 32, 64\]"
    ):
        tt_lib.mul(a, row)  # tt_lib's binary ops did not broadcast
    with pytest.raises(ValidationError, match=r"tensor.mul: input_b: expected a ttnn.Tensor .*got float"):
        tt_lib.mul(a, 2.0)
    with pytest.raises(ValidationError, match=r"tensor.mul: output_mem_config: expected a ttnn.MemoryConfig"):
        tt_lib.mul(a, a, output_mem_config="L1")
