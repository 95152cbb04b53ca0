"""ttnn.matmul / ttnn.linear / experimental.minimal_matmul against numpy, program-config validation, numerics.

Tolerances (the reference is float64 on the inputs as stored, i.e. already quantised to their dtypes):

* HiFi4 with fp32_dest_acc_en (exact operands, float32 accumulation): the only error is rounding the output to
  its dtype, so |out − ref| ≤ 2^-8·max|ref| for bfloat16 outputs, ≤ 2^-7·max|ref| for bfloat8_b outputs and
  ≤ 1e-5·max|ref| for float32 outputs; PCC ≥ 0.99999 (≥ 0.9999 for bfloat8_b outputs).
* The default config (LoFi, bfloat16 accumulation, as ttnn's matmul default): operands lose mantissa bits, so
  |out − ref| ≤ 5e-2·max|ref| and PCC ≥ 0.9998.
* Against the unquantised float reference, bfloat8_b weights keep PCC ≥ 0.9999 and bfloat4_b weights ≥ 0.99.
"""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing import pcc
from tttv2.ttnn import ValidationError

EXACT = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)
OUT_REL = {ttnn.bfloat16: 2.0**-8, ttnn.bfloat8_b: 2.0**-7, ttnn.float32: 1e-5, ttnn.bfloat4_b: 2.0**-3}


def _put(mesh, x, dtype=ttnn.bfloat16, **kwargs):
    return ttnn.from_numpy(
        np.asarray(x, np.float32), dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh, **kwargs
    )


def _stored(t, composer=None):
    return ttnn.to_numpy(t, mesh_composer=composer).astype(np.float64)


def _check(out, ref, rel, min_pcc=0.99999):
    out = np.asarray(out, np.float64)
    assert out.shape == ref.shape
    err = np.abs(out - ref).max()
    assert err <= rel * np.abs(ref).max() * 1.01 + 1e-6, f"max error {err} > {rel} x {np.abs(ref).max()}"
    assert pcc(ref, out) >= min_pcc


