"""The helpers every tttv2-refactor output imports to hold TTTv1's weights as LazyWeights."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules._tttv1_bridge import (
    check_weight_fields,
    holds_weights,
    lazy_weight,
    load_weight_fields,
    on_device,
)
from tttv2.modules.lazy_weight import LazyWeight


@dataclasses.dataclass
class _Config:
    kept: Any = None
    listed: Any = None
    keyed: Any = None
    plain: Any = 1.0


@pytest.fixture
def mesh():
    device = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    yield device
    ttnn.close_mesh_device(device)


def _weight(mesh, value: float) -> LazyWeight:
    return lazy_weight(np.full((32, 32), value, np.float32), ttnn.bfloat16, device=mesh)


def test_weights_in_containers_are_found_and_converted_in_place(mesh):
    config = _Config(listed=[_weight(mesh, 1.0), (_weight(mesh, 2.0),)], keyed={"a": _weight(mesh, 3.0)})
    assert holds_weights(config.listed) and holds_weights(config.keyed) and not holds_weights(config.plain)
    module = types.SimpleNamespace(config=config)
    load_weight_fields(module)
    assert isinstance(config.listed, list) and isinstance(config.listed[1], tuple)
    first, (second,) = config.listed
    assert isinstance(first, ttnn.Tensor) and isinstance(config.keyed["a"], ttnn.Tensor)
    for tensor, value in ((first, 1.0), (second, 2.0), (config.keyed["a"], 3.0)):
        assert float(np.asarray(ttnn.to_numpy(tensor)).flat[0]) == value
    assert on_device(config.plain) == 1.0


def test_a_field_the_module_holds_itself_is_left_to_it(mesh):
    weight = _weight(mesh, 1.0)
    module = types.SimpleNamespace(config=_Config(kept=weight), kept=None)
    load_weight_fields(module)
    assert module.config.kept is weight  # load_device_weights() converts it under its own name


def test_a_weight_out_of_reach_is_refused(mesh):
    check_weight_fields("M1D", _Config(listed=[_weight(mesh, 1.0)]))  # reachable: no error
    with pytest.raises(
        ValueError, match="M1D: config field plain holds a LazyWeight inside a SimpleNamespace"
    ):
        check_weight_fields("M1D", _Config(plain=types.SimpleNamespace(w=_weight(mesh, 1.0))))


def test_lazy_weight_runs_as_tensors_preprocess_on_the_host_tensor(mesh, tmp_path):
    """Falcon-40B's decoder uploads its layer-norm weights with ``ttnn.as_tensor(..., preprocess=pad_ln_params)``
    (the row padded to 32 rows); the generated ``from_model_args`` passes the same keywords to ``lazy_weight``,
    which made a TypeError before. The LazyWeight's device tensor equals as_tensor's, bit for bit."""
    import torch

    from tttv2.testing.equivalence import assert_equivalent_outputs

    def pad(x):
        return torch.cat([x.reshape([1, 1, 1, -1]), torch.zeros(1, 1, 31, x.shape[-1])], dim=2)

    gamma = torch.randn(64, generator=torch.Generator().manual_seed(0))
    arguments = dict(
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
        preprocess=pad,
    )
    expected = ttnn.as_tensor(gamma, cache_file_name=tmp_path / "v1" / "gamma", **arguments)
    weight = lazy_weight(
        gamma, cache_file_name=tmp_path / "v2" / "gamma", use_device_tilizer=False, **arguments
    )
    assert list(weight.get_device_weight().shape) == [1, 1, 32, 64]
    assert_equivalent_outputs(expected, weight.get_device_weight())


def test_lazy_weight_applies_as_tensors_preprocess(mesh):
    """``ttnn.as_tensor(..., preprocess=f)`` (Falcon-40B's weights: a reshape and a transpose) becomes a
    LazyWeight of ``f(tensor)``: the device weight holds what TTTv1's ``as_tensor`` uploaded."""
    source = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    weight = lazy_weight(
        source,
        ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        preprocess=lambda x: x.T.reshape(1, 1, 64, 32),
    )
    device = on_device(weight)
    assert list(device.shape) == [1, 1, 64, 32]
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(device)[0])[0, 0], source.T)


def test_a_weight_without_host_tensor_is_loaded_from_tttv1s_cache(mesh, tmp_path):
    """TTTv1 with no host tensor (Falcon-40B's MLP built with an empty state dict; Llama-2-70B's MLP and attention
    with ``read_cache=True``) uploads ``ttnn.as_tensor(None, ..., cache_file_name=..., preprocess=...)``: the
    weight comes from its own tt cache, and preprocess (which would fail on None) never runs. The generated module's ``lazy_weight`` makes the same call: the same device tensor, bit for bit, not a
    LazyWeight (there is no host tensor to convert). Without the cache file, it fails as TTTv1's call does."""
    import torch

    from tttv2.testing.equivalence import assert_equivalent_outputs

    arguments = dict(
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
        cache_file_name=tmp_path / "dense_h_to_4h",
        preprocess=lambda x: torch.transpose(x.reshape(1, 1, *x.shape), -2, -1),
    )
    weight = torch.randn(128, 64, generator=torch.Generator().manual_seed(3))
    ttnn.as_tensor(weight, **arguments)  # TTTv1's first run writes the cache
    legacy = ttnn.as_tensor(None, **arguments)
    loaded = lazy_weight(None, **arguments)
    assert not isinstance(loaded, LazyWeight) and list(loaded.shape) == [1, 1, 64, 64]
    assert_equivalent_outputs(legacy, on_device(loaded))
    assert on_device(loaded) is loaded
    absent = {**arguments, "cache_file_name": tmp_path / "absent"}
    refused = r"tensor is None and the cache file .*absent.* does not exist"
    with pytest.raises(ttnn.ValidationError, match=refused):
        lazy_weight(None, **absent)
    with pytest.raises(ttnn.ValidationError, match=refused):
        ttnn.as_tensor(None, **absent)
