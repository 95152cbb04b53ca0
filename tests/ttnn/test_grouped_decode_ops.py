"""Grouped-query decode attention's ops, as tt-metal's Falcon-40B T3000 decode calls them:
``ttnn.experimental.group_attn_matmul`` (query × keys and scores × values, per user, a KV head shared by a group of
query heads), ``ttnn.scale_mask_softmax_in_place`` and the softmax program configs.

References: torch in float32 on the values the device tensors hold. The products are compared exactly with the
emulator's own ``ttnn.matmul`` on the same rows (the same numerics rule, docs/numerics.md §3), and with torch to a
float32 tolerance once the fidelity truncation is applied to torch's operands too.
"""

from __future__ import annotations

import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn import ValidationError
from tttv2.ttnn.numerics import truncate_mantissa

TILE = ttnn.TILE_LAYOUT
GAM = ttnn.experimental.group_attn_matmul
EXACT = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)


def dev(t, mesh, dtype=ttnn.bfloat16, layout=TILE, mc=None, dim=None):
    mapper = None if dim is None else ttnn.ShardTensorToMesh(mesh, dim=dim)
    return ttnn.from_torch(t, dtype=dtype, layout=layout, device=mesh, memory_config=mc, mesh_mapper=mapper)


def host(t):
    return ttnn.to_torch(t).float()


def first_cores(n, row_wise=True):
    return ttnn.num_cores_to_corerangeset(n, ttnn.CoreCoord(8, 8), row_wise)


def height(n_cores, shard, orientation=ttnn.ShardOrientation.ROW_MAJOR):
    spec = ttnn.ShardSpec(first_cores(n_cores), shard, orientation)
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)


def grouped_reference(q, k, group):
    """torch: user u's query heads times that user's KV head, each KV head serving ``group`` query heads."""
    return torch.matmul(q.transpose(0, 2), k.repeat_interleave(group, dim=1)).transpose(0, 2)


# --- group_attn_matmul --------------------------------------------------------------------------------------


@pytest.mark.parametrize("q_heads, kv_heads", [(16, 1), (8, 2), (32, 4)])
def test_group_attn_matmul_is_the_grouped_product(open_mesh, q_heads, kv_heads):
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(q_heads)
    q = dev(torch.randn(1, q_heads, 32, 64, generator=g), mesh)
    k = dev(torch.randn(32, kv_heads, 64, 96, generator=g), mesh)
    out = GAM(q, k, compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), compute_kernel_config=EXACT)
    assert list(out.shape) == [1, q_heads, 32, 96]
    assert out.dtype is ttnn.bfloat16 and out.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    want = grouped_reference(host(q), host(k), q_heads // kv_heads)
    torch.testing.assert_close(host(out), want.bfloat16().float(), rtol=2**-7, atol=1e-5)


def test_group_attn_matmul_rows_equal_the_emulators_matmul_bit_for_bit(open_mesh):
    """Each (user, KV head) product is the matmul rule on the group's query rows: the same bits as ttnn.matmul."""
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(1)
    q = dev(torch.randn(1, 8, 32, 64, generator=g), mesh)
    k = dev(torch.randn(32, 2, 64, 64, generator=g), mesh)
    out = host(
        GAM(q, k, compute_with_storage_grid_size=(8, 8), dtype=ttnn.float32, compute_kernel_config=EXACT)
    )
    qh, kh = host(q), host(k)
    for user, head in ((0, 0), (5, 1), (31, 1)):
        rows = dev(qh[0, head * 4 : head * 4 + 4, user, :].reshape(1, 1, 4, 64), mesh)
        weight = dev(kh[user, head].reshape(1, 1, 64, 64), mesh)
        alone = host(ttnn.matmul(rows, weight, dtype=ttnn.float32, compute_kernel_config=EXACT))
        assert torch.equal(alone.reshape(4, 64), out[0, head * 4 : head * 4 + 4, user, :])


def test_group_attn_matmul_default_fidelity_is_lofi(open_mesh):
    """Without compute_kernel_config: ttnn's default, LoFi (6 and 4 explicit mantissa bits) with bf16 dest."""
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(2)
    q = dev(torch.randn(1, 16, 32, 64, generator=g), mesh)
    k = dev(torch.randn(32, 1, 64, 32, generator=g), mesh)
    out = host(GAM(q, k, compute_with_storage_grid_size=ttnn.CoreCoord(8, 4), dtype=ttnn.float32))
    qt = torch.from_numpy(truncate_mantissa(host(q).numpy(), 6).copy()).double()
    kt = torch.from_numpy(truncate_mantissa(host(k).numpy(), 4).copy()).double()
    want = grouped_reference(qt, kt, 16).float()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    full = grouped_reference(host(q), host(k), 16)
    assert float((out - full).abs().max()) > 1e-3  # the truncation is visible against full precision


def test_group_attn_matmul_on_a_mesh_keeps_each_devices_heads(open_mesh):
    mesh = open_mesh((1, 2))
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 32, 32, 64, generator=g)
    k = torch.randn(32, 4, 64, 64, generator=g)
    tq, tk = dev(q, mesh, dim=1), dev(k, mesh, dim=1)
    out = GAM(tq, tk, compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), compute_kernel_config=EXACT)
    got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1)).float()
    qs = ttnn.to_torch(tq, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1)).float()
    ks = ttnn.to_torch(tk, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1)).float()
    want = torch.cat(
        [grouped_reference(qs[:, :16], ks[:, :2], 8), grouped_reference(qs[:, 16:], ks[:, 2:], 8)], 1
    )
    torch.testing.assert_close(got, want.bfloat16().float(), rtol=2**-7, atol=1e-5)