def _data(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize(
    ("a_dtype", "b_dtype"),
    [
        (ttnn.bfloat16, ttnn.bfloat16),
        (ttnn.bfloat16, ttnn.bfloat8_b),
        (ttnn.bfloat16, ttnn.bfloat4_b),
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        (ttnn.float32, ttnn.float32),
    ],
)
def test_linear_per_dtype(open_mesh, rng, a_dtype, b_dtype):
    mesh = open_mesh((1, 1))
    x, w = _data(rng, 1, 1, 64, 256), _data(rng, 256, 128, scale=1 / 16)
    a, b = _put(mesh, x, a_dtype), _put(mesh, w, b_dtype)
    out = ttnn.linear(a, b, compute_kernel_config=EXACT)
    assert out.dtype is a_dtype and out.layout is ttnn.TILE_LAYOUT and out.shape == (1, 1, 64, 128)
    ref = _stored(a) @ _stored(b)
    _check(
        ttnn.to_numpy(out), ref, OUT_REL[a_dtype], min_pcc=0.9999 if a_dtype is ttnn.bfloat8_b else 0.99999
    )
    # the default compute config (LoFi, bf16 accumulation) is less precise but close
    _check(ttnn.to_numpy(ttnn.linear(a, b)), ref, 5e-2, min_pcc=0.9998)
    # against the float reference, the weight dtype sets the accuracy
    float_pcc = pcc(x.astype(np.float64) @ w, ttnn.to_numpy(out))
    assert float_pcc >= {ttnn.bfloat4_b: 0.99}.get(b_dtype, 0.9999)


def test_linear_bias_forms(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x, w = _data(rng, 1, 1, 32, 64), _data(rng, 64, 96)
    a, b = _put(mesh, x, ttnn.float32), _put(mesh, w, ttnn.float32)
    base = _stored(a) @ _stored(b)
    for bias_shape in [(1, 1, 1, 96), (96,), (1, 96)]:
        bias = _put(mesh, _data(rng, *bias_shape), ttnn.float32)
        out = ttnn.linear(a, b, bias=bias, compute_kernel_config=EXACT)
        _check(ttnn.to_numpy(out), base + _stored(bias).reshape(1, 96), 1e-5)
    full = _put(mesh, _data(rng, 1, 1, 32, 96), ttnn.float32)  # one bias row per output row
    _check(
        ttnn.to_numpy(ttnn.linear(a, b, bias=full, compute_kernel_config=EXACT)), base + _stored(full), 1e-5
    )


def test_transposes_and_batching(open_mesh, rng):
    mesh = open_mesh((1, 1))
    xa = _data(rng, 2, 3, 64, 32)
    xb = _data(rng, 2, 3, 96, 64)
    a, b = _put(mesh, xa, ttnn.float32), _put(mesh, xb, ttnn.float32)
    sa, sb = _stored(a), _stored(b)
    out = ttnn.matmul(a, b, transpose_a=True, transpose_b=True, compute_kernel_config=EXACT)
    assert out.shape == (2, 3, 32, 96)
    _check(ttnn.to_numpy(out), np.swapaxes(sa, -1, -2) @ np.swapaxes(sb, -1, -2), 1e-5)
    # weights broadcast over the batch
    w = _put(mesh, _data(rng, 64, 48), ttnn.float32)
    _check(ttnn.to_numpy(ttnn.matmul(b, w, compute_kernel_config=EXACT)), sb @ _stored(w), 1e-5)
    w4 = _put(mesh, _data(rng, 1, 3, 64, 48), ttnn.float32)
    _check(ttnn.to_numpy(ttnn.matmul(b, w4, compute_kernel_config=EXACT)), sb @ _stored(w4), 1e-5)
    # shapes that are not whole tiles
    c, d = _put(mesh, _data(rng, 20, 40), ttnn.float32), _put(mesh, _data(rng, 40, 50), ttnn.float32)
    odd = ttnn.matmul(c, d, compute_kernel_config=EXACT)
    assert odd.shape == (20, 50) and odd.padded_shape == (32, 64)
    _check(ttnn.to_numpy(odd), _stored(c) @ _stored(d), 1e-5)


def test_output_arguments(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a, b = (
        _put(mesh, _data(rng, 1, 1, 32, 256)),
        _put(mesh, _data(rng, 256, 256, scale=1 / 16), ttnn.bfloat8_b),
    )
    ref = _stored(a) @ _stored(b)
    out = ttnn.linear(
        a, b, dtype=ttnn.bfloat8_b, memory_config=ttnn.L1_MEMORY_CONFIG, compute_kernel_config=EXACT
    )
    assert out.dtype is ttnn.bfloat8_b and out.memory_config() == ttnn.L1_MEMORY_CONFIG
    _check(ttnn.to_numpy(out), ref, 2.0**-7, min_pcc=0.9999)
    assert ttnn.linear(a, b).memory_config() == ttnn.DRAM_MEMORY_CONFIG  # ttnn's default output placement
    sharded = ttnn.linear(
        a, b, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG, core_grid=ttnn.CoreGrid(x=8, y=1)
    )
    assert sharded.is_sharded() and sharded.shard_spec().grid.num_cores() == 8
    f32 = ttnn.linear(a, b, dtype=ttnn.float32, compute_kernel_config=EXACT)
    assert f32.dtype is ttnn.float32
    _check(ttnn.to_numpy(f32), ref, 1e-5)
    tensor_grid = ttnn.linear(a, b, core_grid=ttnn.CoreGrid(x=8, y=8).to_core_range_set())
    assert tensor_grid.shape == (1, 1, 32, 256)


# --- program configs ---------------------------------------------------------------------------------------


def _mcast(grid=(8, 2), in0_block_w=2, sub_h=1, sub_w=2, m=1, n=2, **kw):
    return ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=grid,
        in0_block_w=in0_block_w,
        out_subblock_h=sub_h,
        out_subblock_w=sub_w,
        per_core_M=m,
        per_core_N=n,
        **kw,
    )


def _mcast1d(grid=(8, 2), in0_block_w=2, m=2, n=1, **kw):
    return ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=grid,
        in0_block_w=in0_block_w,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=m,
        per_core_N=n,
        **kw,
    )


@pytest.fixture
def problem(open_mesh, rng):
    """M = 64 (2 tiles), K = 256 (8 tiles), N = 512 (16 tiles)."""
    mesh = open_mesh((1, 1))
    a = _put(mesh, _data(rng, 1, 1, 64, 256))
    b = _put(mesh, _data(rng, 256, 512, scale=1 / 16), ttnn.bfloat8_b)
    return mesh, a, b, _stored(a) @ _stored(b)


def test_valid_program_configs(problem):
    _, a, b, ref = problem
    configs = [
        _mcast(),  # 8 x 2 cores of 1 x 2 tiles cover 2 x 16 tiles
        _mcast(grid=(2, 8), transpose_mcast=True),
        _mcast(grid=(8, 8), in0_block_w=8, m=2, n=2, sub_h=2, sub_w=2),
        _mcast1d(),  # mcast_in0: all of M on each core, 16 blocks of 2 x 1 tiles
        _mcast1d(grid=(8, 1), m=1, n=16, in0_block_w=4, mcast_in0=False),
        ttnn.MatmulMultiCoreReuseProgramConfig((8, 8), 1, 1, 2, 1, 2),
    ]
    for cfg in configs:
        out = ttnn.linear(a, b, program_config=cfg, compute_kernel_config=EXACT)
        _check(ttnn.to_numpy(out), ref, 2.0**-8)
    # an L1 sharded output takes its grid from the program config
    out = ttnn.linear(a, b, program_config=_mcast1d(), memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert out.shard_spec().grid.num_cores() == 16 and out.shard_spec().shape == (64, 32)
    out2d = ttnn.linear(a, b, program_config=_mcast(), memory_config=ttnn.L1_BLOCK_SHARDED_MEMORY_CONFIG)
    assert out2d.shard_spec().shape == (32, 64)


def test_dram_sharded_matmul(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x, w = _data(rng, 1, 1, 32, 256), _data(rng, 256, 512, scale=1 / 16)
    act_cfg = ttnn.create_sharded_memory_config(
        (1, 1, 32, 256), ttnn.CoreGrid(x=8, y=1), ttnn.ShardStrategy.WIDTH
    )
    a = _put(mesh, x, memory_config=act_cfg)
    b = _put(mesh, w, ttnn.bfloat8_b)
    cfg = ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(
        in0_block_w=1, per_core_M=1, per_core_N=2
    )
    out = ttnn.linear(
        a,
        b,
        program_config=cfg,
        memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
        compute_kernel_config=EXACT,
    )
    _check(ttnn.to_numpy(out), _stored(a) @ _stored(b), 2.0**-8)
    assert (
        out.is_sharded()
        and out.shard_spec().grid == act_cfg.shard_spec.grid
        and out.shard_spec().shape == (32, 64)
    )
    batched = _put(
        mesh,
        _data(rng, 1, 3, 32, 256),
        memory_config=ttnn.create_sharded_memory_config(
            (1, 3, 32, 256), ttnn.CoreGrid(x=8, y=1), ttnn.ShardStrategy.WIDTH
        ),
    )
    with pytest.raises(
        ValidationError, match=r"program_config\.per_core_M: expected >= 3 \(M in tiles\), got 1"
    ):
        ttnn.linear(batched, b, program_config=cfg)
    with pytest.raises(
        ValidationError, match=r"program_config\.per_core_N: expected per_core_N × 8 cores >= 16"
    ):
        ttnn.linear(a, b, program_config=ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(1, 1, 1))
    with pytest.raises(
        ValidationError,
        match=r"program_config\.in0_block_w: expected a divisor of the 1 K tiles each core holds, got 2",
    ):
        ttnn.linear(a, b, program_config=ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(2, 1, 2))
    interleaved = _put(mesh, x)
    with pytest.raises(
        ValidationError,
        match=r"ttnn\.linear: input_tensor_a\.memory_config: expected an L1 WIDTH_SHARDED activation",
    ):
        ttnn.linear(interleaved, b, program_config=cfg)


def test_invalid_program_configs_name_the_field(problem):
    mesh, a, b, _ = problem
    cases = [
        (
            _mcast(grid=(8, 1)),
            r"ttnn\.linear: program_config: expected a 8x1 grid of 1x2-tile blocks covering the 2x16-tile output, got 8x2 blocks needed",
        ),
        (_mcast(grid=(4, 2)), r"program_config: expected a 4x2 grid .* got 8x2 blocks needed"),
        (
            _mcast(in0_block_w=3),
            r"program_config\.in0_block_w: expected a divisor of K in tiles \(8\), got 3",
        ),
        (
            _mcast(grid=(9, 2)),
            r"program_config\.compute_with_storage_grid_size: expected a grid within the device's 8x8 cores, got 9x2",
        ),
        (_mcast(grid=(8, 9)), r"compute_with_storage_grid_size: .* got 8x9"),
        (_mcast1d(m=1), r"program_config\.per_core_M: expected >= 2 \(M in tiles; mcast_in0"),
        (
            _mcast1d(m=2, n=2, mcast_in0=False),
            r"program_config\.per_core_N: expected >= 16 \(N in tiles; mcast_in1",
        ),
        (
            _mcast1d(grid=(4, 2), m=2, n=1),
            r"program_config: expected at most 8 output blocks of 2x1 tiles for a 2x16-tile output, got 16 blocks",
        ),
    ]
    for cfg, message in cases:
        with pytest.raises(ValidationError, match=message):
            ttnn.linear(a, b, program_config=cfg)
    with pytest.raises(
        ValidationError, match=r"program_config: expected a matmul program config, got SDPAProgramConfig"
    ):
        ttnn.matmul(a, b, program_config=ttnn.SDPAProgramConfig((8, 8)))
    bh = _put(
        mesh.__class__((1, 1), arch=ttnn.Arch.BLACKHOLE), _data(np.random.default_rng(0), 1, 1, 64, 256)
    )
    bw = _put(bh.device(), _data(np.random.default_rng(1), 256, 512))
    # Blackhole's 13x10 grid takes what Wormhole's 8x8 does not
    assert ttnn.linear(bh, bw, program_config=_mcast(grid=(9, 2))).shape == (1, 1, 64, 512)


def test_fuse_batch(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a = _put(mesh, _data(rng, 1, 4, 32, 64))
    b = _put(mesh, _data(rng, 64, 64))
    # fused batch: M is 4 x 1 tiles
    with pytest.raises(ValidationError, match=r"per_core_M: expected >= 4"):
        ttnn.linear(a, b, program_config=_mcast1d(grid=(2, 1), m=1, n=1, in0_block_w=1))
    ok = ttnn.linear(a, b, program_config=_mcast1d(grid=(2, 1), m=1, n=1, in0_block_w=1, fuse_batch=False))
    assert ok.shape == (1, 4, 32, 64)


# --- activations and numerics -----------------------------------------------------------------------------------


def test_fused_activation(problem):
    _, a, b, ref = problem
    silu = ref / (1 + np.exp(-ref))
    via_config = ttnn.linear(
        a, b, program_config=_mcast(fused_activation=ttnn.UnaryOpType.SILU), compute_kernel_config=EXACT
    )
    _check(ttnn.to_numpy(via_config), silu, 2.0**-8)
    via_kwarg = ttnn.linear(a, b, activation="silu", compute_kernel_config=EXACT)
    np.testing.assert_array_equal(ttnn.to_numpy(via_kwarg), ttnn.to_numpy(via_config))
    relu = ttnn.linear(
        a, b, activation=ttnn.UnaryWithParam(ttnn.UnaryOpType.RELU), compute_kernel_config=EXACT
    )
    _check(ttnn.to_numpy(relu), np.maximum(ref, 0), 2.0**-8)
    gelu = ttnn.matmul(
        a,
        b,
        program_config=_mcast(fused_activation=(ttnn.UnaryOpType.GELU, 1.0)),
        compute_kernel_config=EXACT,
    )
    assert (
        pcc(ref * 0.5 * (1 + np.tanh(0.7978845608 * (ref + 0.044715 * ref**3))), ttnn.to_numpy(gelu))
        > 0.99999
    )
    with pytest.raises(
        ValidationError, match=r"either activation= or program_config.fused_activation, not both"
    ):
        ttnn.linear(a, b, activation="relu", program_config=_mcast(fused_activation=ttnn.UnaryOpType.SILU))
    with pytest.raises(ValidationError, match=r"ttnn\.linear: activation: expected one of silu, gelu, relu"):
        ttnn.linear(a, b, activation="swish")
    with pytest.raises(ValidationError, match=r"ttnn\.linear: activation: expected a ttnn\.UnaryOpType"):
        ttnn.linear(a, b, activation=3)


def test_fidelity_changes_numerics(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a, b = _put(mesh, _data(rng, 1, 1, 64, 512)), _put(mesh, _data(rng, 512, 128, scale=1 / 16))
    ref = _stored(a) @ _stored(b)

    def err(fidelity, acc=True):
        cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=fidelity, fp32_dest_acc_en=acc)
        out = ttnn.linear(a, b, compute_kernel_config=cfg, dtype=ttnn.float32)
        return np.abs(ttnn.to_numpy(out) - ref).max()

    lofi, hifi2, hifi3, hifi4 = (err(f) for f in ttnn.MathFidelity)
    assert lofi > hifi2 > hifi4 and hifi3 >= hifi4
    assert hifi4 <= 1e-5 * np.abs(ref).max()  # HiFi4 + fp32 accumulation: the plain float32 product
    assert err(ttnn.MathFidelity.HiFi4, acc=False) > hifi4  # bf16 accumulation between K blocks
    default = ttnn.to_numpy(ttnn.linear(a, b, dtype=ttnn.float32))
    lofi_bf16 = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.LoFi, math_approx_mode=True)
    np.testing.assert_array_equal(
        default, ttnn.to_numpy(ttnn.linear(a, b, dtype=ttnn.float32, compute_kernel_config=lofi_bf16))
    )
    with pytest.raises(
        ValidationError, match=r"compute_kernel_config: expected a ttnn\.WormholeComputeKernelConfig"
    ):
        ttnn.linear(a, b, compute_kernel_config={"math_fidelity": "HiFi4"})
    init = ttnn.init_device_compute_kernel_config(
        mesh.arch(), math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True
    )
    assert (
        np.abs(ttnn.to_numpy(ttnn.linear(a, b, compute_kernel_config=init, dtype=ttnn.float32)) - ref).max()
        == hifi4
    )


def test_hifi4_fp32_equals_float32_product(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a, b = _put(mesh, _data(rng, 2, 1, 32, 128), ttnn.float32), _put(mesh, _data(rng, 128, 64), ttnn.float32)
    out = ttnn.to_numpy(ttnn.matmul(a, b, compute_kernel_config=EXACT))
    np.testing.assert_allclose(out, np.matmul(ttnn.to_numpy(a), ttnn.to_numpy(b)), rtol=1e-6, atol=1e-6)


def test_bfloat16_accumulation_between_k_blocks(open_mesh):
    """K = 64 (two tiles): 256 + 1 = 257 is a bfloat16 tie that rounds to 256 after every K block of one tile."""
    mesh = open_mesh((1, 1))
    a = _put(mesh, np.ones((32, 64)), ttnn.float32)
    w = np.zeros((64, 32), np.float32)
    w[0, 0], w[1, 0], w[32, 0] = 256.0, 1.0, 1.0
    b = _put(mesh, w, ttnn.float32)
    hifi4_bf16 = ttnn.WormholeComputeKernelConfig(
        math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=False
    )

    def run(in0_block_w, cfg):
        pc = _mcast(grid=(1, 1), in0_block_w=in0_block_w, sub_w=1, m=1, n=1)
        return ttnn.to_numpy(ttnn.matmul(a, b, program_config=pc, compute_kernel_config=cfg))[0, 0]

    assert run(1, EXACT) == 258.0
    assert run(2, hifi4_bf16) == 258.0  # one K block: no intermediate rounding
    assert run(1, hifi4_bf16) == 256.0  # two K blocks: 257 → 256, then 257 → 256


# --- minimal_matmul ------------------------------------------------------------------------------------------


def test_minimal_matmul(problem, rng):
    mesh, a, b, ref = problem
    out = ttnn.experimental.minimal_matmul(
        a, b, config=ttnn.MinimalMatmulConfig(K_block_size=4), compute_kernel_config=EXACT
    )
    _check(ttnn.to_numpy(out), ref, 2.0**-8)
    bias = _put(mesh, _data(rng, 1, 1, 1, 512))
    with_bias = ttnn.experimental.minimal_matmul(
        input_tensor=a, weight_tensor=b, bias_tensor=bias, compute_kernel_config=EXACT, dtype=ttnn.float32
    )
    assert with_bias.dtype is ttnn.float32
    _check(ttnn.to_numpy(with_bias), ref + _stored(bias).reshape(1, 512), 1e-5)
    assert ttnn.experimental.minimal_matmul(a, b, config=ttnn.MinimalMatmulConfig(K_block_size=16)).shape == (
        1,
        1,
        64,
        512,
    )
    with pytest.raises(
        ValidationError, match=r"config\.K_block_size: expected a divisor of K in tiles \(8\), got 3"
    ):
        ttnn.experimental.minimal_matmul(a, b, config=ttnn.MinimalMatmulConfig(K_block_size=3))
    with pytest.raises(ValidationError, match=r"config: expected a ttnn\.MinimalMatmulConfig"):
        ttnn.experimental.minimal_matmul(a, b, config=_mcast())


# --- multi-device topology --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 8), (8, 4)])
def test_weight_sharded_on_n(open_mesh, rng, mesh_shape):
    mesh = open_mesh(mesh_shape)
    rows, cols = mesh_shape
    x, w = _data(rng, 1, 1, 32, 128), _data(rng, 128, 32 * cols * 2, scale=1 / 8)
    a = _put(mesh, x)
    if rows == 1:
        b = _put(mesh, w, ttnn.bfloat8_b, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1))
        bias = _put(mesh, _data(rng, 1, 1, 1, w.shape[1]), mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1))
        composer = ttnn.ConcatMeshToTensor(mesh, dim=-1)
        full_w = _stored(b, composer)
    else:
        mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=mesh_shape)
        b = _put(mesh, w.reshape(1, 1, *w.shape), ttnn.bfloat8_b, mesh_mapper=mapper)
        bias = _put(mesh, _data(rng, 1, 1, 1, w.shape[1]), mesh_mapper=mapper)
        composer = ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 3), mesh_shape=mesh_shape)
        full_w = _stored(b, composer)[:1]
    out = ttnn.linear(a, b, bias=bias, compute_kernel_config=EXACT)
    assert out.shape == (1, 1, 32, 64)  # each device holds its 64 columns of the output
    assert isinstance(out.tensor_topology().placements()[-1], ttnn.PlacementShard)
    result = _stored(out, composer)
    ref = _stored(a) @ full_w + _stored(bias, composer)[:1]
    for copy in result:  # 2-D mesh: every mesh row holds the same full result
        _check(copy[None], ref.reshape(1, 1, 32, -1), 2.0**-8)
    with pytest.raises(ValidationError, match=r"pass mesh_composer="):
        ttnn.to_numpy(out)


