"""Attention1D against Hugging Face (through __init__ and from_config, over upstream-style cases), against HF
through from_model_args, against tttv1's Attention bit for bit, its static-branch freedom, and its rejections."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, RMSNorm1DConfig, get_tt_ccl
from tttv2.modules.attention import Attention1D, Attention1DConfig, PagedAttentionConfig
from tttv2.testing import assert_pcc
from tttv2.testing.cases import pcc_threshold
from tttv2.testing.host import to_host

from ..cases import ATTENTION_1D_CASES, attention_case_args, recorded
from . import _reference as R
from ._harness import AttentionCase, build, run
from ._tttv1 import compare_with_tttv1, fused_wide_args, hf_catalogue_attention, tttv1_attention

C = AttentionCase
# upstream's case style: mesh × family × heads (real GQA ratios) × mode × seq_len × KV cache × QKV dtype; the cases
# tttv1's demos run (emitted by collect-cases into ../cases.py), then the features and ratios they never run
FEATURE_CASES = [
    # Llama-3.1-8B's 32:8, happy path; 256 tokens reach min_kv_prefill_shard_seqlen (the KV fill via an L1 shard)
    C((1, 1), "llama", 32, 8, "prefill", 256),
    C((1, 1), "mistral", 8, 2, "decode", 0, batch=32, steps=3, options=(("sliding_window", 2),)),
    # the QKV / WO matmuls of long prompts run in pieces (here 128 rows, by default 2048 / 1024)
    C(
        (1, 1),
        "llama",
        8,
        2,
        "prefill",
        256,
        "paged",
        options=(("max_qkv_mm_seq_len", 128), ("max_wo_mm_seq_len", 128)),
    ),
    C((1, 2), "qwen2", 28, 4, "prefill", 128, "paged", "bf16"),  # Qwen2.5-7B's 28:4 with QKV bias
    C((1, 2), "qwen3", 16, 8, "decode", 128, batch=4),  # q/k norm, users at different positions
    C((1, 2), "phi3", 8, 8, "prefill", 256, "paged-chunked"),  # fused qkv_proj, chunked prefill
    C((1, 8), "llama", 8, 2, "decode", 0, batch=32),  # 8 devices, 2 KV heads: each replicated on 4 devices
    C((1, 8), "llama", 32, 8, "decode", 128, "paged", batch=4),
    C((1, 8), "qwen2", 16, 2, "prefill", 128),  # KV replication with bias (8 devices, 2 KV heads)
]


CASES = [
    *recorded(ATTENTION_1D_CASES, attention_case_args),
    *(pytest.param(case, id=case.id) for case in FEATURE_CASES),
]


@pytest.mark.parametrize("case", CASES)
def test_attention_1d_vs_reference(case, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    module = build(case, mesh)
    assert module.layout.local_kv_heads == max(case.n_kv_heads // mesh.get_num_devices(), 1)
    for label, expected, got in run(case, mesh, module):
        assert got.shape == expected.shape, label
        assert_pcc(expected, got, pcc_threshold("attention"))


def test_attention_1d_fused_all_gather_matmul_on_ring(ttnn_mesh_pool):
    """On an 8-device ring with dim / 32 / 8 a multiple of 8, decode fuses the head all-gather into the WO matmul
    and prefill all-gathers the heads before WO: no reduction, WO split by columns."""
    mesh = ttnn_mesh_pool((1, 8))
    case = C((1, 8), "llama", 8, 8, "decode", 0, batch=2, steps=2, head_dim=64, dim=2048)
    config, hf = case.hf()
    w = R.attention_weights(hf, config)
    module = Attention1D.from_config(
        R.config_from_weights(
            Attention1DConfig,
            w,
            n_heads=8,
            n_kv_heads=8,
            head_dim=64,
            max_batch_size=2,
            max_seq_len=256,
            mesh_device=mesh,
            topology=ttnn.Topology.Ring,
        )
    )
    assert module.config.use_fused_all_gather_matmul
    assert module.config.wo.mesh_mapper_config.placements[0].dim == -1  # WO split by columns
    with ttnn.OpTrace() as trace:
        results = run(case, mesh, module)
        results += run(dataclasses.replace(case, mode="prefill", seq_len=128, batch=1), mesh, module)
    assert "ttnn.experimental.all_gather_matmul_async" in trace.names
    assert "ttnn.experimental.reduce_scatter_minimal_async" not in trace.names
    for _label, expected, got in results:
        assert_pcc(expected, got, pcc_threshold("attention"))


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 8)], ids=["1x1", "1x8"])
def test_attention_1d_vs_reference_from_model_args(mesh_shape, ttnn_mesh_pool):
    """Qwen2.5-7B-tiny (QKV bias, head_dim 64) through from_model_args against HF's Qwen2Attention."""
    mesh = ttnn_mesh_pool(mesh_shape)
    name = "Qwen2.5-7B-tiny"
    module, rope, args = tttv1_attention(mesh, name, ours=True)
    config, hf = hf_catalogue_attention(name)
    x = np.random.default_rng(3).standard_normal((1, 129, args.dim)).astype(np.float32)
    expected = R.reference_attention(hf, config, x)
    out = module(LazyWeight(x[None, :, :128]), None, R.prefill_rot_mats(mesh, config, 0, 128), mode="prefill")
    assert_pcc(expected[0, :128], to_host(out)[0, 0], pcc_threshold("attention"))
    token = np.zeros((1, 1, 32, args.dim), dtype=np.float32)
    token[0, 0, 0] = x[0, 128]
    out = module(
        LazyWeight(token),
        module.prepare_positions([128]),
        rope.get_rot_mats(_torch_positions([128])),
        mode="decode",
    )
    assert_pcc(expected[0, 128:], to_host(out)[0, 0, :1], pcc_threshold("attention"))


