"""Device tensors held in their device format (issue 24, item 1): bfloat16 as 16-bit patterns, bfloat8_b /
bfloat4_b as packed blocks (one exponent byte per 16 values; a sign|magnitude byte per value, or two 4-bit codes
per byte). Unpacking gives bit for bit what quantising gave before (``numerics.quantize``, the numpy and C++
kernels), writes pack only the blocks they touch, and the host holds what the device would: 2, 1.0625 and
0.5625 bytes per element."""

from __future__ import annotations

import gc
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import _kernels, numerics, storage
from tttv2.ttnn.errors import ValidationError

PACKED = [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b]
BLOCK_FLOATS = [ttnn.bfloat8_b, ttnn.bfloat4_b]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(bits(a), bits(b))


def adversarial_rows(mantissa_bits: int) -> np.ndarray:
    """Rows of 32 values (two blocks each) at the edges of the block format."""
    m = mantissa_bits
    tiny = np.float32(2.0**-140)
    rows = [
        np.zeros(32),
        np.r_[[-0.0] * 16, [0.0, -0.0] * 8],  # signed zeros drop their sign
        np.r_[[1.0], [2.0 ** -(m + 1)] * 15, [1.0, 2.0**-m * 1.5] + [0.0] * 14],  # ties to even at the step
        np.r_[[(2**m - 0.5) * 2.0 ** -(m - 1)] * 16, [1.9999999] * 16],  # carry past 2^m - 1: saturates
        np.r_[[3.0e38, -3.0e38] * 8, [np.finfo(np.float32).max] * 16],  # the largest exponent
        np.r_[[np.inf, -np.inf, np.nan, 1.0] * 4, [np.nan] * 16],  # non-finite values saturate
        np.r_[[tiny, -tiny * 3] * 8, [1e-45, 2e-45] * 8],  # all-subnormal blocks
        np.r_[[2.0**-120, 2.0**-126 * 1.5] * 8, [2.0**-125, -(2.0**-133)] * 8],  # steps below 2^-126
        np.r_[[1e20, 1e-20] * 8, [-7.0, 7.0 / 2**m] * 8],  # values far below the block maximum flush
    ]
    return np.asarray(rows, dtype=np.float32)


@pytest.mark.parametrize("backend", _kernels.BACKENDS)
@pytest.mark.parametrize("dtype", BLOCK_FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["random", "scaled", "adversarial"])
@pytest.mark.parametrize("shape", [(7, 64), (3, 5, 40), (70,), (2, 1, 16)])
def test_block_float_unpack_of_pack_is_quantize(backend, dtype, kind, shape):
    rng = np.random.default_rng(hash((kind, shape)) % 2**32)
    m = 7 if dtype is ttnn.bfloat8_b else 3
    if kind == "adversarial":
        rows = adversarial_rows(m)
        x = np.resize(rows, (max(1, int(np.prod(shape[:-1]))), shape[-1])).reshape(shape)
    else:
        x = rng.standard_normal(shape).astype(np.float32)
        if kind == "scaled":
            x *= np.float32(10.0) ** rng.integers(-40, 38, size=shape).astype(np.float32)
    with _kernels.use_backend(backend):
        want = numerics.quantize(x, dtype)
        packed = storage.pack(x, dtype)
        assert same_bits(packed.to_float32(), want)
        assert same_bits(numerics.store(x, dtype).to_float32(), want)


@pytest.mark.parametrize("backend", _kernels.BACKENDS)
def test_bf16_unpack_of_pack_is_round_to_nearest_even(backend):
    x = np.r_[
        adversarial_rows(7).ravel(),
        np.random.default_rng(1).standard_normal(999).astype(np.float32),
        np.float32([1.00390625, 1.01171875, -1.00390625, 3.4e38, 1e-40]),  # ties, overflow, subnormal
    ].astype(np.float32)
    with _kernels.use_backend(backend):
        got = storage.pack(x, ttnn.bfloat16).to_float32()
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert same_bits(got[~nan], want[~nan])
    assert same_bits(numerics.quantize(x, ttnn.bfloat16), got)


