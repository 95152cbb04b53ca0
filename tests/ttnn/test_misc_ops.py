"""embedding, reductions (sum/mean/max/min/std/var/argmax/topk) and creation ops against numpy/torch.

Tolerances: lookups, argmax/topk indices and creation are exact. Reductions compute in float32 on the
stored values and round once to the output dtype, so against a float64 reference on the stored values the
max error is ≤ 1e-5·max|y| (float32), 2⁻⁸·max|y| (bfloat16) or 2⁻⁶·max|y| (bfloat8_b).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn.numerics import quantize

DTYPES = [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b]
REL_TOL = {ttnn.float32: 1e-5, ttnn.bfloat16: 2.0**-8, ttnn.bfloat8_b: 2.0**-6}


def _dev(mesh, array, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, **kw):
    return ttnn.from_numpy(np.asarray(array), dtype=dtype, layout=layout, device=mesh, **kw)


def _np(t):
    return ttnn.to_numpy(ttnn.get_device_tensors(t)[0]) if t.device() is not None else ttnn.to_numpy(t)


# --- embedding -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids_shape", "out_shape"),
    [((1, 1, 1, 12), (1, 12, 64)), ((3, 12), (3, 12, 64)), ((12,), (12, 64)), ((2, 1, 1, 12), (2, 12, 64))],
)
def test_embedding_shapes_and_values(open_mesh, rng, ids_shape, out_shape):
    mesh = open_mesh((1, 2))
    vocab, dim = 50, 64
    table = rng.standard_normal((vocab, dim)).astype(np.float32)
    ids = rng.integers(0, vocab, size=ids_shape).astype(np.uint32)
    tt_ids = ttnn.from_numpy(ids, dtype=ttnn.uint32, device=mesh)
    tt_table = _dev(mesh, table, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    out = ttnn.embedding(tt_ids, tt_table)
    assert out.shape == out_shape and out.layout == ttnn.ROW_MAJOR_LAYOUT and out.dtype == ttnn.bfloat16
    expect = torch.nn.functional.embedding(
        torch.tensor(ids.astype(np.int64)), torch.tensor(_np(tt_table))
    ).numpy()
    np.testing.assert_array_equal(_np(out), expect.reshape(out_shape))
    tiled = ttnn.embedding(tt_ids, tt_table, layout=ttnn.TILE_LAYOUT, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert tiled.layout == ttnn.TILE_LAYOUT and tiled.memory_config() == ttnn.L1_MEMORY_CONFIG
    np.testing.assert_array_equal(_np(tiled), _np(out))


def test_embedding_dtypes_padding_and_bfloat16_ids(open_mesh, rng):
    mesh = open_mesh((1, 1))
    table = rng.standard_normal((40, 96)).astype(np.float32)
    ids = np.array([[3, 0, 39, 7, 0, 12, 5, 1]], np.uint32)
    t8 = _dev(mesh, table, ttnn.bfloat8_b, ttnn.TILE_LAYOUT)
    out = ttnn.embedding(ttnn.from_numpy(ids, dtype=ttnn.uint32, device=mesh), t8)
    assert out.dtype == ttnn.bfloat16 and out.layout == ttnn.TILE_LAYOUT  # bfp8 table: bfloat16 rows, TILE
    np.testing.assert_array_equal(_np(out), _np(t8)[ids[0]][None])
    assert_pcc(table[ids[0]][None], _np(out), 0.999)
    cast = ttnn.embedding(
        ttnn.from_numpy(ids, dtype=ttnn.uint32, device=mesh),
        t8,
        layout=ttnn.TILE_LAYOUT,
        dtype=ttnn.bfloat8_b,
    )
    assert cast.dtype == ttnn.bfloat8_b
    np.testing.assert_array_equal(_np(cast), quantize(_np(out), ttnn.bfloat8_b))
    tb = _dev(mesh, table, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    padded = ttnn.embedding(ttnn.from_numpy(ids, dtype=ttnn.uint32, device=mesh), tb, padding_idx=0)
    expect = _np(tb)[ids[0]]
    expect[ids[0] == 0] = 0
    np.testing.assert_array_equal(_np(padded)[0], expect)
    bf_ids = ttnn.from_numpy(ids.astype(np.float32), dtype=ttnn.bfloat16, device=mesh)
    np.testing.assert_array_equal(_np(ttnn.embedding(bf_ids, tb)), _np(tb)[ids[0]][None])
    four_d = _dev(mesh, table.reshape(1, 1, 40, 96), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    np.testing.assert_array_equal(_np(ttnn.embedding(bf_ids, four_d)), _np(tb)[ids[0]][None])


def test_embedding_distributed_table_and_ids(open_mesh, rng):
    mesh = open_mesh((1, 4))
    vocab, dim = 32, 128
    table = rng.standard_normal((vocab, dim)).astype(np.float32)
    ids = rng.integers(0, vocab, size=(1, 1, 1, 16)).astype(np.uint32)
    tt_ids = ttnn.from_numpy(
        ids, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )
    split_table = _dev(
        mesh, table, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1)
    )
    out = ttnn.embedding(tt_ids, split_table, layout=ttnn.TILE_LAYOUT)
    assert out.shape == (1, 16, dim // 4)  # each device holds its slice of the embedding dim
    full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=-1))
    np.testing.assert_array_equal(full, quantize(table, ttnn.bfloat16)[ids[0, 0, 0]][None])
    assert isinstance(out.tensor_topology().placements()[0], ttnn.PlacementShard)
    batch_ids = rng.integers(0, vocab, size=(4, 8)).astype(np.uint32)
    dp_ids = ttnn.from_numpy(
        batch_ids, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    dp = ttnn.embedding(dp_ids, _dev(mesh, table, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT))
    assert dp.shape == (1, 8, dim)
    np.testing.assert_array_equal(
        ttnn.to_numpy(dp, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)),
        quantize(table, ttnn.bfloat16)[batch_ids],
    )


def test_embedding_on_a_2d_mesh(open_mesh, rng):
    mesh = open_mesh((2, 2))
    table = rng.standard_normal((16, 64)).astype(np.float32)
    ids = rng.integers(0, 16, size=(2, 8)).astype(np.uint32)
    tt_table = _dev(
        mesh,
        table,
        ttnn.bfloat16,
        ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, -1)),
    )
    tt_ids = ttnn.from_numpy(
        ids, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(0, None))
    )
    out = ttnn.embedding(tt_ids, tt_table)  # rows split the batch, columns split the embedding dim
    assert out.shape == (1, 8, 32)
    assert out.tensor_topology().placements() == [ttnn.PlacementShard(0), ttnn.PlacementShard(2)]
    full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 2)))
    np.testing.assert_array_equal(full, quantize(table, ttnn.bfloat16)[ids])
    rep_ids = ttnn.from_numpy(ids[:1], dtype=ttnn.uint32, device=mesh)
    assert ttnn.embedding(rep_ids, tt_table).tensor_topology().placements() == [
        ttnn.PlacementReplicate(),
        ttnn.PlacementShard(2),
    ]
    rep_table = _dev(
        mesh,
        table,
        ttnn.bfloat16,
        ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, None)),
    )
    flat_ids = ttnn.from_numpy(
        np.tile(ids[:1], (4, 1)),
        dtype=ttnn.uint32,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    assert ttnn.embedding(flat_ids, rep_table).tensor_topology().placements() == [ttnn.PlacementShard(0)]


def test_embedding_errors(open_mesh, rng):
    mesh = open_mesh((1, 2))
    table = _dev(mesh, rng.standard_normal((10, 32)), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    ids = ttnn.from_numpy(np.array([[1, 2, 3, 4]], np.uint32), dtype=ttnn.uint32, device=mesh)
    bad_ids = ttnn.from_numpy(np.array([[1, 10, 3, 4]], np.uint32), dtype=ttnn.uint32, device=mesh)
    with pytest.raises(
        ValidationError,
        match=r"ttnn.embedding: input_tensor: expected token ids in \[0, 10\) \(the weight has 10 rows\), got id 10 on device 0",
    ):
        ttnn.embedding(bad_ids, table)
    neg = ttnn.from_numpy(np.array([[-1.0, 2.0]], np.float32), dtype=ttnn.bfloat16, device=mesh)
    with pytest.raises(ValidationError, match=r"got id -1 on device 0"):
        ttnn.embedding(neg, table)
    ok_pad = ttnn.embedding(neg, table, padding_idx=-1)  # the padding id may lie outside the table
    assert not _np(ok_pad)[0, 0].any()
    frac = ttnn.from_numpy(np.array([[1.5]], np.float32), dtype=ttnn.bfloat16, device=mesh)
    with pytest.raises(ValidationError, match=r"input_tensor: expected integral token ids"):
        ttnn.embedding(frac, table)
    with pytest.raises(
        ValidationError,
        match=r"ttnn.embedding: input_tensor.dtype: expected one of UINT32, BFLOAT16, got INT32",
    ):
        ttnn.embedding(ttnn.from_numpy(np.array([[1]], np.int32), device=mesh), table)
    with pytest.raises(
        ValidationError,
        match=r"ttnn.embedding: weight.dtype: expected one of BFLOAT16, BFLOAT8_B, got FLOAT32",
    ):
        ttnn.embedding(ids, _dev(mesh, np.ones((10, 32)), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT))
    with pytest.raises(
        ValidationError,
        match=r"weight: expected a \[vocab, dim\] or \[1, 1, vocab, dim\] table, got \[2, 10, 32\]",
    ):
        ttnn.embedding(ids, _dev(mesh, np.ones((2, 10, 32)), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT))
    with pytest.raises(
        ValidationError, match=r"input_tensor: expected ids shaped \[S\], \[B, S\] or \[B, 1, 1, S\]"
    ):
        ttnn.embedding(ttnn.from_numpy(np.ones((1, 2, 1, 4), np.uint32), device=mesh), table)
    with pytest.raises(
        ValidationError,
        match=r"dtype: expected BFLOAT16 \(only a TILE_LAYOUT output can be cast\), got FLOAT32",
    ):
        ttnn.embedding(ids, table, dtype=ttnn.float32)
    with pytest.raises(ValidationError, match=r"ttnn.embedding: layout: expected a ttnn.Layout"):
        ttnn.embedding(ids, table, layout="TILE")
    with pytest.raises(ValidationError, match=r"ttnn.embedding: dtype: expected a ttnn.DataType"):
        ttnn.embedding(ids, table, layout=ttnn.TILE_LAYOUT, dtype="bf16")
    with pytest.raises(ValidationError, match=r"ttnn.embedding: padding_idx: expected an int or None"):
        ttnn.embedding(ids, table, padding_idx=1.0)
    with pytest.raises(ValidationError, match=r"ttnn.embedding: memory_config: expected a ttnn.MemoryConfig"):
        ttnn.embedding(ids, table, memory_config="L1")
    with pytest.raises(
        ValidationError,
        match=r"memory_config: expected interleaved or height-sharded for a ROW_MAJOR output, got WIDTH_SHARDED",
    ):
        ttnn.embedding(ids, table, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    sharded_table = ttnn.to_memory_config(_dev(mesh, np.ones((32, 32))), ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match=r"ttnn.embedding: weight: expected an interleaved tensor"):
        ttnn.embedding(ids, sharded_table)
    other = open_mesh((1, 2))
    with pytest.raises(
        ValidationError, match=r"weight: expected a tensor on the same device as input_tensor"
    ):
        ttnn.embedding(ids, _dev(other, np.ones((10, 32)), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT))


# --- reductions ------------------------------------------------------------------------------------------------

_REDUCTIONS = {
    "sum": (ttnn.sum, lambda v, d, k: np.sum(v, axis=d, keepdims=k)),
    "mean": (ttnn.mean, lambda v, d, k: np.mean(v, axis=d, keepdims=k)),
    "max": (ttnn.max, lambda v, d, k: np.max(v, axis=d, keepdims=k)),
    "min": (ttnn.min, lambda v, d, k: np.min(v, axis=d, keepdims=k)),
    "var": (ttnn.var, lambda v, d, k: np.var(v, axis=d, keepdims=k, ddof=1)),
    "std": (ttnn.std, lambda v, d, k: np.std(v, axis=d, keepdims=k, ddof=1)),
}


@pytest.mark.parametrize("name", sorted(_REDUCTIONS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_match_numpy(open_mesh, rng, name, dtype):
    mesh = open_mesh((1, 2))
    op, ref = _REDUCTIONS[name]
    x = (rng.standard_normal((2, 3, 32, 64)) * 3 + 1).astype(np.float32)
    t = _dev(mesh, x, dtype)
    v = _np(t).astype(np.float64)
    for dim, keepdim in [
        (-1, True),
        (-2, False),
        ((2, 3), True),
        (1, False),
        (None, False),
        ([0, -1], False),
    ]:
        out = op(t, dim, keepdim)
        axis = (
            tuple(range(4))
            if dim is None
            else tuple(np.array(dim if isinstance(dim, (list, tuple)) else [dim]) % 4)
        )
        expect = np.asarray(ref(v, axis, keepdim))
        assert out.shape == expect.shape and out.dtype == dtype, (dim, keepdim)
        err = float(np.max(np.abs(_np(out) - expect)))
        assert err <= REL_TOL[dtype] * float(np.max(np.abs(expect))) + 1e-6, (name, dim, keepdim, err)


def test_reduction_options_and_integers(open_mesh, rng):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 1, 32, 32)).astype(np.float32)
    t = _dev(mesh, x, ttnn.float32)
    np.testing.assert_allclose(_np(ttnn.sum(t, dim=-1, scalar=0.5)), x.sum(-1) * 0.5, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(ttnn.var(t, dim=-1, correction=False)), x.var(-1), rtol=1e-5, atol=1e-6)
    moved = ttnn.max(t, dim=-1, keepdim=True, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert moved.memory_config() == ttnn.L1_MEMORY_CONFIG
    ints = ttnn.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4) - 5, dtype=ttnn.int32, device=mesh)
    np.testing.assert_array_equal(_np(ttnn.sum(ints, dim=1)), (np.arange(12).reshape(3, 4) - 5).sum(1))
    np.testing.assert_array_equal(_np(ttnn.max(ints)), 6)
    assert ttnn.sum(ints).shape == ()
    one = _dev(mesh, np.ones((1, 1, 1, 32)), ttnn.float32)
    np.testing.assert_array_equal(
        _np(ttnn.var(one, dim=-2)), np.zeros((1, 1, 32))
    )  # N = 1: no Bessel correction
    with pytest.raises(ValidationError, match=r"ttnn.sum: dim: expected None, or dims in \[-4, 3\], got 4"):
        ttnn.sum(t, 4)
    with pytest.raises(ValidationError, match=r"ttnn.max: dim: expected distinct dims"):
        ttnn.max(t, [3, -1])
    with pytest.raises(
        ValidationError,
        match=r"ttnn.mean: input_tensor.dtype: expected one of BFLOAT16, FLOAT32, BFLOAT8_B, BFLOAT4_B, got INT32",
    ):
        ttnn.mean(ints)
    with pytest.raises(ValidationError, match=r"ttnn.min: memory_config: expected a ttnn.MemoryConfig"):
        ttnn.min(t, memory_config="L1")
    with pytest.raises(
        ValidationError, match=r"ttnn.sum: compute_kernel_config: expected a ttnn.WormholeComputeKernelConfig"
    ):
        ttnn.sum(t, compute_kernel_config=1)


def test_argmax(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x = rng.standard_normal((1, 1, 32, 200)).astype(np.float32)
    x[0, 0, 3, [10, 150]] = 50.0  # a tie: the first index wins
    rm = _dev(mesh, x, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    out = ttnn.argmax(rm, dim=3, keepdim=True, use_multicore=True)
    assert out.dtype == ttnn.uint32 and out.layout == ttnn.ROW_MAJOR_LAYOUT and out.shape == (1, 1, 32, 1)
    np.testing.assert_array_equal(_np(out)[..., 0], np.argmax(_np(rm), axis=-1))
    assert _np(out)[0, 0, 3, 0] == 10
    flat = ttnn.argmax(_dev(mesh, x, ttnn.float32), dim=-1)
    assert flat.shape == (1, 1, 32)
    everything = ttnn.argmax(rm)
    assert everything.shape == () and int(_np(everything)) == int(np.argmax(_np(rm)))
    assert ttnn.argmax(rm, keepdim=True).shape == (1, 1, 1, 1)
    ints = ttnn.from_numpy(np.array([[3, 9, 9, 1]], np.uint32), dtype=ttnn.uint32, device=mesh)
    np.testing.assert_array_equal(_np(ttnn.argmax(ints, dim=-1)), [1])
    with pytest.raises(
        ValidationError,
        match=r"ttnn.argmax: dim: expected None, -1 or 3 \(only the last dim can be reduced\), got 2",
    ):
        ttnn.argmax(rm, dim=2)
    with pytest.raises(
        ValidationError,
        match=r"ttnn.argmax: input_tensor.layout: expected ROW_MAJOR for a UINT32 input, got TILE",
    ):
        ttnn.argmax(
            ttnn.from_numpy(
                np.ones((32, 32), np.uint32), dtype=ttnn.uint32, layout=ttnn.TILE_LAYOUT, device=mesh
            )
        )
    with pytest.raises(
        ValidationError,
        match=r"input_tensor.dtype: expected one of BFLOAT16, FLOAT32, UINT32, INT32, UINT16, got BFLOAT8_B",
    ):
        ttnn.argmax(_dev(mesh, x, ttnn.bfloat8_b))


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.float32])
def test_topk_matches_torch(open_mesh, rng, dtype):
    mesh = open_mesh((1, 1))
    x = rng.standard_normal((1, 2, 32, 64)).astype(np.float32)
    t = _dev(mesh, x, dtype)
    stored = torch.tensor(_np(t))
    for k, dim, largest in [(5, -1, True), (32, -1, False), (3, 2, True)]:
        values, indices = ttnn.topk(t, k, dim=dim, largest=largest)
        ref_v, ref_i = torch.topk(stored, k, dim=dim, largest=largest, sorted=True)
        assert values.dtype == dtype and indices.dtype == ttnn.uint16 and values.layout == ttnn.TILE_LAYOUT
        np.testing.assert_array_equal(_np(values), quantize(ref_v.numpy(), dtype))
        np.testing.assert_array_equal(
            np.take_along_axis(_np(t), _np(indices).astype(np.int64), axis=dim), ref_v.numpy()
        )
        if dtype is ttnn.float32:  # rounded values tie often; the order among ties is not specified
            np.testing.assert_array_equal(_np(indices), ref_i.numpy())


def test_topk_errors(open_mesh, rng):
    mesh = open_mesh((1, 1))
    t = _dev(mesh, rng.standard_normal((1, 1, 32, 64)))
    with pytest.raises(
        ValidationError, match=r"ttnn.topk: k: expected an int in \[1, 64\] \(the size of dim 3\), got 65"
    ):
        ttnn.topk(t, 65)
    with pytest.raises(ValidationError, match=r"ttnn.topk: k: expected an int in \[1, 32\]"):
        ttnn.topk(t, 0, dim=2)
    with pytest.raises(ValidationError, match=r"ttnn.topk: dim: expected a dim in \[-4, 3\], got 5"):
        ttnn.topk(t, 1, dim=5)
    with pytest.raises(
        ValidationError, match=r"ttnn.topk: input_tensor.layout: expected one of TILE, got ROW_MAJOR"
    ):
        ttnn.topk(_dev(mesh, np.ones((1, 64)), layout=ttnn.ROW_MAJOR_LAYOUT), 1)


def _moe_masks(mesh):
    """tt-metal's Mixtral masks: 8 valid experts of 64 columns, the top 2 of the k = 32 kept."""
    experts = np.full((1, 1, 1, 64), -np.inf, np.float32)
    experts[..., :8] = 0
    top2 = np.full((1, 1, 1, 32), -np.inf, np.float32)
    top2[..., :2] = 0
    return _dev(mesh, experts), _dev(mesh, top2)


