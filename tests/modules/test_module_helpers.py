"""The private helpers every module shares: topology checks, default topology, input resolution, mode names."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, _grids
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, lazy_weights_of, mode_name
from tttv2.modules._topology import (
    default_topology,
    require_1d_mesh,
    require_2d_mesh,
    resolve_mesh_device,
)
from tttv2.testing.host import to_host


def test_topology_checks_name_the_class_to_use(ttnn_mesh_pool):
    galaxy, t3k = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 8))
    with pytest.raises(ValueError, match=r"MLP1D runs on 1-D meshes .*; got a 8x4 mesh; use MLP2D instead"):
        require_1d_mesh("MLP1D", galaxy, "MLP2D")
    with pytest.raises(ValueError, match=r"Embedding1D runs on 1-D meshes .*; got a 8x4 mesh$"):
        require_1d_mesh("Embedding1D", galaxy, None)
    with pytest.raises(
        ValueError, match=r"MLP2D runs on 2-D meshes \(8x4, 4x8\); got a 1x8 mesh; use MLP1D instead"
    ):
        require_2d_mesh("MLP2D", t3k, "MLP1D")
    require_1d_mesh("MLP1D", t3k, "MLP2D")
    require_2d_mesh("MLP2D", galaxy, "MLP1D")
    with pytest.raises(ValueError, match=r"MLP1D: mesh_device must be a ttnn.MeshDevice .* got NoneType"):
        require_1d_mesh("MLP1D", None, "MLP2D")


def test_default_topology(ttnn_mesh_pool):
    single, pair, t3k = ttnn_mesh_pool((1, 1)), ttnn_mesh_pool((1, 2)), ttnn_mesh_pool((1, 8))
    assert default_topology(single) is None
    assert default_topology(pair) == ttnn.Topology.Linear
    try:
        ttnn.cluster.set_cluster(8)
        assert default_topology(t3k) == ttnn.Topology.Ring
        ttnn.cluster.set_cluster(32)  # 8 devices of a Galaxy are a line, not a ring
        assert default_topology(t3k) == ttnn.Topology.Linear
    finally:
        ttnn.cluster.set_cluster(None)


def test_resolve_mesh_device_order(ttnn_mesh_pool):
    a, b = ttnn_mesh_pool((1, 1)), ttnn_mesh_pool((1, 2))
    w = LazyWeight(np.zeros((32, 32), np.float32), device=b)
    assert resolve_mesh_device("X", a, w) is a
    assert resolve_mesh_device("X", None, w) is b
    ttnn.SetDefaultDevice(a)
    try:
        assert resolve_mesh_device("X", None, LazyWeight(np.zeros(4))) is a
    finally:
        ttnn.SetDefaultDevice(None)
    with pytest.raises(ValueError, match=r"X: mesh_device must be a ttnn.MeshDevice"):
        resolve_mesh_device("X", None, LazyWeight(np.zeros(4)))


def test_load_input(ttnn_mesh_pool, rng):
    mesh = ttnn_mesh_pool((1, 2))
    host = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    mapper = ttnn.MeshMapperConfig([ttnn.PlacementReplicate(), ttnn.PlacementShard(-1)])
    t = load_input(
        LazyWeight(host),
        owner="M",
        device=mesh,
        memory_config=ttnn.L1_MEMORY_CONFIG,
        mesh_mapper_config=mapper,
    )
    assert t.dtype == ttnn.bfloat16 and t.layout == ttnn.TILE_LAYOUT and list(t.shape) == [1, 1, 32, 32]
    assert t.memory_config().buffer_type == ttnn.BufferType.L1
    np.testing.assert_allclose(to_host(t), host, rtol=1e-2, atol=1e-2)
    assert load_input(t, owner="M", device=mesh, memory_config=None) is t
    # a field the caller set on the LazyWeight wins over the module's default
    t32 = load_input(LazyWeight(host, dtype=ttnn.float32), owner="M", device=mesh, memory_config=None)
    assert t32.dtype == ttnn.float32
    with pytest.raises(TypeError, match=r"M: x must be a ttnn.Tensor or a LazyWeight, got ndarray"):
        load_input(host, owner="M", device=mesh, memory_config=None)


def test_mode_names_and_weight_discovery():
    class Mode:
        value = "prefill"

    assert mode_name("M", "decode") == "decode" and mode_name("M", Mode()) == "prefill"
    with pytest.raises(ValueError, match=r"M: mode must be 'decode' or 'prefill'.*got 'train'"):
        mode_name("M", "train")

    @dataclasses.dataclass
    class Inner:
        w: LazyWeight

    @dataclasses.dataclass
    class Outer:
        a: LazyWeight
        chunks: list
        inner: Inner | None
        other: int = 3

    a, b, c, d = (LazyWeight(np.zeros(4)) for _ in range(4))
    assert lazy_weights_of(Outer(a, [b, c], Inner(d))) == [a, b, c, d]

    class Toy(TTModule):
        CONFIG_CLASS = Outer

    with pytest.raises(TypeError, match=r"Toy.from_config: config must be a Outer, got Inner"):
        Toy.from_config(Inner(a))


def test_grid_arithmetic():
    assert (
        _grids.largest_divisor(12, 8) == 6
        and _grids.largest_divisor(7, 8) == 7
        and _grids.largest_divisor(11, 8) == 1
    )
    assert _grids.grid_near_32_cores(64).num_cores == 32
    assert _grids.grid_near_32_cores(6).num_cores == 6
    g = _grids.grid_dividing(16, 28)
    assert 16 % g.num_cores == 0 and 28 % g.num_cores == 0 and g.num_cores == 4
    mem = _grids.dram_width_sharded(256, 896, 12)
    assert mem.shard_spec.shape == (256, 128) and mem.shard_spec.num_cores() == 7
    assert _grids.nearest_multiple(688, 256) == 768 and _grids.tiles(33) == 2
    assert _grids.prefill_grid(128, 256) == (8, 4)
