"""Matmul over a weight read from its storage (issue 24): each K block of a bfloat16 / bfloat8_b / bfloat4_b weight
is unpacked into a reused buffer with the math-fidelity truncation applied there, instead of unpacking the whole
weight and truncating a copy. The bits must be those of the old path, written out here with the numerics
functions on the quantised float32 values, for every dtype × math fidelity × fp32 accumulation, on decode and
prefill shapes of a real-size Llama-3.2-1B MLP slice (dim 2048, an 8-way split of 8192), with both kernel
backends. The 32-row (decode) cases follow the small-product rule on both sides (numerics.matmul_accumulate routes
them to the same kernel, which reads the packed weight itself); the 288-row cases compare the BLAS path."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import _kernels, numerics
from tttv2.ttnn.ops import matmul as matmul_mod

DTYPES = [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b]
FIDELITIES = list(ttnn.MathFidelity)


def old_path(x, w, dtype, fidelity, fp32_acc, k_block, out_dtype=ttnn.bfloat16, bias=None):
    """What the matmul computed before storage: quantise, truncate both operands, accumulate, add, quantise."""
    a_bits, b_bits = numerics.fidelity_bits(fidelity)
    qa = numerics.truncate_mantissa(np.ascontiguousarray(numerics.quantize(x, ttnn.bfloat16)), a_bits)
    qw = numerics.truncate_mantissa(np.ascontiguousarray(numerics.quantize(w, dtype)), b_bits)
    out = numerics.matmul_accumulate(qa, qw, k_block, fp32_acc)
    if bias is not None:
        out = out + numerics.quantize(bias, ttnn.bfloat16)
    return numerics.quantize(out, out_dtype)


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = matmul_mod.matmul_stored

    def spy(*args, **kwargs):
        calls.append(args[1].dtype)
        return real(*args, **kwargs)

    monkeypatch.setattr(matmul_mod, "matmul_stored", spy)
    return calls


def _dev(mesh, x, dtype):
    return ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)


@pytest.mark.parametrize("backend", _kernels.BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("rows", [32, 288])  # decode; prefill rows cut into 256-row pieces over the workers
def test_packed_weight_matmul_has_the_old_bits(open_mesh, counted, backend, dtype, rows):
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(rows)
    k, n = (2048, 1024) if rows == 32 else (512, 256)
    x = rng.standard_normal((1, 1, rows, k)).astype(np.float32)
    w = (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
    w[:16, :64] *= np.float32(1e-37)  # blocks stored as float32 subnormals (truncation cuts there)
    with _kernels.use_backend(backend):
        tx, tw = _dev(mesh, x, ttnn.bfloat16), _dev(mesh, w, dtype)
        for fidelity in FIDELITIES:
            for fp32_acc in (False, True):
                config = ttnn.WormholeComputeKernelConfig(math_fidelity=fidelity, fp32_dest_acc_en=fp32_acc)
                got = ttnn.to_numpy(ttnn.linear(tx, tw, compute_kernel_config=config))
                k_block = min(8, k // 32) * 32  # no program config: the largest divisor of K tiles <= 8
                want = old_path(x, w, dtype, fidelity, fp32_acc, k_block)
                assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (fidelity, fp32_acc)
    assert counted == [dtype] * 8


def test_program_config_blocks_bias_and_activation(open_mesh, counted):
    """in0_block_w from the program config sets the K blocks; a bias and a fused activation follow as before."""
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 1, 64, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 128)) * 0.1).astype(np.float32)
    bias = rng.standard_normal((1, 1, 1, 128)).astype(np.float32)
    config = ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(4, 2),
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        transpose_mcast=False,
        fused_activation=None,
    )
    out = ttnn.linear(
        _dev(mesh, x, ttnn.bfloat16),
        _dev(mesh, w, ttnn.bfloat8_b),
        bias=_dev(mesh, bias, ttnn.bfloat16),
        program_config=config,
        activation="relu",
        compute_kernel_config=ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.LoFi),
    )
    want = old_path(x, w, ttnn.bfloat8_b, ttnn.MathFidelity.LoFi, False, 64, ttnn.float32, bias)
    want = numerics.quantize(np.maximum(want, 0), ttnn.bfloat16)
    assert np.array_equal(ttnn.to_numpy(out).view(np.uint32), want.view(np.uint32))
    assert counted == [ttnn.bfloat8_b]


def test_weights_the_storage_path_does_not_take(open_mesh, counted):
    """A transposed weight, one whose last dim needs tile padding, a float32 weight and a batched weight go
    through the unpacked path, with the same bits as the old path."""
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    fid = ttnn.MathFidelity.HiFi2
    config = ttnn.WormholeComputeKernelConfig(math_fidelity=fid)
    w40 = rng.standard_normal((64, 40)).astype(np.float32)
    got = ttnn.to_numpy(
        ttnn.matmul(
            _dev(mesh, x, ttnn.bfloat16), _dev(mesh, w40, ttnn.bfloat8_b), compute_kernel_config=config
        )
    )
    assert np.array_equal(got, old_path(x, w40, ttnn.bfloat8_b, fid, False, 64))
    wt = rng.standard_normal((96, 64)).astype(np.float32)
    got = ttnn.to_numpy(
        ttnn.matmul(
            _dev(mesh, x, ttnn.bfloat16),
            _dev(mesh, wt, ttnn.bfloat4_b),
            transpose_b=True,
            compute_kernel_config=config,
        )
    )
    want = old_path(x, numerics.quantize(wt, ttnn.bfloat4_b).T, ttnn.float32, fid, False, 64)
    assert np.array_equal(got, want)
    w32 = rng.standard_normal((64, 64)).astype(np.float32)
    got = ttnn.to_numpy(
        ttnn.matmul(_dev(mesh, x, ttnn.bfloat16), _dev(mesh, w32, ttnn.float32), compute_kernel_config=config)
    )
    assert np.array_equal(got, old_path(x, w32, ttnn.float32, fid, False, 64))
    xb = rng.standard_normal((1, 2, 32, 64)).astype(np.float32)
    wb = rng.standard_normal((1, 2, 64, 64)).astype(np.float32)
    got = ttnn.to_numpy(
        ttnn.matmul(
            _dev(mesh, xb, ttnn.bfloat16), _dev(mesh, wb, ttnn.bfloat16), compute_kernel_config=config
        )
    )
    assert np.array_equal(got, old_path(xb, wb, ttnn.bfloat16, fid, False, 64))
    assert counted == []


def test_sharded_weight_on_a_mesh(open_mesh, counted):
    """A tt-metal style column-parallel weight (ShardTensor2dMesh over 1×8) reads each device's own storage."""
    mesh = open_mesh((1, 8))
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 8 * 64)) * 0.05).astype(np.float32)
    tw = ttnn.from_numpy(
        w,
        dtype=ttnn.bfloat4_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, -1), mesh_shape=(1, 8)),
    )
    out = ttnn.linear(_dev(mesh, x, ttnn.bfloat16), tw)
    got = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=-1))
    want = np.concatenate(
        [
            old_path(x, w[:, 64 * i : 64 * (i + 1)], ttnn.bfloat4_b, ttnn.MathFidelity.LoFi, False, 256)
            for i in range(8)
        ],
        axis=-1,
    )
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert counted == [ttnn.bfloat4_b] * 8


