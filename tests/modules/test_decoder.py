"""The decoder assembled from the modules generates the same greedy tokens as tttv1's model, on every mesh.

Both sides get the same ModelArgs, state dict and prompts; tttv1 runs its Generator (prefill, then decode steps
fed with its own greedy tokens), ours ``Decoder1D`` / ``Decoder2D.generate``. The op sequences are the same, so
besides the tokens the prefill logits and every decode step's logits are compared to the bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules.attention import PagedAttentionConfig
from tttv2.modules.decoder import Decoder1D, Decoder2D, TransformerBlock1D, padded_prefill_len
from tttv2.testing import assert_pcc
from tttv2.testing.legacy import catalogue_state_dicts, tttv1_model_args

from .cases import DECODER_CASES, recorded

STEPS = 3
PROMPT = 40

# mesh, catalogue model, users, paged KV cache: every model and every mesh tttv1's demos ran, in the fewest runs
# (the (mesh, model) pairs of the recorded attention calls, emitted by collect-cases into cases.py) with one user,
# then more users and a paged cache, which the demos never use
CASES = [
    *recorded(DECODER_CASES, lambda mesh_shape, model_name: (mesh_shape, model_name, 1, False)),
    pytest.param((1, 2), "Qwen2.5-7B-tiny", 1, True, id="1x2-Qwen2.5-7B-tiny-paged"),
    pytest.param((1, 8), "Phi-3-mini-tiny", 2, False, id="1x8-Phi-3-mini-tiny-2-users"),
]


def _tttv1_run(mesh, args, state_dict, prompts, page_table, paged_config):
    """tttv1's greedy tokens and per-step logits (each decode step fed with its own previous token)."""
    import torch

    from tttv1.tt.generator import Generator
    from tttv1.tt.model import Transformer

    model = Transformer(args, ttnn.bfloat8_b, mesh, state_dict, None, paged_attention_config=paged_config)
    generator = Generator(model, args, mesh)
    table = None if page_table is None else torch.from_numpy(page_table)
    logits = [generator.prefill_forward_text(torch.from_numpy(prompts), page_table=table)[:, -1].numpy()]
    positions = torch.full((prompts.shape[0],), prompts.shape[1])
    for _ in range(STEPS - 1):
        tokens = torch.from_numpy(logits[-1].argmax(-1))
        logits.append(generator.decode_forward_text(tokens, positions, page_table=table)[:, -1].numpy())
        positions += 1
    return np.stack([step.argmax(-1) for step in logits], axis=1), logits


