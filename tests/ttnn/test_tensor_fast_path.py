"""The decode fast path of tensor construction (docs/performance.md, branch ``decodeops``): what it remembers
between tensors must never change which memory config a tensor gets, what it costs on the device, or which
configs are refused."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError
from tttv2.ttnn import tensor as tensor_module
from tttv2.ttnn.tensor import device_bytes, resolve_shard_spec, validate_memory_config


def _width_config(rows, width, cores, buffer=ttnn.BufferType.L1):
    return ttnn.create_sharded_memory_config(
        shape=(rows, width),
        core_grid=ttnn.CoreGrid(y=1, x=cores),
        strategy=ttnn.ShardStrategy.WIDTH,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def _l1_used(mesh):
    return [r["l1_used"] for r in mesh.memory_report()]


@pytest.fixture
def fresh_placements(monkeypatch):
    monkeypatch.setattr(tensor_module, "_PLACEMENTS", {})
    return tensor_module._PLACEMENTS


def test_a_spec_less_sharded_config_resolves_per_shape(open_mesh, rng, fresh_placements):
    # tt-metal's decode code passes L1_WIDTH_SHARDED_MEMORY_CONFIG (no shard spec) for tensors of several widths:
    # each width gets its own grid, also when the same config object was resolved for another width before
    mesh = open_mesh((1, 2))
    spec_less = ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG
    for width in (256, 96, 256, 2048, 96):
        x = rng.standard_normal((1, 1, 32, width)).astype(np.float32)
        before = _l1_used(mesh)
        t = ttnn.from_numpy(
            x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=spec_less
        )
        expected = resolve_shard_spec(spec_less, t.shape, ttnn.TILE_LAYOUT, mesh, "test")
        assert t.memory_config() == expected
        assert expected.shard_spec.shape[1] * expected.shard_spec.num_cores() >= width
        nbytes = device_bytes(t.shape, ttnn.bfloat16, ttnn.TILE_LAYOUT, expected)
        assert [u - b for u, b in zip(_l1_used(mesh), before)] == [nbytes, nbytes]
        t.deallocate()
    # one remembered placement per (config, shape): three widths, whatever the order they came in
    assert {key[1][-1] for key in fresh_placements if key[0] == spec_less} == {256, 96, 2048}


def test_a_refused_placement_is_refused_every_time(open_mesh, rng, fresh_placements):
    mesh = open_mesh((1, 2))
    config = _width_config(32, 64, 4)  # 4 cores x 64 columns: a 256-wide tensor fits, a 512-wide one does not
    fits = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    too_wide = rng.standard_normal((1, 1, 32, 512)).astype(np.float32)
    for _ in range(2):
        t = ttnn.from_numpy(
            fits, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=config
        )
        assert t.memory_config() == config
        for _attempt in range(2):
            with pytest.raises(
                ValidationError, match=r"shard spec does not tile the tensor \[1, 1, 32, 512\]"
            ):
                ttnn.from_numpy(
                    too_wide, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=config
                )
    assert all(key[1] == (1, 1, 32, 256) for key in fresh_placements if key[0] == config)


def test_the_dtype_is_part_of_a_placement(open_mesh, rng, fresh_placements):
    # one L1 shard of 32 x 12288 values: 0.4 MB in bfloat8_b fits a core, 1.5 MB in float32 does not
    mesh = open_mesh((1, 1))
    config = _width_config(32, 12288, 1)
    x = rng.standard_normal((1, 1, 32, 12288)).astype(np.float32)
    small = ttnn.from_numpy(
        x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=config
    )
    assert small.memory_config() == config
    with pytest.raises(ValidationError, match="bytes per core"):
        validate_memory_config(config, small.shape, ttnn.TILE_LAYOUT, ttnn.float32, "direct")
    with pytest.raises(ValidationError, match="bytes per core"):
        ttnn.from_numpy(x, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=config)


def test_the_placement_memory_is_bounded(open_mesh, rng, fresh_placements, monkeypatch):
    monkeypatch.setattr(tensor_module, "_PLACEMENTS_MAX", 3)
    mesh = open_mesh((1, 1))
    for rows in (32, 64, 96, 128, 160):
        t = ttnn.from_numpy(
            rng.standard_normal((1, 1, rows, 64)).astype(np.float32),
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
        )
        assert t.memory_config() == ttnn.DRAM_MEMORY_CONFIG
        assert len(fresh_placements) <= 3
    assert len(fresh_placements) >= 1


def _dram_used(mesh):
    return [r["dram_used"] for r in mesh.memory_report()]


@pytest.mark.parametrize("limit", [1, 256])
def test_each_mesh_accounts_its_own_tensors(rng, monkeypatch, limit):
    # the allocators of a mesh's devices are looked up once per mesh and buffer type; a mesh opened after another
    # was closed (possibly at the same address) must be charged itself, also when the lookup memory overflows
    monkeypatch.setattr(tensor_module, "_ALLOCATORS", {})
    monkeypatch.setattr(tensor_module, "_ALLOCATORS_MAX", limit)
    x = rng.standard_normal((1, 1, 64, 32)).astype(np.float32)
    for shape in ((1, 2), (2, 2), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        other = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
        try:
            before, before_other = _dram_used(mesh), _dram_used(other)
            t = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
            l1 = ttnn.from_numpy(
                x,
                dtype=ttnn.bfloat16,
                layout=ttnn.TILE_LAYOUT,
                device=other,
                memory_config=ttnn.L1_MEMORY_CONFIG,
            )
            assert [u - b for u, b in zip(_dram_used(mesh), before)] == [64 * 32 * 2] * mesh.get_num_devices()
            assert _dram_used(other) == before_other and other.memory_report()[0]["l1_used"] == 64 * 32 * 2
            t.deallocate()
            l1.deallocate()
            assert _dram_used(mesh) == before and other.memory_report()[0]["l1_used"] == 0
        finally:
            ttnn.close_mesh_device(other)
            ttnn.close_mesh_device(mesh)
    assert len(tensor_module._ALLOCATORS) <= max(limit, 2)


def _values(t):
    return [np.array(s) for s in t.shards()]


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b, ttnn.float32])
def test_moves_share_the_stored_values_and_writes_stay_private(open_mesh, rng, dtype):
    # a decode step moves activations between DRAM and L1 and reshapes them several times per layer: the output
    # holds the input's stored shards (no unpack and pack), and writing into either tensor leaves the other alone
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    t = ttnn.from_numpy(
        x,
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    original = _values(t)
    moved = [
        ttnn.to_memory_config(t, ttnn.L1_MEMORY_CONFIG),
        ttnn.to_memory_config(t, ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG),
        ttnn.clone(t),
        ttnn.to_layout(t, ttnn.TILE_LAYOUT, memory_config=ttnn.L1_MEMORY_CONFIG),
    ]
    if (
        dtype is not ttnn.float32
    ):  # float32 shards are copied by the output as before (quantising copies them)
        for m in moved:
            assert all(a is b for a, b in zip(m.stored_shards(), t.stored_shards()))
    reshaped = ttnn.reshape(t, (1, 32, 128))
    flat = ttnn.reshape(t, (1, 1, 1, 32 * 128))  # a block float re-blocks: as packing the reshaped values
    for m in moved:
        assert all(np.array_equal(a, b) for a, b in zip(_values(m), original))
    for r, shape in ((reshaped, (1, 32, 128)), (flat, (1, 1, 1, 4096))):
        expected = ttnn.from_numpy(
            np.concatenate([o.reshape(shape) for o in original], axis=0),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
        )
        assert all(np.array_equal(a, b) for a, b in zip(_values(r), _values(expected)))
    # an in-place write into one of them (a host-to-device copy) changes that one only
    host = ttnn.from_numpy(np.ones((1, 1, 32, 128), np.float32), dtype=dtype, layout=ttnn.TILE_LAYOUT)
    ttnn.copy_host_to_device_tensor(host, moved[0])
    assert all(np.array_equal(v, np.ones((1, 1, 32, 128))) for v in _values(moved[0]))
    for other in (t, *moved[1:]):
        assert all(np.array_equal(a, b) for a, b in zip(_values(other), original))


def _replicated_over_rows(mesh, values, dtype):
    """A [rows x cols] mesh tensor split over the columns (dim 3) and replicated over the rows, each column's
    piece one array shared by the rows' devices (as the result of a reduction over the rows is held)."""
    rows, cols = tuple(mesh.shape)
    pieces = np.split(values, cols, axis=3)
    per_column = [ttnn.from_numpy(p, dtype=dtype, layout=ttnn.TILE_LAYOUT).stored_shards()[0] for p in pieces]
    shards = [per_column[c] for _r in range(rows) for c in range(cols)]
    return ttnn.Tensor(
        shards,
        dtype,
        ttnn.TILE_LAYOUT,
        mesh,
        topology=ttnn.TensorTopology(mesh.shape, (ttnn.PlacementReplicate(), ttnn.PlacementShard(3))),
    )


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_replicated_shards_are_computed_once_with_the_same_bits(open_mesh, rng, dtype):
    # 8x4 decode: what a reduction over the mesh rows leaves is one array per column; elementwise ops and the CCLs
    # over the columns compute it once per column, and every device still gets what it would compute alone
    mesh = open_mesh((2, 4))
    a_values = rng.standard_normal((1, 1, 32, 512)).astype(np.float32)
    b_values = rng.standard_normal((1, 1, 32, 512)).astype(np.float32)
    a = _replicated_over_rows(mesh, a_values, dtype)
    b = _replicated_over_rows(mesh, b_values, dtype)
    a_cols = [ttnn.to_numpy(ttnn.get_device_tensors(a)[c]) for c in range(4)]
    b_cols = [ttnn.to_numpy(ttnn.get_device_tensors(b)[c]) for c in range(4)]

    total = ttnn.add(a, b)
    gathered = ttnn.all_gather(a, dim=3, cluster_axis=1)
    scattered = ttnn.reduce_scatter(a, dim=3, cluster_axis=1)
    reduced = ttnn.all_reduce(a, cluster_axis=1)
    for out in (total, gathered, scattered, reduced):
        stored = out.stored_shards()
        assert all(stored[4 + c] is stored[c] for c in range(4))  # row 1 holds row 0's results

    # the values: what each device's inputs give, computed here device by device
    quantise = lambda v: ttnn.to_numpy(ttnn.from_numpy(v, dtype=dtype, layout=ttnn.TILE_LAYOUT))  # noqa: E731
    row_sum = a_cols[0].copy()
    for c in range(1, 4):
        row_sum += a_cols[c]
    for i, device in enumerate(ttnn.get_device_tensors(total)):
        np.testing.assert_array_equal(ttnn.to_numpy(device), quantise(a_cols[i % 4] + b_cols[i % 4]))
    for device in ttnn.get_device_tensors(gathered):
        np.testing.assert_array_equal(ttnn.to_numpy(device), np.concatenate(a_cols, axis=3))
    for i, device in enumerate(ttnn.get_device_tensors(scattered)):
        np.testing.assert_array_equal(ttnn.to_numpy(device), quantise(np.split(row_sum, 4, axis=3)[i % 4]))
    for device in ttnn.get_device_tensors(reduced):
        np.testing.assert_array_equal(ttnn.to_numpy(device), quantise(row_sum))


