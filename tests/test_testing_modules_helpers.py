"""tttv2.testing helpers used by module tests: host composition, case lists, Hugging Face references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.testing import cases, references
from tttv2.testing.host import to_host, to_host_rows
from tttv2.testing.meshes import MESH_1D, MESH_2D, MeshPool, mesh_id


def test_to_host_composes_from_topology(ttnn_mesh_pool, rng):
    mesh = ttnn_mesh_pool((8, 4))
    x = rng.standard_normal((1, 8, 32, 128)).astype(np.float32)
    t = ttnn.from_numpy(
        x,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(1, 3), mesh_shape=(8, 4)),
    )
    np.testing.assert_array_equal(to_host(t), x)
    rep = ttnn.from_numpy(
        x[:, :1],
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=(8, 4)),
    )
    np.testing.assert_array_equal(to_host(rep), x[:, :1])  # replicated over rows: one copy
    assert to_host_rows(rep, 5).shape == (5, 128)
    single = ttnn_mesh_pool((1, 1))
    one = ttnn.from_numpy(x[0, 0], dtype=ttnn.float32, device=single)
    np.testing.assert_array_equal(to_host(one), x[0, 0])


def test_mesh_pool_opens_once_and_closes():
    pool = MeshPool()
    m = pool((1, 2))
    assert pool([1, 2]) is m and mesh_id(m.shape) == "1x2"
    pool.close()
    assert not m.is_open
    assert (1, 8) in MESH_1D and MESH_2D == ((8, 4),)


def test_case_params_ids_and_thresholds():
    params = cases.case_params(
        [(1, 2)], ["llama", "phi3"], prefill_seq_lens=(128, 256), precisions=("mixed",)
    )
    ids = [p.id for p in params]
    assert ids == [
        "1x2-llama-prefill-128-mixed",
        "1x2-llama-prefill-256-mixed",
        "1x2-llama-decode-32-mixed",
        "1x2-phi3-prefill-128-mixed",
        "1x2-phi3-prefill-256-mixed",
        "1x2-phi3-decode-32-mixed",
    ]
    case = params[0].values[0]
    assert case.dtypes["w1_w3"] == ttnn.bfloat4_b and case.mode == "prefill"
    assert cases.pcc_threshold("mlp", "mixed") == 0.98 and cases.pcc_threshold("rmsnorm") == 0.999
    assert len(cases.case_params(MESH_1D, ["mistral"], decode=False)) == 3


@pytest.mark.parametrize("family", references.FAMILIES)
def test_reference_mlp_weights_are_in_tt_layout(family, rng):
    config = references.hf_config(family)
    mlp = references.hf_mlp(config, seed=1)
    w = references.mlp_weights(mlp)
    dim, hidden = config.hidden_size, config.intermediate_size
    assert (
        w["w1"].shape == (dim, hidden) and w["w3"].shape == (dim, hidden) and w["w2"].shape == (hidden, dim)
    )
    x = rng.standard_normal((3, dim)).astype(np.float32)
    gate = x @ w["w1"]
    expected = (gate / (1 + np.exp(-gate)) * (x @ w["w3"])) @ w["w2"]
    np.testing.assert_allclose(references.run_reference(mlp, x), expected, rtol=1e-4, atol=1e-5)
    # seeded: the same seed gives the same weights, another seed others
    assert np.array_equal(references.mlp_weights(references.hf_mlp(config, seed=1))["w2"], w["w2"])
    assert not np.array_equal(references.mlp_weights(references.hf_mlp(config, seed=2))["w2"], w["w2"])


def test_reference_builders():
    config = references.hf_config("qwen2", hidden_size=128)
    assert config.hidden_size == 128 and config.rms_norm_eps == 1e-6
    norm = references.hf_rmsnorm(config)
    assert norm.weight.shape == (128,) and not torch.all(norm.weight == 1)
    assert references.hf_embedding(config).weight.shape == (config.vocab_size, 128)
    assert references.hf_lm_head(config).weight.shape == (config.vocab_size, 128)
    cos, sin = references.rope_reference(references.hf_config("llama"), [0, 5])
    assert cos.shape == (2, 32) and np.allclose(cos[0], 1) and np.allclose(sin[0], 0)
    assert references.random_activations((2, 3), seed=4).dtype == np.float32
    with pytest.raises(ValueError, match=r"family must be one of llama, qwen2, mistral, phi3, got 'gpt2'"):
        references.family_config("gpt2")
    with pytest.raises(ValueError, match=r"model_type must be one of"):
        references.hf_config({"model_type": "gpt2"})
