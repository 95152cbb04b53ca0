"""Emulated devices and meshes, and per-device L1 / DRAM accounting."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import DeviceMemoryError, ValidationError
from tttv2.ttnn.device import ARCH_SPECS, Device

L1, DRAM = ttnn.BufferType.L1, ttnn.BufferType.DRAM
WH_L1 = 64 * 1_396_736  # 8x8 Tensix cores of allocatable L1


def _used(mesh, buffer_type=DRAM, index=0):
    return mesh.get_devices()[index].memory_used(buffer_type)


def _dev(mesh, shape, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, **kwargs):
    return ttnn.from_numpy(np.zeros(shape, np.float32), dtype=dtype, layout=layout, device=mesh, **kwargs)


# --- meshes ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (1, 4), (1, 8), (2, 4), (4, 8), (8, 4)])
def test_open_mesh_shapes(open_mesh, shape):
    mesh = open_mesh(shape)
    rows, cols = shape
    assert mesh.shape == ttnn.MeshShape(rows, cols) and mesh.shape == shape and mesh.shape == list(shape)
    assert tuple(mesh.shape) == shape and mesh.shape.dims() == 2
    assert mesh.get_num_devices() == rows * cols == mesh.shape.mesh_size()
    assert mesh.get_device_ids() == list(range(rows * cols))
    devices = mesh.get_devices()
    assert len({id(d) for d in devices}) == rows * cols and list(mesh) == devices
    assert mesh.get_device(rows - 1, cols - 1) is devices[-1] and mesh.get_device(0) is devices[0]
    assert isinstance(mesh.id(), int) and mesh.is_open
    assert repr(mesh).startswith(f"MeshDevice({rows}x{cols}, arch=WORMHOLE_B0")
    assert repr(devices[0]) == "Device(id=0, arch=WORMHOLE_B0)" and devices[0].arch() is ttnn.Arch.WORMHOLE_B0


def test_mesh_ids_are_unique(open_mesh):
    assert open_mesh((1, 1)).id() != open_mesh((1, 1)).id()


def test_one_dimensional_mesh(open_mesh):
    shape = ttnn.MeshShape([8])
    assert shape.dims() == 1 and shape.as_2d() == (1, 8) and shape.mesh_size() == 8
    assert repr(shape) == "MeshShape([8])" and shape == (8,) and shape == [8] and shape[0] == 8
    mesh = ttnn.open_mesh_device(shape)
    try:
        assert mesh.shape == ttnn.MeshShape([8]) and mesh.get_num_devices() == 8
        assert repr(mesh).startswith("MeshDevice(1x8")
        assert mesh.get_device(0, 7) is mesh.get_devices()[7]
    finally:
        ttnn.close_mesh_device(mesh)


def test_mesh_shape_values():
    assert ttnn.MeshShape(2, 4) == ttnn.MeshShape([2, 4]) == ttnn.MeshShape((2, 4))
    assert ttnn.MeshShape(ttnn.MeshShape(2, 4)) == ttnn.MeshShape(2, 4)
    assert hash(ttnn.MeshShape(2, 4)) == hash(ttnn.MeshShape([2, 4]))
    assert ttnn.MeshShape(2, 4) != ttnn.MeshShape(4, 2)
    assert (
        ttnn.MeshShape(2, 4) != "2x4"
        and len(ttnn.MeshShape(2, 4)) == 2
        and list(ttnn.MeshShape(2, 4)) == [2, 4]
    )
    for bad in [(), (0, 4), (2, -1), (True, 2), (2.0, 4)]:
        with pytest.raises(ValidationError, match=r"MeshShape"):
            ttnn.MeshShape(*bad)
    with pytest.raises(ValidationError, match=r"1-D and 2-D"):
        ttnn.MeshShape(2, 2, 2).as_2d()
    with pytest.raises(ValidationError, match=r"1-D and 2-D"):
        ttnn.open_mesh_device(ttnn.MeshShape(2, 2, 2))


def test_default_open_and_single_device():
    mesh = ttnn.open_mesh_device()
    dev = ttnn.open_device(device_id=0)
    try:
        assert mesh.shape == (1, 1) and dev.shape == (1, 1) and dev.get_num_devices() == 1
        ttnn.synchronize_device(dev)
        mesh.enable_program_cache()
        mesh.disable_and_clear_program_cache()
        mesh.clear_program_cache()
        assert mesh.num_program_cache_entries() == 0
    finally:
        ttnn.close_mesh_device(mesh)
        ttnn.close_device(dev)
    assert not dev.is_open
    mesh2 = ttnn.MeshDevice([1, 2])  # a shape given as a list
    assert mesh2.shape == (1, 2)


def test_arch_defaults_and_selection(open_mesh, monkeypatch):
    monkeypatch.delenv("TTTV2_ARCH", raising=False)
    wh = open_mesh((1, 2))
    assert wh.arch() is ttnn.Arch.WORMHOLE_B0 and wh.is_wormhole_b0() and not wh.is_blackhole()
    assert wh.compute_with_storage_grid_size() == ttnn.CoreCoord(8, 8)
    assert wh.dram_grid_size() == ttnn.CoreCoord(12, 1)
    assert wh.l1_size_per_core() == 1_396_736
    assert ttnn.get_arch_name() == "wormhole_b0"
    bh = open_mesh((1, 1), arch=ttnn.Arch.BLACKHOLE)
    assert bh.arch() is ttnn.Arch.BLACKHOLE and bh.is_blackhole() and not bh.is_wormhole_b0()
    assert bh.compute_with_storage_grid_size() == ttnn.CoreCoord(13, 10)
    assert bh.dram_grid_size() == ttnn.CoreCoord(8, 1)
    assert "BLACKHOLE" in repr(bh)
    monkeypatch.setenv("TTTV2_ARCH", "blackhole")
    assert open_mesh((1, 1)).arch() is ttnn.Arch.BLACKHOLE
    assert ttnn.get_arch_name() == "blackhole"
    monkeypatch.setenv("TTTV2_ARCH", "grayskull_x")
    with pytest.raises(ValidationError, match=r"TTTV2_ARCH"):
        open_mesh((1, 1))
    with pytest.raises(ValidationError, match=r"arch must be one of"):
        open_mesh((1, 1), arch=ttnn.Arch.GRAYSKULL)
    with pytest.raises(ValidationError, match=r"arch must be one of"):
        open_mesh((1, 1), arch="blackhole")


def test_blackhole_has_more_l1(open_mesh):
    bh = open_mesh((1, 1), arch=ttnn.Arch.BLACKHOLE)
    spec = ARCH_SPECS[ttnn.Arch.BLACKHOLE]
    assert bh.get_devices()[0].allocators[L1].capacity == 130 * spec.l1_bytes_per_core


def test_submeshes_share_devices_and_memory(open_mesh):
    mesh = open_mesh((2, 4))
    sub = mesh.create_submesh(ttnn.MeshShape(1, 2), ttnn.MeshCoordinate(1, 2))
    assert sub.shape == (1, 2) and sub.get_num_devices() == 2
    assert sub.get_devices() == [mesh.get_device(1, 2), mesh.get_device(1, 3)]
    assert sub.get_device_ids() == [6, 7]
    t = _dev(sub, (32, 32))
    assert _used(mesh, DRAM, 6) == _used(mesh, DRAM, 7) == 2048
    assert _used(mesh, DRAM, 0) == 0
    t.deallocate()
    assert _used(mesh, DRAM, 6) == 0
    origin = mesh.create_submesh((2, 2))
    assert origin.get_device_ids() == [0, 1, 4, 5]
    with pytest.raises(ValidationError, match=r"does not fit"):
        mesh.create_submesh(ttnn.MeshShape(2, 2), ttnn.MeshCoordinate(1, 3))
    subs = mesh.create_submeshes(ttnn.MeshShape(1, 4))
    assert [s.get_device_ids() for s in subs] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [s.get_device_ids() for s in mesh.create_submeshes((2, 2))] == [[0, 1, 4, 5], [2, 3, 6, 7]]
    with pytest.raises(ValidationError, match=r"do not tile"):
        mesh.create_submeshes(ttnn.MeshShape(1, 3))
    ttnn.close_mesh_device(mesh)
    assert not sub.is_open and not subs[0].is_open


def test_reshape_mesh(open_mesh):
    mesh = open_mesh((2, 4))
    mesh.reshape(ttnn.MeshShape(1, 8))
    assert mesh.shape == (1, 8) and mesh.get_num_devices() == 8
    mesh.reshape((8, 1))
    assert mesh.shape == (8, 1)
    with pytest.raises(ValidationError, match=r"has 6 devices"):
        mesh.reshape(ttnn.MeshShape(2, 3))


def test_default_device(open_mesh):
    assert ttnn.GetDefaultDevice() is None
    mesh = open_mesh((1, 2))
    ttnn.SetDefaultDevice(mesh)
    assert ttnn.GetDefaultDevice() is mesh
    with pytest.raises(ValidationError, match=r"SetDefaultDevice"):
        ttnn.SetDefaultDevice("mesh")
    other = open_mesh((1, 1))
    ttnn.close_mesh_device(other)  # closing another mesh keeps the default
    assert ttnn.GetDefaultDevice() is mesh
    ttnn.close_mesh_device(mesh)
    assert ttnn.GetDefaultDevice() is None
    ttnn.SetDefaultDevice(None)
    with pytest.raises(ValidationError, match=r"close_mesh_device"):
        ttnn.close_mesh_device("mesh")


# --- memory accounting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "tile_bytes"),
    [(ttnn.bfloat16, 2048), (ttnn.bfloat8_b, 1088), (ttnn.bfloat4_b, 576), (ttnn.float32, 4096)],
)
def test_allocation_bytes_per_tile(open_mesh, dtype, tile_bytes):
    mesh = open_mesh((1, 2))
    t = _dev(mesh, (1, 2, 64, 96), dtype=dtype)  # 2 x 2 x 3 = 12 tiles on every device
    for i in range(2):
        assert _used(mesh, DRAM, i) == 12 * tile_bytes and _used(mesh, L1, i) == 0
    # tile padding is accounted: a 33 x 33 tensor takes 4 tiles
    u = _dev(mesh, (33, 33), dtype=dtype)
    assert _used(mesh, DRAM) == 16 * tile_bytes
    t.deallocate()
    u.deallocate()
    assert _used(mesh, DRAM) == 0


def test_row_major_and_integer_bytes(open_mesh):
    mesh = open_mesh((1, 1))
    _t = _dev(mesh, (3, 5), layout=ttnn.ROW_MAJOR_LAYOUT)
    assert _used(mesh) == 30  # no padding, 2 bytes per bfloat16
    _u = ttnn.from_numpy(np.zeros((3, 5), np.int32), device=mesh)
    assert _used(mesh) == 30 + 60
    _v = ttnn.from_numpy(np.zeros((32, 32), np.uint16), layout=ttnn.TILE_LAYOUT, device=mesh)
    assert _used(mesh) == 90 + 2048


def test_sharded_l1_bytes(open_mesh):
    mesh = open_mesh((1, 2))
    cfg = ttnn.create_sharded_memory_config(
        (1, 1, 64, 512), ttnn.CoreGrid(x=8, y=2), ttnn.ShardStrategy.WIDTH
    )
    assert cfg.shard_spec.shape == (64, 32)
    t = _dev(mesh, (1, 1, 64, 512), memory_config=cfg)
    assert _used(mesh, L1, 0) == _used(mesh, L1, 1) == 64 * 32 * 2 * 16  # shard bytes x cores
    assert _used(mesh, DRAM) == 0
    t8 = _dev(mesh, (1, 1, 64, 512), dtype=ttnn.bfloat8_b, memory_config=cfg)
    assert _used(mesh, L1) == 64 * 32 * 2 * 16 + 2 * 1088 * 16
    del t, t8


def test_distributed_tensors_charge_each_device_its_shard(open_mesh):
    mesh = open_mesh((1, 4))
    x = np.zeros((1, 1, 32, 512), np.float32)
    _rep = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    assert [_used(mesh, DRAM, i) for i in range(4)] == [16 * 2048] * 4
    _sh = ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    assert [_used(mesh, DRAM, i) for i in range(4)] == [20 * 2048] * 4


def test_release_on_garbage_collection_and_peak(open_mesh):
    mesh = open_mesh((1, 2))
    a = _dev(mesh, (64, 64), memory_config=ttnn.L1_MEMORY_CONFIG)
    b = _dev(mesh, (64, 64), memory_config=ttnn.L1_MEMORY_CONFIG)
    assert _used(mesh, L1) == 2 * 4 * 2048
    del a
    gc.collect()
    assert _used(mesh, L1) == 4 * 2048
    b.deallocate()
    del b
    gc.collect()  # releasing twice (deallocate, then collection) counts once
    assert _used(mesh, L1) == 0
    report = mesh.memory_report()
    assert report[0] == {"device": 0, "l1_used": 0, "l1_peak": 2 * 4 * 2048, "dram_used": 0, "dram_peak": 0}
    assert len(report) == 2
    assert mesh.get_devices()[0].allocators[L1].live == 0
    # an op result that nobody keeps is released too
    c = _dev(mesh, (64, 64))
    _ = c + 1
    del _
    gc.collect()
    assert _used(mesh, DRAM) == 4 * 2048
    assert mesh.memory_report()[0]["dram_peak"] == 8 * 2048


def test_out_of_l1_names_the_tensor_and_sizes(open_mesh):
    mesh = open_mesh((1, 1))
    host = ttnn.from_numpy(
        np.zeros((1, 1, 1024, 4096), np.float32), dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT
    )
    held = [ttnn.to_device(host, mesh, memory_config=ttnn.L1_MEMORY_CONFIG) for _ in range(5)]  # 5 x 16 MiB
    assert _used(mesh, L1) == 5 * 16 * 2**20
    free = WH_L1 - 5 * 16 * 2**20
    with pytest.raises(DeviceMemoryError) as info:
        ttnn.to_device(host, mesh, memory_config=ttnn.L1_MEMORY_CONFIG)
    msg = str(info.value)
    assert "device 0: out of L1 memory" in msg and "ttnn.to_device [1, 1, 1024, 4096] FLOAT32 TILE" in msg
    assert f"needs {16 * 2**20:,} bytes" in msg and f"{free:,} of {WH_L1:,} bytes free" in msg
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ttnn.TTNNError)
    assert _used(mesh, L1) == 5 * 16 * 2**20  # the failed allocation left nothing behind
    held.pop().deallocate()
    held.append(ttnn.to_device(host, mesh, memory_config=ttnn.L1_MEMORY_CONFIG))  # fits again


def test_out_of_dram_and_reserved_regions(open_mesh):
    dram = ARCH_SPECS[ttnn.Arch.WORMHOLE_B0].dram_bytes
    # trace_region_size and l1_small_size are carved out of DRAM and L1
    mesh = open_mesh((1, 2), trace_region_size=dram - 3 * 2048, l1_small_size=1_396_736 - 2048)
    assert mesh.get_devices()[0].allocators[DRAM].capacity == 3 * 2048
    assert mesh.get_devices()[0].allocators[L1].capacity == 64 * 2048
    _a = _dev(mesh, (32, 64))
    with pytest.raises(
        DeviceMemoryError, match=r"out of DRAM memory allocating ttnn\.from_numpy \[64, 32\] BFLOAT16"
    ):
        _dev(mesh, (64, 32))
    _b = _dev(mesh, (32, 32))
    _c = _dev(mesh, (1, 1, 64, 1024), memory_config=ttnn.L1_MEMORY_CONFIG)  # exactly fills L1
    with pytest.raises(DeviceMemoryError, match=r"out of L1 .* needs 2,048 bytes, 0 of 131,072 bytes free"):
        _dev(mesh, (32, 32), memory_config=ttnn.L1_MEMORY_CONFIG)


def test_failed_allocation_rolls_back_other_devices(open_mesh):
    mesh = open_mesh((1, 2), l1_small_size=1_396_736 - 2048)  # 64 tiles of L1 per device
    second = mesh.create_submesh(ttnn.MeshShape(1, 1), ttnn.MeshCoordinate(0, 1))
    _fill = _dev(second, (1, 1, 32, 32 * 60), memory_config=ttnn.L1_MEMORY_CONFIG)  # device 1: 60 tiles
    assert _used(mesh, L1, 0) == 0 and _used(mesh, L1, 1) == 60 * 2048
    with pytest.raises(DeviceMemoryError, match=r"device 1"):
        _dev(mesh, (1, 1, 32, 32 * 8), memory_config=ttnn.L1_MEMORY_CONFIG)
    assert _used(mesh, L1, 0) == 0  # device 0 had succeeded and was rolled back


def test_device_object():
    assert tuple(ttnn.MeshCoordinate(1, 2)) == (1, 2)
    dev = Device(3, ARCH_SPECS[ttnn.Arch.WORMHOLE_B0])
    assert dev.id() == 3 and dev.memory_used(L1) == 0 and dev.memory_used(DRAM) == 0