def test_weight_sharded_on_k_keeps_activation_topology(open_mesh, rng):
    mesh = open_mesh((1, 8))
    x, w = _data(rng, 1, 1, 32, 256), _data(rng, 256, 64)
    a = _put(mesh, x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    b = _put(mesh, w, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    out = ttnn.linear(a, b, compute_kernel_config=EXACT)  # each device: a partial sum over its K slice
    assert out.tensor_topology() == a.tensor_topology()
    partial = np.stack([ttnn.to_numpy(p) for p in ttnn.get_device_tensors(out)]).astype(np.float64)
    _check(
        partial.sum(0),
        _stored(a, ttnn.ConcatMeshToTensor(mesh, 3)) @ _stored(b, ttnn.ConcatMeshToTensor(mesh, 0)),
        2.0**-6,
    )
    replicated = _put(mesh, x[..., :32])
    k_sharded = _put(mesh, w[:32], mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))  # [4, 64] per device
    assert ttnn.linear(replicated[..., :4], k_sharded).tensor_topology() == replicated.tensor_topology()


# --- errors --------------------------------------------------------------------------------------------------


def test_errors(open_mesh, rng):
    mesh = open_mesh((1, 2))
    a, b = _put(mesh, _data(rng, 1, 1, 32, 64)), _put(mesh, _data(rng, 64, 32))
    rm = ttnn.from_numpy(_data(rng, 32, 64), dtype=ttnn.bfloat16, device=mesh)
    with pytest.raises(
        ValidationError, match=r"ttnn\.matmul: input_tensor_a\.layout: expected one of TILE, got ROW_MAJOR"
    ):
        ttnn.matmul(rm, b)
    ints = ttnn.from_numpy(np.zeros((32, 64), np.int32), layout=ttnn.TILE_LAYOUT, device=mesh)
    with pytest.raises(
        ValidationError,
        match=r"ttnn\.linear: input_tensor_a\.dtype: expected one of BFLOAT16, FLOAT32, BFLOAT8_B, BFLOAT4_B, got INT32",
    ):
        ttnn.linear(ints, b)
    with pytest.raises(ValidationError, match=r"input_tensor_b rank: expected >= 2, got 1"):
        ttnn.matmul(a, _put(mesh, _data(rng, 64)))
    with pytest.raises(ValidationError, match=r"input_tensor_a rank: expected >= 2, got 1"):
        ttnn.matmul(_put(mesh, _data(rng, 64)), b)
    with pytest.raises(
        ValidationError,
        match=r"ttnn\.matmul: input_tensor_b: expected inner dim 64 \(input_tensor_a is \[1, 1, 32, 64\]\), got \[32, 64\]",
    ):
        ttnn.matmul(a, _put(mesh, _data(rng, 32, 64)))
    with pytest.raises(
        ValidationError,
        match=r"input_tensor_b: expected batch dims broadcastable with \[2, 1\], got \[3, 1\]",
    ):
        ttnn.matmul(_put(mesh, _data(rng, 2, 1, 32, 64)), _put(mesh, _data(rng, 3, 1, 64, 32)))
    with pytest.raises(
        ValidationError, match=r"ttnn\.linear: input_tensor_b: expected a tensor on the same device"
    ):
        ttnn.linear(a, _put(open_mesh((1, 2)), _data(rng, 64, 32)))
    with pytest.raises(
        ValidationError,
        match=r"input_tensor_a: expected a tensor on device \(use ttnn\.to_device\), got a host tensor",
    ):
        ttnn.linear(ttnn.from_numpy(_data(rng, 32, 64), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT), b)
    with pytest.raises(
        ValidationError, match=r"ttnn\.linear: bias: expected last dim 32, got \[1, 1, 1, 64\]"
    ):
        ttnn.linear(a, b, bias=_put(mesh, _data(rng, 1, 1, 1, 64)))
    with pytest.raises(ValidationError, match=r"bias: expected leading dims of 1"):
        ttnn.linear(a, b, bias=_put(mesh, _data(rng, 2, 1, 1, 32)))
    with pytest.raises(ValidationError, match=r"core_grid: expected a grid within 8x8, got 9x1"):
        ttnn.linear(a, b, core_grid=ttnn.CoreGrid(x=9, y=1))
    with pytest.raises(ValidationError, match=r"core_grid: expected a ttnn\.CoreGrid, got \(8, 8\)"):
        ttnn.linear(a, b, core_grid=(8, 8))
    with pytest.raises(
        ValidationError, match=r"ttnn\.linear: memory_config: expected a ttnn\.MemoryConfig, got 'L1'"
    ):
        ttnn.linear(a, b, memory_config="L1")
    with pytest.raises(ValidationError, match=r"ttnn\.linear: dtype: expected a ttnn\.DataType"):
        ttnn.linear(a, b, dtype="bf16")
    with pytest.raises(
        ValidationError, match=r"ttnn\.matmul: input_tensor_b: expected a ttnn\.Tensor, got ndarray"
    ):
        ttnn.matmul(a, np.zeros((64, 32)))


def test_optional_output_tensor_receives_the_product_in_place(open_mesh, rng):
    """ttnn writes a matmul's result into optional_output_tensor and returns it (it was ignored: the caller's
    tensor kept its old values); a tensor of another shape or dtype is a one-line error naming the argument."""
    mesh = open_mesh((1, 2))
    x, w = _put(mesh, _data(rng, 1, 1, 32, 64)), _put(mesh, _data(rng, 1, 1, 64, 96))
    for op, name in ((ttnn.matmul, "ttnn.matmul"), (ttnn.linear, "ttnn.linear")):
        out = _put(mesh, np.zeros((1, 1, 32, 96)))
        got = op(x, w, optional_output_tensor=out)
        assert got is out
        np.testing.assert_array_equal(_stored(out), _stored(op(x, w)))
        for bad, pattern in (
            (5, r"optional_output_tensor: expected a ttnn.Tensor, got int"),
            (
                _put(mesh, np.zeros((1, 1, 32, 64))),
                r"optional_output_tensor: expected shape \[1, 1, 32, 96\]",
            ),
        ):
            with pytest.raises(ValidationError, match=rf"{name}: {pattern}"):
                op(x, w, optional_output_tensor=bad)


def test_tt_lib_era_primary_matmul(problem):
    """``ttnn.experimental.operations.primary.matmul`` (tt_lib's matmul, which the Llama-2-70B T3000 MLP calls in
    prefill): linear's product under that era's keywords, DRAM interleaved by default, ``output_dtype``, the
    program config checked as linear checks it, ``untilize_out`` giving a ROW_MAJOR result."""
    _, a, b, ref = problem
    primary = ttnn.experimental.operations.primary
    out = primary.matmul(
        a, b, program_config=_mcast(), compute_kernel_config=EXACT, output_dtype=ttnn.bfloat8_b
    )
    assert out.dtype == ttnn.bfloat8_b and out.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    same = ttnn.linear(a, b, program_config=_mcast(), compute_kernel_config=EXACT, dtype=ttnn.bfloat8_b)
    assert np.array_equal(ttnn.to_numpy(out), ttnn.to_numpy(same))
    _check(ttnn.to_numpy(out), ref, 2.0**-7, min_pcc=0.9999)  # a bfloat8_b output
    flat = primary.matmul(a, b, output_mem_config=ttnn.L1_MEMORY_CONFIG, untilize_out=True)
    assert flat.layout == ttnn.ROW_MAJOR_LAYOUT and flat.memory_config() == ttnn.L1_MEMORY_CONFIG
    assert np.array_equal(
        ttnn.to_numpy(flat), ttnn.to_numpy(ttnn.matmul(a, b, memory_config=ttnn.L1_MEMORY_CONFIG))
    )
    with pytest.raises(ValidationError, match=r"primary.matmul.*output_mem_config"):
        primary.matmul(a, b, output_mem_config="dram")
    with pytest.raises(ValidationError, match=r"primary.matmul.*untilize_out"):
        primary.matmul(a, b, untilize_out=1)
    with pytest.raises(ValidationError, match=r"primary.matmul.*in0_block_w"):
        primary.matmul(a, b, program_config=_mcast(in0_block_w=3))


def test_reuse_config_deals_batched_blocks_one_per_core(open_mesh, rng):
    """``MatmulMultiCoreReuseProgramConfig`` (the batched matmul without multicast) deals its
    (B × Mt / per_core_M) × (Nt / per_core_N) output blocks to the grid's cores one each, as tt-metal's bmm does:
    4 batches of one 1x2-tile block fit a 2x2 grid (the Llama-2-70B T3000 attention rotates 32 users' heads on an
    8x4 grid so), a sharded output gets that many cores, and a grid of fewer cores than blocks is refused."""
    mesh = open_mesh((1, 1))
    a = _put(mesh, _data(rng, 1, 4, 32, 64))
    b = _put(mesh, _data(rng, 1, 4, 64, 64, scale=1 / 8))
    cfg = ttnn.MatmulMultiCoreReuseProgramConfig((2, 2), 2, 1, 2, 1, 2)
    out = ttnn.matmul(a, b, program_config=cfg, compute_kernel_config=EXACT)
    plain = ttnn.matmul(a, b, compute_kernel_config=EXACT)
    assert np.array_equal(ttnn.to_numpy(out), ttnn.to_numpy(plain))
    sharded = ttnn.matmul(a, b, program_config=cfg, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert sharded.shard_spec().grid.num_cores() == 4 and sharded.shard_spec().shape == (32, 64)
    with pytest.raises(ValidationError, match=r"at most 2 output blocks of 1x2 tiles for a 4x2-tile output"):
        ttnn.matmul(a, b, program_config=ttnn.MatmulMultiCoreReuseProgramConfig((2, 1), 2, 1, 2, 1, 2))


def test_1d_program_config_decides_the_sharded_output_spec(open_mesh, rng):
    """Falcon-40B's decode QKV: the output config gives 8 shards of (32, 144), not whole tiles; ttnn's matmul
    replaces the spec by its program config's blocks (per_core_N = 5 tiles on the first 8 cores, row by row), as
    it does in every era (today with a "Using computed config" warning). The values are those of the interleaved
    product."""
    mesh = open_mesh((1, 1))
    a = rng.standard_normal((1, 1, 32, 1024)).astype(np.float32)
    w = rng.standard_normal((1, 1, 1024, 1152)).astype(np.float32) / 32
    eight = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 0))])
    in_mc = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(eight, (32, 128))
    )
    out_mc = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(eight, (32, 144))
    )
    pc = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 1),
        in0_block_w=4,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=5,
        fuse_batch=True,
        fused_activation=None,
        mcast_in0=True,
    )
    ta, tw = _put(mesh, a, memory_config=in_mc), _put(mesh, w, dtype=ttnn.bfloat8_b)
    out = ttnn.matmul(ta, tw, program_config=pc, memory_config=out_mc, compute_kernel_config=EXACT)
    spec = out.memory_config().shard_spec
    assert spec.grid == eight and tuple(spec.shape) == (32, 160)
    assert spec.orientation is ttnn.ShardOrientation.ROW_MAJOR
    assert out.memory_config().memory_layout is ttnn.TensorMemoryLayout.WIDTH_SHARDED
    plain = ttnn.matmul(ttnn.to_memory_config(ta, ttnn.DRAM_MEMORY_CONFIG), tw, compute_kernel_config=EXACT)
    assert np.array_equal(_stored(out), _stored(plain))