def test_group_attn_matmul_sharded_output_gets_one_shard_per_query_head(open_mesh):
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(4)
    q = dev(torch.randn(1, 16, 32, 64, generator=g), mesh, mc=height(16, (32, 64)))
    k = dev(torch.randn(32, 1, 64, 64, generator=g), mesh)
    hs = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1)
    out = GAM(q, k, compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), memory_config=hs)
    spec = out.memory_config().shard_spec
    assert spec.grid == first_cores(16) and tuple(spec.shape) == (32, 64)
    assert spec.orientation is ttnn.ShardOrientation.ROW_MAJOR
    # the same spec, given, is accepted; the values do not depend on where the output lives
    again = GAM(q, k, compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), memory_config=out.memory_config())
    assert torch.equal(host(again), host(out))
    # interleaved operands and a spec-less sharded output: column by column, as ttnn's default orientation
    q2 = dev(host(q), mesh)
    col = GAM(q2, k, compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), memory_config=hs)
    assert col.memory_config().shard_spec.grid == first_cores(16, row_wise=False)


def test_group_attn_matmul_takes_a_user_sharded_b(open_mesh):
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(5)
    q = dev(torch.randn(1, 16, 32, 64, generator=g), mesh, mc=height(16, (32, 64)))
    v = torch.randn(32, 1, 64, 64, generator=g)
    vb = dev(v, mesh, mc=height(32, (64, 64)))
    out = GAM(q, vb, compute_with_storage_grid_size=ttnn.CoreCoord(8, 4), compute_kernel_config=EXACT)
    torch.testing.assert_close(
        host(out), grouped_reference(host(q), host(vb), 16).bfloat16().float(), rtol=2**-7, atol=1e-5
    )


