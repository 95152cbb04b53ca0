"""Collectives on the emulated mesh: per-device results against numpy references built from per-device inputs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn.ops import ccl

MESHES = [(1, 2), (1, 8), (2, 4), (8, 4), (8,)]
DTYPES = [ttnn.bfloat16, ttnn.float32, ttnn.bfloat8_b]
# max |error| relative to max |reference| after one rounding to the dtype
REL_TOL = {ttnn.float32: 0.0, ttnn.bfloat16: 2.0**-8, ttnn.bfloat8_b: 2.0**-6}


# --- helpers ---------------------------------------------------------------------------------------------------


def _axes(shape):
    return [None, 0] if len(shape) == 1 else [None, 0, 1]


def _groups(shape, axis):
    """Reference groups: device indices per group, each in ring order (independent of the implementation)."""
    n = int(np.prod(shape))
    if axis is None or len(shape) == 1:
        return [list(range(n))]
    rows, cols = shape
    if axis == 0:
        return [[r * cols + c for r in range(rows)] for c in range(cols)]
    return [[r * cols + c for c in range(cols)] for r in range(rows)]


def _group_of(shape, axis, i):
    return next(g for g in _groups(shape, axis) if i in g)


def _per_device(mesh, arrays, dtype, layout=ttnn.TILE_LAYOUT, memory_config=None):
    """A device tensor whose shard i is arrays[i] (quantised to dtype)."""
    stacked = np.concatenate(arrays, axis=0)
    return ttnn.from_numpy(
        stacked,
        dtype=dtype,
        layout=layout,
        device=mesh,
        memory_config=memory_config,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )


def _shards(tensor):
    return [ttnn.to_numpy(t) for t in ttnn.get_device_tensors(tensor)]


def _random_input(mesh, rng, shape, dtype, layout=ttnn.TILE_LAYOUT, memory_config=None):
    n = mesh.get_num_devices()
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    tensor = _per_device(mesh, arrays, dtype, layout, memory_config)
    return tensor, _shards(tensor)  # the quantised per-device inputs


def _seq_sum(arrays):
    acc = np.array(arrays[0], dtype=np.float32)
    for a in arrays[1:]:
        acc = acc + a
    return acc


def _check_sum(actual, reference_parts, dtype):
    """float32: bitwise equal to the sequential float32 sum; bf16: equal to it rounded to bf16; bfp8: PCC and
    max error against the exact (float64) sum."""
    seq = _seq_sum(reference_parts)
    if dtype is ttnn.float32:
        np.testing.assert_array_equal(actual, seq)
        return
    if dtype is ttnn.bfloat16:
        np.testing.assert_array_equal(actual, seq.astype(ml_dtypes.bfloat16).astype(np.float32))
    exact = np.sum(np.stack(reference_parts).astype(np.float64), axis=0)
    assert_pcc(exact, actual, 0.999)
    assert np.abs(actual - exact).max() <= REL_TOL[dtype] * np.abs(exact).max() * 2


@pytest.fixture
def sems():
    """``sems(mesh, n)``: n global semaphores on the whole compute grid, as TT_CCL makes them."""

    def make(mesh, n):
        grid = mesh.compute_with_storage_grid_size()
        cores = ttnn.CoreRangeSet(
            {ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(grid.x - 1, grid.y - 1))}
        )
        return [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(n)]

    return make


# --- all_gather ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [3, -2, 0])
def test_all_gather_matches_reference(open_mesh, rng, mesh_shape, dtype, dim):
    mesh = open_mesh(mesh_shape)
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 32), dtype)
    for axis in _axes(mesh_shape):
        out = ttnn.all_gather(tensor, dim, cluster_axis=axis)
        group_size = len(_groups(mesh_shape, axis)[0])
        expected_shape = [1, 1, 32, 32]
        expected_shape[dim] *= group_size
        assert list(out.shape) == expected_shape
        assert out.dtype is dtype and out.layout is ttnn.TILE_LAYOUT
        for i, shard in enumerate(_shards(out)):
            ref = np.concatenate([inputs[j] for j in _group_of(mesh_shape, axis, i)], axis=dim)
            np.testing.assert_array_equal(shard, ref)


def test_all_gather_uint32_row_major_and_rank2(open_mesh, rng):
    mesh = open_mesh((2, 4))
    arrays = [rng.integers(0, 1000, (1, 5)).astype(np.uint32) for _ in range(8)]
    tensor = _per_device(mesh, arrays, ttnn.uint32, ttnn.ROW_MAJOR_LAYOUT)
    out = ttnn.all_gather(tensor, 1, cluster_axis=0)
    assert out.dtype is ttnn.uint32 and list(out.shape) == [1, 10]
    for i, shard in enumerate(_shards(out)):
        np.testing.assert_array_equal(
            shard, np.concatenate([arrays[j] for j in _group_of((2, 4), 0, i)], axis=1)
        )


def test_all_gather_old_positional_form_and_memory_config(open_mesh, rng):
    mesh = open_mesh((2, 4))
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 32), ttnn.bfloat16)
    out = ttnn.all_gather(
        tensor, 3, 1, mesh, num_links=1, topology=ttnn.Topology.Linear, memory_config=ttnn.L1_MEMORY_CONFIG
    )
    assert out.memory_config() == ttnn.L1_MEMORY_CONFIG
    np.testing.assert_array_equal(_shards(out)[5], np.concatenate(inputs[4:8], axis=3))
    sharded = ttnn.all_gather(tensor, 3, cluster_axis=1, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert sharded.is_sharded() and sharded.memory_config().shard_spec is not None
    np.testing.assert_array_equal(_shards(sharded)[0], np.concatenate(inputs[0:4], axis=3))


# --- reduce_scatter / all_reduce -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter_matches_reference(open_mesh, rng, mesh_shape, dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 32 * n), dtype)
    for axis in _axes(mesh_shape):
        out = ttnn.reduce_scatter(tensor, 3, cluster_axis=axis)
        groups = _groups(mesh_shape, axis)
        size = len(groups[0])
        assert list(out.shape) == [1, 1, 32, 32 * n // size]
        shards = _shards(out)
        for group in groups:
            parts = [inputs[j] for j in group]
            for k, i in enumerate(group):
                sl = [np.split(p, size, axis=3)[k] for p in parts]
                _check_sum(shards[i], sl, dtype)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_matches_reference(open_mesh, rng, mesh_shape, dtype):
    mesh = open_mesh(mesh_shape)
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 64), dtype)
    for axis in _axes(mesh_shape):
        out = ttnn.all_reduce(tensor, cluster_axis=axis)
        assert out.shape == tensor.shape and out.dtype is dtype
        shards = _shards(out)
        for group in _groups(mesh_shape, axis):
            _check_sum(shards[group[0]], [inputs[j] for j in group], dtype)
            for i in group[1:]:
                np.testing.assert_array_equal(shards[i], shards[group[0]])


def test_reduce_scatter_outer_dim_and_old_forms(open_mesh, rng):
    mesh = open_mesh((2, 4))
    tensor, inputs = _random_input(mesh, rng, (4, 1, 32, 32), ttnn.float32)
    forms = [
        ttnn.reduce_scatter(tensor, 0, 1, mesh),
        ttnn.reduce_scatter(tensor, scatter_dim=0, cluster_axis=1, math_op=ttnn.ReduceType.Sum),
        ttnn.reduce_scatter(
            tensor, -4, 1, mesh, ttnn.ReduceType.Sum, compute_kernel_config=ttnn.WormholeComputeKernelConfig()
        ),
    ]
    for out in forms:
        assert list(out.shape) == [1, 1, 32, 32]
        for r in range(2):
            for c in range(4):
                np.testing.assert_array_equal(
                    _shards(out)[r * 4 + c], _seq_sum(inputs[r * 4 : r * 4 + 4])[c : c + 1]
                )
    whole = ttnn.reduce_scatter(
        _random_input(mesh, rng, (8, 1, 32, 32), ttnn.float32)[0], 0, ttnn.ReduceType.Sum
    )
    assert list(whole.shape) == [1, 1, 32, 32]


def test_group_of_one_and_single_device_are_identity_copies(open_mesh, rng, sems):
    single = open_mesh((1, 1))
    tensor, inputs = _random_input(single, rng, (1, 1, 32, 32), ttnn.bfloat16)
    for out in (
        ttnn.all_gather(tensor, 3),
        ttnn.reduce_scatter(tensor, 3),
        ttnn.all_reduce(tensor),
        ttnn.experimental.all_gather_async(tensor, None, 3, sems(single, 2)),
        ttnn.experimental.reduce_scatter_minimal_async(
            tensor, None, 3, sems(single, 3), topology=ttnn.Topology.Ring
        ),
    ):
        assert out is not tensor and out.shape == tensor.shape
        np.testing.assert_array_equal(_shards(out)[0], inputs[0])
    row = open_mesh((1, 8))
    tensor, inputs = _random_input(row, rng, (1, 1, 32, 32), ttnn.float32)
    out = ttnn.experimental.reduce_scatter_minimal_async(
        tensor, None, 3, sems(row, 3), cluster_axis=0, topology=ttnn.Topology.Ring
    )
    assert out.shape == tensor.shape
    for shard, ref in zip(_shards(out), inputs):
        np.testing.assert_array_equal(shard, ref)


# --- the async ops and the TTTv1 patterns -------------------------------------------------------------------------------


def test_tttv1_composite_all_reduce_on_galaxy(open_mesh, rng, sems):
    """tt_all_reduce on TG: reduce_scatter_minimal_async + all_gather_async (composite) and
    all_gather_async + fast_reduce_nc both give the sum over the cluster axis on every device."""
    mesh = open_mesh((8, 4))
    dram = ttnn.DRAM_MEMORY_CONFIG
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 256), ttnn.bfloat16)
    ccl_input, ccl_inputs = _random_input(mesh, rng, (1, 1, 32, 256), ttnn.bfloat8_b)
    for axis in (0, 1):
        links = ttnn.get_num_links(mesh, axis)
        common = dict(
            num_links=links,
            cluster_axis=axis,
            topology=ttnn.Topology.Linear,
            barrier_semaphore=sems(mesh, 1)[0],
            chunks_per_sync=10,
            num_workers_per_link=2,
            num_buffers_per_channel=2,
        )
        reduced = ttnn.experimental.reduce_scatter_minimal_async(
            tensor,
            persistent_output_buffers=None,
            dim=3,
            multi_device_global_semaphore=sems(mesh, 3),
            memory_config=dram,
            intermediate_memory_config=dram,
            **common,
        )
        composite = ttnn.experimental.all_gather_async(
            reduced,
            persistent_output_buffer=None,
            dim=3,
            multi_device_global_semaphore=sems(mesh, 2),
            memory_config=tensor.memory_config(),
            **common,
        )
        gathered = ttnn.experimental.all_gather_async(
            ccl_input,
            persistent_output_buffer=None,
            dim=0,
            multi_device_global_semaphore=sems(mesh, 2),
            memory_config=dram,
            **common,
        )
        assert list(gathered.shape) == [mesh.shape[axis], 1, 32, 256]
        fast = ttnn.experimental.fast_reduce_nc(
            gathered, dims=[0], output=None, compute_kernel_config=None, memory_config=dram
        )
        assert composite.shape == tensor.shape and fast.shape == tensor.shape
        # a group's devices hold one gathered array: it is summed (and stored) once for the whole group
        stored = fast.stored_shards()
        assert all(stored[i] is stored[_group_of((8, 4), axis, i)[0]] for i in range(32))
        assert len({id(s) for s in stored}) == len({tuple(_group_of((8, 4), axis, i)) for i in range(32)})
        reference = ttnn.all_reduce(tensor, cluster_axis=axis)
        reference_bfp8 = ttnn.all_reduce(ccl_input, cluster_axis=axis)
        for i, (a, b, ra, rb) in enumerate(
            zip(_shards(composite), _shards(fast), _shards(reference), _shards(reference_bfp8))
        ):
            group = _group_of((8, 4), axis, i)
            np.testing.assert_array_equal(a, ra)
            np.testing.assert_array_equal(b, rb)
            _check_sum(a, [inputs[j] for j in group], ttnn.bfloat16)
            _check_sum(b, [ccl_inputs[j] for j in group], ttnn.bfloat8_b)


def test_all_gather_async_overloads_and_persistent_buffer(open_mesh, rng, sems):
    mesh = open_mesh((2, 4))
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 32), ttnn.bfloat16)
    s = sems(mesh, 2)
    whole = np.concatenate(inputs, axis=3)
    out1 = ttnn.experimental.all_gather_async(tensor, 3, s)
    out2 = ttnn.experimental.all_gather_async(tensor, None, 3, s, topology=ttnn.Topology.Linear)
    for out in (out1, out2):
        for shard in _shards(out):
            np.testing.assert_array_equal(shard, whole)
    buffer = ttnn.from_numpy(
        np.zeros((1, 1, 32, 128), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    out3 = ttnn.experimental.all_gather_async(
        tensor,
        3,
        1,
        mesh,
        ttnn.Topology.Linear,
        s,
        persistent_output_tensor=buffer,
        num_links=None,
        subdevice_id=None,
    )
    assert out3 is buffer
    assert buffer.tensor_topology().placements()[1] == ttnn.PlacementReplicate()
    for i, shard in enumerate(_shards(buffer)):
        np.testing.assert_array_equal(
            shard, np.concatenate([inputs[j] for j in _group_of((2, 4), 1, i)], axis=3)
        )
    buf0 = ttnn.from_numpy(
        np.zeros((1, 1, 64, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    out4 = ttnn.experimental.all_gather_async(tensor, buf0, 2, s, cluster_axis=0, barrier_semaphore=s[0])
    assert out4 is buf0
    np.testing.assert_array_equal(_shards(out4)[6], np.concatenate([inputs[2], inputs[6]], axis=2))


def test_reduce_scatter_minimal_async_persistent_buffers(open_mesh, rng, sems):
    mesh = open_mesh((1, 8))
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 256), ttnn.float32)
    inter = ttnn.from_numpy(
        np.zeros((1, 1, 32, 256), np.float32), dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    out_buf = ttnn.from_numpy(
        np.zeros((1, 1, 32, 32), np.float32), dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    out = ttnn.experimental.reduce_scatter_minimal_async(
        tensor, [inter, out_buf], 3, sems(mesh, 3), intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG
    )
    assert out is out_buf
    total = _seq_sum(inputs)
    for k, shard in enumerate(_shards(out)):
        np.testing.assert_array_equal(shard, total[..., 32 * k : 32 * (k + 1)])
    assert out.tensor_topology().placements() == [ttnn.PlacementShard(3)]
    only_inter = ttnn.experimental.reduce_scatter_minimal_async(tensor, [inter], 3, sems(mesh, 3))
    assert only_inter is not inter and list(only_inter.shape) == [1, 1, 32, 32]
    empty = ttnn.experimental.reduce_scatter_minimal_async(tensor, [], -1, sems(mesh, 3))
    np.testing.assert_array_equal(_shards(empty)[7], total[..., 224:])


def test_all_gather_matmul_async(open_mesh, rng, sems):
    mesh = open_mesh((1, 8))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    w = rng.standard_normal((1, 1, 256, 512)).astype(np.float32)
    xt = ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    wt = ttnn.from_numpy(
        w,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    cfg = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=ttnn.CoreCoord(8, 1),
        in0_block_w=1,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        fuse_batch=True,
        fused_activation=None,
        mcast_in0=True,
    )
    gathered, out = ttnn.experimental.all_gather_matmul_async(
        xt,
        wt,
        persistent_output_buffer=None,
        dim=3,
        multi_device_global_semaphore=sems(mesh, 2),
        all_gather_core_grid_offset=(0, 4),
        barrier_semaphore=sems(mesh, 1)[0],
        num_links=1,
        memory_config_ag=ttnn.DRAM_MEMORY_CONFIG,
        memory_config_mm=ttnn.DRAM_MEMORY_CONFIG,
        program_config=cfg,
        compute_kernel_config=ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True
        ),
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
    )
    xq = _shards(gathered)[0]
    for shard in _shards(gathered):
        np.testing.assert_array_equal(shard, xq)
    assert_pcc(x, xq, 0.9999)
    w_shards = [ttnn.to_numpy(t) for t in ttnn.get_device_tensors(wt)]
    for shard, ws in zip(_shards(out), w_shards):
        ref = xq.astype(np.float64) @ ws.astype(np.float64)
        assert_pcc(ref, shard, 0.999)
        assert np.abs(shard - ref).max() <= 2.0**-6 * np.abs(ref).max()
    composed = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    assert_pcc(x.astype(np.float64) @ w, composed, 0.999)
    _, positional = ttnn.experimental.all_gather_matmul_async(
        xt, wt, None, 3, sems(mesh, 2), ttnn.CoreCoord(0, 4), dtype=ttnn.float32
    )
    assert positional.dtype is ttnn.float32


def test_all_gather_matmul(open_mesh, rng, sems):
    """The synchronous fused op of the T3000 demos (Llama-2-70B's attention output): on a 1x8 ring, the
    heads-concatenated activation is gathered on dim 3 and multiplied by each device's column slice of wo."""
    mesh = open_mesh((1, 8))
    x = rng.standard_normal((1, 1, 32, 512)).astype(np.float32)
    w = rng.standard_normal((1, 1, 512, 256)).astype(np.float32)
    xt = ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    wt = ttnn.from_numpy(
        w,
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    cfg = ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=ttnn.CoreCoord(1, 1),
        in0_block_w=1,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        transpose_mcast=False,
        fused_activation=None,
    )
    kernel = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True)
    outputs = ttnn.experimental.all_gather_matmul(
        xt,
        wt,
        dim=3,
        all_gather_core_grid_offset=(0, 4),
        num_links=1,
        memory_config_ag=ttnn.L1_MEMORY_CONFIG,
        memory_config_mm=ttnn.DRAM_MEMORY_CONFIG,
        program_config=cfg,
        compute_kernel_config=kernel,
        num_workers=2,
        num_buffers_per_channel=2,
    )
    assert isinstance(outputs, list) and len(outputs) == 3
    gathered, out, datacopy = outputs
    assert datacopy is not gathered
    assert list(gathered.shape) == [1, 1, 32, 512] and list(out.shape) == [1, 1, 32, 32]
    assert gathered.memory_config() == ttnn.L1_MEMORY_CONFIG == datacopy.memory_config()
    assert out.memory_config() == ttnn.DRAM_MEMORY_CONFIG and out.dtype is ttnn.bfloat16
    xq = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    for g, d in zip(_shards(gathered), _shards(datacopy)):
        np.testing.assert_array_equal(g, xq)
        np.testing.assert_array_equal(d, xq)
    w_shards = [ttnn.to_numpy(t) for t in ttnn.get_device_tensors(wt)]
    for shard, ws in zip(_shards(out), w_shards):
        ref = xq.astype(np.float64) @ ws.astype(np.float64)
        assert np.abs(shard - ref).max() <= 2.0**-6 * np.abs(ref).max()
    # one implementation: the async variant's matmul output is the same, bit for bit
    _, async_out = ttnn.experimental.all_gather_matmul_async(
        xt,
        wt,
        None,
        3,
        sems(mesh, 2),
        (0, 4),
        memory_config_mm=ttnn.DRAM_MEMORY_CONFIG,
        program_config=cfg,
        compute_kernel_config=kernel,
    )
    for a, b in zip(_shards(out), _shards(async_out)):
        np.testing.assert_array_equal(a, b)
    # defaults: the matmul output takes the input's memory config and dtype; dtype overrides
    _, default_out, _ = ttnn.experimental.all_gather_matmul(xt, wt, 3, ttnn.CoreCoord(0, 4))
    assert default_out.memory_config() == xt.memory_config() and default_out.dtype is ttnn.bfloat16
    _, f32_out, _ = ttnn.experimental.all_gather_matmul(xt, wt, 3, (0, 4), dtype=ttnn.float32)
    assert f32_out.dtype is ttnn.float32


