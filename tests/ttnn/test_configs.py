"""Configs are validated, value-comparable, hashable metadata: cores, memory configs, program and kernel configs."""

from __future__ import annotations

import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError

C = ttnn.CoreCoord


def _range(x0, y0, x1, y1):
    return ttnn.CoreRange(C(x0, y0), C(x1, y1))


# --- cores --------------------------------------------------------------------------------------------------


def test_core_coord():
    assert C(1, 2) == C(1, 2) and hash(C(1, 2)) == hash(C(1, 2)) and C(1, 2) != C(2, 1)
    assert repr(C(1, 2)) == "CoreCoord(x=1, y=2)"
    assert C(0, 5) < C(1, 0)  # ordered by x, then y
    for bad in [(-1, 0), (0, 1.5), (True, 0), ("1", 2)]:
        with pytest.raises(ValidationError, match=r"CoreCoord"):
            C(*bad)


def test_core_grid():
    g = ttnn.CoreGrid(x=8, y=4)
    assert g.num_cores == 32 and g == ttnn.CoreGrid(y=4, x=8) and hash(g) == hash(ttnn.CoreGrid(x=8, y=4))
    assert g.to_core_range_set() == ttnn.CoreRangeSet({_range(0, 0, 7, 3)})
    for bad in [(0, 1), (1, 0), (2.0, 1)]:
        with pytest.raises(ValidationError, match=r"CoreGrid"):
            ttnn.CoreGrid(x=bad[0], y=bad[1])


def test_core_range():
    r = _range(1, 2, 3, 5)
    assert r.num_cores() == 12 and r.grid_size() == C(3, 4)
    assert ttnn.CoreRange((1, 2), (3, 5)) == r  # tuples become CoreCoords
    assert r.cores()[:4] == [C(1, 2), C(2, 2), C(3, 2), C(1, 3)]  # row by row
    assert r.cores(row_wise=False)[:5] == [C(1, 2), C(1, 3), C(1, 4), C(1, 5), C(2, 2)]
    assert r.intersects(_range(3, 5, 4, 6)) and not r.intersects(_range(4, 0, 5, 9))
    assert not r.intersects(_range(0, 6, 9, 6)) and not r.intersects(_range(0, 0, 9, 1))
    assert repr(r) == "CoreRange(start=CoreCoord(x=1, y=2), end=CoreCoord(x=3, y=5))"
    with pytest.raises(ValidationError, match=r"must not be before start"):
        _range(2, 0, 1, 0)
    with pytest.raises(ValidationError, match=r"must not be before start"):
        _range(0, 2, 0, 1)
    with pytest.raises(ValidationError, match=r"start must be a CoreCoord"):
        ttnn.CoreRange([0, 0], C(1, 1))


def test_core_range_set():
    a, b = _range(0, 0, 3, 0), _range(0, 1, 1, 1)
    s = ttnn.CoreRangeSet({a, b})
    assert s.num_cores() == 6
    assert s == ttnn.CoreRangeSet([b, a]) and hash(s) == hash(ttnn.CoreRangeSet([b, a]))  # order-insensitive
    assert s != ttnn.CoreRangeSet({a})
    assert ttnn.CoreRangeSet(a) == ttnn.CoreRangeSet({a})  # a single range is accepted
    assert s.bounding_box() == _range(0, 0, 3, 1)
    assert s.cores() == [C(0, 0), C(1, 0), C(2, 0), C(3, 0), C(0, 1), C(1, 1)]
    assert s.cores(row_wise=False)[:3] == [C(0, 0), C(0, 1), C(1, 0)]
    assert s.contains(C(3, 0)) and not s.contains(C(3, 1))
    assert repr(s).startswith("CoreRangeSet({CoreRange(start=CoreCoord(x=0, y=0)")
    with pytest.raises(ValidationError, match=r"overlap"):
        ttnn.CoreRangeSet({_range(0, 0, 3, 3), _range(3, 3, 4, 4)})
    with pytest.raises(ValidationError, match=r"expected CoreRange items"):
        ttnn.CoreRangeSet([C(0, 0)])
    with pytest.raises(ValidationError, match=r"the set is empty"):
        ttnn.CoreRangeSet().bounding_box()
    assert ttnn.CoreRangeSet().num_cores() == 0