def _bad(mesh, **over):
    g = torch.Generator().manual_seed(6)
    args = dict(
        a=dev(torch.randn(1, 16, 32, 64, generator=g), mesh),
        b=dev(torch.randn(32, 1, 64, 64, generator=g), mesh),
        grid=ttnn.CoreCoord(8, 8),
    )
    args.update(over)
    kwargs = {k: v for k, v in args.items() if k not in ("a", "b", "grid")}
    return GAM(args["a"], args["b"], compute_with_storage_grid_size=args["grid"], **kwargs)


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda m: dict(a=dev(torch.randn(2, 16, 32, 64), m)), "query length"),
        (lambda m: dict(b=dev(torch.randn(32, 3, 64, 64), m)), "multiple of kv_heads 3"),
        (
            lambda m: dict(a=dev(torch.randn(1, 16, 64, 64), m), b=dev(torch.randn(64, 1, 64, 64), m)),
            "32 users",
        ),
        (lambda m: dict(b=dev(torch.randn(16, 1, 64, 64), m)), "the users of input_tensor_a"),
        (lambda m: dict(b=dev(torch.randn(32, 1, 96, 64), m)), "K of input_tensor_a"),
        (lambda m: dict(grid=ttnn.CoreCoord(4, 4)), "at least 32 cores"),
        (lambda m: dict(grid=ttnn.CoreCoord(9, 8)), "within the device's 8x8"),
        (lambda m: dict(grid="8x8"), "a ttnn.CoreCoord"),
        (lambda m: dict(memory_config="L1"), "a ttnn.MemoryConfig"),
        (lambda m: dict(dtype="bf16"), "a ttnn.DataType"),
        (lambda m: dict(optional_output_tensor=dev(torch.zeros(1, 16, 32, 64), m)), "not emulated"),
        (lambda m: dict(a=dev(torch.randn(1, 16, 32, 64), m, layout=ttnn.ROW_MAJOR_LAYOUT)), "TILE"),
        (lambda m: dict(a=dev(torch.randn(16, 32, 64), m)), "rank"),
        (lambda m: dict(memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG), "HEIGHT_SHARDED"),
        (lambda m: dict(memory_config=height(16, (32, 32))), "shards on the first 16 cores"),
        (lambda m: dict(a=dev(torch.randn(1, 16, 32, 64), m, mc=height(8, (64, 64)))), "one per query head"),
        (
            lambda m: dict(
                a=dev(torch.randn(1, 16, 32, 64), m, mc=height(16, (32, 64))),
                b=dev(
                    torch.randn(32, 1, 64, 64), m, mc=height(32, (64, 64), ttnn.ShardOrientation.COL_MAJOR)
                ),
            ),
            "ROW_MAJOR, as every sharded operand",
        ),
        (lambda m: dict(b=dev(torch.randn(32, 1, 64, 64), m, mc=height(16, (128, 64)))), "one per user"),
        (
            lambda m: dict(a=dev(torch.randn(1, 16, 32, 64), m, mc=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)),
            "HEIGHT_SHARDED (or interleaved)",
        ),
    ],
)
def test_group_attn_matmul_refuses_what_ttnn_refuses(open_mesh, make, needle):
    mesh = open_mesh((1, 1))
    with pytest.raises(ValidationError, match=None) as err:
        _bad(mesh, **make(mesh))
    assert needle in str(err.value)
    assert "group_attn_matmul" in str(err.value)


# --- scale_mask_softmax_in_place ----------------------------------------------------------------------------


def test_softmax_with_a_causal_mask_is_softmax_of_scaled_plus_mask_in_place(open_mesh):
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, 64, 96, generator=g)
    mask = torch.triu(torch.full((1, 1, 64, 96), -1e5), diagonal=33)
    tx, tm = dev(x, mesh), dev(mask, mesh)
    before = host(tx)
    y = ttnn.scale_mask_softmax_in_place(tx, 0.125, tm, is_causal_mask=True)
    assert y is tx and list(y.shape) == [1, 4, 64, 96] and y.dtype is ttnn.bfloat16
    want = torch.softmax(before * 0.125 + host(tm), dim=-1)
    torch.testing.assert_close(host(y), want.bfloat16().float(), rtol=2**-7, atol=2**-9)
    assert tx._version == 1


def test_softmax_padding_mask_adds_its_first_row_to_every_row(open_mesh):
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 3, 32, 64, generator=g)
    pad = torch.zeros(2, 1, 1, 64)
    pad[0, ..., 40:] = -1e5
    pad[1, ..., 10:] = -1e5
    tx = dev(x, mesh)
    before = host(tx)
    ttnn.scale_mask_softmax_in_place(tx, 0.5, dev(pad, mesh))
    want = torch.softmax(before * 0.5 + pad, dim=-1)
    torch.testing.assert_close(host(tx), want.bfloat16().float(), rtol=2**-7, atol=2**-9)
    # the same mask as ttnn's ROW_MAJOR form: [B, 1, W / 32, 32]
    tx2 = dev(x, mesh)
    rm = dev(pad.reshape(2, 1, 2, 32), mesh, layout=ttnn.ROW_MAJOR_LAYOUT)
    ttnn.scale_mask_softmax_in_place(tx2, 0.5, rm)
    assert torch.equal(host(tx2), host(tx))


