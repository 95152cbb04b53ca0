"""RMSNorm1D against Hugging Face (sharded / interleaved decode, local / distributed prefill), through
from_model_args, against tttv1's RMSNorm bit for bit, and its rejections."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, RMSNorm1D, RMSNorm1DConfig, get_tt_ccl
from tttv2.testing import assert_pcc
from tttv2.testing.cases import ModuleCase, pcc_threshold
from tttv2.testing.host import to_host, to_host_rows
from tttv2.testing.legacy import catalogue_hf_module, catalogue_state_dicts, tttv1_model_args
from tttv2.testing.meshes import MESH_1D
from tttv2.testing.references import hf_config, hf_rmsnorm, random_activations, run_reference

from ..cases import RMSNORM_1D_CASES, module_case, recorded

# (case, config overrides): the cases tttv1's demos run (emitted by collect-cases into ../cases.py) through the happy
# path, then the options they never switch on
CASES = [
    *recorded(RMSNORM_1D_CASES, lambda *values: (module_case(*values), {})),
    *(
        pytest.param(case, overrides, id=f"{case.id}-{'-'.join(overrides)}")
        for case, overrides in (
            (ModuleCase((1, 2), "mistral", "decode", 32), {"decode_in_sharded": False}),
            (ModuleCase((1, 2), "phi3", "prefill", 128), {"prefill_distributed": True}),
            (ModuleCase((1, 8), "llama", "prefill", 256), {"prefill_distributed": True}),
            (ModuleCase((1, 8), "qwen2", "decode", 32), {"decode_out_sharded": False}),
        )
    ),
]


def _norm(family):
    config = hf_config(family)
    norm = hf_rmsnorm(config, seed=21)
    return config, norm, norm.weight.detach().numpy().copy()


@pytest.mark.parametrize(("case", "overrides"), CASES)
def test_rmsnorm_1d_vs_reference(case, overrides, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config, norm, weight = _norm(case.family)
    if overrides:
        module = RMSNorm1D.from_config(
            RMSNorm1DConfig(weight=LazyWeight(weight), mesh_device=mesh, eps=config.rms_norm_eps, **overrides)
        )
    else:
        module = RMSNorm1D(LazyWeight(weight, device=mesh), eps=config.rms_norm_eps)
    x = random_activations((1, 1, case.seq_len, config.hidden_size), seed=8)
    out = module(LazyWeight(x), case.mode)
    n = mesh.get_num_devices()
    width = config.hidden_size // n if overrides.get("prefill_distributed") and n > 1 else config.hidden_size
    assert list(out.shape) == [1, 1, case.seq_len, width]
    sharded = (
        case.mode == "decode"
        and overrides.get("decode_in_sharded", True)
        and overrides.get("decode_out_sharded", True)
    )
    assert out.memory_config().is_sharded() == sharded
    assert_pcc(run_reference(norm, x).reshape(case.seq_len, -1), to_host_rows(out), pcc_threshold("rmsnorm"))


def test_rmsnorm_1d_unit_offset(ttnn_mesh_pool):
    """Checkpoints that store (weight - 1) get the 1 added back."""
    mesh = ttnn_mesh_pool((1, 1))
    config, norm, weight = _norm("llama")
    module = RMSNorm1D.from_config(
        RMSNorm1DConfig(weight=LazyWeight(weight - 1.0), mesh_device=mesh, add_unit_offset=True)
    )
    assert module.config.weight.shape == (1, 1, 8, 32)
    x = random_activations((1, 1, 32, config.hidden_size), seed=1)
    assert_pcc(
        run_reference(norm, x).reshape(32, -1), to_host_rows(module.decode_forward(LazyWeight(x))), 0.999
    )


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_rmsnorm_1d_vs_reference_from_model_args(mode, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 2))
    name = "Qwen2.5-7B-tiny"  # eps 1e-6, and tttv1's 16-bit accumulation rule for this family
    args = tttv1_model_args(mesh, name)
    _, state_dict = catalogue_state_dicts(args)
    module = RMSNorm1D.from_model_args(
        mesh,
        get_tt_ccl(mesh),
        args,
        state_dict,
        None,
        0,
        "attention_norm",
        sharded_program_config=args.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
        sharded_output_config=args.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
    )
    assert module.config.eps == 1e-6 and module.config.compute_kernel_config.fp32_dest_acc_en is False
    rows = 32 if mode == "decode" else 128
    x = random_activations((1, 1, rows, args.dim), seed=12)
    reference = catalogue_hf_module(name, hf_rmsnorm, "model.layers.0.input_layernorm.")
    assert_pcc(
        run_reference(reference, x).reshape(rows, -1), to_host_rows(module(LazyWeight(x), mode)), 0.999
    )


def _device(x, mesh, memory_config=None, fractured=False):
    mapper = ttnn.ShardTensorToMesh(mesh, dim=-1) if fractured else ttnn.ReplicateTensorToMesh(mesh)
    return ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config,
        mesh_mapper=mapper,
    )


@pytest.mark.parametrize("mesh_shape", MESH_1D, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rmsnorm_1d_matches_tttv1(mesh_shape, ttnn_mesh_pool):
    """tttv1's RMSNorm as its decoder builds it (sharded decode, local prefill) and forced distributed in
    prefill: the same ops on the same configs, equal to the bit."""
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.rmsnorm import RMSNorm

    mesh = ttnn_mesh_pool(mesh_shape)
    args = tttv1_model_args(mesh, "Mistral-7B-tiny")
    _, state_dict = catalogue_state_dicts(args)
    program, memory = (
        args.model_config["SHARDED_NORM_MLP_PRGM_CFG"],
        args.model_config["SHARDED_MLP_INPUT_MEMCFG"],
    )
    legacy = RMSNorm(
        device=mesh,
        dim=args.dim,
        eps=args.norm_eps,
        state_dict=state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", 1),
        weight_key="ffn_norm",
        is_distributed=lambda mode: mode == "prefill" and args.num_devices > 1,
        sharded_program_config=program,
        sharded_output_config=memory,
        ccl_topology=args.ccl_topology(),
        tt_ccl=TT_CCL(mesh),
    )
    ours = RMSNorm1D.from_model_args(
        mesh,
        get_tt_ccl(mesh),
        args,
        state_dict,
        None,
        1,
        "ffn_norm",
        sharded_program_config=program,
        sharded_output_config=memory,
    )
    ours_distributed = RMSNorm1D.from_config(dataclasses.replace(ours.config, prefill_distributed=True))
    x = random_activations((1, 1, 32, args.dim), seed=2)
    expected = legacy(_device(x, mesh, memory), mode="decode", in_sharded=True, out_sharded=True)
    got = ours.decode_forward(_device(x, mesh, memory))
    assert got.memory_config() == expected.memory_config()
    np.testing.assert_array_equal(to_host(got), to_host(expected))

    x = random_activations((1, 1, 128, args.dim), seed=3)
    fractured = args.num_devices > 1
    expected = legacy(_device(x, mesh, fractured=fractured), mode="prefill")
    got = (ours_distributed if fractured else ours).prefill_forward(_device(x, mesh, fractured=fractured))
    np.testing.assert_array_equal(to_host(got), to_host(expected))


def test_rmsnorm_1d_resolution_and_rejections(ttnn_mesh_pool):
    mesh, t3k, galaxy = ttnn_mesh_pool((1, 2)), ttnn_mesh_pool((1, 8)), ttnn_mesh_pool((8, 4))
    _, _, weight = _norm("llama")
    user = RMSNorm1DConfig(weight=LazyWeight(weight, name="norm"), mesh_device=mesh, prefill_distributed=True)
    module = RMSNorm1D.from_config(user)
    assert user.weight.shape == (256,) and user.tt_ccl is None  # untouched
    cfg = module.config
    assert cfg.weight.shape == (1, 1, 8, 32) and cfg.weight.layout == ttnn.ROW_MAJOR_LAYOUT
    assert cfg.weight_distributed.name == "norm_distributed" and cfg.tt_ccl is get_tt_ccl(mesh)
    assert cfg.decode_input_memcfg == cfg.decode_memory_config and cfg.dim == 256
    single = RMSNorm1D.from_config(
        RMSNorm1DConfig(
            weight=LazyWeight(weight), mesh_device=ttnn_mesh_pool((1, 1)), prefill_distributed=True
        )
    )
    assert single.config.prefill_distributed is False and single.config.weight_distributed is None
    with pytest.raises(
        ValueError, match=r"RMSNorm1D runs on 1-D meshes .* got a 8x4 mesh; use RMSNorm2D instead"
    ):
        RMSNorm1D(LazyWeight(weight, device=galaxy))
    with pytest.raises(
        ValueError, match=r"RMSNorm1D: weight must have shape \(dim,\) or \(1, 1, dim / 32, 32\)"
    ):
        RMSNorm1D(LazyWeight(np.ones(100, np.float32), device=mesh))
    with pytest.raises(ValueError, match=r"RMSNorm1D: weight must have shape"):
        RMSNorm1D(LazyWeight(np.ones((4, 64), np.float32), device=mesh))
    with pytest.raises(TypeError, match=r"RMSNorm1D: weight must be a LazyWeight, got ndarray"):
        RMSNorm1D.from_config(RMSNorm1DConfig(weight=weight, mesh_device=mesh))
    with pytest.raises(ValueError, match=r"RMSNorm1D: dim 512 does not match the weight's 256 elements"):
        RMSNorm1D.from_config(RMSNorm1DConfig(weight=LazyWeight(weight), mesh_device=mesh, dim=512))
    with pytest.raises(
        ValueError, match=r"prefill_distributed needs dim / 32 = 3 tiles to split over 8 devices"
    ):
        RMSNorm1D.from_config(
            RMSNorm1DConfig(weight=LazyWeight(weight[:96]), mesh_device=t3k, prefill_distributed=True)
        )
    args = tttv1_model_args(galaxy, "Mistral-7B-tiny")
    with pytest.raises(
        ValueError, match=r"RMSNorm1D cannot be used for Galaxy devices; use RMSNorm2D instead"
    ):
        RMSNorm1D.from_model_args(galaxy, None, args, {}, None, 0, "attention_norm")