def test_moe_is_ttnns_documented_reference(open_mesh, rng):
    """``ttnn.moe``: the top-k of input + expert mask, softmax after the top-k mask, summed where the index is 0
    (ttnn's docs give it as torch code); tt-metal's TtMoeLayer decode uses it on each device's gate logits."""
    mesh = open_mesh((1, 2))
    t = _dev(mesh, rng.standard_normal((1, 1, 64, 64)))
    experts, top2 = _moe_masks(mesh)
    out = ttnn.moe(t, experts, top2, 32)
    assert list(out.shape) == [1, 1, 64, 1] and out.dtype is ttnn.bfloat16 and out.layout == ttnn.TILE_LAYOUT
    values, indices = torch.topk(torch.tensor(_np(t)) + torch.tensor(_np(experts)), 32)
    expected = torch.sum(torch.softmax(values + torch.tensor(_np(top2)), dim=-1) * (indices == 0), dim=-1)
    for part in ttnn.get_device_tensors(out):
        np.testing.assert_array_equal(_np(part)[..., 0], quantize(expected.numpy(), ttnn.bfloat16))
    assert 0 < np.count_nonzero(_np(out)) < 64  # expert 0 is in some rows' top 2, not in all


def test_moe_errors(open_mesh, rng):
    mesh = open_mesh((1, 1))
    t = _dev(mesh, rng.standard_normal((1, 1, 32, 64)))
    experts, top2 = _moe_masks(mesh)
    with pytest.raises(ValidationError, match=r"ttnn.moe: k: expected 32, got 8"):
        ttnn.moe(t, experts, top2, 8)
    with pytest.raises(ValidationError, match=r"ttnn.moe: input_tensor: expected a 4D tensor, N\*C\*H"):
        ttnn.moe(_dev(mesh, rng.standard_normal((1, 1, 32, 96))), experts, top2, 32)
    with pytest.raises(ValidationError, match=r"ttnn.moe: topk_mask_tensor: expected one row of width 32"):
        ttnn.moe(t, experts, experts, 32)
    with pytest.raises(ValidationError, match=r"ttnn.moe: input_tensor.dtype: expected one of BFLOAT16"):
        ttnn.moe(_dev(mesh, rng.standard_normal((1, 1, 32, 64)), ttnn.float32), experts, top2, 32)
    sharded = ttnn.create_sharded_memory_config(
        (32, 32),
        core_grid=ttnn.CoreGrid(y=1, x=2),
        strategy=ttnn.ShardStrategy.WIDTH,
        use_height_and_width_as_shard_shape=True,
    )
    with pytest.raises(ValidationError, match=r"ttnn.moe: input_tensor: expected an interleaved tensor"):
        ttnn.moe(ttnn.to_memory_config(t, sharded), experts, top2, 32)
    with pytest.raises(ValidationError, match=r"ttnn.moe: output_tensor: expected None"):
        ttnn.moe(t, experts, top2, 32, output_tensor=t)


