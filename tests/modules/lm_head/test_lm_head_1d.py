"""LMHead1D against Hugging Face (vocab padding, several column chunks per device), through from_model_args,
against tttv1's LMHead bit for bit, and its rejections."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, LMHead1D, LMHead1DConfig
from tttv2.testing import assert_pcc
from tttv2.testing.cases import ModuleCase, pcc_threshold
from tttv2.testing.host import to_host, to_host_rows
from tttv2.testing.legacy import catalogue_hf_module, catalogue_state_dicts, tttv1_model_args
from tttv2.testing.meshes import MESH_1D
from tttv2.testing.references import hf_config, hf_lm_head, random_activations, run_reference

from ..cases import LM_HEAD_1D_CASES, module_case, recorded


def _recorded(mesh_shape, mode, model_name, x_shape):
    """tttv1's default chunking: the vocab padded to 32 columns per device, in one chunk per device."""
    case = module_case(mesh_shape, mode, model_name, x_shape)
    devices = mesh_shape[0] * mesh_shape[1]
    return case, None, [-(-hf_config(case.family).vocab_size // (32 * devices)) * 32]


# (case, max_columns_per_device, expected per-device chunk widths): the cases tttv1's demos run (emitted by
# collect-cases into ../cases.py), then several chunks per device, which they never use
CASES = [
    *recorded(LM_HEAD_1D_CASES, _recorded),
    *(
        pytest.param(case, columns, splits, id=f"{case.id}-max{columns}")
        for case, columns, splits in (
            # vocab 500 padded to 512
            (ModuleCase((1, 2), "phi3", "decode", 32), 128, [128, 128]),
            # vocab 640 padded to 768: 96 per device
            (ModuleCase((1, 8), "qwen2", "prefill", 32), 64, [64, 32]),
        )
    ),
]


@pytest.mark.parametrize(("case", "max_columns", "splits"), CASES)
def test_lm_head_1d_vs_reference(case, max_columns, splits, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config = hf_config(case.family)
    head = hf_lm_head(config, seed=41)
    weight = LazyWeight(head.weight.detach().numpy().T.copy(), device=mesh)
    module = LMHead1D(weight) if max_columns is None else LMHead1D(weight, max_columns_per_device=max_columns)
    n = mesh.get_num_devices()
    assert module.config.split_sizes == splits and len(module.config.output_weights) == len(splits)
    x = random_activations((1, 1, 32, config.hidden_size), seed=5)
    out = module(LazyWeight(x), case.mode)
    padded = module.config.padded_vocab_size
    assert list(out.shape) == [1, 1, 32, padded // n] and padded % (32 * n) == 0
    logits = to_host_rows(out)
    assert np.all(logits[:, config.vocab_size :] == 0)  # the padding columns are zero weights
    assert_pcc(
        run_reference(head, x).reshape(32, -1), logits[:, : config.vocab_size], pcc_threshold("lm_head")
    )


def test_lm_head_1d_vs_reference_from_model_args(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 2))
    name = "Phi-3-mini-tiny"
    args = tttv1_model_args(mesh, name)
    _, state_dict = catalogue_state_dicts(args)
    module = LMHead1D.from_model_args(mesh, args, state_dict, "", None, args.max_columns_per_device_lm_head)
    x = random_activations((1, 1, 32, args.dim), seed=6)
    reference = catalogue_hf_module(name, hf_lm_head, "lm_head.")
    logits = to_host_rows(module.decode_forward(LazyWeight(x)))[:, : args.vocab_size]
    assert_pcc(run_reference(reference, x).reshape(32, -1), logits, pcc_threshold("lm_head"))


@pytest.mark.parametrize("mesh_shape", MESH_1D, ids=lambda s: f"{s[0]}x{s[1]}")
def test_lm_head_1d_matches_tttv1(mesh_shape, ttnn_mesh_pool):
    """tttv1's LMHead with its default chunk and with 256-column chunks, decode and prefill: equal to the bit."""
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.lm_head import LMHead

    mesh = ttnn_mesh_pool(mesh_shape)
    args = tttv1_model_args(mesh, "Llama-3.1-8B-tiny")
    _, state_dict = catalogue_state_dicts(args)
    memory = args.model_config["LM_HEAD_INPUT_MEMCFG"]
    x = random_activations((1, 1, 32, args.dim), seed=7)
    for max_columns in (args.max_columns_per_device_lm_head, 256):
        legacy = LMHead(args, mesh, TT_CCL(mesh), ttnn.bfloat8_b, state_dict, "", None, max_columns)
        ours = LMHead1D.from_model_args(mesh, args, state_dict, "", None, max_columns, dtype=ttnn.bfloat8_b)
        for mode in ("decode", "prefill"):

            def device_input(host):
                return ttnn.from_numpy(
                    host,
                    dtype=ttnn.bfloat16,
                    layout=ttnn.TILE_LAYOUT,
                    device=mesh,
                    memory_config=memory,
                    mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
                )

            expected = legacy(device_input(x), mode=mode)
            got = ours(device_input(x), mode)
            assert got.memory_config() == expected.memory_config()
            np.testing.assert_array_equal(to_host(got), to_host(expected), err_msg=f"{max_columns} {mode}")


def test_lm_head_1d_rejections(ttnn_mesh_pool):
    galaxy, mesh = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 2))
    weight = np.zeros((64, 100), np.float32)
    with pytest.raises(
        ValueError, match=r"LMHead1D runs on 1-D meshes .* got a 8x4 mesh; use LMHead2D instead"
    ):
        LMHead1D(LazyWeight(weight, device=galaxy))
    with pytest.raises(
        ValueError, match=r"LMHead1D: weight must have shape \(dim, vocab\), got \(1, 64, 100\)"
    ):
        LMHead1D(LazyWeight(weight[None], device=mesh))
    with pytest.raises(ValueError, match=r"LMHead1D: dim must be a multiple of 32, got 48"):
        LMHead1D(LazyWeight(np.zeros((48, 100), np.float32), device=mesh))
    with pytest.raises(ValueError, match=r"max_columns_per_device must be a positive multiple of 32, got 50"):
        LMHead1D(LazyWeight(weight, device=mesh), max_columns_per_device=50)
    with pytest.raises(TypeError, match=r"LMHead1D: weight must be a LazyWeight, got ndarray"):
        LMHead1D(weight)

    def config(**kw):
        return LMHead1DConfig(weight=LazyWeight(weight), mesh_device=mesh, **kw)

    with pytest.raises(ValueError, match=r"LMHead1D: dim 32 does not match the weight's 64 rows"):
        LMHead1D.from_config(config(dim=32))
    with pytest.raises(ValueError, match=r"padded_vocab_size must be >= 100 and a multiple of 64, got 96"):
        LMHead1D.from_config(config(padded_vocab_size=96))
    with pytest.raises(
        ValueError, match=r"split_sizes \[32\] must add up to the 64 columns each device owns"
    ):
        LMHead1D.from_config(config(split_sizes=[32]))
    with pytest.raises(ValueError, match=r"program_configs must have one entry per chunk \(1\), got 2"):
        LMHead1D.from_config(config(program_configs=[None, None]))
    # interleaved outputs (no program configs): nothing to unshard
    plain = LMHead1D.from_config(
        config(
            program_configs=[None],
            matmul_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
            input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
            weights_memcfgs=[ttnn.DRAM_MEMORY_CONFIG],
        )
    )
    out = plain.prefill_forward(LazyWeight(np.ones((1, 1, 32, 64), np.float32)))
    assert list(out.shape) == [1, 1, 32, 64] and np.all(to_host(out) == 0)
    args = tttv1_model_args(galaxy, "Llama-3.1-8B-tiny")
    with pytest.raises(ValueError, match=r"LMHead1D cannot be used for Galaxy devices"):
        LMHead1D.from_model_args(galaxy, args, {}, "", None, 64)
