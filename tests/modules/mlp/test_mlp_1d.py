"""MLP1D against Hugging Face (through __init__ and from_config), against HF through from_model_args, against
tttv1's MLP bit for bit, and its rejections."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import MLP1D, LazyWeight, MLP1DConfig
from tttv2.testing import assert_pcc
from tttv2.testing.cases import ModuleCase, pcc_threshold
from tttv2.testing.host import to_host, to_host_rows
from tttv2.testing.legacy import catalogue_hf_module, catalogue_state_dicts, tttv1_model_args
from tttv2.testing.meshes import MESH_1D
from tttv2.testing.references import hf_config, hf_mlp, mlp_weights, random_activations, run_reference

from ..cases import MLP_1D_CASES, module_case_args, recorded

# upstream's style: mesh × family × mode × seq_len × precision. The cases tttv1's demos run (emitted by collect-cases
# into ../cases.py), then what they never run
CASES = [
    *recorded(MLP_1D_CASES, module_case_args),
    *(
        pytest.param(case, id=case.id)
        for case in (
            # folded into rows of prefill_len_cutoff=128
            ModuleCase((1, 2), "llama", "prefill", 256, "mixed"),
            # hidden 688 padded to 768 for 8 devices
            ModuleCase((1, 8), "phi3", "decode", 32, "mixed"),
        )
    ),
]


def _hf(family):
    config = hf_config(family)
    mlp = hf_mlp(config, seed=11)
    return config, mlp, mlp_weights(mlp)


def _build(case, weights, mesh):
    """Uniform precision through the happy path, mixed through from_config (the only way to pick dtypes)."""
    w1, w2, w3 = (LazyWeight(weights[k]) for k in ("w1", "w2", "w3"))
    if case.precision == "uniform":
        ttnn.SetDefaultDevice(mesh)  # the happy path takes the mesh from the default device
        try:
            return MLP1D(w1, w2, w3)
        finally:
            ttnn.SetDefaultDevice(None)
    extra = {"prefill_len_cutoff": 128} if case.seq_len > 128 else {}
    config = MLP1DConfig(
        w1=w1,
        w2=w2,
        w3=w3,
        mesh_device=mesh,
        w1_w3_dtype=case.dtypes["w1_w3"],
        w2_dtype=case.dtypes["w2"],
        **extra,
    )
    return MLP1D.from_config(config)


@pytest.mark.parametrize("case", CASES)
def test_mlp_1d_vs_reference(case, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config, mlp, weights = _hf(case.family)
    module = _build(case, weights, mesh)
    n = mesh.get_num_devices()
    assert module.config.w1.dtype == case.dtypes["w1_w3"] and module.config.hidden_dim % (32 * n) == 0
    x = random_activations((1, 1, case.seq_len, config.hidden_size), seed=3)
    out = module.forward(LazyWeight(x), case.mode)
    assert list(out.shape) == [1, 1, case.seq_len, config.hidden_size // n]  # fractured over the devices
    expected = run_reference(mlp, x).reshape(case.seq_len, -1)
    assert_pcc(expected, to_host_rows(out), pcc_threshold("mlp", case.precision))


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_mlp_1d_vs_reference_from_model_args(mode, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 2))
    name = "Llama-3.2-1B-tiny"
    args = tttv1_model_args(mesh, name)
    _, state_dict = catalogue_state_dicts(args)
    module = MLP1D.from_model_args(mesh, _ccl(mesh), args, state_dict, None, layer_num=0)
    rows = 32 if mode == "decode" else 128
    x = random_activations((1, 1, rows, args.dim), seed=5)
    out = module(LazyWeight(x), mode)
    reference = catalogue_hf_module(name, hf_mlp, "model.layers.0.mlp.")
    assert_pcc(run_reference(reference, x).reshape(rows, -1), to_host_rows(out), pcc_threshold("mlp"))


def _ccl(mesh):
    from tttv2.modules import get_tt_ccl

    return get_tt_ccl(mesh)


def _tttv1_pair(mesh, name="Llama-3.1-8B-tiny"):
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.mlp import MLP

    args = tttv1_model_args(mesh, name)
    _, state_dict = catalogue_state_dicts(args)
    legacy = MLP(mesh, TT_CCL(mesh), args, state_dict, None, 0, ttnn.bfloat8_b, args.get_model_config())
    ours = MLP1D.from_model_args(mesh, _ccl(mesh), args, state_dict, None, layer_num=0)
    return args, legacy, ours


def _device_input(x, mesh, memory_config):
    return ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )


@pytest.mark.parametrize("mesh_shape", MESH_1D, ids=lambda s: f"{s[0]}x{s[1]}")
def test_mlp_1d_matches_tttv1(mesh_shape, ttnn_mesh_pool):
    """Same ModelArgs, state dict and input: the op sequence is tttv1's, so the outputs are equal to the bit.
    Prefill 256 takes tttv1's minimal_matmul path for the down projection, 128 its linear one."""
    mesh = ttnn_mesh_pool(mesh_shape)
    args, legacy, ours = _tttv1_pair(mesh)
    decode_mem = args.model_config["SHARDED_MLP_INPUT_MEMCFG"]
    for mode, rows, mem in (("decode", 32, decode_mem), ("prefill", 128, None), ("prefill", 256, None)):
        x = random_activations((1, 1, rows, args.dim), seed=rows)
        expected = legacy(_device_input(x, mesh, mem), mode)
        got = ours(_device_input(x, mesh, mem), mode)
        assert got.memory_config() == expected.memory_config() and got.dtype == expected.dtype
        np.testing.assert_array_equal(to_host(got), to_host(expected), err_msg=f"{mode} {rows}")


