"""ModelFactory.from_spec: every family from a tiny Hugging Face config runs prefill and decode on 1x1, 1x2, 1x8
and 8x4, with logits matching Hugging Face's (PCC >= 0.99 in the accuracy mode); weights from a state dict or a
safetensors checkpoint give the same model; the two hardware modes reach the blocks; bad arguments are named."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.interfaces import ActivationType, ModelFactory, ModelSpec, NormType
from tttv2.patterns import CausalLM
from tttv2.testing import assert_pcc
from tttv2.testing.meshes import mesh_id
from tttv2.testing.references import FAMILIES, hf_causal_lm

MESHES = ((1, 1), (1, 2), (1, 8), (8, 4))
PROMPT = 40
MAX_SEQ_LEN = 256


@functools.cache
def _hf(family: str):
    """(spec, state dict, prompt, HF logits of the prompt and of one more token), one layer."""
    config, model = hf_causal_lm(family, seed=5, num_hidden_layers=1)
    spec = ModelFactory.from_huggingface(config.to_dict())
    prompt = np.random.default_rng(7).integers(3, spec.vocab_size, PROMPT + 1)
    with torch.no_grad():
        logits = model(torch.as_tensor(prompt[None])).logits[0].numpy()
    return spec, model.state_dict(), prompt, logits


@pytest.mark.parametrize("mesh_shape", MESHES, ids=mesh_id)
@pytest.mark.parametrize("family", FAMILIES)
def test_from_spec_matches_hugging_face(family, mesh_shape, ttnn_mesh_pool):
    spec, state, prompt, expected = _hf(family)
    mesh = ttnn_mesh_pool(mesh_shape)
    model = ModelFactory.from_spec(spec, mesh, weights=state, hw_mode="accuracy", max_seq_len=MAX_SEQ_LEN)
    assert isinstance(model, CausalLM) and model.topology == ("2d" if min(mesh_shape) > 1 else "1d")
    assert not model.layers[0].ffn.config.w1.is_loaded()  # weights convert on first use
    assert_pcc(expected[PROMPT - 1], model.prefill(prompt[:PROMPT]), 0.99)
    assert_pcc(expected[PROMPT], model.decode(prompt[PROMPT : PROMPT + 1], [PROMPT])[0], 0.99)


def test_weights_from_safetensors_and_hardware_modes(tmp_path, ttnn_mesh_pool):
    """A safetensors checkpoint builds the same model as the state dict (bit-equal logits); the performance mode
    puts TTTv1's performance precision into every layer and stays close to HF."""
    from safetensors.torch import save_file

    spec, state, prompt, expected = _hf("llama")
    mesh = ttnn_mesh_pool((1, 2))
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "model.safetensors")
    cache = tmp_path / "cache"
    accurate = ModelFactory.from_spec(
        spec, mesh, weights=tmp_path, hw_mode="accuracy", max_seq_len=MAX_SEQ_LEN, weight_cache_dir=cache
    )
    from_dict = ModelFactory.from_spec(spec, mesh, weights=state, hw_mode="accuracy", max_seq_len=MAX_SEQ_LEN)
    np.testing.assert_array_equal(accurate.prefill(prompt[:PROMPT]), from_dict.prefill(prompt[:PROMPT]))
    assert any(cache.glob("*.tensorbin"))  # converted weights were cached on disk

    fast = ModelFactory.from_spec(spec, mesh, weights=state, max_seq_len=MAX_SEQ_LEN)  # default: performance
    layer, precise = fast.layers[0], accurate.layers[0]
    assert layer.ffn.config.w1_w3_dtype == ttnn.bfloat4_b and precise.ffn.config.w1_w3_dtype == ttnn.bfloat8_b
    assert layer.ffn.config.ff1_3_compute_kernel_config.math_fidelity == ttnn.MathFidelity.LoFi
    assert precise.attention.config.li_qkv_decode_compute_kernel_cfg.math_fidelity == ttnn.MathFidelity.HiFi4
    assert layer.ffn.hw_config.mode == "performance" and precise.ffn.hw_config.mode == "accuracy"
    logits = fast.prefill(prompt[:PROMPT])
    assert_pcc(expected[PROMPT - 1], logits, 0.95)  # bfloat4 gate/up weights at LoFi: a looser bound


def test_from_spec_rejections(ttnn_mesh_pool):
    spec, state, _, _ = _hf("llama")
    mesh = ttnn_mesh_pool((1, 1))
    with pytest.raises(TypeError, match=r"spec must be a ModelSpec, got dict"):
        ModelFactory.from_spec({}, mesh, weights=state)
    with pytest.raises(ValueError, match=r"norm_type layer_norm has no building block yet"):
        ModelFactory.from_spec(spec.with_changes(norm_type=NormType.LAYER_NORM), mesh, weights=state)
    with pytest.raises(ValueError, match=r"activation gelu_tanh has no building block yet"):
        ModelFactory.from_spec(spec.with_changes(activation=ActivationType.GELU_TANH), mesh, weights=state)
    with pytest.raises(ValueError, match=r"max_batch_size must be a positive int, got 0"):
        ModelFactory.from_spec(spec, mesh, weights=state, max_batch_size=0)
    with pytest.raises(ValueError, match=r"max_seq_len must be a multiple of 128, got 200"):
        ModelFactory.from_spec(spec, mesh, weights=state, max_seq_len=200)
    with pytest.raises(TypeError, match=r"mesh_device must be a ttnn.MeshDevice, got str"):
        ModelFactory.from_spec(spec, "T3K", weights=state)
    with pytest.raises(ValueError, match=r"mode must be one of performance, accuracy, got 'fast'"):
        ModelFactory.from_spec(spec, mesh, weights=state, hw_mode="fast", max_seq_len=MAX_SEQ_LEN)
    wider = ModelSpec.uniform(vocab_size=512, hidden_dim=512, num_layers=1, num_heads=8, intermediate_dim=896)
    with pytest.raises(
        ValueError, match=r"'model.embed_tokens.weight' must have shape \(512, 512\), got \(512, 256\)"
    ):
        ModelFactory.from_spec(wider, mesh, weights=state, max_seq_len=MAX_SEQ_LEN)
