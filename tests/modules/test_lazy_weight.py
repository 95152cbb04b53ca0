"""LazyWeight: resolution never overrides user fields, conversion is memoised, the disk cache keys on content."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.modules import LazyWeight
from tttv2.testing.host import to_host

SHARD_COLUMNS = ttnn.MeshMapperConfig([ttnn.PlacementReplicate(), ttnn.PlacementShard(-1)])


@pytest.fixture
def mesh(ttnn_mesh_pool):
    return ttnn_mesh_pool((1, 2))


def _weight(source, mesh, **kw):
    kw.setdefault("dtype", ttnn.bfloat16)
    kw.setdefault("layout", ttnn.TILE_LAYOUT)
    return LazyWeight(source, device=mesh, **kw)


def test_with_defaults_never_overrides_and_copies(rng):
    w = LazyWeight(rng.standard_normal((32, 64)).astype(np.float32), dtype=ttnn.bfloat8_b, name="w1")
    resolved = w.with_defaults(dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, name="other")
    assert resolved is not w
    assert resolved.dtype == ttnn.bfloat8_b and resolved.name == "w1"  # user choices kept
    assert resolved.layout == ttnn.TILE_LAYOUT and w.layout is None  # the original is untouched
    assert w.with_defaults(dtype=ttnn.bfloat16) is w  # nothing to fill: the same object
    with pytest.raises(ValueError, match=r"unknown fields \['colour'\]"):
        w.with_defaults(colour="red")


def test_conversion_is_memoised_and_sharded(mesh, rng):
    source = rng.standard_normal((64, 128)).astype(np.float32)
    w = _weight(source, mesh, mesh_mapper_config=SHARD_COLUMNS)
    assert not w.is_loaded()
    t = w.get_device_weight()
    assert w.is_loaded() and w.get_device_weight() is t
    assert list(t.shape) == [64, 64]  # each of the 2 devices holds half the columns
    expected = torch.from_numpy(source).bfloat16().float().numpy()
    np.testing.assert_array_equal(to_host(t), expected)


def test_replicated_by_default_and_torch_sources(mesh, rng):
    source = torch.from_numpy(rng.standard_normal((32, 32)).astype(np.float32)).bfloat16()
    t = _weight(source, mesh).get_device_weight()
    assert list(t.shape) == [32, 32]
    parts = ttnn.get_device_tensors(t)
    np.testing.assert_array_equal(ttnn.to_numpy(parts[0]), source.float().numpy())
    np.testing.assert_array_equal(ttnn.to_numpy(parts[1]), source.float().numpy())


def test_missing_fields_and_bad_sources(mesh):
    w = LazyWeight(np.zeros((32, 32), np.float32), name="wo")
    assert w.missing_fields() == ["device", "dtype", "layout"]
    with pytest.raises(
        ValueError, match=r"LazyWeight wo of shape \[32, 32\]: device, dtype, layout must be set"
    ):
        w.get_device_weight()
    with pytest.raises(ValueError, match=r"at least one dimension"):
        LazyWeight(np.float32(3.0))
    with pytest.raises(ValueError, match=r"at least one dimension"):
        LazyWeight([1.0, 2.0])
    with pytest.raises(ValueError, match=r"cache_dir must be a path"):
        LazyWeight(np.zeros(4), cache_dir=3)
    not_an_array = LazyWeight(_FakeArray(), device=mesh, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
    with pytest.raises(TypeError, match=r"numpy array or a torch tensor, got _FakeArray"):
        not_an_array.fingerprint()


class _FakeArray:
    shape = (32, 32)


def test_cache_hit_loads_without_converting(mesh, rng, tmp_path, monkeypatch):
    source = rng.standard_normal((64, 64)).astype(np.float32)
    first = _weight(source, mesh, cache_dir=tmp_path, name="layers.0.w1", mesh_mapper_config=SHARD_COLUMNS)
    path = first.cache_path()
    assert path.parent == tmp_path and path.name.startswith("layers.0.w1.bfloat16.tile.")
    expected = to_host(first.get_device_weight())
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no temporary left behind

    def no_conversion(*args, **kwargs):
        raise AssertionError("a cache hit must not convert the source")

    monkeypatch.setattr(ttnn, "from_numpy", no_conversion)
    second = _weight(
        source.copy(), mesh, cache_dir=tmp_path, name="layers.0.w1", mesh_mapper_config=SHARD_COLUMNS
    )
    assert second.cache_path() == path
    np.testing.assert_array_equal(to_host(second.get_device_weight()), expected)


def test_stale_cache_same_name_and_shape_new_values_get_a_new_file(mesh, rng, tmp_path):
    old = rng.standard_normal((32, 64)).astype(np.float32)
    new = old.copy()
    new[0, 0] += 1.0  # one changed value: a re-trained checkpoint under the same name
    a = _weight(old, mesh, cache_dir=tmp_path, name="w2")
    b = _weight(new, mesh, cache_dir=tmp_path, name="w2")
    a.get_device_weight()
    assert a.cache_path() != b.cache_path()
    got = to_host(b.get_device_weight())
    assert got[0, 0] == torch.tensor(new[0, 0]).bfloat16().float().item()  # the new value, not the cached one
    assert len(os.listdir(tmp_path)) == 2


def test_every_conversion_parameter_is_in_the_name(mesh, rng, tmp_path):
    source = rng.standard_normal((32, 64)).astype(np.float32)
    base = _weight(source, mesh, cache_dir=tmp_path, name="w")
    variants = [
        _weight(source, mesh, cache_dir=tmp_path, name="w", dtype=ttnn.bfloat8_b),
        _weight(source, mesh, cache_dir=tmp_path, name="w", layout=ttnn.ROW_MAJOR_LAYOUT),
        _weight(source, mesh, cache_dir=tmp_path, name="w", memory_config=ttnn.L1_MEMORY_CONFIG),
        _weight(source, mesh, cache_dir=tmp_path, name="w", mesh_mapper_config=SHARD_COLUMNS),
        _weight(source, mesh, cache_dir=tmp_path, name="w", pad_value=1.0),
        _weight(source.reshape(64, 32), mesh, cache_dir=tmp_path, name="w"),
    ]
    paths = {base.cache_path(), *(v.cache_path() for v in variants)}
    assert len(paths) == 1 + len(variants)
    same = _weight(source.copy(), mesh, cache_dir=tmp_path, name="w")
    assert same.cache_path() == base.cache_path() and same.fingerprint() == base.fingerprint()


def test_failed_write_leaves_no_file(mesh, rng, tmp_path, monkeypatch):
    def broken_dump(path, tensor):
        with open(path, "wb") as f:
            f.write(b"half a tensor")
        raise OSError("disk full")

    monkeypatch.setattr(ttnn, "dump_tensor", broken_dump)
    w = _weight(rng.standard_normal((32, 32)).astype(np.float32), mesh, cache_dir=tmp_path / "sub", name="w")
    with pytest.raises(OSError, match="disk full"):
        w.get_device_weight()
    assert os.listdir(tmp_path / "sub") == []
    assert not w.is_loaded()