def test_softmax_without_mask_and_numeric_stable(open_mesh):
    mesh = open_mesh((1, 1))
    x = torch.randn(1, 1, 32, 64, generator=torch.Generator().manual_seed(9)) * 4
    fast, stable = dev(x, mesh, dtype=ttnn.float32), dev(x, mesh, dtype=ttnn.float32)
    ttnn.scale_mask_softmax_in_place(fast)
    ttnn.scale_mask_softmax_in_place(stable, numeric_stable=True)
    want = torch.softmax(x, dim=-1)
    torch.testing.assert_close(host(fast), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(host(stable), want, rtol=1e-5, atol=1e-6)
    big = dev(torch.full((1, 1, 32, 32), 100.0), mesh, dtype=ttnn.float32)
    ttnn.scale_mask_softmax_in_place(big)  # exp(100) overflows without the max subtraction, as on hardware
    assert torch.isnan(host(big)).all()


def falcon_decode_scores(mesh, kv_len, seed=10):
    """Falcon-40B's decode scores on one device: 16 query heads × 32 users × the padded KV length, one (32, kv_len)
    shard per head on an 8×2 grid, and its height-sharded mask of the same shape."""
    g = torch.Generator().manual_seed(seed)
    spec = ttnn.ShardSpec(first_cores(16), (32, kv_len), ttnn.ShardOrientation.ROW_MAJOR)
    mc = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
    scores = torch.randn(1, 16, 32, kv_len, generator=g)
    mask = torch.zeros(1, 16, 32, kv_len)
    mask[..., kv_len - 7 :] = -1e5  # the padding past the tokens seen
    return dev(scores, mesh, mc=mc), dev(mask, mesh, mc=mc)


def test_sharded_softmax_as_falcon_decode_runs_it(open_mesh):
    mesh = open_mesh((1, 1))
    scores, mask = falcon_decode_scores(mesh, 64)
    before = host(scores)
    pc = ttnn.SoftmaxShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 2), subblock_w=1, block_h=1, block_w=1
    )
    pc.block_w = 64 // 32  # Falcon sets the KV length per step
    out = ttnn.scale_mask_softmax_in_place(scores, 0.125, mask, program_config=pc, is_causal_mask=True)
    assert out is scores and out.memory_config().shard_spec.shape == (32, 64)
    want = torch.softmax(before * 0.125 + host(mask), dim=-1)
    torch.testing.assert_close(host(out), want.bfloat16().float(), rtol=2**-7, atol=2**-9)
    assert float(host(out)[..., -7:].abs().max()) == 0.0


@pytest.mark.parametrize(
    "change, needle",
    [
        (dict(block_w=1), "block_w × 32 == shape[3]"),
        (dict(compute_with_storage_grid_size=(8, 1)), "one block_h × block_w block per core"),
        (dict(block_h=2), "one block_h × block_w block per core"),
    ],
)
def test_sharded_softmax_refuses_a_config_that_does_not_fit(open_mesh, change, needle):
    mesh = open_mesh((1, 1))
    scores, mask = falcon_decode_scores(mesh, 64)
    kwargs = dict(compute_with_storage_grid_size=(8, 2), subblock_w=1, block_h=1, block_w=2)
    kwargs.update(change)
    pc = ttnn.SoftmaxShardedMultiCoreProgramConfig(**kwargs)
    with pytest.raises(ValidationError) as err:
        ttnn.scale_mask_softmax_in_place(scores, 0.125, mask, program_config=pc, is_causal_mask=True)
    assert needle in str(err.value)


def test_sharded_softmax_needs_a_sharded_input_of_its_blocks(open_mesh):
    mesh = open_mesh((1, 1))
    pc = ttnn.SoftmaxShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 2), subblock_w=1, block_h=1, block_w=2
    )
    flat = dev(torch.randn(1, 16, 32, 64), mesh)
    with pytest.raises(ValidationError, match="a sharded input"):
        ttnn.scale_mask_softmax_in_place(flat, program_config=pc)
    wide = ttnn.ShardSpec(first_cores(16), (32, 64), ttnn.ShardOrientation.ROW_MAJOR)
    width_mc = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1, wide)
    odd = dev(torch.randn(1, 1, 32, 1024), mesh, mc=width_mc)
    pc16 = ttnn.SoftmaxShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 2), subblock_w=1, block_h=1, block_w=32
    )
    with pytest.raises(ValidationError, match="one block_h × block_w block per core"):
        ttnn.scale_mask_softmax_in_place(odd, program_config=pc16)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda x, m: ttnn.scale_mask_softmax_in_place(x, 0.5), "no scale without a mask"),
        (lambda x, m: ttnn.scale_mask_softmax_in_place(x, float("inf"), m), "a finite float"),
        (lambda x, m: ttnn.scale_mask_softmax_in_place(x, True, m), "a finite float"),
        (
            lambda x, m: ttnn.scale_mask_softmax_in_place(x, program_config="sharded"),
            "SoftmaxDefaultProgramConfig",
        ),
        (lambda x, m: ttnn.scale_mask_softmax_in_place(x, is_causal_mask=1), "is_causal_mask"),
        (lambda x, m: ttnn.scale_mask_softmax_in_place(x, numeric_stable=None), "numeric_stable"),
        (
            lambda x, m: ttnn.scale_mask_softmax_in_place(x, compute_kernel_config="HiFi4"),
            "compute_kernel_config",
        ),
        (lambda x, m: ttnn.scale_mask_softmax_in_place(x, 1.0, "mask"), "a ttnn.Tensor"),
    ],
)
def test_scale_mask_softmax_refuses_bad_arguments(open_mesh, call, needle):
    mesh = open_mesh((1, 1))
    x, m = dev(torch.randn(1, 2, 32, 64), mesh), dev(torch.zeros(1, 1, 32, 64), mesh)
    with pytest.raises(ValidationError) as err:
        call(x, m)
    assert needle in str(err.value) and "scale_mask_softmax_in_place" in str(err.value)


