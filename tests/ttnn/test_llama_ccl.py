"""The Galaxy demo's fused collectives (tttv2/ttnn/ops/llama_ccl.py) against numpy references built per device:
values, shapes, memory configs, and the one-line errors for what ttnn rejects."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError

ROWS, COLS = 8, 4


@pytest.fixture(scope="module")
def mesh():
    m = ttnn.open_mesh_device(ttnn.MeshShape(ROWS, COLS))
    yield m
    ttnn.close_mesh_device(m)


def _crs(n, y=0, x0=0):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x0, y), ttnn.CoreCoord(x0 + n - 1, y))])


def _width(shard, crs, buffer=ttnn.BufferType.L1):
    spec = ttnn.ShardSpec(crs, shard, ttnn.ShardOrientation.ROW_MAJOR)
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, buffer, spec)


def _per_device(mesh, arrays, dtype=ttnn.bfloat16, memory_config=None):
    """Device i holds arrays[i] (row-major over the mesh)."""
    return ttnn.from_numpy(
        np.concatenate(arrays, axis=0),
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )


def _shards(t):
    return [ttnn.to_numpy(d).astype(np.float32) for d in ttnn.get_device_tensors(t)]


def _bf16(a):
    return ttnn.to_numpy(ttnn.from_numpy(a, dtype=ttnn.bfloat16)).astype(np.float32)


def _sem(mesh):
    return ttnn.create_global_semaphore(mesh, _crs(4), 0)


def _buffer(mesh):
    """A decode interim buffer like llama_ccl's get_decode_reduce_scatter_buffers (shards of 32 x 512)."""
    cfg = _width((32, 512), _crs(2, y=3))
    return ttnn.from_numpy(
        np.zeros((ROWS * COLS, 1, 32, 1024), np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=cfg,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )


def _rs_reference(arrays, width):
    """Row r's devices: their sum, zero-padded to `width`, slice c of 4 on column c."""
    out = []
    for r in range(ROWS):
        total = sum(arrays[r * COLS + c] for c in range(COLS))
        total = np.pad(total, [(0, 0)] * 3 + [(0, width - total.shape[3])])
        out += np.split(total, COLS, axis=3)
    return out


def test_llama_reduce_scatter_sums_each_row_and_keeps_slice_k(mesh):
    rng = np.random.default_rng(1)
    arrays = [_bf16(rng.standard_normal((1, 1, 32, 512)).astype(np.float32)) for _ in range(ROWS * COLS)]
    x = _per_device(mesh, arrays, memory_config=_width((32, 64), _crs(8)))
    out_cfg = _width((32, 32), _crs(4, y=2))
    out = ttnn.experimental.llama_reduce_scatter(
        x, _buffer(mesh), 3, _sem(mesh), ttnn.SubDeviceId(0), cluster_axis=1, mesh_device=mesh,
        num_links=1, memory_config=out_cfg, topology=ttnn.Topology.Linear,
    )  # fmt: skip
    assert list(out.shape) == [1, 1, 32, 128]
    assert out.memory_config() == out_cfg
    for got, want in zip(_shards(out), _rs_reference(arrays, 512)):
        np.testing.assert_array_equal(got, _bf16(want))


def test_llama_reduce_scatter_pads_a_width_that_does_not_fill_its_cores(mesh):
    """480 columns = 15 tiles on 8 cores of 2 tiles: ttnn splits 16 tiles (512 columns), 128 per device; the
    default output is one 32-wide shard per core on the input's buffer type."""
    rng = np.random.default_rng(2)
    arrays = [_bf16(rng.standard_normal((1, 1, 32, 480)).astype(np.float32)) for _ in range(ROWS * COLS)]
    x = _per_device(mesh, arrays, memory_config=_width((32, 64), _crs(8)))
    out = ttnn.experimental.llama_reduce_scatter(x, _buffer(mesh), 3, _sem(mesh), None, cluster_axis=1)
    assert list(out.shape) == [1, 1, 32, 128]
    cfg = out.memory_config()
    assert (
        cfg.memory_layout == ttnn.TensorMemoryLayout.WIDTH_SHARDED and cfg.buffer_type == ttnn.BufferType.L1
    )
    assert cfg.shard_spec.shape == (32, 32) and cfg.shard_spec.num_cores() == 4
    for got, want in zip(_shards(out), _rs_reference(arrays, 512)):
        np.testing.assert_array_equal(got, _bf16(want))


def test_llama_rs_matmul_two_weights_and_rs_tensor_forms(mesh):
    rng = np.random.default_rng(3)
    xs = [_bf16(rng.standard_normal((1, 1, 32, 64)).astype(np.float32)) for _ in range(ROWS * COLS)]
    w1 = [_bf16(rng.standard_normal((1, 1, 64, 256)).astype(np.float32) * 0.1) for _ in range(ROWS * COLS)]
    w3 = [_bf16(rng.standard_normal((1, 1, 64, 256)).astype(np.float32) * 0.1) for _ in range(ROWS * COLS)]
    x = _per_device(mesh, xs)
    t1, t3 = _per_device(mesh, w1), _per_device(mesh, w3)
    mm_cfg = _width((32, 32), _crs(8))
    rs_cfg = _width((32, 32), _crs(2, y=2))
    a, b, rs = ttnn.experimental.llama_rs_matmul(
        x, t1, _buffer(mesh), 3, _sem(mesh), 1, mesh, 1, None,
        second_weight_tensor=t3, memory_config_mm=mm_cfg, memory_config_rs=rs_cfg, dtype=ttnn.bfloat8_b,
    )  # fmt: skip
    ref_a = ttnn.linear(x, t1, memory_config=mm_cfg, dtype=ttnn.bfloat8_b)
    ref_b = ttnn.linear(x, t3, memory_config=mm_cfg, dtype=ttnn.bfloat8_b)
    for got, want in ((a, ref_a), (b, ref_b)):
        assert got.dtype == ttnn.bfloat8_b and got.memory_config() == mm_cfg
        for g, w in zip(_shards(got), _shards(want)):
            np.testing.assert_array_equal(g, w)
    assert list(rs.shape) == [1, 1, 32, 64] and rs.memory_config() == rs_cfg
    expected = _rs_reference(_shards(ref_a), 256)
    for g, w in zip(_shards(rs), expected):
        np.testing.assert_array_equal(
            g, ttnn.to_numpy(ttnn.from_numpy(w, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT))
        )
    # the one-weight form reduce-scatters rs_tensor, not the product
    mm, rs2 = ttnn.experimental.llama_rs_matmul(
        x, t1, _buffer(mesh), 3, _sem(mesh), 1, mesh, 1, None, rs_tensor=a, memory_config_rs=rs_cfg
    )
    for g, w in zip(_shards(rs2), _shards(rs)):
        np.testing.assert_array_equal(g, w)
    assert mm.dtype == ttnn.bfloat16 and list(mm.shape) == [1, 1, 32, 256]


def test_all_reduce_async_overloads_sum_over_the_axis(mesh):
    rng = np.random.default_rng(4)
    arrays = [_bf16(rng.standard_normal((1, 1, 32, 64)).astype(np.float32)) for _ in range(ROWS * COLS)]
    x = _per_device(mesh, arrays)
    cfg = _width((32, 32), _crs(2, x0=1))
    out = ttnn.experimental.all_reduce_async(
        x, _buffer(mesh), 0, mesh, _sem(mesh), memory_config=cfg, dtype=ttnn.bfloat8_b,
        use_optimal_ccl_for_llama=True,
    )  # fmt: skip
    assert out.dtype == ttnn.bfloat8_b and out.memory_config() == cfg
    for i, got in enumerate(_shards(out)):
        c = i % COLS
        want = sum(arrays[r * COLS + c] for r in range(ROWS))
        q = ttnn.to_numpy(ttnn.from_numpy(want, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT))
        np.testing.assert_array_equal(got, q)
    sems = [_sem(mesh)]
    row = ttnn.experimental.all_reduce_async(x, 1, mesh, sems, sems, sems, ttnn.ReduceType.Sum)
    whole = ttnn.experimental.all_reduce_async(x, ROWS * COLS, sems, sems, sems, ttnn.ReduceType.Sum)
    total = sum(arrays)
    for i, (g_row, g_all) in enumerate(zip(_shards(row), _shards(whole))):
        r = i // COLS
        np.testing.assert_array_equal(g_row, _bf16(sum(arrays[r * COLS + c] for c in range(COLS))))
        np.testing.assert_array_equal(g_all, _bf16(total))


def test_reduce_scatter_async_matches_reduce_scatter(mesh):
    rng = np.random.default_rng(5)
    arrays = [_bf16(rng.standard_normal((1, 1, 128, 256)).astype(np.float32)) for _ in range(ROWS * COLS)]
    x = _per_device(mesh, arrays)
    out = ttnn.experimental.reduce_scatter_async(
        x, 3, cluster_axis=0, mesh_device=mesh, from_remote_multi_device_global_semaphore=_sem(mesh),
        to_remote_multi_device_global_semaphore=_sem(mesh), math_op=ttnn.ReduceType.Sum,
        memory_config=ttnn.DRAM_MEMORY_CONFIG, topology=ttnn.Topology.Linear, num_links=1,
        persistent_output_tensors=[x],
    )  # fmt: skip
    want = ttnn.reduce_scatter(x, 3, cluster_axis=0)
    assert list(out.shape) == [1, 1, 128, 32]
    for g, w in zip(_shards(out), _shards(want)):
        np.testing.assert_array_equal(g, w)
    whole = ttnn.experimental.reduce_scatter_async(x, 3, _sem(mesh), _sem(mesh))
    positional = ttnn.experimental.reduce_scatter_async(x, 3, 1, mesh, _sem(mesh), _sem(mesh))
    assert list(whole.shape) == [1, 1, 128, 8] and list(positional.shape) == [1, 1, 128, 64]


def test_sub_device_id():
    assert ttnn.SubDeviceId(1) == ttnn.SubDeviceId(1) != ttnn.SubDeviceId(2)
    assert (
        len({ttnn.SubDeviceId(0), ttnn.SubDeviceId(0)}) == 1 and repr(ttnn.SubDeviceId(3)) == "SubDeviceId(3)"
    )
    with pytest.raises(ValidationError, match=r"SubDeviceId: id: expected an int >= 0"):
        ttnn.SubDeviceId(-1)


def _bad_cases(mesh):
    x = _per_device(
        mesh, [np.zeros((1, 1, 32, 512), np.float32)] * (ROWS * COLS), memory_config=_width((32, 64), _crs(8))
    )
    plain = _per_device(mesh, [np.zeros((1, 1, 32, 512), np.float32)] * (ROWS * COLS))
    buf, sem = _buffer(mesh), _sem(mesh)
    rs = ttnn.experimental.llama_reduce_scatter
    mm = ttnn.experimental.llama_rs_matmul
    ar = ttnn.experimental.all_reduce_async
    rsa = ttnn.experimental.reduce_scatter_async
    w = _per_device(mesh, [np.zeros((1, 1, 512, 256), np.float32)] * (ROWS * COLS))
    narrow = _per_device(
        mesh, [np.zeros((1, 1, 32, 192), np.float32)] * (ROWS * COLS), memory_config=_width((32, 32), _crs(6))
    )  # 48 columns a device: not whole tiles
    height = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(_crs(1), (32, 512), ttnn.ShardOrientation.ROW_MAJOR),
    )
    tall = _per_device(mesh, [np.zeros((1, 1, 32, 512), np.float32)] * (ROWS * COLS), memory_config=height)
    agc = ttnn.experimental.all_gather_concat

    def heads(shape):
        return _per_device(mesh, [np.zeros(shape, np.float32)] * (ROWS * COLS))

    def gather(t, n):
        return agc(t, plain, 1, cluster_axis=1, multi_device_global_semaphore=sem, num_heads=n)

    default = r"input_tensor.shape: expected a default output of one .* else pass memory_config\), got "
    return [
        (lambda: gather(heads((1, 8, 8, 48)), 8), default + r"\[1, 8, 8, 48\]"),  # head_dim not whole tiles
        (lambda: gather(heads((1, 10, 8, 64)), 8), default + r".*40 users gathered"),  # 40 rows
        (lambda: gather(heads((1, 8, 80, 32)), 80), default + r".*80 heads"),  # more heads than cores
        (
            lambda: rs(narrow, buf, 3, sem, None, cluster_axis=1),
            r"input_tensor width: expected whole 32-column tiles on each of the 4 devices .*got 192 \(48 columns",
        ),
        (
            lambda: rs(tall, buf, 3, sem, None, cluster_axis=1),
            r"input_tensor.memory_config: expected WIDTH_SHARDED",
        ),
        (lambda: rs(x, buf, 2, sem, None, cluster_axis=1), r"dim: expected 3"),
        (lambda: rs(x, buf, 3, sem, None, cluster_axis=0), r"cluster_axis: expected 1"),
        (
            lambda: rs(plain, buf, 3, sem, None, cluster_axis=1),
            r"input_tensor.memory_config: expected a sharded",
        ),
        (lambda: rs(x, plain, 3, sem, None, cluster_axis=1), r"intermediate_packet_buffer.memory_config"),
        (
            lambda: rs(x, buf, 3, sem, 7, cluster_axis=1),
            r"subdevice_id: expected a ttnn.SubDeviceId of the loaded sub-device manager \(SubDeviceId\(0\)\) or None, got 7",
        ),
        (
            lambda: rs(x, buf, 3, [sem, sem], None, cluster_axis=1),
            r"cross_device_semaphore: expected 1 global",
        ),
        (
            lambda: rs(x, buf, 3, sem, None, cluster_axis=1, memory_config=ttnn.L1_MEMORY_CONFIG),
            r"memory_config: expected a sharded memory config with a shard spec",
        ),
        (
            lambda: rs(x, buf, 3, sem, None, cluster_axis=1, memory_config=_width((64, 32), _crs(2))),
            r"memory_config shard height: expected 32",
        ),
        (
            lambda: rs(x, buf, 3, sem, None, cluster_axis=1, use_noc1_only=1),
            r"use_noc1_only: expected a bool",
        ),
        (
            lambda: mm(plain, w, buf, 3, sem, 1, mesh, 1, None),
            r"rs_tensor / second_weight_tensor: expected exactly one",
        ),
        (
            lambda: mm(plain, w, buf, 3, sem, 1, mesh, 1, None, second_weight_tensor=w),
            r"memory_config_mm: expected a sharded memory config \(the first product is reduce-scattered\), "
            r"got .*INTERLEAVED.* \(the input_tensor's, the default\)",
        ),
        (
            lambda: mm(plain, w, buf, 3, sem, 1, mesh, 1, None, rs_tensor=plain),
            r"rs_tensor.memory_config: expected a sharded memory config",
        ),
        (
            lambda: mm(plain, w, buf, 3, sem, 1, mesh, 1, None, rs_tensor=x, second_weight_tensor=w),
            r"expected exactly one of them, got both",
        ),
        (
            lambda: mm(plain, w, buf, 3, sem, 1, mesh, 1, None, rs_tensor=x, optional_output_tensor=x),
            r"optional_output_tensor: expected None",
        ),
        (
            lambda: ar(plain, 5, [sem], [sem], [sem], ttnn.ReduceType.Sum),
            r"num_devices: expected the 32 devices",
        ),
        (lambda: ar(plain, buf, sem, cluster_axis=0, mesh_device=mesh), r"cluster_axis: expected one value"),
        (
            lambda: ar(plain, cluster_axis=1, mesh_device=mesh, multi_device_global_semaphore=sem),
            r"buffer_tensor: expected a ttnn.Tensor, got NoneType",  # the Galaxy form without its buffer
        ),
        (
            lambda: ar(plain, 32.0, [sem], [sem], [sem], ttnn.ReduceType.Sum),
            r"num_devices: expected the 32 devices of the input's mesh, got 32.0",
        ),
        (lambda: ar(plain, buf, 0, mesh, sem, sem), r"positional arguments: expected at most 5"),
        (lambda: ar(plain, buf, 2, mesh, sem), r"cluster_axis: expected None or 0 or 1"),
        (lambda: ar(plain, buf, 0, mesh, sem, dtype="bf16"), r"dtype: expected a ttnn.DataType or None"),
        (
            lambda: ar(plain, buffer_tensor=buf, mesh_device=mesh, multi_device_global_semaphore=sem),
            r"cluster_axis: expected 0 or 1",
        ),
        (
            lambda: ar(plain, 1, mesh, [sem], [sem], [sem], ttnn.ReduceType.Max),
            r"math_op: expected ReduceType.Sum",
        ),
        (
            lambda: rsa(plain, 3, sem),
            r"to_remote_multi_device_global_semaphore: expected a ttnn.GlobalSemaphore",
        ),
        (lambda: rsa(plain, 3, sem, sem, sem), r"positional arguments: expected at most 4"),
        (
            lambda: rsa(plain, 3, sem, sem, from_remote_multi_device_global_semaphore=sem),
            r"expected one value",
        ),
        (
            lambda: rsa(plain, 3, sem, sem, persistent_output_tensors=x),
            r"persistent_output_tensors: expected a list",
        ),
        (
            lambda: rsa(plain, 1, 1, mesh, sem, sem),
            r"dim: expected a dim whose size divides by the 4 devices",
        ),
    ]


