"""rms_norm / layer_norm (plain, sharded, distributed pre/post all-gather) and softmax against numpy/torch.

Tolerances: the op reads the stored (already quantised) input, computes in float32 and rounds the output
to the output dtype, so against a float64 reference on the *stored* values the max error is bounded by the
output rounding: float32 ≤ 1e-5·max|y|, bfloat16 ≤ 2⁻⁸·max|y|, bfloat8_b ≤ 2⁻⁶·max|y| (one step of the
block grid plus margin). Against the reference on the original float input we require PCC ≥ 0.9999
(float32, bfloat16) and ≥ 0.999 (bfloat8_b, whose input rounding dominates).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.ttnn import ValidationError

DTYPES = [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b]
REL_TOL = {ttnn.float32: 1e-5, ttnn.bfloat16: 2.0**-8, ttnn.bfloat8_b: 2.0**-6}
PCC_MIN = {ttnn.float32: 0.9999, ttnn.bfloat16: 0.9999, ttnn.bfloat8_b: 0.999}


def _dev(mesh, array, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, **kw):
    return ttnn.from_numpy(np.asarray(array, dtype=np.float32), dtype=dtype, layout=layout, device=mesh, **kw)


def _host(t):
    return ttnn.to_numpy(ttnn.get_device_tensors(t)[0]).astype(np.float64)


def _rms_ref(x, w=None, b=None, eps=1e-5):
    x = np.asarray(x, dtype=np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def _ln_ref(x, w=None, b=None, eps=1e-5):
    t = torch.nn.functional.layer_norm(
        torch.tensor(np.asarray(x, np.float64)),
        (x.shape[-1],),
        None if w is None else torch.tensor(np.asarray(w, np.float64)),
        None if b is None else torch.tensor(np.asarray(b, np.float64)),
        eps,
    )
    return t.numpy()


def _check(ref, out, dtype):
    err = float(np.max(np.abs(ref - out)))
    bound = REL_TOL[dtype] * float(np.max(np.abs(ref)))
    assert err <= bound, f"max error {err:.3g} > {bound:.3g} for {dtype}"


# --- rms_norm / layer_norm -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_matches_reference_per_dtype(open_mesh, rng, dtype):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 2, 32, 128)).astype(np.float32) * 3
    w = rng.standard_normal(128).astype(np.float32)
    tx = _dev(mesh, x, dtype)
    tw = _dev(mesh, w.reshape(1, 1, 4, 32), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    y = ttnn.rms_norm(tx, epsilon=1e-5, weight=tw)
    assert y.dtype == dtype and y.shape == x.shape and y.layout == ttnn.TILE_LAYOUT
    out = _host(y)
    _check(_rms_ref(_host(tx), _host(tw).reshape(-1)), out, dtype)
    ref_torch = torch.nn.functional.rms_norm(torch.tensor(x), (128,), torch.tensor(w), 1e-5).numpy()
    assert_pcc(ref_torch, out, PCC_MIN[dtype])
    # every device computes the same (replicated input)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(y)[1]), out.astype(np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_matches_torch_per_dtype(open_mesh, rng, dtype):
    mesh = open_mesh((1, 1))
    x = (rng.standard_normal((1, 1, 64, 96)) * 2 + 0.5).astype(np.float32)
    w = rng.standard_normal(96).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    tx = _dev(mesh, x, dtype)
    tw, tb = _dev(mesh, w.reshape(1, 1, 1, 96)), _dev(mesh, b.reshape(1, 1, 1, 96))
    y = ttnn.layer_norm(tx, epsilon=1e-5, weight=tw, bias=tb)
    out = _host(y)
    _check(_ln_ref(_host(tx), _host(tw).reshape(-1), _host(tb).reshape(-1)), out, dtype)
    assert_pcc(_ln_ref(x, w, b), out, PCC_MIN[dtype])


def test_norm_weight_forms_residual_and_bias(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    r = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    tx, tr = _dev(mesh, x, ttnn.float32), _dev(mesh, r, ttnn.float32)
    forms = [
        _dev(mesh, w, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT),  # [dim]
        _dev(mesh, w.reshape(1, 1, 2, 32), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT),  # TTTv1 [1, 1, dim/32, 32]
        _dev(mesh, w.reshape(1, 1, 1, 64), ttnn.float32, ttnn.TILE_LAYOUT),  # [1, 1, 1, dim]
        _dev(mesh, np.tile(w, (1, 1, 4, 1)), ttnn.float32, ttnn.TILE_LAYOUT),  # tile rows: only row 0 is read
    ]
    ref = _rms_ref(x + r, w, b)
    tb = _dev(mesh, b, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    for tw in forms:
        y = ttnn.rms_norm(tx, epsilon=1e-5, weight=tw, bias=tb, residual_input_tensor=tr)
        _check(ref, _host(y), ttnn.float32)
    y = ttnn.layer_norm(tx, epsilon=1e-5, residual_input_tensor=tr)
    _check(_ln_ref(x + r), _host(y), ttnn.float32)
    y = ttnn.rms_norm(tx)  # default epsilon 1e-12, no weight
    _check(_rms_ref(x, eps=1e-12), _host(y), ttnn.float32)
    # compute kernel config is accepted (validated) and does not change the math here
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True)
    y2 = ttnn.rms_norm(tx, compute_kernel_config=cfg, program_config=ttnn.LayerNormDefaultProgramConfig())
    np.testing.assert_array_equal(ttnn.to_numpy(y2), ttnn.to_numpy(y))


def test_norm_non_tile_aligned_width(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 5, 40)).astype(np.float32)
    w = rng.standard_normal(40).astype(np.float32)
    y = ttnn.rms_norm(_dev(mesh, x, ttnn.float32), epsilon=1e-6, weight=_dev(mesh, w, ttnn.float32))
    _check(_rms_ref(x, w, eps=1e-6), _host(y), ttnn.float32)


def _width_sharded(mesh, t, cores, grid=(8, 1)):
    h = int(np.prod(t.shape[:-1]))
    crs = ttnn.num_cores_to_corerangeset(cores, ttnn.CoreCoord(*grid), row_wise=True)
    spec = ttnn.ShardSpec(crs, (-(-h // 32) * 32, t.shape[-1] // cores), ttnn.ShardOrientation.ROW_MAJOR)
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, spec)


@pytest.mark.parametrize("norm", [ttnn.rms_norm, ttnn.layer_norm])
def test_sharded_norm_equals_interleaved(open_mesh, rng, norm):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 512)).astype(np.float32)
    w = rng.standard_normal(512).astype(np.float32)
    tx = _dev(mesh, x)
    tw = _dev(mesh, w.reshape(1, 1, 16, 32), layout=ttnn.ROW_MAJOR_LAYOUT)
    plain = norm(tx, epsilon=1e-5, weight=tw)
    memcfg = _width_sharded(mesh, tx, 8)
    xs = ttnn.to_memory_config(tx, memcfg)
    pc = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=ttnn.CoreCoord(8, 1), subblock_w=2, block_h=1, block_w=2, inplace=False
    )
    ys = norm(xs, epsilon=1e-5, weight=tw, program_config=pc, memory_config=memcfg)
    assert ys.is_sharded() and ys.memory_config() == memcfg
    np.testing.assert_array_equal(ttnn.to_numpy(ys), ttnn.to_numpy(plain))
    # without a program config one is derived from the shard spec; an output spec is filled in
    derived = norm(xs, epsilon=1e-5, weight=tw, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert derived.memory_config().shard_spec == memcfg.shard_spec
    np.testing.assert_array_equal(ttnn.to_numpy(derived), ttnn.to_numpy(plain))
    # residual must share the sharded memory config
    r = ttnn.to_memory_config(_dev(mesh, np.ones_like(x)), memcfg)
    yr = norm(xs, epsilon=1e-5, residual_input_tensor=r, program_config=pc)
    np.testing.assert_array_equal(
        ttnn.to_numpy(yr),
        ttnn.to_numpy(norm(tx, epsilon=1e-5, residual_input_tensor=_dev(mesh, np.ones_like(x)))),
    )


def test_block_sharded_norm(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 64, 256)).astype(np.float32)
    tx = _dev(mesh, x)
    memcfg = ttnn.create_sharded_memory_config(
        (1, 1, 64, 256), ttnn.CoreGrid(x=4, y=2), ttnn.ShardStrategy.BLOCK
    )
    xs = ttnn.to_memory_config(tx, memcfg)
    pc = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(4, 2), subblock_w=2, block_h=1, block_w=2, inplace=True
    )
    ys = ttnn.rms_norm(xs, epsilon=1e-5, program_config=pc)
    np.testing.assert_array_equal(ttnn.to_numpy(ys), ttnn.to_numpy(ttnn.rms_norm(tx, epsilon=1e-5)))
    # block_h covering all rows selects the 1-D kernel, which splits the width over all 8 shard cores
    bad = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(4, 2), subblock_w=1, block_h=2, block_w=2
    )
    with pytest.raises(
        ValidationError,
        match=r"ttnn.rms_norm: program_config.block_w: expected 1 = ceil\(K tiles 8 / 8 cores\)",
    ):
        ttnn.rms_norm(xs, program_config=bad)
    bad_h = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(4, 2), subblock_w=1, block_h=3, block_w=2
    )
    with pytest.raises(
        ValidationError,
        match=r"ttnn.rms_norm: program_config.block_h: expected 1 \(M tiles 2 per core row\), got 3",
    ):
        ttnn.rms_norm(xs, program_config=bad_h)
    col = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(
            ttnn.CoreGrid(x=2, y=4).to_core_range_set(), (32, 64), ttnn.ShardOrientation.COL_MAJOR
        ),
    )
    ycol = ttnn.rms_norm(ttnn.to_memory_config(tx, col), epsilon=1e-5)
    np.testing.assert_array_equal(ttnn.to_numpy(ycol), ttnn.to_numpy(ys))


def test_sharded_program_config_errors(open_mesh, rng):
    mesh = open_mesh((1, 1))
    tx = _dev(mesh, rng.standard_normal((1, 1, 32, 256)))
    memcfg = _width_sharded(mesh, tx, 8)
    xs = ttnn.to_memory_config(tx, memcfg)

    def pc(grid=(8, 1), block_h=1, block_w=1, subblock_w=1):
        return ttnn.LayerNormShardedMultiCoreProgramConfig(
            compute_with_storage_grid_size=grid, subblock_w=subblock_w, block_h=block_h, block_w=block_w
        )

    with pytest.raises(
        ValidationError, match=r"program_config: expected a sharded input_tensor.*got an interleaved input"
    ):
        ttnn.rms_norm(tx, program_config=pc())
    with pytest.raises(
        ValidationError, match=r"program_config.block_w: expected 1 = ceil\(K tiles 8 / 8 cores\)"
    ):
        ttnn.rms_norm(xs, program_config=pc(block_w=2, subblock_w=2))
    with pytest.raises(ValidationError, match=r"containing the input's shard grid"):
        ttnn.rms_norm(xs, program_config=pc(grid=(4, 1)))
    with pytest.raises(ValidationError, match=r"within the device grid 8x8"):
        ttnn.rms_norm(xs, program_config=pc(grid=(9, 1)))
    with pytest.raises(
        ValidationError,
        match=r"program_config: expected a LayerNormShardedMultiCoreProgramConfig \(or None\)",
    ):
        ttnn.rms_norm(xs, program_config=ttnn.LayerNormDefaultProgramConfig())
    with pytest.raises(ValidationError, match=r"program_config: expected a LayerNormSharded.*or None, got 3"):
        ttnn.rms_norm(tx, program_config=3)
    with pytest.raises(ValidationError, match=r"memory_config: expected a width- or block-sharded output"):
        ttnn.rms_norm(xs, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match=r"memory_config: expected the input's WIDTH_SHARDED/L1"):
        ttnn.rms_norm(xs, memory_config=ttnn.L1_BLOCK_SHARDED_MEMORY_CONFIG)
    with pytest.raises(
        ValidationError, match=r"memory_config: expected an interleaved output for an interleaved input"
    ):
        ttnn.rms_norm(tx, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match=r"memory_config: expected a ttnn.MemoryConfig"):
        ttnn.rms_norm(tx, memory_config="L1")
    # a spec whose shard height does not match block_h
    tall = _dev(mesh, rng.standard_normal((1, 1, 64, 256)))
    tall_s = ttnn.to_memory_config(tall, _width_sharded(mesh, tall, 8))
    with pytest.raises(ValidationError, match=r"program_config.block_h: expected 2"):
        ttnn.rms_norm(tall_s, program_config=pc())
    height = ttnn.to_memory_config(tall, ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(
        ValidationError,
        match=r"input_tensor: expected an interleaved, width- or block-sharded input, got HEIGHT_SHARDED",
    ):
        ttnn.rms_norm(height)
    # block_w × 32 must equal the shard width (here a 4-core spec with 2-tile shards against block_w 1)
    four = ttnn.to_memory_config(tx, _width_sharded(mesh, tx, 4))
    with pytest.raises(ValidationError, match=r"block_w: expected 2"):
        ttnn.rms_norm(four, program_config=pc())
    ragged = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(ttnn.num_cores_to_corerangeset(2, ttnn.CoreCoord(8, 1), row_wise=True), (32, 160)),
    )
    with pytest.raises(
        ValidationError, match=r"block_h × 32, block_w × 32 equal to the input shard shape \(32, 160\)"
    ):
        ttnn.rms_norm(
            ttnn.to_memory_config(tx, ragged), program_config=pc(grid=(2, 1), block_w=4, subblock_w=4)
        )
    r_interleaved = _dev(mesh, rng.standard_normal((1, 1, 32, 256)))
    with pytest.raises(
        ValidationError, match=r"residual_input_tensor: expected the input's sharded memory config"
    ):
        ttnn.rms_norm(xs, residual_input_tensor=r_interleaved)


def test_norm_argument_errors(open_mesh, rng):
    mesh = open_mesh((1, 1))
    other = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 64))
    tx = _dev(mesh, x)
    with pytest.raises(
        ValidationError, match=r"ttnn.rms_norm: input_tensor.layout: expected one of TILE, got ROW_MAJOR"
    ):
        ttnn.rms_norm(_dev(mesh, x, layout=ttnn.ROW_MAJOR_LAYOUT))
    with pytest.raises(
        ValidationError, match=r"input_tensor.dtype: expected one of BFLOAT16, FLOAT32, BFLOAT8_B, got UINT32"
    ):
        ttnn.rms_norm(ttnn.from_numpy(np.ones((32, 32), np.uint32), layout=ttnn.TILE_LAYOUT, device=mesh))
    with pytest.raises(
        ValidationError, match=r"weight: expected a \[64\] / \[1, 1, 1, 64\] tensor.*got \[1, 1, 1, 32\] TILE"
    ):
        ttnn.rms_norm(tx, weight=_dev(mesh, np.ones((1, 1, 1, 32))))
    with pytest.raises(ValidationError, match=r"bias: expected a \[64\]"):
        ttnn.layer_norm(tx, bias=_dev(mesh, np.ones((1, 1, 2, 64)), layout=ttnn.ROW_MAJOR_LAYOUT))
    with pytest.raises(
        ValidationError, match=r"residual_input_tensor: expected the input's shape \[1, 1, 32, 64\]"
    ):
        ttnn.rms_norm(tx, residual_input_tensor=_dev(mesh, np.ones((1, 1, 32, 32))))
    with pytest.raises(ValidationError, match=r"epsilon: expected a non-negative float, got -1"):
        ttnn.rms_norm(tx, epsilon=-1.0)
    with pytest.raises(
        ValidationError, match=r"compute_kernel_config: expected a ttnn.WormholeComputeKernelConfig"
    ):
        ttnn.layer_norm(tx, compute_kernel_config="HiFi4")
    with pytest.raises(
        ValidationError, match=r"weight: expected a tensor on the same device as input_tensor"
    ):
        ttnn.rms_norm(tx, weight=_dev(other, np.ones(64), layout=ttnn.ROW_MAJOR_LAYOUT))
    with pytest.raises(ValidationError, match=r"input_tensor: expected a tensor on device"):
        ttnn.rms_norm(ttnn.from_numpy(np.ones((32, 32), np.float32), layout=ttnn.TILE_LAYOUT))
    tx.deallocate()
    with pytest.raises(
        ValidationError,
        match=r"ttnn.rms_norm: input_tensor: the input tensor \[1, 1, 32, 64\] BFLOAT16 was deallocated",
    ):
        ttnn.rms_norm(tx)


# --- distributed norms ---------------------------------------------------------------------------------------


def _gather_dim3(stats, mesh, **kw):
    """All-gather along dim 3 written out by hand: every device gets all devices' stats side by side."""
    parts = [ttnn.to_numpy(t) for t in ttnn.get_device_tensors(stats)]
    return ttnn.from_numpy(
        np.concatenate(parts, axis=3), dtype=stats.dtype, layout=ttnn.TILE_LAYOUT, device=mesh, **kw
    )


