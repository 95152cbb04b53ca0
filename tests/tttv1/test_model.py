"""End to end: tttv1 on the emulated mesh against Hugging Face transformers with the same weights.

Prefill logits of the last prompt token, then 10 teacher-forced decode steps (both sides are fed the reference's
greedy token, so one near-tie cannot derail the rest): PCC >= 0.99 with bfloat8_b weights, >= 0.98 with the
bfloat4_b "performance" preset, and the same greedy token at every step unless the reference's own top-2 logits
are within 0.02 of each other (random-weight models have such near-ties; bf16/bf8 rounding may legitimately flip
them). Every mesh (1×1, 1×2, 1×8, 8×4) and every catalogue model appears.
"""

from __future__ import annotations

import pytest
import torch
import ttnn

from tests.tttv1.conftest import MESHES, hf_reference, margin_ok
from tttv1 import catalogue
from tttv1.tt.common import PagedAttentionConfig
from tttv1.tt.generator import Generator
from tttv1.tt.model import Transformer
from tttv1.tt.model_config import DecodersPrecision, ModelArgs, TensorGroup
from tttv2.testing import pcc

DECODE_STEPS = 10


def _run(
    mesh,
    name,
    *,
    batch,
    prompt_len,
    precision="accuracy",
    paged=False,
    max_seq_len=256,
    seed=1,
    steps=DECODE_STEPS,
):
    """Prefill + teacher-forced decode on both sides; returns (prefill pcc, [decode pcc], per-step token checks,
    per-step exact argmax agreement)."""
    ref, hf_sd = hf_reference(name)
    make = {"accuracy": DecodersPrecision.accuracy, "performance": DecodersPrecision.performance}[precision]
    args = ModelArgs(
        mesh,
        max_batch_size=batch,
        max_seq_len=max_seq_len,
        model_name=name,
        optimizations=lambda a: make(a.n_layers, a.model_name),
    )
    paged_config, page_table = None, None
    if paged:
        blocks = max_seq_len // 32
        paged_config = PagedAttentionConfig(block_size=32, max_num_blocks=blocks * batch)
        perm = torch.randperm(paged_config.max_num_blocks, generator=torch.Generator().manual_seed(seed))
        page_table = torch.argsort(perm).reshape(batch, blocks).to(torch.int32)
    model = Transformer(
        args, ttnn.bfloat8_b, mesh, args.load_state_dict(hf_sd), None, paged_attention_config=paged_config
    )
    generator = Generator(model, args, mesh)

    tokens = torch.randint(
        3, args.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(seed)
    )
    tt_logits = generator.prefill_forward_text(
        tokens, page_table=page_table, prompt_lens=[prompt_len] * batch
    )
    with torch.no_grad():
        out = ref(tokens, use_cache=True)
    ref_logits = out.logits[:, -1:, :]
    prefill_pcc = pcc(ref_logits, tt_logits)
    checks = [margin_ok(ref_logits, tt_logits)]
    exact = [bool((ref_logits.argmax(-1) == tt_logits.argmax(-1)).all())]

    past = out.past_key_values
    next_tok = ref_logits[:, -1].argmax(-1)
    pos = torch.full((batch,), prompt_len, dtype=torch.int64)
    decode_pccs = []
    for _ in range(steps):
        tt_logits = generator.decode_forward_text(next_tok, pos, page_table=page_table)
        with torch.no_grad():
            out = ref(next_tok.view(batch, 1), past_key_values=past, use_cache=True)
        past = out.past_key_values
        decode_pccs.append(pcc(out.logits, tt_logits))
        checks.append(margin_ok(out.logits, tt_logits))
        exact.append(bool((out.logits.argmax(-1) == tt_logits.argmax(-1)).all()))
        next_tok = out.logits[:, -1].argmax(-1)
        pos += 1
    return prefill_pcc, decode_pccs, checks, exact


