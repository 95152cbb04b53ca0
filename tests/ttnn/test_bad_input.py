"""Bad input to host conversion and creation: integer range, non-numeric arrays. Every error names the
argument, what was expected and what was given."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn.errors import ValidationError

RM = ttnn.ROW_MAJOR_LAYOUT


@pytest.mark.parametrize(
    ("dtype", "bad"),
    [
        (ttnn.uint32, -1),
        (ttnn.uint32, 2**32),
        (ttnn.uint16, 70000),
        (ttnn.uint8, 256),
        (ttnn.uint8, -3.5),
        (ttnn.int32, 2**31),
        (ttnn.int32, -(2**31) - 1),
    ],
)
def test_out_of_range_integers_raise_instead_of_wrapping(dtype, bad):
    info = np.iinfo(dtype.numpy_dtype)
    pattern = rf"expected values in \[{info.min}, {info.max}\] for a {dtype.name} tensor"
    with pytest.raises(ValidationError, match=rf"ttnn\.from_numpy: tensor: {pattern}"):
        ttnn.from_numpy(np.array([0, bad]), dtype=dtype)
    with pytest.raises(ValidationError, match=rf"ttnn\.from_torch: tensor: {pattern}"):
        ttnn.from_torch(
            torch.tensor([0, bad], dtype=torch.float64 if isinstance(bad, float) else torch.int64),
            dtype=dtype,
        )
    with pytest.raises(ValidationError, match=rf"ttnn\.full: fill_value: {pattern}"):
        ttnn.full((2, 2), bad, dtype=dtype)


def test_integer_edges_and_truncation_are_kept():
    for dtype in (ttnn.uint32, ttnn.uint16, ttnn.uint8, ttnn.int32):
        info = np.iinfo(dtype.numpy_dtype)
        t = ttnn.from_numpy(np.array([info.min, info.max], dtype=np.int64), dtype=dtype)
        np.testing.assert_array_equal(ttnn.to_numpy(t), [info.min, info.max])
    # floats are truncated towards zero, so -0.5 is a valid uint value (0), as before
    np.testing.assert_array_equal(
        ttnn.to_numpy(ttnn.from_numpy(np.array([-0.5, 2.9]), dtype=ttnn.uint32)), [0, 2]
    )
    with pytest.raises(ValidationError, match="expected finite values for a UINT32 tensor"):
        ttnn.from_numpy(np.array([np.nan]), dtype=ttnn.uint32)
    with pytest.raises(ValidationError, match=r"ttnn\.rand: low/high: expected values in \[0, 255\]"):
        ttnn.rand((4,), dtype=ttnn.uint8, layout=RM, low=-10.0, high=-1.0)
    for kwargs, pattern in (
        ({"seed": -1}, r"seed: expected an int in \[0, 4294967296\), got -1"),
        ({"seed": 2**32}, r"seed: expected an int in \[0, 4294967296\)"),
        ({"seed": 1.5}, r"seed: expected an int in \[0, 4294967296\), got 1.5"),
        ({"low": float("nan")}, r"low: expected a finite number, got nan"),
        ({"high": float("inf")}, r"high: expected a finite number, got inf"),
        ({"low": "0"}, r"low: expected a finite number, got '0'"),
    ):
        with pytest.raises(ValidationError, match=rf"ttnn\.rand: {pattern}"):
            ttnn.rand((4,), layout=RM, **kwargs)
    with pytest.raises(ValidationError, match=r"ttnn\.arange: start/end: expected values in \[0, 65535\]"):
        ttnn.arange(-3, 3, dtype=ttnn.uint16)


def test_integer_buffers_loaded_into_a_module_are_range_checked(open_mesh):
    mesh = open_mesh()
    model = ttnn.nn.Module()
    model.register_buffer("positions", ttnn.from_numpy(np.zeros(4, np.int32), dtype=ttnn.uint32, device=mesh))
    with pytest.raises(
        ValidationError, match=r"Module\.load_state_dict: positions: expected values in \[0, "
    ):
        model.load_state_dict({"positions": np.array([1, -1, 2, 3])})


@pytest.mark.parametrize(
    "array", [np.array([1 + 2j, 3]), np.array([1.0, "a"], dtype=object), np.array(["x"])]
)
def test_non_numeric_numpy_arrays_are_refused(array):
    for dtype in (None, ttnn.float32, ttnn.uint32):
        with pytest.raises(
            ValidationError, match=r"ttnn\.from_numpy: (array: expected a numeric array|numpy dtype)"
        ):
            ttnn.from_numpy(array, dtype=dtype)


def test_complex_torch_tensors_are_refused():
    with pytest.raises(
        ValidationError, match=r"ttnn\.from_torch: tensor: expected a real \(not complex\) tensor"
    ):
        ttnn.from_torch(torch.tensor([1 + 1j]), dtype=ttnn.float32)
