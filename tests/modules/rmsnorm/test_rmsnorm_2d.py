"""RMSNorm2D (Galaxy) against Hugging Face (distributed and local), through from_model_args, against tttv1's
Galaxy DistributedNorm bit for bit, and its rejections."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, RMSNorm2D, RMSNorm2DConfig, get_tt_ccl
from tttv2.testing import assert_pcc
from tttv2.testing.cases import ModuleCase, pcc_threshold
from tttv2.testing.host import to_host, to_host_rows
from tttv2.testing.legacy import catalogue_hf_module, catalogue_state_dicts, tttv1_model_args
from tttv2.testing.references import hf_config, hf_rmsnorm, random_activations, run_reference

from ..cases import RMSNORM_2D_CASES, model_config, module_case, recorded


def _recorded(mesh_shape, mode, model_name, x_shape):
    """tttv1's Galaxy decoder norms see the residual split over the 4 mesh columns: distributed norms."""
    distributed = x_shape[-1] < model_config(model_name)["hidden_size"]
    return module_case(mesh_shape, mode, model_name, x_shape), distributed


# (case, distributed): the cases tttv1's Galaxy demos run (emitted by collect-cases into ../cases.py), then the
# head-local norms (q/k norms) they never run
CASES = [
    *recorded(RMSNORM_2D_CASES, _recorded),
    *(
        pytest.param(case, False, id=f"{case.id}-local")  # a head-local norm: whole rows on every device
        for case in (ModuleCase((8, 4), "phi3", "decode", 32), ModuleCase((8, 4), "mistral", "prefill", 256))
    ),
]


@pytest.mark.parametrize(("case", "distributed"), CASES)
def test_rmsnorm_2d_vs_reference(case, distributed, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config = hf_config(case.family)
    dim = config.hidden_size if distributed else 64  # head-local norms see one head (head_dim) at a time
    norm = hf_rmsnorm(config, seed=22, dim=dim)
    weight = LazyWeight(norm.weight.detach().numpy().copy(), device=mesh)
    module = RMSNorm2D(weight, eps=config.rms_norm_eps, distributed=distributed)
    x = random_activations((1, 1, case.seq_len, dim), seed=9)
    out = module(LazyWeight(x), case.mode)
    assert list(out.shape) == [1, 1, case.seq_len, dim // 4 if distributed else dim]
    assert out.memory_config().is_sharded() == (distributed and case.mode == "decode")
    assert_pcc(run_reference(norm, x).reshape(case.seq_len, -1), to_host_rows(out), pcc_threshold("rmsnorm"))


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_rmsnorm_2d_vs_reference_from_model_args(mode, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((8, 4))
    name = "Llama-3.1-8B-tiny"
    args = tttv1_model_args(mesh, name)
    _, state_dict = catalogue_state_dicts(args)
    module = RMSNorm2D.from_model_args(mesh, get_tt_ccl(mesh), args, state_dict, None, None, "norm")
    rows = 32 if mode == "decode" else 128
    x = random_activations((1, 1, rows, args.dim), seed=13)
    reference = catalogue_hf_module(name, hf_rmsnorm, "model.norm.")
    assert_pcc(
        run_reference(reference, x).reshape(rows, -1), to_host_rows(module(LazyWeight(x), mode)), 0.999
    )


def test_rmsnorm_2d_matches_tttv1(ttnn_mesh_pool):
    """tttv1's DistributedNorm on a Galaxy (sharded distributed decode, interleaved distributed prefill)."""
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.distributed_norm import DistributedNorm
    from tttv1.tt.rmsnorm import RMSNorm

    mesh = ttnn_mesh_pool((8, 4))
    args = tttv1_model_args(mesh, "Mistral-7B-tiny")
    _, state_dict = catalogue_state_dicts(args)
    tt_ccl = TT_CCL(mesh)
    inner = RMSNorm(
        device=mesh,
        dim=args.dim,
        eps=args.norm_eps,
        state_dict=state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", 0),
        weight_key="attention_norm",
        is_distributed=args.is_distributed_norm,
        ccl_topology=args.ccl_topology(),
        tt_ccl=tt_ccl,
    )
    legacy = DistributedNorm(inner, args, tt_ccl, TG=True)
    ours = RMSNorm2D.from_model_args(mesh, tt_ccl, args, state_dict, None, 0, "attention_norm")
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=(8, 4))
    for mode, rows in (("decode", 32), ("prefill", 128)):
        x = random_activations((1, 1, rows, args.dim), seed=rows)

        def device_input(host):
            return ttnn.from_numpy(
                host, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper
            )

        expected = legacy(device_input(x), mode)
        got = ours(device_input(x), mode)
        assert got.memory_config() == expected.memory_config()
        np.testing.assert_array_equal(to_host(got), to_host(expected), err_msg=mode)


def test_rmsnorm_2d_rejections(ttnn_mesh_pool):
    galaxy, t3k = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 8))
    weight = np.ones(256, np.float32)
    with pytest.raises(
        ValueError, match=r"RMSNorm2D runs on 2-D meshes \(8x4, 4x8\); got a 1x8 mesh; use RMSNorm1D instead"
    ):
        RMSNorm2D(LazyWeight(weight, device=t3k))
    with pytest.raises(ValueError, match=r"RMSNorm2D: dim / 32 = 3 tiles must split over the 4 mesh columns"):
        RMSNorm2D(LazyWeight(weight[:96], device=galaxy))
    with pytest.raises(ValueError, match=r"RMSNorm2D: dim 128 does not match the weight's 256 elements"):
        RMSNorm2D.from_config(RMSNorm2DConfig(weight=LazyWeight(weight), mesh_device=galaxy, dim=128))
    local = RMSNorm2D(
        LazyWeight(weight[:96], device=galaxy), distributed=False
    )  # a local norm needs no split
    assert (
        local.config.weight_distributed is None
        and local.config.decode_input_memcfg == ttnn.DRAM_MEMORY_CONFIG
    )
    args = tttv1_model_args(t3k, "Mistral-7B-tiny")
    with pytest.raises(
        ValueError, match=r"RMSNorm2D requires a Galaxy \(8x4\), got cluster shape \[1, 8\]; use RMSNorm1D"
    ):
        RMSNorm2D.from_model_args(t3k, None, args, {}, None, 0, "attention_norm")