def test_bad_input_is_a_one_line_error(mesh):
    for call, pattern in _bad_cases(mesh):
        with pytest.raises(ValidationError, match=pattern) as info:
            call()
        assert "\n" not in str(info.value)


def test_llama_reduce_scatter_needs_a_mesh_of_2_or_4_columns():
    m = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    try:
        x = ttnn.from_numpy(
            np.zeros((1, 1, 32, 512), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=m,
            memory_config=_width((32, 64), _crs(8)), mesh_mapper=ttnn.ReplicateTensorToMesh(m),
        )  # fmt: skip
        sem = ttnn.create_global_semaphore(m, _crs(4), 0)
        with pytest.raises(
            ValidationError, match=r"mesh columns: expected 2 or 4 devices along cluster_axis 1, got 8"
        ):
            ttnn.experimental.llama_reduce_scatter(x, x, 3, sem, None, cluster_axis=1)
    finally:
        ttnn.close_mesh_device(m)


# --- the Galaxy attention's decode ops -------------------------------------------------------------------------

SUB_GRIDS = ttnn.CoreRangeSet(
    [
        ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 7)),
        ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 7)),
    ]
)


def _heads_cfg():
    spec = ttnn.ShardSpec(SUB_GRIDS, (32, 128), ttnn.ShardOrientation.ROW_MAJOR)
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)


