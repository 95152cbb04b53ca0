"""MLP2D (Galaxy) against Hugging Face (through __init__ and from_config, both reduction strategies), against HF
through from_model_args, against tttv1's Galaxy MLP bit for bit, and its rejections."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import MLP2D, LazyWeight, MLP2DConfig, get_tt_ccl
from tttv2.testing import assert_pcc
from tttv2.testing.cases import ModuleCase, pcc_threshold
from tttv2.testing.host import to_host, to_host_rows
from tttv2.testing.legacy import catalogue_hf_module, catalogue_state_dicts, tttv1_model_args
from tttv2.testing.references import hf_config, hf_mlp, mlp_weights, random_activations, run_reference

from ..cases import MLP_2D_CASES, module_case_args, recorded

# the cases tttv1's Galaxy demos run (emitted by collect-cases into ../cases.py; phi3's hidden 688 is padded to 1024,
# 32 per device), then the other orientation, which they never run
CASES = [
    *recorded(MLP_2D_CASES, module_case_args),
    pytest.param(ModuleCase((4, 8), "llama", "decode", 32, "uniform"), id="4x8-llama-decode-32-uniform"),
]


def _galaxy_input(x, mesh, memory_config):
    """Replicated over the rows, dim split over the columns: how the residual stream reaches the MLP."""
    return ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=tuple(mesh.shape)),
    )


@pytest.mark.parametrize("case", CASES)
def test_mlp_2d_vs_reference(case, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config = hf_config(case.family)
    mlp = hf_mlp(config, seed=12)
    w = {k: LazyWeight(v) for k, v in mlp_weights(mlp).items()}
    if case.precision == "uniform":
        module = MLP2D(LazyWeight(w["w1"].source, device=mesh), w["w2"], w["w3"])
    else:  # mixed precision, and the scatter / composite reductions the 8192-wide models use
        module = MLP2D.from_config(
            MLP2DConfig(
                **w,
                mesh_device=mesh,
                w1_w3_dtype=case.dtypes["w1_w3"],
                decode_hidden_reduce_scatter=True,
                all_reduce_composite=True,
            )
        )
    rows, cols = case.mesh_shape
    assert module.config.hidden_dim % (32 * rows * cols) == 0
    x = random_activations((1, 1, case.seq_len, config.hidden_size), seed=4)
    out = module.forward(LazyWeight(x), case.mode)
    assert list(out.shape) == [1, 1, case.seq_len, config.hidden_size // cols]
    assert_pcc(
        run_reference(mlp, x).reshape(case.seq_len, -1),
        to_host_rows(out),
        pcc_threshold("mlp", case.precision),
    )


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_mlp_2d_vs_reference_from_model_args(mode, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((8, 4))
    name = "Mistral-7B-tiny"
    args = tttv1_model_args(mesh, name)
    _, state_dict = catalogue_state_dicts(args)
    module = MLP2D.from_model_args(mesh, get_tt_ccl(mesh), args, state_dict, None, layer_num=1)
    rows = 32 if mode == "decode" else 128
    x = random_activations((1, 1, rows, args.dim), seed=6)
    out = module(LazyWeight(x), mode)
    reference = catalogue_hf_module(name, hf_mlp, "model.layers.1.mlp.")
    assert_pcc(run_reference(reference, x).reshape(rows, -1), to_host_rows(out), pcc_threshold("mlp"))


def test_mlp_2d_matches_tttv1(ttnn_mesh_pool):
    """tttv1's MLP on a Galaxy runs the same ops (all-reduce by gather + sum in decode, reduce-scatter /
    all-gather of the hidden dim in prefill, minimal_matmul past 128 rows): equal to the bit."""
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.mlp import MLP

    mesh = ttnn_mesh_pool((8, 4))
    args = tttv1_model_args(mesh, "Llama-3.1-8B-tiny")
    _, state_dict = catalogue_state_dicts(args)
    legacy = MLP(mesh, TT_CCL(mesh), args, state_dict, None, 0, ttnn.bfloat8_b, args.get_model_config())
    ours = MLP2D.from_model_args(mesh, get_tt_ccl(mesh), args, state_dict, None, layer_num=0)
    decode_mem = args.model_config["MLP_ACT_MEMCFG"]
    for mode, rows, mem in (("decode", 32, decode_mem), ("prefill", 128, None), ("prefill", 256, None)):
        x = random_activations((1, 1, rows, args.dim), seed=rows + 1)
        expected = legacy(_galaxy_input(x, mesh, mem), mode)
        got = ours(_galaxy_input(x, mesh, mem), mode)
        assert got.memory_config() == expected.memory_config() and got.dtype == expected.dtype
        np.testing.assert_array_equal(to_host(got), to_host(expected), err_msg=f"{mode} {rows}")


def test_mlp_2d_resolution_and_rejections(ttnn_mesh_pool):
    galaxy, t3k = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 8))
    weights = mlp_weights(hf_mlp(hf_config("llama")))
    w = {k: LazyWeight(v) for k, v in weights.items()}
    module = MLP2D.from_config(MLP2DConfig(**w, mesh_device=galaxy))
    cfg = module.config
    assert (
        cfg.hidden_dim == 1024
        and cfg.decode_hidden_reduce_scatter is False
        and cfg.all_reduce_composite is False
    )
    assert cfg.w1.mesh_mapper_config.placements == (ttnn.PlacementShard(-1), ttnn.PlacementShard(-2))
    assert cfg.topology == ttnn.Topology.Linear and w["w1"].device is None
    with pytest.raises(
        ValueError, match=r"MLP2D runs on 2-D meshes \(8x4, 4x8\); got a 1x8 mesh; use MLP1D instead"
    ):
        MLP2D.from_config(MLP2DConfig(**w, mesh_device=t3k))
    with pytest.raises(ValueError, match=r"MLP2D: dim must be a multiple of 128 \(32 × 4 columns\), got 96"):
        MLP2D.from_config(
            MLP2DConfig(
                w1=LazyWeight(np.zeros((96, 256), np.float32)),
                w2=LazyWeight(np.zeros((256, 96), np.float32)),
                w3=LazyWeight(np.zeros((96, 256), np.float32)),
                mesh_device=galaxy,
            )
        )
    with pytest.raises(ValueError, match=r"MLP2D: hidden_dim must be >= 896 and a multiple of 1024"):
        MLP2D.from_config(MLP2DConfig(**w, mesh_device=galaxy, hidden_dim=896))
    with pytest.raises(ValueError, match=r"MLP2D: w3 must have shape \(896, 256\)"):
        MLP2D.from_config(MLP2DConfig(w1=w["w2"], w2=w["w2"], w3=w["w3"], mesh_device=galaxy))
    args = tttv1_model_args(t3k, "Llama-3.1-8B-tiny")
    with pytest.raises(
        ValueError, match=r"MLP2D requires Galaxy topology \(8x4 or 4x8\), got cluster shape \[1, 8\]"
    ):
        MLP2D.from_model_args(t3k, None, args, {}, None, layer_num=0)
    folded = MLP2D.from_config(MLP2DConfig(**w, mesh_device=galaxy, prefill_len_cutoff=128))
    with pytest.raises(
        ValueError, match=r"MLP2D.prefill_forward: seq_len 160 must be a multiple of prefill_len_cutoff 128"
    ):
        folded.prefill_forward(LazyWeight(np.zeros((1, 1, 160, 256), np.float32)))
    x = random_activations((1, 1, 256, 256), seed=2)
    np.testing.assert_array_equal(
        to_host(folded.prefill_forward(LazyWeight(x))),
        to_host(module.prefill_forward(LazyWeight(x))),
    )
