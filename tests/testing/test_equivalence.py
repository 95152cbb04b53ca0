"""tttv2.testing.equivalence: input copies that are independent, the first difference of two outputs named to the
device and index (one ulp is caught), and the twin chosen by the class whose topology accepts the arguments."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing.equivalence import (
    Difference,
    TwinError,
    assert_equivalent_outputs,
    build_twin,
    clone_inputs,
    first_difference,
)


def _sharded(mesh, values, dtype=ttnn.bfloat16):
    return ttnn.from_numpy(
        values.astype(np.float32),
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1),
    )


@pytest.fixture
def values():
    return np.random.default_rng(0).standard_normal((1, 1, 32, 256)).astype(np.float32)


def test_clone_is_independent_and_identical(ttnn_mesh_pool, values):
    mesh = ttnn_mesh_pool((1, 8))
    x = _sharded(mesh, values)
    (
        copy,
        same_int,
    ) = clone_inputs([x, 7])[0], clone_inputs((x, 7))[1]
    assert same_int == 7
    assert first_difference(x, copy) is None
    ttnn.deallocate(x)
    assert not x.is_allocated() and copy.is_allocated()
    assert clone_inputs(x) is x  # a deallocated input is passed on as it is
    assert clone_inputs({"k": copy})["k"] is not copy
    host = ttnn.from_numpy(values, dtype=ttnn.float32)
    assert first_difference(host, clone_inputs(host)) is None


def test_one_ulp_on_one_device_is_named(ttnn_mesh_pool, values):
    mesh = ttnn_mesh_pool((1, 8))
    changed = values.copy()
    bf16 = changed.astype(ml_dtypes.bfloat16)
    # column 200 lives on device 200 // 32 = 6, at column 8 of that device's shard
    bumped = np.nextafter(bf16[0, 0, 5, 200], np.array(np.inf, dtype=ml_dtypes.bfloat16))
    changed[0, 0, 5, 200] = np.float32(bumped)
    found = first_difference(_sharded(mesh, values), _sharded(mesh, changed))
    assert isinstance(found, Difference)
    assert (found.aspect, found.device, found.index, found.differing) == ("value", 6, (0, 0, 5, 8), 1)
    assert "device 6, index [0, 0, 5, 8]" in str(found)
    # to a tolerance (real hardware), one ulp passes
    assert first_difference(_sharded(mesh, values), _sharded(mesh, changed), atol=0.05, rtol=0.01) is None
    with pytest.raises(AssertionError, match="device 6"):
        assert_equivalent_outputs(_sharded(mesh, values), _sharded(mesh, changed))


def test_aspects_before_values(ttnn_mesh_pool, values):
    mesh = ttnn_mesh_pool((1, 2))
    a = _sharded(mesh, values)
    assert first_difference(a, _sharded(mesh, values, ttnn.bfloat8_b)).aspect == "dtype"
    assert first_difference(a, _sharded(mesh, values[..., :128])).aspect == "shape"
    l1 = ttnn.to_memory_config(a, ttnn.L1_MEMORY_CONFIG)
    assert first_difference(a, l1).aspect == "memory_config"
    assert first_difference(a, ttnn.to_layout(a, ttnn.ROW_MAJOR_LAYOUT)).aspect == "layout"
    replicated = ttnn.from_numpy(values[..., :128], dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
    assert first_difference(a, replicated).aspect in ("shape", "devices", "memory_config")
    assert first_difference(a, "x").aspect == "type"
    assert first_difference([a], [a, a]).aspect == "length"
    assert first_difference([a], a).aspect == "type"
    assert first_difference({"a": 1}, {"a": 2}).where == "output['a']"
    assert first_difference({"a": 1}, {"b": 1}).aspect == "keys"
    assert first_difference({"a": 1}, [1]).aspect == "type"
    assert first_difference((a, 3), (a, 3)) is None
    assert first_difference(3, 3.0).aspect == "type"
    assert first_difference(np.zeros(2), np.zeros(2)) is None
    assert "value" in str(first_difference(1, 2))
    nan = values.copy()
    nan[0, 0, 0, 0] = np.nan
    assert first_difference(_sharded(mesh, nan), _sharded(mesh, nan)) is None


class _Refuses:
    @classmethod
    def from_model_args(cls, mesh_device, **kwargs):
        from tttv2.modules._topology import require_2d_mesh

        require_2d_mesh("Refuses", mesh_device, "Accepts")


class _Accepts:
    @classmethod
    def from_model_args(cls, mesh_device, **kwargs):
        return ("built", kwargs)


class _Breaks:
    @classmethod
    def from_model_args(cls, mesh_device, **kwargs):
        raise ValueError("a bad weight")  # not a topology refusal: the twin's own failure


def test_the_first_class_that_accepts_is_the_twin(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 2))
    twin, cls = build_twin([_Refuses, _Accepts], (mesh,), {"k": 1})
    assert cls is _Accepts and twin == ("built", {"k": 1})
    with pytest.raises(TwinError, match="Refuses runs on 2-D meshes"):
        build_twin([_Refuses], (mesh,))
    with pytest.raises(TwinError, match="no generated class"):
        build_twin([], (mesh,))
    with pytest.raises(ValueError, match="a bad weight"):
        build_twin([_Refuses, _Breaks, _Accepts], (mesh,))