def test_num_cores_to_corerangeset_in_subcoregrids_walks_ranges_from_the_start_core():
    cores = ttnn.num_cores_to_corerangeset_in_subcoregrids(ttnn.CoreCoord(2, 7), 4, SUB_GRIDS, row_wise=True)
    # (2,7), (3,7) end the first range (by start core: x=1 before x=5), then (5,0), (6,0)
    assert {(r.start.x, r.start.y) for r in cores.ranges} == {(2, 7), (3, 7), (5, 0), (6, 0)}
    cols = ttnn.num_cores_to_corerangeset_in_subcoregrids(ttnn.CoreCoord(1, 6), 3, SUB_GRIDS, row_wise=False)
    assert {(r.start.x, r.start.y) for r in cols.ranges} == {(1, 6), (1, 7), (2, 0)}
    for args, pattern in (
        ((ttnn.CoreCoord(0, 0), 2, SUB_GRIDS), r"start_core CoreCoord\(x=0, y=0\) is not in sub_core_grids"),
        ((ttnn.CoreCoord(6, 6), 5, SUB_GRIDS), r"only 2 cores of sub_core_grids follow"),
        (((1, 0), 2, SUB_GRIDS), r"start_core must be a CoreCoord"),
        ((ttnn.CoreCoord(1, 0), 0, SUB_GRIDS), r"target_num_cores must be >= 1"),
    ):
        with pytest.raises(ValidationError, match=pattern):
            ttnn.num_cores_to_corerangeset_in_subcoregrids(*args)


def _qkv(mesh, rng, layout=ttnn.TILE_LAYOUT):
    arrays = [_bf16(rng.standard_normal((1, 1, 32, 1280)).astype(np.float32)) for _ in range(ROWS * COLS)]
    cfg = _width((32, 160), _crs(8))
    x = ttnn.from_numpy(
        np.concatenate(arrays, axis=0), dtype=ttnn.bfloat16, layout=layout, device=mesh, memory_config=cfg,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )  # fmt: skip
    return arrays, x