def test_all_gather_matmul_sync_errors(open_mesh, rng):
    mesh = open_mesh((1, 2))
    x, _ = _random_input(mesh, rng, (1, 1, 32, 64), ttnn.bfloat16)
    batched, _ = _random_input(mesh, rng, (2, 1, 32, 64), ttnn.bfloat16)
    w, _ = _random_input(mesh, rng, (1, 1, 128, 32), ttnn.bfloat16)
    agmm = ttnn.experimental.all_gather_matmul
    cases = [
        (lambda: agmm(x, w, 2, (0, 4)), r"ttnn.experimental.all_gather_matmul: dim: expected 3"),
        (
            lambda: agmm(batched, w, 3, (0, 4)),
            r"all_gather_matmul: input_tensor.shape: expected batch dims of 1",
        ),
        (lambda: agmm(x, w, 3), r"all_gather_matmul: all_gather_core_grid_offset: expected"),
        (lambda: agmm(x, w, 3, (0, 4), num_workers=0), r"all_gather_matmul: num_workers"),
        (lambda: agmm(x, w, 3, (0, 4), num_links=99), r"all_gather_matmul: num_links: expected at most"),
        (lambda: agmm(x, w, 3, (0, 4), memory_config_ag="L1"), r"all_gather_matmul: memory_config_ag"),
        (lambda: agmm(x, "w", 3, (0, 4)), r"all_gather_matmul: weight_tensor"),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()


def test_fast_reduce_nc(open_mesh, rng):
    mesh = open_mesh((1, 2))
    tensor, inputs = _random_input(mesh, rng, (2, 3, 32, 32), ttnn.float32)
    slices = {  # the summed slices in index order (row-major over the reduced dims)
        (0,): lambda x: [x[i : i + 1] for i in range(2)],
        (1,): lambda x: [x[:, j : j + 1] for j in range(3)],
        (0, 1): lambda x: [x[i : i + 1, j : j + 1] for i in range(2) for j in range(3)],
    }
    for dims in ([0], [1], [1, 0]):
        out = ttnn.experimental.fast_reduce_nc(tensor, dims=dims)
        assert out.memory_config() == ttnn.DRAM_MEMORY_CONFIG
        for shard, x in zip(_shards(out), inputs):
            np.testing.assert_array_equal(shard, _seq_sum(slices[tuple(sorted(dims))](x)))
    target = ttnn.from_numpy(
        np.zeros((1, 3, 32, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    out = ttnn.experimental.fast_reduce_nc(tensor, dims=(0,), output=target)
    assert out is target and out.dtype is ttnn.bfloat16
    np.testing.assert_array_equal(
        _shards(out)[1], (inputs[1][0:1] + inputs[1][1:2]).astype(ml_dtypes.bfloat16).astype(np.float32)
    )


# --- topology metadata and round trips ----------------------------------------------------------------------------------


def test_topology_after_gathers_and_round_trip(open_mesh, rng):
    mesh = open_mesh((2, 4))
    x = rng.standard_normal((1, 1, 64, 128)).astype(np.float32)
    t = ttnn.from_numpy(
        x,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(2, 3)),
    )
    g1 = ttnn.all_gather(t, 3, cluster_axis=1)
    assert g1.tensor_topology().placements() == [ttnn.PlacementShard(2), ttnn.PlacementReplicate()]
    back = ttnn.to_numpy(g1, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(2, 0), mesh_shape=(2, 4)))
    np.testing.assert_array_equal(back[:1], x)
    g2 = ttnn.all_gather(g1, 2, cluster_axis=0)
    assert g2.tensor_topology() == ttnn.TensorTopology.replicated(mesh.shape)
    np.testing.assert_array_equal(ttnn.to_numpy(g2), x)  # fully replicated: no composer needed


def test_topology_after_reduce_scatter_and_round_trip(open_mesh, rng):
    mesh = open_mesh((2, 4))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    rep = ttnn.from_numpy(x, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh)
    rs = ttnn.reduce_scatter(rep, 3, cluster_axis=1)
    assert rs.tensor_topology().placements() == [ttnn.PlacementReplicate(), ttnn.PlacementShard(3)]
    back = ttnn.to_numpy(rs, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 3), mesh_shape=(2, 4)))
    np.testing.assert_array_equal(back, np.concatenate([_seq_sum([x] * 4)] * 2, axis=0))
    whole = ttnn.reduce_scatter(rep, 3)
    assert whole.tensor_topology().placements() == [ttnn.PlacementShard(3), ttnn.PlacementShard(3)]
    np.testing.assert_array_equal(
        ttnn.to_numpy(whole, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3)), _seq_sum([x] * 8)
    )
    ar = ttnn.all_reduce(whole, cluster_axis=0)
    assert ar.tensor_topology().placements() == [ttnn.PlacementReplicate(), ttnn.PlacementShard(3)]