def test_num_cores_to_corerangeset():
    # column by column by default (as in ttnn), row by row with row_wise=True
    cols = ttnn.num_cores_to_corerangeset(10, C(8, 4))
    assert cols == ttnn.CoreRangeSet({_range(0, 0, 1, 3), _range(2, 0, 2, 1)}) and cols.num_cores() == 10
    rows = ttnn.num_cores_to_corerangeset(10, C(8, 4), row_wise=True)
    assert rows == ttnn.CoreRangeSet({_range(0, 0, 7, 0), _range(0, 1, 1, 1)})
    assert ttnn.num_cores_to_corerangeset(16, ttnn.CoreGrid(x=8, y=8), row_wise=True) == ttnn.CoreRangeSet(
        {_range(0, 0, 7, 1)}
    )
    assert ttnn.num_cores_to_corerangeset(3, (8, 8), True) == ttnn.CoreRangeSet({_range(0, 0, 2, 0)})
    assert ttnn.num_cores_to_corerangeset(3, [8, 8]) == ttnn.CoreRangeSet({_range(0, 0, 0, 2)})
    assert ttnn.num_cores_to_corerangeset(8, (8, 8)).num_cores() == 8
    with pytest.raises(ValidationError, match=r"exceeds the 8x4 grid"):
        ttnn.num_cores_to_corerangeset(33, C(8, 4))
    with pytest.raises(ValidationError, match=r"target_num_cores must be >= 1"):
        ttnn.num_cores_to_corerangeset(0, C(8, 4))


# --- shard specs and memory configs -------------------------------------------------------------------------


def test_shard_spec_older_halo_argument():
    """tt_lib-era configs pass a fourth argument, ``halo`` (False): accepted and not kept; True is refused."""
    grid = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(3, 1))})
    older = ttnn.ShardSpec(grid, [32, 128], ttnn.ShardOrientation.ROW_MAJOR, False)
    assert older == ttnn.ShardSpec(grid, (32, 128), ttnn.ShardOrientation.ROW_MAJOR)
    assert "halo" not in repr(older)
    with pytest.raises(ValidationError, match="ShardSpec: halo must be False"):
        ttnn.ShardSpec(grid, [32, 128], ttnn.ShardOrientation.ROW_MAJOR, True)


def test_shard_spec():
    grid = ttnn.CoreRangeSet({_range(0, 0, 7, 0)})
    spec = ttnn.ShardSpec(grid, [32, 64], ttnn.ShardOrientation.ROW_MAJOR)
    assert (
        spec.shape == (32, 64)
        and spec.num_cores() == 8
        and spec.orientation is ttnn.ShardOrientation.ROW_MAJOR
    )
    assert spec == ttnn.ShardSpec(grid, (32, 64)) and hash(spec) == hash(ttnn.ShardSpec(grid, (32, 64)))
    assert ttnn.ShardSpec(_range(0, 0, 7, 0), (32, 64)) == spec  # a CoreRange is accepted
    assert ttnn.ShardSpec(ttnn.CoreGrid(x=8, y=1), (32, 64)) == spec  # and a CoreGrid
    with pytest.raises(ValidationError, match=r"shape must be \(height, width\)"):
        ttnn.ShardSpec(grid, (32,))
    with pytest.raises(ValidationError, match=r"shape must be >= 1"):
        ttnn.ShardSpec(grid, (0, 32))
    with pytest.raises(ValidationError, match=r"orientation must be a ShardOrientation"):
        ttnn.ShardSpec(grid, (32, 32), "ROW_MAJOR")
    with pytest.raises(ValidationError, match=r"grid must be a CoreRangeSet, CoreRange or CoreGrid"):
        ttnn.ShardSpec([(0, 0)], (32, 32))


