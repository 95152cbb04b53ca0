"""Shard dims follow a rank change: unsqueeze_to_4D, unsqueeze, squeeze, reshape and view move each shard dim of
the tensor's topology to where its data went (positive dims stay positive, negative stay counted from the end),
so composing the shards by the topology gives back the same data. A reshape that cuts a sharded dim stacks the
device buffers."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing.host import to_host


@pytest.fixture(scope="module")
def mesh():
    device = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    yield device
    ttnn.close_mesh_device(device)


def _sharded(mesh, array, dim, layout=ttnn.ROW_MAJOR_LAYOUT):
    return ttnn.from_numpy(
        array.astype(np.float32),
        dtype=ttnn.float32,
        layout=layout,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=dim),
    )


def _shard_dim(tensor):
    (placement,) = [p for p in tensor.tensor_topology().placements() if isinstance(p, ttnn.PlacementShard)]
    return placement.dim


def _data(*shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize(
    ("dim", "moved", "shard"), [(2, 3, [4, 32]), (-1, -1, [4, 32]), (1, 2, [2, 64]), (-2, -2, [2, 64])]
)
def test_unsqueeze_to_4d_moves_the_shard_dim(mesh, dim, moved, shard):
    x = _data(1, 4, 64)
    out = ttnn.unsqueeze_to_4D(_sharded(mesh, x, dim))
    assert list(out.shape) == [1, 1, *shard]
    assert _shard_dim(out) == moved
    np.testing.assert_array_equal(to_host(out), x[None])


def test_unsqueeze_to_4d_of_a_rank_2_tensor(mesh):
    x = _data(32, 64)
    out = ttnn.unsqueeze_to_4D(_sharded(mesh, x, 1))
    assert _shard_dim(out) == 3
    np.testing.assert_array_equal(to_host(out), x[None, None])


@pytest.mark.parametrize(("unsqueeze_at", "moved"), [(0, 1), (1, 0), (-1, 0), (-4, 1)])
def test_unsqueeze_moves_a_size_1_shard_dim_exactly(mesh, unsqueeze_at, moved):
    x = _data(2, 8, 32)  # one row of dim 0 per device: a size-1 shard dim, which only the op itself can place
    out = ttnn.unsqueeze(_sharded(mesh, x, 0), unsqueeze_at)
    assert _shard_dim(out) == moved
    np.testing.assert_array_equal(to_host(out), np.expand_dims(x, unsqueeze_at))


@pytest.mark.parametrize("dim", [2, -1])
def test_squeeze_and_reshape_follow_the_data(mesh, dim):
    x = _data(1, 1, 32, 64)
    t = _sharded(mesh, x, 3 if dim == 2 else dim)
    squeezed = ttnn.squeeze(t, 0)
    assert _shard_dim(squeezed) == (2 if dim == 2 else -1)
    np.testing.assert_array_equal(to_host(squeezed), x[0])
    flat = ttnn.reshape(t, (32, 32))  # per device [1, 1, 32, 32] -> [32, 32]
    assert _shard_dim(flat) == (1 if dim == 2 else -1)
    np.testing.assert_array_equal(to_host(flat), x.reshape(32, 64))


def test_reshape_keeps_a_sharded_outer_dim_that_merges_with_inner_ones(mesh):
    x = _data(4, 8, 32)
    out = ttnn.reshape(_sharded(mesh, x, 0), (1, 2 * 8, 32))  # per device [2, 8, 32] -> [1, 16, 32]
    assert _shard_dim(out) == 1
    np.testing.assert_array_equal(to_host(out), x.reshape(1, 32, 32))


def test_view_and_tile_reshape_follow_the_data(mesh):
    x = _data(1, 1, 64, 64)
    t = _sharded(mesh, x, 3, layout=ttnn.TILE_LAYOUT)
    viewed = ttnn.view(t, (64, 32))
    assert _shard_dim(viewed) == 1
    np.testing.assert_array_equal(to_host(viewed), x.reshape(64, 64))
    # a TILE view with explicit padding: logical rows drop into the padding, the shard dim is the padded width
    narrowed = ttnn.reshape(t, (1, 1, 40, 32), (1, 1, 64, 32))
    assert _shard_dim(narrowed) == 3
    np.testing.assert_array_equal(to_host(narrowed), x[:, :, :40])


def test_replicated_tensors_are_unchanged(mesh):
    t = ttnn.from_numpy(_data(4, 64), dtype=ttnn.float32, device=mesh)
    out = ttnn.unsqueeze_to_4D(t)
    assert out.tensor_topology() == t.tensor_topology()


@pytest.mark.parametrize("dim", [1, -2])
def test_a_reshape_that_cuts_a_sharded_dim_stacks_the_device_buffers(mesh, dim):
    """No dim of [8, 32] holds a per-device [2, 4, 32] shard's dim 1 whole: the shards stack on dim 0."""
    x = _data(2, 8, 32)
    out = ttnn.reshape(_sharded(mesh, x, dim), (8, 32))
    assert _shard_dim(out) == (0 if dim == 1 else -2)
    halves = np.split(x, 2, axis=1)
    np.testing.assert_array_equal(to_host(out), np.concatenate([h.reshape(8, 32) for h in halves]))


def test_embedding_then_unsqueeze_to_4d_composes_by_its_topology(mesh):
    """The case modules hit: ttnn.embedding returns [1, S, dim] sharded on dim 2, then unsqueeze_to_4D."""
    table = _data(16, 64) % 251  # integers below 256: exact in bfloat16
    weights = ttnn.from_numpy(
        table[None, None],
        dtype=ttnn.bfloat16,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    ids = ttnn.from_numpy(np.array([[[[3, 1, 4, 1]]]], dtype=np.uint32), dtype=ttnn.uint32, device=mesh)
    rows = ttnn.embedding(ids, weights, layout=ttnn.ROW_MAJOR_LAYOUT)
    out = ttnn.unsqueeze_to_4D(rows)
    assert len(rows.shape) == 3 and _shard_dim(out) == _shard_dim(rows) + 1
    np.testing.assert_array_equal(to_host(out), table[[3, 1, 4, 1]][None, None])


def test_a_topology_that_does_not_fit_the_tensor_is_an_error(mesh):
    t = _sharded(mesh, _data(4, 64), 1)
    t._topology = ttnn.TensorTopology(
        t.tensor_topology().distribution_shape, (ttnn.PlacementReplicate(), ttnn.PlacementShard(5))
    )
    with pytest.raises(
        ttnn.ValidationError,
        match=r"ttnn.unsqueeze: input_tensor: expected a tensor whose topology fits its shape, got PlacementShard\(5\) does not fit a rank-2 tensor",
    ):
        ttnn.unsqueeze(t, 0)


@pytest.mark.parametrize(("dim", "moved"), [(1, 2), (-2, -1), (0, 0)])
def test_transpose_and_permute_move_the_shard_dim_with_its_data(mesh, dim, moved):
    x = _data(4, 8, 32)
    t = _sharded(mesh, x, dim)
    swapped = ttnn.transpose(t, 1, 2)
    assert _shard_dim(swapped) == moved
    np.testing.assert_array_equal(to_host(swapped), np.swapaxes(x, 1, 2))
    rotated = ttnn.permute(t, (2, 0, 1))  # new dim 1 is old dim 0, new dim 2 old dim 1
    np.testing.assert_array_equal(to_host(rotated), np.transpose(x, (2, 0, 1)))