def test_llama_rs_create_heads_reduces_rows_and_splits_users_and_heads(mesh):
    rng = np.random.default_rng(6)
    arrays, x = _qkv(mesh, rng)
    q, k, v = ttnn.experimental.llama_rs_create_heads(
        input_tensor=x, intermediate_packet_buffer=_buffer(mesh), dim=3, cross_device_semaphore=_sem(mesh),
        subdevice_id=ttnn.SubDeviceId(0), cluster_axis=1, mesh_device=mesh, topology=ttnn.Topology.Linear,
        num_links=1, num_heads=8, num_kv_heads=1, memory_config=_heads_cfg(), qkv_memory_config=_heads_cfg(),
        use_optimal_ccl_for_llama=True,
    )  # fmt: skip
    for t in (q, k, v):
        assert list(t.shape) == [1, 8, 8, 128] and t.dtype == ttnn.bfloat16 and t.layout == ttnn.TILE_LAYOUT
        assert t.memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
        assert (
            t.memory_config().shard_spec.shape == (32, 128) and t.memory_config().shard_spec.num_cores() == 8
        )
    grids = [{(r.start.x, r.start.y) for r in t.memory_config().shard_spec.grid.ranges} for t in (q, k, v)]
    assert grids[0] == {(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2)}
    assert not (grids[0] & grids[1]) and not (grids[1] & grids[2]) and (3, 2) in grids[1]
    for i, (gq, gk, gv) in enumerate(zip(_shards(q), _shards(k), _shards(v))):
        r, c = divmod(i, COLS)
        total = _bf16(sum(arrays[r * COLS + j] for j in range(COLS)))[0, 0, 8 * c : 8 * c + 8]
        np.testing.assert_array_equal(gq[0], total[:, :1024].reshape(8, 8, 128))
        np.testing.assert_array_equal(gk[0, :, 0], total[:, 1024:1152])
        np.testing.assert_array_equal(gv[0, :, 0], total[:, 1152:1280])
        assert not gk[0, :, 1:].any() and not gv[0, :, 1:].any()


def test_llama_rs_create_heads_row_major_keeps_ttnn_shard(mesh):
    rng = np.random.default_rng(7)
    _, x = _qkv(mesh, rng, layout=ttnn.ROW_MAJOR_LAYOUT)
    q, _, _ = ttnn.experimental.llama_rs_create_heads(
        x,
        _buffer(mesh),
        3,
        _sem(mesh),
        None,
        1,
        mesh,
        num_heads=8,
        num_kv_heads=1,
        qkv_memory_config=_heads_cfg(),
    )
    assert q.layout == ttnn.ROW_MAJOR_LAYOUT and q.memory_config().shard_spec.shape == (8, 128)


def test_all_gather_concat_gathers_users_and_merges_heads(mesh):
    rng = np.random.default_rng(8)
    arrays = [_bf16(rng.standard_normal((1, 8, 8, 128)).astype(np.float32)) for _ in range(ROWS * COLS)]
    x = _per_device(mesh, arrays)
    buf = _per_device(mesh, [np.zeros((1, 1, 32, 128), np.float32)] * (ROWS * COLS))
    cfg = _width((32, 128), _crs(8))
    out = ttnn.experimental.all_gather_concat(
        x, buf, 1, cluster_axis=1, mesh_device=mesh, multi_device_global_semaphore=_sem(mesh), num_heads=8,
        memory_config=cfg, topology=ttnn.Topology.Linear, num_links=1, subdevice_id=None,
    )  # fmt: skip
    assert list(out.shape) == [1, 1, 32, 1024] and out.memory_config() == cfg
    for i, got in enumerate(_shards(out)):
        r = i // COLS
        want = np.concatenate([arrays[r * COLS + c] for c in range(COLS)], axis=1).reshape(1, 1, 32, 1024)
        np.testing.assert_array_equal(got, want)
    # fewer heads than the input holds, the default memory config, and rows padded to 32
    small = _per_device(mesh, [a[:, :4] for a in arrays])
    two = ttnn.experimental.all_gather_concat(
        small, buf, 1, cluster_axis=1, multi_device_global_semaphore=_sem(mesh), num_heads=2
    )
    assert list(two.shape) == [1, 1, 32, 256]
    spec = two.memory_config().shard_spec
    assert (
        two.memory_config().buffer_type == ttnn.BufferType.L1
        and spec.shape == (32, 128)
        and spec.num_cores() == 2
    )
    got = _shards(two)[0]
    want = np.concatenate([arrays[c][:, :4, :2] for c in range(COLS)], axis=1).reshape(16, 256)
    np.testing.assert_array_equal(got[0, 0, :16], want)
    assert not got[0, 0, 16:].any()


def test_attention_ops_bad_input_is_a_one_line_error(mesh):
    rng = np.random.default_rng(9)
    _, x = _qkv(mesh, rng)
    buf, sem = _buffer(mesh), _sem(mesh)
    heads = _per_device(mesh, [np.zeros((1, 8, 8, 128), np.float32)] * (ROWS * COLS))
    prefill = _per_device(mesh, [np.zeros((2, 8, 8, 128), np.float32)] * (ROWS * COLS))
    rch = ttnn.experimental.llama_rs_create_heads
    agc = ttnn.experimental.all_gather_concat
    narrow = _per_device(
        mesh,
        [np.zeros((1, 1, 32, 1024), np.float32)] * (ROWS * COLS),
        memory_config=_width((32, 128), _crs(8)),
    )
    few = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(_crs(8), (32, 128), ttnn.ShardOrientation.ROW_MAJOR),
    )
    cases = [
        (
            lambda: rch(
                x, buf, 3, sem, None, 1, mesh, num_heads=4, num_kv_heads=1, qkv_memory_config=_heads_cfg()
            ),
            r"num_heads: expected 8",
        ),
        (
            lambda: rch(
                x, buf, 3, sem, None, 1, mesh, num_heads=8, num_kv_heads=2, qkv_memory_config=_heads_cfg()
            ),
            r"num_kv_heads: expected 1",
        ),
        (
            lambda: rch(
                narrow,
                buf,
                3,
                sem,
                None,
                1,
                mesh,
                num_heads=8,
                num_kv_heads=1,
                qkv_memory_config=_heads_cfg(),
            ),
            r"input_tensor width: expected 1280",
        ),
        (
            lambda: rch(x, buf, 3, sem, None, 1, mesh, num_heads=8, num_kv_heads=1),
            r"qkv_memory_config: expected a sharded",
        ),
        (
            lambda: rch(x, buf, 3, sem, None, 1, mesh, num_heads=8, num_kv_heads=1, qkv_memory_config=few),
            r"qkv_memory_config grid: expected >= 24 cores",
        ),
        (
            lambda: rch(
                x,
                buf,
                3,
                sem,
                None,
                1,
                mesh,
                num_heads=8,
                num_kv_heads=1,
                qkv_memory_config=_width((64, 128), SUB_GRIDS),
            ),
            r"qkv_memory_config shard height: expected 32",
        ),
        (
            lambda: rch(
                x, buf, 3, sem, None, 1, mesh, num_heads=8, num_kv_heads=1, use_optimal_ccl_for_llama=None
            ),
            r"use_optimal_ccl_for_llama: expected a bool",
        ),
        (
            lambda: agc(heads, buf, 2, cluster_axis=1, multi_device_global_semaphore=sem, num_heads=8),
            r"dim: expected 1",
        ),
        (
            lambda: agc(heads, buf, 1, multi_device_global_semaphore=sem, num_heads=8),
            r"cluster_axis: expected 0 or 1",
        ),
        (
            lambda: agc(heads, buf, 1, cluster_axis=1, multi_device_global_semaphore=sem, num_heads=9),
            r"num_heads: expected an int in \[1, 8\]",
        ),
        (
            lambda: agc(heads, None, 1, cluster_axis=1, multi_device_global_semaphore=sem, num_heads=8),
            r"buffer_tensor: expected a ttnn.Tensor",
        ),
        (
            lambda: agc(
                heads,
                buf,
                1,
                cluster_axis=1,
                multi_device_global_semaphore=sem,
                num_heads=8,
                topology=ttnn.Topology.Ring,
            ),
            r"topology: expected Topology.Linear",
        ),
        (
            lambda: agc(prefill, buf, 1, cluster_axis=1, multi_device_global_semaphore=sem, num_heads=8),
            r"input_tensor.shape\[0\]: expected 1 \(decode\)",
        ),
    ]
    for call, pattern in cases:
        with pytest.raises(ValidationError, match=pattern) as info:
            call()
        assert "\n" not in str(info.value)