@pytest.mark.parametrize(
    "mask, causal, needle",
    [
        (lambda m: dev(torch.zeros(2, 2, 32, 64), m), False, "1 in dim 1"),
        (lambda m: dev(torch.zeros(2, 1, 32, 96), m), False, "mask width"),
        (lambda m: dev(torch.zeros(3, 1, 32, 64), m), False, "1 or the input's batch"),
        (lambda m: dev(torch.zeros(1, 1, 32, 64), m), True, "the input's batch 2"),
        (
            lambda m: dev(torch.zeros(2, 1, 1, 64), m, layout=ttnn.ROW_MAJOR_LAYOUT),
            False,
            "ROW_MAJOR padding",
        ),
        (lambda m: dev(torch.zeros(2, 1, 2, 32), m, layout=ttnn.ROW_MAJOR_LAYOUT), True, "not causal"),
        (lambda m: dev(torch.zeros(2, 1, 32, 64), m, mc=height(2, (32, 64))), True, "for a sharded mask"),
        (lambda m: dev(torch.zeros(2, 1, 64), m), False, "mask rank"),
        (
            lambda m: dev(torch.zeros(2, 1, 32, 64), m, dtype=ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT),
            False,
            "dtype",
        ),
    ],
)
def test_scale_mask_softmax_checks_the_mask_as_ttnn(open_mesh, mask, causal, needle):
    mesh = open_mesh((1, 1))
    x = dev(torch.randn(2, 2, 64, 64), mesh)
    with pytest.raises(ValidationError) as err:
        ttnn.scale_mask_softmax_in_place(x, 1.0, mask(mesh), is_causal_mask=causal)
    assert needle in str(err.value)


def test_causal_mask_of_another_height_is_refused(open_mesh):
    mesh = open_mesh((1, 1))
    x = dev(torch.randn(1, 2, 64, 64), mesh)
    with pytest.raises(ValidationError, match="padded height 64"):
        ttnn.scale_mask_softmax_in_place(x, 1.0, dev(torch.zeros(1, 1, 32, 64), mesh), is_causal_mask=True)


def test_sharded_mask_added_element_for_element(open_mesh):
    mesh = open_mesh((1, 1))
    mc = height(2, (32, 64))
    x = torch.randn(1, 2, 32, 64, generator=torch.Generator().manual_seed(11))
    mask = torch.zeros(1, 2, 32, 64)
    mask[0, 1, 5:, 9:] = -1e5
    tx = dev(x, mesh, mc=mc)
    before = host(tx)
    ttnn.scale_mask_softmax_in_place(tx, 1.0, dev(mask, mesh, mc=mc))  # sharded: whole, even when not causal
    torch.testing.assert_close(
        host(tx), torch.softmax(before + mask, -1).bfloat16().float(), rtol=2**-7, atol=2**-9
    )


# --- the program configs ------------------------------------------------------------------------------------


def test_sharded_softmax_config_fields_are_checked_when_set():
    pc = ttnn.SoftmaxShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=ttnn.CoreCoord(8, 2), subblock_w=2, block_h=1, block_w=4
    )
    pc.block_w = 6
    assert pc == ttnn.SoftmaxShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 2), subblock_w=2, block_h=1, block_w=6
    )
    with pytest.raises(ValidationError, match="subblock_w 2 must divide block_w 5"):
        pc.block_w = 5
    assert pc.block_w == 6  # a refused assignment leaves the config as it was
    with pytest.raises(ValidationError, match="block_h must be a positive int"):
        pc.block_h = 0
    pc.compute_with_storage_grid_size = (4, 4)
    assert pc.compute_with_storage_grid_size == ttnn.CoreCoord(4, 4)
    with pytest.raises(AttributeError, match="no field 'blockw'"):
        pc.blockw = 2
    with pytest.raises(TypeError):
        hash(pc)
    with pytest.raises(ValidationError, match="compute_with_storage_grid_size"):
        ttnn.SoftmaxShardedMultiCoreProgramConfig(
            compute_with_storage_grid_size="8x2", subblock_w=1, block_h=1, block_w=1
        )
    assert "block_w=6" in repr(pc)
    assert ttnn.SoftmaxDefaultProgramConfig() == ttnn.SoftmaxDefaultProgramConfig()


