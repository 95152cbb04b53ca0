"""Attention2D (Galaxy-style 2-D meshes) against Hugging Face (through __init__ and from_config, over
upstream-style cases), against HF through from_model_args, against tttv1's Galaxy Attention bit for bit, and its
rejections."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, RMSNorm1DConfig
from tttv2.modules.attention import Attention2D, Attention2DConfig
from tttv2.testing import assert_pcc
from tttv2.testing.cases import pcc_threshold
from tttv2.testing.host import to_host
from tttv2.testing.legacy import tttv1_model_args

from ..cases import ATTENTION_2D_CASES, attention_case_args, recorded
from . import _reference as R
from ._harness import AttentionCase, build, run
from ._tttv1 import compare_with_tttv1, hf_catalogue_attention, tttv1_attention

C = AttentionCase
# the cases tttv1's Galaxy demos run (emitted by collect-cases into ../cases.py), then the features, ratios and
# orientation they never run
FEATURE_CASES = [
    # heads over the 8 rows, dim over the 4 columns; the QKV / WO matmuls in 128-row pieces
    C(
        (8, 4),
        "llama",
        8,
        8,
        "prefill",
        256,
        options=(("max_qkv_mm_seq_len", 128), ("max_wo_mm_seq_len", 128)),
    ),
    C((8, 4), "qwen2", 16, 2, "decode", 0, batch=32),  # 2 KV heads replicated over 8 rows, QKV bias
    C((8, 4), "mistral", 8, 8, "decode", 128, "paged", batch=8),  # 2 users per column, different positions
    C((8, 4), "qwen3", 16, 8, "decode", 0, batch=4),  # q/k norm; one user per column
    C((8, 4), "phi3", 8, 8, "prefill", 256, "paged-chunked"),
    C((8, 4), "llama", 8, 8, "decode", 0, batch=32, options=(("use_composite_all_reduce", True),)),
    C((4, 8), "llama", 8, 4, "decode", 0, batch=32),  # happy path, the other orientation: 4 users per column
]


CASES = [
    *recorded(ATTENTION_2D_CASES, attention_case_args),
    *(pytest.param(case, id=case.id) for case in FEATURE_CASES),
]


@pytest.mark.parametrize("case", CASES)
def test_attention_2d_vs_reference(case, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    module = build(case, mesh)
    rows, cols = case.mesh_shape
    assert module.users == max(case.batch // cols, 1)
    assert module.layout.local_kv_heads == max(case.n_kv_heads // rows, 1)
    for label, expected, got in run(case, mesh, module):
        assert got.shape == expected.shape, label
        assert_pcc(expected, got, pcc_threshold("attention"))


def test_attention_2d_vs_reference_from_model_args(ttnn_mesh_pool):
    """Qwen2.5-7B-tiny (QKV bias, 8 KV heads on the 8 rows) through from_model_args against HF's attention."""
    import torch

    mesh = ttnn_mesh_pool((8, 4))
    name = "Qwen2.5-7B-tiny"
    module, rope, args = tttv1_attention(mesh, name, ours=True)
    config, hf = hf_catalogue_attention(name)
    x = np.random.default_rng(3).standard_normal((1, 129, args.dim)).astype(np.float32)
    expected = R.reference_attention(hf, config, x)
    out = module(LazyWeight(x[None, :, :128]), None, R.prefill_rot_mats(mesh, config, 0, 128), mode="prefill")
    assert_pcc(expected[0, :128], to_host(out)[0, 0], pcc_threshold("attention"))
    token = np.zeros((1, 1, 32, args.dim), dtype=np.float32)
    token[0, 0, 0] = x[0, 128]
    rot = rope.get_rot_mats(torch.tensor([128]))
    out = module(LazyWeight(token), module.prepare_positions([128]), rot, mode="decode")
    assert_pcc(expected[0, 128:], to_host(out)[0, 0, :1], pcc_threshold("attention"))


TTTV1_CASES = [
    ("Qwen2.5-7B-tiny", 1, False, False),  # QKV bias added after the column all-reduce
    ("Mistral-7B-tiny", 32, False, False),  # 8 users per column, each column fills its own users' caches
    ("Llama-3.1-8B-tiny", 1, True, True),  # paged, with q/k norms
]


@pytest.mark.parametrize("name, batch, paged, qk_norm", TTTV1_CASES, ids=[c[0] for c in TTTV1_CASES])
def test_attention_2d_matches_tttv1(name, batch, paged, qk_norm, ttnn_mesh_pool):
    """Same ModelArgs, state dict and inputs through tttv1's Galaxy Attention and Attention2D.from_model_args:
    the op sequence is tttv1's, so the outputs (the rows of real users) and KV caches are equal to the bit."""
    compare_with_tttv1(
        ttnn_mesh_pool((8, 4)), name, batch=batch, paged=paged, qk_norm=qk_norm, prefill_users=2
    )


