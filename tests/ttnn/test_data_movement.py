"""Data movement ops against numpy: layouts, reshapes (with padded shapes), permutes, slices and indexing,
concat, pad, repeat, typecast, memory-config moves (sharded ↔ interleaved), clone, deallocate, plus_one and
copy_host_to_device_tensor.

These ops move data without arithmetic, so results must equal numpy exactly on the stored values; a dtype
change rounds once to the target dtype (checked against the numerics model's quantisation).
"""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn.numerics import quantize

DTYPES = [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b]


def _dev(mesh, array, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, **kw):
    return ttnn.from_numpy(np.asarray(array), dtype=dtype, layout=layout, device=mesh, **kw)


def _np(t):
    return ttnn.to_numpy(ttnn.get_device_tensors(t)[0]) if t.device() is not None else ttnn.to_numpy(t)


def _all_shards(t):
    return [ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t)]


# --- layout --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_layout_round_trip_keeps_values(open_mesh, rng, dtype):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((2, 40, 70)).astype(np.float32)
    t = _dev(mesh, x, dtype)
    stored = _np(t)
    if dtype.is_block_float:
        untilized = ttnn.to_layout(t, ttnn.ROW_MAJOR_LAYOUT)  # on device: untilize gives bfloat16, as in ttnn
        assert untilized.dtype is ttnn.bfloat16
        np.testing.assert_array_equal(_np(untilized), stored)
        rm = ttnn.to_layout(t, ttnn.ROW_MAJOR_LAYOUT, dtype=ttnn.bfloat16)
        np.testing.assert_array_equal(_np(rm), stored)  # bfp8 values are exact in bfloat16
        back = ttnn.to_layout(rm, ttnn.TILE_LAYOUT, dtype=dtype)
    else:
        rm = ttnn.to_layout(t, ttnn.ROW_MAJOR_LAYOUT)
        assert rm.layout == ttnn.ROW_MAJOR_LAYOUT and rm.padded_shape == (2, 40, 70)
        back = ttnn.to_layout(rm, ttnn.TILE_LAYOUT)
    assert back.padded_shape == (2, 64, 96)
    np.testing.assert_array_equal(_np(back), stored)
    assert ttnn.to_layout(t, ttnn.TILE_LAYOUT) is t
    assert t.to_layout(ttnn.TILE_LAYOUT) is t