@pytest.mark.parametrize("dtype", PACKED, ids=lambda d: d.name)
def test_empty_and_rank0_shards(dtype):
    for shape in [(0, 32), (4, 0), (), (1,)]:
        x = np.full(shape, 1.25, dtype=np.float32)
        s = storage.pack(x, dtype)
        assert s.shape == shape
        assert same_bits(s.to_float32(), numerics.quantize(x, dtype))


def test_layout_and_bytes_of_a_block_float_storage():
    x = np.arange(2 * 48, dtype=np.float32).reshape(2, 48) - 40
    s8, s4 = storage.pack(x, ttnn.bfloat8_b), storage.pack(x, ttnn.bfloat4_b)
    # 48 columns pad to 64: 4 blocks of 16 per row
    assert s8.exponents.shape == (2, 4) and s8.mantissas.shape == (2, 64) and s8.nbytes == 2 * 4 + 2 * 64
    assert s4.exponents.shape == (2, 4) and s4.mantissas.shape == (2, 32) and s4.nbytes == 2 * 4 + 2 * 32
    exps, mants = _kernels.bfp_pack(np.pad(x, ((0, 0), (0, 16))), 3)
    assert np.array_equal(s4.exponents, exps) and np.array_equal(s4.sign_magnitude(), mants)
    # two 4-bit codes per byte, the even column in the low nibble: sign in bit 3, magnitude below
    low, high = s4.mantissas[0, 0] & 0xF, s4.mantissas[0, 0] >> 4
    assert low == ((mants[0, 0] >> 4) & 8 | mants[0, 0] & 7) and high == (
        (mants[0, 1] >> 4) & 8 | mants[0, 1] & 7
    )
    again = storage.BlockFloatStorage.from_packed(ttnn.bfloat4_b, (2, 48), exps, mants)
    assert same_bits(again.to_float32(), s4.to_float32())


def test_storage_constructors_refuse_what_does_not_fit():
    with pytest.raises(TypeError, match="uint16"):
        storage.Bf16Storage(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="not a block float"):
        storage.BlockFloatStorage(
            ttnn.bfloat16, (1, 32), np.zeros((1, 2), np.uint8), np.zeros((1, 32), np.uint8)
        )
    with pytest.raises(ValueError, match=r"needs exponents \(1, 2\) and mantissas \(1, 16\)"):
        storage.BlockFloatStorage(
            ttnn.bfloat4_b, (1, 32), np.zeros((1, 2), np.uint8), np.zeros((1, 32), np.uint8)
        )
    with pytest.raises(ValueError, match="cannot reshape"):
        storage.pack(np.zeros((2, 32), np.float32), ttnn.bfloat8_b).reshape(3, 32)


@pytest.mark.parametrize("dtype", PACKED, ids=lambda d: d.name)
def test_reshape_keeps_the_blocks_or_reblocks_as_quantising_would(dtype):
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    x[:, :16] *= 1e-3
    s = storage.pack(x, dtype)
    same_width = s.reshape(2, 2, 64)
    assert same_bits(same_width.to_float32(), numerics.quantize(x, dtype).reshape(2, 2, 64))
    if dtype.is_block_float:
        assert same_width.exponents is s.exponents  # free: the same blocks
        assert s.reshape(2, -1).shape == (2, 128)
    other = s.reshape(8, 32)
    assert same_bits(other.to_float32(), numerics.quantize(s.to_float32().reshape(8, 32), dtype))