def _cores(x0, y0, x1, y1):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x0, y0), ttnn.CoreCoord(x1, y1))])


@pytest.mark.parametrize(
    ("transpose_mcast", "grid", "cores", "orientation"),
    [
        (False, (8, 4), _cores(0, 0, 3, 1), ttnn.ShardOrientation.ROW_MAJOR),
        (True, (2, 4), _cores(0, 0, 1, 3), ttnn.ShardOrientation.COL_MAJOR),
    ],
)
def test_2d_program_config_decides_the_sharded_output_spec(
    open_mesh, rng, transpose_mcast, grid, cores, orientation
):
    """A prefill matmul in Falcon-40B's style (``matmul_2d_config``, a block-sharded output): the caller's spec
    (one tile per core of the full 8x4 grid) differs from the program config's blocks, and ttnn's matmul replaces
    it ("Using computed config"): 2 batches of 64 rows fused are 4 M tiles, 2 blocks of per_core_M = 2 tiles, and 8
    N tiles are 4 blocks of per_core_N = 2, on the 4x2 rectangle of cores from (0, 0) (2x4, COL_MAJOR, with
    ``transpose_mcast``), even though the config's ``fuse_batch`` is False. The values are those of the
    interleaved product."""
    mesh = open_mesh((1, 1))
    a = _put(mesh, _data(rng, 1, 2, 64, 256))
    w = _put(mesh, _data(rng, 1, 1, 256, 256, scale=1 / 16), dtype=ttnn.bfloat8_b)
    given = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(_cores(0, 0, 7, 3), (32, 32)),
    )
    pc = ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=grid,
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=2,
        per_core_M=2,
        per_core_N=2,
        transpose_mcast=transpose_mcast,
        fused_activation=None,
        fuse_batch=False,
    )
    out = ttnn.matmul(a, w, program_config=pc, memory_config=given, compute_kernel_config=EXACT)
    mc = out.memory_config()
    assert mc.memory_layout is ttnn.TensorMemoryLayout.BLOCK_SHARDED and mc.buffer_type is ttnn.BufferType.L1
    assert mc.shard_spec == ttnn.ShardSpec(cores, (64, 64), orientation)
    plain = ttnn.matmul(a, w, compute_kernel_config=EXACT)
    assert np.array_equal(_stored(out), _stored(plain))
    with pytest.raises(ValidationError, match=r"memory_config.*BLOCK_SHARDED.*2D multicast.*HEIGHT_SHARDED"):
        ttnn.matmul(a, w, program_config=pc, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)