def test_to_layout_on_host_and_with_memory_config(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((3, 33)).astype(np.float32)
    host = ttnn.from_numpy(x, dtype=ttnn.float32)
    tiled = ttnn.to_layout(host, ttnn.TILE_LAYOUT, memory_config=ttnn.L1_MEMORY_CONFIG)  # ignored on host
    assert tiled.device() is None and tiled.layout == ttnn.TILE_LAYOUT
    np.testing.assert_array_equal(ttnn.to_numpy(tiled), x)
    t = _dev(mesh, x, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    moved = ttnn.to_layout(t, ttnn.TILE_LAYOUT, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert moved.memory_config() == ttnn.L1_MEMORY_CONFIG
    with pytest.raises(ValidationError, match=r"ttnn.to_layout: layout: expected a ttnn.Layout, got 'TILE'"):
        ttnn.to_layout(t, "TILE")
    with pytest.raises(ValidationError, match=r"ttnn.to_layout: dtype: expected a ttnn.DataType"):
        ttnn.to_layout(t, ttnn.TILE_LAYOUT, dtype="bf16")
    with pytest.raises(ValidationError, match=r"memory_config: expected a ttnn.MemoryConfig"):
        ttnn.to_layout(t, ttnn.TILE_LAYOUT, memory_config="L1")


def test_tilize_untilize(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    rm = _dev(mesh, x, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    tiled = ttnn.tilize(rm, dtype=ttnn.bfloat8_b, use_multicore=True)
    assert tiled.layout == ttnn.TILE_LAYOUT and tiled.dtype == ttnn.bfloat8_b
    np.testing.assert_array_equal(_np(tiled), quantize(_np(rm), ttnn.bfloat8_b))
    same = ttnn.tilize(rm)
    np.testing.assert_array_equal(_np(same), _np(rm))
    back = ttnn.untilize(same, use_multicore=True)
    assert back.layout == ttnn.ROW_MAJOR_LAYOUT
    np.testing.assert_array_equal(_np(back), _np(rm))
    untilized = ttnn.untilize(tiled)  # bfloat8_b comes out as bfloat16, as on hardware
    assert untilized.dtype == ttnn.bfloat16 and untilized.layout == ttnn.ROW_MAJOR_LAYOUT
    np.testing.assert_array_equal(_np(untilized), _np(tiled))
    with pytest.raises(
        ValidationError, match=r"ttnn.untilize: input_tensor.layout: expected one of TILE, got ROW_MAJOR"
    ):
        ttnn.untilize(rm)
    with pytest.raises(
        ValidationError, match=r"ttnn.tilize: input_tensor.layout: expected one of ROW_MAJOR, got TILE"
    ):
        ttnn.tilize(same)


# --- reshape and friends --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [ttnn.TILE_LAYOUT, ttnn.ROW_MAJOR_LAYOUT])
def test_reshape_matches_numpy(open_mesh, rng, layout):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((2, 3, 32, 16)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32, layout)
    for shape in [(6, 32, 16), (1, 1, 192, 16), (2, -1, 8), [3, 2, 512], (3072,)]:
        out = ttnn.reshape(t, shape)
        expect = x.reshape(shape)
        assert out.shape == expect.shape
        for shard in _all_shards(out):
            np.testing.assert_array_equal(shard, expect)
    assert ttnn.reshape(t, (2, 3, 32, 16)) is t
    assert t.reshape(6, 512).shape == (6, 512)
    assert t.reshape((6, 512)).shape == (6, 512)
    assert (
        ttnn.reshape(t, ttnn.Shape([6, 512]), memory_config=ttnn.L1_MEMORY_CONFIG).memory_config()
        == ttnn.L1_MEMORY_CONFIG
    )


def test_reshape_with_padded_shape_reinterprets_the_tile_buffer(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    t = _dev(mesh, x, ttnn.bfloat16)
    # TTTv1 attention decode: a 32-row tensor viewed as 8 users, padded back to a full tile
    eight = ttnn.reshape(t, (1, 1, 8, 64), (1, 1, 32, 64))
    assert eight.shape == (1, 1, 8, 64) and eight.padded_shape == (1, 1, 32, 64)
    np.testing.assert_array_equal(_np(eight), _np(t)[:, :, :8])
    with pytest.raises(
        ValidationError,
        match=r"ttnn.reshape: shape: expected a shape with the volume 2048 .*or a padded_shape",
    ):
        ttnn.reshape(t, (1, 1, 8, 64))  # without the padded shape a volume change is an error, as on hardware
    # and back: the rows beyond 8 come from the (zero) padding
    back = ttnn.reshape(eight, (1, 1, 32, 64), (1, 1, 32, 64))
    np.testing.assert_array_equal(_np(back)[:, :, :8], _np(t)[:, :, :8])
    assert not _np(back)[:, :, 8:].any()
    # moving whole tile rows between dims keeps the row-major order of the padded buffer
    x2 = rng.standard_normal((1, 1, 40, 32)).astype(np.float32)
    t2 = _dev(mesh, x2, ttnn.float32)  # padded to 64 rows
    two = ttnn.reshape(t2, (1, 2, 8, 32), (1, 2, 32, 32))
    np.testing.assert_array_equal(_np(two)[0, 0], x2[0, 0, :8])
    np.testing.assert_array_equal(_np(two)[0, 1], x2[0, 0, 32:40])
    # with an unchanged volume the reshape is a logical one, as on hardware (the padded shape is then derived)
    logical = ttnn.reshape(t2, (1, 2, 20, 32), (1, 2, 32, 32))
    np.testing.assert_array_equal(_np(logical), x2.reshape(1, 2, 20, 32))
    # a padded shape equal to the default padding is just a reshape
    plain = ttnn.reshape(t2, (1, 1, 40, 32), (1, 1, 64, 32))
    assert plain is t2
    # the padded shape is kept through clone
    assert ttnn.clone(eight).padded_shape == (1, 1, 32, 64)


def test_reshape_errors(open_mesh, rng):
    mesh = open_mesh((1, 1))
    t = _dev(mesh, rng.standard_normal((1, 1, 32, 64)), ttnn.bfloat16)
    rm = _dev(mesh, rng.standard_normal((1, 1, 32, 64)), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    with pytest.raises(
        ValidationError,
        match=r"ttnn.reshape: shape: expected a shape with the volume 2048 .* got \[1, 1, 8, 128\] \(volume 1024\)",
    ):
        ttnn.reshape(t, (1, 1, 8, 128))
    with pytest.raises(ValidationError, match=r"ttnn.reshape: shape: expected at most one -1"):
        ttnn.reshape(t, (-1, -1, 64))
    with pytest.raises(ValidationError, match=r"shape: expected non-negative dims"):
        ttnn.reshape(t, (-2, 1024))
    with pytest.raises(
        ValidationError, match=r"shape: expected a shape whose -1 can be inferred from the volume 2048"
    ):
        ttnn.reshape(t, (-1, 3))
    with pytest.raises(ValidationError, match=r"shape: expected a list or tuple of ints, got 'abc'"):
        ttnn.reshape(t, "abc")
    with pytest.raises(ValidationError, match=r"padded_shape: expected rank 4 like shape"):
        ttnn.reshape(t, (1, 1, 8, 64), (1, 32, 64))
    with pytest.raises(ValidationError, match=r"padded_shape: expected every dim >= the logical shape"):
        ttnn.reshape(t, (1, 1, 8, 64), (1, 1, 4, 64))
    with pytest.raises(ValidationError, match=r"padded_shape: expected the padded volume 2048 of the input"):
        ttnn.reshape(t, (1, 1, 8, 64), (1, 1, 64, 64))
    with pytest.raises(
        ValidationError,
        match=r"padded_shape: expected \[1, 1, 8, 64\] \(ROW_MAJOR tensors carry no padding\)",
    ):
        ttnn.reshape(rm, (1, 1, 8, 64), (1, 1, 32, 64))
    with pytest.raises(ValidationError, match=r"same padded width 64"):
        ttnn.reshape(t, (1, 1, 16, 64), (1, 1, 16, 128))


def test_view_squeeze_unsqueeze(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((2, 32, 64)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32)
    v = ttnn.view(t, (1, 2, 32, 64))
    np.testing.assert_array_equal(_np(v), x.reshape(1, 2, 32, 64))
    assert ttnn.view(t, (64, 64)).shape == (64, 64)  # no padding on the second-last dim: allowed
    host = ttnn.view(ttnn.from_numpy(x), (2, 1, 32, 64))
    assert host.device() is None and host.shape == (2, 1, 32, 64)
    with pytest.raises(ValidationError, match=r"ttnn.view: shape: expected the same last dim as the input"):
        ttnn.view(t, (2, 64, 32))
    with pytest.raises(ValidationError, match=r"ttnn.view: shape: expected volume 4096"):
        ttnn.view(t, (1, 64))
    odd = _dev(mesh, rng.standard_normal((4, 8, 64)), ttnn.float32)
    with pytest.raises(ValidationError, match=r"ttnn.view: shape: expected an unchanged second-last dim 8"):
        ttnn.view(odd, (2, 16, 64))
    assert ttnn.unsqueeze_to_4D(t).shape == (1, 2, 32, 64)
    four = ttnn.unsqueeze_to_4D(t)
    assert ttnn.unsqueeze_to_4D(four) is four
    with pytest.raises(
        ValidationError, match=r"ttnn.unsqueeze_to_4D: input_tensor rank: expected at most 4, got 5"
    ):
        ttnn.unsqueeze_to_4D(ttnn.reshape(four, (1, 1, 2, 32, 64)))
    assert ttnn.squeeze(four).shape == (2, 32, 64)
    assert ttnn.squeeze(four, 0).shape == (2, 32, 64)
    assert ttnn.squeeze(four, [0, 1]).shape == (2, 32, 64)  # dim 1 has size 2: kept, as in torch
    assert ttnn.squeeze(t, 0) is t
    assert ttnn.unsqueeze(t, 1).shape == (2, 1, 32, 64)
    assert ttnn.unsqueeze(t, -1).shape == (2, 32, 64, 1)
    with pytest.raises(ValidationError, match=r"ttnn.squeeze: dim: expected to leave at least one dim"):
        ttnn.squeeze(_dev(mesh, np.ones((1, 1)), ttnn.float32))
    with pytest.raises(
        ValidationError, match=r"ttnn.unsqueeze: dim: expected a dim in \[-4, 3\] for a rank-3 tensor, got 4"
    ):
        ttnn.unsqueeze(t, 4)
    with pytest.raises(
        ValidationError, match=r"ttnn.squeeze: dim: expected a list or tuple of ints, got \[1.5\]"
    ):
        ttnn.squeeze(four, [1.5])


@pytest.mark.parametrize("dtype", DTYPES)
def test_permute_and_transpose(open_mesh, rng, dtype):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((2, 3, 32, 64)).astype(np.float32)
    t = _dev(mesh, x, dtype)
    stored = _np(t)
    p = ttnn.permute(t, (0, 2, 1, 3))
    expect = np.transpose(stored, (0, 2, 1, 3))
    np.testing.assert_array_equal(_np(p), expect if dtype is not ttnn.bfloat8_b else quantize(expect, dtype))
    tr = ttnn.transpose(t, -2, -1)
    expect = np.swapaxes(stored, -2, -1)
    np.testing.assert_array_equal(_np(tr), expect if dtype is not ttnn.bfloat8_b else quantize(expect, dtype))
    assert ttnn.permute(t, [0, 1, 2, 3]) is t
    moved = ttnn.transpose(t, 1, 2, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert moved.memory_config() == ttnn.L1_MEMORY_CONFIG and moved.shape == (2, 32, 3, 64)
    with pytest.raises(ValidationError, match=r"ttnn.permute: dims: expected a permutation of range\(4\)"):
        ttnn.permute(t, (0, 0, 1, 2))
    with pytest.raises(ValidationError, match=r"ttnn.transpose: dim2: expected a dim in \[-4, 3\]"):
        ttnn.transpose(t, 0, 4)
    with pytest.raises(ValidationError, match=r"ttnn.transpose: dim1: expected an int, got 0.5"):
        ttnn.transpose(t, 0.5, 1)


def test_permute_with_bfloat8_regroups_blocks(open_mesh, rng):
    """A transposed bfp8 tensor is re-blocked along its new rows: values are the transposed values rounded
    onto the new blocks' grids (an extra rounding, bounded by one bfp8 step)."""
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((32, 32)).astype(np.float32)
    t = _dev(mesh, x, ttnn.bfloat8_b)
    out = _np(ttnn.transpose(t, 0, 1))
    assert_pcc(x.T, out, 0.999)
    assert np.max(np.abs(out - _np(t).T)) <= np.max(np.abs(x)) * 2.0**-6


# --- slicing and indexing --------------------------------------------------------------------------------------


def test_slice_matches_numpy(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 4, 64, 96)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32)
    out = ttnn.slice(t, (0, 1, 8, 32), (1, 3, 40, 96))
    np.testing.assert_array_equal(_np(out), x[0:1, 1:3, 8:40, 32:96])
    out = ttnn.slice(t, [0, 0, 0, 0], [1, 4, 64, 96], [1, 2, 3, 5])
    np.testing.assert_array_equal(_np(out), x[:, ::2, ::3, ::5])
    out = ttnn.slice(t, [0, -2, 0, -10], [1, 100, 64, 96])  # negative starts, ends clamped
    np.testing.assert_array_equal(_np(out), x[:, -2:, :, -10:])
    assert ttnn.slice(t, [0, 0, 0, 0], [1, 4, 64, 96]) is t
    full_moved = ttnn.slice(t, [0, 0, 0, 0], [1, 4, 64, 96], memory_config=ttnn.L1_MEMORY_CONFIG)
    assert full_moved.memory_config() == ttnn.L1_MEMORY_CONFIG
    with pytest.raises(ValidationError, match=r"ttnn.slice: slice_end: expected 4 entries \(one per dim"):
        ttnn.slice(t, [0, 0, 0, 0], [1, 4, 64])
    with pytest.raises(ValidationError, match=r"ttnn.slice: slice_step: expected positive steps"):
        ttnn.slice(t, [0, 0, 0, 0], [1, 4, 64, 96], [1, 0, 1, 1])
    with pytest.raises(
        ValidationError, match=r"ttnn.slice: slice_end: expected end > start in dim 2 \(size 64\)"
    ):
        ttnn.slice(t, [0, 0, 10, 0], [1, 4, 10, 96])


def test_getitem_indexing(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 2, 64, 96)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32)
    cases = [
        (slice(None), slice(None), slice(None, 32), slice(None)),
        (0, slice(1, 2), slice(8, 40), slice(None, None, 2)),
        (Ellipsis, slice(-16, None)),
        (0, 1),
        (slice(None), -1, 5),
        0,
        slice(0, 1),
    ]
    for index in cases:
        out = t[index]
        expect = x[index]
        assert out.shape == expect.shape, index
        np.testing.assert_array_equal(_np(out), expect)
    host = ttnn.from_numpy(x)
    np.testing.assert_array_equal(ttnn.to_numpy(host[0, :, 3:9]), x[0, :, 3:9])
    with pytest.raises(ValidationError, match=r"__getitem__: index: expected unit steps on a host tensor"):
        host[:, :, ::2]
    with pytest.raises(
        ValidationError, match=r"__getitem__: index: expected an index in \[-2, 1\] for dim 1, got 2"
    ):
        t[0, 2]
    with pytest.raises(ValidationError, match=r"__getitem__: index: expected at most one Ellipsis"):
        t[..., 0, ...]
    with pytest.raises(
        ValidationError, match=r"__getitem__: index: expected at most 4 indices for a rank-4 tensor"
    ):
        t[0, 0, 0, 0, 0]
    with pytest.raises(ValidationError, match=r"__getitem__: index: expected at most 4 indices"):
        t[0, 0, 0, 0, 0, ...]
    with pytest.raises(
        ValidationError, match=r"__getitem__: index: expected ints, slices or \.\.\., got 'a'"
    ):
        t["a"]
    with pytest.raises(ValidationError, match=r"__getitem__: index: expected at least one sliced dim"):
        t[0, 0, 0, 0]


def test_split_and_chunk(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 100)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32)
    parts = ttnn.split(t, 32, dim=3)
    assert [p.shape[-1] for p in parts] == [32, 32, 32, 4]
    np.testing.assert_array_equal(np.concatenate([_np(p) for p in parts], axis=3), x)
    parts = ttnn.split(t, [10, 90], 3)
    np.testing.assert_array_equal(_np(parts[1]), x[..., 10:])
    chunks = ttnn.chunk(t, 3, dim=-1)
    assert [c.shape[-1] for c in chunks] == [34, 34, 32]
    with pytest.raises(
        ValidationError, match=r"ttnn.split: split_size: expected positive sizes summing to dim 3 \(100\)"
    ):
        ttnn.split(t, [10, 10], 3)
    with pytest.raises(ValidationError, match=r"ttnn.split: split_size: expected a positive int, got 0"):
        ttnn.split(t, 0, 3)
    with pytest.raises(ValidationError, match=r"ttnn.chunk: chunks: expected a positive int, got 0"):
        ttnn.chunk(t, 0, 3)


# --- concat, pad, repeat -----------------------------------------------------------------------------------------


def test_concat(open_mesh, rng):
    mesh = open_mesh((1, 2))
    a = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    b = rng.standard_normal((1, 1, 32, 32)).astype(np.float32)
    ta, tb = _dev(mesh, a, ttnn.float32), _dev(mesh, b, ttnn.float32)
    out = ttnn.concat([ta, tb], dim=-1, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert out.memory_config() == ttnn.L1_MEMORY_CONFIG
    for shard in _all_shards(out):
        np.testing.assert_array_equal(shard, np.concatenate([a, b], axis=-1))
    rows = ttnn.concat([ta, ta], 2)
    np.testing.assert_array_equal(_np(rows), np.concatenate([a, a], axis=2))
    assert ttnn.concat([ta], 0) is ta
    # sharded inputs: a sharded output config is re-derived for the new shape
    spec_in = ttnn.to_memory_config(ta, ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    cat = ttnn.concat([spec_in, spec_in], dim=3)
    assert cat.is_sharded() and cat.shape == (1, 1, 32, 128)
    other = open_mesh((1, 2))
    with pytest.raises(
        ValidationError,
        match=r"ttnn.concat: tensors\[1\]: expected a tensor on the same device as tensors\[0\]",
    ):
        ttnn.concat([ta, _dev(other, b, ttnn.float32)], dim=3)
    with pytest.raises(
        ValidationError, match=r"tensors\[1\]: expected shape \[1, 1, 32, 64\] except in dim 2"
    ):
        ttnn.concat([ta, tb], dim=2)
    with pytest.raises(
        ValidationError, match=r"tensors\[1\]: expected FLOAT32 TILE like tensors\[0\], got BFLOAT16 TILE"
    ):
        ttnn.concat([ta, _dev(mesh, b)], dim=3)
    with pytest.raises(ValidationError, match=r"tensors\[1\]: expected rank 4 like tensors\[0\], got rank 3"):
        ttnn.concat([ta, _dev(mesh, b[0], ttnn.float32)], dim=0)
    with pytest.raises(
        ValidationError, match=r"ttnn.concat: tensors: expected a non-empty list of ttnn.Tensor"
    ):
        ttnn.concat([], dim=0)


def test_pad_both_forms(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 20, 30)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    out = ttnn.pad(t, padding=[(0, 0), (0, 0), (0, 12), (2, 0)], value=1.5)
    np.testing.assert_array_equal(_np(out), np.pad(x, [(0, 0), (0, 0), (0, 12), (2, 0)], constant_values=1.5))
    out = ttnn.pad(t, [(1, 2)], 0.0)  # pairs for the trailing dims
    np.testing.assert_array_equal(_np(out), np.pad(x, [(0, 0), (0, 0), (0, 0), (1, 2)]))
    out = ttnn.pad(t, (1, 1, 32, 32), (0, 0, 4, 0), -1.0)  # (output_padded_shape, input_tensor_start, value)
    expect = np.full((1, 1, 32, 32), -1.0, np.float32)
    expect[:, :, 4:24, :30] = x
    np.testing.assert_array_equal(_np(out), expect)
    out = ttnn.pad(t, output_padded_shape=(1, 1, 20, 32), input_tensor_start=(0, 0, 0, 0), value=0.0)
    assert out.shape == (1, 1, 20, 32)
    assert ttnn.pad(t, [(0, 0)] * 4, 0.0) is t
    ints = _dev(mesh, np.arange(6, dtype=np.int32).reshape(2, 3), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    np.testing.assert_array_equal(_np(ttnn.pad(ints, [(0, 1), (0, 0)], 7)), [[0, 1, 2], [3, 4, 5], [7, 7, 7]])
    with pytest.raises(
        ValidationError, match=r"ttnn.pad: padding: expected \(before, after\) pairs of non-negative ints"
    ):
        ttnn.pad(t, [(0, -1)], 0.0)
    with pytest.raises(
        ValidationError, match=r"ttnn.pad: padding: expected a list of at most 4 \(before, after\) pairs"
    ):
        ttnn.pad(t, [(0, 0)] * 5, 0.0)
    with pytest.raises(
        ValidationError, match=r"ttnn.pad: output_padded_shape: expected room for the input \[1, 1, 20, 30\]"
    ):
        ttnn.pad(t, (1, 1, 20, 30), (0, 0, 1, 0), 0.0)
    with pytest.raises(ValidationError, match=r"output_padded_shape: expected 4 dims and 4 start indices"):
        ttnn.pad(t, (1, 20, 30), (0, 0, 0), 0.0)
    with pytest.raises(ValidationError, match=r"ttnn.pad: value: expected a number, got 'x'"):
        ttnn.pad(t, [(0, 1)], "x")
    with pytest.raises(
        ValidationError,
        match=r"ttnn.pad: padding: expected a list of \(before, after\) pairs or an output_padded_shape",
    ):
        ttnn.pad(t)


def test_repeat_and_repeat_interleave(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 2, 32, 16)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32)
    np.testing.assert_array_equal(_np(ttnn.repeat(t, (1, 2, 1, 3))), np.tile(x, (1, 2, 1, 3)))
    np.testing.assert_array_equal(
        _np(ttnn.repeat(t, ttnn.Shape([2, 1, 1, 1, 1]))), np.tile(x, (2, 1, 1, 1, 1))
    )
    np.testing.assert_array_equal(_np(ttnn.repeat_interleave(t, 3, dim=1)), np.repeat(x, 3, axis=1))
    with pytest.raises(ValidationError, match=r"ttnn.repeat: repeat_dims: expected at least 4 positive ints"):
        ttnn.repeat(t, (2, 2))
    with pytest.raises(
        ValidationError, match=r"ttnn.repeat_interleave: repeats: expected a positive int, got 0"
    ):
        ttnn.repeat_interleave(t, 0, dim=1)


# --- dtype and memory moves ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("src", "dst"), [(a, b) for a in DTYPES for b in DTYPES if a is not b])
def test_typecast_between_float_dtypes(open_mesh, rng, src, dst):
    mesh = open_mesh((1, 1))
    x = (rng.standard_normal((1, 1, 32, 64)) * 10).astype(np.float32)
    t = _dev(mesh, x, src)
    out = ttnn.typecast(t, dst)
    assert out.dtype == dst
    np.testing.assert_array_equal(_np(out), quantize(_np(t), dst))


def test_typecast_to_and_from_integers(open_mesh):
    mesh = open_mesh((1, 1))
    x = np.array([[-3.5, -0.4, 0.5, 1.5, 2.5, 7e9]], np.float32)
    t = _dev(mesh, x, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    np.testing.assert_array_equal(_np(ttnn.typecast(t, ttnn.uint32)), [[0, 0, 0, 2, 2, 4294967295]])
    np.testing.assert_array_equal(_np(ttnn.typecast(t, ttnn.int32)), [[-4, 0, 0, 2, 2, 2147483647]])
    ints = _dev(mesh, np.array([[-5, 70000]], np.int32), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    np.testing.assert_array_equal(_np(ttnn.typecast(ints, ttnn.uint16)), [[0, 65535]])
    np.testing.assert_array_equal(_np(ttnn.typecast(ints, ttnn.float32)), [[-5.0, 70000.0]])
    with pytest.raises(
        ValidationError, match=r"ttnn.typecast: layout: expected TILE_LAYOUT for a BFLOAT8_B tensor"
    ):
        ttnn.typecast(t, ttnn.bfloat8_b)
    with pytest.raises(ValidationError, match=r"ttnn.typecast: dtype: expected a ttnn.DataType, got 'float'"):
        ttnn.typecast(t, "float")


def test_experimental_typecast(open_mesh, rng):
    """Older models' copy-kernel typecast (Llama-2-70B's and Falcon-40B's KV-cache fill): the values of
    ttnn.typecast, in the input's memory config or the one given, or written into a given output tensor."""
    mesh = open_mesh((1, 2))
    x = (rng.standard_normal((1, 2, 64, 128)) * 4).astype(np.float32)
    t = _dev(mesh, x)
    out = ttnn.experimental.typecast(t, ttnn.bfloat8_b)
    assert out.dtype is ttnn.bfloat8_b and list(out.shape) == [1, 2, 64, 128]
    assert out.memory_config() == t.memory_config()
    np.testing.assert_array_equal(_np(out), quantize(_np(t), ttnn.bfloat8_b))
    in_l1 = ttnn.experimental.typecast(t, ttnn.float32, ttnn.L1_MEMORY_CONFIG)
    assert in_l1.memory_config() == ttnn.L1_MEMORY_CONFIG and in_l1.dtype is ttnn.float32
    np.testing.assert_array_equal(_np(in_l1), _np(t))
    target = _dev(mesh, np.zeros_like(x), ttnn.bfloat8_b)
    filled = ttnn.experimental.typecast(t, ttnn.bfloat8_b, optional_output_tensor=target)
    assert filled is target
    np.testing.assert_array_equal(_np(target), _np(out))
    wrong_dtype = _dev(mesh, np.zeros_like(x), ttnn.bfloat16)
    wrong_shape = _dev(mesh, np.zeros((1, 2, 32, 128), np.float32), ttnn.bfloat8_b)
    cases = [
        (
            lambda: ttnn.experimental.typecast(t, ttnn.bfloat8_b, optional_output_tensor=wrong_dtype),
            r"ttnn.experimental.typecast: optional_output_tensor.dtype: expected BFLOAT8_B",
        ),
        (
            lambda: ttnn.experimental.typecast(t, ttnn.bfloat8_b, None, wrong_shape),
            r"ttnn.experimental.typecast: optional_output_tensor.shape: expected \[1, 2, 64, 128\]",
        ),
        (
            lambda: ttnn.experimental.typecast(t, "bf8"),
            r"ttnn.experimental.typecast: dtype: expected a ttnn.DataType",
        ),
        (lambda: ttnn.experimental.typecast(x, ttnn.bfloat8_b), r"ttnn.experimental.typecast: input_tensor"),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()


def test_memory_config_moves_keep_values_and_account_memory(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 64, 256)).astype(np.float32)
    t = _dev(mesh, x)
    device = mesh.get_devices()[0]
    l1_before = device.memory_used(ttnn.BufferType.L1)
    width = ttnn.create_sharded_memory_config(
        (1, 1, 64, 256), ttnn.CoreGrid(x=8, y=1), ttnn.ShardStrategy.WIDTH
    )
    ws = ttnn.interleaved_to_sharded(t, width)
    assert ws.memory_config() == width and device.memory_used(ttnn.BufferType.L1) > l1_before
    np.testing.assert_array_equal(_np(ws), _np(t))
    height = ttnn.create_sharded_memory_config(
        (1, 1, 64, 256), ttnn.CoreGrid(x=2, y=1), ttnn.ShardStrategy.HEIGHT
    )
    hs = ttnn.reshard(ws, height)
    assert hs.memory_config() == height
    back = ttnn.sharded_to_interleaved(hs, ttnn.L1_MEMORY_CONFIG, ttnn.bfloat8_b)
    assert back.memory_config() == ttnn.L1_MEMORY_CONFIG and back.dtype == ttnn.bfloat8_b
    np.testing.assert_array_equal(_np(back), quantize(_np(t), ttnn.bfloat8_b))
    dram = ttnn.sharded_to_interleaved(ws)
    assert dram.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    dram2 = ttnn.sharded_to_interleaved(ws, memory_config=None, dtype=ttnn.float32)
    assert dram2.dtype == ttnn.float32
    # grid form of interleaved_to_sharded
    grid = ttnn.interleaved_to_sharded(
        t,
        ttnn.CoreGrid(x=4, y=1),
        (64, 64),
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.ShardOrientation.ROW_MAJOR,
    )
    assert grid.shard_spec().shape == (64, 64)
    grid2 = ttnn.interleaved_to_sharded(
        t, ttnn.CoreGrid(x=2, y=1), [32, 256], ttnn.ShardStrategy.HEIGHT, None, ttnn.bfloat16
    )
    assert grid2.memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    pos = ttnn.interleaved_to_sharded(t, width, ttnn.float32)  # (t, memcfg, dtype) positional
    assert pos.dtype == ttnn.float32
    auto = ttnn.to_memory_config(t, ttnn.L1_BLOCK_SHARDED_MEMORY_CONFIG, dtype=ttnn.bfloat16)
    assert auto.shard_spec() is not None
    np.testing.assert_array_equal(_np(auto), _np(t))
    assert ttnn.to_memory_config(t, ttnn.DRAM_MEMORY_CONFIG) is t
    moved = t.to(mesh, ttnn.L1_MEMORY_CONFIG)
    assert moved.memory_config() == ttnn.L1_MEMORY_CONFIG
    # an interleaved input comes back as it is (ttnn returns it before looking at the other arguments)
    assert ttnn.sharded_to_interleaved(t) is t
    assert ttnn.sharded_to_interleaved(t, ttnn.L1_MEMORY_CONFIG, ttnn.float32) is t
    # error paths
    with pytest.raises(
        ValidationError,
        match=r"sharded_to_interleaved: memory_config: expected an interleaved ttnn.MemoryConfig",
    ):
        ttnn.sharded_to_interleaved(ws, width)
    with pytest.raises(
        ValidationError, match=r"ttnn.interleaved_to_sharded: input_tensor: expected an interleaved tensor"
    ):
        ttnn.interleaved_to_sharded(ws, height)
    with pytest.raises(
        ValidationError,
        match=r"interleaved_to_sharded: sharded_memory_config: expected a sharded memory config",
    ):
        ttnn.interleaved_to_sharded(t, ttnn.L1_MEMORY_CONFIG)
    with pytest.raises(
        ValidationError,
        match=r"interleaved_to_sharded: sharded_memory_config: expected a sharded ttnn.MemoryConfig or a core grid",
    ):
        ttnn.interleaved_to_sharded(t, "L1")
    with pytest.raises(
        ValidationError,
        match=r"interleaved_to_sharded: shard_scheme: expected shard_shape and a TensorMemoryLayout",
    ):
        ttnn.interleaved_to_sharded(t, ttnn.CoreGrid(x=2, y=1))
    with pytest.raises(ValidationError, match=r"ttnn.reshard: input_tensor: expected a sharded tensor"):
        ttnn.reshard(t, height)
    with pytest.raises(
        ValidationError, match=r"ttnn.reshard: output_memory_config: expected a sharded ttnn.MemoryConfig"
    ):
        ttnn.reshard(ws, ttnn.DRAM_MEMORY_CONFIG)
    with pytest.raises(
        ValidationError, match=r"ttnn.to_memory_config: memory_config: expected a ttnn.MemoryConfig"
    ):
        ttnn.to_memory_config(t, None)
    with pytest.raises(ValidationError, match=r"ttnn.to_memory_config: tensor: expected a tensor on device"):
        ttnn.to_memory_config(ttnn.from_numpy(x), ttnn.L1_MEMORY_CONFIG)
    with pytest.raises(
        ValidationError, match=r"to_memory_config: layout: expected TILE_LAYOUT for a BFLOAT8_B"
    ):
        ttnn.to_memory_config(
            _dev(mesh, x, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT), ttnn.L1_MEMORY_CONFIG, ttnn.bfloat8_b
        )


def test_impossible_shard_specs_are_rejected(open_mesh, rng):
    mesh = open_mesh((1, 1))
    t = _dev(mesh, rng.standard_normal((1, 1, 64, 256)))
    too_narrow = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(ttnn.CoreGrid(x=4, y=1).to_core_range_set(), (64, 32)),
    )
    with pytest.raises(
        ValidationError,
        match=r"ttnn.to_memory_config: memory_config: shard spec does not tile the tensor \[1, 1, 64, 256\]",
    ):
        ttnn.to_memory_config(t, too_narrow)
    not_tile = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(ttnn.CoreGrid(x=4, y=1).to_core_range_set(), (16, 256)),
    )
    with pytest.raises(
        ValidationError, match=r"shard shape \(16, 256\) must be a multiple of the 32×32 tile"
    ):
        ttnn.interleaved_to_sharded(t, not_tile)
    with pytest.raises(ValidationError, match=r"shard spec does not tile the tensor"):
        ttnn.interleaved_to_sharded(
            t, ttnn.CoreGrid(x=8, y=1), (32, 32), ttnn.ShardStrategy.WIDTH, ttnn.ShardOrientation.ROW_MAJOR
        )


def test_clone_deallocate_and_use_after_free(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 32)).astype(np.float32)
    t = _dev(mesh, x)
    c = ttnn.clone(t, dtype=ttnn.float32, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert c.dtype == ttnn.float32 and c.memory_config() == ttnn.L1_MEMORY_CONFIG
    np.testing.assert_array_equal(_np(c), _np(t))
    c2 = ttnn.clone(t)
    assert c2 is not t and c2.memory_config() == t.memory_config()
    device = mesh.get_devices()[0]
    used = device.memory_used(ttnn.BufferType.DRAM)
    ttnn.deallocate(c2)
    assert device.memory_used(ttnn.BufferType.DRAM) < used
    with pytest.raises(
        ValidationError,
        match=r"ttnn.reshape: input_tensor: the input tensor \[1, 1, 32, 32\] BFLOAT16 was deallocated",
    ):
        ttnn.reshape(c2, (32, 32))
    with pytest.raises(
        ValidationError, match=r"ttnn.Tensor.__getitem__: input_tensor: the input tensor .* was deallocated"
    ):
        c2[:, :, :8]
    with pytest.raises(ValidationError, match=r"ttnn.deallocate: tensor: expected a ttnn.Tensor"):
        ttnn.deallocate(np.ones(3))
    with pytest.raises(ValidationError, match=r"ttnn.clone: layout: expected TILE_LAYOUT for a BFLOAT8_B"):
        ttnn.clone(_dev(mesh, x, layout=ttnn.ROW_MAJOR_LAYOUT), dtype=ttnn.bfloat8_b)


def test_plus_one_in_place(open_mesh):
    mesh = open_mesh((1, 2))
    pos = ttnn.from_numpy(np.array([0, 5, -1, 2147483647], np.int32), dtype=ttnn.int32, device=mesh)
    alias = pos
    out = ttnn.plus_one(pos)
    assert out is pos and alias is pos
    for shard in _all_shards(pos):
        np.testing.assert_array_equal(shard, [1, 6, 0, -2147483648])  # 32-bit wrap-around
    pos2 = ttnn.from_numpy(np.array([[0, 5, -1, 2147483647]], np.int32), dtype=ttnn.int32, device=mesh)
    ttnn.plus_one(pos2, skip_negative_entries=True)
    np.testing.assert_array_equal(_np(pos2), [[1, 6, -1, 2147483647]])
    u = ttnn.from_numpy(np.array([4294967295, 3], np.uint32), dtype=ttnn.uint32, device=mesh)
    ttnn.plus_one(u)
    np.testing.assert_array_equal(_np(u), [0, 4])
    with pytest.raises(
        ValidationError,
        match=r"ttnn.plus_one: input_tensor.dtype: expected one of INT32, UINT32, got BFLOAT16",
    ):
        ttnn.plus_one(_dev(mesh, np.ones(4, np.float32), layout=ttnn.ROW_MAJOR_LAYOUT))
    with pytest.raises(
        ValidationError, match=r"ttnn.plus_one: input_tensor.layout: expected one of ROW_MAJOR, got TILE"
    ):
        ttnn.plus_one(
            ttnn.from_numpy(
                np.ones((32, 32), np.int32), dtype=ttnn.int32, layout=ttnn.TILE_LAYOUT, device=mesh
            )
        )


def test_copy_host_to_device_tensor_in_place(open_mesh, rng):
    mesh = open_mesh((1, 2))
    dst = ttnn.from_numpy(np.zeros((1, 8), np.uint32), dtype=ttnn.uint32, device=mesh)
    before = dst.memory_config()
    ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.arange(8, dtype=np.uint32).reshape(1, 8)), dst)
    for shard in _all_shards(dst):
        np.testing.assert_array_equal(shard, np.arange(8).reshape(1, 8))
    assert dst.memory_config() == before
    per_device = ttnn.from_numpy(
        np.arange(16, dtype=np.uint32).reshape(2, 8),
        dtype=ttnn.uint32,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    ttnn.copy_host_to_device_tensor(per_device, dst)
    np.testing.assert_array_equal(
        ttnn.to_numpy(dst, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)), np.arange(16).reshape(2, 8)
    )
    with pytest.raises(
        ValidationError,
        match=r"copy_host_to_device_tensor: host_tensor: expected \[1, 8\] UINT32 ROW_MAJOR like device_tensor, got \[1, 4\]",
    ):
        ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.zeros((1, 4), np.uint32)), dst)
    with pytest.raises(
        ValidationError, match=r"copy_host_to_device_tensor: host_tensor: expected a host tensor"
    ):
        ttnn.copy_host_to_device_tensor(dst, dst)
    three = ttnn.from_numpy(
        np.zeros((3, 8), np.uint32),
        dtype=ttnn.uint32,
        mesh_mapper=ttnn.ShardTensorToMesh(open_mesh((1, 3)), dim=0),
    )
    with pytest.raises(ValidationError, match=r"host_tensor: expected 1 or 2 host buffers, got 3"):
        ttnn.copy_host_to_device_tensor(three, dst)


def test_shape_ops_on_sharded_tensor_rederive_the_spec(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    ws = ttnn.to_memory_config(_dev(mesh, x), ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    half = ws[:, :, :, :128]
    assert half.is_sharded() and half.shape == (1, 1, 32, 128)
    np.testing.assert_array_equal(_np(half), _np(ws)[..., :128])
    with ttnn.OpTrace() as trace:
        ttnn.transpose(ws, 2, 3)
    assert trace.names == ["ttnn.transpose"]