@pytest.mark.parametrize("mesh_shape, name, users, paged", CASES)
def test_decoder_generates_tttv1_tokens(mesh_shape, name, users, paged, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(mesh_shape)
    args = tttv1_model_args(mesh, name, max_batch_size=users, max_seq_len=256)
    _, state_dict = catalogue_state_dicts(args)
    prompts = np.random.default_rng(1).integers(3, args.vocab_size, (users, PROMPT))
    page_table, paged_config, block = None, None, None
    if paged:
        block = 32
        blocks = args.max_seq_len // block
        paged_config = PagedAttentionConfig(block_size=block, max_num_blocks=blocks * users)
        page_table = np.argsort(np.random.default_rng(2).permutation(blocks * users)).reshape(users, blocks)
        page_table = page_table.astype(np.int32)
    expected_tokens, expected_logits = _tttv1_run(mesh, args, state_dict, prompts, page_table, paged_config)

    cls = Decoder2D if args.is_galaxy else Decoder1D
    decoder = cls.from_model_args(mesh, args, state_dict, paged_attention_config=paged_config)
    layer = decoder.layers[0]
    assert not layer.mlp.config.w1.is_loaded()  # construction converts nothing
    decoder.load_device_weights()
    assert layer.mlp.config.w1.is_loaded() and layer.attention.config.wqkv.is_loaded()
    tokens, logits = decoder.generate(
        prompts, STEPS, page_table=page_table, block_size=block, return_logits=True
    )
    np.testing.assert_array_equal(tokens, expected_tokens)
    # the same op sequence: every step's logits are equal to the bit too
    for step, (got, expected) in enumerate(zip(logits, expected_logits)):
        np.testing.assert_array_equal(got, expected, err_msg=f"step {step}")


def test_decoder_chunked_prefill_matches_tttv1(ttnn_mesh_pool, monkeypatch):
    """A 300-token prompt (padded to 512) prefilled in 256-token chunks against a paged cache (chunked SDPA),
    then decode."""
    monkeypatch.setenv("MAX_PREFILL_CHUNK_SIZE", "256")  # tokens (values above 128 are not multiples of 1024)
    mesh = ttnn_mesh_pool((1, 1))
    args = tttv1_model_args(mesh, "Mistral-7B-tiny", max_batch_size=1, max_seq_len=512)
    assert args.max_prefill_chunk_size == 256
    _, state_dict = catalogue_state_dicts(args)
    prompts = np.random.default_rng(3).integers(3, args.vocab_size, (1, 300))
    paged = PagedAttentionConfig(block_size=32, max_num_blocks=16)
    page_table = np.argsort(np.random.default_rng(4).permutation(16)).reshape(1, 16).astype(np.int32)
    decoder = Decoder1D.from_model_args(mesh, args, state_dict, paged_attention_config=paged)
    with ttnn.OpTrace() as trace:
        expected, _ = _tttv1_run(mesh, args, state_dict, prompts, page_table, paged)
        got = decoder.generate(prompts, STEPS, page_table=page_table, block_size=32)
    assert "ttnn.transformer.chunked_scaled_dot_product_attention" in trace.names
    np.testing.assert_array_equal(got, expected)
    decoder.dims.max_prefill_chunk_size = 384
    with pytest.raises(ValueError, match=r"padded length 512 is not a multiple of the chunk 384"):
        decoder.prefill(prompts[0], page_table=page_table, block_size=32)


def test_decoder_rejections(ttnn_mesh_pool):
    single, galaxy = ttnn_mesh_pool((1, 1)), ttnn_mesh_pool((8, 4))
    galaxy_args = tttv1_model_args(galaxy, "Llama-3.1-8B-tiny")
    with pytest.raises(
        ValueError, match=r"Decoder1D cannot be used for Galaxy devices; use Decoder2D instead"
    ):
        Decoder1D.from_model_args(galaxy, galaxy_args, {})
    args = tttv1_model_args(single, "Llama-3.2-1B-tiny", max_batch_size=2, max_seq_len=256)
    with pytest.raises(
        ValueError, match=r"Decoder2D requires a Galaxy mesh \(8x4\), got \[1, 1\]; use Decoder1D"
    ):
        Decoder2D.from_model_args(single, args, {})
    _, state_dict = catalogue_state_dicts(args)
    decoder = Decoder1D.from_model_args(single, args, state_dict)
    assert all(isinstance(layer, TransformerBlock1D) for layer in decoder.layers)
    with pytest.raises(
        ValueError, match=r"Decoder1D.decode: one token and one position per user \(2\), got 1"
    ):
        decoder.decode([5], [3, 3])
    with pytest.raises(ValueError, match=r"Decoder1D.generate: prompts must have 2 rows, got 1"):
        decoder.generate(np.ones((1, 8), dtype=np.int64), 2)
    with pytest.raises(ValueError, match=r"Decoder1D.prefill: prompt length must be 1..256, got 300"):
        decoder.prefill(np.ones(300, dtype=np.int64))
    with pytest.raises(ValueError, match=r"TransformerBlock1D: mode must be 'decode' or 'prefill'"):
        decoder.layers[0](None, mode="train")
    decoder.dims.max_prefill_chunk_size = 128
    with pytest.raises(ValueError, match=r"chunked prefill needs page_table and block_size"):
        decoder.prefill(np.ones(200, dtype=np.int64))


def test_padded_prefill_len():
    assert [padded_prefill_len(n) for n in (1, 128, 129, 600, 1024, 1025, 4097)] == [
        128,
        128,
        256,
        1024,
        1024,
        2048,
        6144,
    ]


def test_decoder_2d_serves_users_over_the_columns(ttnn_mesh_pool):
    """4 users on 8x4 (one per mesh column; positions, rotary rows and page tables split over the columns, paged
    cache) against the Hugging Face model: tttv1's Galaxy path is right only for 1 or 32 users, so the reference
    here is HF (PCC >= 0.99 on the logits, each step fed with our own greedy token)."""
    import torch

    from tttv1 import catalogue

    mesh = ttnn_mesh_pool((8, 4))
    name = "Mistral-7B-tiny"
    args = tttv1_model_args(mesh, name, max_batch_size=4, max_seq_len=128)
    hf_state_dict, state_dict = catalogue_state_dicts(args)
    prompts = np.random.default_rng(5).integers(3, args.vocab_size, (4, 24))
    paged = PagedAttentionConfig(block_size=32, max_num_blocks=16)
    page_table = np.argsort(np.random.default_rng(6).permutation(16)).reshape(4, 4).astype(np.int32)
    decoder = Decoder2D.from_model_args(mesh, args, state_dict, paged_attention_config=paged)
    tokens, logits = decoder.generate(prompts, 2, page_table=page_table, block_size=32, return_logits=True)

    reference = catalogue.hf_model_class(name)(catalogue.hf_config(name)).eval()
    reference.load_state_dict(hf_state_dict)
    with torch.no_grad():
        first = reference(torch.from_numpy(prompts), use_cache=True)
        second = reference(torch.from_numpy(tokens[:, :1]), past_key_values=first.past_key_values)
    assert_pcc(first.logits[:, -1], logits[0], 0.99)
    assert_pcc(second.logits[:, -1], logits[1], 0.99)
