"""ModelSpec: uniform construction, per-layer overrides, and the validation errors that name the field."""

from __future__ import annotations

import pytest

from tttv2.interfaces import ActivationType, LayerOverride, ModelSpec, NormType, RopeScaling


def _spec(**changes):
    base = dict(vocab_size=512, hidden_dim=256, num_layers=4, num_heads=8, intermediate_dim=896)
    return ModelSpec.uniform(**{**base, **changes})


def test_uniform_defaults_and_derived_fields():
    spec = _spec()
    assert (spec.num_kv_heads, spec.head_dim) == (8, 32)  # MHA, hidden / heads
    assert spec.activation is ActivationType.SILU and spec.norm_type is NormType.RMS_NORM
    assert spec.layer_overrides == {} and spec.sliding_window is None
    gqa = _spec(num_kv_heads=2, head_dim=64, sliding_window=128, rope_theta=5e5, qkv_bias=True)
    layer = gqa.layer(3)
    assert (layer.num_kv_heads, layer.head_dim, layer.sliding_window, layer.qkv_bias) == (2, 64, 128, True)
    assert [lay.index for lay in gqa.layers] == [0, 1, 2, 3]


def test_layer_overrides_reach_each_layer():
    spec = ModelSpec(
        vocab_size=512,
        hidden_dim=256,
        num_layers=3,
        num_heads=8,
        num_kv_heads=2,
        head_dim=32,
        intermediate_dim=896,
        sliding_window=64,
        layer_overrides={
            0: LayerOverride(full_attention=True),
            2: LayerOverride(sliding_window=16, intermediate_dim=512),
        },
    )
    assert [spec.layer(i).sliding_window for i in range(3)] == [None, 64, 16]
    assert [spec.layer(i).intermediate_dim for i in range(3)] == [896, 896, 512]
    assert spec.with_changes(sliding_window=32).layer(1).sliding_window == 32


def test_rope_scaling_round_trips_to_the_hf_dict():
    scaling = RopeScaling("llama3", factor=8.0, original_max_position_embeddings=8192)
    assert scaling.as_dict() == {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    with pytest.raises(ValueError, match=r"RopeScaling: rope_type must be one of llama3, got 'yarn'"):
        RopeScaling("yarn", factor=2.0)
    with pytest.raises(ValueError, match=r"factor must be > 0"):
        RopeScaling("llama3", factor=0.0)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        (
            dict(num_heads=8, num_kv_heads=3),
            ValueError,
            r"num_heads \(8\) must be a multiple of num_kv_heads \(3\)",
        ),
        (dict(head_dim=33), ValueError, r"head_dim must be even"),
        (dict(vocab_size=0), ValueError, r"vocab_size must be a positive int, got 0"),
        (dict(intermediate_dim=1.5), ValueError, r"intermediate_dim must be a positive int, got 1.5"),
        (dict(activation="silu"), TypeError, r"activation must be a ActivationType, got 'silu'"),
        (dict(norm_eps=0.0), ValueError, r"norm_eps must be > 0"),
        (dict(rope_theta=-1.0), ValueError, r"rope_theta must be > 0"),
        (dict(rope_scaling={"rope_type": "llama3"}), TypeError, r"rope_scaling must be a RopeScaling"),
        (dict(sliding_window=0), ValueError, r"sliding_window must be a positive int"),
    ],
)
def test_invalid_fields_are_named(changes, error, message):
    with pytest.raises(error, match=message):
        _spec(**changes)


def test_invalid_overrides_and_uniform_arguments():
    with pytest.raises(ValueError, match=r"layer_overrides keys must be layer indices 0..3, got 4"):
        _spec().with_changes(layer_overrides={4: LayerOverride()})
    with pytest.raises(TypeError, match=r"layer_overrides\[1\] must be a LayerOverride"):
        _spec().with_changes(layer_overrides={1: {"sliding_window": 3}})
    with pytest.raises(ValueError, match=r"layer_overrides\[1\].sliding_window must be a positive int"):
        _spec().with_changes(layer_overrides={1: LayerOverride(sliding_window=-2)})
    with pytest.raises(ValueError, match=r"hidden_dim \(250\) must be a multiple of num_heads \(8\)"):
        _spec(hidden_dim=250)
    with pytest.raises(TypeError, match=r"unknown fields colour"):
        _spec(colour="red")
    with pytest.raises(ValueError, match=r"a uniform spec has no layer_overrides"):
        _spec(layer_overrides={0: LayerOverride()})
    with pytest.raises(IndexError, match=r"index must be 0..3, got 4"):
        _spec().layer(4)