def test_a_galaxy_opened_with_column_dispatch_has_a_7x10_worker_grid():
    """tt-metal's Galaxy demo opens its 8x4 mesh with the dispatch cores on a column: 7x10 workers, so its core
    ranges at y = 8, 9 fit; a submesh keeps the grid; any other mesh or dispatch keeps the n150's 8x8."""
    col = ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER, ttnn.DispatchCoreAxis.COL)
    galaxy = ttnn.open_mesh_device(ttnn.MeshShape(8, 4), dispatch_core_config=col)
    try:
        assert galaxy.compute_with_storage_grid_size() == ttnn.CoreCoord(7, 10)
        assert galaxy.create_submesh(ttnn.MeshShape(2, 4)).compute_with_storage_grid_size() == ttnn.CoreCoord(
            7, 10
        )
        grids = ttnn.CoreRangeSet(
            [
                ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 9)),
                ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 9)),
            ]
        )
        cfg = ttnn.MemoryConfig(
            ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
            ttnn.BufferType.L1,
            ttnn.ShardSpec(grids, (32, 128), ttnn.ShardOrientation.ROW_MAJOR),
        )
        t = ttnn.from_numpy(
            np.zeros((1, 1, 50 * 32, 128), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
            device=galaxy, memory_config=cfg, mesh_mapper=ttnn.ReplicateTensorToMesh(galaxy),
        )  # fmt: skip
        assert t.memory_config().shard_spec.num_cores() == 50
    finally:
        ttnn.close_mesh_device(galaxy)
    for shape, config in (
        ((8, 4), None),
        ((8, 4), ttnn.DispatchCoreConfig(axis=ttnn.DispatchCoreAxis.ROW)),
        ((1, 8), col),
    ):
        other = ttnn.open_mesh_device(ttnn.MeshShape(*shape), dispatch_core_config=config)
        try:
            assert other.compute_with_storage_grid_size() == ttnn.CoreCoord(8, 8)
        finally:
            ttnn.close_mesh_device(other)


def test_sdpa_decode_on_the_galaxy_grid_runs_on_its_sub_core_grids():
    """The Galaxy demo's SDPA decode config names an 8x4 rectangle and the 32 sub-core-grid cores it runs on; on the
    7x10 grid the rectangle alone is refused, the sub-core grids are used, and a core outside the grid is refused.
    The result does not depend on the cores."""
    col = ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER, ttnn.DispatchCoreAxis.COL)
    galaxy = ttnn.open_mesh_device(ttnn.MeshShape(8, 4), dispatch_core_config=col)
    try:
        rng = np.random.default_rng(10)
        rep = ttnn.ReplicateTensorToMesh(galaxy)
        q = ttnn.from_numpy(
            rng.standard_normal((1, 8, 8, 64)).astype(np.float32), dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT, device=galaxy, mesh_mapper=rep,
        )  # fmt: skip
        k, v = (
            ttnn.from_numpy(
                rng.standard_normal((8, 1, 64, 64)).astype(np.float32),
                dtype=ttnn.bfloat16,
                layout=ttnn.TILE_LAYOUT,
                device=galaxy,
                mesh_mapper=rep,
            )
            for _ in range(2)
        )
        pos = ttnn.from_numpy(
            np.arange(8, dtype=np.int32) + 3, dtype=ttnn.int32, device=galaxy, mesh_mapper=rep
        )
        sub = ttnn.num_cores_to_corerangeset_in_subcoregrids(
            ttnn.CoreCoord(1, 0),
            32,
            ttnn.CoreRangeSet(
                [
                    ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 9)),
                    ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 9)),
                ]
            ),
            row_wise=True,
        )
        decode = ttnn.transformer.scaled_dot_product_attention_decode
        on_sub = decode(
            q, k, v, cur_pos_tensor=pos, program_config=ttnn.SDPAProgramConfig((8, 4), sub_core_grids=sub)
        )
        plain = decode(q, k, v, cur_pos_tensor=pos, program_config=ttnn.SDPAProgramConfig((7, 4)))
        np.testing.assert_array_equal(_shards(on_sub)[0], _shards(plain)[0])
        with pytest.raises(
            ValidationError, match=r"compute_with_storage_grid_size: expected a grid within the device's 7x10"
        ):
            decode(q, k, v, cur_pos_tensor=pos, program_config=ttnn.SDPAProgramConfig((8, 4)))
        outside = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 0))])
        with pytest.raises(
            ValidationError,
            match=r"sub_core_grids: expected cores within the device's 7x10 grid, got a core at \(7, 0\)",
        ):
            decode(
                q,
                k,
                v,
                cur_pos_tensor=pos,
                program_config=ttnn.SDPAProgramConfig((7, 4), sub_core_grids=outside),
            )
        with pytest.raises(ValidationError, match=r"sub_core_grids must be a CoreRangeSet or None"):
            ttnn.SDPAProgramConfig((7, 4), sub_core_grids=[(1, 0)])
    finally:
        ttnn.close_mesh_device(galaxy)


# --- the prefetcher's resources: sub-devices, the global circular buffer, buffer addresses -------------------------


def _galaxy():
    col = ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER, ttnn.DispatchCoreAxis.COL)
    return ttnn.open_mesh_device(ttnn.MeshShape(8, 4), dispatch_core_config=col)


def _cores(*ranges):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*a), ttnn.CoreCoord(*b)) for a, b in ranges])