def test_reuse_program_config_decides_the_sharded_output_spec(open_mesh, rng):
    """The Llama-2-70B T3000 rotation in small (``MatmulMultiCoreReuseProgramConfig``, one user's 1x2-tile block
    per core, a height-sharded output): ttnn's matmul replaces the caller's spec by its blocks' (32, 64) shards on
    the first 4 cores of the config's 4x2 grid, in the orientation of the sharded input: a's ROW_MAJOR (row by
    row), else b's, else COL_MAJOR (column by column) when neither is sharded. The values are those of the
    interleaved product."""
    mesh = open_mesh((1, 1))
    x, r = _data(rng, 1, 4, 32, 64), _data(rng, 1, 4, 64, 64, scale=1 / 8)
    users = _cores(0, 0, 3, 0)

    def height(grid, shape, orientation=ttnn.ShardOrientation.ROW_MAJOR):
        return ttnn.MemoryConfig(
            ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
            ttnn.BufferType.L1,
            ttnn.ShardSpec(grid, shape, orientation),
        )

    given = height(_cores(0, 0, 0, 7), (16, 64))  # a spec of the caller's that the config's blocks replace
    pc = ttnn.MatmulMultiCoreReuseProgramConfig((4, 2), 2, 1, 2, 1, 2)
    plain = _stored(ttnn.matmul(_put(mesh, x), _put(mesh, r), compute_kernel_config=EXACT))
    cases = [
        (height(users, (32, 64)), None, ttnn.ShardSpec(users, (32, 64), ttnn.ShardOrientation.ROW_MAJOR)),
        (None, height(users, (64, 64)), ttnn.ShardSpec(users, (32, 64), ttnn.ShardOrientation.ROW_MAJOR)),
        (None, None, ttnn.ShardSpec(_cores(0, 0, 1, 1), (32, 64), ttnn.ShardOrientation.COL_MAJOR)),
    ]
    for a_mc, b_mc, spec in cases:
        a = _put(mesh, x, **({"memory_config": a_mc} if a_mc else {}))
        b = _put(mesh, r, **({"memory_config": b_mc} if b_mc else {}))
        out = ttnn.matmul(a, b, program_config=pc, memory_config=given, compute_kernel_config=EXACT)
        assert out.memory_config() == ttnn.MemoryConfig(
            ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec
        )
        assert np.array_equal(_stored(out), plain)
    with pytest.raises(ValidationError, match=r"memory_config.*not WIDTH_SHARDED.*reuse.*WIDTH_SHARDED"):
        ttnn.matmul(a, b, program_config=pc, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