def test_a_chip_of_the_mesh_gives_its_worker_grid(open_mesh):
    """Falcon-40B's decode passes ``mesh.get_devices()[0].compute_with_storage_grid_size()`` to group_attn_matmul."""
    mesh = open_mesh((1, 2))
    assert mesh.get_devices()[1].compute_with_storage_grid_size() == ttnn.CoreCoord(8, 8)
    galaxy = open_mesh((8, 4), dispatch_core_config=ttnn.DispatchCoreConfig(axis=ttnn.DispatchCoreAxis.COL))
    assert galaxy.get_devices()[0].compute_with_storage_grid_size() == galaxy.compute_with_storage_grid_size()
    assert galaxy.get_devices()[0].compute_with_storage_grid_size() == ttnn.CoreCoord(7, 10)


def test_transposed_keys_keep_their_per_user_shard_grid(open_mesh):
    """Falcon-40B's decode: keys ``[32 users, 1, T, 64]`` with one (T, 64) shard per user, transposed into a
    HEIGHT_SHARDED config without a spec, keep the 32-core grid: one (64, T) shard per user, as ttnn derives it
    from the input's shard. A spec-less config of another layout, or an interleaved input, is placed as before."""
    mesh = open_mesh((1, 1))
    keys = dev(torch.randn(32, 1, 96, 64), mesh, mc=height(32, (96, 64)))
    hs = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1)
    kt = ttnn.transpose(keys, -2, -1, memory_config=hs)
    assert kt.memory_config().shard_spec.grid == first_cores(32) and tuple(
        kt.memory_config().shard_spec.shape
    ) == (64, 96)
    assert torch.equal(host(kt), host(keys).transpose(-2, -1))
    flat = ttnn.transpose(dev(host(keys), mesh), -2, -1, memory_config=hs)
    assert flat.memory_config().shard_spec.num_cores() == 64  # no input grid to follow: the device's cores
    ws = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.BufferType.L1)
    wide = ttnn.transpose(keys, -2, -1, memory_config=ws)
    assert wide.memory_config().memory_layout is ttnn.TensorMemoryLayout.WIDTH_SHARDED
    given = ttnn.transpose(keys, -2, -1, memory_config=height(32, (64, 96)))
    assert given.memory_config() == kt.memory_config()


# --- the prefill MLP's slices: interleaved_to_sharded_partial / sharded_to_interleaved_partial ----------------