def _torch_positions(values):
    import torch

    return torch.tensor(values)


# each 1-D mesh, both modes: Qwen (bias), Llama (GQA 2:1, paged), Phi-3 with added q/k norms, batch 4
TTTV1_CASES = [
    ((1, 1), "Qwen2.5-7B-tiny", 1, False, False),
    ((1, 2), "Llama-3.1-8B-tiny", 4, True, False),
    ((1, 8), "Phi-3-mini-tiny", 2, False, True),
]


@pytest.mark.parametrize(
    "mesh_shape, name, batch, paged, qk_norm",
    TTTV1_CASES,
    ids=[f"{m[0]}x{m[1]}-{n}" for m, n, *_ in TTTV1_CASES],
)
def test_attention_1d_matches_tttv1(mesh_shape, name, batch, paged, qk_norm, ttnn_mesh_pool):
    """Same ModelArgs, state dict and inputs through tttv1's Attention and Attention1D.from_model_args: the op
    sequence is tttv1's, so prefill and decode outputs are equal to the bit (and land in the same memory config)."""
    compare_with_tttv1(ttnn_mesh_pool(mesh_shape), name, batch=batch, paged=paged, qk_norm=qk_norm)


def test_attention_1d_matches_tttv1_fused_all_gather_matmul(ttnn_mesh_pool):
    """A dim-2048 Llama on a T3K ring: tttv1 and Attention1D both take the fused all-gather + WO path."""
    mesh = ttnn_mesh_pool((1, 8))
    ttnn.SetDefaultDevice(mesh)  # the system is a T3K: ring topology
    try:
        args = fused_wide_args(mesh)
        assert args.model_config["USE_FUSED_ALL_GATHER_MATMUL"]
        with ttnn.OpTrace() as trace:
            compare_with_tttv1(mesh, args, batch=1, paged=False, qk_norm=False)
    finally:
        ttnn.SetDefaultDevice(None)
    assert (
        trace.names.count("ttnn.experimental.all_gather_matmul_async") == 2 * 2
    )  # 2 decode steps, both sides