def test_memory_config():
    spec = ttnn.ShardSpec(ttnn.CoreGrid(x=2, y=1), (32, 32))
    cfg = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, spec)
    same = ttnn.MemoryConfig(
        layout=ttnn.TensorMemoryLayout.WIDTH_SHARDED, buffer_type=ttnn.BufferType.L1, shard_spec=spec
    )
    assert cfg == same and hash(cfg) == hash(same) and len({cfg, same}) == 1
    assert cfg.is_sharded() and not cfg.interleaved and cfg.shard_spec is spec
    assert ttnn.MemoryConfig() == ttnn.DRAM_MEMORY_CONFIG
    assert ttnn.DRAM_MEMORY_CONFIG != ttnn.L1_MEMORY_CONFIG
    assert ttnn.L1_MEMORY_CONFIG.interleaved and not ttnn.L1_MEMORY_CONFIG.is_sharded()
    assert ttnn.L1_MEMORY_CONFIG.buffer_type is ttnn.BufferType.L1
    for const, layout in [
        (ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG, ttnn.TensorMemoryLayout.WIDTH_SHARDED),
        (ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG, ttnn.TensorMemoryLayout.HEIGHT_SHARDED),
        (ttnn.L1_BLOCK_SHARDED_MEMORY_CONFIG, ttnn.TensorMemoryLayout.BLOCK_SHARDED),
    ]:
        assert const.memory_layout is layout and const.is_sharded() and const.shard_spec is None
    assert "WIDTH_SHARDED" in repr(cfg) and "BufferType.L1" in repr(cfg)
    with pytest.raises(ValidationError, match=r"memory_layout must be a TensorMemoryLayout"):
        ttnn.MemoryConfig("INTERLEAVED")
    with pytest.raises(ValidationError, match=r"buffer_type must be a BufferType"):
        ttnn.MemoryConfig(ttnn.TensorMemoryLayout.INTERLEAVED, "L1")
    with pytest.raises(ValidationError, match=r"shard_spec must be a ShardSpec"):
        ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, (32, 32))
    with pytest.raises(ValidationError, match=r"INTERLEAVED memory config cannot have a shard_spec"):
        ttnn.MemoryConfig(ttnn.TensorMemoryLayout.INTERLEAVED, ttnn.BufferType.L1, spec)


# --- create_sharded_memory_config --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "grid", "strategy", "orientation", "layout", "shard"),
    [
        ((1, 1, 32, 256), ttnn.CoreGrid(x=8, y=1), ttnn.ShardStrategy.WIDTH, None, "WIDTH_SHARDED", (32, 32)),
        (
            (1, 1, 32, 4096),
            ttnn.CoreGrid(x=8, y=4),
            ttnn.ShardStrategy.WIDTH,
            None,
            "WIDTH_SHARDED",
            (32, 128),
        ),
        (
            (1, 2, 128, 64),
            ttnn.CoreGrid(x=4, y=2),
            ttnn.ShardStrategy.HEIGHT,
            None,
            "HEIGHT_SHARDED",
            (32, 64),
        ),
        (
            (1, 1, 128, 256),
            ttnn.CoreGrid(x=8, y=4),
            ttnn.ShardStrategy.BLOCK,
            None,
            "BLOCK_SHARDED",
            (32, 32),
        ),
        (
            (2, 64, 256),
            ttnn.CoreGrid(x=8, y=4),
            ttnn.ShardStrategy.BLOCK,
            ttnn.ShardOrientation.ROW_MAJOR,
            "BLOCK_SHARDED",
            (32, 32),
        ),
        # COL_MAJOR block sharding: the height is split over the grid's x, the width over its y
        (
            (1, 1, 256, 128),
            ttnn.CoreGrid(x=8, y=4),
            ttnn.ShardStrategy.BLOCK,
            ttnn.ShardOrientation.COL_MAJOR,
            "BLOCK_SHARDED",
            (32, 32),
        ),
        ((32, 64), ttnn.CoreGrid(x=2, y=1), ttnn.ShardStrategy.WIDTH, None, "WIDTH_SHARDED", (32, 32)),
    ],
)
def test_create_sharded_memory_config(shape, grid, strategy, orientation, layout, shard):
    cfg = ttnn.create_sharded_memory_config(shape, grid, strategy, orientation)
    assert cfg.memory_layout is ttnn.TensorMemoryLayout[layout] and cfg.buffer_type is ttnn.BufferType.L1
    assert cfg.shard_spec.shape == shard
    assert cfg.shard_spec.grid == grid.to_core_range_set()
    assert cfg.shard_spec.orientation is (orientation or ttnn.ShardOrientation.ROW_MAJOR)
    assert cfg == ttnn.create_sharded_memory_config(
        shape=shape, core_grid=grid, strategy=strategy, orientation=orientation
    )


