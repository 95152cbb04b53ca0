"""Which shard specs fit which tensors, as ttnn decides it (docs/emulator.md, "Sharding rules").

ttnn checks a sharded tensor when it builds its TensorSpec: a height shard must be exactly as wide as the tensor and
at most one shard may go to each core, so a shard taller than the whole tensor is legal (the one shard is partly
filled); a width shard must be exactly as tall as the tensor. The accepted case here is a 32-row decode tensor in a
128-row height shard; the refused one is tt-metal's Galaxy MLP decode config (``FF1_OUT_GATHERED_MEMCFG``: a width
shard of 4 × 32 rows for the 4 gathered column partials, applied before the gather), which ttnn refuses with
"Shard height 128 must match physical height 32 for width sharded" (tt-metal issue #18518).
"""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError


def _height_config(rows, width, cores):
    return ttnn.create_sharded_memory_config(
        shape=(rows, width),
        core_grid=ttnn.CoreGrid(y=1, x=cores),
        strategy=ttnn.ShardStrategy.HEIGHT,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def _l1_used(mesh):
    return [r["l1_used"] for r in mesh.memory_report()]


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.float32])
@pytest.mark.parametrize("cores", [1, 4])
def test_a_32_row_tensor_fits_a_128_row_height_shard(open_mesh, rng, dtype, cores):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    t = ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)
    stored = ttnn.to_numpy(ttnn.get_device_tensors(t)[0])  # the values as quantised to dtype
    config = _height_config(128, 256, cores)
    before = _l1_used(mesh)

    sharded = ttnn.to_memory_config(t, config)
    assert (
        sharded.is_sharded() and sharded.memory_config() == config and list(sharded.shape) == [1, 1, 32, 256]
    )
    for device_tensor in ttnn.get_device_tensors(sharded):
        np.testing.assert_array_equal(ttnn.to_numpy(device_tensor), stored)
    # each core of the grid holds a whole 128-row shard, however few of its rows the tensor fills
    per_core = 128 * 256 * dtype.element_bytes(ttnn.TILE_LAYOUT)
    assert [u - b for u, b in zip(_l1_used(mesh), before)] == [int(cores * per_core)] * 2

    back = ttnn.to_memory_config(sharded, ttnn.DRAM_MEMORY_CONFIG)
    assert not back.is_sharded()
    for device_tensor in ttnn.get_device_tensors(back):
        np.testing.assert_array_equal(ttnn.to_numpy(device_tensor), stored)
    sharded.deallocate()
    assert _l1_used(mesh) == before