def test_attention_1d_config_resolution(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 8))
    config, hf = C((1, 8), "qwen2", 16, 2, "prefill", 128).hf()
    w = R.attention_weights(hf, config)
    user = Attention1DConfig(
        wqkv=LazyWeight(w["wqkv"], name="qkv"),
        wo=LazyWeight(w["wo"], dtype=ttnn.bfloat16),
        wqkv_bias=LazyWeight(w["bias"]),
        n_heads=16,
        n_kv_heads=2,
        head_dim=32,
        max_batch_size=4,
        max_seq_len=64,
        mesh_device=mesh,
        paged_attention_config=PagedAttentionConfig(block_size=32, max_num_blocks=8),
    )
    before = dataclasses.replace(user)
    module = Attention1D.from_config(user)
    assert (
        user == before and user.dim is None and user.wqkv.device is None
    )  # the caller's config is untouched
    cfg = module.config
    assert cfg.wqkv_per_device and not user.wqkv_per_device
    assert cfg.dim == 256 and cfg.wqkv.name == "qkv" and cfg.wo.dtype == ttnn.bfloat16  # user choices kept
    assert cfg.wqkv.dtype == ttnn.bfloat8_b and cfg.kv_cache_dtype == ttnn.bfloat8_b and cfg.scale == 32**-0.5
    assert cfg.qkv_dtype == ttnn.bfloat16 and cfg.prefill_attention_dtype == ttnn.bfloat8_b
    assert not cfg.use_fused_all_gather_matmul and cfg.tt_ccl is get_tt_ccl(mesh)
    assert cfg.prefill_xqkv_prg_config(128) is cfg.prefill_xqkv_prg_config(128)  # memoised per seq_len
    # 2 KV heads over 8 devices: device d holds Q heads 2d, 2d+1 and KV head d // 4 (replicated)
    layout = module.layout
    assert (layout.local_heads, layout.local_kv_heads, layout.kv_repeat) == (2, 1, 4)
    per_device = cfg.wqkv.source.reshape(256, 8, 4, 32)  # [dim, device, (q, q, k, v), head_dim]
    q_heads = w["wqkv"][:, : 16 * 32].reshape(256, 16, 32)
    k_heads = w["wqkv"][:, 16 * 32 : 18 * 32].reshape(256, 2, 32)
    np.testing.assert_array_equal(per_device[:, 5, :2], q_heads[:, 10:12])
    np.testing.assert_array_equal(per_device[:, 5, 2], k_heads[:, 1])
    assert cfg.wqkv.shape == (1, 1, 256, 8 * 4 * 32) and cfg.wqkv_bias.shape == (8 * 4 * 32,)
    assert cfg.kv_cache[0].shape == (8, 1, 32, 32)  # paged: [blocks, local kv heads, block, head_dim]
    assert not cfg.wqkv.is_loaded() and not cfg.kv_cache[0].is_loaded()  # construction never converts
    module.load_device_weights()
    loaded = cfg.wqkv.get_device_weight()
    module.load_device_weights()
    assert cfg.wqkv.get_device_weight() is loaded and list(loaded.shape) == [1, 1, 256, 128]
    assert [list(c.shape) for c in module.kv_cache] == [[8, 1, 32, 32]] * 2
    # a resolved config resolves to itself (its weights are already laid out per device)
    again = Attention1D.from_config(cfg)
    assert again.config.wqkv_per_device and again.config.wqkv.source is cfg.wqkv.source


def test_attention_1d_external_kv_cache(ttnn_mesh_pool):
    """A serving engine owns the cache and passes it to every call; the module then allocates none."""
    mesh = ttnn_mesh_pool((1, 2))
    case = C((1, 2), "llama", 8, 2, "decode", 0, batch=2, steps=2)
    config, hf = case.hf()
    w = R.attention_weights(hf, config)
    module = Attention1D.from_config(
        R.config_from_weights(
            Attention1DConfig,
            w,
            n_heads=8,
            n_kv_heads=2,
            head_dim=32,
            max_batch_size=2,
            max_seq_len=64,
            mesh_device=mesh,
            external_kv_cache=True,
        )
    )
    assert module.config.kv_cache is None

    def token():
        return LazyWeight(np.ones((1, 1, 32, 256), np.float32))  # a fresh input per call: forwards consume it

    positions = LazyWeight(np.zeros(2, np.int32))
    rot = R.decode_rot_mats(mesh, config, [0, 0])
    with pytest.raises(ValueError, match=r"Attention1D was built with external_kv_cache=True: pass kv_cache"):
        module.decode_forward(token(), positions, rot)
    owner = Attention1D.from_config(dataclasses.replace(module.config, external_kv_cache=False))
    served = module.decode_forward(token(), positions, rot, kv_cache=owner.kv_cache)  # writes owner's cache
    assert np.abs(to_host(owner.kv_cache[0])).max() > 0
    own = owner.decode_forward(
        token(), positions, rot
    )  # the same step again from owner's own (now filled) cache
    np.testing.assert_array_equal(to_host(served), to_host(own))