def test_create_sharded_memory_config_with_shard_shape():
    grid = ttnn.CoreRangeSet({_range(0, 0, 6, 3)})  # 7x4, as TTTv1's reduce-scatter output config uses
    cfg = ttnn.create_sharded_memory_config(
        (32, 128),
        grid,
        ttnn.ShardStrategy.WIDTH,
        ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )
    assert cfg.shard_spec.shape == (32, 128) and cfg.shard_spec.grid == grid
    # a 4-D shape: its last two dims are the shard shape (as ttnn does)
    four = ttnn.create_sharded_memory_config(
        (1, 1, 32, 64),
        ttnn.CoreGrid(x=8, y=2),
        ttnn.ShardStrategy.WIDTH,
        use_height_and_width_as_shard_shape=True,
    )
    assert four.shard_spec.shape == (32, 64)
    # positional form; COL_MAJOR swaps the shard shape to (width, height), as ttnn does
    col = ttnn.create_sharded_memory_config(
        (32, 64), ttnn.CoreGrid(x=2, y=1), ttnn.ShardStrategy.HEIGHT, ttnn.ShardOrientation.COL_MAJOR, True
    )
    assert col.shard_spec.shape == (64, 32) and col.shard_spec.orientation is ttnn.ShardOrientation.COL_MAJOR


def test_create_sharded_memory_config_errors():
    grid = ttnn.CoreGrid(x=8, y=1)
    with pytest.raises(
        ValidationError, match=r"width 100 \(shape \[1, 1, 32, 100\]\) does not divide over 8 cores"
    ):
        ttnn.create_sharded_memory_config((1, 1, 32, 100), grid, ttnn.ShardStrategy.WIDTH)
    with pytest.raises(ValidationError, match=r"height 36 .* does not divide over 8 cores"):
        ttnn.create_sharded_memory_config((1, 1, 36, 64), grid, ttnn.ShardStrategy.HEIGHT)
    with pytest.raises(ValidationError, match=r"height 32 .* does not divide over 3 cores"):
        ttnn.create_sharded_memory_config((32, 64), ttnn.CoreGrid(x=2, y=3), ttnn.ShardStrategy.BLOCK)
    with pytest.raises(ValidationError, match=r"strategy must be a ttnn.ShardStrategy"):
        ttnn.create_sharded_memory_config((32, 256), grid, ttnn.TensorMemoryLayout.WIDTH_SHARDED)
    with pytest.raises(ValidationError, match=r"orientation must be a ttnn.ShardOrientation"):
        ttnn.create_sharded_memory_config((32, 256), grid, ttnn.ShardStrategy.WIDTH, "ROW_MAJOR")
    with pytest.raises(ValidationError, match=r"at least 2 dims"):
        ttnn.create_sharded_memory_config((256,), grid, ttnn.ShardStrategy.WIDTH)
    with pytest.raises(ValidationError, match=r"needs use_height_and_width_as_shard_shape=True"):
        ttnn.create_sharded_memory_config((32, 256), grid.to_core_range_set(), ttnn.ShardStrategy.WIDTH)
    with pytest.raises(ValidationError, match=r"grid must be a CoreRangeSet"):
        ttnn.create_sharded_memory_config((32, 256), (8, 1), ttnn.ShardStrategy.WIDTH)


def test_create_sharded_memory_config_lenient_tile_rounding():
    # tile_layout=True follows ttnn's create_sharded_memory_config_: divide up and round to whole tiles
    grid = ttnn.CoreGrid(x=8, y=1)
    w = ttnn.create_sharded_memory_config((1, 1, 32, 100), grid, ttnn.ShardStrategy.WIDTH, tile_layout=True)
    assert w.shard_spec.shape == (32, 32)
    h = ttnn.create_sharded_memory_config((1, 1, 100, 64), grid, ttnn.ShardStrategy.HEIGHT, tile_layout=True)
    assert h.shard_spec.shape == (32, 64)
    crs = ttnn.CoreRangeSet({_range(0, 0, 1, 1)})
    b = ttnn.create_sharded_memory_config((1, 1, 100, 100), crs, ttnn.ShardStrategy.BLOCK, tile_layout=True)
    assert b.shard_spec.shape == (64, 64) and b.shard_spec.grid == crs
    assert ttnn.create_sharded_memory_config(
        (32, 64), grid, ttnn.ShardStrategy.HEIGHT, halo=True
    ).shard_spec.shape == (4, 64)


# --- program configs ---------------------------------------------------------------------------------------------


def _mcast(**overrides):
    kwargs = dict(
        compute_with_storage_grid_size=C(8, 4),
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=4,
        per_core_M=2,
        per_core_N=4,
    )
    kwargs.update(overrides)
    return ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(**kwargs)


