"""Attention ops against torch references: head split/merge, rotary embeddings, KV caches and SDPA.

Tolerances. Data movement (head split/merge, cache writes) must be exact: the reference is built from the
values the device tensors hold (``to_torch`` of the inputs), so quantisation cancels out. Math ops (rotary,
SDPA) are compared with a float32 torch reference on those stored input values: the only error left is the
final rounding to the output dtype, so we require PCC ≥ 0.999 and a max error of a few bfloat16 ulps
(``≤ 2⁻⁷·max|ref|``). Against the *unquantised* float inputs (bfloat8_b K/V) we require PCC ≥ 0.99.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.ttnn import ValidationError

TILE = ttnn.TILE_LAYOUT
RM = ttnn.ROW_MAJOR_LAYOUT


# --- helpers -------------------------------------------------------------------------------------------------


def dev(t, mesh, dtype=ttnn.bfloat16, layout=TILE, mc=None, dim=None):
    mapper = None if dim is None else ttnn.ShardTensorToMesh(mesh, dim=dim)
    return ttnn.from_torch(t, dtype=dtype, layout=layout, device=mesh, memory_config=mc, mesh_mapper=mapper)


def host(t, mesh, dim=None):
    composer = None if dim is None else ttnn.ConcatMeshToTensor(mesh, dim=dim)
    return ttnn.to_torch(t, mesh_composer=composer).float()


def height_mc(mesh, n_cores, shard, start=0):
    grid = mesh.compute_with_storage_grid_size()
    cores = [ttnn.CoreCoord(i % grid.x, i // grid.x) for i in range(start, start + n_cores)]
    crs = ttnn.CoreRangeSet([ttnn.CoreRange(c, c) for c in cores])
    return ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(crs, shard)
    )


def close(expected, actual, pcc=0.999):
    expected, actual = torch.as_tensor(expected).float(), torch.as_tensor(actual).float()
    assert expected.shape == actual.shape, (expected.shape, actual.shape)
    assert_pcc(expected, actual, pcc)
    scale = float(expected.abs().max()) or 1.0
    assert float((expected - actual).abs().max()) <= 2**-7 * scale + 1e-6


def ints(values, mesh, dtype=ttnn.int32, mc=None):
    return ttnn.from_torch(
        torch.tensor(values, dtype=torch.int32), dtype=dtype, layout=RM, device=mesh, memory_config=mc
    )


def rope_angles(positions, hd, base=10000.0):
    freqs = base ** (-torch.arange(0, hd, 2).float() / hd)
    return torch.as_tensor(positions).float()[:, None] * freqs[None, :]  # [P, hd/2]


def meta_cos_sin(positions, hd):
    ang = rope_angles(positions, hd)
    return ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)


def meta_rope(x, ang):
    """Reference rotary on adjacent pairs via complex multiplication; x [..., P, hd], ang [P, hd/2]."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).reshape(x.shape)


def trans_mat():
    t = torch.zeros(1, 1, 32, 32)
    t[..., torch.arange(0, 32, 2), torch.arange(1, 32, 2)] = 1
    t[..., torch.arange(1, 32, 2), torch.arange(0, 32, 2)] = -1
    return t