def test_mlp_1d_config_resolution(ttnn_mesh_pool, rng):
    mesh = ttnn_mesh_pool((1, 8))
    _, _, weights = _hf("phi3")
    user = MLP1DConfig(
        w1=LazyWeight(weights["w1"], name="gate"),
        w2=LazyWeight(weights["w2"]),
        w3=LazyWeight(weights["w3"], dtype=ttnn.bfloat16),
        mesh_device=mesh,
        mul_dtype=ttnn.bfloat16,
    )
    before = dataclasses.replace(user)
    module = MLP1D.from_config(user)
    assert user == before and user.dim is None and user.w1.device is None  # the caller's config is untouched
    cfg = module.config
    assert (
        cfg.dim == 256 and cfg.hidden_dim == 768 and cfg.w1.shape == (256, 768) and cfg.w2.shape == (768, 256)
    )
    assert cfg.w3.dtype == ttnn.bfloat16 and cfg.w1.dtype == ttnn.bfloat8_b  # user dtype kept, rest defaulted
    assert cfg.mul_dtype == ttnn.bfloat16 and cfg.linear_dtype == ttnn.bfloat16 and cfg.w1.name == "gate"
    assert cfg.activation == ttnn.UnaryOpType.SILU and cfg.prefill_len_cutoff == 1024
    assert cfg.tt_ccl is not None and cfg.topology is not None
    assert cfg.prefill_w1_w3_prg_config(128) is cfg.prefill_w1_w3_prg_config(128)  # memoised per seq_len
    # the padded columns are zero
    assert np.all(cfg.w1.source[:, 688:] == 0) and np.all(cfg.w2.source[688:] == 0)
    assert not any(w.is_loaded() for w in (cfg.w1, cfg.w2, cfg.w3))  # construction never converts
    module.load_device_weights()
    loaded = cfg.w1.get_device_weight()
    module.load_device_weights()
    assert cfg.w1.get_device_weight() is loaded and list(loaded.shape) == [256, 96]


def test_mlp_1d_spill_and_fold(ttnn_mesh_pool):
    """Spilling the gate to DRAM moves data but changes no value; folding long prompts changes no value either."""
    mesh = ttnn_mesh_pool((1, 2))
    _, _, weights = _hf("llama")

    def build(**extra):
        w = {k: LazyWeight(v) for k, v in weights.items()}
        return MLP1D.from_config(MLP1DConfig(**w, mesh_device=mesh, **extra))

    x = random_activations((1, 1, 32, 256), seed=9)
    plain = to_host(build().decode_forward(LazyWeight(x)))
    spilled = build(decode_spill_w1_to_dram_before_w3=True)
    assert spilled._spill_gate is not build()._spill_gate
    np.testing.assert_array_equal(to_host(spilled.decode_forward(LazyWeight(x))), plain)

    x = random_activations((1, 1, 256, 256), seed=10)
    fp32 = dict(
        ff1_3_compute_kernel_config=ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True, packer_l1_acc=False
        )
    )
    fp32["ff2_compute_kernel_config"] = fp32["ff1_3_compute_kernel_config"]
    whole = to_host(build(**fp32).prefill_forward(LazyWeight(x)))
    folded = to_host(build(prefill_len_cutoff=128, **fp32).prefill_forward(LazyWeight(x)))
    np.testing.assert_array_equal(folded, whole)