def test_topology_of_1d_distributions(open_mesh, rng):
    mesh = open_mesh((2, 4))
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    t = ttnn.from_numpy(
        x,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    rows = ttnn.all_gather(t, 3, cluster_axis=1)
    topo = rows.tensor_topology()
    assert tuple(topo.distribution_shape) == (2, 4)
    assert topo.placements() == [ttnn.PlacementShard(3), ttnn.PlacementReplicate()]
    every = ttnn.all_gather(t, 3)
    assert every.tensor_topology().placements() == [ttnn.PlacementReplicate()]
    np.testing.assert_array_equal(ttnn.to_numpy(every), x)
    # a 1-D distribution on a 1x8 mesh maps onto its non-trivial axis
    row_mesh = open_mesh((1, 8))
    t8 = ttnn.from_numpy(
        x,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=row_mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(row_mesh, dim=3),
    )
    g8 = ttnn.all_gather(t8, 3, cluster_axis=1)
    assert tuple(g8.tensor_topology().distribution_shape) == (8,)
    assert g8.tensor_topology().placements() == [ttnn.PlacementReplicate()]
    assert ttnn.all_gather(t8, 3, cluster_axis=0).tensor_topology() == t8.tensor_topology()
    # an override distribution that does not map onto the mesh axes
    cfg = ttnn.MeshMapperConfig(
        [ttnn.PlacementShard(2), ttnn.PlacementShard(3)], mesh_shape_override=ttnn.MeshShape(4, 2)
    )
    y = rng.standard_normal((1, 1, 128, 64)).astype(np.float32)
    odd = ttnn.from_numpy(
        y,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.create_mesh_mapper(mesh, cfg),
    )
    assert ttnn.all_gather(odd, 3, cluster_axis=1).tensor_topology() == odd.tensor_topology()
    full = ttnn.all_reduce(odd)
    assert tuple(full.tensor_topology().distribution_shape) == (4, 2)
    assert full.tensor_topology().placements() == [ttnn.PlacementReplicate()] * 2


def test_one_dimensional_mesh(open_mesh, rng, sems):
    mesh = open_mesh((8,))
    assert mesh.shape.dims() == 1
    tensor, inputs = _random_input(mesh, rng, (1, 1, 32, 256), ttnn.float32)
    out = ttnn.experimental.reduce_scatter_minimal_async(tensor, None, 3, sems(mesh, 3), cluster_axis=0)
    total = _seq_sum(inputs)
    for k, shard in enumerate(_shards(out)):
        np.testing.assert_array_equal(shard, total[..., 32 * k : 32 * (k + 1)])
    assert out.tensor_topology().placements() == [ttnn.PlacementShard(3)]
    with pytest.raises(
        ValidationError, match=r"all_gather: cluster_axis: expected None or 0 for the 1-D mesh"
    ):
        ttnn.all_gather(tensor, 3, cluster_axis=1)


# --- errors ----------------------------------------------------------------------------------------------------------


def test_argument_errors(open_mesh, rng, sems):
    mesh = open_mesh((2, 4))
    tensor, _ = _random_input(mesh, rng, (1, 1, 32, 32), ttnn.bfloat16)
    odd, _ = _random_input(mesh, rng, (1, 1, 32, 34), ttnn.bfloat16)
    s2, s3 = sems(mesh, 2), sems(mesh, 3)
    cases = [
        (lambda: ttnn.all_gather(tensor, 3, cluster_axis=2), r"cluster_axis: expected None or 0 or 1"),
        (lambda: ttnn.all_gather(tensor, 3, cluster_axis=True), r"cluster_axis"),
        (lambda: ttnn.all_gather(tensor, 4), r"all_gather: dim: expected an int in \[-4, 3\]"),
        (lambda: ttnn.all_gather(tensor, -5), r"dim"),
        (lambda: ttnn.all_gather(tensor), r"all_gather: dim: expected an int"),
        (lambda: ttnn.all_gather(tensor, 3, topology="Ring"), r"topology"),
        (lambda: ttnn.all_gather(tensor, 3, num_links=0), r"num_links: expected a positive int"),
        (lambda: ttnn.all_gather(tensor, 3, num_links=True), r"num_links"),
        (lambda: ttnn.all_gather(tensor, 3, chunks_per_sync=-1), r"chunks_per_sync"),
        (lambda: ttnn.all_gather(tensor, 3, memory_config="L1"), r"memory_config"),
        (lambda: ttnn.all_gather(tensor, 3, 0, "mesh"), r"mesh_device: expected a ttnn.MeshDevice"),
        (
            lambda: ttnn.reduce_scatter(odd, 3, cluster_axis=1),
            r"reduce_scatter: dim: expected a dim whose size divides by the 4",
        ),
        (lambda: ttnn.reduce_scatter(tensor, 3, ttnn.ReduceType.Max), r"math_op: expected ReduceType.Sum"),
        (
            lambda: ttnn.reduce_scatter(tensor, 3, 1, mesh, ttnn.ReduceType.Sum, 7),
            r"positional arguments: expected at most 5",
        ),
        (lambda: ttnn.reduce_scatter(tensor, 3, 1, cluster_axis=1), r"cluster_axis: expected one value"),
        (lambda: ttnn.reduce_scatter(tensor, 3, compute_kernel_config="hifi"), r"compute_kernel_config"),
        (lambda: ttnn.reduce_scatter(tensor, 3, intermediate_memory_config=1), r"intermediate_memory_config"),
        (lambda: ttnn.all_reduce(tensor, cluster_axis=3), r"all_reduce: cluster_axis"),
        (lambda: ttnn.all_reduce(tensor, math_op=ttnn.ReduceType.Mean), r"math_op"),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, s3),
            r"multi_device_global_semaphore: expected 2 global semaphores, got 3",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, None),
            r"multi_device_global_semaphore: expected a ttnn.GlobalSemaphore",
        ),
        (lambda: ttnn.experimental.all_gather_async(tensor, dim=3), r"multi_device_global_semaphore"),
        (lambda: ttnn.experimental.all_gather_async(tensor, 3, [1, 2]), r"got int"),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, s2, topology=ttnn.Topology.Mesh),
            r"topology: expected Topology.Ring, Topology.Linear",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, s2, num_links=9),
            r"num_links: expected at most 8",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, s2, barrier_semaphore=3),
            r"barrier_semaphore",
        ),
        (lambda: ttnn.experimental.all_gather_async(tensor, 3, s2, 1), r"positional arguments"),
        (
            lambda: ttnn.experimental.all_gather_async(
                tensor, tensor, 3, s2, persistent_output_tensor=tensor
            ),
            r"persistent_output_tensor: expected only one",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, None, 3, s2),
            r"expected 3 global semaphores, got 2",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, None, 3, s3, topology=None),
            r"topology",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, tensor, 3, s3),
            r"persistent_output_buffers: expected a list",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, None, None, s3),
            r"dim: expected an int",
        ),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()


