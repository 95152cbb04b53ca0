"""RotarySetup1D and rope_tables against Hugging Face's rotary embedding (default and llama3 scaling), through
from_model_args, against tttv1's RotarySetup / get_prefill_rot_mat bit for bit, and its rejections."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import LazyWeight, RotarySetup1D, RotarySetup1DConfig, rope_tables, rotation_tile
from tttv2.testing import assert_pcc
from tttv2.testing.cases import pcc_threshold
from tttv2.testing.host import to_host
from tttv2.testing.legacy import tttv1_model_args
from tttv2.testing.meshes import MESH_1D
from tttv2.testing.references import family_config, hf_config, rope_reference

from ..cases import ROPE_1D_CASES

BF16_STEP = 2.0**-8  # the largest bfloat16 rounding error of a value in [-1, 1]


def _interleaved_to_hf(table):
    """Our [.., head_dim] rows hold each frequency twice side by side; HF's hold the frequencies twice in halves."""
    half = table[..., ::2]
    return np.concatenate([half, half], axis=-1)


@pytest.mark.parametrize("family", ["llama", "qwen2", "phi3"])
def test_rope_tables_vs_reference(family):
    config = family_config(family)
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    cos, sin = rope_tables(head_dim, 2048, config["rope_theta"], config.get("rope_scaling"))
    positions = [0, 1, 7, 100, 1000, 2047]
    hf_cos, hf_sin = rope_reference(hf_config(family), positions)
    # HF forms the angles in float32 (error ~ position × 2^-24), ours in float64: 2e-4 covers position 2047
    np.testing.assert_allclose(_interleaved_to_hf(cos[0, 0, positions]), hf_cos, atol=2e-4)
    np.testing.assert_allclose(_interleaved_to_hf(sin[0, 0, positions]), hf_sin, atol=2e-4)
    np.testing.assert_allclose(_interleaved_to_hf(cos[0, 0, positions[:4]]), hf_cos[:4], atol=2e-6)


@pytest.mark.parametrize("mesh_shape, mode, model_name, rot_mats_shape", ROPE_1D_CASES)
def test_rotary_setup_1d_vs_reference(mesh_shape, mode, model_name, rot_mats_shape, ttnn_mesh_pool):
    """The rotary tables tttv1's attention received in its demos (emitted by collect-cases into ../cases.py), for
    the catalogue model's theta and scaling: the same shapes (decode users, or prompt rows), HF's values."""
    from tttv1 import catalogue

    mesh = ttnn_mesh_pool(mesh_shape)
    model = catalogue.config_dict(model_name)
    config = catalogue.hf_config(model_name)
    head_dim = rot_mats_shape[0][-1]
    assert head_dim == model["head_dim"]
    cos, sin = rope_tables(head_dim, 512, model["rope_theta"], model.get("rope_scaling"))
    if mode == "decode":
        users = rot_mats_shape[0][1]
        module = RotarySetup1D(LazyWeight(cos, device=mesh), LazyWeight(sin), max_batch_size=users)
        positions = np.random.default_rng(1).integers(0, 512, users)
        got = module.forward("decode", module.get_rot_idxs(positions))
        assert got[0].memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
        expected, valid = rope_reference(config, positions), users
    else:
        rows = rot_mats_shape[0][-2]
        module = RotarySetup1D(LazyWeight(cos, device=mesh), LazyWeight(sin))
        valid = rows - 4  # a prompt padded to the recorded rows: the padding rows are zero
        got = module.forward("prefill", 100, valid, pad_to=rows)
        assert got[0].layout == ttnn.TILE_LAYOUT
        expected = rope_reference(config, range(100, 100 + valid))
    for table, reference, shape in zip(got, expected, rot_mats_shape):
        assert list(table.shape) == list(shape)
        host = to_host(table).reshape(-1, head_dim)
        assert np.all(host[valid:] == 0)
        assert np.abs(_interleaved_to_hf(host[:valid]) - reference).max() <= BF16_STEP
        assert_pcc(reference, _interleaved_to_hf(host[:valid]), pcc_threshold("rope"))


def test_rotary_setup_1d_vs_reference_from_model_args(ttnn_mesh_pool):
    from tttv1 import catalogue

    mesh = ttnn_mesh_pool((1, 2))
    name = "Llama-3.2-1B-tiny"  # llama3 scaling ×32
    args = tttv1_model_args(mesh, name, max_batch_size=8)
    module = RotarySetup1D.from_model_args(mesh, args, model_name=name)
    positions = [3, 77, 250, 0, 511, 12, 9, 300]
    cos, _ = module.decode_forward(module.get_rot_idxs(positions))
    hf_cos, _ = rope_reference(catalogue.hf_config(name), positions)
    assert np.abs(_interleaved_to_hf(to_host(cos).reshape(8, -1)) - hf_cos).max() <= BF16_STEP


