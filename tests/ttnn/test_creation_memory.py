"""Creation ops: values identical to quantising the full float64 array, without ever holding that array;
device memory is checked before any host memory is used."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn.errors import DeviceMemoryError, ValidationError
from tttv2.ttnn.numerics import quantize
from tttv2.ttnn.ops import creation

FLOATS = [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b]
INTS = [ttnn.int32, ttnn.uint32, ttnn.uint16, ttnn.uint8]


def _layout(dtype):
    return ttnn.TILE_LAYOUT if dtype.is_block_float else ttnn.ROW_MAJOR_LAYOUT


def _stored(t):
    return t.shards()[0]


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("shape", [(2, 3), (1, 1, 5, 40), ()])
def test_constant_fills_equal_the_quantised_full_array(dtype, shape):
    values = [0, 1, 7, 200] if not dtype.is_float else [0.0, 1.0, -1.7, 3.3e-3, 1e30, float("inf")]
    for v in values:
        t = ttnn.full(shape, v, dtype=dtype, layout=_layout(dtype))
        want = quantize(np.full(shape, v), dtype)
        assert _stored(t).dtype == want.dtype
        np.testing.assert_array_equal(_stored(t), want)
    for op, v in ((ttnn.zeros, 0.0), (ttnn.ones, 1.0), (ttnn.empty, 0.0)):
        np.testing.assert_array_equal(
            _stored(op(shape, dtype=dtype, layout=_layout(dtype))), quantize(np.full(shape, v), dtype)
        )
    like = ttnn.full_like(ttnn.zeros(shape, dtype=dtype, layout=_layout(dtype)), 3)
    np.testing.assert_array_equal(_stored(like), quantize(np.full(shape, 3), dtype))


@pytest.mark.parametrize("dtype", [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b, ttnn.uint16])
@pytest.mark.parametrize("shape", [(3, 5, 40), (2, 100), (70,)])
def test_rand_in_chunks_equals_one_draw(monkeypatch, dtype, shape):
    # chunks of one 40-wide row, or 32-wide pieces of the 100- and 70-wide rows
    monkeypatch.setattr(creation, "_CHUNK_ELEMENTS", 40)
    low = -2.0 if dtype.is_float else 0.0
    t = ttnn.rand(shape, dtype=dtype, layout=_layout(dtype), low=low, high=50.0, seed=11)
    draw = np.random.default_rng(11).uniform(low, 50.0, size=shape).astype(np.float32)
    np.testing.assert_array_equal(_stored(t), quantize(draw, dtype))


@pytest.mark.parametrize("low", [0.0, 0, -0.0])
@pytest.mark.parametrize("dtype", [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b])
def test_rand_on_the_unit_interval_equals_numpys_uniform(monkeypatch, dtype, low):
    """The default [0, 1) draw (every dropout mask) takes the generator's doubles directly: the same values as
    ``uniform(0, 1)``, chunk by chunk, for a dropout-sized activation and any way of writing the bounds."""
    monkeypatch.setattr(creation, "_CHUNK_ELEMENTS", 4096)
    shape = (2, 1, 64, 384)
    t = ttnn.rand(shape, dtype=dtype, layout=ttnn.TILE_LAYOUT, low=low, high=1, seed=23)
    draw = np.random.default_rng(23).uniform(0.0, 1.0, size=shape).astype(np.float32)
    np.testing.assert_array_equal(_stored(t), quantize(draw, dtype))


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize(
    ("shape", "low", "high", "block", "expected_pieces"),
    [
        ((4, 1, 128, 384), 0.0, 1.0, None, 3),  # a NanoGPT dropout mask: 3 pieces of the real size
        (
            (3, 7, 33),
            -1.5,
            4.0,
            64,
            28,
        ),  # pieces of 16 values cutting rows, chunks of 14 rows, uniform's scaling
        ((5,), 0.0, 1.0, 64, 1),  # fewer values than two pieces: one draw
    ],
)
def test_rand_drawn_in_pieces_on_the_workers_equals_one_draw(
    monkeypatch, workers, shape, low, high, block, expected_pieces
):
    """Each piece of a chunk draws from its own generator advanced to the piece's first value: the same doubles
    as one generator drawing everything in order, with any worker count."""
    from tttv2.ttnn import _threads, numerics

    monkeypatch.setattr(_threads, "WORKERS", workers)
    if block is not None:
        monkeypatch.setattr(numerics, "_ELEMENTWISE_BLOCK", block)
        monkeypatch.setattr(creation, "_CHUNK_ELEMENTS", 7 * 33 * 2)  # chunks that start mid-stream too
    pieces = []
    real = numerics._run_pieces
    monkeypatch.setattr(numerics, "_run_pieces", lambda fn, bounds: pieces.append(bounds) or real(fn, bounds))
    t = ttnn.rand(shape, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, low=low, high=high, seed=97)
    draw = np.random.default_rng(97).uniform(low, high, size=shape).astype(np.float32)
    np.testing.assert_array_equal(_stored(t), draw)
    assert (len(pieces[0]) - 1 if pieces else 1) == expected_pieces


def test_rand_rounds_to_its_dtype_so_high_can_appear_in_bfloat16():
    """As documented: the draw is in [low, high), the cast to the dtype rounds to nearest (ttnn's typecast), so a
    bfloat16 rand on [0, 1) holds 1.0 about once in 500 values; float32 keeps every value below 1 here."""
    wide = ttnn.to_numpy(ttnn.rand((256, 1024), dtype=ttnn.bfloat16, seed=3)).astype(np.float32)
    assert wide.max() == 1.0 and 1 / 1000 < (wide == 1.0).mean() < 1 / 250
    assert ttnn.to_numpy(ttnn.rand((256, 1024), dtype=ttnn.float32, seed=3)).max() < 1.0


@pytest.mark.parametrize(
    ("start", "end", "step"), [(0, 10, 1), (5, None, 1), (-3.5, 7.25, 0.75), (10, -4, -3), (0.1, 1.0, 0.1)]
)
@pytest.mark.parametrize("dtype", [ttnn.float32, ttnn.bfloat16, ttnn.int32])
def test_arange_equals_numpy(monkeypatch, start, end, step, dtype):
    monkeypatch.setattr(creation, "_CHUNK_ELEMENTS", 3)
    t = ttnn.arange(start, end, step, dtype=dtype)
    want = np.arange(0, start, step) if end is None else np.arange(start, end, step, dtype=np.float64)
    np.testing.assert_array_equal(_stored(t), quantize(want, dtype))


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_creation_holds_no_float64_copy(open_mesh, monkeypatch):
    """numpy reports its buffers to tracemalloc: the peak is the stored tensor plus a small working set."""
    mesh = open_mesh((1, 2))
    monkeypatch.setattr(creation, "_CHUNK_ELEMENTS", 1 << 14, raising=False)
    stored = 1024 * 1024 * 4  # float32 storage of a [1024, 1024] bfloat16 tensor (one array for both devices)
    for make in (
        lambda: ttnn.ones((1024, 1024), dtype=ttnn.bfloat16, device=mesh),
        lambda: ttnn.full((1024, 1024), 2.5, dtype=ttnn.bfloat16, device=mesh),
        lambda: ttnn.zeros((1, 1024, 1024), dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh),
        lambda: ttnn.rand((1024, 1024), dtype=ttnn.bfloat16, device=mesh),
        lambda: ttnn.arange(0, 1024 * 1024, dtype=ttnn.float32, device=mesh),
    ):
        t, peak = _peak(make)
        assert _stored(t).nbytes == stored
        assert peak < stored * 1.25, f"peak {peak:,} bytes for {stored:,} stored"


def test_oversized_requests_raise_device_memory_error_before_host_allocation(open_mesh):
    mesh = open_mesh()
    with pytest.raises(
        DeviceMemoryError, match=r"out of DRAM memory allocating ttnn\.ones \[1048576, 1048576\]"
    ):
        _peak(lambda: ttnn.ones((2**20, 2**20), dtype=ttnn.bfloat16, device=mesh))
    # fits in host memory, not in L1: nothing may be allocated on the host first
    l1 = mesh.get_devices()[0].allocators[ttnn.BufferType.L1].capacity
    cols = 2 * l1 // (32 * 4)
    tracemalloc.start()
    try:
        with pytest.raises(DeviceMemoryError, match=r"out of L1 memory allocating ttnn\.full"):
            ttnn.full((32, cols), 1.0, dtype=ttnn.float32, device=mesh, memory_config=ttnn.L1_MEMORY_CONFIG)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    for op in (ttnn.zeros, ttnn.empty):
        with pytest.raises(DeviceMemoryError):
            op((2**40, 2**30), device=mesh)
    with pytest.raises(DeviceMemoryError):
        ttnn.rand((2**40,), device=mesh)
    with pytest.raises(DeviceMemoryError):
        ttnn.arange(0, 2**50, device=mesh)
    host = ttnn.zeros((32, cols), dtype=ttnn.float32)
    with pytest.raises(DeviceMemoryError):
        ttnn.full_like(host, 0.0, device=mesh, memory_config=ttnn.L1_MEMORY_CONFIG)
    # the failed requests allocated nothing
    assert mesh.get_devices()[0].allocators[ttnn.BufferType.L1].used == 0


def test_host_shape_too_big_for_numpy_names_the_shape():
    for shape in ((2**62, 2**62), (2**62, 0, 2**62), (2**64,)):
        with pytest.raises(
            ValidationError, match=r"ttnn\.zeros: shape: expected a shape whose element count fits"
        ):
            ttnn.zeros(shape)
    assert ttnn.zeros((0, 2**40)).shape == [0, 2**40]  # empty: nothing to allocate
    assert ttnn.rand((0, 4)).shape == [0, 4]
