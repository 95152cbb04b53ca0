"""Embedding1D against Hugging Face (with and without embed_scale), through from_model_args, against tttv1's
Embedding / ScaledEmbedding bit for bit, and its rejections."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import Embedding1D, Embedding1DConfig, LazyWeight
from tttv2.testing import assert_pcc
from tttv2.testing.cases import DECODE_ROWS, ModuleCase, pcc_threshold
from tttv2.testing.host import to_host
from tttv2.testing.legacy import catalogue_state_dicts, tttv1_model_args
from tttv2.testing.meshes import MESH_1D
from tttv2.testing.references import hf_config, hf_embedding

from ..cases import EMBEDDING_1D_CASES, family_of, recorded


def _recorded(mesh_shape, model_name, x_shape):
    """tttv1's Embedding takes no mode: [1, 1, 1, 32] token ids are a decode batch, longer ones a prompt."""
    tokens = x_shape[-1]
    mode = "decode" if tokens == DECODE_ROWS else "prefill"
    return ModuleCase(tuple(mesh_shape), family_of(model_name), mode, tokens), 1.0


# (case, embed_scale): the cases tttv1's demos run (emitted by collect-cases into ../cases.py), then a scale
CASES = [
    *recorded(EMBEDDING_1D_CASES, _recorded),
    pytest.param(
        ModuleCase((1, 8), "phi3", "prefill", 128), 16.0, id="1x8-phi3-prefill-128-x16"
    ),  # Gemma-style
]


def _ids(vocab, count, seed):
    return np.random.default_rng(seed).integers(0, vocab, (1, 1, 1, count)).astype(np.uint32)


@pytest.mark.parametrize(("case", "scale"), CASES)
def test_embedding_1d_vs_reference(case, scale, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config = hf_config(case.family)
    table = hf_embedding(config, seed=31).weight.detach().numpy()
    module = Embedding1D(LazyWeight(table, device=mesh), embed_scale=scale)
    ids = _ids(config.vocab_size, case.seq_len, seed=case.seq_len)
    out = module(LazyWeight(ids), case.mode)
    assert list(out.shape) == [1, 1, case.seq_len, config.hidden_size // mesh.get_num_devices()]
    got = to_host(out)[0, 0]
    assert_pcc(table[ids[0, 0, 0]] * scale, got, pcc_threshold("embedding"))


def test_embedding_1d_scale_is_bound(ttnn_mesh_pool):
    """No multiply at all without a scale; one multiply with it."""
    mesh = ttnn_mesh_pool((1, 2))
    table = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    ids = LazyWeight(_ids(64, 8, seed=1))
    for scale, multiplies in ((1.0, 0), (3.0, 1)):
        module = Embedding1D.from_config(
            Embedding1DConfig(weights=LazyWeight(table), mesh_device=mesh, embed_scale=scale)
        )
        with ttnn.OpTrace() as trace:
            module.decode_forward(ids)
        assert "ttnn.embedding" in trace.names
        assert sum(name == "ttnn.multiply" for name in trace.names) == multiplies, trace.names


def test_embedding_1d_vs_reference_from_model_args(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 2))
    args = tttv1_model_args(mesh, "Phi-3-mini-tiny")
    hf, state_dict = catalogue_state_dicts(args)
    module = Embedding1D.from_model_args(mesh, args, None, state_dict, ttnn.bfloat16)
    ids = _ids(args.vocab_size, 40, seed=2)
    expected = hf["model.embed_tokens.weight"].numpy()[ids[0, 0, 0]]
    got = to_host(module.prefill_forward(LazyWeight(ids)))[0, 0]
    assert_pcc(expected, got, pcc_threshold("embedding"))


@pytest.mark.parametrize("mesh_shape", MESH_1D, ids=lambda s: f"{s[0]}x{s[1]}")
def test_embedding_1d_matches_tttv1(mesh_shape, ttnn_mesh_pool):
    from tttv1.tt.embedding import Embedding, ScaledEmbedding

    mesh = ttnn_mesh_pool(mesh_shape)
    args = tttv1_model_args(mesh, "Llama-3.2-1B-tiny")
    _, state_dict = catalogue_state_dicts(args)
    ids = _ids(args.vocab_size, 32, seed=3)
    for legacy, scale in (
        (Embedding(mesh, args, None, state_dict, ttnn.bfloat16), None),
        (ScaledEmbedding(mesh, args, None, state_dict, ttnn.bfloat16, embed_scale=8.0), 8.0),
    ):
        ours = Embedding1D.from_model_args(mesh, args, None, state_dict, ttnn.bfloat16, embed_scale=scale)
        device_ids = ttnn.from_numpy(
            ids, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
        )
        expected = ttnn.unsqueeze_to_4D(legacy(device_ids))
        got = ours.prefill_forward(device_ids)
        np.testing.assert_array_equal(to_host(got), to_host(expected), err_msg=f"scale {scale}")


def test_embedding_1d_rejections(ttnn_mesh_pool):
    galaxy, t3k = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 8))
    table = np.zeros((64, 64), np.float32)
    with pytest.raises(
        ValueError, match=r"Embedding1D runs on 1-D meshes .* got a 8x4 mesh; use Embedding2D instead"
    ):
        Embedding1D(LazyWeight(table, device=galaxy))
    with pytest.raises(
        ValueError,
        match=r"Embedding1D: weights must have shape \(vocab, dim\) or \(1, 1, vocab, dim\), got \(64,\)",
    ):
        Embedding1D(LazyWeight(table[0], device=t3k))
    with pytest.raises(ValueError, match=r"Embedding1D: dim 36 must split evenly over the 8 devices"):
        Embedding1D(LazyWeight(np.zeros((64, 36), np.float32), device=t3k))
    with pytest.raises(TypeError, match=r"Embedding1D: weights must be a LazyWeight, got ndarray"):
        Embedding1D(table)
    with pytest.raises(ValueError, match=r"Embedding1D: embed_scale must be a number, got None"):
        Embedding1D(LazyWeight(table, device=t3k), embed_scale=None)
    module = Embedding1D(LazyWeight(np.zeros((1, 1, 64, 64), np.float32), device=t3k))
    assert module.config.weights.shape == (1, 1, 64, 64) and module.config.vocab_size == 64
    with pytest.raises(ValueError, match=r"Embedding1D: mode must be 'decode' or 'prefill'"):
        module(LazyWeight(_ids(64, 4, 0)), "sample")
    args = tttv1_model_args(galaxy, "Llama-3.2-1B-tiny")
    with pytest.raises(ValueError, match=r"Embedding1D cannot be used for Galaxy devices"):
        Embedding1D.from_model_args(galaxy, args, None, {}, ttnn.bfloat16)