def test_stored_weight_bits_do_not_depend_on_threads(open_mesh, monkeypatch, counted):
    """Row pieces on 1 or 2 workers, and two Python threads multiplying at once (each has its own buffer):
    the same bits."""
    import threading

    from tttv2.ttnn import _threads

    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(21)
    x = _dev(mesh, rng.standard_normal((1, 1, 320, 256)).astype(np.float32), ttnn.bfloat16)
    weights = [_dev(mesh, (rng.standard_normal((256, 192)) * 0.1).astype(np.float32), dt) for dt in DTYPES]
    config = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.LoFi, fp32_dest_acc_en=False)
    monkeypatch.setattr(numerics, "_MATMUL_MIN_WORK", 1)

    def products():
        return [ttnn.to_numpy(ttnn.linear(x, w, compute_kernel_config=config)) for w in weights]

    serial = {}
    for workers in (1, 2):
        monkeypatch.setattr(_threads, "WORKERS", workers)
        serial[workers] = products()
    results = [None, None]

    def worker(slot):
        results[slot] = products()

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got in (serial[2], *results):
        for a, b in zip(got, serial[1]):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert len(counted) == 4 * len(DTYPES)


def test_panels_above_the_cap_get_their_own_buffer(open_mesh, monkeypatch):
    """The reused buffer grows to the largest panel up to a cap; a larger panel is unpacked into a buffer of its
    own (the same bits), so no thread keeps a huge buffer alive."""
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(17)
    x = _dev(mesh, rng.standard_normal((1, 1, 32, 256)).astype(np.float32), ttnn.bfloat16)
    w = _dev(mesh, (rng.standard_normal((256, 128)) * 0.1).astype(np.float32), ttnn.bfloat8_b)
    config = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True)
    want = ttnn.to_numpy(ttnn.linear(x, w, compute_kernel_config=config))
    assert numerics._SCRATCH.buf.size >= 256 * 128
    numerics._SCRATCH.buf = np.empty(1, np.float32)
    monkeypatch.setattr(numerics, "_SCRATCH_MAX_ELEMENTS", 256 * 128 - 1)
    got = ttnn.to_numpy(ttnn.linear(x, w, compute_kernel_config=config))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert numerics._SCRATCH.buf.size == 1  # not grown