@pytest.mark.parametrize("dtype", PACKED, ids=lambda d: d.name)
@pytest.mark.parametrize(
    "index",
    [
        (slice(None), 1),  # whole rows
        (0, slice(None), slice(2, 5), slice(None)),
        (np.array([2, 0]), slice(None), 3, Ellipsis),
        Ellipsis,
        (1, 0, 3, slice(16, 48)),  # whole blocks of one row
        (1, 0, 3, slice(32, None)),  # to the row's end (a part block)
        (0, 0, 0, slice(3, 9)),  # part of a block: the whole shard is rewritten
        (0, 0, 0, slice(0, 48, 2)),
        (Ellipsis, 5),
        (0, None),
        (np.bool_(True),),
    ],
)
def test_writes_equal_quantising_the_written_rows(dtype, index):
    shape = (3, 2, 6, 40)
    rng = np.random.default_rng(5)
    base = rng.standard_normal(shape).astype(np.float32)
    s = storage.pack(base, dtype)
    s.seal()
    s = s.copy()
    assert s.writeable
    region = np.zeros(shape, np.float32)[index]
    values = rng.standard_normal(region.shape).astype(np.float32) * 100
    s[index] = values
    # as on the device: the written values join the stored (already quantised) values of their blocks; a block
    # holding only stored values packs to itself again
    full = numerics.quantize(base.reshape(-1, 40), dtype).reshape(shape)
    full[index] = values
    assert same_bits(s.to_float32(), numerics.quantize(full.reshape(-1, 40), dtype).reshape(shape))
    assert same_bits(storage.pack(full, dtype).to_float32(), s.to_float32())


def test_a_sealed_storage_refuses_writes():
    s = storage.pack(np.ones((2, 32), np.float32), ttnn.bfloat8_b)
    s.seal()
    with pytest.raises(ValueError, match="read-only"):
        s[0] = 2.0
    b = storage.pack(np.ones((2, 32), np.float32), ttnn.bfloat16)
    b.seal()
    with pytest.raises(ValueError, match="read-only"):
        b[0] = 2.0


def test_empty_and_constant_storages():
    for dtype in PACKED:
        assert not storage.empty((3, 40), dtype).to_float32().any()
        c = storage.constant((3, 40), -1.5, dtype)
        assert same_bits(c.to_float32(), numerics.quantize(np.full((3, 40), -1.5), dtype))


# --- tensors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", PACKED, ids=lambda d: d.name)
def test_tensors_hold_storage_and_read_float32(open_mesh, dtype):
    mesh = open_mesh((1, 2))
    x = np.random.default_rng(2).standard_normal((1, 1, 64, 96)).astype(np.float32)
    t = ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)
    stored = t.stored_shards()
    assert all(storage.is_storage(s) for s in stored) and stored[0] is stored[1]  # replicated: one storage
    shards = t.shards()
    assert len(shards) == 2 and shards[0] is shards[1] and shards[-1] is shards[0]
    assert shards[0].dtype == np.float32 and not shards[0].flags.writeable
    assert same_bits(shards[0], numerics.quantize(x, dtype))
    assert t.shards()[0] is shards[0]  # while an unpacked array is alive, reads share it
    assert [a is shards[0] for a in shards[:1] + list(shards[1:])] == [True, True]
    assert isinstance(shards + [], list) and len(shards * 2) == 4  # noqa: RUF005 (the sequence's own +)
    # ops that pass values on unchanged keep the storage (no packing again, no copy)
    assert ttnn.reshape(t, (1, 64, 96)).stored_shards()[0].reshape(1, 1, 64, 96).shape == (1, 1, 64, 96)
    assert ttnn.to_device(ttnn.from_device(t), mesh).stored_shards()[0] is not None
    assert ttnn.get_device_tensors(t)[1].stored_shards()[0] is stored[1]
    # a shard of another dtype cannot make the tensor
    with pytest.raises(ValidationError, match="cannot make a FLOAT32 tensor"):
        ttnn.Tensor(stored[:1], ttnn.float32, ttnn.TILE_LAYOUT)


def _retained_bytes(make) -> tuple[object, int]:
    gc.collect()
    tracemalloc.start()
    try:
        result = make()
        gc.collect()
        return result, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("dtype", "per_element"), [(ttnn.bfloat16, 2.0), (ttnn.bfloat8_b, 1.0625), (ttnn.bfloat4_b, 0.5625)]
)
def test_host_bytes_per_element_are_the_devices(open_mesh, dtype, per_element):
    """A tt-metal style weight upload (as_tensor of a transposed torch weight, sharded over the mesh columns, DRAM):
    the host keeps what the devices hold, measured with tracemalloc (numpy reports its buffers to it)."""
    import torch

    mesh = open_mesh((1, 2))
    w = torch.randn(1024, 2048) * 0.02  # an nn.Linear weight [out, in]
    elements = w.numel()

    def make():
        return ttnn.as_tensor(
            w.T.contiguous(),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, -1), mesh_shape=(1, 2)),
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
        )

    t, held = _retained_bytes(make)
    assert t.shape == (2048, 512)
    assert elements * per_element <= held < elements * per_element * 1.02 + 64 * 1024
    assert sum(d["dram_used"] for d in mesh.memory_report()) == elements * per_element