def test_matmul_program_configs_compare_by_value():
    a = _mcast()
    b = _mcast(compute_with_storage_grid_size=(8, 4))  # a tuple grid becomes a CoreCoord
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != _mcast(per_core_N=8)
    assert a.compute_with_storage_grid_size == C(8, 4)
    assert _mcast(compute_with_storage_grid_size=ttnn.CoreGrid(x=8, y=4)) == a  # anything with x and y
    assert repr(a).startswith(
        "MatmulMultiCoreReuseMultiCastProgramConfig(compute_with_storage_grid_size=CoreCoord(x=8, y=4), in0_block_w=2"
    )
    one_d = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 2),
        in0_block_w=4,
        out_subblock_h=1,
        out_subblock_w=2,
        per_core_M=1,
        per_core_N=4,
        fuse_batch=True,
        fused_activation=None,
        mcast_in0=True,
    )
    assert one_d.mcast_in0 and one_d == ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        (8, 2), 4, 1, 2, 1, 4, True, None, True
    )
    dram = ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(
        in0_block_w=2, per_core_M=1, per_core_N=4
    )
    assert dram.num_workers_per_dram_bank == 1 and hash(dram)
    reuse = ttnn.MatmulMultiCoreReuseProgramConfig((4, 4), 1, 1, 1, 1, 1)
    assert reuse.per_core_N == 1
    minimal = ttnn.MinimalMatmulConfig()
    assert (minimal.M_block_size, minimal.K_block_size, minimal.N_block_size) == (8, 8, 8)
    assert minimal.compute_with_storage_grid_size == C(8, 8)


def test_fused_activation_forms():
    silu = ttnn.UnaryWithParam(ttnn.UnaryOpType.SILU)
    assert _mcast(fused_activation=ttnn.UnaryOpType.SILU).fused_activation == silu
    assert _mcast(fused_activation=silu).fused_activation == silu
    assert _mcast(fused_activation=(ttnn.UnaryOpType.GELU, 1.0)).fused_activation == ttnn.UnaryWithParam(
        ttnn.UnaryOpType.GELU, 1.0
    )
    assert _mcast(fused_activation=[ttnn.UnaryOpType.RELU]).fused_activation == ttnn.UnaryWithParam(
        ttnn.UnaryOpType.RELU
    )
    with pytest.raises(ValidationError, match=r"fused_activation must be a UnaryWithParam"):
        _mcast(fused_activation="silu")
    with pytest.raises(ValidationError, match=r"fused_activation"):
        ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(1, 1, 1, fused_activation=[])


def test_program_config_validation():
    with pytest.raises(ValidationError, match=r"out_subblock_h 3 must divide per_core_M 2"):
        _mcast(out_subblock_h=3)
    with pytest.raises(ValidationError, match=r"out_subblock_w 3 must divide per_core_N 4"):
        _mcast(out_subblock_w=3)
    with pytest.raises(
        ValidationError, match=r"out_subblock_h × out_subblock_w must be <= 8 tiles.*got 2 × 8"
    ):
        _mcast(out_subblock_h=2, out_subblock_w=8, per_core_N=8)
    assert _mcast(out_subblock_h=2, out_subblock_w=4).out_subblock_h == 2  # 8 tiles is the limit
    for field, value in [
        ("in0_block_w", 0),
        ("per_core_M", -1),
        ("per_core_N", 1.5),
        ("out_subblock_w", True),
    ]:
        with pytest.raises(ValidationError, match=f"{field} must be a positive int"):
            _mcast(**{field: value})
    with pytest.raises(ValidationError, match=r"compute_with_storage_grid_size must be a CoreCoord"):
        _mcast(compute_with_storage_grid_size=8)
    with pytest.raises(ValidationError, match=r"out_subblock_w 3 must divide per_core_N 4"):
        ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig((8, 1), 1, 1, 3, 1, 4)
    with pytest.raises(ValidationError, match=r"num_workers_per_dram_bank must be a positive int"):
        ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(1, 1, 1, num_workers_per_dram_bank=0)
    with pytest.raises(ValidationError, match=r"K_block_size must be a positive int"):
        ttnn.MinimalMatmulConfig(K_block_size=0)
    with pytest.raises(ValidationError, match=r"per_core_M must be a positive int"):
        ttnn.MatmulMultiCoreReuseProgramConfig((4, 4), 1, 1, 1, 0, 1)


