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
    return [
        (lambda: rs(x, buf, 2, sem, None, cluster_axis=1), r"dim: expected 3"),
        (lambda: rs(x, buf, 3, sem, None, cluster_axis=0), r"cluster_axis: expected 1"),
        (
            lambda: rs(plain, buf, 3, sem, None, cluster_axis=1),
            r"input_tensor.memory_config: expected a sharded",
        ),
        (lambda: rs(x, plain, 3, sem, None, cluster_axis=1), r"intermediate_packet_buffer.memory_config"),
        (lambda: rs(x, buf, 3, sem, 7, cluster_axis=1), r"subdevice_id: expected a ttnn.SubDeviceId or None"),
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