def _weights(family="llama", n_heads=8, n_kv_heads=2):
    config, hf = R.hf_attention(R.key(family, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=32, dim=256))
    return config, R.attention_weights(hf, config)


def test_attention_1d_rejections(ttnn_mesh_pool):
    galaxy, single = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 1))
    _, w = _weights()
    wqkv, wo = LazyWeight(w["wqkv"]), LazyWeight(w["wo"])

    def config(**kw):
        fields = dict(
            wqkv=wqkv, wo=wo, n_heads=8, n_kv_heads=2, head_dim=32, max_seq_len=64, mesh_device=single
        )
        return Attention1DConfig(**{**fields, **kw})

    with pytest.raises(
        ValueError, match=r"Attention1D runs on 1-D meshes .* got a 8x4 mesh; use Attention2D"
    ):
        Attention1D(LazyWeight(w["wqkv"], device=galaxy), wo, 8, 2, 32, 32, 64)
    with pytest.raises(ValueError, match=r"Attention1D: n_heads is required"):
        Attention1D.from_config(config(n_heads=None))
    with pytest.raises(
        ValueError, match=r"Attention1D: wqkv must have shape \(256, 384\) .* got \(256, 320\)"
    ):
        Attention1D.from_config(config(wqkv=LazyWeight(w["wqkv"][:, :320])))
    with pytest.raises(ValueError, match=r"Attention1D: wo must have shape \(256, 256\)"):
        Attention1D.from_config(config(wo=LazyWeight(w["wo"][:128])))
    with pytest.raises(TypeError, match=r"Attention1D: wo must be a LazyWeight, got ndarray"):
        Attention1D.from_config(config(wo=w["wo"]))
    with pytest.raises(ValueError, match=r"n_heads \(8\) must be a multiple of n_kv_heads \(3\)"):
        Attention1D.from_config(config(n_kv_heads=3))
    with pytest.raises(ValueError, match=r"head_dim must be a multiple of 32, got 16"):
        Attention1D.from_config(config(head_dim=16, n_heads=16))
    with pytest.raises(ValueError, match=r"max_batch_size must be at most 32 .* got 64"):
        Attention1D.from_config(config(max_batch_size=64))
    with pytest.raises(ValueError, match=r"max_seq_len is required"):
        Attention1D.from_config(config(max_seq_len=None))
    with pytest.raises(ValueError, match=r"max_seq_len must be a multiple of 32, got 100"):
        Attention1D.from_config(config(max_seq_len=100))
    with pytest.raises(ValueError, match=r"block_size must be a multiple of 32, got 16"):
        Attention1D.from_config(config(paged_attention_config=PagedAttentionConfig(block_size=16)))
    with pytest.raises(TypeError, match=r"paged_attention_config needs a block_size attribute"):
        Attention1D.from_config(config(paged_attention_config=object()))
    with pytest.raises(ValueError, match=r"wqkv_bias must hold 384 values"):
        Attention1D.from_config(config(wqkv_bias=LazyWeight(np.zeros(100, np.float32))))
    with pytest.raises(TypeError, match=r"q_norm_config must be a RMSNorm1DConfig, got dict"):
        Attention1D.from_config(config(q_norm_config={}))
    with pytest.raises(
        ValueError, match=r"k_norm_config.weight must hold head_dim=32 values, got shape \(64,\)"
    ):
        Attention1D.from_config(
            config(k_norm_config=RMSNorm1DConfig(weight=LazyWeight(np.ones(64, np.float32))))
        )
    with pytest.raises(ValueError, match=r"use_fused_all_gather_matmul needs more than one device"):
        Attention1D.from_config(config(use_fused_all_gather_matmul=True))
    with pytest.raises(ValueError, match=r"sliding_window must be a positive int, got 0"):
        Attention1D.from_config(config(sliding_window=0))
    with pytest.raises(ValueError, match=r"n_heads \(8\) must divide evenly over the 3 devices"):
        Attention1D.from_config(config(mesh_device=ttnn_mesh_pool((1, 3))))
    with pytest.raises(
        ValueError, match=r"n_kv_heads \(3\) must divide evenly over the 4 devices, or divide 4"
    ):
        Attention1D.from_config(
            config(
                n_heads=12,
                n_kv_heads=3,
                wqkv=LazyWeight(np.zeros((256, 576), np.float32)),
                wo=LazyWeight(np.zeros((384, 256), np.float32)),
                mesh_device=ttnn_mesh_pool((1, 4)),
            )
        )

    with pytest.raises(ValueError, match=r"dim must split into whole tiles over 8 devices, got dim=320"):
        Attention1D.from_config(
            config(
                wqkv=LazyWeight(np.zeros((320, 384), np.float32)),
                wo=LazyWeight(np.zeros((256, 320), np.float32)),
                mesh_device=ttnn_mesh_pool((1, 8)),
            )
        )
    with pytest.raises(TypeError, match=r"wqkv_bias must be a LazyWeight, got ndarray"):
        Attention1D.from_config(config(wqkv_bias=np.zeros(384, np.float32)))

    module = Attention1D.from_config(config())
    config_hf, _ = _weights()
    rot = R.prefill_rot_mats(single, config_hf, 0, 128)
    with pytest.raises(ValueError, match=r"seq_len must be a positive multiple of 128, got 96"):
        module.prefill_forward(LazyWeight(np.zeros((1, 1, 96, 256), np.float32)), rot)
    folded = Attention1D.from_config(config(max_qkv_mm_seq_len=256, max_seq_len=512))
    with pytest.raises(ValueError, match=r"seq_len 384 must be a multiple of 256 once it exceeds 256"):
        folded.prefill_forward(
            LazyWeight(np.zeros((1, 1, 384, 256), np.float32)), R.prefill_rot_mats(single, config_hf, 0, 384)
        )
    with pytest.raises(ValueError, match=r"chunked prefill \(chunk_start_idx\) needs a paged KV cache"):
        module.prefill_forward(LazyWeight(np.zeros((1, 1, 128, 256), np.float32)), rot, chunk_start_idx=128)
    windowed = Attention1D.from_config(
        config(sliding_window=64, paged_attention_config=PagedAttentionConfig(32, 4))
    )
    with pytest.raises(
        ValueError, match=r"chunked prefill \(chunk_start_idx\) is not available with a sliding window"
    ):
        windowed.prefill_forward(LazyWeight(np.zeros((1, 1, 128, 256), np.float32)), rot, chunk_start_idx=128)
    with pytest.raises(ValueError, match=r"Attention1D: mode must be 'decode' or 'prefill'"):
        module(LazyWeight(np.zeros((1, 1, 32, 256), np.float32)), mode="train")
    with pytest.raises(
        TypeError, match=r"Attention1D.decode_forward: x must be a ttnn.Tensor or a LazyWeight"
    ):
        module.decode_forward(np.zeros((1, 1, 32, 256), np.float32), None, rot)