@pytest.mark.parametrize("mesh_shape", [(1, 2), (1, 8)])
def test_distributed_rms_norm_equals_full_width(open_mesh, rng, mesh_shape):
    mesh = open_mesh(mesh_shape)
    n = mesh_shape[1]
    dim = 64 * n
    x = rng.standard_normal((1, 1, 32, dim)).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    x_split = _dev(mesh, x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    w_split = ttnn.from_numpy(
        w.reshape(1, 1, dim // 32, 32),
        dtype=ttnn.bfloat16,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2),
    )
    stats = ttnn.rms_norm_pre_all_gather(x_split, dtype=ttnn.bfloat16)
    assert stats.shape == (1, 1, 32, 32) and stats.dtype == ttnn.bfloat16 and stats.layout == ttnn.TILE_LAYOUT
    local = [ttnn.to_numpy(t).astype(np.float64) for t in ttnn.get_device_tensors(stats)]
    xq = [ttnn.to_numpy(t).astype(np.float64) for t in ttnn.get_device_tensors(x_split)]
    for s, xi in zip(local, xq):  # Σx² in column 0 of the tile, zeros elsewhere
        np.testing.assert_allclose(s[..., 0], np.sum(xi * xi, axis=-1), rtol=2**-8)
        assert not s[..., 1:].any()
    gathered = _gather_dim3(stats, mesh)
    assert gathered.shape == (1, 1, 32, 32 * n)
    y = ttnn.rms_norm_post_all_gather(x_split, gathered, epsilon=1e-5, weight=w_split)
    out = ttnn.to_numpy(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    x_full = _dev(mesh, x)
    w_full = _dev(mesh, w.reshape(1, 1, dim // 32, 32), layout=ttnn.ROW_MAJOR_LAYOUT)
    full = ttnn.to_numpy(ttnn.get_device_tensors(ttnn.rms_norm(x_full, epsilon=1e-5, weight=w_full))[0])
    assert_pcc(full, out, 0.999)
    assert float(np.max(np.abs(full - out))) <= 0.02 * float(np.max(np.abs(full)))
    assert_pcc(_rms_ref(x, w), out, 0.999)


@pytest.mark.parametrize("mesh_shape", [(1, 2), (1, 8)])
def test_distributed_layer_norm_equals_full_width(open_mesh, rng, mesh_shape):
    mesh = open_mesh(mesh_shape)
    n = mesh_shape[1]
    dim = 32 * n
    x = (rng.standard_normal((1, 1, 32, dim)) + 1.0).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    b = rng.standard_normal(dim).astype(np.float32)
    split = ttnn.ShardTensorToMesh(mesh, dim=3)
    x_split = _dev(mesh, x, ttnn.float32, mesh_mapper=split)
    w_split = _dev(mesh, w.reshape(1, 1, 1, dim), mesh_mapper=split)
    b_split = _dev(mesh, b.reshape(1, 1, 1, dim), mesh_mapper=split)
    stats = ttnn.layer_norm_pre_all_gather(x_split, dtype=ttnn.float32)
    assert stats.shape == (1, 1, 32, 64)
    s0 = ttnn.to_numpy(ttnn.get_device_tensors(stats)[0])
    x0 = ttnn.to_numpy(ttnn.get_device_tensors(x_split)[0]).astype(np.float64)
    np.testing.assert_allclose(s0[..., 0], np.sum(x0 * x0, -1), rtol=1e-5)
    np.testing.assert_allclose(s0[..., 32], np.sum(x0, -1), rtol=1e-4, atol=1e-4)
    y = ttnn.layer_norm_post_all_gather(
        x_split, _gather_dim3(stats, mesh), epsilon=1e-5, weight=w_split, bias=b_split, dtype=ttnn.bfloat16
    )
    assert y.dtype == ttnn.bfloat16
    out = ttnn.to_numpy(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    ref = _ln_ref(x, w, b)
    assert_pcc(ref, out, 0.9999)
    assert float(np.max(np.abs(ref - out))) <= 2**-7 * float(np.max(np.abs(ref)))


def test_distributed_rms_norm_with_residual_and_sharded_inputs(open_mesh, rng):
    mesh = open_mesh((1, 2))
    dim = 512
    x = rng.standard_normal((1, 1, 32, dim)).astype(np.float32)
    r = rng.standard_normal((1, 1, 32, dim)).astype(np.float32)
    split = ttnn.ShardTensorToMesh(mesh, dim=3)
    x_split, r_split = _dev(mesh, x, mesh_mapper=split), _dev(mesh, r, mesh_mapper=split)
    plain_stats = ttnn.rms_norm_pre_all_gather(x_split, residual_input_tensor=r_split)
    s0 = ttnn.to_numpy(ttnn.get_device_tensors(plain_stats)[0]).astype(np.float64)
    v0 = (
        ttnn.to_numpy(ttnn.get_device_tensors(x_split)[0])
        + ttnn.to_numpy(ttnn.get_device_tensors(r_split)[0])
    ).astype(np.float64)
    np.testing.assert_allclose(s0[..., 0], np.sum(v0 * v0, -1), rtol=2**-8)
    # the sharded variant (TTTv1 tt_sharded_distributed_rmsnorm): width-sharded local slices of 256
    memcfg = _width_sharded(mesh, x_split, 8)
    xs = ttnn.to_memory_config(x_split, memcfg)
    pc = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 1), subblock_w=1, block_h=1, block_w=1
    )
    stats = ttnn.rms_norm_pre_all_gather(xs, program_config=pc)
    assert stats.is_sharded() and stats.shard_spec().num_cores() == 1 and stats.shard_spec().shape == (32, 32)
    np.testing.assert_array_equal(
        ttnn.to_numpy(ttnn.get_device_tensors(stats)[0]),
        ttnn.to_numpy(ttnn.get_device_tensors(ttnn.rms_norm_pre_all_gather(x_split))[0]),
    )
    one_core = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(
            ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))}), (32, 64)
        ),
    )
    gathered = _gather_dim3(stats, mesh, memory_config=one_core)
    y = ttnn.rms_norm_post_all_gather(xs, gathered, epsilon=1e-5, program_config=pc)
    assert y.is_sharded()
    y_plain = ttnn.rms_norm_post_all_gather(
        x_split, _gather_dim3(ttnn.rms_norm_pre_all_gather(x_split), mesh), epsilon=1e-5
    )
    np.testing.assert_array_equal(
        ttnn.to_numpy(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3)),
        ttnn.to_numpy(y_plain, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3)),
    )
    with pytest.raises(ValidationError, match=r"stats: expected stats sharded on exactly one core"):
        ttnn.rms_norm_post_all_gather(xs, _gather_dim3(stats, mesh), program_config=pc)
    # without a program config too: ttnn takes its sharded kernel for any sharded input, so the Galaxy decoder's
    # sharded residual with its stats gathered to DRAM is refused, and the error says why
    with pytest.raises(
        ValidationError, match=r"sharded norm kernel, which refuses DRAM or interleaved stats"
    ):
        ttnn.rms_norm_post_all_gather(xs, _gather_dim3(stats, mesh, memory_config=ttnn.DRAM_MEMORY_CONFIG))
    tall = ttnn.to_memory_config(
        _dev(mesh, np.ones((1, 1, 64, 512)), mesh_mapper=split),
        _width_sharded(mesh, _dev(mesh, np.ones((1, 1, 64, 256))), 8),
    )
    pc2 = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 1), subblock_w=1, block_h=2, block_w=1
    )
    with pytest.raises(
        ValidationError,
        match=r"input_tensor: expected a padded height of 32 rows for a sharded distributed norm, got 64",
    ):
        ttnn.rms_norm_pre_all_gather(tall, program_config=pc2)