def test_tensor_errors(open_mesh, rng, sems):
    mesh, other = open_mesh((1, 8)), open_mesh((1, 8))
    tensor, _ = _random_input(mesh, rng, (1, 1, 32, 256), ttnn.bfloat16)
    foreign, _ = _random_input(other, rng, (1, 1, 32, 256), ttnn.bfloat16)
    host = ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), dtype=ttnn.bfloat16)
    ints = _per_device(mesh, [np.zeros((1, 1, 4), np.int32)] * 8, ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    s2, s3, foreign_sems = sems(mesh, 2), sems(mesh, 3), sems(other, 2)
    wrong_dtype = ttnn.from_numpy(
        np.zeros((1, 1, 32, 2048)), dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    wrong_shape = ttnn.from_numpy(
        np.zeros((1, 1, 32, 1024)), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    wrong_layout = ttnn.from_numpy(np.zeros((1, 1, 32, 2048)), dtype=ttnn.bfloat16, device=mesh)
    wrong_mem = ttnn.from_numpy(
        np.zeros((1, 1, 32, 2048)),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.L1_MEMORY_CONFIG,
    )
    dead, _ = _random_input(mesh, rng, (1, 1, 32, 32), ttnn.bfloat16)
    dead.deallocate()
    cases = [
        (lambda: ttnn.all_gather(host, 3), r"all_gather: input_tensor: expected a tensor on device"),
        (lambda: ttnn.all_gather("x", 3), r"input_tensor: expected a ttnn.Tensor"),
        (lambda: ttnn.all_gather(dead, 3), r"deallocated"),
        (
            lambda: ttnn.all_gather(tensor, 3, 1, other),
            r"mesh_device: expected the mesh the input tensor lives on",
        ),
        (lambda: ttnn.reduce_scatter(ints, 2), r"input_tensor.dtype: expected one of BFLOAT16"),
        (lambda: ttnn.all_reduce(ints), r"input_tensor.dtype"),
        (
            lambda: ttnn.reduce_scatter(ttnn.from_numpy(np.zeros(8, np.float32), device=mesh), 0),
            r"input_tensor rank: expected >= 2",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, foreign_sems),
            r"expected a semaphore created on the input's mesh",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, 3, s2, barrier_semaphore=foreign_sems[0]),
            r"barrier_semaphore",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, foreign, 3, s2),
            r"persistent_output_buffer: expected a tensor on the same device",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, wrong_dtype, 3, s2),
            r"persistent_output_buffer.dtype: expected BFLOAT16",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, wrong_shape, 3, s2),
            r"persistent_output_buffer.shape: expected \[1, 1, 32, 2048\]",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, wrong_layout, 3, s2),
            r"persistent_output_buffer.layout",
        ),
        (
            lambda: ttnn.experimental.all_gather_async(tensor, wrong_mem, 3, s2),
            r"persistent_output_buffer.memory_config",
        ),
        (lambda: ttnn.all_gather(tensor, 3, output_tensor=wrong_shape), r"all_gather: output_tensor.shape"),
        (
            lambda: ttnn.reduce_scatter(tensor, 3, output_tensor=wrong_shape),
            r"reduce_scatter: output_tensor.shape: expected \[1, 1, 32, 32\]",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, [foreign], 3, s3),
            r"intermediate: expected a tensor on the same device",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, [wrong_dtype], 3, s3),
            r"persistent_output_buffers\[0\].dtype",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, [wrong_layout], 3, s3),
            r"persistent_output_buffers\[0\].layout",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(
                tensor, [tensor], 3, s3, intermediate_memory_config=ttnn.L1_MEMORY_CONFIG
            ),
            r"persistent_output_buffers\[0\].memory_config",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, [tensor, wrong_shape], 3, s3),
            r"persistent_output_buffers\[1\].shape",
        ),
        (
            lambda: ttnn.experimental.reduce_scatter_minimal_async(tensor, [tensor] * 3, 3, s3),
            r"persistent_output_buffers",
        ),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()


