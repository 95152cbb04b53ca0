"""Host ↔ device movement and distribution: mappers, composers, torch/numpy I/O, serialisation, the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn import ValidationError
from tttv2.ttnn.placement import PlacementReplicate, PlacementShard, TensorTopology

MESHES = [(1, 8), (2, 4), (8, 4)]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _shards(t):
    return [np.asarray(s) for s in t.shards("test")]


# --- mappers and composers --------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1])
def test_shard_to_mesh_round_trip(open_mesh, mesh_shape, dim):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    shape = [2, 3, 4, 5]
    shape[dim] = n * 2
    x = _x(shape)
    t = ttnn.from_numpy(x, dtype=ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=dim))
    expected_shard = list(shape)
    expected_shard[dim] = 2
    assert t.shape == tuple(expected_shard)
    # device i (row-major over the mesh) holds the i-th slice
    for i, shard in enumerate(_shards(t)):
        np.testing.assert_array_equal(shard, np.split(x, n, axis=dim)[i])
    back = ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=dim))
    np.testing.assert_array_equal(back, x)
    assert t.tensor_topology().placements() == [PlacementShard(dim)]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dims", [(0, 1), (2, 3), (3, 2), (1, 3)])
def test_shard_2d_round_trip(open_mesh, mesh_shape, dims):
    mesh = open_mesh(mesh_shape)
    rows, cols = mesh_shape
    shape = [1, 2, 3, 4]
    shape[dims[0]] = rows * 2
    shape[dims[1]] = cols * 3
    x = _x(shape)
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=dims, mesh_shape=mesh_shape)
    t = ttnn.from_numpy(x, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper)
    shards = _shards(t)
    for r in range(rows):
        for c in range(cols):
            expected = np.split(np.split(x, rows, axis=dims[0])[r], cols, axis=dims[1])[c]
            np.testing.assert_array_equal(shards[r * cols + c], expected)
    composer = ttnn.ConcatMesh2dToTensor(mesh, dims=dims, mesh_shape=mesh_shape)
    np.testing.assert_array_equal(ttnn.to_numpy(t, mesh_composer=composer), x)
    np.testing.assert_array_equal(ttnn.to_torch(t, mesh_composer=composer).numpy(), x)
    assert t.tensor_topology() == TensorTopology(
        ttnn.MeshShape(rows, cols), (PlacementShard(dims[0]), PlacementShard(dims[1]))
    )


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_shard_2d_with_replication(open_mesh, mesh_shape):
    mesh = open_mesh(mesh_shape)
    rows, cols = mesh_shape
    x = _x((1, 1, 32, cols * 32))
    t = ttnn.from_numpy(
        x, device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=mesh.shape)
    )
    assert t.shape == (1, 1, 32, 32)
    shards = _shards(t)
    for r in range(rows):
        for c in range(cols):
            np.testing.assert_array_equal(shards[r * cols + c], x[..., c * 32 : (c + 1) * 32])
    # concatenating the replicated rows too gives rows copies along dim 0
    both = ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 3), mesh_shape=mesh_shape))
    np.testing.assert_array_equal(both, np.concatenate([x] * rows, axis=0))
    rows_only = ttnn.from_numpy(
        x[..., :32], device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (None, None), mesh_shape)
    )
    assert all(np.array_equal(s, x[..., :32]) for s in _shards(rows_only))
    assert ttnn.to_numpy(rows_only).shape == (1, 1, 32, 32)  # fully replicated: no composer needed


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_mesh_mapper_config(open_mesh, mesh_shape):
    mesh = open_mesh(mesh_shape)
    rows, cols = mesh_shape
    n = rows * cols
    x = _x((rows * 2, 1, 8, cols * 2))
    cfg = ttnn.MeshMapperConfig([ttnn.PlacementShard(0), ttnn.PlacementShard(-1)])
    t = ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.create_mesh_mapper(mesh, cfg))
    assert t.shape == (2, 1, 8, 2)
    composer = ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig([0, -1]))
    np.testing.assert_array_equal(ttnn.to_numpy(t, mesh_composer=composer), x)
    rep = ttnn.MeshMapperConfig([ttnn.PlacementReplicate(), ttnn.PlacementShard(3)])
    t2 = ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.create_mesh_mapper(mesh, rep))
    s2 = _shards(t2)
    for r in range(rows):  # every mesh row holds the same column shards
        for c in range(cols):
            np.testing.assert_array_equal(s2[r * cols + c], x[..., 2 * c : 2 * c + 2])
    # mesh_shape_override: distribute over a 1-D view of the mesh
    y = _x((1, 1, 4, n * 2))
    flat = ttnn.MeshMapperConfig([ttnn.PlacementShard(3)], mesh_shape_override=ttnn.MeshShape([n]))
    t3 = ttnn.from_numpy(y, device=mesh, mesh_mapper=ttnn.create_mesh_mapper(mesh, flat))
    assert t3.shape == (1, 1, 4, 2)
    for i, shard in enumerate(_shards(t3)):
        np.testing.assert_array_equal(shard, y[..., 2 * i : 2 * i + 2])
    flat_composer = ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig([3], mesh_shape_override=[n]))
    np.testing.assert_array_equal(ttnn.to_numpy(t3, mesh_composer=flat_composer), y)
    np.testing.assert_array_equal(ttnn.to_numpy(t3, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3)), y)


def test_mapper_aliases_and_repr(open_mesh):
    mesh = open_mesh((1, 4))
    x = _x((1, 1, 4, 8))
    a = ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.shard_tensor_to_mesh_mapper(mesh, 3))
    b = ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.replicate_tensor_to_mesh_mapper(mesh))
    assert a.shape == (1, 1, 4, 2) and b.shape == (1, 1, 4, 8)
    np.testing.assert_array_equal(
        ttnn.to_numpy(a, mesh_composer=ttnn.concat_mesh_to_tensor_composer(mesh, 3)), x
    )
    assert "PlacementShard(3)" in repr(ttnn.ShardTensorToMesh(mesh, dim=3))
    assert repr(ttnn.PlacementReplicate()) == "PlacementReplicate()"
    cfg = ttnn.MeshMapperConfig([ttnn.PlacementShard(1)], mesh_shape_override=(4,))
    assert cfg.mesh_shape_override == ttnn.MeshShape([4]) and "PlacementShard(1)" in repr(cfg)
    assert ttnn.MeshMapperConfig([ttnn.PlacementShard(1)]) == ttnn.MeshMapperConfig((ttnn.PlacementShard(1),))
    assert "placements" in repr(TensorTopology.replicated(mesh.shape))


def test_replicate_to_mesh(open_mesh):
    mesh = open_mesh((2, 4))
    x = _x((1, 1, 32, 32))
    t = ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    shards = _shards(t)
    assert len(shards) == 8 and all(np.array_equal(s, shards[0]) for s in shards)
    np.testing.assert_array_equal(ttnn.to_numpy(t), shards[0])
    assert t.tensor_topology().placements() == [PlacementReplicate()]


def test_mapper_errors(open_mesh):
    mesh = open_mesh((2, 4))
    x = _x((2, 3, 7, 16))
    with pytest.raises(
        ValidationError, match=r"dim 2 of size 7 \(tensor \[2, 3, 7, 16\]\) does not divide into 8 shards"
    ):
        ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2))
    with pytest.raises(
        ValidationError, match=r"dim 1 of size 3 .* does not divide into 4 shards over mesh axis 1"
    ):
        ttnn.from_numpy(
            x, device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(0, 1), mesh_shape=(2, 4))
        )
    with pytest.raises(ValidationError, match=r"shard dim 4 is out of range for a rank-4"):
        ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=4))
    with pytest.raises(ValidationError, match=r"dims must be a pair"):
        ttnn.ShardTensor2dMesh(mesh, dims=(0,), mesh_shape=(2, 4))
    with pytest.raises(ValidationError, match=r"mesh_shape \(4, 2\) does not match the mesh \(2, 4\)"):
        ttnn.ShardTensor2dMesh(mesh, dims=(0, 1), mesh_shape=(4, 2))
    assert ttnn.ShardTensor2dMesh(mesh, dims=(0, 1)).distribution_shape == (2, 4)  # defaults to the mesh
    with pytest.raises(ValidationError, match=r"must be PlacementShard/PlacementReplicate"):
        ttnn.MeshMapperConfig([0])
    with pytest.raises(ValidationError, match=r"1 placements for a 2-D mesh_shape_override"):
        ttnn.MeshMapperConfig([ttnn.PlacementShard(0)], mesh_shape_override=(2, 4))
    with pytest.raises(ValidationError, match=r"1 placements for the 2-D mesh"):
        ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig([ttnn.PlacementShard(0)]))
    with pytest.raises(ValidationError, match=r"config must be a MeshMapperConfig"):
        ttnn.create_mesh_mapper(mesh, [ttnn.PlacementShard(0)])
    with pytest.raises(ValidationError, match=r"has 4 devices, the mesh has 8"):
        ttnn.create_mesh_mapper(
            mesh, ttnn.MeshMapperConfig([ttnn.PlacementShard(0)], mesh_shape_override=[4])
        )
    with pytest.raises(ValidationError, match=r"mesh_device must be a MeshDevice"):
        ttnn.ShardTensorToMesh("mesh", dim=0)
    for make in (
        lambda: ttnn.ConcatMeshToTensor(None, dim=0),
        lambda: ttnn.ReplicateTensorToMesh(None),
        lambda: ttnn.ShardTensor2dMesh(None, dims=(0, 1), mesh_shape=(2, 4)),
        lambda: ttnn.ConcatMesh2dToTensor(None, dims=(0, 1)),
        lambda: ttnn.create_mesh_mapper(None, ttnn.MeshMapperConfig([ttnn.PlacementShard(0)])),
        lambda: ttnn.create_mesh_composer(None, ttnn.MeshComposerConfig([0])),
    ):
        with pytest.raises(ValidationError, match=r"mesh_device must be a MeshDevice, got NoneType"):
            make()
    with pytest.raises(ValidationError, match=r"dim must be an int"):
        ttnn.PlacementShard("0")
    from tttv2.ttnn.distribution import TensorToMesh

    with pytest.raises(ValidationError, match=r"2 placements for a 1-D distribution shape"):
        TensorToMesh(mesh, (PlacementShard(0), PlacementShard(1)), ttnn.MeshShape([8]))
    with pytest.raises(ValidationError, match=r"mesh mapper: mesh_device must be a MeshDevice"):
        TensorToMesh("mesh", (PlacementShard(0),), ttnn.MeshShape([8]))


def test_composer_errors(open_mesh):
    mesh = open_mesh((2, 4))
    t = ttnn.from_numpy(_x((8, 4)), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    with pytest.raises(ValidationError, match=r"dims must be a pair"):
        ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 1, 2), mesh_shape=(2, 4))
    with pytest.raises(ValidationError, match=r"the two dims must differ"):
        ttnn.ConcatMesh2dToTensor(mesh, dims=(1, 1), mesh_shape=(2, 4))
    with pytest.raises(ValidationError, match=r"1 dims for a 2-D mesh shape"):
        ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig([0]))
    with pytest.raises(ValidationError, match=r"config must be a MeshComposerConfig"):
        ttnn.create_mesh_composer(mesh, [0])
    small = open_mesh((1, 2))
    with pytest.raises(ValidationError, match=r"expected 2 device shards .* got 8"):
        ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(small, dim=0))
    with pytest.raises(ValidationError, match=r"mesh_composer must be a ttnn mesh composer"):
        ttnn.to_numpy(t, mesh_composer=0)
    # no composer on a sharded tensor: a clear error that says what to pass
    for fn in (ttnn.to_numpy, ttnn.to_torch):
        with pytest.raises(ValidationError, match=r"distributed over 8 devices .* pass mesh_composer="):
            fn(t)
    c2 = ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 1))  # mesh_shape defaults to the mesh's
    assert ttnn.to_numpy(t, mesh_composer=c2).shape == (2, 16)


# --- torch / numpy I/O -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ttnn_dtype", "layout", "torch_dtype"),
    [
        (ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT, torch.bfloat16),
        (ttnn.float32, ttnn.TILE_LAYOUT, torch.float32),
        (ttnn.bfloat8_b, ttnn.TILE_LAYOUT, torch.float32),
        (ttnn.bfloat4_b, ttnn.TILE_LAYOUT, torch.float32),
        (ttnn.int32, ttnn.ROW_MAJOR_LAYOUT, torch.int32),
        (ttnn.uint8, ttnn.ROW_MAJOR_LAYOUT, torch.uint8),
    ],
)
def test_to_torch_dtypes(open_mesh, ttnn_dtype, layout, torch_dtype):
    mesh = open_mesh((1, 2))
    src = torch.arange(64, dtype=torch.float32).reshape(2, 32) % 7
    t = ttnn.from_torch(src, dtype=ttnn_dtype, layout=layout, device=mesh)
    out = ttnn.to_torch(t)
    assert out.dtype == torch_dtype and tuple(out.shape) == (2, 32)
    assert torch.equal(out.float(), src)  # small integers are exact in every dtype
    assert ttnn.to_torch(t, dtype=torch.float64).dtype == torch.float64
    assert t.to_torch().dtype == torch_dtype


def test_unsigned_to_torch_keeps_values():
    t = ttnn.from_numpy(np.array([0, 2**32 - 1], np.uint32))
    out = ttnn.to_torch(t)
    assert not out.dtype.is_floating_point and out.tolist() == [0, 2**32 - 1]
    t16 = ttnn.from_numpy(np.array([0, 65535], np.uint16))
    assert ttnn.to_torch(t16).tolist() == [0, 65535]


@pytest.mark.parametrize(
    ("torch_dtype", "ttnn_dtype"),
    [
        (torch.bfloat16, ttnn.bfloat16),
        (torch.float16, ttnn.bfloat16),
        (torch.float32, ttnn.float32),
        (torch.float64, ttnn.float32),
        (torch.int32, ttnn.int32),
        (torch.int64, ttnn.int32),
        (torch.uint8, ttnn.uint8),
        (torch.bool, ttnn.uint8),
    ],
)
def test_from_torch_infers_dtype(torch_dtype, ttnn_dtype):
    t = ttnn.from_torch(torch.ones(2, 3, dtype=torch_dtype))
    assert t.dtype is ttnn_dtype and t.storage_type() is ttnn.StorageType.HOST
    assert np.all(ttnn.to_numpy(t) == 1)


@pytest.mark.parametrize(
    ("np_dtype", "ttnn_dtype"),
    [
        (np.float32, ttnn.float32),
        (np.float64, ttnn.float32),
        (np.float16, ttnn.bfloat16),
        ("bfloat16", ttnn.bfloat16),
    ],
)
def test_from_numpy_float_inputs(np_dtype, ttnn_dtype):
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if np_dtype == "bfloat16" else np_dtype
    x = np.array([[1.5, -2.25]], dtype=dtype)
    t = ttnn.from_numpy(x)
    assert t.dtype is ttnn_dtype
    out = ttnn.to_numpy(t)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1.5, -2.25]])
    assert ttnn.to_numpy(t, dtype=np.float64).dtype == np.float64


def test_io_argument_errors(open_mesh):
    mesh = open_mesh((1, 2))
    other = open_mesh((1, 4))
    x = _x((4, 8))
    with pytest.raises(ValidationError, match=r"tensor must be a torch.Tensor"):
        ttnn.from_torch(x)
    with pytest.raises(ValidationError, match=r"has no ttnn equivalent; pass dtype="):
        ttnn.from_torch(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(ValidationError, match=r"array must be a numpy.ndarray"):
        ttnn.from_numpy([1.0, 2.0])
    with pytest.raises(ValidationError, match=r"has no ttnn equivalent"):
        ttnn.from_numpy(np.zeros(2, np.complex64))
    with pytest.raises(ValidationError, match=r"dtype must be a ttnn.DataType"):
        ttnn.from_numpy(x, dtype=np.float32)
    with pytest.raises(ValidationError, match=r"layout must be a ttnn.Layout"):
        ttnn.from_numpy(x, layout="TILE")
    with pytest.raises(ValidationError, match=r"memory_config must be a ttnn.MemoryConfig"):
        ttnn.from_numpy(x, device=mesh, memory_config="L1")
    with pytest.raises(ValidationError, match=r"device must be a ttnn.MeshDevice"):
        ttnn.from_numpy(x, device="cpu")
    with pytest.raises(ValidationError, match=r"mesh_mapper must be a ttnn mesh mapper"):
        ttnn.from_numpy(x, device=mesh, mesh_mapper=lambda a: [a])
    with pytest.raises(ValidationError, match=r"mesh_mapper was made for"):
        ttnn.from_numpy(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(other, dim=1))
    for fn in (ttnn.to_numpy, ttnn.to_torch, ttnn.from_device):
        with pytest.raises(ValidationError, match=r"expected a ttnn.Tensor"):
            fn(x)
    with pytest.raises(ValidationError, match=r"expected a ttnn.Tensor"):
        ttnn.to_device(x, mesh)
    with pytest.raises(ValidationError, match=r"device must be a ttnn.MeshDevice"):
        ttnn.to_device(ttnn.from_numpy(x), "cpu")


def test_host_tensor_with_mapper_and_to_device(open_mesh):
    mesh = open_mesh((1, 4))
    x = _x((1, 1, 32, 128))
    host = ttnn.from_numpy(
        x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3)
    )
    assert host.storage_type() is ttnn.StorageType.HOST and host.shape == (1, 1, 32, 32)
    dev = ttnn.to_device(host, mesh)
    assert dev.tensor_topology() == host.tensor_topology()
    back = ttnn.to_numpy(dev, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    np.testing.assert_array_equal(
        back, ttnn.to_numpy(host, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    )
    assert np.abs(back - x).max() <= np.abs(x).max() * 2**-7
    with pytest.raises(ValidationError, match=r"4 device shards"):
        ttnn.to_device(host, open_mesh((1, 2)))
    # a single host buffer is replicated onto every device
    single = ttnn.to_device(ttnn.from_numpy(x), mesh, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert single.tensor_topology() == TensorTopology.replicated(mesh.shape)
    assert all(np.array_equal(s, x) for s in _shards(single))
    host_again = ttnn.from_device(single)
    assert host_again.storage_type() is ttnn.StorageType.HOST


def test_import_does_not_import_torch():
    code = "import sys; from tttv2 import ttnn; ttnn.from_numpy(__import__('numpy').zeros(2)); print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


# --- serialisation ----------------------------------------------------------------------------------------

ALL_DTYPES = [
    (ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT),
    (ttnn.float32, ttnn.TILE_LAYOUT),
    (ttnn.bfloat8_b, ttnn.TILE_LAYOUT),
    (ttnn.bfloat4_b, ttnn.TILE_LAYOUT),
    (ttnn.int32, ttnn.ROW_MAJOR_LAYOUT),
    (ttnn.uint32, ttnn.TILE_LAYOUT),
    (ttnn.uint16, ttnn.ROW_MAJOR_LAYOUT),
    (ttnn.uint8, ttnn.ROW_MAJOR_LAYOUT),
]


@pytest.mark.parametrize(("dtype", "layout"), ALL_DTYPES)
def test_dump_load_round_trip(tmp_path, dtype, layout):
    x = (_x((3, 40)) * 50).astype(np.float32)
    if not dtype.is_float:
        x = np.abs(x)
    t = ttnn.from_numpy(x, dtype=dtype, layout=layout)
    path = tmp_path / "t.bin"
    ttnn.dump_tensor(path, t)
    loaded = ttnn.load_tensor(str(path))
    assert loaded.dtype is dtype and loaded.layout is layout and loaded.shape == (3, 40)
    assert loaded.storage_type() is ttnn.StorageType.HOST
    np.testing.assert_array_equal(ttnn.to_numpy(loaded), ttnn.to_numpy(t))
    assert [p.name for p in tmp_path.iterdir()] == ["t.bin"]  # no temporary file left behind


def test_block_floats_are_stored_packed(tmp_path):
    x = _x((64, 256))
    sizes = {}
    for dtype in (ttnn.float32, ttnn.bfloat8_b, ttnn.bfloat4_b):
        path = tmp_path / f"{dtype.name}.bin"
        ttnn.dump_tensor(path, ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT))
        sizes[dtype] = path.stat().st_size
    assert sizes[ttnn.bfloat8_b] < 0.3 * sizes[ttnn.float32]  # 1 byte + 1/16 exponent per value, not 4
    with zipfile.ZipFile(tmp_path / "BFLOAT8_B.bin") as zf:
        assert sorted(zf.namelist()) == ["meta.json", "shard0_exp.npy", "shard0_mant.npy"]


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_dump_load_multi_device(open_mesh, tmp_path, dtype):
    mesh = open_mesh((2, 4))
    x = _x((4, 1, 32, 128))
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(0, 3), mesh_shape=(2, 4))
    composer = ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 3), mesh_shape=(2, 4))
    host = ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper)
    ttnn.dump_tensor(tmp_path / "host.bin", host)
    loaded = ttnn.load_tensor(tmp_path / "host.bin")
    assert loaded.storage_type() is ttnn.StorageType.HOST
    assert loaded.tensor_topology() == host.tensor_topology()
    np.testing.assert_array_equal(
        ttnn.to_numpy(loaded, mesh_composer=composer), ttnn.to_numpy(host, mesh_composer=composer)
    )
    dev = ttnn.to_device(host, mesh)
    ttnn.dump_tensor(tmp_path / "dev.bin", dev)
    on_device = ttnn.load_tensor(tmp_path / "dev.bin", device=mesh)
    assert on_device.device() is mesh and on_device.tensor_topology() == dev.tensor_topology()
    np.testing.assert_array_equal(
        ttnn.to_numpy(on_device, mesh_composer=composer), ttnn.to_numpy(dev, mesh_composer=composer)
    )


def test_dump_load_replicated_placements(open_mesh, tmp_path):
    mesh = open_mesh((2, 2))
    x = _x((1, 1, 32, 64))
    host = ttnn.from_numpy(x, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=(2, 2)))
    ttnn.dump_tensor(tmp_path / "r.bin", host)
    loaded = ttnn.load_tensor(tmp_path / "r.bin")
    assert loaded.tensor_topology().placements() == [PlacementReplicate(), PlacementShard(3)]
    np.testing.assert_array_equal(_shards(loaded)[3], x[..., 32:])


def test_load_rejects_bad_files(tmp_path):
    with pytest.raises(ValidationError, match=r"no such file"):
        ttnn.load_tensor(tmp_path / "missing.bin")
    (tmp_path / "garbage.bin").write_bytes(b"not a tensor")
    with pytest.raises(ValidationError, match=r"not a readable tensor file"):
        ttnn.load_tensor(tmp_path / "garbage.bin")
    good = tmp_path / "good.bin"
    ttnn.dump_tensor(good, ttnn.from_numpy(_x((2, 2))))
    # truncated: the zip directory is gone
    data = good.read_bytes()
    (tmp_path / "truncated.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValidationError, match=r"not a readable tensor file"):
        ttnn.load_tensor(tmp_path / "truncated.bin")
    # a zip that is not ours
    with zipfile.ZipFile(tmp_path / "other.bin", "w") as zf:
        zf.writestr("meta.json", json.dumps({"format": "something/else"}))
    with pytest.raises(ValidationError, match=r"is not a tttv2.tensorbin/1 file"):
        ttnn.load_tensor(tmp_path / "other.bin")
    # a shard missing
    with zipfile.ZipFile(good) as zf:
        meta = json.loads(zf.read("meta.json"))
    meta["num_shards"] = 2
    with zipfile.ZipFile(tmp_path / "short.bin", "w") as zf:
        zf.writestr("meta.json", json.dumps(meta))
    with pytest.raises(ValidationError, match=r"not a readable tensor file"):
        ttnn.load_tensor(tmp_path / "short.bin")
    # an unknown placement
    meta.update(num_shards=0, distribution_shape=[2], placements=["PlacementSomething()"])
    with zipfile.ZipFile(tmp_path / "placement.bin", "w") as zf:
        zf.writestr("meta.json", json.dumps(meta))
    with pytest.raises(ValidationError, match=r"unknown placement"):
        ttnn.load_tensor(tmp_path / "placement.bin")
    with pytest.raises(ValidationError, match=r"expected a ttnn.Tensor"):
        ttnn.dump_tensor(tmp_path / "x.bin", np.zeros(2))


def test_dump_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "t.bin"
    ttnn.dump_tensor(path, ttnn.from_numpy(_x((2, 2))))
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np.lib.format, "write_array", broken)
    with pytest.raises(OSError, match=r"disk full"):
        ttnn.dump_tensor(path, ttnn.from_numpy(_x((3, 3))))
    assert path.read_bytes() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["t.bin"]  # and the temporary file is gone
    monkeypatch.undo()

    def replace_fails(src, dst):
        os.unlink(src)
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", replace_fails)
    with pytest.raises(OSError, match=r"rename failed"):
        ttnn.dump_tensor(path, ttnn.from_numpy(_x((3, 3))))
    assert path.read_bytes() == before


# --- the tensor cache -----------------------------------------------------------------------------------------


class _Poison:
    """A stand-in source tensor that fails on any use."""

    def __getattr__(self, name):
        raise AssertionError(f"the cached source tensor was used ({name})")


def test_as_tensor_cache(open_mesh, tmp_path):
    mesh = open_mesh((1, 8))
    x = torch.from_numpy(_x((1, 1, 32, 256)))
    cache = tmp_path / "cache" / "w1"
    mapper = ttnn.ShardTensorToMesh(mesh, dim=3)
    kwargs = dict(layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper, cache_file_name=cache)
    first = ttnn.as_tensor(x, ttnn.bfloat8_b, **kwargs)
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert (
        len(files) == 1 and "BFLOAT8_B" in files[0] and "TILE" in files[0] and files[0].endswith(".tensorbin")
    )
    assert not any(name.endswith(".tmp") for name in files)
    mtime = (tmp_path / "cache" / files[0]).stat().st_mtime_ns
    for source in (None, _Poison()):
        again = ttnn.as_tensor(source, ttnn.bfloat8_b, **kwargs)
        assert again.shape == first.shape == (1, 1, 32, 32) and again.dtype is ttnn.bfloat8_b
        assert again.device() is mesh and again.tensor_topology() == first.tensor_topology()
        composer = ttnn.ConcatMeshToTensor(mesh, dim=3)
        np.testing.assert_array_equal(
            ttnn.to_numpy(again, mesh_composer=composer), ttnn.to_numpy(first, mesh_composer=composer)
        )
    assert (tmp_path / "cache" / files[0]).stat().st_mtime_ns == mtime  # a hit does not rewrite
    # another dtype (or layout, or mapper) is another file
    ttnn.as_tensor(x, ttnn.bfloat16, **kwargs)
    ttnn.as_tensor(x, ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, cache_file_name=cache)
    assert len(list((tmp_path / "cache").iterdir())) == 3
    with pytest.raises(ValidationError, match=r"tensor is None and the cache file"):
        ttnn.as_tensor(None, ttnn.float32, **kwargs)


def test_as_tensor_preprocess_and_host(tmp_path):
    calls = []

    def double(t):
        calls.append(1)
        return t * 2

    x = torch.ones(2, 32)
    plain = ttnn.as_tensor(x, ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
    assert (
        plain.dtype is ttnn.bfloat16
        and plain.layout is ttnn.TILE_LAYOUT
        and np.all(ttnn.to_numpy(plain) == 1)
    )
    t = ttnn.as_tensor(x, ttnn.float32, preprocess=double)
    assert np.all(ttnn.to_numpy(t) == 2) and t.device() is None and len(calls) == 1
    cached = ttnn.as_tensor(x, None, preprocess=double, cache_file_name=tmp_path / "p", layout=None)
    assert np.all(ttnn.to_numpy(cached) == 2) and cached.dtype is ttnn.float32 and len(calls) == 2
    assert (tmp_path / "p_dtype_auto_layout_ROW_MAJOR.tensorbin").is_file()
    hit = ttnn.as_tensor(None, None, preprocess=double, cache_file_name=tmp_path / "p", layout=None)
    assert np.all(ttnn.to_numpy(hit) == 2) and len(calls) == 2  # no preprocessing on a hit


# --- per-device views -----------------------------------------------------------------------------------------


def test_get_and_combine_device_tensors(open_mesh):
    mesh = open_mesh((2, 4))
    x = _x((8, 1, 32, 32))
    t = ttnn.from_numpy(
        x,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    used = mesh.memory_report()[0]["dram_used"]
    parts = ttnn.get_device_tensors(t)
    assert len(parts) == 8 and mesh.memory_report()[0]["dram_used"] == used  # views allocate nothing
    for i, part in enumerate(parts):
        assert part.device().get_num_devices() == 1 and part.shape == (1, 1, 32, 32)
        assert part.device().get_devices()[0] is mesh.get_devices()[i]
        np.testing.assert_array_equal(ttnn.to_numpy(part), x[i : i + 1])
    assert ttnn.get_device_tensors(t)[3].device() is parts[3].device()  # the per-device meshes are reused
    combined = ttnn.combine_device_tensors(parts)
    assert combined.device() is mesh and combined.shape == t.shape
    np.testing.assert_array_equal(
        ttnn.to_numpy(combined, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)), x
    )
    # an op on one device's view leaves the others alone
    doubled = [p * 2 if i == 1 else p for i, p in enumerate(parts)]
    out = ttnn.to_numpy(
        ttnn.combine_device_tensors(doubled), mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)
    )
    np.testing.assert_array_equal(out[1], 2 * x[1])
    np.testing.assert_array_equal(out[2], x[2])


def test_device_tensors_of_host_tensors(open_mesh):
    mesh = open_mesh((1, 4))
    x = _x((4, 8))
    host = ttnn.from_numpy(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    parts = ttnn.get_device_tensors(host)
    assert [p.storage_type() for p in parts] == [ttnn.StorageType.HOST] * 4
    combined = ttnn.combine_device_tensors(parts)
    assert combined.storage_type() is ttnn.StorageType.HOST
    np.testing.assert_array_equal(
        ttnn.to_numpy(combined, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)), x
    )
    with pytest.raises(ValidationError, match=r"distributed over 4 devices"):
        ttnn.to_numpy(combined)


def test_combine_errors(open_mesh):
    mesh = open_mesh((1, 2))
    t = ttnn.from_numpy(_x((2, 8)), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    parts = ttnn.get_device_tensors(t)
    with pytest.raises(ValidationError, match=r"non-empty list"):
        ttnn.combine_device_tensors([])
    with pytest.raises(ValidationError, match=r"one shape/dtype/layout"):
        ttnn.combine_device_tensors([parts[0], ttnn.from_numpy(_x((2, 8)), device=parts[1].device())])
    with pytest.raises(ValidationError, match=r"two tensors of the device at mesh coordinate \(0, 1\)"):
        ttnn.combine_device_tensors([parts[1], parts[1]])
    other = ttnn.from_numpy(_x((1, 8)), device=open_mesh((1, 1)))
    with pytest.raises(ValidationError, match=r"single-device tensors of one mesh"):
        ttnn.combine_device_tensors([parts[0], other])
    with pytest.raises(ValidationError, match=r"expected ttnn.Tensor items, got ndarray"):
        ttnn.combine_device_tensors([parts[0], _x((1, 8))])
    with pytest.raises(ValidationError, match=r"get_device_tensors.*deallocated"):
        t.deallocate() or ttnn.get_device_tensors(t)


def test_cache_file_path_accepts_str(tmp_path):
    name = os.path.join(str(tmp_path), "sub", "w")
    t = ttnn.as_tensor(torch.ones(2, 2), ttnn.float32, cache_file_name=name)
    assert t.shape == (2, 2) and (tmp_path / "sub").is_dir()