def test_attention_2d_config_resolution(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((8, 4))
    case = C((8, 4), "qwen2", 16, 2, "decode", 0, batch=8)
    config, hf = case.hf()
    w = R.attention_weights(hf, config)
    user = R.config_from_weights(
        Attention2DConfig,
        w,
        wqkv_bias=LazyWeight(w["bias"]),
        n_heads=16,
        n_kv_heads=2,
        head_dim=32,
        max_batch_size=8,
        max_seq_len=64,
        mesh_device=mesh,
    )
    before = dataclasses.replace(user)
    module = Attention2D.from_config(user)
    assert user == before  # the caller's config is untouched
    cfg = module.config
    assert module.users == 2 and cfg.kv_cache[0].shape == (
        2,
        1,
        64,
        32,
    )  # 2 users per column, 1 KV head per row
    assert (
        cfg.qkv_dtype == ttnn.bfloat8_b
        and cfg.decode_wo_dtype == ttnn.bfloat8_b
        and not cfg.use_composite_all_reduce
    )
    placements = cfg.wqkv.mesh_mapper_config.placements
    assert [p.dim for p in placements] == [-1, -2]  # heads over the rows, dim over the columns
    # user selection: the device in column 2 keeps rows 4, 5 of the QKV tile; the gather puts them back there
    picker = cfg.qkv_user_picker.source
    assert picker.shape == (1, 32, 8, 32) and np.array_equal(
        np.argwhere(picker[0, 2 + 4 * 3]), [[0, 4], [1, 5]]
    )
    gather = cfg.user_gather_picker.source
    assert np.array_equal(np.argwhere(gather[0, 0])[4:6], [[4, 64], [5, 65]])
    assert not cfg.wqkv.is_loaded() and not cfg.qkv_user_picker.is_loaded()
    module.load_device_weights()
    assert cfg.wqkv.is_loaded() and cfg.qkv_user_picker.is_loaded() and module._bias_decode.is_loaded()
    again = Attention2D.from_config(cfg)
    assert again.config.wqkv.source is cfg.wqkv.source  # a resolved config resolves to itself


def test_attention_2d_rejections(ttnn_mesh_pool):
    t3k, galaxy = ttnn_mesh_pool((1, 8)), ttnn_mesh_pool((8, 4))
    config_hf, hf = R.hf_attention(R.key("llama", n_heads=8, n_kv_heads=8, head_dim=32, dim=256))
    w = R.attention_weights(hf, config_hf)
    wqkv, wo = LazyWeight(w["wqkv"]), LazyWeight(w["wo"])

    def config(**kw):
        fields = dict(
            wqkv=wqkv, wo=wo, n_heads=8, n_kv_heads=8, head_dim=32, max_seq_len=64, mesh_device=galaxy
        )
        return Attention2DConfig(**{**fields, **kw})

    with pytest.raises(
        ValueError, match=r"Attention2D runs on 2-D meshes \(8x4, 4x8\); got a 1x8 mesh; use Attention1D"
    ):
        Attention2D(LazyWeight(w["wqkv"], device=t3k), wo, 8, 8, 32, 32, 64)
    with pytest.raises(
        ValueError, match=r"max_batch_size must be 1 or a multiple of the 4 mesh columns .*got 6"
    ):
        Attention2D.from_config(config(max_batch_size=6))
    with pytest.raises(ValueError, match=r"n_heads \(4\) must divide evenly over the 8 mesh rows"):
        Attention2D.from_config(
            config(n_heads=4, n_kv_heads=4, wqkv=LazyWeight(w["wqkv"][:, :384]), wo=LazyWeight(w["wo"][:128]))
        )
    odd = ttnn_mesh_pool((2, 3))
    with pytest.raises(
        ValueError, match=r"dim must split into whole tiles over the 3 mesh columns, got dim=256"
    ):
        Attention2D.from_config(config(mesh_device=odd))
    with pytest.raises(ValueError, match=r"the 3 mesh columns must divide the 32 users of a tile"):
        Attention2D.from_config(
            config(
                mesh_device=odd,
                wqkv=LazyWeight(np.zeros((288, 768), np.float32)),
                wo=LazyWeight(np.zeros((256, 288), np.float32)),
            )
        )
    with pytest.raises(TypeError, match=r"q_norm_config must be a RMSNorm2DConfig, got RMSNorm1DConfig"):
        Attention2D.from_config(
            config(q_norm_config=RMSNorm1DConfig(weight=LazyWeight(np.ones(32, np.float32))))
        )
    module = Attention2D.from_config(config(max_batch_size=4))
    with pytest.raises(ValueError, match=r"chunked prefill \(chunk_start_idx\) needs a paged KV cache"):
        module.prefill_forward(
            LazyWeight(np.zeros((1, 1, 128, 256), np.float32)),
            R.prefill_rot_mats(galaxy, config_hf, 0, 128),
            chunk_start_idx=128,
        )


def test_attention_2d_from_model_args_rejections(ttnn_mesh_pool, monkeypatch):
    mesh = ttnn_mesh_pool((1, 8))
    args = tttv1_model_args(mesh, "Llama-3.1-8B-tiny")
    with pytest.raises(
        ValueError, match=r"Attention2D requires a Galaxy mesh \(8x4\); .* use Attention1D instead"
    ):
        Attention2D.from_model_args(mesh, None, args, {}, None, 0, {})
    monkeypatch.setenv("TTTV1_CCL_BF16", "1")
    galaxy = ttnn_mesh_pool((8, 4))
    args = tttv1_model_args(galaxy, "Llama-3.1-8B-tiny")
    with pytest.raises(ValueError, match=r"ccl_dtype must be bfloat8_b .* got DataType.BFLOAT16"):
        Attention2D.from_model_args(galaxy, None, args, {}, None, 0, {})