def test_all_gather_matmul_errors(open_mesh, rng, sems):
    mesh, other = open_mesh((1, 2)), open_mesh((1, 2))
    x, _ = _random_input(mesh, rng, (1, 1, 32, 64), ttnn.bfloat16)
    batched, _ = _random_input(mesh, rng, (2, 1, 32, 64), ttnn.bfloat16)
    rank3 = _per_device(mesh, [np.zeros((1, 32, 64), np.float32)] * 2, ttnn.bfloat16)
    w, _ = _random_input(mesh, rng, (1, 1, 128, 32), ttnn.bfloat16)
    w_other, _ = _random_input(other, rng, (1, 1, 128, 32), ttnn.bfloat16)
    s = sems(mesh, 2)
    agmm = ttnn.experimental.all_gather_matmul_async
    cases = [
        (lambda: agmm(x, w, None, 2, s, (0, 4)), r"all_gather_matmul_async: dim: expected 3"),
        (lambda: agmm(batched, w, None, 3, s, (0, 4)), r"input_tensor.shape: expected batch dims of 1"),
        (lambda: agmm(rank3, w, None, 3, s, (0, 4)), r"input_tensor rank: expected 4"),
        (
            lambda: agmm(x, w_other, None, 3, s, (0, 4)),
            r"weight_tensor: expected a tensor on the same device",
        ),
        (lambda: agmm(x, w, None, 3, s), r"all_gather_core_grid_offset: expected"),
        (lambda: agmm(x, w, None, 3, s, (0, -1)), r"all_gather_core_grid_offset"),
        (
            lambda: agmm(
                x,
                w,
                None,
                3,
                s,
                (0, 4),
                program_config=ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8)),
            ),
            r"program_config: expected a MatmulMultiCoreReuseMultiCast1DProgramConfig",
        ),
        (lambda: agmm(x, w, None, 3, s[:1], (0, 4)), r"expected 2 global semaphores"),
        (lambda: agmm(x, w, None, 3, s, (0, 4), topology=ttnn.Topology.Mesh), r"topology"),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()