def test_in_place_updates_of_packed_tensors(open_mesh):
    """A bfloat16 KV cache and an optimizer step on a bfloat16 parameter write through the storage."""
    mesh = open_mesh((1, 1))
    cache = ttnn.from_numpy(
        np.zeros((1, 1, 64, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    x = np.random.default_rng(4).standard_normal((1, 1, 32, 32)).astype(np.float32)
    ttnn.fill_cache(cache, ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh), 0)
    got = ttnn.to_numpy(cache)
    assert same_bits(got[..., :32, :], numerics.quantize(x, ttnn.bfloat16)) and not got[..., 32:, :].any()
    assert storage.is_storage(cache.stored_shards()[0])
    p = ttnn.from_numpy(
        np.ones((32, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    g = ttnn.from_numpy(
        np.full((32, 32), 0.5, np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    ttnn.sgd_step_(p, g, lr=0.25)
    assert np.array_equal(ttnn.to_numpy(p), np.full((32, 32), 0.875, np.float32))
    assert storage.is_storage(p.stored_shards()[0])


@pytest.mark.parametrize("dtype", PACKED, ids=lambda d: d.name)
def test_unpacked_weights_skip_the_fidelity_copy(open_mesh, dtype):
    mesh = open_mesh((1, 1))
    w = np.random.default_rng(8).standard_normal((64, 64)).astype(np.float32)
    shard = ttnn.from_numpy(w, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh).shards()[0]
    bound = storage.unpack_bits_bound(dtype)
    for keep in (2, 4, 6, 7, 10):
        out = numerics.truncate_mantissa(shard, keep)
        keep_mask = np.uint32((0xFFFFFFFF << (23 - keep)) & 0xFFFFFFFF)
        assert np.array_equal(bits(out), bits(shard) & keep_mask)
        if keep >= bound:
            assert out is shard
        # a slice of the unpacked weight (a K block of a matmul) is known the same way
        part = shard[:32]
        skipped = keep >= bound or numerics.explicit_bits_used(part) <= keep
        assert (numerics.truncate_mantissa(part, keep) is part) == skipped


def test_block_float_storage_needs_uint8_arrays():
    with pytest.raises(ValueError, match="must be uint8, got float32 and uint8"):
        storage.BlockFloatStorage(
            ttnn.bfloat8_b, (1, 32), np.zeros((1, 2), np.float32), np.zeros((1, 32), np.uint8)
        )


@pytest.mark.parametrize("dtype", PACKED, ids=lambda d: d.name)
def test_tensor_files_keep_the_storage(tmp_path, dtype):
    x = np.random.default_rng(6).standard_normal((2, 40)).astype(np.float32)
    t = ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT)
    ttnn.dump_tensor(tmp_path / "t.bin", t)
    back = ttnn.load_tensor(tmp_path / "t.bin")
    assert storage.is_storage(back.stored_shards()[0])
    assert same_bits(ttnn.to_numpy(back), numerics.quantize(x, dtype))
    assert same_bits(ttnn.to_numpy(t.detach()), numerics.quantize(x, dtype))


# --- the unpack kernels (C++ and numpy twins) ---------------------------------------------------------------------

MASKS = [0xFFFFFFFF, (0xFFFFFFFF << 19) & 0xFFFFFFFF, (0xFFFFFFFF << 17) & 0xFFFFFFFF]


@pytest.mark.parametrize("keep", MASKS)
def test_unpack_kernels_agree_on_every_code_and_exponent(keep):
    """Every exponent byte with every sign|magnitude byte (and every pair of 4-bit codes), both backends, the
    fidelity mask applied: the same bits, and the bits of unpacking then masking."""
    # every exponent a packed block can have (255 would be inf/NaN, never stored) in 16 blocks of a row, with every
    # byte in every row
    exps = np.arange(255, dtype=np.uint8).reshape(255, 1).repeat(16, axis=1)
    codes = np.tile(np.arange(256, dtype=np.uint8), (255, 1))
    results = {}
    for backend in _kernels.BACKENDS:
        with _kernels.use_backend(backend):
            for nibbles, m, width in ((False, 7, 256), (True, 3, 512)):
                e = exps if not nibbles else np.repeat(exps, 2, axis=1)
                got = _kernels.bfp_unpack_codes(e, codes, m, nibbles, keep)
                assert got.shape == (255, width)
                results[(backend, nibbles)] = got
            bits16 = np.arange(1 << 16, dtype=np.uint16).reshape(256, 256)
            results[(backend, "bf16")] = _kernels.bf16_unpack(bits16, keep)
    for key in [False, True, "bf16"]:
        assert np.array_equal(bits(results[("native", key)]), bits(results[("reference", key)])), key
    plain = _kernels.reference.bfp_unpack(exps, codes, 7)
    assert np.array_equal(bits(results[("native", False)]), bits(plain) & np.uint32(keep))
    f32 = (np.arange(1 << 16, dtype=np.uint32) << 16).reshape(256, 256)
    assert np.array_equal(bits(results[("native", "bf16")]), f32 & np.uint32(keep))


@pytest.mark.parametrize("backend", _kernels.BACKENDS)
def test_unpack_kernels_write_into_out(backend):
    with _kernels.use_backend(backend):
        s = storage.pack(np.linspace(-3, 3, 4 * 64, dtype=np.float32).reshape(4, 64), ttnn.bfloat4_b)
        out = np.full((2, 64), np.nan, np.float32)
        assert s.unpack_rows_into(1, 3, out) is out
        assert same_bits(out, s.to_float32()[1:3])
        b = storage.pack(np.linspace(-3, 3, 4 * 64, dtype=np.float32).reshape(2, 2, 64), ttnn.bfloat16)
        assert same_bits(b.unpack_rows_into(1, 3, out), b.to_float32().reshape(4, 64)[1:3])
        raw = _kernels.bfp_unpack(s.exponents, s.sign_magnitude(), 3, out=np.empty((4, 64), np.float32))
        assert same_bits(raw, s.to_float32())


def test_native_unpack_kernels_refuse_bad_arrays():
    native = _kernels._native
    e, c = np.zeros((2, 2), np.uint8), np.zeros((2, 32), np.uint8)
    out = np.empty((2, 32), np.float32)
    with pytest.raises(ValueError, match="mantissa_bits must be 7"):
        native.bfp_unpack_codes(e, c, 5, False, 0xFFFFFFFF, out)
    with pytest.raises(ValueError, match="mantissa_bits must be 3 with nibbles=True"):
        native.bfp_unpack_codes(e, c, 7, True, 0xFFFFFFFF, out)
    with pytest.raises(ValueError, match="cols a multiple of 16"):
        native.bfp_unpack_codes(e, c, 7, False, 0xFFFFFFFF, np.empty((2, 30), np.float32))
    with pytest.raises(ValueError, match=r"exponents has the wrong shape: expected \(2, 2\), got \(2, 3\)"):
        native.bfp_unpack_codes(np.zeros((2, 3), np.uint8), c, 7, False, 0xFFFFFFFF, out)
    with pytest.raises(ValueError, match=r"codes has the wrong shape: expected \(2, 16\), got \(2, 32\)"):
        native.bfp_unpack_codes(e, c, 3, True, 0xFFFFFFFF, out)
    with pytest.raises(ValueError, match="dst must not overlap codes"):
        native.bfp_unpack_codes(
            e, out.view(np.uint8).reshape(-1)[:64].reshape(2, 32), 7, False, 0xFFFFFFFF, out
        )
    with pytest.raises(ValueError, match="dst must have the shape of src"):
        native.bf16_unpack(np.zeros((2, 3), np.uint16), 0xFFFFFFFF, np.empty((3, 2), np.float32))
    with pytest.raises(ValueError, match="dst must have the shape of src"):
        native.bf16_unpack(np.zeros((2, 3), np.uint16), 0xFFFFFFFF, np.empty((2, 4), np.float32))
    buf = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="dst must not overlap src"):
        native.bf16_unpack(buf.view(np.uint16)[:8], 0xFFFFFFFF, buf)
    with pytest.raises(ValueError, match="mantissa_bits must be 3 with nibbles=True"):
        _kernels.reference.bfp_unpack_codes(e, c, 7, True)
    assert (
        native.bfp_unpack_codes(
            np.zeros((2, 0), np.uint8), np.zeros((2, 0), np.uint8), 7, False, 1, np.empty((2, 0), np.float32)
        )
        is None
    )


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b], ids=lambda d: d.name)
def test_embedding_unpacks_only_the_looked_up_rows(open_mesh, monkeypatch, dtype):
    """A tt-metal style embedding (table [vocab, dim] split by columns over the mesh, token ids replicated)."""
    import torch

    mesh = open_mesh((1, 2))
    table = np.random.default_rng(12).standard_normal((1000, 128)).astype(np.float32)
    weight = ttnn.as_tensor(
        torch.from_numpy(table),
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT if dtype.is_block_float else ttnn.ROW_MAJOR_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, -1), mesh_shape=(1, 2)),
    )
    tokens = np.array([[3, 999, 0, 3, 512]], dtype=np.int32)
    ids = ttnn.from_numpy(tokens, dtype=ttnn.uint32, device=mesh)
    for cls in (storage.Bf16Storage, storage.BlockFloatStorage):
        monkeypatch.setattr(cls, "to_float32", lambda self: pytest.fail("the whole table was unpacked"))
    out = ttnn.embedding(ids, weight, layout=ttnn.TILE_LAYOUT)
    monkeypatch.undo()
    got = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=-1))
    want = numerics.quantize(table.reshape(1000, 2, 64), dtype).reshape(1000, 128)[tokens]
    assert same_bits(got, numerics.quantize(want, ttnn.bfloat16))