# --- creation ---------------------------------------------------------------------------------------------------


def test_creation_ops(open_mesh):
    mesh = open_mesh((1, 2))
    z = ttnn.zeros((2, 3))
    assert z.device() is None and z.dtype == ttnn.bfloat16 and z.layout == ttnn.ROW_MAJOR_LAYOUT
    np.testing.assert_array_equal(ttnn.to_numpy(z), np.zeros((2, 3)))
    o = ttnn.ones(
        [1, 1, 32, 32],
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.L1_MEMORY_CONFIG,
    )
    assert o.memory_config() == ttnn.L1_MEMORY_CONFIG and o.dtype == ttnn.bfloat8_b
    for shard in ttnn.get_device_tensors(o):
        np.testing.assert_array_equal(ttnn.to_numpy(shard), np.ones((1, 1, 32, 32)))
    f = ttnn.full(ttnn.Shape([4, 5]), 3.14159, dtype=ttnn.float32, device=mesh)
    np.testing.assert_array_equal(_np(f), np.full((4, 5), 3.14159, np.float32))
    fb = ttnn.full((4,), 3.14159)
    np.testing.assert_array_equal(ttnn.to_numpy(fb), quantize(np.full(4, 3.14159), ttnn.bfloat16))
    fi = ttnn.full((2, 2), 7, dtype=ttnn.uint32, device=mesh)
    assert _np(fi).dtype == np.uint32 and (_np(fi) == 7).all()
    e = ttnn.empty(5, device=mesh)
    assert e.shape == (5,) and not _np(e).any()
    like = ttnn.zeros_like(o)
    assert (
        like.dtype == o.dtype
        and like.layout == o.layout
        and like.device() is mesh
        and like.memory_config() == o.memory_config()
    )
    ones_host = ttnn.ones_like(ttnn.from_device(o), dtype=ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT)
    assert ones_host.device() is None and ttnn.to_numpy(ones_host).sum() == 1024
    fl = ttnn.full_like(o, -2.0, dtype=ttnn.bfloat16, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    assert (_np(fl) == -2).all() and fl.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    other = open_mesh((1, 1))
    moved = ttnn.empty_like(o, device=other)
    assert moved.device() is other and moved.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    with pytest.raises(
        ValidationError, match=r"ttnn.zeros: layout: expected TILE_LAYOUT for BFLOAT8_B, got ROW_MAJOR"
    ):
        ttnn.zeros((32, 32), dtype=ttnn.bfloat8_b)
    with pytest.raises(
        ValidationError, match=r"ttnn.ones: device: expected a device when memory_config is given"
    ):
        ttnn.ones((2, 2), memory_config=ttnn.L1_MEMORY_CONFIG)
    with pytest.raises(
        ValidationError,
        match=r"ttnn.zeros: shape: expected a list or tuple of non-negative ints, got \(2, -1\)",
    ):
        ttnn.zeros((2, -1))
    with pytest.raises(
        ValidationError, match=r"ttnn.zeros: shape: expected a list or tuple of non-negative ints, got 'ab'"
    ):
        ttnn.zeros("ab")
    with pytest.raises(ValidationError, match=r"ttnn.full: fill_value: expected a number, got 'x'"):
        ttnn.full((2,), "x")
    with pytest.raises(ValidationError, match=r"ttnn.full_like: fill_value: expected a number"):
        ttnn.full_like(o, None)
    with pytest.raises(ValidationError, match=r"ttnn.zeros: dtype: expected a ttnn.DataType"):
        ttnn.zeros((2,), dtype="bf16")
    with pytest.raises(ValidationError, match=r"ttnn.zeros: layout: expected a ttnn.Layout"):
        ttnn.zeros((2,), layout="TILE")
    with pytest.raises(
        ValidationError, match=r"ttnn.zeros: device: expected a ttnn.MeshDevice or None, got str"
    ):
        ttnn.zeros((2,), device="cpu")
    with pytest.raises(ValidationError, match=r"ttnn.zeros: memory_config: expected a ttnn.MemoryConfig"):
        ttnn.zeros((2,), device=mesh, memory_config="L1")
    with pytest.raises(ValidationError, match=r"ttnn.zeros_like: tensor: expected a ttnn.Tensor"):
        ttnn.zeros_like(np.zeros(3))


def test_arange_and_rand(open_mesh):
    mesh = open_mesh((1, 2))
    a = ttnn.arange(0, 10, 2, device=mesh)
    assert a.shape == (5,) and a.dtype == ttnn.bfloat16
    np.testing.assert_array_equal(_np(a), [0, 2, 4, 6, 8])
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.arange(4)), [0, 1, 2, 3])
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.arange(5, 0, -2, dtype=ttnn.int32)), [5, 3, 1])
    big = ttnn.arange(0, 1000, 1, dtype=ttnn.uint32, device=mesh, layout=ttnn.ROW_MAJOR_LAYOUT)
    np.testing.assert_array_equal(_np(big), np.arange(1000))
    np.testing.assert_array_equal(
        _np(ttnn.arange(250, 260, dtype=ttnn.bfloat16))[:3], [250, 251, 252]
    )  # bf16 holds ints ≤ 256 exactly
    with pytest.raises(ValidationError, match=r"ttnn.arange: step: expected a non-zero step"):
        ttnn.arange(0, 5, 0)
    with pytest.raises(
        ValidationError, match=r"ttnn.arange: end: expected a range with at least one element"
    ):
        ttnn.arange(5, 5)
    with pytest.raises(ValidationError, match=r"ttnn.arange: start: expected a number"):
        ttnn.arange("0", 5)
    r1 = ttnn.rand((1, 1, 32, 32), device=mesh, seed=7, low=-1.0, high=1.0)
    r2 = ttnn.rand((1, 1, 32, 32), device=mesh, seed=7, low=-1.0, high=1.0)
    assert r1.layout == ttnn.TILE_LAYOUT
    np.testing.assert_array_equal(_np(r1), _np(r2))
    assert _np(r1).min() >= -1.0 and _np(r1).max() <= 1.0 and _np(r1).std() > 0.3
    assert not np.array_equal(_np(ttnn.rand((1, 1, 32, 32), seed=8)), _np(r1))
    with pytest.raises(
        ValidationError, match=r"ttnn.rand: high: expected a value greater than low \(1.0\), got 1.0"
    ):
        ttnn.rand((2, 2), low=1.0, high=1.0)
