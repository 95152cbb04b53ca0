"""The threaded matmul / elementwise helpers of numerics.py give exactly what one thread gives."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2.ttnn import numerics


@pytest.fixture
def two_workers(monkeypatch):
    """Force the split paths (they only switch on by themselves when BLAS is single-threaded)."""
    monkeypatch.setattr(numerics, "_MATMUL_WORKERS", 2)
    monkeypatch.setattr(numerics, "_MATMUL_MIN_WORK", 1)
    monkeypatch.setattr(numerics, "_MATMUL_MIN_ROWS", 4)
    monkeypatch.setattr(numerics, "_ELEMENTWISE_MIN_SIZE", 1)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((128, 64), (64, 48)),  # one matrix: rows split
        ((2, 3, 40, 64), (1, 1, 64, 32)),  # broadcast weight: rows of all batches split
        ((4, 2, 16, 32), (4, 2, 32, 8)),  # matching batches: leading batch dim split
        ((1, 16, 32), (1, 32, 8)),  # one batch of one: nothing to split
        ((3, 16, 32), (2, 3, 32, 8)),  # batches that only broadcast: falls back
    ],
)
def test_matmul_f32_split_is_exact(two_workers, a_shape, b_shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    expected = np.matmul(a, b, dtype=np.float32)
    got = numerics.matmul_f32(a, b)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


def test_map_row_blocks_is_exact_and_keeps_small_inputs_whole(two_workers, monkeypatch):
    x = np.linspace(-4, 4, 8 * 33, dtype=np.float32).reshape(8, 33)
    np.testing.assert_array_equal(numerics.map_row_blocks(np.tanh, x), np.tanh(x))
    one_row = x[:1]
    np.testing.assert_array_equal(numerics.map_row_blocks(np.tanh, one_row), np.tanh(one_row))
    assert numerics.map_row_blocks(np.tanh, np.float32(0.5)) == np.tanh(np.float32(0.5))
    monkeypatch.setattr(numerics, "_MATMUL_WORKERS", 1)
    np.testing.assert_array_equal(numerics.map_row_blocks(np.tanh, x), np.tanh(x))


def test_blas_thread_count_from_environment(monkeypatch):
    for var in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "not-a-number")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert numerics._blas_threads() == 3
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert numerics._blas_threads() == 1
    for var in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    assert numerics._blas_threads() >= 1


def test_pool_is_rebuilt_after_fork_reset(two_workers):
    a = np.ones((64, 8), np.float32)
    numerics.matmul_f32(a, np.ones((8, 8), np.float32))
    numerics._forget_pool()
    assert numerics._pool is None
    np.testing.assert_array_equal(
        numerics.matmul_f32(a, np.ones((8, 8), np.float32)), np.full((64, 8), 8, np.float32)
    )