def test_mlp_1d_rejections(ttnn_mesh_pool):
    galaxy, single = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 1))
    _, _, weights = _hf("llama")
    w1, w2, w3 = (LazyWeight(weights[k]) for k in ("w1", "w2", "w3"))
    with pytest.raises(ValueError, match=r"MLP1D runs on 1-D meshes .* got a 8x4 mesh; use MLP2D instead"):
        MLP1D(LazyWeight(weights["w1"], device=galaxy), w2, w3)
    with pytest.raises(
        ValueError, match=r"MLP1D: w2 must have shape \(896, 256\) \(in, out\), got \(256, 896\)"
    ):
        MLP1D.from_config(MLP1DConfig(w1=w1, w2=LazyWeight(weights["w2"].T), w3=w3, mesh_device=single))
    with pytest.raises(ValueError, match=r"MLP1D: w3 must have shape \(256, 896\)"):
        MLP1D.from_config(MLP1DConfig(w1=w1, w2=w2, w3=LazyWeight(weights["w3"][:, :64]), mesh_device=single))
    with pytest.raises(TypeError, match=r"MLP1D: w2 must be a LazyWeight, got ndarray"):
        MLP1D.from_config(MLP1DConfig(w1=w1, w2=weights["w2"], w3=w3, mesh_device=single))
    with pytest.raises(ValueError, match=r"MLP1D: hidden_dim must be >= 896 and a multiple of 32"):
        MLP1D.from_config(MLP1DConfig(w1=w1, w2=w2, w3=w3, mesh_device=single, hidden_dim=880))
    odd = {
        k: LazyWeight(np.zeros((48, 64) if k != "w2" else (64, 48), np.float32)) for k in ("w1", "w2", "w3")
    }
    with pytest.raises(ValueError, match=r"MLP1D: dim must be a multiple of 32, got 48"):
        MLP1D.from_config(MLP1DConfig(**odd, mesh_device=single))
    module = MLP1D.from_config(MLP1DConfig(w1=w1, w2=w2, w3=w3, mesh_device=single, prefill_len_cutoff=128))
    with pytest.raises(ValueError, match=r"seq_len 192 must be a multiple of prefill_len_cutoff 128"):
        module.prefill_forward(LazyWeight(np.zeros((1, 1, 192, 256), np.float32)))
    with pytest.raises(ValueError, match=r"MLP1D: mode must be 'decode' or 'prefill'"):
        module(LazyWeight(np.zeros((1, 1, 32, 256), np.float32)), "train")
    with pytest.raises(TypeError, match=r"MLP1D.decode_forward: x must be a ttnn.Tensor or a LazyWeight"):
        module.decode_forward(np.zeros((1, 1, 32, 256), np.float32))
    with pytest.raises(TypeError, match=r"MLP1D.from_config: config must be a MLP1DConfig"):
        MLP1D.from_config({"w1": w1})


def test_mlp_1d_from_model_args_rejects_galaxy_and_caches_weights(ttnn_mesh_pool, tmp_path):
    galaxy = ttnn_mesh_pool((8, 4))
    args = tttv1_model_args(galaxy, "Llama-3.1-8B-tiny")
    with pytest.raises(ValueError, match=r"MLP1D cannot be used for Galaxy devices; use MLP2D instead"):
        MLP1D.from_model_args(galaxy, None, args, {}, None, layer_num=0)
    mesh = ttnn_mesh_pool((1, 2))
    args = tttv1_model_args(mesh, "Llama-3.1-8B-tiny")
    args.dummy_weights = False  # a real checkpoint: weights are cached under weight_cache_path
    _, state_dict = catalogue_state_dicts(args)
    first = MLP1D.from_model_args(mesh, _ccl(mesh), args, state_dict, tmp_path, layer_num=1)
    first.load_device_weights()
    files = sorted(p.name for p in (tmp_path / "layers.1.feed_forward").iterdir())
    assert len(files) == 3 and all(f.endswith(".tensorbin") for f in files)
    second = MLP1D.from_model_args(mesh, _ccl(mesh), args, state_dict, tmp_path, layer_num=1)
    assert second.config.w2.cache_path() == first.config.w2.cache_path()
    np.testing.assert_array_equal(
        to_host(second.config.w2.get_device_weight()), to_host(first.config.w2.get_device_weight())
    )
