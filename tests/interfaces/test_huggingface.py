"""ModelFactory.from_huggingface: the four families from transformers' own configs and from config.json-style
dicts, and an error naming every unsupported model type, field or value."""

from __future__ import annotations

import pytest

from tttv2.interfaces import (
    ActivationType,
    LayerOverride,
    ModelFactory,
    RopeScaling,
    UnsupportedConfigError,
)
from tttv2.testing.references import FAMILIES, family_config, hf_config

# a Llama-3.1-8B config.json as published (the rope_theta / rope_scaling spelling of transformers 4)
LLAMA31_CONFIG_JSON = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}


def test_llama31_config_json():
    spec = ModelFactory.from_huggingface(LLAMA31_CONFIG_JSON, name="Llama-3.1-8B")
    assert (spec.vocab_size, spec.hidden_dim, spec.num_layers) == (128256, 4096, 32)
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.intermediate_dim) == (32, 8, 128, 14336)
    assert spec.rope_theta == 500000.0 and spec.max_seq_len == 131072 and spec.name == "Llama-3.1-8B"
    assert spec.rope_scaling == RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)
    assert not spec.qkv_bias and spec.sliding_window is None and not spec.tie_word_embeddings


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_from_transformers_configs(family):
    """transformers' own to_dict() output (rope_parameters spelling, every generic key) converts."""
    config = hf_config(family, num_hidden_layers=2)
    spec = ModelFactory.from_huggingface(config)  # the config object itself
    assert spec == ModelFactory.from_huggingface(config.to_dict())
    expected = family_config(family)
    assert (spec.hidden_dim, spec.intermediate_dim, spec.vocab_size) == (
        expected["hidden_size"],
        expected["intermediate_size"],
        expected["vocab_size"],
    )
    assert spec.num_layers == 2 and spec.num_kv_heads == expected["num_key_value_heads"]
    assert spec.head_dim == expected.get(
        "head_dim", expected["hidden_size"] // expected["num_attention_heads"]
    )
    assert spec.rope_theta == expected["rope_theta"] and spec.norm_eps == expected["rms_norm_eps"]
    assert spec.activation is ActivationType.SILU
    assert spec.qkv_bias == (family == "qwen2")
    assert (spec.rope_scaling is not None) == (family == "llama")


def test_sliding_windows():
    mistral = ModelFactory.from_huggingface(hf_config("mistral", sliding_window=64))
    assert mistral.sliding_window == 64 and mistral.layer_overrides == {}
    # Qwen2: the window is off unless use_sliding_window; then the first max_window_layers attend fully
    qwen = family_config("qwen2", num_hidden_layers=4, sliding_window=64, max_window_layers=2)
    assert ModelFactory.from_huggingface(qwen).sliding_window is None
    qwen["use_sliding_window"] = True
    spec = ModelFactory.from_huggingface(qwen)
    assert [spec.layer(i).sliding_window for i in range(4)] == [None, None, 64, 64]
    spec = ModelFactory.from_huggingface(
        hf_config("qwen2", **{k: v for k, v in qwen.items() if k != "model_type"})
    )
    assert spec.layer_overrides == {
        0: LayerOverride(full_attention=True),
        1: LayerOverride(full_attention=True),
    }
    phi3 = ModelFactory.from_huggingface(family_config("phi3", sliding_window=2047))
    assert phi3.sliding_window == 2047


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(model_type="gpt2"), r"unsupported model_type='gpt2': supported: llama, mistral, qwen2, phi3"),
        (dict(model_type=None), r"unsupported model_type=None"),
        (dict(colour="red", shade=2), r"unknown llama config field\(s\) colour, shade"),
        (
            dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
            r"unsupported rope_scaling.rope_type='yarn'",
        ),
        (
            dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "beta": 1}),
            r"unknown llama3 scaling keys",
        ),
        (dict(attention_bias=True), r"unsupported attention_bias=True"),
        (dict(mlp_bias=True), r"unsupported mlp_bias=True"),
        (dict(pretraining_tp=2), r"unsupported pretraining_tp=2"),
        (dict(hidden_act="swiglu"), r"unsupported hidden_act='swiglu'"),
        (dict(partial_rotary_factor=0.5), r"unsupported partial_rotary_factor=0.5"),
        (dict(vocab_size=None), r"missing required field\(s\) vocab_size"),
        (
            dict(layer_types=["full_attention", "sliding_attention"]),
            r"sliding-window layers need a sliding_window",
        ),
    ],
)
def test_unsupported_configs_are_named(changes, message):
    config = {**LLAMA31_CONFIG_JSON, "num_hidden_layers": 2, **changes}
    with pytest.raises(UnsupportedConfigError, match=message):
        ModelFactory.from_huggingface(config)


def test_ignore_fields_and_layer_type_errors():
    config = {**LLAMA31_CONFIG_JSON, "quantization_config": {"bits": 4}}
    with pytest.raises(UnsupportedConfigError, match=r"quantization_config"):
        ModelFactory.from_huggingface(config)
    assert ModelFactory.from_huggingface(config, ignore_fields=["quantization_config"]).num_layers == 32
    window = {**family_config("mistral", num_hidden_layers=2), "sliding_window": 32}
    with pytest.raises(UnsupportedConfigError, match=r"layer_types\[1\]='chunked'"):
        ModelFactory.from_huggingface({**window, "layer_types": ["full_attention", "chunked"]})
    with pytest.raises(UnsupportedConfigError, match=r"must list the 2 layers"):
        ModelFactory.from_huggingface({**window, "layer_types": ["sliding_attention"]})
    every_layer_full = ModelFactory.from_huggingface({**window, "layer_types": ["full_attention"] * 2})
    assert every_layer_full.sliding_window is None and every_layer_full.layer_overrides == {}
    with pytest.raises(
        TypeError, match=r"config must be a dict \(config.json\) or a transformers config, got list"
    ):
        ModelFactory.from_huggingface([("model_type", "llama")])
