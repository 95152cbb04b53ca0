"""``ttnn.manual_seed``: ttnn's argument forms and checks; the seeds land in each device's ``core_seeds``."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn.errors import ValidationError


def _u32(values, mesh):
    return ttnn.from_numpy(np.asarray(values, np.uint32), dtype=ttnn.uint32, device=mesh)


def test_argument_forms_record_per_core_seeds(open_mesh):
    mesh = open_mesh((1, 2))
    first, second = mesh.get_devices()
    ttnn.manual_seed(42, device=mesh)  # every core of every device
    assert first.core_seeds == second.core_seeds == dict.fromkeys(range(32), 42)
    ttnn.manual_seed(seeds=7, device=mesh, user_ids=3)  # one core on each device
    assert first.core_seeds[3] == second.core_seeds[3] == 7 and first.core_seeds[4] == 42
    ttnn.manual_seed(9, user_ids=_u32([5, 6], mesh))  # one seed, the cores a tensor lists; devices from it
    assert [second.core_seeds[i] for i in (5, 6, 7)] == [9, 9, 42]
    per_device = ttnn.from_numpy(
        np.array([[1, 2], [3, 4]], np.uint32),
        dtype=ttnn.uint32,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    ttnn.manual_seed(seeds=per_device, user_ids=_u32([[0, 1]], mesh), sub_core_grids=None)  # one seed per id
    assert (first.core_seeds[0], first.core_seeds[1], second.core_seeds[0], second.core_seeds[1]) == (
        1,
        2,
        3,
        4,
    )
    # every emulated random op takes its seed explicitly: the core seeds change no result
    before = ttnn.to_numpy(ttnn.rand((4, 4), device=mesh, seed=5))
    ttnn.manual_seed(123, device=mesh)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.rand((4, 4), device=mesh, seed=5)), before)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": -1}, r"seeds: expected an integer in \[0, 4294967296\), got -1"),
        ({"seeds": True}, r"seeds: expected an integer in \[0, 4294967296\), got True"),
        ({"seeds": 1, "device": None}, r"device: expected a MeshDevice when seeds is an integer, got None"),
        ({"seeds": 1, "user_ids": 32}, r"user_ids: expected an integer in \[0, 32\), got 32"),
        ({"seeds": "tensor"}, r"user_ids: expected a uint32 tensor when seeds is a tensor, got None"),
        ({"seeds": "tensor", "user_ids": "ids3"}, r"seeds: expected one seed per user id \(3\), got 2 seeds"),
        ({"seeds": 1, "user_ids": "ids40"}, r"user_ids: expected values in \[0, 32\), got 40"),
        (
            {"seeds": 1, "sub_core_grids": 5},
            r"sub_core_grids: expected None or a ttnn\.CoreRangeSet, got int",
        ),
        (
            {"seeds": "tensor", "user_ids": "ids2", "device": "other"},
            r"device: expected None or the tensors' mesh",
        ),
    ],
)
def test_bad_arguments_name_the_argument(open_mesh, kwargs, message):
    mesh = open_mesh((1, 2))
    other = open_mesh((1, 1))
    values = {
        "tensor": _u32([1, 2], mesh),
        "ids2": _u32([0, 1], mesh),
        "ids3": _u32([0, 1, 2], mesh),
        "ids40": _u32([40], mesh),
        "other": other,
    }
    kwargs = {k: values.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    kwargs.setdefault("device", mesh if not isinstance(kwargs["seeds"], ttnn.Tensor) else None)
    with pytest.raises(ValidationError, match=r"ttnn\.manual_seed: " + message):
        ttnn.manual_seed(**kwargs)
    assert mesh.get_devices()[0].core_seeds == {}  # a refused call seeds nothing