def sdpa_ref(q, k, v, causal=True, mask=None, scale=None, window=None, q_offset=0):
    """torch SDPA with GQA expanded; q [B, nh, Sq, D], k/v [B, nkv, Sk, D]; queries at q_offset + i."""
    nh, nkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(nh // nkv, dim=1)
    v = v.repeat_interleave(nh // nkv, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    bias = torch.zeros(sq, sk)
    qp = torch.arange(sq)[:, None] + q_offset
    kp = torch.arange(sk)[None, :]
    if causal:
        bias[kp > qp] = -math.inf
        if window:
            bias[kp <= qp - window] = -math.inf
    elif window:
        bias[(kp - qp).abs() > window // 2] = -math.inf
    if mask is not None:
        bias = bias + mask
    return torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=bias, scale=scale
    )


# --- nlp_create_qkv_heads / nlp_concat_heads ----------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_create_qkv_heads_fused(open_mesh, mesh_shape, dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    b, s, nh, nkv, hd = 2, 64, 4, 2, 32
    width = (nh + 2 * nkv) * hd
    x = dev(torch.randn(b, 1, s, width * n), mesh, dtype, dim=3)  # each device holds its own fused heads
    stored = host(x, mesh, 3).reshape(b, s, n, nh + 2 * nkv, hd)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        x, num_heads=nh, num_kv_heads=nkv, transpose_k_heads=False
    )
    assert q.shape == [b, nh, s, hd] and k.shape == [b, nkv, s, hd] and v.shape == [b, nkv, s, hd]
    assert q.dtype == dtype and q.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    ref_q = stored[:, :, :, :nh].permute(0, 2, 3, 1, 4).reshape(b, n * nh, s, hd)
    ref_k = stored[:, :, :, nh : nh + nkv].permute(0, 2, 3, 1, 4).reshape(b, n * nkv, s, hd)
    ref_v = stored[:, :, :, nh + nkv :].permute(0, 2, 3, 1, 4).reshape(b, n * nkv, s, hd)
    assert torch.equal(host(q, mesh, 1), ref_q)
    assert torch.equal(host(k, mesh, 1), ref_k)
    assert torch.equal(host(v, mesh, 1), ref_v)
    # ttnn's default transposes K to [B, nkv, hd, S]
    _, kt, _ = ttnn.experimental.nlp_create_qkv_heads(
        x, num_heads=nh, num_kv_heads=nkv, memory_config=ttnn.L1_MEMORY_CONFIG
    )
    assert kt.shape == [b, nkv, hd, s] and kt.memory_config() == ttnn.L1_MEMORY_CONFIG
    if dtype == ttnn.bfloat16:
        assert torch.equal(host(kt, mesh, 1), ref_k.transpose(-1, -2))
    else:  # a transposed tile is repacked: bfloat8_b blocks now run along the sequence
        close(ref_k.transpose(-1, -2), host(kt, mesh, 1))


def test_create_qkv_heads_separate_kv_and_concat(open_mesh):
    mesh = open_mesh((1, 1))
    b, s, nh, nkv, hd = 1, 32, 4, 1, 64
    xq = dev(torch.randn(b, 1, s, nh * hd), mesh)
    xkv = dev(torch.randn(b, 1, s, 2 * nkv * hd), mesh)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        xq, xkv, num_heads=nh, num_kv_heads=nkv, transpose_k_heads=False
    )
    sq, skv = host(xq, mesh), host(xkv, mesh)
    assert torch.equal(host(q, mesh), sq.reshape(b, s, nh, hd).transpose(1, 2))
    assert torch.equal(host(k, mesh), skv[..., : nkv * hd].reshape(b, s, nkv, hd).transpose(1, 2))
    assert torch.equal(host(v, mesh), skv[..., nkv * hd :].reshape(b, s, nkv, hd).transpose(1, 2))
    # concat_heads is the inverse of the split
    merged = ttnn.experimental.nlp_concat_heads(q, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    assert merged.shape == [b, 1, s, nh * hd]
    assert torch.equal(host(merged, mesh), sq)


def test_create_qkv_heads_sharded_grouped_layout(open_mesh):
    mesh = open_mesh((1, 1))
    nh, nkv, hd = 4, 2, 32
    group_w = (nh // nkv + 2) * hd
    crs = ttnn.num_cores_to_corerangeset(nkv, mesh.compute_with_storage_grid_size(), row_wise=True)
    mc = ttnn.create_sharded_memory_config(
        (32, group_w), crs, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    x = dev(torch.randn(1, 1, 32, nkv * group_w), mesh, mc=mc)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        x,
        num_heads=nh,
        num_kv_heads=nkv,
        transpose_k_heads=False,
        memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    )
    groups = host(x, mesh).reshape(32, nkv, nh // nkv + 2, hd)
    assert torch.equal(host(q, mesh)[0], groups[:, :, : nh // nkv].reshape(32, nh, hd).transpose(0, 1))
    assert torch.equal(host(k, mesh)[0], groups[:, :, nh // nkv].transpose(0, 1))
    assert torch.equal(host(v, mesh)[0], groups[:, :, nh // nkv + 1].transpose(0, 1))
    assert q.memory_config().shard_spec.shape == (32, hd) and q.memory_config().shard_spec.num_cores() == nh
    assert k.memory_config().shard_spec.num_cores() == nkv
    # sharded concat_heads: heads-per-shard folds into the shard width
    merged = ttnn.experimental.nlp_concat_heads(q, memory_config=ttnn.L1_BLOCK_SHARDED_MEMORY_CONFIG)
    assert torch.equal(host(merged, mesh)[0, 0], host(q, mesh)[0].transpose(0, 1).reshape(32, nh * hd))
    with pytest.raises(ValidationError, match="transpose_k_heads"):
        ttnn.experimental.nlp_create_qkv_heads(
            x, num_heads=nh, num_kv_heads=nkv, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG
        )
    with pytest.raises(ValidationError, match="memory_config"):
        ttnn.experimental.nlp_create_qkv_heads(x, num_heads=nh, num_kv_heads=nkv, transpose_k_heads=False)
    one = ttnn.create_sharded_memory_config(
        (32, 256),
        ttnn.num_cores_to_corerangeset(1, mesh.compute_with_storage_grid_size(), True),
        ttnn.ShardStrategy.WIDTH,
        use_height_and_width_as_shard_shape=True,
    )
    with pytest.raises(ValidationError, match="shard width"):
        ttnn.experimental.nlp_create_qkv_heads(
            dev(torch.randn(1, 1, 32, 256), mesh, mc=one),
            num_heads=nh,
            num_kv_heads=nkv,
            transpose_k_heads=False,
            memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
        )
    with pytest.raises(ValidationError, match="not HEIGHT_SHARDED"):
        ttnn.experimental.nlp_concat_heads(q)


def test_create_qkv_heads_sharded_separate_kv(open_mesh):
    mesh = open_mesh((1, 1))
    nh, nkv, hd = 4, 2, 32
    crs = ttnn.num_cores_to_corerangeset(nkv, mesh.compute_with_storage_grid_size(), row_wise=True)
    mcq = ttnn.create_sharded_memory_config(
        (32, 2 * hd), crs, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    xq = dev(torch.randn(1, 1, 32, nh * hd), mesh, mc=mcq)
    xkv = dev(torch.randn(1, 1, 32, 2 * nkv * hd), mesh, mc=mcq)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        xq,
        xkv,
        num_heads=nh,
        num_kv_heads=nkv,
        transpose_k_heads=False,
        memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    )
    pairs = host(xkv, mesh).reshape(32, nkv, 2, hd)
    assert torch.equal(host(q, mesh)[0], host(xq, mesh).reshape(32, nh, hd).transpose(0, 1))
    assert torch.equal(host(k, mesh)[0], pairs[:, :, 0].transpose(0, 1))
    assert torch.equal(host(v, mesh)[0], pairs[:, :, 1].transpose(0, 1))
    with pytest.raises(ValidationError, match="input_kv"):
        ttnn.experimental.nlp_create_qkv_heads(
            xq,
            dev(torch.randn(1, 1, 32, 2 * nkv * hd), mesh),
            num_heads=nh,
            num_kv_heads=nkv,
            transpose_k_heads=False,
            memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG,
        )


def test_create_qkv_heads_errors(open_mesh):
    mesh = open_mesh((1, 1))
    f = ttnn.experimental.nlp_create_qkv_heads
    x = dev(torch.randn(1, 1, 32, 256), mesh)
    with pytest.raises(ValidationError, match="rank"):
        f(dev(torch.randn(32, 256), mesh), num_heads=4)
    with pytest.raises(ValidationError, match=r"divisible by num_heads \+ 2·num_kv_heads"):
        f(x, num_heads=3, num_kv_heads=1)
    with pytest.raises(ValidationError, match="head_dim"):
        f(dev(torch.randn(1, 1, 32, 96), mesh), num_heads=4, num_kv_heads=1)
    with pytest.raises(ValidationError, match="num_heads"):
        f(x, num_heads=0)
    with pytest.raises(ValidationError, match="INTERLEAVED"):
        f(x, num_heads=4, num_kv_heads=2, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match=r"input\.shape\[1\]"):
        f(dev(torch.randn(1, 2, 32, 256), mesh), num_heads=4, num_kv_heads=2)
    with pytest.raises(ValidationError, match="kv_tied"):
        f(x, num_heads=4, num_kv_heads=2, kv_tied=True)
    with pytest.raises(ValidationError, match="output_tensors"):
        f(x, num_heads=4, num_kv_heads=2, output_tensors=[None, None, None])
    with pytest.raises(ValidationError, match="dtype"):
        f(dev(torch.randn(1, 1, 32, 256), mesh, ttnn.bfloat4_b), num_heads=4, num_kv_heads=2)
    xq = dev(torch.randn(1, 1, 32, 128), mesh)
    with pytest.raises(ValidationError, match="input_kv"):
        f(xq, dev(torch.randn(1, 1, 32, 96), mesh), num_heads=4, num_kv_heads=1)
    with pytest.raises(ValidationError, match="divisible by num_heads"):
        f(xq, dev(torch.randn(1, 1, 32, 64), mesh), num_heads=3, num_kv_heads=1)
    with pytest.raises(ValidationError, match="sequence length"):
        f(xq, dev(torch.randn(1, 1, 64, 64), mesh), num_heads=4, num_kv_heads=1)
    with pytest.raises(ValidationError, match=r"input_kv\.shape\[1\]"):
        f(xq, dev(torch.randn(1, 2, 32, 64), mesh), num_heads=4, num_kv_heads=1)
    with pytest.raises(ValidationError, match="batch"):
        f(xq, dev(torch.randn(2, 1, 32, 64), mesh), num_heads=4, num_kv_heads=1)
    c = ttnn.experimental.nlp_concat_heads
    with pytest.raises(ValidationError, match="head_dim"):
        c(dev(torch.randn(1, 2, 32, 48), mesh))
    with pytest.raises(ValidationError, match="INTERLEAVED"):
        c(dev(torch.randn(1, 2, 32, 64), mesh), memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)


# --- decode head split / merge -------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 8)])
def test_create_qkv_heads_decode(open_mesh, mesh_shape):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    users, nh, nkv, hd = 8, 4, 2, 64
    width = (nh + 2 * nkv) * hd
    x = dev(torch.randn(1, 1, users, width * n), mesh, dim=3)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, memory_config=ttnn.L1_MEMORY_CONFIG
    )
    assert q.shape == [1, users, nh, hd] and q.padded_shape == [1, users, 32, hd]
    assert k.shape == [1, users, nkv, hd]
    for t in (q, k, v):
        mc = t.memory_config()
        assert (
            mc.memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
            and mc.buffer_type == ttnn.BufferType.L1
        )
        assert mc.shard_spec.shape == (32, hd)
        assert mc.shard_spec.grid == ttnn.num_cores_to_corerangeset(
            users, mesh.compute_with_storage_grid_size(), True
        )
    stored = host(x, mesh, 3).reshape(users, n, nh + 2 * nkv, hd)
    assert torch.equal(host(q, mesh, 2)[0], stored[:, :, :nh].reshape(users, n * nh, hd))
    assert torch.equal(host(k, mesh, 2)[0], stored[:, :, nh : nh + nkv].reshape(users, n * nkv, hd))
    assert torch.equal(host(v, mesh, 2)[0], stored[:, :, nh + nkv :].reshape(users, n * nkv, hd))
    # and back: concat_heads_decode gives [1, 1, 32, nh·hd], rows past the users zero, width-sharded per head
    merged = ttnn.experimental.nlp_concat_heads_decode(q, num_heads=nh)
    assert merged.shape == [1, 1, 32, nh * hd]
    assert merged.memory_config().memory_layout == ttnn.TensorMemoryLayout.WIDTH_SHARDED
    assert merged.memory_config().shard_spec.num_cores() == nh
    got = host(merged, mesh, 3)[0, 0].reshape(32, n, nh * hd)
    assert torch.equal(got[:users], stored[:, :, :nh].reshape(users, n, nh * hd))
    assert not got[users:].any()


def test_create_qkv_heads_decode_sharded_input(open_mesh):
    mesh = open_mesh((1, 1))
    users, nh, nkv, hd = 4, 8, 1, 32
    width = (nh + 2 * nkv) * hd
    crs = ttnn.num_cores_to_corerangeset(width // 32, mesh.compute_with_storage_grid_size(), row_wise=True)
    mc = ttnn.create_sharded_memory_config(
        (32, 32), crs, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    x = dev(torch.randn(1, 1, users, width), mesh, mc=mc)
    stored = host(x, mesh)[0, 0].reshape(users, nh + 2 * nkv, hd)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, overlap_qk_coregrid=False
    )
    grid = mesh.compute_with_storage_grid_size()
    assert q.memory_config().shard_spec.grid == ttnn.num_cores_to_corerangeset(users, grid, True)
    k_cores = k.memory_config().shard_spec.grid.cores()
    assert k_cores == [ttnn.CoreCoord(x, 0) for x in range(users, 2 * users)]
    assert v.memory_config().shard_spec.grid == q.memory_config().shard_spec.grid
    assert torch.equal(host(k, mesh)[0], stored[:, nh : nh + nkv])
    # batch_offset / slice_size keep a slice of the users
    off = ints([1], mesh, ttnn.uint32)
    q2, _, _ = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, batch_offset=off, slice_size=2
    )
    assert q2.shape == [1, 2, nh, hd]
    assert torch.equal(host(q2, mesh)[0], stored[1:3, :nh])
    # a user-chosen output grid that starts mid-row
    start = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(2, 1), ttnn.CoreCoord(7, 3))])
    out_mc = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(start, (32, 32))
    )
    q3, k3, _ = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, overlap_qk_coregrid=False, memory_config=out_mc
    )
    assert q3.memory_config().shard_spec.grid.cores() == [ttnn.CoreCoord(x, 1) for x in range(2, 6)]
    assert k3.memory_config().shard_spec.grid.cores() == [
        ttnn.CoreCoord(6, 1),
        ttnn.CoreCoord(7, 1),
        ttnn.CoreCoord(2, 2),
        ttnn.CoreCoord(3, 2),
    ]
    f = ttnn.experimental.nlp_create_qkv_heads_decode
    with pytest.raises(ValidationError, match="both or neither"):
        f(x, num_heads=nh, num_kv_heads=nkv, batch_offset=off)
    with pytest.raises(ValidationError, match="within the 4 users"):
        f(x, num_heads=nh, num_kv_heads=nkv, batch_offset=ints([3], mesh, ttnn.uint32), slice_size=2)
    with pytest.raises(ValidationError, match="one-element"):
        f(x, num_heads=nh, num_kv_heads=nkv, batch_offset=ints([0, 1], mesh, ttnn.uint32), slice_size=2)
    small = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(ttnn.num_cores_to_corerangeset(6, grid, True), (32, 32)),
    )
    with pytest.raises(ValidationError, match="at least 8 cores"):
        f(x, num_heads=nh, num_kv_heads=nkv, overlap_qk_coregrid=False, memory_config=small)
    wide = ttnn.create_sharded_memory_config(
        (32, 64),
        ttnn.num_cores_to_corerangeset(5, grid, True),
        ttnn.ShardStrategy.WIDTH,
        use_height_and_width_as_shard_shape=True,
    )
    with pytest.raises(ValidationError, match="no partial heads"):
        f(
            dev(torch.randn(1, 1, users, width), mesh, mc=wide),
            num_heads=nh,
            num_kv_heads=nkv,
            overlap_qk_coregrid=False,
        )
    height = ttnn.create_sharded_memory_config(
        (32, width),
        ttnn.num_cores_to_corerangeset(1, grid, True),
        ttnn.ShardStrategy.HEIGHT,
        use_height_and_width_as_shard_shape=True,
    )
    with pytest.raises(ValidationError, match="WIDTH_SHARDED"):
        f(dev(torch.randn(1, 1, users, width), mesh, mc=height), num_heads=nh, num_kv_heads=nkv)


def test_create_qkv_heads_decode_errors(open_mesh):
    mesh = open_mesh((1, 1))
    f = ttnn.experimental.nlp_create_qkv_heads_decode
    x = dev(torch.randn(1, 1, 8, 256), mesh)
    with pytest.raises(ValidationError, match="users"):
        f(dev(torch.randn(1, 1, 64, 256), mesh), num_heads=4, num_kv_heads=2)
    with pytest.raises(ValidationError, match=r"\[1, 1, B, W\]"):
        f(dev(torch.randn(1, 2, 8, 256), mesh), num_heads=4, num_kv_heads=2)
    with pytest.raises(ValidationError, match="num_heads"):
        f(dev(torch.randn(1, 1, 8, 36 * 32), mesh), num_heads=34, num_kv_heads=1)
    with pytest.raises(ValidationError, match=">= num_kv_heads"):
        f(dev(torch.randn(1, 1, 8, 5 * 32), mesh), num_heads=1, num_kv_heads=2)
    with pytest.raises(ValidationError, match="head_dim"):
        f(dev(torch.randn(1, 1, 8, 96), mesh), num_heads=4, num_kv_heads=1)
    with pytest.raises(ValidationError, match="divisible"):
        f(x, num_heads=3, num_kv_heads=1)
    with pytest.raises(ValidationError, match="interleaved"):
        f(x, num_heads=4, num_kv_heads=2, batch_offset=ints([0], mesh), slice_size=2)
    with pytest.raises(ValidationError, match="dtype"):
        f(dev(torch.randn(1, 1, 8, 256), mesh, ttnn.bfloat8_b), num_heads=4, num_kv_heads=2)
    with pytest.raises(ValidationError, match="output_tensors"):
        f(x, num_heads=4, num_kv_heads=2, output_tensors=(x, x, x))
    q, _, _ = f(x, num_heads=4, num_kv_heads=2)
    c = ttnn.experimental.nlp_concat_heads_decode
    with pytest.raises(ValidationError, match="num_heads"):
        c(q, num_heads=8)
    with pytest.raises(ValidationError, match="HEIGHT_SHARDED"):
        c(dev(torch.randn(1, 8, 4, 64), mesh), num_heads=4)
    with pytest.raises(ValidationError, match="shard shape"):
        c(dev(torch.randn(1, 8, 4, 64), mesh, mc=height_mc(mesh, 4, (64, 64))), num_heads=4)
    with pytest.raises(ValidationError, match=r"shape\[0\]"):
        c(dev(torch.randn(2, 8, 4, 64), mesh), num_heads=4)
    with pytest.raises(ValidationError, match="users"):
        c(dev(torch.randn(1, 33, 4, 64), mesh), num_heads=4)
    with pytest.raises(ValidationError, match="one tile"):
        c(dev(torch.randn(1, 8, 40, 64), mesh), num_heads=4)
    with pytest.raises(ValidationError, match="output_tensor"):
        c(q, num_heads=4, output_tensor=q)
    with pytest.raises(ValidationError, match="sub_core_grids"):
        c(q, num_heads=4, sub_core_grids=ttnn.CoreRangeSet([]))
    with pytest.raises(ValidationError, match="memory_config"):
        c(q, num_heads=4, memory_config="L1")


# --- rotary embeddings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
def test_rotary_llama_prefill(open_mesh, mesh_shape):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    nh, s, hd = 2, 64, 64
    x = dev(torch.randn(1, nh * n, s, hd), mesh, dim=1)
    cos, sin = meta_cos_sin(range(s), hd)
    tcos, tsin = dev(cos[None, None], mesh), dev(sin[None, None], mesh)
    out = ttnn.experimental.rotary_embedding_llama(x, tcos, tsin, dev(trans_mat(), mesh))
    assert out.shape == [1, nh, s, hd] and out.dtype == ttnn.bfloat16
    close(meta_rope(host(x, mesh, 1), rope_angles(range(s), hd)), host(out, mesh, 1))
    # the general matmul path (any trans_mat) computes x·cos + (x @ T)·sin per 32-wide tile
    t = torch.eye(32)[None, None]
    out2 = ttnn.experimental.rotary_embedding_llama(x, tcos, tsin, dev(t, mesh))
    xs = host(x, mesh, 1)
    close(xs * host(tcos, mesh) + xs * host(tsin, mesh), host(out2, mesh, 1))
    # per-head cos/sin [1, nh, S, hd] and a longer cos cache (only the first S rows are used)
    cos_h = torch.stack([cos, cos.flip(0)])[None]
    sin_h = torch.stack([sin, sin.flip(0)])[None]
    out3 = ttnn.experimental.rotary_embedding_llama(
        x, dev(cos_h, mesh), dev(sin_h, mesh), dev(trans_mat(), mesh)
    )
    ang = rope_angles(range(s), hd)
    ref = torch.stack([meta_rope(xs[:, h::nh], a) for h, a in enumerate((ang, ang.flip(0)))], 2).reshape(
        xs.shape
    )
    close(ref, host(out3, mesh, 1))
    long_cos, long_sin = meta_cos_sin(range(2 * s), hd)
    out4 = ttnn.experimental.rotary_embedding_llama(
        x, dev(long_cos[None, None], mesh), dev(long_sin[None, None], mesh), dev(trans_mat(), mesh)
    )
    assert torch.equal(host(out4, mesh, 1), host(out, mesh, 1))


def _decode_rope_inputs(mesh, users, positions, hd, cores=None, start=0):
    cos, sin = meta_cos_sin(positions, hd)
    mc = height_mc(mesh, cores or users, (32, hd), start)
    tcos = dev(cos[None, :, None, :], mesh, mc=mc)
    tsin = dev(sin[None, :, None, :], mesh, mc=mc)
    tm = dev(
        trans_mat().repeat(1, 1, cores or users, 1), mesh, mc=height_mc(mesh, cores or users, (32, 32), start)
    )
    return tcos, tsin, tm


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
def test_rotary_llama_decode_and_fused(open_mesh, mesh_shape):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    users, nh, nkv, hd = 4, 4, 2, 64
    width = (nh + 2 * nkv) * hd
    wmc = ttnn.create_sharded_memory_config(
        (32, hd),
        ttnn.num_cores_to_corerangeset(width // hd, mesh.compute_with_storage_grid_size(), True),
        ttnn.ShardStrategy.WIDTH,
        use_height_and_width_as_shard_shape=True,
    )
    x = dev(torch.randn(1, 1, users, width * n), mesh, mc=wmc, dim=3)
    q, k, _ = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=nh, num_kv_heads=nkv, overlap_qk_coregrid=False
    )
    positions = [3, 17, 0, 40]
    tcos, tsin, tm = _decode_rope_inputs(mesh, users, positions, hd)
    qr = ttnn.experimental.rotary_embedding_llama(q, tcos, tsin, tm, is_decode_mode=True)
    assert qr.memory_config() == q.memory_config()
    ang = rope_angles(positions, hd)  # [users, hd/2]
    qs = host(q, mesh, 2)
    ref_q = meta_rope(qs.transpose(1, 2), ang).transpose(1, 2)
    close(ref_q, host(qr, mesh, 2))
    # general trans_mat path in decode: user 1 gets the identity
    tmat = trans_mat().repeat(1, 1, users, 1)
    tmat[0, 0, 32:64] = torch.eye(32)
    tm2 = dev(tmat, mesh, mc=height_mc(mesh, users, (32, 32)))
    qr2 = ttnn.experimental.rotary_embedding_llama(q, tcos, tsin, tm2, is_decode_mode=True)
    got = host(qr2, mesh, 2)
    close(ref_q[:, [0, 2, 3]], got[:, [0, 2, 3]])
    c1, s1 = meta_cos_sin([positions[1]], hd)
    close(qs[:, 1] * c1 + qs[:, 1] * s1, got[:, 1])
    # fused Q/K rotary equals two separate calls
    kcos, ksin, ktm = _decode_rope_inputs(mesh, users, positions, hd, start=users)
    kr = ttnn.experimental.rotary_embedding_llama(k, kcos, ksin, ktm, is_decode_mode=True)
    fcos, fsin, ftm = _decode_rope_inputs(mesh, 2 * users, positions * 2, hd)
    fq, fk = ttnn.experimental.rotary_embedding_llama_fused_qk(q, k, fcos, fsin, ftm)
    assert torch.equal(host(fq, mesh, 2), host(qr, mesh, 2))
    assert torch.equal(host(fk, mesh, 2), host(kr, mesh, 2))
    assert fk.memory_config() == k.memory_config()


def test_rotary_llama_errors(open_mesh):
    mesh = open_mesh((1, 1))
    f = ttnn.experimental.rotary_embedding_llama
    s, hd = 32, 64
    cos, sin = meta_cos_sin(range(s), hd)
    x = dev(torch.randn(1, 2, s, hd), mesh)
    tc, ts, tm = dev(cos[None, None], mesh), dev(sin[None, None], mesh), dev(trans_mat(), mesh)
    with pytest.raises(ValidationError, match="dtype"):
        f(dev(torch.randn(1, 2, s, hd), mesh, ttnn.bfloat8_b), tc, ts, tm)
    with pytest.raises(ValidationError, match="rank"):
        f(dev(torch.randn(2, s, hd), mesh), tc, ts, tm)
    with pytest.raises(ValidationError, match="head_dim"):
        f(dev(torch.randn(1, 2, s, 48), mesh), tc, ts, tm)
    with pytest.raises(ValidationError, match="<= 256"):
        f(dev(torch.randn(1, 1, s, 288), mesh), tc, ts, tm)
    big = dev(torch.randn(1, 1, s, 160), mesh)
    bc = dev(torch.randn(1, 1, s, 160), mesh)
    with pytest.raises(ValidationError, match="fp32_dest_acc_en"):
        f(big, bc, bc, tm, compute_kernel_config=ttnn.WormholeComputeKernelConfig(fp32_dest_acc_en=True))
    with pytest.raises(ValidationError, match="compute_kernel_config"):
        f(x, tc, ts, tm, compute_kernel_config="HiFi4")
    with pytest.raises(ValidationError, match="sin_cache"):
        f(x, tc, dev(sin[None, None, :16], mesh), tm)
    with pytest.raises(ValidationError, match=r"cos_cache\.shape\[2\]"):
        f(dev(torch.randn(1, 2, 64, hd), mesh), tc, ts, tm)
    with pytest.raises(ValidationError, match=r"cos_cache\.shape\[1\]"):
        f(x, dev(torch.randn(1, 3, s, hd), mesh), dev(torch.randn(1, 3, s, hd), mesh), tm)
    with pytest.raises(ValidationError, match="per-head"):
        f(x, dev(torch.randn(1, 2, 64, hd), mesh), dev(torch.randn(1, 2, 64, hd), mesh), tm)
    with pytest.raises(ValidationError, match=r"cos_cache\.shape\[0\]"):
        f(x, dev(torch.randn(2, 1, s, hd), mesh), dev(torch.randn(2, 1, s, hd), mesh), tm)
    with pytest.raises(ValidationError, match="trans_mat shape"):
        f(x, tc, ts, dev(torch.randn(1, 1, 64, 32), mesh))
    with pytest.raises(ValidationError, match="trans_mat shape"):
        f(x, tc, ts, dev(torch.randn(2, 1, 32, 32), mesh))
    with pytest.raises(ValidationError, match="memory_config"):
        f(x, tc, ts, tm, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match="is_decode_mode"):
        f(x, tc, ts, tm, is_decode_mode=1)
    with pytest.raises(ValidationError, match="HEIGHT_SHARDED in decode mode"):
        f(x, tc, ts, tm, is_decode_mode=True)
    with pytest.raises(ValidationError, match="cos_cache memory layout"):
        f(x, dev(cos[None, None], mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG), ts, tm)
    sharded = dev(torch.randn(1, 2, s, hd), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match="INTERLEAVED in prefill"):
        f(sharded, tc, ts, tm)
    # decode-mode shape checks
    users = 4
    q = dev(torch.randn(1, users, 4, hd), mesh, mc=height_mc(mesh, users, (32, hd)))
    dc, ds, dt = _decode_rope_inputs(mesh, users, [0, 1, 2, 3], hd)
    with pytest.raises(ValidationError, match=r"shape\[0\]"):
        f(
            dev(torch.randn(2, users, 4, hd), mesh, mc=height_mc(mesh, 2 * users, (32, hd))),
            dc,
            ds,
            dt,
            is_decode_mode=True,
        )
    c3, s3, _ = _decode_rope_inputs(mesh, 3, [0, 1, 2], hd)
    with pytest.raises(ValidationError, match="users of the input"):
        f(q, c3, s3, dt, is_decode_mode=True)
    with pytest.raises(ValidationError, match="trans_mat shard shape"):
        f(
            q,
            dc,
            ds,
            dev(torch.randn(1, 1, 64 * users, 32), mesh, mc=height_mc(mesh, users, (64, 32))),
            is_decode_mode=True,
        )
    c64 = dev(torch.randn(1, users, 2, hd), mesh, mc=height_mc(mesh, users // 2, (64, hd)))
    with pytest.raises(ValidationError, match="cos_cache shard height"):
        f(q, c64, c64, dt, is_decode_mode=True)
    many = dev(torch.randn(1, 65, 1, hd), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match="users"):
        f(many, many, many, dt, is_decode_mode=True)
    # fused Q/K
    g = ttnn.experimental.rotary_embedding_llama_fused_qk
    kk = dev(torch.randn(1, users, 2, hd), mesh, mc=height_mc(mesh, users, (32, hd), users))
    fc, fs, ft = _decode_rope_inputs(mesh, 2 * users, list(range(2 * users)), hd)
    with pytest.raises(ValidationError, match="disjoint"):
        g(q, q, fc, fs, ft)
    with pytest.raises(ValidationError, match="2·batch"):
        g(q, kk, dc, ds, ft)
    with pytest.raises(ValidationError, match="trans_mat shard cores"):
        g(q, kk, fc, fs, dt)
    with pytest.raises(ValidationError, match="Q's batch"):
        g(q, dev(torch.randn(1, 2, 2, hd), mesh, mc=height_mc(mesh, 2, (32, hd), users)), fc, fs, ft)
    with pytest.raises(ValidationError, match="head_dim"):
        g(q, dev(torch.randn(1, users, 2, 32), mesh, mc=height_mc(mesh, users, (32, 32), users)), fc, fs, ft)
    with pytest.raises(ValidationError, match="HEIGHT_SHARDED"):
        g(x, kk, fc, fs, ft)
    with pytest.raises(ValidationError, match="decode"):
        g(
            dev(torch.randn(2, users, 4, hd), mesh, mc=height_mc(mesh, 2 * users, (32, hd), 2 * users)),
            kk,
            fc,
            fs,
            ft,
        )
    q40 = dev(torch.randn(1, 33, 1, hd), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    k40 = dev(torch.randn(1, 33, 1, hd), mesh, mc=height_mc(mesh, 11, (96, hd), 40))
    with pytest.raises(ValidationError, match="<= 32"):
        g(q40, k40, fc, fs, ft)


def test_rotary_embedding_hf(open_mesh):
    mesh = open_mesh((1, 2))
    nh, s, hd = 2, 64, 64
    x = dev(torch.randn(1, 2 * nh, s, hd), mesh, dim=1)
    ang = rope_angles(range(s), hd)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    tc, ts = dev(cos[None, None], mesh), dev(sin[None, None], mesh)
    out = ttnn.experimental.rotary_embedding(x, tc, ts)
    xs = host(x, mesh, 1)

    def rotate_half(t):
        return torch.cat([-t[..., hd // 2 :], t[..., : hd // 2]], -1)

    close(xs * host(tc, mesh) + rotate_half(xs) * host(ts, mesh), host(out, mesh, 1))
    # token_index: a decode batch [1, n, B, X] where every row uses one position
    xd = dev(torch.randn(1, 2, 32, hd), mesh, dim=1)
    outd = ttnn.experimental.rotary_embedding(xd, tc, ts, 5)
    xds = host(xd, mesh, 1)
    close(xds * host(tc, mesh)[0, 0, 5] + rotate_half(xds) * host(ts, mesh)[0, 0, 5], host(outd, mesh, 1))
    # sharded output config
    outs = ttnn.experimental.rotary_embedding(x, tc, ts, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert outs.is_sharded() and torch.equal(host(outs, mesh, 1), host(out, mesh, 1))
    outs2 = ttnn.experimental.rotary_embedding(outs, tc, ts)
    assert outs2.is_sharded()
    f = ttnn.experimental.rotary_embedding
    with pytest.raises(ValidationError, match="multiple of 64"):
        f(dev(torch.randn(1, 1, s, 32), mesh), tc, ts)
    with pytest.raises(ValidationError, match="token_index"):
        f(xd, tc, ts, s)
    with pytest.raises(ValidationError, match="token_index"):
        f(xd, tc, ts, -1)
    with pytest.raises(ValidationError, match=r"shape\[0\]"):
        f(dev(torch.randn(2, 1, 32, hd), mesh), tc, ts, 3)
    with pytest.raises(ValidationError, match=r"cos_cache\.shape\[-2\]"):
        f(dev(torch.randn(1, 1, 96, hd), mesh), tc, ts)
    with pytest.raises(ValidationError, match="cos_cache shape"):
        f(x, dev(cos[None, None, :, :32], mesh), dev(sin[None, None, :, :32], mesh))
    with pytest.raises(ValidationError, match=r"sin_cache\.dtype"):
        f(x, tc, dev(sin[None, None], mesh, ttnn.float32))
    with pytest.raises(ValidationError, match="sin_cache"):
        f(x, tc, dev(sin[None, None, :32], mesh))
    with pytest.raises(ValidationError, match="not WIDTH_SHARDED"):
        f(x, tc, ts, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match="HEIGHT or BLOCK"):
        f(dev(torch.randn(1, 1, 32, hd), mesh, mc=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG), tc, ts)
    with pytest.raises(ValidationError, match="dtype"):
        f(dev(torch.ones(1, 1, 32, hd, dtype=torch.int32), mesh, ttnn.int32), tc, ts)


# --- KV caches -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_fill_and_update_cache(open_mesh, mesh_shape, dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    b, nkv, max_seq, hd = 4, 2, 96, 64
    cache = dev(torch.zeros(b, nkv * n, max_seq, hd), mesh, dtype, dim=1)
    x = dev(torch.randn(1, nkv * n, 40, hd), mesh, dtype, dim=1)
    assert ttnn.fill_cache(cache, x, 2) is cache
    got = host(cache, mesh, 1)
    assert torch.equal(got[2, :, :40], host(x, mesh, 1)[0])
    assert not got[2, :, 40:].any() and not got[[0, 1, 3]].any()  # tile padding rows 40..63 are zeros
    ttnn.fill_cache_for_user_(cache, x, 0)
    assert torch.equal(host(cache, mesh, 1)[0, :, :40], host(x, mesh, 1)[0])
    # decode update: input [1, nkv, 32 (users padded), hd]; rows batch_offset..+b go to users 0..b-1
    tok = dev(torch.randn(1, nkv * n, 32, hd), mesh, ttnn.bfloat16, dim=1)
    ttnn.update_cache(cache, tok, 50, batch_offset=3)
    stored = host(tok, mesh, 1)[0]  # [nkv, 32, hd]
    ref = stored[:, 3 : 3 + b].transpose(0, 1)
    got = host(cache, mesh, 1)[:, :, 50]
    if dtype == ttnn.bfloat16:
        assert torch.equal(got, ref)
    else:  # written rows are requantised to bfloat8_b
        close(ref, got)
    ttnn.update_cache_for_token_(cache, tok, 51)
    close(stored[:, :b].transpose(0, 1), host(cache, mesh, 1)[:, :, 51])


def test_fill_update_cache_errors(open_mesh):
    mesh = open_mesh((1, 1))
    cache = dev(torch.zeros(2, 2, 64, 64), mesh)
    x = dev(torch.randn(1, 2, 32, 64), mesh)
    with pytest.raises(ValidationError, match="batch_idx"):
        ttnn.fill_cache(cache, x, 2)
    with pytest.raises(ValidationError, match="dtype"):
        ttnn.fill_cache(cache, dev(torch.randn(1, 2, 32, 64), mesh, ttnn.bfloat8_b), 0)
    with pytest.raises(ValidationError, match="cache length"):
        ttnn.fill_cache(cache, dev(torch.randn(1, 2, 96, 64), mesh), 0)
    with pytest.raises(ValidationError, match="kv heads"):
        ttnn.fill_cache(cache, dev(torch.randn(1, 3, 32, 64), mesh), 0)
    with pytest.raises(ValidationError, match="head_dim"):
        ttnn.fill_cache(cache, dev(torch.randn(1, 2, 32, 32), mesh), 0)
    with pytest.raises(ValidationError, match=r"shape\[0\]"):
        ttnn.fill_cache(cache, dev(torch.randn(2, 2, 32, 64), mesh), 0)
    with pytest.raises(ValidationError, match="rank"):
        ttnn.fill_cache(cache, dev(torch.randn(2, 32, 64), mesh), 0)
    with pytest.raises(ValidationError, match="INTERLEAVED"):
        ttnn.fill_cache(dev(torch.zeros(2, 2, 64, 64), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG), x, 0)
    with pytest.raises(ValidationError, match="HEIGHT or BLOCK"):
        ttnn.fill_cache(
            cache, dev(torch.randn(1, 2, 32, 64), mesh, mc=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG), 0
        )
    with pytest.raises(ValidationError, match="update_idx"):
        ttnn.update_cache(cache, x, 64)
    with pytest.raises(ValidationError, match="batch_offset"):
        ttnn.update_cache(cache, x, 0, batch_offset=31)
    with pytest.raises(ValidationError, match="batch_offset"):
        ttnn.update_cache(cache, x, 0, batch_offset=-1)
    big = dev(torch.zeros(32, 2, 64, 64), mesh)
    with pytest.raises(ValidationError, match="0 when the cache batch"):
        ttnn.update_cache(big, x, 0, batch_offset=1)
    with pytest.raises(ValidationError, match="padded rows"):
        ttnn.update_cache(dev(torch.zeros(40, 2, 64, 64), mesh), x, 0)
    with pytest.raises(ValidationError, match="compute_kernel_config"):
        ttnn.update_cache(cache, x, 0, compute_kernel_config=1)
    # a sharded decode input works too (height-sharded rows)
    xs = dev(torch.randn(1, 2, 32, 64), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    ttnn.update_cache(cache, xs, 7)
    assert torch.equal(host(cache, mesh)[:, :, 7], host(xs, mesh)[0, :, :2].transpose(0, 1))


def _decode_kv(mesh, users, nkv, hd, dtype=ttnn.bfloat16, start=0, dim=None):
    n = mesh.get_num_devices() if dim is not None else 1
    return dev(
        torch.randn(1, users, nkv * n, hd), mesh, dtype, mc=height_mc(mesh, users, (32, hd), start), dim=dim
    )


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
@pytest.mark.parametrize("cache_dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_paged_update_cache(open_mesh, mesh_shape, cache_dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    users, nkv, hd, block, max_blocks = 3, 2, 64, 32, 4
    num_blocks = users * max_blocks
    perm = (
        torch.randperm(num_blocks, generator=torch.Generator().manual_seed(0))
        .reshape(users, max_blocks)
        .int()
    )
    page_table = ttnn.from_torch(perm, dtype=ttnn.int32, layout=RM, device=mesh)
    paged = dev(torch.zeros(num_blocks, nkv * n, block, hd), mesh, cache_dtype, dim=1)
    flat = dev(torch.zeros(users, nkv * n, block * max_blocks, hd), mesh, cache_dtype, dim=1)
    k = _decode_kv(mesh, users, nkv, hd, dim=2)
    pos = [5, 70, -1]  # user 2 is skipped
    idx = ints(pos, mesh)
    assert (
        ttnn.experimental.paged_update_cache(paged, k, update_idxs_tensor=idx, page_table=page_table) is paged
    )
    ttnn.experimental.paged_update_cache(flat, k, update_idxs_tensor=idx)
    ks = host(k, mesh, 2)[0]  # [users, nkv·n, hd]
    got_flat, got_paged = host(flat, mesh, 1), host(paged, mesh, 1)
    for u, p in enumerate(pos):
        if p < 0:
            assert not got_flat[u].any()
            continue
        close(ks[u], got_flat[u, :, p])
        assert torch.equal(got_paged[perm[u, p // block], :, p % block], got_flat[u, :, p])
    assert int((got_paged != 0).any(-1).sum()) == 2 * nkv * n  # only the two written rows
    # the list form writes the same (no skip value there); share_cache writes every user into one cache
    flat2 = dev(torch.zeros(users, nkv * n, block * max_blocks, hd), mesh, cache_dtype, dim=1)
    ttnn.experimental.paged_update_cache(flat2, k, update_idxs=[5, 70, 9])
    assert torch.equal(host(flat2, mesh, 1)[0, :, 5], got_flat[0, :, 5])
    shared = dev(torch.zeros(1, nkv * n, 96, hd), mesh, cache_dtype, dim=1)
    ttnn.experimental.paged_update_cache(shared, k, update_idxs=[1, 2, 3], share_cache=True)
    for u in range(users):
        close(ks[u], host(shared, mesh, 1)[0, :, u + 1])


def test_paged_update_cache_options(open_mesh):
    mesh = open_mesh((1, 2))
    users, nkv, hd, block = 2, 1, 32, 32
    k = _decode_kv(mesh, users, nkv, hd)
    pt = ttnn.from_torch(
        torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    cache = dev(torch.zeros(4, nkv, block, hd), mesh)
    # cache_position_modulo wraps positions into a ring of 64; mesh_coords limits the write to device (0, 1)
    ttnn.experimental.paged_update_cache(
        cache,
        k,
        update_idxs_tensor=ints([70, 3], mesh),
        page_table=pt,
        cache_position_modulo=64,
        mesh_coords={ttnn.MeshCoordinate(0, 1)},
    )
    d0, d1 = (ttnn.to_torch(t).float() for t in ttnn.get_device_tensors(cache))
    assert not d0.any()
    ks = host(k, mesh)[0]
    assert torch.equal(d1[0, :, 6], ks[0]) and torch.equal(d1[2, :, 3], ks[1])
    # a uint16 L1-sharded page table (one copy per core) and an L1-sharded index tensor
    grid = ttnn.num_cores_to_corerangeset(2, mesh.compute_with_storage_grid_size(), row_wise=True)
    pt_mc = ttnn.create_sharded_memory_config(
        (users, 2),
        grid,
        ttnn.ShardStrategy.HEIGHT,
        use_height_and_width_as_shard_shape=True,
        tile_layout=False,
    )
    pt16 = ttnn.from_torch(
        torch.tensor([[0, 1], [2, 3]] * 2, dtype=torch.int32),
        dtype=ttnn.uint16,
        layout=RM,
        device=mesh,
        memory_config=pt_mc,
    )
    idx_mc = ttnn.create_sharded_memory_config(
        (1, users),
        grid,
        ttnn.ShardStrategy.HEIGHT,
        use_height_and_width_as_shard_shape=True,
        tile_layout=False,
    )
    idx = ttnn.from_torch(
        torch.tensor([[33, 1], [33, 1]], dtype=torch.int32),
        dtype=ttnn.int32,
        layout=RM,
        device=mesh,
        memory_config=idx_mc,
    )
    cache2 = dev(torch.zeros(4, nkv, block, hd), mesh)
    ttnn.experimental.paged_update_cache(
        cache2, k, update_idxs_tensor=idx, page_table=pt16, block_size=32, num_kv_heads=1
    )
    c2 = host(cache2, mesh)  # replicated cache: both devices hold the same values
    assert torch.equal(c2[1, :, 1], ks[0]) and torch.equal(c2[2, :, 1], ks[1])


def test_paged_fused_update_and_errors(open_mesh):
    mesh = open_mesh((1, 1))
    users, nkv, hd = 4, 2, 64
    x = dev(
        torch.randn(1, 1, users, 6 * hd),
        mesh,
        mc=ttnn.create_sharded_memory_config(
            (32, 64),
            ttnn.num_cores_to_corerangeset(6, mesh.compute_with_storage_grid_size(), True),
            ttnn.ShardStrategy.WIDTH,
            use_height_and_width_as_shard_shape=True,
        ),
    )
    _, k, v = ttnn.experimental.nlp_create_qkv_heads_decode(
        x, num_heads=2, num_kv_heads=nkv, overlap_qk_coregrid=False
    )
    kc, vc = dev(torch.zeros(users, nkv, 64, hd), mesh), dev(torch.zeros(users, nkv, 64, hd), mesh)
    pos = ints([0, 10, 20, 63], mesh)
    out = ttnn.experimental.paged_fused_update_cache(kc, k, vc, v, update_idxs_tensor=pos)
    assert out == (kc, vc)
    kh, vh = host(k, mesh)[0], host(v, mesh)[0]
    for u, p in enumerate([0, 10, 20, 63]):
        assert torch.equal(host(kc, mesh)[u, :, p], kh[u]) and torch.equal(host(vc, mesh)[u, :, p], vh[u])
    f = ttnn.experimental.paged_fused_update_cache
    with pytest.raises(ValidationError, match="disjoint"):
        f(kc, k, vc, k, update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="layout"):
        f(
            kc,
            k,
            vc,
            dev(torch.randn(1, users, nkv, hd), mesh, layout=RM, mc=height_mc(mesh, users, (nkv, hd), 8)),
            update_idxs_tensor=pos,
        )
    rm1 = dev(torch.randn(1, users, 8, 64), mesh, layout=RM, mc=height_mc(mesh, users, (8, 64)))
    rm2 = dev(torch.randn(1, users, 8, 64), mesh, layout=RM, mc=height_mc(mesh, users, (8, 64), 8))
    with pytest.raises(ValidationError, match="Llama-70B"):
        f(
            dev(torch.zeros(users, 8, 64, 64), mesh),
            rm1,
            dev(torch.zeros(users, 8, 64, 64), mesh),
            rm2,
            update_idxs_tensor=pos,
        )
    with pytest.raises(ValidationError, match="users"):
        f(
            kc,
            k,
            dev(torch.zeros(2, nkv, 64, hd), mesh),
            _decode_kv(mesh, 2, nkv, hd, start=10),
            update_idxs=[1, 2, 3, 4],
        )
    # paged_update_cache errors
    g = ttnn.experimental.paged_update_cache
    with pytest.raises(ValidationError, match="exactly one"):
        g(kc, k)
    with pytest.raises(ValidationError, match="exactly one"):
        g(kc, k, update_idxs=[0, 1, 2, 3], update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="one position per user"):
        g(kc, k, update_idxs=[0, 1])
    with pytest.raises(ValidationError, match="non-negative"):
        g(kc, k, update_idxs=[0, 1, 2, -1])
    with pytest.raises(ValidationError, match=r"update_idxs\[3\]"):
        g(kc, k, update_idxs=[0, 1, 2, 64])
    with pytest.raises(ValidationError, match=r"update_idxs\[1\]"):
        g(kc, k, update_idxs_tensor=ints([0, -2, 0, 0], mesh))
    with pytest.raises(ValidationError, match="dtype"):
        g(kc, k, update_idxs_tensor=ints([0, 1, 2, 3], mesh, ttnn.uint32))
    with pytest.raises(ValidationError, match="shape"):
        g(kc, k, update_idxs_tensor=ints([0, 1], mesh))
    with pytest.raises(ValidationError, match="DRAM"):
        g(kc, k, update_idxs_tensor=ints([0, 1, 2, 3], mesh, mc=ttnn.L1_MEMORY_CONFIG))
    with pytest.raises(ValidationError, match="sharded"):
        g(kc, dev(torch.randn(1, users, nkv, hd), mesh), update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="shard cores"):
        g(
            kc,
            dev(torch.randn(1, users, nkv, hd), mesh, mc=height_mc(mesh, 2, (64, hd))),
            update_idxs_tensor=pos,
        )
    with pytest.raises(ValidationError, match="dtype"):
        g(kc, _decode_kv(mesh, users, nkv, hd, ttnn.bfloat8_b), update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="batch_offset"):
        g(kc, k, update_idxs_tensor=pos, batch_offset=1)
    with pytest.raises(ValidationError, match="cache batch"):
        g(dev(torch.zeros(2, nkv, 64, hd), mesh), k, update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="share_cache"):
        g(kc, k, update_idxs_tensor=pos, share_cache=True)
    with pytest.raises(ValidationError, match="kv heads"):
        g(dev(torch.zeros(users, 40, 64, hd), mesh), k, update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="head_dim"):
        g(dev(torch.zeros(users, nkv, 64, 32), mesh), k, update_idxs_tensor=pos)
    with pytest.raises(ValidationError, match="paged mode only"):
        g(kc, k, update_idxs_tensor=pos, block_size=32)
    with pytest.raises(ValidationError, match="paged mode only"):
        g(kc, k, update_idxs_tensor=pos, cache_position_modulo=64)
    with pytest.raises(ValidationError, match="INTERLEAVED"):
        g(
            dev(torch.zeros(users, nkv, 64, hd), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG),
            k,
            update_idxs_tensor=pos,
        )
    with pytest.raises(ValidationError, match="mesh_coords"):
        g(kc, k, update_idxs_tensor=pos, mesh_coords=[(0, 1)])
    # paged page-table checks
    pcache = dev(torch.zeros(8, nkv, 32, hd), mesh)
    pt = ttnn.from_torch(
        torch.arange(8, dtype=torch.int32).reshape(users, 2), dtype=ttnn.int32, layout=RM, device=mesh
    )
    with pytest.raises(ValidationError, match="update_idxs_tensor"):
        g(pcache, k, update_idxs=[0, 1, 2, 3], page_table=pt)
    with pytest.raises(ValidationError, match=r"page_table\.dtype"):
        g(
            pcache,
            k,
            update_idxs_tensor=pos,
            page_table=ttnn.from_torch(
                torch.zeros(users, 2, dtype=torch.int32), dtype=ttnn.uint32, layout=RM, device=mesh
            ),
        )
    with pytest.raises(ValidationError, match=r"page_table\.shape\[0\]"):
        g(
            pcache,
            k,
            update_idxs_tensor=pos,
            page_table=ttnn.from_torch(
                torch.zeros(2, 2, dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
            ),
        )
    with pytest.raises(ValidationError, match="max_num_blocks"):
        g(dev(torch.zeros(1, nkv, 32, hd), mesh), k, update_idxs_tensor=pos, page_table=pt)
    with pytest.raises(ValidationError, match=r"update_idxs\[3\]"):
        g(pcache, k, update_idxs_tensor=ints([0, 1, 2, 64], mesh), page_table=pt)  # 64 >= 2 blocks · 32
    bad = ttnn.from_torch(
        torch.tensor([[0, 1], [2, 3], [4, 99], [6, 7]], dtype=torch.int32),
        dtype=ttnn.int32,
        layout=RM,
        device=mesh,
    )
    with pytest.raises(ValidationError, match="physical block"):
        g(pcache, k, update_idxs_tensor=ints([0, 1, 40, 3], mesh), page_table=bad)
    assert not host(pcache, mesh).any()  # validation happens before any write
    with pytest.raises(ValidationError, match="block_size"):
        g(pcache, k, update_idxs_tensor=ints([0, 1, 2, 3], mesh), page_table=pt, block_size=64)
    with pytest.raises(ValidationError, match="cache_position_modulo"):
        g(pcache, k, update_idxs_tensor=ints([0, 1, 2, 3], mesh), page_table=pt, cache_position_modulo=48)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_paged_fill_cache(open_mesh, mesh_shape, dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    nkv, hd, block = 2, 64, 32
    pt_host = torch.tensor([[4, 0, 2], [1, -1, 3]], dtype=torch.int32)
    pt = ttnn.from_torch(pt_host, dtype=ttnn.int32, layout=RM, device=mesh)
    cache = dev(torch.zeros(6, nkv * n, block, hd), mesh, dtype, dim=1)
    x = dev(torch.randn(1, nkv * n, 70, hd), mesh, dtype, dim=1)
    assert ttnn.experimental.paged_fill_cache(cache, x, pt, batch_idx=0) is cache
    xs, got = host(x, mesh, 1)[0], host(cache, mesh, 1)
    seq = torch.cat([got[4], got[0], got[2]], dim=1)  # user 0's virtual sequence
    assert torch.equal(seq[:, :70], xs) and not seq[:, 70:].any()
    # batch_idx_tensor with two input rows; user 1's block 1 is -1 (skipped)
    cache2 = dev(torch.zeros(6, nkv * n, block, hd), mesh, dtype, dim=1)
    x2 = dev(torch.randn(2, nkv * n, 96, hd), mesh, dtype, dim=1)
    bidx = ttnn.from_torch(torch.tensor([1, 0], dtype=torch.int32), dtype=ttnn.uint32, layout=RM, device=mesh)
    ttnn.experimental.paged_fill_cache(cache2, x2, pt, batch_idx_tensor=bidx)
    x2s, got2 = host(x2, mesh, 1), host(cache2, mesh, 1)
    assert torch.equal(got2[1], x2s[0, :, :32]) and torch.equal(got2[3], x2s[0, :, 64:96])
    assert torch.equal(torch.cat([got2[4], got2[0], got2[2]], 1), x2s[1])
    # ring buffer: with a modulo of 64 positions, the last tiles overwrite the first ones
    cache3 = dev(torch.zeros(6, nkv * n, block, hd), mesh, dtype, dim=1)
    x3 = dev(torch.randn(1, nkv * n, 96, hd), mesh, dtype, dim=1)
    ttnn.experimental.paged_fill_cache(cache3, x3, pt, batch_idx=0, cache_position_modulo=64, block_size=32)
    x3s, got3 = host(x3, mesh, 1)[0], host(cache3, mesh, 1)
    assert torch.equal(got3[4], x3s[:, 64:96]) and torch.equal(got3[0], x3s[:, 32:64]) and not got3[2].any()


def test_paged_fill_cache_errors(open_mesh):
    mesh = open_mesh((1, 1))
    f = ttnn.experimental.paged_fill_cache
    cache = dev(torch.zeros(4, 2, 32, 64), mesh)
    pt = ttnn.from_torch(
        torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    x = dev(torch.randn(1, 2, 64, 64), mesh)
    with pytest.raises(ValidationError, match="dtype"):
        f(cache, dev(torch.randn(1, 2, 64, 64), mesh, ttnn.bfloat8_b), pt)
    with pytest.raises(ValidationError, match="batch_idx"):
        f(cache, x, pt, batch_idx=2)
    with pytest.raises(ValidationError, match="max_num_blocks_per_seq"):
        f(cache, dev(torch.randn(1, 2, 96, 64), mesh), pt)
    with pytest.raises(ValidationError, match=r"page_table\.dtype"):
        f(
            cache,
            x,
            ttnn.from_torch(torch.zeros(2, 2, dtype=torch.int32), dtype=ttnn.uint32, layout=RM, device=mesh),
        )
    with pytest.raises(ValidationError, match="rank"):
        f(cache, x, ints([0, 1], mesh))
    with pytest.raises(ValidationError, match="physical block"):
        f(
            cache,
            x,
            ttnn.from_torch(
                torch.tensor([[0, 7], [2, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
            ),
        )
    with pytest.raises(ValidationError, match="kv heads"):
        f(cache, dev(torch.randn(1, 3, 64, 64), mesh), pt)
    with pytest.raises(ValidationError, match="head_dim"):
        f(cache, dev(torch.randn(1, 2, 64, 32), mesh), pt)
    with pytest.raises(ValidationError, match="block_size"):
        f(cache, x, pt, block_size=64)
    with pytest.raises(ValidationError, match="block_size"):
        f(dev(torch.zeros(4, 2, 48, 64), mesh), x, pt)
    with pytest.raises(ValidationError, match="cache_position_modulo"):
        f(cache, x, pt, cache_position_modulo=48)
    with pytest.raises(ValidationError, match="cache_position_modulo"):
        f(cache, x, pt, cache_position_modulo=128)
    with pytest.raises(ValidationError, match="without batch_idx_tensor"):
        f(cache, dev(torch.randn(2, 2, 64, 64), mesh), pt)
    with pytest.raises(ValidationError, match="one per input row"):
        f(cache, x, pt, batch_idx_tensor=ints([0, 1], mesh))
    with pytest.raises(ValidationError, match="page-table row"):
        f(cache, x, pt, batch_idx_tensor=ints([5], mesh))
    with pytest.raises(ValidationError, match="DRAM INTERLEAVED"):
        f(cache, x, pt, batch_idx_tensor=ints([0], mesh, mc=ttnn.L1_MEMORY_CONFIG))
    with pytest.raises(ValidationError, match="INTERLEAVED"):
        f(cache, dev(torch.randn(1, 2, 64, 64), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG), pt)
    with pytest.raises(ValidationError, match="compute_kernel_config"):
        f(cache, x, pt, compute_kernel_config=object())


# --- SDPA ----------------------------------------------------------------------------------------------------


def _qkv(mesh, b, nh, nkv, sq, sk, d, dtype=ttnn.bfloat16, kv_dtype=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = mesh.get_num_devices()
    q = torch.randn(b, nh * n, sq, d, generator=g)
    k = torch.randn(b, nkv * n, sk, d, generator=g)
    v = torch.randn(b, nkv * n, sk, d, generator=g)
    kv_dtype = kv_dtype or dtype
    return (q, k, v), (
        dev(q, mesh, dtype, dim=1),
        dev(k, mesh, kv_dtype, dim=1),
        dev(v, mesh, kv_dtype, dim=1),
    )


def _ref_per_device(fn, q, k, v, n):
    """Apply a per-device reference to head-sharded torch tensors (the heads of device i are contiguous)."""
    qs, ks, vs = q.chunk(n, 1), k.chunk(n, 1), v.chunk(n, 1)
    return torch.cat([fn(a, b, c) for a, b, c in zip(qs, ks, vs)], 1)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2), (1, 8)])
@pytest.mark.parametrize("kv_dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_sdpa_prefill_causal_gqa(open_mesh, mesh_shape, kv_dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    (q, k, v), (tq, tk, tv) = _qkv(mesh, 1, 4, 2, 64, 64, 64, kv_dtype=kv_dtype)
    cfg = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=32, k_chunk_size=64)
    out = ttnn.transformer.scaled_dot_product_attention(tq, tk, tv, is_causal=True, program_config=cfg)
    assert out.shape == [1, 4, 64, 64] and out.dtype == ttnn.bfloat16
    got = host(out, mesh, 1)
    ref = _ref_per_device(sdpa_ref, host(tq, mesh, 1), host(tk, mesh, 1), host(tv, mesh, 1), n)
    close(ref, got)
    assert_pcc(_ref_per_device(sdpa_ref, q, k, v, n), got, 0.99)  # vs the unquantised inputs


def test_sdpa_prefill_options(open_mesh):
    mesh = open_mesh((1, 1))
    _, (tq, tk, tv) = _qkv(mesh, 2, 2, 1, 64, 96, 32)
    qs, ks, vs = host(tq, mesh), host(tk, mesh), host(tv, mesh)
    f = ttnn.transformer.scaled_dot_product_attention
    # non-causal with a per-batch additive mask and a custom scale
    mask = torch.where(torch.rand(2, 1, 64, 96) < 0.3, -1e9, 0.0)
    tmask = dev(mask, mesh, ttnn.bfloat8_b)
    out = f(tq, tk, tv, is_causal=False, attn_mask=tmask, scale=0.2)
    close(sdpa_ref(qs, ks, vs, causal=False, mask=host(tmask, mesh), scale=0.2), host(out, mesh))
    # non-causal sliding window (centred) and causal sliding window
    out = f(tq, tk, tv, is_causal=False, sliding_window_size=16)
    close(sdpa_ref(qs, ks, vs, causal=False, window=16), host(out, mesh))
    (_, _, _), (tq2, tk2, tv2) = _qkv(mesh, 1, 4, 4, 64, 64, 32, dtype=ttnn.bfloat8_b, seed=1)
    out = f(tq2, tk2, tv2, sliding_window_size=20, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert out.dtype == ttnn.bfloat8_b and out.memory_config() == ttnn.L1_MEMORY_CONFIG
    close(sdpa_ref(host(tq2, mesh), host(tk2, mesh), host(tv2, mesh), window=20), host(out, mesh), pcc=0.99)
    # sliding window 0 means none; long sequences are processed in row blocks
    out0 = f(tq2, tk2, tv2, sliding_window_size=0)
    close(sdpa_ref(host(tq2, mesh), host(tk2, mesh), host(tv2, mesh)), host(out0, mesh), pcc=0.99)


def test_sdpa_older_positional_mask(open_mesh):
    """The older API's fourth positional argument (``causal_mask``, as the T3000 Falcon-40B attention passes it)
    is the same mask as ``attn_mask``; giving both is refused."""
    mesh = open_mesh((1, 1))
    _, (tq, tk, tv) = _qkv(mesh, 1, 2, 1, 64, 64, 32, seed=5)
    f = ttnn.transformer.scaled_dot_product_attention
    tmask = dev(torch.where(torch.rand(1, 1, 64, 64) < 0.3, -1e9, 0.0), mesh, ttnn.bfloat8_b)
    positional = f(tq, tk, tv, tmask, is_causal=False, scale=0.3)
    keyword = f(tq, tk, tv, is_causal=False, attn_mask=tmask, scale=0.3)
    assert np.array_equal(host(positional, mesh), host(keyword, mesh))
    close(
        sdpa_ref(
            host(tq, mesh), host(tk, mesh), host(tv, mesh), causal=False, mask=host(tmask, mesh), scale=0.3
        ),
        host(positional, mesh),
    )
    causal = f(tq, tk, tv, None, is_causal=True)
    assert np.array_equal(host(causal, mesh), host(f(tq, tk, tv), mesh))
    with pytest.raises(ValidationError, match="causal_mask: expected None when attn_mask is given"):
        f(tq, tk, tv, tmask, is_causal=False, attn_mask=tmask)


def test_sdpa_row_blocks(open_mesh, monkeypatch):
    from tttv2.ttnn.ops import sdpa as sdpa_mod

    monkeypatch.setattr(sdpa_mod, "_MAX_SCORES", 1024)
    mesh = open_mesh((1, 1))
    _, (tq, tk, tv) = _qkv(mesh, 1, 2, 1, 96, 96, 32)
    out = ttnn.transformer.scaled_dot_product_attention(tq, tk, tv)
    close(sdpa_ref(host(tq, mesh), host(tk, mesh), host(tv, mesh)), host(out, mesh))


def test_sdpa_prefill_errors(open_mesh):
    mesh = open_mesh((1, 1))
    _, (tq, tk, tv) = _qkv(mesh, 1, 4, 2, 64, 64, 64)
    f = ttnn.transformer.scaled_dot_product_attention
    with pytest.raises(ValidationError, match="rank"):
        f(dev(torch.randn(4, 64, 64), mesh), tk, tv)
    with pytest.raises(ValidationError, match="multiple of the 3 K/V heads"):
        f(tq, dev(torch.randn(1, 3, 64, 64), mesh), dev(torch.randn(1, 3, 64, 64), mesh))
    with pytest.raises(ValidationError, match="causal"):
        f(tq, dev(torch.randn(1, 2, 96, 64), mesh), dev(torch.randn(1, 2, 96, 64), mesh))
    with pytest.raises(ValidationError, match="attn_mask"):
        f(tq, tk, tv, attn_mask=dev(torch.zeros(1, 1, 64, 64), mesh))
    with pytest.raises(ValidationError, match="sliding window"):
        f(tq, tk, tv, is_causal=False, sliding_window_size=8, attn_mask=dev(torch.zeros(1, 1, 64, 64), mesh))
    with pytest.raises(ValidationError, match="attn_mask shape"):
        f(tq, tk, tv, is_causal=False, attn_mask=dev(torch.zeros(1, 3, 64, 64), mesh))
    with pytest.raises(ValidationError, match="DRAM"):
        f(
            tq,
            tk,
            tv,
            is_causal=False,
            attn_mask=dev(torch.zeros(1, 1, 64, 64), mesh, mc=ttnn.L1_MEMORY_CONFIG),
        )
    with pytest.raises(ValidationError, match="q_chunk_size"):
        f(tq, tk, tv, program_config=ttnn.SDPAProgramConfig((8, 8), q_chunk_size=128, k_chunk_size=32))
    with pytest.raises(ValidationError, match="k_chunk_size"):
        f(tq, tk, tv, program_config=ttnn.SDPAProgramConfig((8, 8), q_chunk_size=32, k_chunk_size=96))
    with pytest.raises(ValidationError, match="positive"):
        f(tq, tk, tv, program_config=ttnn.SDPAProgramConfig((8, 8)))
    with pytest.raises(ValidationError, match="program_config"):
        f(tq, tk, tv, program_config={"q_chunk_size": 32})
    with pytest.raises(ValidationError, match="head_dim"):
        f(
            dev(torch.randn(1, 4, 64, 48), mesh),
            dev(torch.randn(1, 2, 64, 48), mesh),
            dev(torch.randn(1, 2, 64, 48), mesh),
        )
    with pytest.raises(ValidationError, match="K/V head_dim"):
        f(tq, tk, dev(torch.randn(1, 2, 64, 32), mesh))
    with pytest.raises(ValidationError, match="K/V batch"):
        f(tq, dev(torch.randn(2, 2, 64, 64), mesh), dev(torch.randn(2, 2, 64, 64), mesh))
    with pytest.raises(ValidationError, match=r"input_tensor_v\.shape\[1\]"):
        f(tq, tk, dev(torch.randn(1, 1, 64, 64), mesh))
    with pytest.raises(ValidationError, match=r"input_tensor_v\.shape\[2\]"):
        f(tq, tk, dev(torch.randn(1, 2, 32, 64), mesh), is_causal=False)
    with pytest.raises(ValidationError, match="dtype"):
        f(dev(torch.randn(1, 4, 64, 64), mesh, ttnn.float32), tk, tv)
    with pytest.raises(ValidationError, match="interleaved"):
        f(dev(torch.randn(1, 4, 64, 64), mesh, mc=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG), tk, tv)
    with pytest.raises(ValidationError, match="scale"):
        f(tq, tk, tv, scale=float("nan"))
    with pytest.raises(ValidationError, match="sliding_window_size"):
        f(tq, tk, tv, sliding_window_size=-4)
    with pytest.raises(ValidationError, match="is_causal"):
        f(tq, tk, tv, is_causal=1)
    with pytest.raises(ValidationError, match="attention_sink"):
        f(tq, tk, tv, attention_sink=tq)
    with pytest.raises(ValidationError, match="windowed_q_token_offset"):
        f(tq, tk, tv, windowed_q_token_offset=32)
    with pytest.raises(ValidationError, match="memory_config"):
        f(tq, tk, tv, memory_config="DRAM")
    with pytest.raises(ValidationError, match="compute_kernel_config"):
        f(tq, tk, tv, compute_kernel_config="HiFi2")
    other = open_mesh((1, 1))
    with pytest.raises(ValidationError, match="same device"):
        f(tq, dev(torch.randn(1, 2, 64, 64), other), tv)


def _paged_cache_from(mesh, k, block, perm, dtype=ttnn.bfloat16, dim=None):
    """Scatter contiguous caches k [B, nkv, S, D] into a paged [B·S/block, nkv, block, D] by ``perm``."""
    b, nkv, s, d = k.shape
    blocks = k.reshape(b, nkv, s // block, block, d).permute(0, 2, 1, 3, 4).reshape(-1, nkv, block, d)
    paged = torch.empty_like(blocks)
    paged[perm.reshape(-1).long()] = blocks
    return dev(paged, mesh, dtype, dim=dim)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
def test_chunked_prefill_equals_full_prefill(open_mesh, mesh_shape):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    b, nh, nkv, s, d, block = 1, 4, 2, 128, 64, 32
    _, (tq, tk, tv) = _qkv(mesh, b, nh, nkv, s, s, d)
    full = host(ttnn.transformer.scaled_dot_product_attention(tq, tk, tv), mesh, 1)
    perm = torch.randperm(b * s // block, generator=torch.Generator().manual_seed(3)).reshape(b, -1).int()
    pt = ttnn.from_torch(perm, dtype=ttnn.int32, layout=RM, device=mesh)
    # fill the paged caches with paged_fill_cache, as a model does
    kc = dev(torch.zeros(b * s // block, nkv * n, block, d), mesh, dim=1)
    vc = dev(torch.zeros(b * s // block, nkv * n, block, d), mesh, dim=1)
    ttnn.experimental.paged_fill_cache(kc, tk, pt, batch_idx=0)
    ttnn.experimental.paged_fill_cache(vc, tv, pt, batch_idx=0)
    qs = host(tq, mesh, 1)
    cfg = ttnn.SDPAProgramConfig((8, 8), q_chunk_size=32, k_chunk_size=32)
    chunks = []
    for start in range(0, s, 64):
        tqc = dev(qs[:, :, start : start + 64], mesh, dim=1)
        out = ttnn.transformer.chunked_scaled_dot_product_attention(
            input_tensor_q=tqc,
            input_tensor_k=kc,
            input_tensor_v=vc,
            page_table_tensor=pt,
            chunk_start_idx=start,
            program_config=cfg,
        )
        chunks.append(host(out, mesh, 1))
    chunked = torch.cat(chunks, 2)
    assert_pcc(full, chunked, 0.9999)
    assert float((full - chunked).abs().max()) <= 2**-7 * float(full.abs().max())
    # the tensor form of chunk_start_idx
    st = ttnn.from_torch(torch.tensor([64], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh)
    out = ttnn.transformer.chunked_scaled_dot_product_attention(
        dev(qs[:, :, 64:], mesh, dim=1), kc, vc, pt, chunk_start_idx_tensor=st, scale=1 / 8
    )
    assert torch.equal(host(out, mesh, 1), chunks[1])


def test_chunked_sdpa_errors(open_mesh):
    mesh = open_mesh((1, 1))
    f = ttnn.transformer.chunked_scaled_dot_product_attention
    q = dev(torch.randn(1, 2, 32, 64), mesh)
    kc, vc = dev(torch.randn(4, 1, 32, 64), mesh), dev(torch.randn(4, 1, 32, 64), mesh)
    pt = ttnn.from_torch(
        torch.tensor([[2, 0, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    ok = f(q, kc, vc, pt, 64)
    assert ok.shape == [1, 2, 32, 64]
    with pytest.raises(ValidationError, match="exactly one"):
        f(q, kc, vc, pt)
    with pytest.raises(ValidationError, match="exactly one"):
        f(q, kc, vc, pt, 0, chunk_start_idx_tensor=ints([0], mesh))
    with pytest.raises(ValidationError, match="paged K length"):
        f(q, kc, vc, pt, 96)
    with pytest.raises(ValidationError, match="chunk_start_idx"):
        f(q, kc, vc, pt, -32)
    with pytest.raises(ValidationError, match=r"multiple of program_config\.k_chunk_size"):
        f(q, kc, vc, pt, 32, program_config=ttnn.SDPAProgramConfig((8, 8), q_chunk_size=32, k_chunk_size=64))
    with pytest.raises(ValidationError, match="q_chunk_size"):
        f(
            dev(torch.randn(1, 2, 96, 64), mesh),
            kc,
            vc,
            ttnn.from_torch(
                torch.tensor([[2, 0, 3, 1]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
            ),
            0,
            program_config=ttnn.SDPAProgramConfig((8, 8), q_chunk_size=64, k_chunk_size=32),
        )
    with pytest.raises(ValidationError, match="shape"):
        f(q, kc, vc, pt, chunk_start_idx_tensor=ints([0, 1], mesh))
    with pytest.raises(ValidationError, match=r"page_table_tensor\.dtype"):
        f(
            q,
            kc,
            vc,
            ttnn.from_torch(
                torch.tensor([[2, 0, 3]], dtype=torch.int32), dtype=ttnn.uint16, layout=RM, device=mesh
            ),
            0,
        )
    with pytest.raises(ValidationError, match=r"page_table_tensor\.shape\[0\]"):
        f(
            q,
            kc,
            vc,
            ttnn.from_torch(
                torch.tensor([[2, 0, 3]] * 2, dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
            ),
            0,
        )
    bad = ttnn.from_torch(
        torch.tensor([[2, 9, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    with pytest.raises(ValidationError, match="physical block"):
        f(q, kc, vc, bad, 32)
    with pytest.raises(ValidationError, match="block size"):
        f(q, kc, dev(torch.randn(4, 1, 64, 64), mesh), pt, 0)
    with pytest.raises(ValidationError, match="heads"):
        f(q, kc, dev(torch.randn(4, 2, 32, 64), mesh), pt, 0)
    with pytest.raises(ValidationError, match="blocks"):
        f(q, kc, dev(torch.randn(5, 1, 32, 64), mesh), pt, 0)
    with pytest.raises(ValidationError, match="paged_cache_geometry"):
        f(q, kc, vc, pt, 0, paged_cache_geometry=(32, 1))
    with pytest.raises(ValidationError, match="memory_config"):
        f(q, kc, vc, pt, 0, memory_config=3)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)])
@pytest.mark.parametrize("kv_dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_decode_after_prefill_equals_prefill_row(open_mesh, mesh_shape, kv_dtype):
    mesh = open_mesh(mesh_shape)
    n = mesh.get_num_devices()
    users, nh, nkv, s, d, max_seq = 2, 4, 2, 64, 64, 128
    caches = [dev(torch.zeros(users, nkv * n, max_seq, d), mesh, kv_dtype, dim=1) for _ in range(2)]
    prefill_out, q_rows = [], []
    for u in range(users):
        _, (tq, tk, tv) = _qkv(mesh, 1, nh, nkv, s, s, d, kv_dtype=kv_dtype, seed=10 + u)
        ttnn.fill_cache(caches[0], tk, u)
        ttnn.fill_cache(caches[1], tv, u)
        prefill_out.append(host(ttnn.transformer.scaled_dot_product_attention(tq, tk, tv), mesh, 1)[0])
        q_rows.append(host(tq, mesh, 1)[0])
    positions = [40, 63]
    qd = torch.stack([q_rows[u][:, p] for u, p in enumerate(positions)])[None]  # [1, users, nh·n, d]
    tqd = dev(qd, mesh, mc=height_mc(mesh, users, (32, d)), dim=2)
    for kwargs in ({"cur_pos": positions}, {"cur_pos_tensor": ints(positions, mesh)}):
        out = ttnn.transformer.scaled_dot_product_attention_decode(tqd, caches[0], caches[1], **kwargs)
        assert out.shape == [1, users, nh, d] and out.memory_config() == ttnn.DRAM_MEMORY_CONFIG
        got = host(out, mesh, 2)[0]
        for u, p in enumerate(positions):
            close(prefill_out[u][:, p], got[u])
    # paged decode over the same data gives the same result exactly
    block = 32
    perm = (
        torch.randperm(users * max_seq // block, generator=torch.Generator().manual_seed(5))
        .reshape(users, -1)
        .int()
    )
    pt = ttnn.from_torch(perm, dtype=ttnn.int32, layout=RM, device=mesh)
    paged = [_paged_cache_from(mesh, host(c, mesh, 1), block, perm, kv_dtype, dim=1) for c in caches]
    pout = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        tqd, paged[0], paged[1], page_table_tensor=pt, cur_pos_tensor=ints(positions, mesh)
    )
    assert torch.equal(host(pout, mesh, 2), host(out, mesh, 2))


def test_decode_options(open_mesh):
    mesh = open_mesh((1, 1))
    users, nh, nkv, s, d = 3, 8, 1, 128, 64
    g = torch.Generator().manual_seed(7)
    k, v = torch.randn(users, nkv, s, d, generator=g), torch.randn(users, nkv, s, d, generator=g)
    tk, tv = dev(k, mesh, ttnn.bfloat8_b), dev(v, mesh, ttnn.bfloat8_b)
    ks, vs = host(tk, mesh), host(tv, mesh)
    q = torch.randn(1, users, nh, d, generator=g)
    tq = dev(q, mesh)
    qs = host(tq, mesh)
    f = ttnn.transformer.scaled_dot_product_attention_decode
    positions = [5, -1, 100]
    # -1 skips the user (zeros); sliding window keeps (pos - W, pos]; ROW_MAJOR Q gives a ROW_MAJOR output
    out = f(tq, tk, tv, cur_pos_tensor=ints(positions, mesh), sliding_window_size=16, scale=0.1)
    got = host(out, mesh)[0]
    assert not got[1].any()
    for u in (0, 2):
        p = positions[u]
        ref = sdpa_ref(
            qs[0, u][None, :, None],
            ks[u : u + 1, :, : p + 1],
            vs[u : u + 1, :, : p + 1],
            scale=0.1,
            window=16,
            q_offset=p,
        )
        close(ref[0, :, 0], got[u])
    qrm = dev(q, mesh, layout=RM)
    assert f(qrm, tk, tv, cur_pos=[0, 1, 2]).layout == RM
    # non-causal: the whole cache with an additive mask [B, 1, nh, S]
    mask = torch.where(torch.rand(users, 1, nh, s, generator=g) < 0.5, -1e9, 0.0)
    tmask = dev(mask, mesh)
    out = f(tq, tk, tv, is_causal=False, attn_mask=tmask)
    ms = host(tmask, mesh)
    for u in range(users):
        ref = sdpa_ref(
            qs[0, u][None, :, None], ks[u : u + 1], vs[u : u + 1], causal=False, mask=ms[u, 0][:, None, :]
        )
        close(ref[0, :, 0], host(out, mesh)[0, u])
    # a height-sharded output config
    out = f(tq, tk, tv, cur_pos=[1, 2, 3], memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert out.memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    # paged non-causal with a mask over the whole paged length, and a sharded uint16 page table
    block = 32
    perm = torch.arange(users * s // block).reshape(users, -1).flip(1).int()
    pk, pv = (
        _paged_cache_from(mesh, ks, block, perm, ttnn.bfloat8_b),
        _paged_cache_from(mesh, vs, block, perm, ttnn.bfloat8_b),
    )
    pt = ttnn.from_torch(perm, dtype=ttnn.int32, layout=RM, device=mesh)
    cfg = ttnn.SDPAProgramConfig((8, 8), k_chunk_size=64)
    pout = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        tq, pk, pv, pt, is_causal=False, attn_mask=tmask, program_config=cfg
    )
    assert torch.equal(host(pout, mesh), host(f(tq, tk, tv, is_causal=False, attn_mask=tmask), mesh))
    grid = ttnn.num_cores_to_corerangeset(2, mesh.compute_with_storage_grid_size(), row_wise=True)
    pt_mc = ttnn.create_sharded_memory_config(
        (users, perm.shape[1]),
        grid,
        ttnn.ShardStrategy.HEIGHT,
        use_height_and_width_as_shard_shape=True,
        tile_layout=False,
    )
    pt16 = ttnn.from_torch(
        torch.cat([perm, perm]), dtype=ttnn.uint16, layout=RM, device=mesh, memory_config=pt_mc
    )
    pos_mc = ttnn.create_sharded_memory_config(
        (1, users),
        grid,
        ttnn.ShardStrategy.HEIGHT,
        use_height_and_width_as_shard_shape=True,
        tile_layout=False,
    )
    pos16 = ttnn.from_torch(
        torch.tensor([[5, -1, 100]] * 2, dtype=torch.int32),
        dtype=ttnn.int32,
        layout=RM,
        device=mesh,
        memory_config=pos_mc,
    )
    pout2 = ttnn.transformer.paged_scaled_dot_product_attention_decode(tq, pk, pv, pt16, cur_pos_tensor=pos16)
    assert torch.equal(host(pout2, mesh), host(f(tq, tk, tv, cur_pos_tensor=ints(positions, mesh)), mesh))


def test_decode_errors(open_mesh):
    mesh = open_mesh((1, 1))
    users, nh, nkv, s, d = 2, 4, 2, 64, 64
    tq = dev(torch.randn(1, users, nh, d), mesh)
    tk, tv = dev(torch.randn(users, nkv, s, d), mesh), dev(torch.randn(users, nkv, s, d), mesh)
    f = ttnn.transformer.scaled_dot_product_attention_decode
    with pytest.raises(ValidationError, match=r"cur_pos\[1\]"):
        f(tq, tk, tv, cur_pos_tensor=ints([3, 64], mesh))
    with pytest.raises(ValidationError, match=r"cur_pos\[0\]"):
        f(tq, tk, tv, cur_pos_tensor=ints([-3, 6], mesh))
    with pytest.raises(ValidationError, match="non-negative"):
        f(tq, tk, tv, cur_pos=[-1, 3])
    with pytest.raises(ValidationError, match="exactly one"):
        f(tq, tk, tv)
    with pytest.raises(ValidationError, match="one position per user"):
        f(tq, tk, tv, cur_pos=[1])
    with pytest.raises(ValidationError, match="cur_pos_tensor shape"):
        f(tq, tk, tv, cur_pos_tensor=ints([1, 2, 3], mesh))
    with pytest.raises(ValidationError, match="multiple of the 2 K/V heads"):
        f(dev(torch.randn(1, users, 3, d), mesh), tk, tv, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="batch"):
        f(dev(torch.randn(1, 3, nh, d), mesh), tk, tv, cur_pos=[1, 2, 3])
    with pytest.raises(ValidationError, match=r"shape\[0\]"):
        f(dev(torch.randn(2, users, nh, d), mesh), tk, tv, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="K's batch"):
        f(tq, tk, dev(torch.randn(3, nkv, s, d), mesh), cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="sequence length"):
        f(tq, tk, dev(torch.randn(users, nkv, 96, d), mesh), cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="BFLOAT16 with grouped-query"):
        f(dev(torch.randn(1, users, nh, d), mesh, ttnn.bfloat8_b), tk, tv, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="interleaved output"):
        f(tq, tk, tv, cur_pos=[1, 2], memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match="HEIGHT_SHARDED when sharded"):
        f(tq, tk, tv, cur_pos=[1, 2], memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ValidationError, match="attn_mask"):
        f(tq, tk, tv, cur_pos=[1, 2], attn_mask=dev(torch.zeros(users, 1, nh, s), mesh))
    with pytest.raises(ValidationError, match="attn_mask shape"):
        f(tq, tk, tv, is_causal=False, attn_mask=dev(torch.zeros(users, 2, nh, s), mesh))
    with pytest.raises(ValidationError, match=r"attn_mask\.shape\[3\]"):
        f(tq, tk, tv, is_causal=False, attn_mask=dev(torch.zeros(users, 1, nh, 32), mesh))
    with pytest.raises(ValidationError, match="DRAM"):
        f(tq, dev(torch.randn(users, nkv, s, d), mesh, mc=ttnn.L1_MEMORY_CONFIG), tv, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="DRAM when interleaved"):
        f(dev(torch.randn(1, users, nh, d), mesh, mc=ttnn.L1_MEMORY_CONFIG), tk, tv, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="HEIGHT_SHARDED when sharded"):
        f(
            dev(torch.randn(1, users, nh, d), mesh, mc=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG),
            tk,
            tv,
            cur_pos=[1, 2],
        )
    with pytest.raises(ValidationError, match="power of 2"):
        f(tq, tk, tv, cur_pos=[1, 2], program_config=ttnn.SDPAProgramConfig((8, 8), k_chunk_size=96))
    with pytest.raises(ValidationError, match="divisor of the K length"):
        f(tq, tk, tv, cur_pos=[1, 2], program_config=ttnn.SDPAProgramConfig((8, 8), k_chunk_size=128))
    odd_k, odd_v = dev(torch.randn(users, nkv, 48, d), mesh), dev(torch.randn(users, nkv, 48, d), mesh)
    with pytest.raises(ValidationError, match="multiple of 32"):
        f(tq, odd_k, odd_v, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="is_causal"):
        f(tq, tk, tv, is_causal=None, cur_pos=[1, 2])
    with pytest.raises(ValidationError, match="attention_sink"):
        f(tq, tk, tv, cur_pos=[1, 2], attention_sink=tq)
    # paged
    p = ttnn.transformer.paged_scaled_dot_product_attention_decode
    pk, pv = dev(torch.randn(4, nkv, 32, d), mesh), dev(torch.randn(4, nkv, 32, d), mesh)
    pt = ttnn.from_torch(
        torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    assert p(tq, pk, pv, pt, cur_pos_tensor=ints([10, 40], mesh)).shape == [1, users, nh, d]
    with pytest.raises(ValidationError, match="cur_pos_tensor"):
        p(tq, pk, pv, pt)
    with pytest.raises(ValidationError, match=r"cur_pos_tensor\[1\]"):
        p(tq, pk, pv, pt, cur_pos_tensor=ints([10, 64], mesh))
    bad = ttnn.from_torch(
        torch.tensor([[0, 1], [2, 7]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    with pytest.raises(ValidationError, match="physical block"):
        p(tq, pk, pv, bad, cur_pos_tensor=ints([10, 40], mesh))
    p(tq, pk, pv, bad, cur_pos_tensor=ints([10, 20], mesh))  # block 7 is never read
    with pytest.raises(ValidationError, match=r"page_table_tensor\.dtype"):
        p(
            tq,
            pk,
            pv,
            ttnn.from_torch(torch.zeros(2, 2, dtype=torch.int32), dtype=ttnn.uint32, layout=RM, device=mesh),
            cur_pos_tensor=ints([1, 2], mesh),
        )
    with pytest.raises(ValidationError, match="page_table_tensor"):
        p(tq, pk, pv, torch.zeros(2, 2), cur_pos_tensor=ints([1, 2], mesh))
    with pytest.raises(ValidationError, match="rank"):
        p(tq, pk, pv, ints([0, 1], mesh), cur_pos_tensor=ints([1, 2], mesh))
    with pytest.raises(ValidationError, match="block size"):
        p(tq, pk, dev(torch.randn(4, nkv, 64, d), mesh), pt, cur_pos_tensor=ints([1, 2], mesh))
    with pytest.raises(ValidationError, match="block_size"):
        p(
            tq,
            dev(torch.randn(4, nkv, 16, d), mesh),
            dev(torch.randn(4, nkv, 16, d), mesh),
            pt,
            cur_pos_tensor=ints([1, 2], mesh),
        )
    with pytest.raises(ValidationError, match="positive size"):
        p(tq, pk, pv, pt, is_causal=False)
    with pytest.raises(ValidationError, match="divisor of the paged K length"):
        p(tq, pk, pv, pt, is_causal=False, program_config=ttnn.SDPAProgramConfig((8, 8), k_chunk_size=128))
    with pytest.raises(ValidationError, match="paged K length"):
        p(
            tq,
            pk,
            pv,
            pt,
            is_causal=False,
            attn_mask=dev(torch.zeros(users, 1, nh, 96), mesh),
            program_config=ttnn.SDPAProgramConfig((8, 8), k_chunk_size=64),
        )


def test_core_grid_helpers_match_ttnn_decomposition():
    from tttv2.ttnn.ops.attention import _sub_grid

    full = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))])
    for count in (1, 7, 8, 12, 16, 24, 64):
        assert _sub_grid(full, 0, count) == ttnn.num_cores_to_corerangeset(
            count, ttnn.CoreCoord(8, 8), row_wise=True
        )
    # K's grid after 4 Q users, spanning two full rows: [row 0 tail], [rows 1-2], [row 3 head]
    got = _sub_grid(full, 4, 24)
    assert got.num_cores() == 24 and len(got.ranges) == 3
    assert ttnn.CoreRange(ttnn.CoreCoord(0, 1), ttnn.CoreCoord(7, 2)) in got.ranges


def test_more_layout_branches(open_mesh):
    mesh = open_mesh((1, 1))
    # sharded heads concatenated into an interleaved output
    q = dev(torch.randn(1, 4, 32, 64), mesh, mc=height_mc(mesh, 4, (32, 64)))
    merged = ttnn.experimental.nlp_concat_heads(q, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    assert merged.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    assert torch.equal(host(merged, mesh)[0, 0], host(q, mesh)[0].transpose(0, 1).reshape(32, 256))
    # HF rotary from a sharded input into an interleaved output
    ang = rope_angles(range(32), 64)
    tc = dev(torch.cat([ang.cos()] * 2, -1)[None, None], mesh)
    ts = dev(torch.cat([ang.sin()] * 2, -1)[None, None], mesh)
    out = ttnn.experimental.rotary_embedding(q, tc, ts, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    ref = ttnn.experimental.rotary_embedding(dev(host(q, mesh), mesh), tc, ts)
    assert not out.is_sharded() and torch.equal(host(out, mesh), host(ref, mesh))


def test_paged_fused_update_paged_and_row_major(open_mesh):
    mesh = open_mesh((1, 1))
    users, nkv, hd, block = 2, 8, 128, 32
    pt = ttnn.from_torch(
        torch.tensor([[3, 1], [0, 2]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    k = dev(torch.randn(1, users, nkv, hd), mesh, layout=RM, mc=height_mc(mesh, users, (nkv, hd)))
    v = dev(torch.randn(1, users, nkv, hd), mesh, layout=RM, mc=height_mc(mesh, users, (nkv, hd), users))
    kc, vc = dev(torch.zeros(4, nkv, block, hd), mesh), dev(torch.zeros(4, nkv, block, hd), mesh)
    ttnn.experimental.paged_fused_update_cache(
        kc, k, vc, v, update_idxs_tensor=ints([40, 7], mesh), page_table=pt
    )
    ks, vs = host(k, mesh)[0], host(v, mesh)[0]
    assert torch.equal(host(kc, mesh)[1, :, 8], ks[0]) and torch.equal(host(kc, mesh)[0, :, 7], ks[1])
    assert torch.equal(host(vc, mesh)[1, :, 8], vs[0]) and torch.equal(host(vc, mesh)[0, :, 7], vs[1])


def test_sdpa_program_grid_must_fit_device(open_mesh):
    mesh = open_mesh((1, 1))
    _, (tq, tk, tv) = _qkv(mesh, 1, 2, 1, 32, 32, 32)
    cfg = ttnn.SDPAProgramConfig((9, 8), q_chunk_size=32, k_chunk_size=32)
    with pytest.raises(ValidationError, match="compute_with_storage_grid_size"):
        ttnn.transformer.scaled_dot_product_attention(tq, tk, tv, program_config=cfg)


def test_decode_first_form_positional_cur_pos_and_users_on_dim_1(open_mesh):
    """SDPA decode's first form (mid-2024, MQA: the Llama-2-70B T3000 attention): ``cur_pos`` passed positionally
    and a cache ``[1, B, S, D]`` (one KV head, the users on dim 1) gives what today's form gives for the same cache
    as ``[B, 1, S, D]``, bit for bit; a cache of today's shape is read as before."""
    mesh = open_mesh((1, 1))
    users, nh, s, d = 4, 8, 64, 64
    g = torch.Generator().manual_seed(5)
    q = dev(torch.randn(1, users, nh, d, generator=g), mesh)
    k, v = (torch.randn(users, 1, s, d, generator=g) for _ in range(2))
    positions = [3, 17, 40, 63]
    f = ttnn.transformer.scaled_dot_product_attention_decode
    today = f(q, dev(k, mesh), dev(v, mesh), cur_pos=positions)
    first = f(q, dev(k.reshape(1, users, s, d), mesh), dev(v.reshape(1, users, s, d), mesh), positions)
    assert first.shape == today.shape == [1, users, nh, d]
    assert torch.equal(host(first, mesh), host(today, mesh))
    one_user = f(dev(torch.randn(1, 1, nh, d, generator=g), mesh), dev(k[:1], mesh), dev(v[:1], mesh), [5])
    assert one_user.shape == [1, 1, nh, d]


def test_first_form_mqa_cache_chain_matches_torch(open_mesh):
    """The Llama-2-70B T3000 attention's decode chain in the first form: an MQA cache ``[1, B, S, D]`` (users on
    dim 1) written a position at a time by ``update_cache`` from K rows ``[1, B, 32, D]`` (head 0 real, the
    padded heads after it), then attended by SDPA decode with a positional ``cur_pos``: torch's attention of each
    user's query over its own written positions."""
    mesh = open_mesh((1, 1))
    users, nh, s, d, steps = 4, 8, 64, 64, 5
    g = torch.Generator().manual_seed(9)
    caches = [dev(torch.zeros(1, users, s, d), mesh) for _ in range(2)]
    written = [torch.zeros(users, steps, d), torch.zeros(users, steps, d)]
    for pos in range(steps):
        for cache, hist in zip(caches, written):
            rows = torch.randn(1, users, 32, d, generator=g)  # row 0 of each user is the one KV head
            ttnn.update_cache(cache, dev(rows, mesh), pos)
            hist[:, pos] = host(dev(rows, mesh), mesh)[0, :, 0]
    q = torch.randn(1, users, nh, d, generator=g)
    scale = 1 / math.sqrt(d)
    out = ttnn.transformer.scaled_dot_product_attention_decode(
        dev(q, mesh), caches[0], caches[1], [steps - 1] * users, scale=scale
    )
    ref = sdpa_ref(q[0][:, :, None], written[0][:, None], written[1][:, None], causal=False, scale=scale)
    close(ref[:, :, 0][None], host(out, mesh))