def test_sub_device_managers_name_the_sub_devices_ops_may_run_on():
    """The Galaxy demo's decode split (prefetcher senders on columns 0 and 4, workers on the rest): after loading it,
    SubDeviceId(1) is a valid sub-device for the fused ops; before, only SubDeviceId(0) (the whole device) is."""
    galaxy = _galaxy()
    try:
        rng = np.random.default_rng(11)
        arrays = [_bf16(rng.standard_normal((1, 1, 32, 512)).astype(np.float32)) for _ in range(ROWS * COLS)]
        x = _per_device(
            galaxy, arrays, memory_config=_width((32, 64), _cores(((0, 9), (6, 9)), ((0, 8), (0, 8))))
        )
        buf = ttnn.from_numpy(
            np.zeros((ROWS * COLS, 1, 32, 1024), np.float32), dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT,
            device=galaxy, memory_config=_width((32, 512), _cores(((1, 1), (2, 1)))),
            mesh_mapper=ttnn.ShardTensorToMesh(galaxy, dim=0),
        )  # fmt: skip
        sem = ttnn.create_global_semaphore(galaxy, _cores(((0, 0), (6, 9))), 0)
        rs = ttnn.experimental.llama_reduce_scatter
        assert galaxy.get_sub_device_ids() == [ttnn.SubDeviceId(0)]
        with pytest.raises(
            ValidationError,
            match=r"subdevice_id: expected a ttnn.SubDeviceId of the loaded sub-device manager \(SubDeviceId\(0\)\)",
        ):
            rs(x, buf, 3, sem, ttnn.SubDeviceId(1), cluster_axis=1)
        prefetcher = ttnn.SubDevice([_cores(((0, 0), (0, 9)), ((4, 0), (4, 9)))])
        workers = ttnn.SubDevice([_cores(((1, 0), (3, 9)), ((5, 0), (6, 9)))])
        manager = galaxy.create_sub_device_manager([prefetcher, workers], 0)
        galaxy.load_sub_device_manager(manager)
        galaxy.set_sub_device_stall_group([ttnn.SubDeviceId(0), ttnn.SubDeviceId(1)])
        assert galaxy.get_sub_device_ids() == [ttnn.SubDeviceId(0), ttnn.SubDeviceId(1)]
        assert galaxy.get_sub_device_stall_group() == [ttnn.SubDeviceId(0), ttnn.SubDeviceId(1)]
        out = rs(x, buf, 3, sem, ttnn.SubDeviceId(1), cluster_axis=1)
        for got, want in zip(_shards(out), _rs_reference(arrays, 512)):
            np.testing.assert_array_equal(got, _bf16(want))
        galaxy.reset_sub_device_stall_group()
        assert galaxy.get_sub_device_stall_group() == []
        with pytest.raises(ValidationError, match=r"the manager is loaded"):
            galaxy.remove_sub_device_manager(manager)
        galaxy.clear_loaded_sub_device_manager()
        galaxy.remove_sub_device_manager(manager)
        cases = [
            (
                lambda: galaxy.load_sub_device_manager(manager),
                r"load_sub_device_manager: expected a SubDeviceManagerId this mesh created",
            ),
            (
                lambda: galaxy.create_sub_device_manager([], 0),
                r"sub_devices: expected a non-empty list of ttnn.SubDevice",
            ),
            (
                lambda: galaxy.create_sub_device_manager([workers], -1),
                r"local_l1_size: expected an int in \[0, ",
            ),
            (
                lambda: galaxy.create_sub_device_manager([workers, workers], 0),
                r"sub_devices\[1\]: core \(1, 0\) is in two sub-devices",
            ),
            (
                lambda: galaxy.create_sub_device_manager([ttnn.SubDevice([_cores(((0, 0), (7, 0)))])], 0),
                r"core \(7, 0\) is outside the 7x10 grid",
            ),
            (
                lambda: galaxy.set_sub_device_stall_group([ttnn.SubDeviceId(1)]),
                r"set_sub_device_stall_group: expected a non-empty list of the loaded manager's ids",
            ),
            (
                lambda: ttnn.SubDevice(_cores(((0, 0), (0, 0)))),
                r"SubDevice: cores: expected a non-empty list of ttnn.CoreRangeSet",
            ),
        ]
        for call, pattern in cases:
            with pytest.raises(ValidationError, match=pattern):
                call()
    finally:
        ttnn.close_mesh_device(galaxy)


def test_a_removed_or_another_meshs_sub_device_manager_id_is_refused():
    """Ids are never handed out twice: after remove, the old id does not load the next manager; and an id of
    another mesh (equal in value) is not this mesh's."""
    one, other = ttnn.open_mesh_device(ttnn.MeshShape(1, 2)), ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    try:
        split = [ttnn.SubDevice([_cores(((0, 0), (1, 0)))]), ttnn.SubDevice([_cores(((2, 0), (3, 0)))])]
        first = one.create_sub_device_manager(split[:1], 0)
        one.remove_sub_device_manager(first)
        second = one.create_sub_device_manager(split, 0)
        assert second != first
        foreign = other.create_sub_device_manager(split[:1], 0)
        assert foreign == first  # the same value, not the same mesh
        for stale in (first, foreign, ttnn.SubDeviceManagerId(second.id)):
            with pytest.raises(
                ValidationError, match=r"expected a SubDeviceManagerId this mesh created and has"
            ):
                one.load_sub_device_manager(stale)
        assert one.get_sub_device_ids() == [ttnn.SubDeviceId(0)]
        one.load_sub_device_manager(second)
        assert one.get_sub_device_ids() == [ttnn.SubDeviceId(0), ttnn.SubDeviceId(1)]
    finally:
        ttnn.close_mesh_device(one)
        ttnn.close_mesh_device(other)


def test_global_circular_buffer_is_counted_in_l1_while_it_lives():
    galaxy = _galaxy()
    try:
        mapping = [(ttnn.CoreCoord(0, y), _cores(((1, y), (2, y)))) for y in range(3)]
        before = galaxy.get_devices()[5].memory_used(ttnn.BufferType.L1)
        cb = ttnn.create_global_circular_buffer(galaxy, mapping, 4096)
        assert galaxy.get_devices()[5].memory_used(ttnn.BufferType.L1) == before + 4096 * 9
        assert cb.size == 4096 and cb.sender_cores() == [ttnn.CoreCoord(0, y) for y in range(3)]
        assert len(cb.receiver_cores()) == 6 and "size=4096" in repr(cb)
        del cb
        import gc

        gc.collect()
        assert galaxy.get_devices()[5].memory_used(ttnn.BufferType.L1) == before
        create = ttnn.create_global_circular_buffer
        for call, pattern in (
            (lambda: create(None, mapping, 64), r"mesh_device: expected a ttnn.MeshDevice"),
            (lambda: create(galaxy, mapping, 0), r"size: expected an int in \[1, 1396736\]"),
            (
                lambda: create(galaxy, mapping, 64, ttnn.BufferType.DRAM),
                r"buffer_type: expected BufferType.L1",
            ),
            (
                lambda: create(galaxy, [(ttnn.CoreCoord(0, 0), (1, 0))], 64),
                r"expected a non-empty list of \(CoreCoord sender",
            ),
            (
                lambda: create(galaxy, [(ttnn.CoreCoord(0, 0), _cores(((0, 0), (1, 0))))], 64),
                r"each core used once, got \(0, 0\) twice",
            ),
            (
                lambda: create(galaxy, [(ttnn.CoreCoord(0, 0), _cores(((1, 10), (1, 10))))], 64),
                r"cores within the 7x10 grid, got \(1, 10\)",
            ),
        ):
            with pytest.raises(ValidationError, match=pattern):
                call()
        with pytest.raises(
            ValidationError, match=r"size: expected an int in \[1, 1396736\] \(bytes per core"
        ):
            create(galaxy, mapping, 10**9)
    finally:
        ttnn.close_mesh_device(galaxy)