def test_storage_odds_and_ends():
    b = storage.pack(np.ones((2, 32), np.float32), ttnn.bfloat16)
    f = storage.pack(np.ones((2, 32), np.float32), ttnn.bfloat4_b)
    assert repr(b) == "Bf16Storage(shape=[2, 32])" and b.nbytes == 128
    assert repr(f) == "BlockFloatStorage(BFLOAT4_B, shape=[2, 32])" and f.reshape((1, 2, 32)).shape == (
        1,
        2,
        32,
    )
    # writes numpy would refuse are refused the same way
    g = f.copy()
    with pytest.raises(IndexError):
        g[..., ...] = 1.0
    with pytest.raises(IndexError):
        g[0, ..., 1, 2] = 1.0
    r = storage.pack(np.float32(2.5), ttnn.bfloat8_b).copy()
    r[...] = 3.0  # a rank-0 shard: rewritten whole
    assert r.to_float32() == np.float32(3.0)
    # a write makes earlier unpacked arrays stop standing for the storage
    g = f.copy()
    before = storage.unpacked(g)
    assert storage.source_of(before) is g and storage.unpacked(g) is before
    g[0] = 4.0
    assert storage.source_of(before) is None and storage.unpacked(g) is not before
    assert storage.source_of([1.0]) is None
    assert storage.source_of(storage.unpacked(g).T, whole=True) is None  # not the values in order
    assert storage.source_of(storage.unpacked(g).T) is g  # but still from it (same bits bound)
    for backend in _kernels.BACKENDS:  # an unpacked array owns its data: its views name it as their base
        with _kernels.use_backend(backend):
            for s in (g, b, storage.pack(np.ones((2, 40), np.float32), ttnn.bfloat8_b)):
                assert storage.unpacked(s).flags.owndata