def test_attention_1d_from_model_args_rejects_galaxy(ttnn_mesh_pool):
    from tttv2.testing.legacy import tttv1_model_args

    galaxy = ttnn_mesh_pool((8, 4))
    args = tttv1_model_args(galaxy, "Llama-3.1-8B-tiny")
    with pytest.raises(
        ValueError, match=r"Attention1D cannot be used for Galaxy devices; use Attention2D instead"
    ):
        Attention1D.from_model_args(galaxy, None, args, {}, None, 0, {})


SHARED_STEPS = ["_attend_decode", "_attend_prefill", "_prefill_input", "_positions", "_table", "_fold_rows"]


@pytest.mark.parametrize("entry", SHARED_STEPS)
def test_attention_shared_steps_branch_only_on_runtime_facts(entry):
    """The forward steps Attention1D and Attention2D inherit from AttentionBase (trace-deps does not follow a
    class into its base in another file, so tests/modules/test_static_branches.py cannot see them): every branch
    they reach, including the strategies bound at construction, depends on a call argument or a shape."""
    import tttv2.modules.attention._shared as shared
    from tttv2_tools.trace_dependencies import analyze

    analysis = analyze(Path(shared.__file__), None, class_name="AttentionBase", entry=entry)
    branches = [b for b in analysis.branches if b.phase == "forward"]
    assert analysis.module_class == "AttentionBase" and (analysis.ops or branches)  # the entry was found
    static = [f"{b.loc}: {b.test} is {b.classification}" for b in branches if b.classification != "runtime"]
    assert not static, f"AttentionBase.{entry}:\n" + "\n".join(static)