def test_matmul_checks_the_prefetchers_global_cb_and_sub_device_id():
    """docs/emulator.md: global_cb and the sub-device id are checked and change no value; a matmul given another
    mesh's buffer, something else, or a sub-device the loaded manager does not have is a one-line error."""
    one, other = ttnn.open_mesh_device(ttnn.MeshShape(1, 2)), ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    try:
        rng = np.random.default_rng(12)
        x, w = (
            ttnn.from_numpy(rng.standard_normal(s).astype(np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
                            device=one)
            for s in ((1, 1, 32, 64), (1, 1, 64, 64))
        )  # fmt: skip
        mapping = [(ttnn.CoreCoord(0, 0), _cores(((1, 0), (2, 0))))]
        ours, theirs = (ttnn.create_global_circular_buffer(m, mapping, 1024) for m in (one, other))
        for op in (ttnn.matmul, ttnn.linear):
            plain = ttnn.to_numpy(op(x, w))
            kept = op(x, w, global_cb=ours, sub_device_id=ttnn.SubDeviceId(0))
            np.testing.assert_array_equal(ttnn.to_numpy(kept), plain)
            name = "ttnn.matmul" if op is ttnn.matmul else "ttnn.linear"
            for kwargs, pattern in (
                (
                    {"global_cb": theirs},
                    r"global_cb: expected None or a ttnn.GlobalCircularBuffer of the input's",
                ),
                ({"global_cb": 5}, r"global_cb: expected None or a ttnn.GlobalCircularBuffer .*, got 5"),
                (
                    {"sub_device_id": ttnn.SubDeviceId(1)},
                    r"sub_device_id: expected None or a ttnn.SubDeviceId of",
                ),
                ({"sub_device_id": 0}, r"sub_device_id: .*\(SubDeviceId\(0\)\), got 0"),
            ):
                with pytest.raises(ValidationError, match=rf"{name}: {pattern}"):
                    op(x, w, **kwargs)
        host = ttnn.from_numpy(np.zeros((1, 1, 32, 64), np.float32), dtype=ttnn.bfloat16)
        with pytest.raises(
            ValidationError, match=r"ttnn.matmul: input_tensor_a: expected a tensor on device"
        ):
            ttnn.matmul(host, w, global_cb=5)  # the op's own check first for a host input
    finally:
        ttnn.close_mesh_device(one)
        ttnn.close_mesh_device(other)


def test_buffer_address_is_per_allocation_and_shared_by_views(mesh):
    a = _per_device(mesh, [np.zeros((1, 1, 32, 32), np.float32)] * (ROWS * COLS))
    b = _per_device(mesh, [np.zeros((1, 1, 32, 32), np.float32)] * (ROWS * COLS))
    assert a.buffer_address() != b.buffer_address()
    assert ttnn.get_device_tensors(a)[3].buffer_address() == a.buffer_address()
    host = ttnn.from_numpy(np.zeros((32, 32), np.float32), dtype=ttnn.bfloat16)
    b.deallocate()
    for t in (host, b):
        with pytest.raises(ValidationError, match=r"buffer_address: the tensor has no device buffer"):
            t.buffer_address()


def test_cluster_axis_true_is_refused_by_every_op_that_reads_it(mesh):
    """True == 1 in Python, so a flag passed as cluster_axis used to select axis 1. ttnn binds the argument as
    an unsigned int; every reader refuses it through the one shared check, naming the value."""
    x = _per_device(
        mesh, [np.zeros((1, 1, 32, 512), np.float32)] * (ROWS * COLS), memory_config=_width((32, 64), _crs(8))
    )
    plain = _per_device(mesh, [np.zeros((1, 1, 32, 512), np.float32)] * (ROWS * COLS))
    heads = _per_device(mesh, [np.zeros((1, 8, 8, 128), np.float32)] * (ROWS * COLS))
    w = _per_device(mesh, [np.zeros((1, 1, 512, 256), np.float32)] * (ROWS * COLS))
    buf, sem, qkv = _buffer(mesh), _sem(mesh), _qkv(mesh, np.random.default_rng(9))[1]
    ex = ttnn.experimental
    calls = {
        "llama_reduce_scatter": lambda axis: ex.llama_reduce_scatter(x, buf, 3, sem, None, cluster_axis=axis),
        "llama_rs_matmul": lambda axis: ex.llama_rs_matmul(
            plain, w, buf, 3, sem, axis, mesh, 1, None, rs_tensor=x
        ),
        "llama_rs_create_heads": lambda axis: ex.llama_rs_create_heads(
            qkv, buf, 3, sem, None, axis, mesh, num_heads=8, num_kv_heads=1, qkv_memory_config=_heads_cfg()
        ),
        "all_reduce_async": lambda axis: ex.all_reduce_async(plain, buf, axis, mesh, sem),
        "reduce_scatter_async": lambda axis: ex.reduce_scatter_async(plain, 3, axis, mesh, sem, sem),
        "all_gather_concat": lambda axis: ex.all_gather_concat(
            heads, buf, 1, cluster_axis=axis, multi_device_global_semaphore=sem, num_heads=8
        ),
        "all_gather": lambda axis: ttnn.all_gather(plain, 3, cluster_axis=axis),
        "reduce_scatter": lambda axis: ttnn.reduce_scatter(plain, 3, cluster_axis=axis),
        "all_reduce": lambda axis: ttnn.all_reduce(plain, cluster_axis=axis),
        "get_num_links": lambda axis: ttnn.get_num_links(mesh, axis),
    }
    for name, call in calls.items():
        call(1)  # the same call with the int axis passes
        for flag in (True, np.bool_(True)):
            with pytest.raises(
                ValidationError, match=r"cluster_axis: expected .*, got (True|np\.True_)$"
            ) as info:
                call(flag)
            assert name in str(info.value) and "\n" not in str(info.value)
    # a numpy int is an axis, as it is for ttnn's binding
    assert ttnn.get_num_links(mesh, np.int64(0)) == ttnn.get_num_links(mesh, 0)


def _demo_dispatch_config(axis_name, type_name="WORKER"):
    """As a device fixture of the Galaxy demo builds it: enum members looked up by the names its parameters give."""
    return ttnn.DispatchCoreConfig(
        getattr(ttnn.DispatchCoreType, type_name), getattr(ttnn.DispatchCoreAxis, axis_name)
    )


def test_dispatch_core_config_takes_ttnn_enums_only():
    """A string axis used to compare unequal to DispatchCoreAxis.COL and silently give the 8x8 grid; ttnn's
    binding refuses anything but its enums. Each field and the open_mesh_device argument are checked."""
    assert _demo_dispatch_config("COL").axis is ttnn.DispatchCoreAxis.COL
    cases = [
        (
            lambda: ttnn.DispatchCoreConfig(axis="col"),
            "axis: expected a ttnn.DispatchCoreAxis or None, got 'col'",
        ),
        (lambda: ttnn.DispatchCoreConfig(axis=1), "axis: expected a ttnn.DispatchCoreAxis or None, got 1"),
        (
            lambda: ttnn.DispatchCoreConfig("WORKER", ttnn.DispatchCoreAxis.COL),
            "type: expected a ttnn.DispatchCoreType or None, got 'WORKER'",
        ),
        (
            lambda: ttnn.DispatchCoreConfig(ttnn.DispatchCoreAxis.COL),  # the axis given where the type goes
            "type: expected a ttnn.DispatchCoreType or None, got DispatchCoreAxis.COL",
        ),
        (
            lambda: ttnn.DispatchCoreConfig(fabric_tensix_config=True),
            "fabric_tensix_config: expected a ttnn.FabricTensixConfig or None, got True",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValidationError) as info:
            call()
        assert str(info.value) == f"ttnn.DispatchCoreConfig: {message}"
    with pytest.raises(ValidationError) as info:
        ttnn.open_mesh_device(ttnn.MeshShape(8, 4), dispatch_core_config=ttnn.DispatchCoreAxis.COL)
    assert str(info.value) == (
        "open_mesh_device: dispatch_core_config: expected a ttnn.DispatchCoreConfig or None, got DispatchCoreAxis.COL"
    )
    eth = ttnn.DispatchCoreConfig(
        ttnn.DispatchCoreType.ETH, ttnn.DispatchCoreAxis.COL, ttnn.FabricTensixConfig.MUX
    )
    galaxy = ttnn.open_mesh_device(ttnn.MeshShape(8, 4), dispatch_core_config=eth)
    try:
        assert galaxy.compute_with_storage_grid_size() == ttnn.CoreCoord(7, 10)
    finally:
        ttnn.close_mesh_device(galaxy)


def _demo_prefetcher_mapping(senders_per_column=6):
    """As the Galaxy demo's prefetcher setup builds it: DRAM-reader senders down columns 0 and 4, each feeding the
    two worker cores to its right (zip of sender cores and receiver core sets)."""
    senders = [ttnn.CoreCoord(x, y) for x in (0, 4) for y in range(senders_per_column)]
    receivers = [_cores(((s.x + 1, s.y), (s.x + 2, s.y))) for s in senders]
    return list(zip(senders, receivers))


def test_global_circular_buffer_size_is_per_core_and_each_sender_has_receivers():
    """L1 is per core: the buffer's size (bytes on each core) must fit in one core, although the device's pooled
    L1 would hold size x cores; the whole size is still counted on each device. A sender without receivers (an
    empty CoreRangeSet) is refused, as tt-metal's prefetcher pipes refuse one."""
    galaxy = _galaxy()
    small = ttnn.open_mesh_device(ttnn.MeshShape(1, 2), l1_small_size=24576)
    try:
        mapping = _demo_prefetcher_mapping()
        device = galaxy.get_devices()[0]
        before = device.memory_used(ttnn.BufferType.L1)
        cb = ttnn.create_global_circular_buffer(galaxy, mapping, 728 * 1088)  # the demo's buffer size
        assert device.memory_used(ttnn.BufferType.L1) == before + 728 * 1088 * 36
        del cb
        limit = galaxy.l1_size_per_core()
        full = ttnn.create_global_circular_buffer(galaxy, mapping[:1], limit)  # one core's whole L1: fits
        del full
        one_core = [(ttnn.CoreCoord(0, 0), _cores(((1, 0), (1, 0))))]
        with pytest.raises(ValidationError) as info:
            ttnn.create_global_circular_buffer(galaxy, one_core, limit + 1)
        assert str(info.value) == (
            f"ttnn.create_global_circular_buffer: size: expected an int in [1, {limit}] (bytes per core; one "
            f"core's L1 is {limit:,} bytes), got {limit + 1}"
        )
        # l1_small_size takes its share of every core first
        with pytest.raises(ValidationError, match=rf"size: expected an int in \[1, {limit - 24576}\]"):
            ttnn.create_global_circular_buffer(small, one_core, limit)
        lonely = [*mapping[:2], (ttnn.CoreCoord(6, 9), ttnn.CoreRangeSet([]))]
        with pytest.raises(ValidationError) as info:
            ttnn.create_global_circular_buffer(galaxy, lonely, 4096)
        assert str(info.value) == (
            "ttnn.create_global_circular_buffer: sender_receiver_core_mapping: expected at least one receiver core "
            "for each sender, got sender (6, 9) with none"
        )
        assert device.memory_used(ttnn.BufferType.L1) == before  # nothing refused was counted
    finally:
        ttnn.close_mesh_device(galaxy)
        ttnn.close_mesh_device(small)


def test_sub_device_manager_local_l1_size_fits_one_core():
    """The sub-devices' local L1 comes out of each worker core's L1 (the global allocator shrinks by it on load),
    so it is bounded by one core's L1 less l1_small_size; the demo's 0 and a bound value pass."""
    galaxy = _galaxy()
    small = ttnn.open_mesh_device(ttnn.MeshShape(1, 2), l1_small_size=32768)
    try:
        split = [ttnn.SubDevice([_cores(((0, 0), (0, 9)), ((4, 0), (4, 9)))])]
        narrow = [ttnn.SubDevice([_cores(((0, 0), (1, 0)))])]
        limit = galaxy.l1_size_per_core()
        for size in (0, 64 * 1024, limit):
            galaxy.create_sub_device_manager(split, size)
        for mesh, bad, bound in (
            (galaxy, limit + 1, limit),
            (galaxy, 2**40, limit),
            (galaxy, True, limit),
            (galaxy, 1024.0, limit),
            (small, limit, limit - 32768),
        ):
            with pytest.raises(ValidationError) as info:
                mesh.create_sub_device_manager(split if mesh is galaxy else narrow, bad)
            assert str(info.value) == (
                f"MeshDevice.create_sub_device_manager: local_l1_size: expected an int in [0, {bound}] (bytes per "
                f"core; one core's L1 is {bound:,} bytes), got {bad!r}"
            )
    finally:
        ttnn.close_mesh_device(galaxy)
        ttnn.close_mesh_device(small)