@pytest.mark.parametrize(
    ("dims", "distinct"),
    [(None, 1), ((None, 3), 4), ((2, None), 2), ((2, 3), 8)],
)
def test_a_mesh_mapper_holds_each_replica_once(open_mesh, rng, dims, distinct):
    # a tensor replicated over a mesh axis (tt-metal's norm weights, KV caches, the Galaxy embedding table over
    # the 8 rows) is one array per distinct piece: packed once, and ops on it compute it once
    import torch

    mesh = open_mesh((2, 4))
    x = torch.from_numpy(rng.standard_normal((1, 1, 128, 256)).astype(np.float32))
    mapper = (
        ttnn.ReplicateTensorToMesh(mesh)
        if dims is None
        else ttnn.ShardTensor2dMesh(mesh, dims=dims, mesh_shape=(2, 4))
    )
    t = ttnn.from_torch(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper)
    assert len({id(s) for s in t.stored_shards()}) == distinct
    # every device's values are its piece of x, as a mapper without sharing would give
    quantised = ttnn.to_numpy(ttnn.from_torch(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT))
    for i, device in enumerate(ttnn.get_device_tensors(t)):
        piece = quantised
        r, c = divmod(i, 4)
        if dims is not None and dims[0] is not None:
            piece = np.split(piece, 2, axis=dims[0])[r]
        if dims is not None and dims[1] is not None:
            piece = np.split(piece, 4, axis=dims[1])[c]
        np.testing.assert_array_equal(ttnn.to_numpy(device), piece)


def test_a_replicated_cache_takes_each_devices_own_writes(open_mesh, rng):
    # a KV cache made by replicating zeros over the mesh, then written per device with different values (each
    # device's own heads): each device's cache holds its own writes and nothing of the others'
    import torch

    mesh = open_mesh((1, 4))
    cache = ttnn.from_torch(
        torch.zeros(32, 1, 64, 32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    assert len({id(s) for s in cache.stored_shards()}) == 1
    values = rng.standard_normal((1, 1, 32, 4 * 32)).astype(np.float32)
    update = ttnn.from_numpy(
        values,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, 3),
    )
    ttnn.update_cache(cache, update, 5)
    quantised = ttnn.to_numpy(ttnn.from_numpy(values, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT))
    for i, device in enumerate(ttnn.get_device_tensors(cache)):
        got = ttnn.to_numpy(device)
        np.testing.assert_array_equal(got[:, 0, 5, :], quantised[0, 0, :, 32 * i : 32 * (i + 1)])
        got[:, 0, 5, :] = 0
        assert not got.any()