def test_the_explicit_ops_and_an_eltwise_op_take_the_partly_filled_shard(open_mesh, rng):
    mesh = open_mesh((1, 1))
    a = rng.standard_normal((1, 1, 32, 128)).astype(np.float32)
    b = rng.standard_normal((1, 1, 32, 128)).astype(np.float32)
    ta = ttnn.from_numpy(a, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    tb = ttnn.from_numpy(b, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    grid = ttnn.CoreGrid(y=1, x=2)
    sa = ttnn.interleaved_to_sharded(
        ta, grid, (128, 128), ttnn.ShardStrategy.HEIGHT, ttnn.ShardOrientation.ROW_MAJOR
    )
    assert (
        sa.memory_config().shard_spec.shape == (128, 128) and sa.memory_config().shard_spec.num_cores() == 2
    )
    total = ttnn.add(sa, tb, memory_config=sa.memory_config())
    assert total.memory_config() == sa.memory_config()
    expected = ttnn.to_numpy(ttnn.add(ta, tb))
    np.testing.assert_array_equal(
        ttnn.to_numpy(ttnn.sharded_to_interleaved(total, ttnn.L1_MEMORY_CONFIG)), expected
    )
    # a reshard between two configs that both leave their shard partly filled
    moved = ttnn.to_memory_config(total, _height_config(64, 128, 1))
    np.testing.assert_array_equal(ttnn.to_numpy(moved), expected)


def test_a_tensor_that_does_not_fit_the_grid_is_refused(open_mesh):
    mesh = open_mesh((1, 1))
    t = ttnn.from_numpy(
        np.zeros((1, 1, 160, 256), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    # 160 rows need 5 shards of 32: one core too few
    with pytest.raises(
        ValidationError,
        match=r"^ttnn\.to_memory_config: memory_config: shard spec does not tile the tensor \[1, 1, 160, 256\] "
        r"\(HEIGHT_SHARDED\): expected shard width 256 and at most 4 shards of height 32 covering height 160, "
        r"got shard \(32, 256\) on 4 cores$",
    ):
        ttnn.to_memory_config(t, _height_config(32, 256, 4))
    # a height shard narrower than the tensor
    with pytest.raises(
        ValidationError, match=r"expected shard width 256 .* got shard \(256, 128\) on 1 cores$"
    ):
        ttnn.to_memory_config(t, _height_config(256, 128, 1))
    # the partly filled shard still has to fit in one core's L1: 1024 × 1024 bf16 is 2 MiB
    wide = ttnn.from_numpy(
        np.zeros((1, 1, 32, 1024), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    with pytest.raises(ValidationError, match=r"one L1 shard needs 2,097,152 bytes per core, more than the"):
        ttnn.to_memory_config(wide, _height_config(1024, 1024, 1))


def _galaxy_mlp_gathered_config(hidden_dim):
    """tt-metal's TG MLP decode key: the 4 mesh columns' partial sums, gathered on dim 0, width-sharded on 8 cores."""
    return ttnn.create_sharded_memory_config(
        shape=(32 * 4, hidden_dim // 8 // 8),
        core_grid=ttnn.CoreGrid(y=1, x=8),
        strategy=ttnn.ShardStrategy.WIDTH,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def _all_reduce_to_ccl_dtype(partial, memory_config, dtype=ttnn.bfloat16):
    """The TG all-reduce's first step in tt-metal's style: typecast through L1 interleaved, then to the sharded
    config the gather writes."""
    partial = ttnn.to_memory_config(partial, ttnn.L1_MEMORY_CONFIG, dtype)
    return ttnn.to_memory_config(partial, memory_config, dtype)


def test_a_width_shard_taller_than_the_tensor_is_refused_as_in_ttnn(open_mesh, rng):
    mesh = open_mesh((1, 4))
    hidden_dim = 4096
    config = _galaxy_mlp_gathered_config(hidden_dim)
    w1_out = ttnn.from_numpy(
        rng.standard_normal((1, 1, 32, hidden_dim // 8)).astype(np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
    )
    with pytest.raises(
        ValidationError,
        match=r"^ttnn\.to_memory_config: memory_config: shard spec does not tile the tensor \[1, 1, 32, 512\] "
        r"\(WIDTH_SHARDED\): expected shard height 32 .* got shard \(128, 64\) on 8 cores; ttnn's TensorSpec rule: "
        r"a width shard's height must equal the tensor's physical height \(tile-padded in TILE layout\) \(shard "
        r"height 128 must match physical height 32\), so a width shard taller than the tensor is refused \(only a height or block shard may be "
        r"partly filled\): gather the rows first, or use a shard of height 32$",
    ):
        _all_reduce_to_ccl_dtype(w1_out, config)
    # the gathered tensor (4 partials stacked on dim 0: 128 rows) is what the config was written for
    gathered = ttnn.all_gather(w1_out, dim=0)
    assert list(gathered.shape) == [4, 1, 32, 512]
    fits = ttnn.to_memory_config(gathered, config, ttnn.bfloat16)
    assert fits.memory_config() == config
    tall = ttnn.from_numpy(
        np.zeros((1, 1, 64, 512), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    short = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(config.shard_spec.grid, (32, 64)),
    )
    # a width shard shorter than the tensor is refused too: the rule is cited, without the gather hint
    with pytest.raises(
        ValidationError,
        match=r"got shard \(32, 64\) on 8 cores; ttnn's TensorSpec rule: a width shard's height must equal the "
        r"tensor's physical height \(tile-padded in TILE layout\) \(shard height 32 must match physical height "
        r"64\)$",
    ):
        ttnn.to_memory_config(tall, short)


def test_a_block_shard_may_be_taller_than_the_tensor_too(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    t = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    grid = ttnn.CoreGrid(y=1, x=4).to_core_range_set()
    config = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(grid, (64, 64))
    )
    sharded = ttnn.to_memory_config(t, config)  # one row of 4 shards, each 64 rows tall for 32 rows of data
    np.testing.assert_array_equal(ttnn.to_numpy(sharded), ttnn.to_numpy(t))
    # a 64-row tensor in 32-row shards needs two rows of cores
    tall = ttnn.from_numpy(
        np.zeros((1, 1, 64, 256), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    one_row = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(grid, (32, 64))
    )
    with pytest.raises(
        ValidationError, match=r"expected a 4x1 rectangular grid of 32x64 shards covering 64x256"
    ):
        ttnn.to_memory_config(tall, one_row)