def test_norm_and_sdpa_configs():
    ln = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 2), subblock_w=2, block_h=1, block_w=4, inplace=False
    )
    assert ln == ttnn.LayerNormShardedMultiCoreProgramConfig(C(8, 2), 2, 1, 4) and hash(ln)
    with pytest.raises(ValidationError, match=r"subblock_w 3 must divide block_w 4"):
        ttnn.LayerNormShardedMultiCoreProgramConfig((8, 2), 3, 1, 4)
    with pytest.raises(ValidationError, match=r"block_h must be a positive int"):
        ttnn.LayerNormShardedMultiCoreProgramConfig((8, 2), 1, 0, 4)
    assert ttnn.LayerNormDefaultProgramConfig() == ttnn.LayerNormDefaultProgramConfig(False, False)
    sdpa = ttnn.SDPAProgramConfig(
        compute_with_storage_grid_size=(8, 8), q_chunk_size=64, k_chunk_size=128, exp_approx_mode=False
    )
    assert sdpa.q_chunk_size == 64 and sdpa == ttnn.SDPAProgramConfig(C(8, 8), 64, 128, False) and hash(sdpa)
    assert ttnn.SDPAProgramConfig((8, 8)).k_chunk_size == 0  # 0: the op chooses
    with pytest.raises(ValidationError, match=r"q_chunk_size must be a multiple of 32"):
        ttnn.SDPAProgramConfig((8, 8), q_chunk_size=48)
    with pytest.raises(ValidationError, match=r"k_chunk_size must be a non-negative int"):
        ttnn.SDPAProgramConfig((8, 8), k_chunk_size=-32)
    with pytest.raises(ValidationError, match=r"q_chunk_size must be a non-negative int"):
        ttnn.SDPAProgramConfig((8, 8), q_chunk_size=32.0)


def test_compute_kernel_configs():
    cfg = ttnn.WormholeComputeKernelConfig(
        math_fidelity=ttnn.MathFidelity.HiFi2,
        math_approx_mode=False,
        fp32_dest_acc_en=True,
        packer_l1_acc=True,
    )
    assert cfg == ttnn.WormholeComputeKernelConfig(ttnn.MathFidelity.HiFi2, False, True, True) and hash(cfg)
    assert ttnn.WormholeComputeKernelConfig().math_fidelity is ttnn.MathFidelity.HiFi4
    assert ttnn.DeviceComputeKernelConfig is ttnn.WormholeComputeKernelConfig
    with pytest.raises(ValidationError, match=r"math_fidelity must be a ttnn.MathFidelity"):
        ttnn.WormholeComputeKernelConfig(math_fidelity="HiFi4")
    with pytest.raises(ValidationError, match=r"BlackholeComputeKernelConfig: math_fidelity"):
        ttnn.BlackholeComputeKernelConfig(math_fidelity=4)
    wh = ttnn.init_device_compute_kernel_config(
        ttnn.Arch.WORMHOLE_B0, math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True
    )
    assert type(wh) is ttnn.WormholeComputeKernelConfig and wh.fp32_dest_acc_en and wh.math_approx_mode
    default = ttnn.init_device_compute_kernel_config(ttnn.Arch.WORMHOLE_B0)
    assert default.math_fidelity is ttnn.MathFidelity.LoFi and not default.fp32_dest_acc_en
    bh = ttnn.init_device_compute_kernel_config(ttnn.Arch.BLACKHOLE, math_fidelity=ttnn.MathFidelity.HiFi2)
    assert type(bh) is ttnn.BlackholeComputeKernelConfig and isinstance(bh, ttnn.WormholeComputeKernelConfig)
    assert ttnn.init_device_compute_kernel_config(ttnn.Arch.WORMHOLE_B0, cfg) is cfg
    with pytest.raises(ValidationError, match=r"arch must be a ttnn.Arch"):
        ttnn.init_device_compute_kernel_config("wormhole_b0")
    with pytest.raises(ValidationError, match=r"config must be a compute kernel config"):
        ttnn.init_device_compute_kernel_config(ttnn.Arch.WORMHOLE_B0, {"math_fidelity": "HiFi4"})


def test_configs_as_dict_keys():
    table = {
        ttnn.L1_MEMORY_CONFIG: "l1",
        _mcast(): "mm",
        ttnn.WormholeComputeKernelConfig(): "ck",
        ttnn.SDPAProgramConfig((8, 8), 32, 32): "sdpa",
    }
    assert table[ttnn.MemoryConfig(ttnn.TensorMemoryLayout.INTERLEAVED, ttnn.BufferType.L1)] == "l1"
    assert table[_mcast()] == "mm" and table[ttnn.WormholeComputeKernelConfig()] == "ck"
    assert table[ttnn.SDPAProgramConfig(C(8, 8), 32, 32)] == "sdpa"
    with pytest.raises(AttributeError):
        _mcast().per_core_M = 4  # frozen