def test_partial_slices_round_trip_into_a_persistent_output(open_mesh):
    """Falcon-40B's prefill MLP: 128 rows in 2 slices of 64, each moved into 32 width shards of (64, 64) on an 8×4
    grid, then written back into its rows of one persistent DRAM tensor."""
    mesh = open_mesh((1, 2))
    x = torch.randn(1, 1, 128, 2048, generator=torch.Generator().manual_seed(12))
    tx = dev(x, mesh)
    out = dev(torch.zeros(1, 1, 128, 2048), mesh)
    for index in range(2):
        part = ttnn.interleaved_to_sharded_partial(
            tx,
            (8, 4),
            [64, 64],
            2,
            index,
            ttnn.TensorMemoryLayout.WIDTH_SHARDED,
            ttnn.ShardOrientation.ROW_MAJOR,
        )
        assert list(part.shape) == [1, 1, 64, 2048]
        spec = part.memory_config().shard_spec
        assert spec.num_cores() == 32 and tuple(spec.shape) == (64, 64)
        assert part.memory_config().buffer_type is ttnn.BufferType.L1
        assert torch.equal(host(part), host(tx)[:, :, 64 * index : 64 * (index + 1)])
        back = ttnn.sharded_to_interleaved_partial(part, out, 2, index, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        assert back is out
    assert torch.equal(host(out), host(tx))
    height = ttnn.interleaved_to_sharded_partial(
        tx,
        ttnn.CoreCoord(8, 8),
        [32, 2048],
        4,
        3,
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.ShardOrientation.COL_MAJOR,
    )
    assert height.memory_config().shard_spec.grid == first_cores(1, row_wise=False)
    block = ttnn.interleaved_to_sharded_partial(
        tx,
        (8, 2),
        [32, 256],
        2,
        1,
        ttnn.TensorMemoryLayout.BLOCK_SHARDED,
        ttnn.ShardOrientation.ROW_MAJOR,
        output_dtype=ttnn.bfloat8_b,
    )
    assert block.dtype is ttnn.bfloat8_b and block.memory_config().shard_spec.num_cores() == 16


@pytest.mark.parametrize(
    "call, needle",
    [
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 3, 0, *p),
            "a divisor of",
        ),
        (lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 2, *p), "in [0, 2)"),
        (lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 0, 0, *p), "at least 1"),
        (lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2.0, 0, *p), "an int"),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (9, 4), [64, 64], 2, 0, *p),
            "within the device",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, first_cores(4), [64, 64], 2, 0, *p),
            "CoreRangeSet",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, "8x4", [64, 64], 2, 0, *p),
            "a ttnn.CoreCoord",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64], 2, 0, *p),
            "(height, width)",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (2, 2), [64, 64], 2, 0, *p),
            "shards fitting",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 0, "WIDTH", p[1]),
            "shard_scheme",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 0, p[0], "ROW"),
            "shard_orientation",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(
                x, (8, 4), [64, 64], 2, 0, *p, output_dtype="bf8"
            ),
            "output_dtype",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(
                ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 0, *p), (8, 4), [64, 64], 1, 0, *p
            ),
            "an interleaved tensor",
        ),
        (
            lambda m, x, o, p: ttnn.interleaved_to_sharded_partial(
                dev(torch.zeros(1, 1, 20, 64), m), (8, 4), [32, 64], 1, 0, *p
            ),
            "fill their tiles",
        ),
        (lambda m, x, o, p: ttnn.sharded_to_interleaved_partial(x, o, 2, 0), "a sharded tensor"),
        (
            lambda m, x, o, p: ttnn.sharded_to_interleaved_partial(
                ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 0, *p), o, 4, 0
            ),
            "one slice of the cache",
        ),
        (
            lambda m, x, o, p: ttnn.sharded_to_interleaved_partial(
                ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 0, *p),
                o,
                2,
                0,
                output_dtype=ttnn.float32,
            ),
            "None or the cache's BFLOAT16",
        ),
        (
            lambda m, x, o, p: ttnn.sharded_to_interleaved_partial(
                ttnn.interleaved_to_sharded_partial(x, (8, 4), [64, 64], 2, 0, *p),
                o,
                2,
                0,
                memory_config="DRAM",
            ),
            "memory_config",
        ),
    ],
)
def test_partial_slices_refuse_what_ttnn_refuses(open_mesh, call, needle):
    mesh = open_mesh((1, 1))
    x, o = dev(torch.randn(1, 1, 128, 2048), mesh), dev(torch.zeros(1, 1, 128, 2048), mesh)
    plan = (ttnn.TensorMemoryLayout.WIDTH_SHARDED, ttnn.ShardOrientation.ROW_MAJOR)
    with pytest.raises(ValidationError) as err:
        call(mesh, x, o, plan)
    assert needle in str(err.value)


def test_aggregate_as_tensor_is_combine_device_tensors(open_mesh):
    mesh = open_mesh((1, 2))
    t = dev(torch.randn(1, 1, 32, 64), mesh, dim=3)
    parts = ttnn.get_device_tensors(t)
    again = ttnn.aggregate_as_tensor(parts)
    assert torch.equal(
        ttnn.to_torch(again, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3)),
        ttnn.to_torch(ttnn.combine_device_tensors(parts), mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3)),
    )
    assert again.tensor_topology() == ttnn.combine_device_tensors(parts).tensor_topology()


# --- bcast: Falcon-40B's prefill layer norm applies gamma and beta with it ----------------------------------