def test_attention_1d_padded_prompt_with_fewer_pages(ttnn_mesh_pool):
    """A 200-token prompt padded to 256 rows, with pages for its first 224 tokens only: the fill drops the rows no
    page covers, and decode at position 200 reads exactly the prompt's history."""
    mesh = ttnn_mesh_pool((1, 1))
    config, hf = R.hf_attention(R.key("llama", n_heads=8, n_kv_heads=2, head_dim=32, dim=256))
    w = R.attention_weights(hf, config)
    module = Attention1D.from_config(
        R.config_from_weights(
            Attention1DConfig,
            w,
            n_heads=8,
            n_kv_heads=2,
            head_dim=32,
            max_batch_size=1,
            max_seq_len=256,
            mesh_device=mesh,
            paged_attention_config=PagedAttentionConfig(block_size=32, max_num_blocks=8),
        )
    )
    x = np.random.default_rng(5).standard_normal((1, 201, 256)).astype(np.float32)
    expected = R.reference_attention(hf, config, x)
    prompt = np.zeros((1, 1, 256, 256), np.float32)
    prompt[0, 0, :200] = x[0, :200]
    table = np.array([[5, 2, 7, 0, 3, 6, 1, 4]], np.int32)
    out = module.prefill_forward(
        LazyWeight(prompt), R.prefill_rot_mats(mesh, config, 0, 256), page_table=LazyWeight(table[:, :7])
    )
    assert_pcc(expected[0, :200], to_host(out)[0, 0, :200], pcc_threshold("attention"))
    token = np.zeros((1, 1, 32, 256), np.float32)
    token[0, 0, 0] = x[0, 200]
    out = module.decode_forward(
        LazyWeight(token),
        module.prepare_positions([200]),
        R.decode_rot_mats(mesh, config, [200]),
        LazyWeight(table),
    )
    assert_pcc(expected[0, 200:], to_host(out)[0, 0, :1], pcc_threshold("attention"))


def test_attention_1d_q_k_norm_weights_load_and_blackhole_head_layout(ttnn_mesh_pool, open_mesh):
    config, hf = R.hf_attention(R.key("qwen3", n_heads=8, n_kv_heads=2, head_dim=32, dim=256))
    w = R.attention_weights(hf, config)

    def build(mesh):
        return Attention1D.from_config(
            R.config_from_weights(
                Attention1DConfig,
                w,
                q_norm_config=RMSNorm1DConfig(weight=LazyWeight(w["q_norm"])),
                k_norm_config=RMSNorm1DConfig(weight=LazyWeight(w["k_norm"])),
                n_heads=8,
                n_kv_heads=2,
                head_dim=32,
                max_seq_len=64,
                mesh_device=mesh,
            )
        )

    module = build(ttnn_mesh_pool((1, 2)))
    norm = module.config.q_norm_config
    assert not norm.decode_in_sharded and not norm.decode_out_sharded  # heads reach the norm interleaved
    assert not norm.weight.is_loaded()
    module.load_device_weights()
    assert module.q_norm.config.weight.is_loaded() and module.k_norm.config.weight.is_loaded()
    # Blackhole: the decode head split gets an explicit one-tile-per-core height shard
    blackhole = build(open_mesh((1, 1), arch=ttnn.Arch.BLACKHOLE)).config.decode_create_qkv_head_memcfg
    assert blackhole.is_sharded() and blackhole.shard_spec.shape == (32, 32)


def test_attention_1d_from_model_args_sliding_window_layers(ttnn_mesh_pool):
    """Only the layers tttv1 marks "sliding_attention" get the window; the scale follows query_pre_attn_scalar."""
    mesh = ttnn_mesh_pool((1, 2))
    module, _, args = tttv1_attention(mesh, "Mistral-7B-tiny", ours=True)
    assert module.config.sliding_window is None and module.config.scale == args.head_dim**-0.5
    args.layer_types = ["sliding_attention", "full_attention"]
    args.sliding_window, args.query_pre_attn_scalar = 64, 256
    module, _, _ = tttv1_attention(mesh, args, ours=True)
    assert module.config.sliding_window == 64 and module.config.scale == 256**-0.5