CASES = [
    # mesh, model, batch, prompt_len, precision, paged
    pytest.param("N150", "Llama-3.2-1B-tiny", 1, 40, "accuracy", False, id="N150-llama1b"),
    pytest.param("N300", "Qwen2.5-7B-tiny", 1, 40, "accuracy", False, id="N300-qwen7b-bias"),
    pytest.param("T3K", "Phi-3-mini-tiny", 1, 40, "accuracy", True, id="T3K-phi3-paged"),
    pytest.param("TG", "Llama-3.1-8B-tiny", 1, 40, "accuracy", True, id="TG-llama8b-paged"),
    pytest.param("TG", "Mistral-7B-tiny", 32, 24, "accuracy", False, id="TG-mistral7b-batch32"),
    pytest.param("N300", "Llama-3.2-1B-tiny", 1, 40, "performance", False, id="N300-llama1b-bfp4"),
    pytest.param("T3K", "Mistral-7B-tiny", 4, 24, "performance", False, id="T3K-mistral7b-batch4-bfp4"),
]


@pytest.mark.parametrize("mesh_name, name, batch, prompt_len, precision, paged", CASES)
def test_model_matches_hf(mesh, mesh_name, name, batch, prompt_len, precision, paged):
    prefill_pcc, decode_pccs, checks, exact = _run(
        mesh(MESHES[mesh_name]), name, batch=batch, prompt_len=prompt_len, precision=precision, paged=paged
    )
    threshold = 0.99 if precision == "accuracy" else 0.98
    print(
        f"\n{mesh_name} {name} batch={batch} {precision}: prefill PCC {prefill_pcc:.5f}, decode PCC min {min(decode_pccs):.5f}"
    )
    assert prefill_pcc >= threshold, prefill_pcc
    assert min(decode_pccs) >= threshold, decode_pccs
    assert all(bool(c.all()) for c in checks), [c.float().mean().item() for c in checks]
    print(f"  exact greedy agreement per step: {exact}")


