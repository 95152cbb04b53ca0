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


# --- real sizes without a checkpoint (issue 24): a config.json alone, weights streamed block by block ---------------

# Mistral-7B's config.json with its sizes cut down, as the checkpoint ships it (sliding_window null, theta 1e6)
MISTRAL_SMALL = {
    "architectures": ["MistralForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 896,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 8,
    "num_hidden_layers": 2,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.42.0.dev0",
    "use_cache": True,
    "vocab_size": 1000,
}


@pytest.mark.parametrize("mesh_shape", [(1, 8), (8, 4)], ids=mesh_id)
def test_from_config_streams_random_weights(tmp_path, monkeypatch, ttnn_mesh_pool, mesh_shape):
    """``from_config`` takes the config.json alone; no random array outlives its block (weak references), and the
    model gives the same bits as the same weights converted on first use."""
    import json
    import weakref

    from tttv2.interfaces import RandomWeights

    mesh = ttnn_mesh_pool(mesh_shape)
    (tmp_path / "config.json").write_text(json.dumps(MISTRAL_SMALL))
    made, most_alive = [], 0
    original = RandomWeights.__getitem__

    def tracked(self, name):
        nonlocal most_alive
        most_alive = max(most_alive, sum(ref() is not None for ref in made))
        array = original(self, name)
        made.append(weakref.ref(array))
        return array

    monkeypatch.setattr(RandomWeights, "__getitem__", tracked)
    streamed = ModelFactory.from_config(tmp_path, mesh, seed=4, max_seq_len=MAX_SEQ_LEN)
    # one block's arrays at a time: the attention block's q, k, v, o (plus its norm) are the most alive at once
    # (LMHead1D's config keeps its own [dim, vocab] copy as the source of its chunks: not one of these arrays)
    assert len(made) == 3 + 2 * 9 and most_alive <= 5 and sum(ref() is not None for ref in made) == 0
    assert streamed.layers[1].ffn.config.w2.is_loaded()
    monkeypatch.setattr(RandomWeights, "__getitem__", original)
    whole = dict(RandomWeights(MISTRAL_SMALL, seed=4))
    lazy = ModelFactory.from_spec(
        ModelFactory.from_huggingface(MISTRAL_SMALL), mesh, weights=whole, max_seq_len=MAX_SEQ_LEN
    )
    prompt = np.arange(3, 43)
    assert np.array_equal(streamed.prefill(prompt), lazy.prefill(prompt))


def test_from_config_rejections(tmp_path, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 1))
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"from_config: cannot read .*config.json: Expecting property name"):
        ModelFactory.from_config(tmp_path / "config.json", mesh)
    with pytest.raises(TypeError, match=r"config must be a mapping or a path, got list"):
        ModelFactory.from_config([1], mesh)


def test_release_host_needs_a_converted_weight(ttnn_mesh_pool):
    from tttv2.modules import LazyWeight

    weight = LazyWeight(
        np.ones((32, 32), np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=ttnn_mesh_pool((1, 1)),
        name="w",
    )
    with pytest.raises(ValueError, match=r"LazyWeight w: release_host before the weight is converted"):
        weight.release_host()
    device = weight.get_device_weight()
    weight.release_host()
    assert weight.shape == (32, 32) and weight.get_device_weight() is device
    assert weight.with_defaults(pad_value=None).shape == (32, 32)


@pytest.mark.parametrize("mesh_shape", [(1, 8), (8, 4)], ids=mesh_id)
def test_from_config_holds_one_blocks_host_weights_at_a_time(
    tmp_path, monkeypatch, ttnn_mesh_pool, mesh_shape
):
    """Streaming, a layer's attention weights are on the devices and their host arrays gone before its MLP
    weights are made, each MLP source array is gone once transposed, and the MLP's weights convert one at a
    time, each host array dropped before the next (weak references to the arrays the blocks are built from,
    and to the random arrays as made)."""
    import json
    import weakref

    from tttv2.interfaces import RandomWeights
    from tttv2.interfaces import _model_factory as factory
    from tttv2.modules import LazyWeight

    mesh = ttnn_mesh_pool(mesh_shape)
    (tmp_path / "config.json").write_text(json.dumps(MISTRAL_SMALL))
    handed: dict[str, weakref.ref] = {}  # "0.wqkv" ...: the attention arrays the weights reader returned
    made: list[tuple[str, weakref.ref]] = []  # the random arrays, in the order they were made
    seen_when_made: dict[str, list[str]] = {}  # MLP weight name -> block arrays still alive when it was made
    real_attention, real_get = factory.HuggingFaceWeights.attention, RandomWeights.__getitem__

    def attention(self, layer, *args):
        arrays = real_attention(self, layer, *args)
        for key in ("wqkv", "wo"):
            handed[f"{layer}.{key}"] = weakref.ref(arrays[key])
        return arrays

    def get(self, name):
        if ".mlp." in name:
            seen_when_made[name] = [n for n, ref in handed.items() if ref() is not None]
            seen_when_made[name] += [n for n, ref in made if ref() is not None and ".mlp." in n]
        array = real_get(self, name)
        made.append((name, weakref.ref(array)))
        return array

    converted: dict[
        int, list[weakref.ref]
    ] = {}  # layer -> the host arrays of its MLP weights converted so far
    alive_at_conversion: dict[
        int, list[int]
    ] = {}  # layer -> how many of those are alive as the next converts
    real_convert = LazyWeight._convert

    def convert(self):
        layer, _, which = (self.name or "").rpartition(".layers.")[2].partition(".")
        if which in ("w1", "w2", "w3"):
            before = converted.setdefault(int(layer), [])
            alive_at_conversion.setdefault(int(layer), []).append(sum(ref() is not None for ref in before))
            before.append(weakref.ref(self.source))
        return real_convert(self)

    monkeypatch.setattr(LazyWeight, "_convert", convert)
    monkeypatch.setattr(factory.HuggingFaceWeights, "attention", attention)
    monkeypatch.setattr(RandomWeights, "__getitem__", get)
    model = ModelFactory.from_config(tmp_path, mesh, seed=4, max_seq_len=MAX_SEQ_LEN)
    layers = MISTRAL_SMALL["num_hidden_layers"]
    assert len(seen_when_made) == 3 * layers and len(handed) == 2 * layers
    for name, alive in seen_when_made.items():
        attention_alive = [n for n in alive if ".wqkv" in n or ".wo" in n]
        assert not attention_alive, f"{name} was made while {attention_alive} were on the host"
        # the MLP's earlier weights are held (transposed, for the block), never their random source arrays
        assert not [n for n in alive if n.endswith("_proj.weight")], f"{name}: {alive}"
    # the MLP's weights go to the devices one at a time, each host array dropped before the next converts
    assert alive_at_conversion == {layer: [0, 0, 0] for layer in range(layers)}
    assert model.layers[-1].attention.config.wo.is_loaded()