def test_fast_reduce_nc_errors(open_mesh, rng):
    mesh = open_mesh((1, 2))
    tensor, _ = _random_input(mesh, rng, (2, 1, 32, 32), ttnn.bfloat16)
    row_major = _per_device(
        mesh, [np.zeros((2, 1, 4, 4), np.float32)] * 2, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT
    )
    wrong = ttnn.from_numpy(
        np.zeros((2, 1, 32, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    cases = [
        (
            lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=[]),
            r"fast_reduce_nc: dims: expected a non-empty list",
        ),
        (lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=[2]), r"dims: expected dims in \[0, 1\]"),
        (lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=[-4]), r"dims"),
        (lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=[0, 0]), r"dims: expected distinct dims"),
        (lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=0), r"dims: expected a non-empty list"),
        (
            lambda: ttnn.experimental.fast_reduce_nc(row_major, dims=[0]),
            r"input.layout: expected one of TILE",
        ),
        (
            lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=[0], output=wrong),
            r"output.shape: expected \[1, 1, 32, 32\]",
        ),
        (lambda: ttnn.experimental.fast_reduce_nc(tensor, dims=[0], memory_config="DRAM"), r"memory_config"),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()


# --- semaphores, links, fabric ------------------------------------------------------------------------------------------


def test_global_semaphores(open_mesh):
    mesh = open_mesh((1, 2))
    crs = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))})
    a = ttnn.create_global_semaphore(mesh, crs, 0)
    b = ttnn.create_global_semaphore(mesh, ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(1, 1)), 3)
    assert isinstance(a, ttnn.GlobalSemaphore) and a.mesh_device is mesh and a.cores == crs
    assert ttnn.get_global_semaphore_address(a) != ttnn.get_global_semaphore_address(b)
    assert b.value == 3 and "GlobalSemaphore(address=" in repr(b)
    ttnn.reset_global_semaphore_value(b, 0)
    assert b.value == 0
    closed = open_mesh((1, 1))
    ttnn.close_mesh_device(closed)
    cases = [
        (lambda: ttnn.create_global_semaphore("mesh", crs, 0), r"create_global_semaphore: mesh_device"),
        (lambda: ttnn.create_global_semaphore(closed, crs, 0), r"mesh_device: expected an open mesh device"),
        (lambda: ttnn.create_global_semaphore(mesh, [1], 0), r"cores: expected a ttnn.CoreRangeSet"),
        (lambda: ttnn.create_global_semaphore(mesh, ttnn.CoreRangeSet(), 0), r"cores: expected a non-empty"),
        (
            lambda: ttnn.create_global_semaphore(
                mesh, ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(8, 0)), 0
            ),
            r"cores: expected cores inside the device's 8x8 compute grid",
        ),
        (lambda: ttnn.create_global_semaphore(mesh, crs, -1), r"initial_value: expected a non-negative int"),
        (lambda: ttnn.create_global_semaphore(mesh, crs, 0, buffer_type="L1"), r"buffer_type"),
        (lambda: ttnn.get_global_semaphore_address(3), r"global_semaphore: expected a ttnn.GlobalSemaphore"),
        (lambda: ttnn.reset_global_semaphore_value(3, 0), r"global_semaphore"),
        (lambda: ttnn.reset_global_semaphore_value(a, True), r"reset_value"),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern):
            call()
    # semaphores of a parent mesh cover the devices of its submeshes
    sub = mesh.create_submesh(ttnn.MeshShape(1, 1), ttnn.MeshCoordinate(0, 1))
    t = ttnn.from_numpy(
        np.ones((1, 1, 32, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=sub
    )
    parent_sems = [ttnn.create_global_semaphore(mesh, crs, 0) for _ in range(2)]
    assert ttnn.experimental.all_gather_async(t, 3, parent_sems).shape == [1, 1, 32, 32]
    sub_sems = [ttnn.create_global_semaphore(sub, crs, 0) for _ in range(2)]
    whole = ttnn.from_numpy(
        np.ones((1, 1, 32, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    with pytest.raises(ValidationError, match=r"expected a semaphore created on the input's mesh"):
        ttnn.experimental.all_gather_async(whole, 3, sub_sems)


def test_get_num_links(open_mesh):
    assert ttnn.get_num_links(open_mesh((1, 1))) == 1
    t3k = open_mesh((1, 8))
    assert [ttnn.get_num_links(t3k, a) for a in (None, 0, 1)] == [1, 1, 1]
    galaxy = open_mesh((8, 4))
    assert [ttnn.get_num_links(galaxy, a) for a in (None, 0, 1)] == [3, 4, 3]
    bh = open_mesh((1, 4), arch=ttnn.Arch.BLACKHOLE)
    assert ttnn.get_num_links(bh, 1) == 2
    with pytest.raises(ValidationError, match=r"get_num_links: cluster_axis: expected None, 0 or 1"):
        ttnn.get_num_links(t3k, 2)
    with pytest.raises(ValidationError, match=r"get_num_links: mesh_device"):
        ttnn.get_num_links(None)


def test_set_fabric_config():
    try:
        ttnn.set_fabric_config(
            ttnn.FabricConfig.FABRIC_1D_RING,
            ttnn.FabricReliabilityMode.RELAXED_INIT,
            None,
            ttnn.FabricTensixConfig.MUX,
        )
        assert ccl._fabric_state["fabric_config"] is ttnn.FabricConfig.FABRIC_1D_RING
        assert ccl._fabric_state["fabric_tensix_config"] is ttnn.FabricTensixConfig.MUX
        ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D, num_planes=2)
        assert ccl._fabric_state["reliability_mode"] is ttnn.FabricReliabilityMode.STRICT_INIT
        assert ccl._fabric_state["num_planes"] == 2
        cases = [
            (
                lambda: ttnn.set_fabric_config("1D"),
                r"set_fabric_config: fabric_config: expected a ttnn.FabricConfig",
            ),
            (lambda: ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D, "strict"), r"reliability_mode"),
            (lambda: ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D, None, 0), r"num_planes"),
            (
                lambda: ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D, None, None, 1),
                r"fabric_tensix_config",
            ),
        ]
        for call, pattern in cases:
            with pytest.raises(ValidationError, match=pattern):
                call()
    finally:
        ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)


def test_ops_are_traced_and_inputs_untouched(open_mesh, rng, sems):
    mesh = open_mesh((1, 2))
    tensor, inputs = _random_input(mesh, rng, (2, 1, 32, 64), ttnn.bfloat16)
    with ttnn.OpTrace() as trace:
        ttnn.all_gather(tensor, 3)
        ttnn.reduce_scatter(tensor, 3)
        ttnn.all_reduce(tensor)
        ttnn.experimental.all_gather_async(tensor, 3, sems(mesh, 2))
        ttnn.experimental.reduce_scatter_minimal_async(tensor, None, 3, sems(mesh, 3))
        ttnn.experimental.fast_reduce_nc(tensor, dims=[0])
    assert trace.names == [
        "ttnn.all_gather",
        "ttnn.reduce_scatter",
        "ttnn.all_reduce",
        "ttnn.experimental.all_gather_async",
        "ttnn.experimental.reduce_scatter_minimal_async",
        "ttnn.experimental.fast_reduce_nc",
    ]
    for shard, ref in zip(_shards(tensor), inputs):
        np.testing.assert_array_equal(shard, ref)
