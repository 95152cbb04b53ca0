"""tttv2.testing: PCC and allclose helpers for tests of ttnn code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2.testing import assert_pcc, comp_allclose, comp_pcc, pcc


def test_pcc_identical_and_correlated(rng):
    x = rng.standard_normal(1000)
    assert pcc(x, x) == 1.0
    assert pcc(x, 2 * x + 3) == pytest.approx(1.0)
    assert pcc(x, -x) == pytest.approx(-1.0)
    noisy = x + 0.1 * rng.standard_normal(1000)
    assert pcc(x, noisy) == pytest.approx(np.corrcoef(x, noisy)[0, 1], abs=1e-12)
    assert -1.0 <= pcc(x, rng.standard_normal(1000)) <= 1.0


def test_pcc_constant_arrays():
    assert pcc(np.full(10, 3.0), np.full(10, 3.0)) == 1.0
    assert pcc(np.full(10, 3.0), np.full(10, 3.0 + 1e-12)) == 1.0  # constant and allclose
    assert pcc(np.zeros(10), np.ones(10)) == 0.0  # constant but different
    assert pcc(np.zeros(10), np.arange(10.0)) == 0.0  # one side constant


def test_pcc_non_finite_values():
    a = np.array([1.0, np.nan, 3.0, np.inf, 5.0])
    assert pcc(a, a.copy()) == 1.0
    shifted = np.array([2.0, np.nan, 4.0, np.inf, 6.5])
    assert pcc(a, shifted) == pytest.approx(np.corrcoef([1, 3, 5], [2, 4, 6.5])[0, 1])  # masked out
    assert pcc(a, np.array([1.0, 2.0, 3.0, np.inf, 5.0])) == 0.0  # NaN in another place
    assert pcc(a, np.array([1.0, np.nan, 3.0, -np.inf, 5.0])) == 0.0  # inf of the other sign
    assert (
        pcc(np.array([np.nan, 1.0]), np.array([np.nan, 2.0])) == 0.0
    )  # what is left is constant and different


def test_pcc_shapes_and_torch_inputs(rng):
    with pytest.raises(ValueError, match=r"shapes differ"):
        pcc(np.zeros(3), np.zeros(4))
    # same number of elements in another layout is compared element by element
    assert pcc(np.arange(6.0).reshape(2, 3), np.arange(6.0)) == 1.0
    x = rng.standard_normal((4, 8)).astype(np.float32)
    t = torch.from_numpy(x).to(torch.bfloat16)
    assert pcc(x, t) > 0.999
    assert pcc(t, t) == 1.0


def test_comp_pcc_and_allclose(rng):
    x = rng.standard_normal(100)
    passed, value = comp_pcc(x, x + 1e-3 * rng.standard_normal(100))
    assert passed and value > 0.99
    passed, value = comp_pcc(x, rng.standard_normal(100), threshold=0.5)
    assert not passed and value < 0.5
    ok, detail = comp_allclose(x, x + 1e-9)
    assert ok and detail.startswith("max abs diff")
    ok, detail = comp_allclose(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    assert not ok and "max abs diff 0.5" in detail and "max rel diff 0.25" in detail
    ok, detail = comp_allclose(np.array([0.0]), np.array([1e-3]), atol=1e-2)
    assert ok
    assert comp_allclose(np.zeros(0), np.zeros(0)) == (True, "max abs diff 0, max rel diff 0")


def test_assert_pcc(rng):
    x = rng.standard_normal(50)
    assert assert_pcc(x, x) == 1.0
    assert assert_pcc(x, x + 0.01, threshold=0.999) == pytest.approx(1.0)
    with pytest.raises(AssertionError, match=r"PCC -1\.000000 < 0\.99 \(max abs diff .*, max rel diff .*\)"):
        assert_pcc(x, -x)