def test_galaxy_sized_model_on_8x4(mesh):
    """Llama-3.1-70B-tiny has the shapes tt-metal's own Galaxy configs need, which the other catalogue models (dim
    512) do not: dim a multiple of 1024 (its TG distributed norm shards dim/4 over a (dim/1024)×8 core grid, whole
    tiles per core), one KV head per mesh row, and heads whose columns fit its TG attention memory configs. Prefill
    and decode on 8×4 against Hugging Face, with the BFP4 MLP weights of the 70B class."""
    tg = mesh(MESHES["TG"])
    args = ModelArgs(tg, max_batch_size=1, max_seq_len=256, model_name="Llama-3.1-70B-tiny")
    rows, cols = args.cluster_shape
    assert args.is_galaxy and args.dim % 1024 == 0
    assert args.n_kv_heads == rows and args.n_heads % rows == 0
    # tt-metal's TG norm grid: min(4, dim/4/32/8) rows of 8 cores; tttv1's galaxy grid is the same for this dim
    assert args.galaxy_norm_grid().num_cores == min(4, args.dim // cols // 32 // 8) * 8
    # tt-metal's TG attention configs: a device's QKV columns, gathered, go 32 per core onto 40 / 24 / 20 / 12 cores
    # (dim 8192 / 4096 / 3072 / smaller); its heads' columns onto exactly min(32, dim/256) cores of 32
    qkv_cores = {8192: 40, 4096: 24, 3072: 20}.get(args.dim, 12)
    assert args.head_dim * (args.n_heads + 2 * args.n_kv_heads) // rows <= 32 * qkv_cores
    assert args.n_heads * args.head_dim // rows == 32 * min(32, args.dim // 8 // 32)
    assert args.decoders_optimizations.get_tensor_dtype(0, TensorGroup.FF1_FF3) == ttnn.bfloat4_b
    with ttnn.OpTrace() as trace:
        prefill_pcc, decode_pccs, checks, _ = _run(tg, "Llama-3.1-70B-tiny", batch=1, prompt_len=32, steps=2)
    assert {"ttnn.rms_norm_pre_all_gather", "ttnn.experimental.fast_reduce_nc"} <= set(trace.names)
    assert prefill_pcc >= 0.99 and min(decode_pccs) >= 0.99, (prefill_pcc, decode_pccs)
    assert all(bool(c.all()) for c in checks)


def test_chunked_prefill_matches_hf(mesh, monkeypatch):
    """A 300-token prompt prefilled in 128-token chunks against a paged cache (chunked SDPA), then decode."""
    monkeypatch.setenv("MAX_PREFILL_CHUNK_SIZE", "128")
    prefill_pcc, decode_pccs, checks, _ = _run(
        mesh(MESHES["N150"]), "Mistral-7B-tiny", batch=1, prompt_len=300, paged=True, max_seq_len=512, steps=3
    )
    assert prefill_pcc >= 0.99 and min(decode_pccs) >= 0.99, (prefill_pcc, decode_pccs)
    assert all(bool(c.all()) for c in checks)


def test_long_prefill_reshapes_mlp_and_shards_kv_fill(mesh):
    """Llama-3.1-8B on N150 has a 512-token prefill cutoff (the MLP reshapes, w2 uses minimal_matmul) and a
    KV-fill shard threshold of 256 tokens: a 512-token prompt takes all of those paths."""
    args_probe = ModelArgs(
        mesh(MESHES["N150"]), max_batch_size=1, max_seq_len=1024, model_name="Llama-3.1-8B-tiny"
    )
    assert args_probe.prefill_len_cutoff == 512 and args_probe.min_kv_prefill_shard_seqlen <= 512
    with ttnn.OpTrace() as trace:
        prefill_pcc, decode_pccs, _, _ = _run(
            mesh(MESHES["N150"]), "Llama-3.1-8B-tiny", batch=1, prompt_len=500, max_seq_len=1024, steps=3
        )
    assert "ttnn.experimental.minimal_matmul" in trace.names
    assert "ttnn.interleaved_to_sharded" in trace.names
    assert prefill_pcc >= 0.99 and min(decode_pccs) >= 0.99, (prefill_pcc, decode_pccs)


@pytest.mark.parametrize("mesh_name", ["T3K", "TG"])
def test_legacy_g1_mlp_matches_hf(mesh, monkeypatch, mesh_name):
    """The dict-keyed G1 MLP (TTTV1_MLP_GENERATION=G1) computes the same model."""
    monkeypatch.setenv("TTTV1_MLP_GENERATION", "G1")
    with ttnn.OpTrace() as trace:
        prefill_pcc, decode_pccs, checks, _ = _run(
            mesh(MESHES[mesh_name]), "Llama-3.1-8B-tiny", batch=1, prompt_len=40, steps=3
        )
    if mesh_name == "TG":
        assert "ttnn.reduce_scatter" in trace.names  # the G1 collective with mesh_device=
    assert prefill_pcc >= 0.99 and min(decode_pccs) >= 0.99
    assert all(bool(c.all()) for c in checks)


def test_fused_all_gather_matmul_on_t3k(mesh):
    """A wider 1-layer Llama (dim 2048) on a T3K ring takes the fused all-gather + WO matmul path."""
    config = catalogue.config_dict("Llama-3.1-8B-tiny") | {
        "hidden_size": 2048,
        "intermediate_size": 2048,
        "head_dim": 128,
        "num_hidden_layers": 1,
        "_name_or_path": "Llama-3.1-8B-wide",
    }
    state_dict = catalogue.random_state_dict(config, seed=0)
    ref = catalogue.hf_model_class(config)(catalogue.hf_config(config)).eval()
    ref.load_state_dict(state_dict)
    m = mesh(MESHES["T3K"])
    ttnn.SetDefaultDevice(m)  # the system is a T3K: ring topology
    try:
        args = ModelArgs(m, max_batch_size=1, max_seq_len=256, hf_config=config)
        assert args.model_config["USE_FUSED_ALL_GATHER_MATMUL"] and args.ccl_topology() == ttnn.Topology.Ring
        generator = Generator(
            Transformer(args, ttnn.bfloat8_b, m, args.load_state_dict(state_dict), None), args, m
        )
        tokens = torch.randint(3, args.vocab_size, (1, 20), generator=torch.Generator().manual_seed(2))
        with ttnn.OpTrace() as trace:
            logits = generator.prefill_forward_text(tokens)
            with torch.no_grad():
                out = ref(tokens, use_cache=True)
            next_tok = out.logits[:, -1].argmax(-1)
            decode_logits = generator.decode_forward_text(next_tok, torch.tensor([20]))
            with torch.no_grad():
                expected = ref(next_tok.view(1, 1), past_key_values=out.past_key_values).logits
    finally:
        ttnn.SetDefaultDevice(None)
    assert "ttnn.experimental.all_gather_matmul_async" in trace.names
    assert pcc(out.logits[:, -1:], logits) >= 0.99 and pcc(expected, decode_logits) >= 0.99
