"""ttnn.Tensor on the emulator: shapes, metadata, storage, movement, arithmetic operators, deallocation."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing import pcc
from tttv2.ttnn import Shape, Tensor, ValidationError
from tttv2.ttnn.placement import TensorTopology
from tttv2.ttnn.tensor import device_bytes, padded_shape_of


def _dev(mesh, x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, **kwargs):
    return ttnn.from_numpy(np.asarray(x, np.float32), dtype=dtype, layout=layout, device=mesh, **kwargs)


# --- Shape ------------------------------------------------------------------------------------------------


def test_shape_compares_with_tuples_and_lists():
    s = Shape([1, 2, 32, 64])
    assert s == (1, 2, 32, 64) and s == [1, 2, 32, 64] and (1, 2, 32, 64) == s  # noqa: SIM300 - reflected
    assert s != [1, 2, 32, 63] and s != (1, 2)
    assert (s != (1, 2, 32, 64)) is False
    assert s != "1, 2, 32, 64" and (s == 5) is False
    assert hash(s) == hash((1, 2, 32, 64))
    assert {s: 1}[(1, 2, 32, 64)] == 1
    assert repr(s) == "Shape([1, 2, 32, 64])" and str(s) == repr(s)
    assert s.rank == 4 and len(s) == 4 and s[-1] == 64
    assert isinstance(s[1:], Shape) and s[1:] == (2, 32, 64)
    assert list(s) == [1, 2, 32, 64]
    assert Shape((np.int64(3),)) == (3,) and isinstance(Shape((np.int64(3),))[0], int)


def test_shape_helpers():
    assert Shape([3, 40]).with_tile_padding() == (32, 64)
    assert Shape([5, 6]).to_rank(4) == (1, 1, 5, 6)
    assert Shape([5, 6]).to_rank(2) == (5, 6)
    with pytest.raises(ValidationError, match=r"to_rank"):
        Shape([1, 2, 3]).to_rank(2)


@pytest.mark.parametrize(
    ("shape", "tile", "row_major"),
    [
        ((5,), (32,), (5,)),
        ((3, 40), (32, 64), (3, 40)),
        ((2, 3, 5), (2, 32, 32), (2, 3, 5)),
        ((1, 1, 32, 64), (1, 1, 32, 64), (1, 1, 32, 64)),
        ((2, 1, 33, 65), (2, 1, 64, 96), (2, 1, 33, 65)),
    ],
)
def test_padded_shape(shape, tile, row_major):
    x = np.zeros(shape, np.float32)
    t = ttnn.from_numpy(x, layout=ttnn.TILE_LAYOUT)
    assert t.shape == shape and t.logical_shape == shape and t.padded_shape == tile
    assert ttnn.from_numpy(x, layout=ttnn.ROW_MAJOR_LAYOUT).padded_shape == row_major
    assert padded_shape_of(shape, ttnn.TILE_LAYOUT) == tile
    assert ttnn.from_numpy(x).layout is ttnn.ROW_MAJOR_LAYOUT  # ttnn's default


def test_explicit_padded_shape_is_kept():
    t = Tensor(
        [np.zeros((1, 1, 4, 32), np.float32)], ttnn.bfloat16, ttnn.TILE_LAYOUT, padded_shape=(1, 1, 64, 32)
    )
    assert t.shape == (1, 1, 4, 32) and t.padded_shape == (1, 1, 64, 32)


def test_device_bytes_of_small_ranks():
    dram = ttnn.DRAM_MEMORY_CONFIG
    assert device_bytes((5,), ttnn.bfloat16, ttnn.TILE_LAYOUT, dram) == 2048  # one tile
    assert device_bytes((), ttnn.float32, ttnn.TILE_LAYOUT, dram) == 4096
    assert device_bytes((), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT, dram) == 4
    assert device_bytes((3, 5), ttnn.uint16, ttnn.ROW_MAJOR_LAYOUT, dram) == 30


# --- metadata ----------------------------------------------------------------------------------------------


def test_host_tensor_metadata(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    t = ttnn.from_numpy(x, dtype=ttnn.bfloat16)
    assert t.dtype is ttnn.bfloat16 and t.get_dtype() is ttnn.bfloat16
    assert t.layout is ttnn.ROW_MAJOR_LAYOUT and t.get_layout() is ttnn.ROW_MAJOR_LAYOUT
    assert t.storage_type() is ttnn.StorageType.HOST
    assert t.device() is None and t.memory_config() is None and not t.is_sharded()
    assert t.shard_spec() is None and t.tensor_topology() is None
    assert t.volume == 6 and t.logical_volume() == 6 and t.num_shards == 1
    assert t.is_allocated()
    assert "host" in repr(t) and "BFLOAT16" in repr(t)


def test_device_tensor_metadata(open_mesh, rng):
    mesh = open_mesh((1, 2))
    t = _dev(mesh, rng.standard_normal((1, 1, 32, 64)), memory_config=ttnn.L1_MEMORY_CONFIG)
    assert t.storage_type() is ttnn.StorageType.DEVICE
    assert t.device() is mesh
    assert t.memory_config() == ttnn.L1_MEMORY_CONFIG and not t.is_sharded()
    assert t.num_shards == 2
    assert t.tensor_topology() == TensorTopology.replicated(mesh.shape)
    assert "INTERLEAVED/L1" in repr(t)
    default = _dev(mesh, np.zeros((32, 32)))
    assert default.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    cfg = ttnn.create_sharded_memory_config((1, 1, 32, 64), ttnn.CoreGrid(x=2, y=1), ttnn.ShardStrategy.WIDTH)
    s = _dev(mesh, np.zeros((1, 1, 32, 64)), memory_config=cfg)
    assert s.is_sharded() and s.shard_spec() == cfg.shard_spec


def test_to_and_cpu(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 32)).astype(np.float32)
    host = ttnn.from_numpy(x, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT)
    dev = host.to(mesh, ttnn.L1_MEMORY_CONFIG)
    assert dev.device() is mesh and dev.memory_config().buffer_type is ttnn.BufferType.L1
    assert dev.shape == host.shape and dev.dtype is host.dtype and dev.layout is host.layout
    back = dev.cpu()
    assert back.device() is None
    assert back.storage_type() is ttnn.StorageType.HOST  # one host buffer per device, host storage as in ttnn
    np.testing.assert_array_equal(ttnn.to_numpy(back), x)
    # already there with that config: the same tensor; another config: moved
    assert dev.to(mesh) is dev and dev.to(mesh, ttnn.L1_MEMORY_CONFIG) is dev
    moved = dev.to(mesh, ttnn.DRAM_MEMORY_CONFIG)
    assert moved.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    np.testing.assert_array_equal(ttnn.to_numpy(moved), x)
    with pytest.raises(ValidationError, match=r"already on"):
        dev.to(open_mesh((1, 1)))
    single = ttnn.from_numpy(x).to(open_mesh((1, 1)))
    assert single.cpu().storage_type() is ttnn.StorageType.HOST


def test_to_layout_and_reshape_methods(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    t = _dev(mesh, x, dtype=ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT)
    tiled = t.to_layout(ttnn.TILE_LAYOUT)
    assert tiled.layout is ttnn.TILE_LAYOUT
    np.testing.assert_array_equal(ttnn.to_numpy(tiled), x)
    r = tiled.reshape(1, 1, 64, 32)
    assert r.shape == (1, 1, 64, 32)
    assert tiled.reshape((1, 32, 64)).shape == (1, 32, 64)
    np.testing.assert_array_equal(ttnn.to_numpy(r), x.reshape(1, 1, 64, 32))
    assert tuple(t.to_torch().shape) == x.shape and t.to_numpy().shape == x.shape


def test_slicing(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 2, 32, 64)).astype(np.float32)
    t = _dev(mesh, x, dtype=ttnn.float32)
    np.testing.assert_array_equal(ttnn.to_numpy(t[:, :, :, :32]), x[:, :, :, :32])
    np.testing.assert_array_equal(ttnn.to_numpy(t[:, 1:2, 0:16, :]), x[:, 1:2, 0:16, :])
    assert t[:, :, :16].shape == (1, 2, 16, 64)


# --- operators ---------------------------------------------------------------------------------------------


def test_arithmetic_operators(open_mesh, rng):
    mesh = open_mesh((1, 2))
    xa = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    xb = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    a, b = _dev(mesh, xa, dtype=ttnn.float32), _dev(mesh, xb, dtype=ttnn.float32)
    cases = [
        (a + b, xa + xb),
        (a - b, xa - xb),
        (a * b, xa * xb),
        (-a, -xa),
        (a + 2.0, xa + 2),
        (2.0 + a, xa + 2),
        (a - 1.5, xa - 1.5),
        (1.5 - a, 1.5 - xa),
        (a * 3, xa * 3),
        (3 * a, xa * 3),
    ]
    for result, expected in cases:
        assert isinstance(result, Tensor) and result.device() is mesh
        np.testing.assert_allclose(ttnn.to_numpy(result), expected, rtol=1e-6, atol=1e-6)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    mm = a @ _dev(mesh, w, dtype=ttnn.float32)
    assert mm.shape == (1, 1, 32, 32)
    assert pcc(xa @ w, ttnn.to_numpy(mm)) > 0.999  # the default compute config is LoFi: not exact


def test_operators_keep_bfloat16(open_mesh):
    mesh = open_mesh((1, 1))
    a = _dev(mesh, np.full((32, 32), 1.0))
    out = a + 2**-9  # 1 + 2^-9 is not a bfloat16: the output rounds back to 1
    assert out.dtype is ttnn.bfloat16
    assert np.all(ttnn.to_numpy(out) == 1.0)


# --- deallocation, closing, read-only shards -------------------------------------------------------------


def test_use_after_deallocate_names_the_op(open_mesh):
    mesh = open_mesh((1, 2))
    a = _dev(mesh, np.ones((1, 1, 32, 32)))
    b = _dev(mesh, np.ones((1, 1, 32, 32)))
    a.deallocate()
    assert not a.is_allocated() and "deallocated" in repr(a)
    uses = {
        "ttnn.add": lambda: a + b,
        "ttnn.subtract": lambda: b - a,
        "ttnn.multiply": lambda: a * 2,
        "ttnn.neg": lambda: -a,
        "ttnn.matmul": lambda: a @ b,
        "ttnn.to_numpy": lambda: ttnn.to_numpy(a),
        "ttnn.to_torch": lambda: ttnn.to_torch(a),
        "ttnn.from_device": lambda: a.cpu(),
        "ttnn.to_device": lambda: a.to(mesh),
        "ttnn.relu": lambda: ttnn.relu(a),
        "ttnn.linear": lambda: ttnn.linear(b, a),
        "ttnn.dump_tensor": lambda: ttnn.dump_tensor("unused.bin", a),
        "Tensor.num_shards": lambda: a.num_shards,
    }
    for op, use in uses.items():
        with pytest.raises(ValidationError, match=rf"{op}.*deallocated"):
            use()
    a.deallocate()  # twice is harmless
    ttnn.deallocate(b)
    with pytest.raises(ValidationError, match=r"deallocated"):
        ttnn.to_numpy(b)


def test_closed_device_makes_tensors_unusable(open_mesh):
    mesh = open_mesh((1, 1))
    a = _dev(mesh, np.ones((32, 32)))
    ttnn.close_mesh_device(mesh)
    with pytest.raises(ValidationError, match=r"closed"):
        ttnn.to_numpy(a)
    with pytest.raises(ValidationError, match=r"ttnn\.add.*closed"):
        a + 1


def test_shards_are_read_only_and_shared(open_mesh):
    mesh = open_mesh((1, 4))
    src = np.ones((32, 32), np.float32)
    t = _dev(mesh, src, dtype=ttnn.float32)
    shards = t.shards("test")
    assert all(not s.flags.writeable for s in shards)
    with pytest.raises(ValueError, match=r"read-only"):
        shards[0][0, 0] = 5
    src[0, 0] = 7  # the tensor does not alias the caller's array
    assert ttnn.to_numpy(t)[0, 0] == 1
    # replicated shards share one buffer; an in-place op gets a private copy of its shard
    assert shards[0] is shards[1]
    w = t._writable_shard(0, "test")
    w[0, 0] = 9
    assert t.shards()[0][0, 0] == 9 and t.shards()[1][0, 0] == 1
    assert t._writable_shard(0, "test") is w  # already private
    host = ttnn.from_numpy(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"read-only"):
        host.shards()[0][0] = 1


def test_block_float_needs_tile_layout(open_mesh):
    for dtype in (ttnn.bfloat8_b, ttnn.bfloat4_b):
        with pytest.raises(ValidationError, match=r"TILE"):
            ttnn.from_numpy(np.zeros((32, 32), np.float32), dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT)
        with pytest.raises(ValidationError, match=r"TILE"):
            ttnn.from_numpy(np.zeros((32, 32), np.float32), dtype=dtype)  # ROW_MAJOR is the default
        with pytest.raises(ValidationError, match=r"requires TILE"):
            Tensor([np.zeros((32, 32), np.float32)], dtype, ttnn.ROW_MAJOR_LAYOUT)


def test_tensor_constructor_validation(open_mesh):
    mesh = open_mesh((1, 2))
    z = np.zeros((2, 2), np.float32)
    with pytest.raises(ValidationError, match=r"at least one shard"):
        Tensor([], ttnn.float32)
    with pytest.raises(ValidationError, match=r"dtype must be"):
        Tensor(z, "float32")
    with pytest.raises(ValidationError, match=r"layout must be"):
        Tensor(z, ttnn.float32, "TILE")
    with pytest.raises(ValidationError, match=r"one shape"):
        Tensor([z, np.zeros((2, 3), np.float32)], ttnn.float32)
    with pytest.raises(ValidationError, match=r"needs a topology"):
        Tensor([z, z], ttnn.float32)
    with pytest.raises(ValidationError, match=r"MeshDevice"):
        Tensor([z], ttnn.float32, device="device0")
    with pytest.raises(ValidationError, match=r"has 2 devices, got 1 shards"):
        Tensor([z], ttnn.float32, device=mesh)
    with pytest.raises(ValidationError, match=r"memory_config must be"):
        Tensor([z, z], ttnn.float32, device=mesh, memory_config="L1")
    closed = open_mesh((1, 1))
    ttnn.close_mesh_device(closed)
    with pytest.raises(ValidationError, match=r"closed"):
        Tensor([z], ttnn.float32, device=closed)
    t = Tensor(z, ttnn.float32)  # a bare array is one host shard
    assert t.storage_type() is ttnn.StorageType.HOST


def test_shard_spec_that_does_not_tile_the_tensor_is_rejected(open_mesh):
    mesh = open_mesh((1, 1))
    grid = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(3, 0))})
    x = np.zeros((1, 1, 32, 256), np.float32)
    cases = [
        (ttnn.TensorMemoryLayout.WIDTH_SHARDED, (32, 32), "covering width 256"),  # 4 x 32 < 256
        (ttnn.TensorMemoryLayout.WIDTH_SHARDED, (64, 64), "shard height 32"),  # wrong height
        (ttnn.TensorMemoryLayout.HEIGHT_SHARDED, (32, 128), "shard width 256"),
        (ttnn.TensorMemoryLayout.WIDTH_SHARDED, (32, 48), "multiple of the 32"),  # not tile aligned
        (ttnn.TensorMemoryLayout.BLOCK_SHARDED, (32, 32), "rectangular grid"),
    ]
    for layout, shard, message in cases:
        cfg = ttnn.MemoryConfig(layout, ttnn.BufferType.L1, ttnn.ShardSpec(grid, shard))
        with pytest.raises(ValidationError, match=rf"ttnn\.from_numpy: memory_config: .*{message}"):
            _dev(mesh, x, memory_config=cfg)
        host = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
        with pytest.raises(ValidationError, match=rf"ttnn\.to_device: memory_config: .*{message}"):
            ttnn.to_device(host, mesh, memory_config=cfg)
    # spare cores may stay empty, as on hardware: 4 cores, width 256 in 2 shards of 128
    ok = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(grid, (32, 128))
    )
    assert _dev(mesh, x, memory_config=ok).is_sharded()
    # a DRAM-sharded tensor is fine and uses no L1
    dram = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.DRAM, ttnn.ShardSpec(grid, (32, 64))
    )
    assert _dev(mesh, x, memory_config=dram).memory_config().buffer_type is ttnn.BufferType.DRAM


def test_block_sharded_orientation_and_per_core_limit(open_mesh):
    mesh = open_mesh((1, 1))
    x = np.zeros((1, 1, 64, 128), np.float32)
    grid = ttnn.CoreGrid(x=4, y=2).to_core_range_set()
    row = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(grid, (32, 32))
    )
    assert _dev(mesh, x, memory_config=row).is_sharded()
    col = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(grid, (32, 64), ttnn.ShardOrientation.COL_MAJOR),
    )
    with pytest.raises(
        ValidationError, match=r"2x4 rectangular grid"
    ):  # COL_MAJOR: 4 rows of 32 cover 64, 2 cols of 64 do not cover 128
        _dev(mesh, np.zeros((1, 1, 64, 256), np.float32), memory_config=col)
    assert _dev(mesh, np.zeros((1, 1, 128, 128), np.float32), memory_config=col).is_sharded()
    big = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(ttnn.CoreGrid(x=1, y=1).to_core_range_set(), (1024, 1024)),
    )
    with pytest.raises(ValidationError, match=r"bytes per core"):
        _dev(mesh, np.zeros((1024, 1024), np.float32), memory_config=big)


def test_row_major_sharding(open_mesh):
    mesh = open_mesh((1, 1))
    grid = ttnn.CoreGrid(x=3, y=1).to_core_range_set()
    cfg = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(grid, (5, 8))
    )
    t = _dev(mesh, np.zeros((15, 8)), layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=cfg)
    assert t.memory_config() == cfg


def test_sharded_config_without_spec_gets_one(open_mesh):
    mesh = open_mesh((1, 1))
    for cfg, shard in [
        (ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG, (64, 32)),
        (ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG, (32, 256)),
        (ttnn.L1_BLOCK_SHARDED_MEMORY_CONFIG, (32, 32)),
    ]:
        t = _dev(mesh, np.zeros((1, 1, 64, 256)), memory_config=cfg)
        spec = t.shard_spec()
        assert t.memory_config().memory_layout is cfg.memory_layout and spec.shape == shard
    t = _dev(mesh, np.zeros((1, 1, 32, 96)), memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert t.shard_spec().num_cores() == 3


def test_host_deallocate_and_odd_sharding(open_mesh):
    host = ttnn.from_numpy(np.zeros(3, np.float32))
    host.deallocate()
    with pytest.raises(ValidationError, match=r"deallocated"):
        ttnn.to_numpy(host)
    mesh = open_mesh((1, 1))
    # 65 tiles of width: the chosen grid is the largest divisor that fits the 8x8 cores (13)
    t = _dev(mesh, np.zeros((1, 1, 32, 65 * 32)), memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert t.shard_spec().num_cores() == 13 and t.shard_spec().shape == (32, 160)
    scalar = ttnn.from_numpy(
        np.array(2.0, np.float32), device=mesh, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG
    )
    assert scalar.shape == () and scalar.shard_spec().shape == (1, 1)


def test_shape_with_a_padded_shape():
    """The older two-argument ``ttnn.Shape(logical, padded)`` (the Llama-2-70B T3000 attention reshapes its fused
    QKV to ``ttnn.Shape((1, 1, 32, d), (1, 1, 32, d))``): the shape is the logical one; the padded shape must be it
    or its tile padding, since the emulator pads by layout alone."""
    assert ttnn.Shape((1, 1, 32, 64), (1, 1, 32, 64)) == [1, 1, 32, 64]
    assert ttnn.Shape([1, 1, 7, 40], [1, 1, 32, 64]) == [1, 1, 7, 40]
    with pytest.raises(ttnn.ValidationError, match=r"ttnn.Shape: padded_shape \[1, 1, 64, 64\] must be"):
        ttnn.Shape([1, 1, 32, 64], [1, 1, 64, 64])