@pytest.mark.parametrize(
    "dim, b_shape, pick",
    [
        (ttnn.BcastOpDim.H, (1, 1, 32, 96), lambda b: b[..., :1, :]),
        (ttnn.BcastOpDim.W, (1, 1, 64, 32), lambda b: b[..., :, :1]),
        (ttnn.BcastOpDim.HW, (1, 1, 32, 32), lambda b: b[..., :1, :1]),
    ],
)
@pytest.mark.parametrize("math_op", [ttnn.BcastOpMath.ADD, ttnn.BcastOpMath.SUB, ttnn.BcastOpMath.MUL])
def test_bcast_uses_the_first_row_column_or_value_of_each_tile(open_mesh, dim, b_shape, pick, math_op):
    mesh = open_mesh((1, 1))
    g = torch.Generator().manual_seed(13)
    a, b = dev(torch.randn(2, 1, 64, 96, generator=g), mesh), dev(torch.randn(*b_shape, generator=g), mesh)
    out = ttnn.bcast(a, b, math_op=math_op, dim=dim)
    op = {ttnn.BcastOpMath.ADD: torch.add, ttnn.BcastOpMath.SUB: torch.sub, ttnn.BcastOpMath.MUL: torch.mul}[
        math_op
    ]
    want = op(host(a), pick(host(b)))
    assert list(out.shape) == [2, 1, 64, 96] and out.dtype is ttnn.bfloat16
    torch.testing.assert_close(host(out), want.bfloat16().float(), rtol=0, atol=0)


def test_bcast_of_a_sharded_input_keeps_its_shards_and_takes_per_batch_rows(open_mesh):
    mesh = open_mesh((1, 1))
    spec = ttnn.ShardSpec(first_cores(8), (32, 64), ttnn.ShardOrientation.ROW_MAJOR)
    block = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
    a = dev(torch.randn(2, 1, 128, 64), mesh, mc=block)
    gamma = dev(torch.randn(2, 1, 32, 64), mesh)
    hs = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1)
    out = ttnn.bcast(a, gamma, math_op=ttnn.BcastOpMath.MUL, dim=ttnn.BcastOpDim.H, memory_config=hs)
    assert out.memory_config().shard_spec == spec
    torch.testing.assert_close(
        host(out), (host(a) * host(gamma)[:, :, :1]).bfloat16().float(), rtol=0, atol=0
    )


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda a, b, m: ttnn.bcast(a, b, math_op="MUL", dim=ttnn.BcastOpDim.H), "a ttnn.BcastOpMath"),
        (lambda a, b, m: ttnn.bcast(a, b, math_op=ttnn.BcastOpMath.MUL, dim="H"), "a ttnn.BcastOpDim"),
        (
            lambda a, b, m: ttnn.bcast(a, b, ttnn.BcastOpMath.MUL, ttnn.BcastOpDim.W),
            "padded last dims [64, 32]",
        ),
        (
            lambda a, b, m: ttnn.bcast(
                a, dev(torch.zeros(1, 1, 32, 32), m), ttnn.BcastOpMath.MUL, ttnn.BcastOpDim.H
            ),
            "padded last dims [32, 96]",
        ),
        (
            lambda a, b, m: ttnn.bcast(
                a, dev(torch.zeros(3, 1, 32, 96), m), ttnn.BcastOpMath.ADD, ttnn.BcastOpDim.H
            ),
            "leading dims of 1",
        ),
        (
            lambda a, b, m: ttnn.bcast(
                a,
                b,
                ttnn.BcastOpMath.ADD,
                ttnn.BcastOpDim.H,
                memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
            ),
            "interleaved for an interleaved one",
        ),
        (
            lambda a, b, m: ttnn.bcast(
                a,
                b,
                ttnn.BcastOpMath.ADD,
                ttnn.BcastOpDim.W,
                memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
            ),
            "interleaved input and output",
        ),
        (
            lambda a, b, m: ttnn.bcast(a, b, ttnn.BcastOpMath.ADD, ttnn.BcastOpDim.H, memory_config="L1"),
            "memory_config",
        ),
        (
            lambda a, b, m: ttnn.bcast(a, b, ttnn.BcastOpMath.ADD, ttnn.BcastOpDim.H, output_tensor=a),
            "not emulated",
        ),
        (
            lambda a, b, m: ttnn.bcast(
                dev(torch.zeros(1, 1, 64, 96), m, dtype=ttnn.int32),
                b,
                ttnn.BcastOpMath.ADD,
                ttnn.BcastOpDim.H,
            ),
            "a float dtype",
        ),
    ],
)
def test_bcast_refuses_what_ttnn_refuses(open_mesh, call, needle):
    mesh = open_mesh((1, 1))
    a, b = dev(torch.randn(2, 1, 64, 96), mesh), dev(torch.randn(1, 1, 32, 96), mesh)
    with pytest.raises(ValidationError) as err:
        call(a, b, mesh)
    assert needle in str(err.value) and "ttnn.bcast" in str(err.value)