@pytest.mark.parametrize("mesh_shape", MESH_1D, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rotary_setup_1d_matches_tttv1(mesh_shape, ttnn_mesh_pool):
    """tttv1's RotarySetup (decode lookups, transformation matrices) and get_prefill_rot_mat: equal to the bit."""
    import torch

    from tttv1.tt.common import get_prefill_rot_mat
    from tttv1.tt.rope import RotarySetup

    mesh = ttnn_mesh_pool(mesh_shape)
    args = tttv1_model_args(mesh, "Llama-3.1-8B-tiny", max_batch_size=16)
    legacy = RotarySetup(
        mesh, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )
    ours = RotarySetup1D.from_model_args(mesh, args)
    positions = [5, 0, 511, 42, 7, 100, 255, 256, 1, 2, 3, 4, 300, 400, 77, 88]
    expected = legacy.get_rot_mats(torch.tensor(positions))
    got = ours.decode_forward(ours.get_rot_idxs(positions))
    for e, g in zip(expected, got):
        assert g.memory_config() == e.memory_config()
        np.testing.assert_array_equal(to_host(g), to_host(e))
    for key, mat in legacy.get_both_trans_mats().items():
        np.testing.assert_array_equal(to_host(ours.transformation_mats[key]), to_host(mat), err_msg=key)
    expected = get_prefill_rot_mat(args.head_dim, mesh, 128, args.rope_theta, args.rope_scaling, start_pos=64)
    got = ours.prefill_forward(64, 128)
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(to_host(g), to_host(e))


def test_rotary_setup_1d_rejections(ttnn_mesh_pool):
    galaxy, mesh = ttnn_mesh_pool((8, 4)), ttnn_mesh_pool((1, 2))
    cos, sin = rope_tables(32, 64, 10000.0)
    assert rotation_tile().shape == (1, 1, 32, 32) and np.allclose(
        rotation_tile()[0, 0] @ rotation_tile()[0, 0], -np.eye(32)
    )
    with pytest.raises(
        ValueError, match=r"RotarySetup1D runs on 1-D meshes .* got a 8x4 mesh; use RotarySetup2D instead"
    ):
        RotarySetup1D(LazyWeight(cos, device=galaxy), LazyWeight(sin))
    with pytest.raises(
        ValueError,
        match=r"cos_matrix \(1, 1, 64, 32\) and sin_matrix \(1, 1, 32, 32\) must have the same shape",
    ):
        RotarySetup1D(LazyWeight(cos, device=mesh), LazyWeight(sin[:, :, :32]))
    with pytest.raises(
        ValueError,
        match=r"cos_matrix must have shape \(positions, head_dim\) or \(1, 1, positions, head_dim\)",
    ):
        RotarySetup1D(LazyWeight(cos[0], device=mesh), LazyWeight(sin[0]))
    with pytest.raises(TypeError, match=r"RotarySetup1D: sin_matrix must be a LazyWeight, got ndarray"):
        RotarySetup1D(LazyWeight(cos, device=mesh), sin)
    with pytest.raises(ValueError, match=r"max_batch_size must be 1..64 \(one core per user\), got 65"):
        RotarySetup1D(LazyWeight(cos, device=mesh), LazyWeight(sin), max_batch_size=65)
    with pytest.raises(ValueError, match=r"head_dim 64 does not match the tables' 32"):
        RotarySetup1D.from_config(
            RotarySetup1DConfig(
                cos_matrix=LazyWeight(cos), sin_matrix=LazyWeight(sin), mesh_device=mesh, head_dim=64
            )
        )
    module = RotarySetup1D(LazyWeight(cos[0, 0], device=mesh), LazyWeight(sin[0, 0]), max_batch_size=4)
    assert module.config.cos_matrix.shape == (1, 1, 64, 32)
    with pytest.raises(ValueError, match=r"positions must be a 1-D array of at most 4 non-negative ints"):
        module.get_rot_idxs([1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match=r"positions must be a 1-D array"):
        module.get_rot_idxs([-1])
    host_idxs = module.get_rot_idxs([1, 2], on_host=True)
    assert host_idxs.device() is None
    from_host = module.decode_forward(host_idxs)
    from_device = module.decode_forward(module.get_rot_idxs([1, 2]))
    np.testing.assert_array_equal(to_host(from_host[0]), to_host(from_device[0]))
    with pytest.raises(ValueError, match=r"positions \[60, 70\) are outside the tables' \[0, 64\)"):
        module.prefill_forward(60, 10)
    with pytest.raises(ValueError, match=r"pad_to 8 is shorter than seq_len 10"):
        module.prefill_forward(0, 10, pad_to=8)
    with pytest.raises(ValueError, match=r"RotarySetup1D: mode must be 'decode' or 'prefill'"):
        module.forward("train")
    with pytest.raises(ValueError, match=r"rope_tables: head_dim must be even, got 33"):
        rope_tables(33, 8, 1e4)
    with pytest.raises(ValueError, match=r"rope_scaling type must be 'default' or 'llama3', got 'yarn'"):
        rope_tables(32, 8, 1e4, {"rope_type": "yarn", "factor": 4.0})
    args = tttv1_model_args(galaxy, "Llama-3.1-8B-tiny")
    with pytest.raises(ValueError, match=r"RotarySetup1D cannot be used for Galaxy devices"):
        RotarySetup1D.from_model_args(galaxy, args)
