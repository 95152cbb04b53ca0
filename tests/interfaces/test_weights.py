"""Hugging Face checkpoints: the torch-free safetensors reader (against files safetensors itself wrote) and the
TT-NN layout of each block's weights (Q/K rotary order, Phi-3's fused projections, tied embeddings)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from tttv2.interfaces import HuggingFaceWeights, SafetensorsCheckpoint, interleave_rotary_rows
from tttv2.testing.references import hf_causal_lm


def test_safetensors_reader_matches_safetensors(tmp_path):
    gen = torch.Generator().manual_seed(0)
    tensors = {
        "f32": torch.randn(3, 5, generator=gen),
        "bf16": torch.randn(4, 6, generator=gen).to(torch.bfloat16),
        "f16": torch.randn(7, generator=gen).to(torch.float16),
        "i64": torch.arange(6, dtype=torch.int64).reshape(2, 3),
    }
    save_file(
        {k: tensors[k] for k in ("f32", "bf16")}, tmp_path / "model-00001.safetensors", metadata={"a": "b"}
    )
    save_file({k: tensors[k] for k in ("f16", "i64")}, tmp_path / "model-00002.safetensors")
    checkpoint = SafetensorsCheckpoint(tmp_path)
    assert sorted(checkpoint) == ["bf16", "f16", "f32", "i64"] and len(checkpoint) == 4
    for name, tensor in tensors.items():
        expected = tensor.float().numpy() if tensor.is_floating_point() else tensor.numpy()
        got = checkpoint[name]
        np.testing.assert_array_equal(got, expected)  # bfloat16 / float16 → float32 is exact
        assert got.dtype == (np.float32 if tensor.is_floating_point() else np.int64)
    single = SafetensorsCheckpoint(tmp_path / "model-00002.safetensors")
    assert sorted(single) == ["f16", "i64"]


def test_safetensors_reader_rejections(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"must be a .safetensors file or a directory holding some"):
        SafetensorsCheckpoint(tmp_path)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((5).to_bytes(8, "little") + b"{nope")
    with pytest.raises(ValueError, match=r"has no valid safetensors header"):
        SafetensorsCheckpoint(bad)
    save_file({"w": torch.zeros(2)}, tmp_path / "a.safetensors")
    save_file({"w": torch.zeros(2)}, tmp_path / "b.safetensors")
    bad.unlink()
    with pytest.raises(ValueError, match=r"tensor 'w' is in both"):
        SafetensorsCheckpoint(tmp_path)
    odd = tmp_path / "odd" / "x.safetensors"
    odd.parent.mkdir()
    header = json.dumps({"c": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}).encode()
    odd.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    with pytest.raises(ValueError, match=r"tensor 'c' has dtype C64, which is not supported"):
        SafetensorsCheckpoint(odd)["c"]
    short = tmp_path / "short" / "x.safetensors"
    short.parent.mkdir()
    header = json.dumps({"s": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    short.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    with pytest.raises(ValueError, match=r"8 bytes do not hold \(4,\) F32"):
        SafetensorsCheckpoint(short)["s"]


def test_interleave_rotary_rows():
    # one head of 4: rotate-half rows (a0 a1 | b0 b1) become the pairs (a0 b0 a1 b1)
    rows = np.array([[0.0], [1.0], [10.0], [11.0]] * 2)
    got = interleave_rotary_rows(rows, 4)
    np.testing.assert_array_equal(got[:, 0], [0.0, 10.0, 1.0, 11.0] * 2)


@pytest.mark.parametrize("family", ["llama", "qwen2", "phi3"])
def test_block_weights_in_tt_layout(family, tmp_path):
    config, model = hf_causal_lm(family, seed=3, num_hidden_layers=1, tie_word_embeddings=family == "llama")
    state = model.state_dict()
    weights = HuggingFaceWeights(state)
    hd = config.hidden_size // config.num_attention_heads if family == "phi3" else config.head_dim
    nh, nkv, dim, hidden = (
        config.num_attention_heads,
        config.num_key_value_heads,
        config.hidden_size,
        config.intermediate_size,
    )
    attn = weights.attention(0, dim, nh, nkv, hd, bias=family == "qwen2")
    x = np.random.default_rng(0).standard_normal((5, dim)).astype(np.float32)
    layer = model.model.layers[0]
    with torch.no_grad():
        if family == "phi3":
            q, k, v = np.split(
                layer.self_attn.qkv_proj(torch.as_tensor(x)).numpy(), [nh * hd, (nh + nkv) * hd], axis=-1
            )
        else:
            q, k, v = (getattr(layer.self_attn, f"{p}_proj")(torch.as_tensor(x)).numpy() for p in "qkv")
    got = x @ attn["wqkv"] + (0 if attn["bias"] is None else attn["bias"])
    # Q and K columns come out in interleaved order, V as it is
    expected = np.concatenate(
        [interleave_rotary_rows(q.T, hd).T, interleave_rotary_rows(k.T, hd).T, v], axis=-1
    )
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(attn["wo"], layer.self_attn.o_proj.weight.detach().numpy().T)
    assert (attn["bias"] is not None) == (family == "qwen2")
    mlp = weights.mlp(0, dim, hidden)
    with torch.no_grad():
        expected = layer.mlp(torch.as_tensor(x)).numpy()
    gate = x @ mlp["w1"]
    np.testing.assert_allclose(
        ((gate / (1 + np.exp(-gate))) * (x @ mlp["w3"])) @ mlp["w2"], expected, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_array_equal(
        weights.attention_norm(0, dim), layer.input_layernorm.weight.detach().numpy()
    )
    np.testing.assert_array_equal(
        weights.ffn_norm(0, dim), layer.post_attention_layernorm.weight.detach().numpy()
    )
    np.testing.assert_array_equal(weights.final_norm(dim), model.model.norm.weight.detach().numpy())
    head = weights.lm_head(config.vocab_size, dim, tied=config.tie_word_embeddings)
    np.testing.assert_array_equal(head, model.lm_head.weight.detach().numpy().T)
    # the same from a safetensors file, and from a base-model state dict (no "model." prefix)
    save_file(
        {
            k: v.contiguous()
            for k, v in state.items()
            if k != "lm_head.weight" or not config.tie_word_embeddings
        },
        tmp_path / "m.safetensors",
    )
    from_file = HuggingFaceWeights(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(
        from_file.attention(0, dim, nh, nkv, hd, bias=family == "qwen2")["wqkv"], attn["wqkv"]
    )
    base = HuggingFaceWeights(model.model.state_dict())
    np.testing.assert_array_equal(
        base.embedding(config.vocab_size, dim), weights.embedding(config.vocab_size, dim)
    )


def test_weight_errors_name_the_tensor():
    _, model = hf_causal_lm("llama", seed=1, num_hidden_layers=1)
    weights = HuggingFaceWeights(model.state_dict())
    with pytest.raises(KeyError, match=r"the checkpoint has no tensor 'model.layers.1.mlp.gate_proj.weight'"):
        weights.mlp(1, 256, 896)
    with pytest.raises(
        ValueError,
        match=r"'model.layers.0.mlp.gate_proj.weight' must have shape \(512, 256\), got \(896, 256\)",
    ):
        weights.mlp(0, 256, 512)
    with pytest.raises(TypeError, match=r"weights must be a state dict, a SafetensorsCheckpoint or a path"):
        HuggingFaceWeights([1, 2])
