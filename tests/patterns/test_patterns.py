"""DecoderLayer and CausalLM: what they accept, what they refuse (with the part named), and the norm layouts a
1-D DecoderLayer wires to the matmuls they feed. Running them is covered by the factory and reference-model
tests."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import attention, embeddings, ffn, normalization
from tttv2.modules import LazyWeight
from tttv2.patterns import RESIDUAL_PATTERNS, CausalLM, DecoderLayer


def _w(shape, mesh, seed=0):
    return LazyWeight(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) / 16, device=mesh)


def _parts(mesh, dim=256):
    two_d = min(tuple(mesh.shape)) > 1
    suffix = "2D" if two_d else "1D"
    return dict(
        attention=getattr(attention, f"Attention{suffix}")(
            _w((dim, 384), mesh), _w((256, dim), mesh), 8, 2, 32, 1, 256
        ),
        ffn=getattr(ffn, f"MLP{suffix}")(_w((dim, 512), mesh), _w((512, dim), mesh), _w((dim, 512), mesh)),
        attention_norm=getattr(normalization, f"RMSNorm{suffix}")(_w((dim,), mesh)),
        ffn_norm=getattr(normalization, f"RMSNorm{suffix}")(_w((dim,), mesh)),
    )


def _model_parts(mesh):
    two_d = min(tuple(mesh.shape)) > 1
    suffix = "2D" if two_d else "1D"
    cos, sin = embeddings.rope_tables(32, 256, 10000.0)
    return dict(
        embedding=getattr(embeddings, f"Embedding{suffix}")(_w((512, 256), mesh)),
        rope=getattr(embeddings, f"RotarySetup{suffix}")(LazyWeight(cos, device=mesh), LazyWeight(sin), 1),
        norm=getattr(normalization, f"RMSNorm{suffix}")(_w((256,), mesh)),
        lm_head=getattr(embeddings, f"LMHead{suffix}")(_w((256, 512), mesh)),
    )


def test_decoder_layer_wires_norm_layouts_on_1d(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 2))
    parts = _parts(mesh)
    given = parts["attention_norm"]
    assert given.config.decode_memory_config != parts["attention"].config.decode_input_memcfg  # they differ
    layer = DecoderLayer(**parts)
    assert layer.topology == "1d" and RESIDUAL_PATTERNS == ("pre_norm",)
    assert layer.attention is parts["attention"] and layer.ffn is parts["ffn"]
    # the norms now write what the QKV and FF1/FF3 matmuls read, with their own weights and settings
    assert layer.attention_norm.config.decode_memory_config == parts["attention"].config.decode_input_memcfg
    assert layer.ffn_norm.config.decode_memory_config == parts["ffn"].config.decode_input_memcfg
    assert (
        layer.attention_norm.config.weight is given.config.weight
        and layer.attention_norm.config.eps == given.config.eps
    )
    assert layer.block.attention_norm is layer.attention_norm and layer.parts()["ffn"] is parts["ffn"]
    again = DecoderLayer(**{**parts, "attention_norm": layer.attention_norm, "ffn_norm": layer.ffn_norm})
    assert again.attention_norm is layer.attention_norm  # already aligned: kept as given


def test_decoder_layer_rejections(ttnn_mesh_pool):
    line, other, galaxy = ttnn_mesh_pool((1, 2)), ttnn_mesh_pool((1, 1)), ttnn_mesh_pool((8, 4))
    parts = _parts(line)
    with pytest.raises(ValueError, match=r"residual_pattern must be one of pre_norm, got 'post_norm'"):
        DecoderLayer(**parts, residual_pattern="post_norm")
    with pytest.raises(TypeError, match=r"attention must be an Attention1D or Attention2D, got MLP1D"):
        DecoderLayer(**{**parts, "attention": parts["ffn"]})
    with pytest.raises(TypeError, match=r"with a Attention1D, ffn_norm must be a RMSNorm1D, got RMSNorm2D"):
        DecoderLayer(**{**parts, "ffn_norm": _parts(galaxy)["ffn_norm"]})
    with pytest.raises(ValueError, match=r"ffn runs on another mesh than the attention"):
        DecoderLayer(**{**parts, "ffn": _parts(other)["ffn"]})
    narrow = normalization.RMSNorm1D(_w((128,), line))
    with pytest.raises(ValueError, match=r"attention_norm has dim 128, the attention 256"):
        DecoderLayer(**{**parts, "attention_norm": narrow})


def test_causal_lm_rejections(ttnn_mesh_pool):
    line, galaxy, other = ttnn_mesh_pool((1, 2)), ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 1))
    layer = DecoderLayer(**_parts(line))
    parts = _model_parts(line)
    model = CausalLM(**parts, layers=[layer], vocab_size=512, max_seq_len=256)
    assert model.topology == "1d" and model.max_batch_size == 1 and model.layers == [layer]
    assert not layer.ffn.config.w1.is_loaded()
    with pytest.raises(TypeError, match=r"layers must be a non-empty list of DecoderLayer"):
        CausalLM(**parts, layers=[], vocab_size=512, max_seq_len=256)
    with pytest.raises(TypeError, match=r"on a 1d mesh lm_head must be a LMHead1D, got LMHead2D"):
        CausalLM(
            **{**parts, "lm_head": _model_parts(galaxy)["lm_head"]},
            layers=[layer],
            vocab_size=512,
            max_seq_len=256,
        )
    with pytest.raises(ValueError, match=r"norm runs on another mesh than the layers"):
        CausalLM(
            **{**parts, "norm": _model_parts(other)["norm"]}, layers=[layer], vocab_size=512, max_seq_len=256
        )
    with pytest.raises(ValueError, match=r"layer 1 runs on another mesh or topology than layer 0"):
        CausalLM(**parts, layers=[layer, DecoderLayer(**_parts(other))], vocab_size=512, max_seq_len=256)