def test_post_all_gather_with_fewer_logical_rows(open_mesh, rng):
    """Stats and input only need matching padded rows (as on hardware); logical rows may differ."""
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 8, 64)).astype(np.float32)
    tx = _dev(mesh, x, ttnn.float32)
    stats = ttnn.rms_norm_pre_all_gather(tx, dtype=ttnn.float32)
    full_rows = ttnn.pad(ttnn.to_layout(stats, ttnn.ROW_MAJOR_LAYOUT), [(0, 24), (0, 0)], 0.0)
    full_rows = ttnn.to_layout(full_rows, ttnn.TILE_LAYOUT)
    assert full_rows.shape == (1, 1, 32, 32)
    for st in (stats, full_rows):
        y = ttnn.rms_norm_post_all_gather(tx, st, epsilon=1e-5)
        _check(_rms_ref(x), _host(y), ttnn.float32)
    y = ttnn.rms_norm_post_all_gather(ttnn.pad(tx, [(0, 24), (0, 0)], 0.0), stats, epsilon=1e-5)
    _check(_rms_ref(x), _host(y)[:, :, :8], ttnn.float32)


def test_distributed_norm_errors(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = _dev(mesh, rng.standard_normal((1, 1, 32, 64)))
    with pytest.raises(
        ValidationError, match=r"rms_norm_pre_all_gather: input_tensor rank: expected 4, got 2"
    ):
        ttnn.rms_norm_pre_all_gather(_dev(mesh, np.ones((32, 64))))
    with pytest.raises(ValidationError, match=r"dtype: expected a ttnn.DataType"):
        ttnn.rms_norm_pre_all_gather(x, dtype="bf16")
    with pytest.raises(
        ValidationError, match=r"stats: expected a last dim that is a multiple of 64 \(a 64-wide"
    ):
        ttnn.layer_norm_post_all_gather(x, _dev(mesh, np.ones((1, 1, 32, 96))))
    with pytest.raises(ValidationError, match=r"stats: expected padded dims \[1, 1, 32\] \+ \[k·32\]"):
        ttnn.rms_norm_post_all_gather(x, _dev(mesh, np.ones((1, 1, 64, 64))))
    with pytest.raises(
        ValidationError, match=r"stats.dtype: expected one of BFLOAT16, FLOAT32, got BFLOAT8_B"
    ):
        ttnn.rms_norm_post_all_gather(x, _dev(mesh, np.ones((1, 1, 32, 64)), ttnn.bfloat8_b))
    with pytest.raises(ValidationError, match=r"dtype: expected a ttnn.DataType"):
        ttnn.rms_norm_post_all_gather(x, _dev(mesh, np.ones((1, 1, 32, 64))), dtype=1)
    with pytest.raises(ValidationError, match=r"weight: expected a \[64\]"):
        ttnn.rms_norm_post_all_gather(
            x, _dev(mesh, np.ones((1, 1, 32, 64))), weight=_dev(mesh, np.ones((1, 1, 1, 128)))
        )


# --- softmax -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 2, 1])
def test_softmax_matches_torch(open_mesh, rng, dtype, dim):
    mesh = open_mesh((1, 2))
    x = (rng.standard_normal((1, 4, 32, 64)) * 4).astype(np.float32)
    tx = _dev(mesh, x, dtype)
    y = ttnn.softmax(tx, dim)
    assert y.dtype == dtype and y.shape == x.shape
    out = _host(y)
    ref_q = torch.softmax(torch.tensor(_host(tx)), dim=dim).numpy()
    err = float(np.max(np.abs(ref_q - out)))
    assert err <= REL_TOL[dtype] * 1.0 + 1e-7  # softmax outputs lie in [0, 1]
    assert_pcc(torch.softmax(torch.tensor(x), dim=dim).numpy(), out, PCC_MIN[dtype])


def test_softmax_numeric_stable_flag_and_memory(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 64, 32)).astype(np.float32)
    tx = _dev(mesh, x, ttnn.float32)
    fast = ttnn.softmax(tx, numeric_stable=False, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert fast.memory_config() == ttnn.L1_MEMORY_CONFIG
    np.testing.assert_allclose(ttnn.to_numpy(fast), ttnn.to_numpy(ttnn.softmax(tx)), rtol=1e-5, atol=1e-7)
    big = _dev(mesh, np.full((1, 1, 32, 32), 200.0), ttnn.float32)
    assert np.isnan(
        ttnn.to_numpy(ttnn.softmax(big, numeric_stable=False))
    ).all()  # exp overflows, as on hardware
    np.testing.assert_allclose(ttnn.to_numpy(ttnn.softmax(big)), 1 / 32, rtol=1e-6)
    hs = ttnn.to_memory_config(tx, ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert ttnn.softmax(hs).is_sharded()
    with pytest.raises(
        ValidationError,
        match=r"ttnn.softmax: input_tensor: expected an interleaved or height-sharded input, got WIDTH_SHARDED",
    ):
        ttnn.softmax(ttnn.to_memory_config(tx, ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG))
    with pytest.raises(ValidationError, match=r"ttnn.softmax: dim: expected a dim in \[-4, 3\], got 4"):
        ttnn.softmax(tx, 4)
    with pytest.raises(ValidationError, match=r"memory_config: expected a ttnn.MemoryConfig"):
        ttnn.softmax(tx, memory_config="DRAM")
    with pytest.raises(ValidationError, match=r"input_tensor.layout: expected one of TILE"):
        ttnn.softmax(_dev(mesh, x, layout=ttnn.ROW_MAJOR_LAYOUT))


def test_ops_are_traced(open_mesh, rng):
    mesh = open_mesh((1, 1))
    tx = _dev(mesh, rng.standard_normal((1, 1, 32, 32)))
    with ttnn.OpTrace() as trace:
        ttnn.rms_norm(tx)
        ttnn.softmax(tx)
    assert trace.names == ["ttnn.rms_norm", "ttnn.softmax"]


def test_tt_lib_era_distributed_rms_norm(open_mesh, rng):
    """tt_lib's ``operations.primary.rmsnorm_pre_allgather(x, compute_kernel_config=, output_dtype=)`` and
    ``rmsnorm_post_allgather(x, stats, eps, gamma, ...)`` (the Llama-2-70B T3000 decoder's prefill norm, reached
    through ``ttnn.experimental``): today's pre/post all-gather RMSNorm, bit for bit."""
    mesh = open_mesh((1, 2))
    dim = 128
    x = rng.standard_normal((1, 1, 32, dim)).astype(np.float32)
    w = ttnn.from_numpy(
        rng.standard_normal(dim).astype(np.float32).reshape(1, 1, dim // 32, 32),
        dtype=ttnn.bfloat16,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2),
    )
    x_split = _dev(mesh, x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    primary = ttnn.experimental.operations.primary
    stats = primary.rmsnorm_pre_allgather(x_split, output_dtype=ttnn.bfloat16)
    today = ttnn.rms_norm_pre_all_gather(x_split, dtype=ttnn.bfloat16)
    whole = ttnn.ConcatMeshToTensor(mesh, dim=3)
    np.testing.assert_array_equal(
        ttnn.to_numpy(stats, mesh_composer=whole), ttnn.to_numpy(today, mesh_composer=whole)
    )
    gathered = _gather_dim3(stats, mesh)
    y = primary.rmsnorm_post_allgather(x_split, gathered, 1e-5, w, output_mem_config=ttnn.L1_MEMORY_CONFIG)
    y_today = ttnn.rms_norm_post_all_gather(x_split, gathered, epsilon=1e-5, weight=w)
    assert y.memory_config() == ttnn.L1_MEMORY_CONFIG
    np.testing.assert_array_equal(
        ttnn.to_numpy(y, mesh_composer=whole), ttnn.to_numpy(y_today, mesh_composer=whole)
    )