def test_writes_through_a_per_device_view_reach_the_owner(open_mesh):
    mesh = open_mesh((1, 2))
    cache = ttnn.from_numpy(
        np.zeros((1, 2, 64, 32), np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 1), mesh_shape=(1, 2)),
    )
    view = ttnn.get_device_tensors(cache)[1]
    x = np.random.default_rng(13).standard_normal((1, 1, 32, 32)).astype(np.float32)
    ttnn.fill_cache(
        view, ttnn.from_numpy(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=view.device()), 0
    )
    got = ttnn.to_numpy(cache, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1))
    assert same_bits(got[:, 1:, :32], numerics.quantize(x, ttnn.bfloat8_b)) and not got[:, :1].any()
    assert cache.stored_shards()[1] is view.stored_shards()[0]


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b], ids=lambda d: d.name)
def test_decode_attention_reads_only_the_live_cache_rows(open_mesh, monkeypatch, dtype):
    """Decode attention over a stored KV cache (contiguous and paged, a tt-metal style page table) unpacks only the
    positions a user attends to, with the bits of reading the whole cache unpacked (the old read path)."""
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(31)
    users, nh, nkv, seq, d, block = 3, 8, 2, 128, 64, 32
    k = numerics.quantize(rng.standard_normal((users, nkv, seq, d)).astype(np.float32), dtype)
    v = numerics.quantize(rng.standard_normal((users, nkv, seq, d)).astype(np.float32), dtype)
    q = rng.standard_normal((1, users, nh, d)).astype(np.float32)
    tq = ttnn.from_numpy(q, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    pos = ttnn.from_numpy(np.array([5, 127, 40], np.int32), dtype=ttnn.int32, device=mesh)
    perm = rng.permutation(users * seq // block).reshape(users, -1).astype(np.int32)
    pt = ttnn.from_numpy(perm, dtype=ttnn.int32, device=mesh)
    paged_k, paged_v = (np.zeros((users * seq // block, nkv, block, d), np.float32) for _ in range(2))
    for u in range(users):
        for vb in range(seq // block):
            paged_k[perm[u, vb]] = k[u, :, vb * block : (vb + 1) * block]
            paged_v[perm[u, vb]] = v[u, :, vb * block : (vb + 1) * block]

    def run(contiguous, old_read_path):
        kk, vv = (k, v) if contiguous else (paged_k, paged_v)
        tk, tv = (ttnn.from_numpy(a, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh) for a in (kk, vv))
        unpacked = []
        for cls in (storage.Bf16Storage, storage.BlockFloatStorage):
            real = cls.to_float32

            def spy(self, real=real):
                unpacked.append(self.shape)
                return real(self)

            monkeypatch.setattr(cls, "to_float32", spy)
        if old_read_path:  # every shard handed over unpacked whole, as before storage
            stored = ttnn.Tensor.stored_shards

            def whole(self, op="ttnn op", stored=stored):
                return [storage.unpacked(s) if storage.is_storage(s) else s for s in stored(self, op)]

            monkeypatch.setattr(ttnn.Tensor, "stored_shards", whole)
        if contiguous:
            out = ttnn.transformer.scaled_dot_product_attention_decode(tq, tk, tv, cur_pos_tensor=pos)
        else:
            out = ttnn.transformer.paged_scaled_dot_product_attention_decode(
                tq, tk, tv, page_table_tensor=pt, cur_pos_tensor=pos
            )
        monkeypatch.undo()
        assert (kk.shape in unpacked) == old_read_path  # the new path reads the caches row by row
        return ttnn.to_numpy(out)

    for contiguous in (True, False):
        assert same_bits(run(contiguous, False), run(contiguous, True))


def test_store_packs_anything_array_like_and_reuses_only_its_own_dtype():
    s = numerics.store([[1.0, -2.5]], ttnn.bfloat16)
    assert storage.is_storage(s) and same_bits(s.to_float32(), np.float32([[1.0, -2.5]]))
    values = storage.unpacked(s)
    assert numerics.store(values, ttnn.bfloat16) is s  # the same storage, not packed again
    assert np.shares_memory(
        numerics.store(values.reshape(2, 1), ttnn.bfloat16).bits, s.bits
    )  # a reshape shares it
    other = numerics.store(values, ttnn.bfloat8_b)
    assert isinstance(other, storage.BlockFloatStorage) and same_bits(other.to_float32(), values)
    assert numerics.store(values, ttnn.float32).dtype == np.float32
