"""Embedding2D, RotarySetup2D and LMHead2D on an 8x4 Galaxy against Hugging Face (their bit-exact equivalence
with tttv1's Galaxy path is checked by tests/modules/test_decoder.py, whose Decoder2D runs on them), and their
rejections."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.modules import (
    Embedding2D,
    Embedding2DConfig,
    LazyWeight,
    LMHead2D,
    LMHead2DConfig,
    RotarySetup2D,
    RotarySetup2DConfig,
    rope_tables,
)
from tttv2.testing import assert_pcc
from tttv2.testing.cases import pcc_threshold
from tttv2.testing.references import hf_config, hf_embedding, hf_lm_head, random_activations, run_reference

ROWS, COLS = 8, 4


def _columns(tensor) -> np.ndarray:
    """The devices of mesh row 0 side by side (the output is split over the columns, the same on every row)."""
    parts = [ttnn.to_numpy(p) for p in ttnn.get_device_tensors(tensor)]
    for row in range(1, ROWS):  # every row holds the same
        np.testing.assert_array_equal(
            np.concatenate(parts[row * COLS : (row + 1) * COLS], -1), np.concatenate(parts[:COLS], -1)
        )
    return np.concatenate(parts[:COLS], axis=-1).astype(np.float32)


@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_embedding_2d_vs_reference(scale, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((ROWS, COLS))
    config = hf_config("qwen2")
    table = hf_embedding(config, seed=31).weight.detach().numpy()
    module = Embedding2D(LazyWeight(table, device=mesh), embed_scale=scale)
    ids = np.random.default_rng(2).integers(0, config.vocab_size, (1, 1, 1, 64)).astype(np.uint32)
    out = module.forward(LazyWeight(ids), "decode")
    assert list(out.shape) == [1, 1, 64, config.hidden_size // COLS]
    assert_pcc(table[ids[0, 0, 0]] * scale, _columns(out)[0, 0], pcc_threshold("embedding"))
    assert module.config.weights.dtype == ttnn.bfloat16


@pytest.mark.parametrize("family", ["llama", "phi3"])  # phi3: vocab 500, padded to 1024 (32 × 32 devices)
def test_lm_head_2d_vs_reference(family, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((ROWS, COLS))
    config = hf_config(family)
    head = hf_lm_head(config, seed=41)
    module = LMHead2D(LazyWeight(head.weight.detach().numpy().T.copy(), device=mesh))
    assert module.config.padded_vocab_size == 1024
    x = random_activations((1, 1, 32, config.hidden_size), seed=5)
    expected = run_reference(head, x).reshape(32, -1)
    for mode in ("decode", "prefill"):
        out = module.forward(LazyWeight(x), mode)
        parts = [ttnn.to_numpy(p).astype(np.float32) for p in ttnn.get_device_tensors(out)]
        # the vocab is split over the mesh rows; every column holds the whole sum
        logits = np.concatenate([parts[r * COLS] for r in range(ROWS)], axis=-1)[0, 0]
        np.testing.assert_array_equal(parts[1], parts[0])
        assert np.all(logits[:, config.vocab_size :] == 0)
        assert_pcc(expected, logits[:, : config.vocab_size], pcc_threshold("lm_head"))


@pytest.mark.parametrize("batch", [1, 8])  # one user (the same on every column) / two users per column
def test_rotary_setup_2d(batch, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((ROWS, COLS))
    cos, sin = rope_tables(32, 256, 500000.0, hf_config("llama").rope_scaling)
    module = RotarySetup2D(LazyWeight(cos, device=mesh), LazyWeight(sin), max_batch_size=batch)
    users = max(batch // COLS, 1)
    assert module.config.users_per_column == users
    positions = np.random.default_rng(3).integers(0, 256, batch)
    got_cos, got_sin = module.forward("decode", module.get_rot_idxs(positions))
    assert list(got_cos.shape) == [1, users, 1, 32]
    assert got_cos.memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    for column in range(COLS):
        mine = positions[column * users : (column + 1) * users] if batch > 1 else positions
        for got, table in ((got_cos, cos), (got_sin, sin)):
            rows = ttnn.to_numpy(ttnn.get_device_tensors(got)[column]).reshape(users, 32)
            np.testing.assert_allclose(rows, table[0, 0, mine], atol=2.0**-8)
    prefill = module.prefill_forward(10, 64, pad_to=96)
    rows = ttnn.to_numpy(ttnn.get_device_tensors(prefill[0])[5])[0, 0]
    np.testing.assert_allclose(rows[:64], cos[0, 0, 10:74], atol=2.0**-8)
    assert np.all(rows[64:] == 0) and list(prefill[1].shape) == [1, 1, 96, 32]
    mats = module.transformation_mats
    assert list(mats["decode"].shape) == [1, 1, 32 * users, 32] and list(mats["prefill"].shape) == [
        1,
        1,
        32,
        32,
    ]


def test_galaxy_io_rejections(ttnn_mesh_pool):
    galaxy, line = ttnn_mesh_pool((ROWS, COLS)), ttnn_mesh_pool((1, 2))
    table = np.zeros((64, 64), np.float32)
    cos, sin = rope_tables(32, 64, 10000.0)
    for build, message in (
        (
            lambda: Embedding2D(LazyWeight(table, device=line)),
            r"Embedding2D runs on 2-D meshes .* use Embedding1D",
        ),
        (
            lambda: Embedding2D(LazyWeight(np.zeros((64, 66), np.float32), device=galaxy)),
            r"dim 66 must split evenly over the 4 mesh columns",
        ),
        (lambda: Embedding2D(LazyWeight(table[0], device=galaxy)), r"weights must have shape \(vocab, dim\)"),
        (
            lambda: Embedding2D(LazyWeight(table, device=galaxy), embed_scale=None),
            r"embed_scale must be a number",
        ),
        (lambda: LMHead2D(LazyWeight(table, device=line)), r"LMHead2D runs on 2-D meshes .* use LMHead1D"),
        (
            lambda: LMHead2D(LazyWeight(np.zeros((96, 100), np.float32), device=galaxy)),
            r"dim must be a multiple of 128",
        ),
        (lambda: LMHead2D(LazyWeight(table[None], device=galaxy)), r"weight must have shape \(dim, vocab\)"),
        (
            lambda: LMHead2D.from_config(
                LMHead2DConfig(
                    weight=LazyWeight(np.zeros((128, 100), np.float32)),
                    mesh_device=galaxy,
                    padded_vocab_size=120,
                )
            ),
            r"padded_vocab_size must be >= 100 and a multiple of 256",
        ),
        (
            lambda: RotarySetup2D(LazyWeight(cos, device=line), LazyWeight(sin)),
            r"RotarySetup2D runs on 2-D meshes .* use RotarySetup1D",
        ),
        (
            lambda: RotarySetup2D(LazyWeight(cos, device=galaxy), LazyWeight(sin), max_batch_size=6),
            r"max_batch_size must be 1 or a multiple of the 4 mesh columns, got 6",
        ),
        (
            lambda: RotarySetup2D(LazyWeight(cos, device=galaxy), LazyWeight(sin[..., :16])),
            r"must have the same shape",
        ),
        (
            lambda: RotarySetup2D(LazyWeight(cos[0, 0, 0], device=galaxy), LazyWeight(sin)),
            r"cos_matrix must have shape \(positions, head_dim\)",
        ),
        (
            lambda: RotarySetup2D.from_config(
                RotarySetup2DConfig(LazyWeight(cos, device=galaxy), LazyWeight(sin), head_dim=64)
            ),
            r"head_dim 64 does not match the tables' 32",
        ),
    ):
        with pytest.raises(ValueError, match=message):
            build()
    with pytest.raises(TypeError, match=r"Embedding2D: weights must be a LazyWeight, got ndarray"):
        Embedding2D.from_config(Embedding2DConfig(weights=table, mesh_device=galaxy))
    with pytest.raises(TypeError, match=r"LMHead2D: weight must be a LazyWeight"):
        LMHead2D.from_config(LMHead2DConfig(weight=table, mesh_device=galaxy))
    with pytest.raises(TypeError, match=r"RotarySetup2D: sin_matrix must be a LazyWeight"):
        RotarySetup2D(LazyWeight(cos, device=galaxy), sin)
    rope = RotarySetup2D(LazyWeight(cos, device=galaxy), LazyWeight(sin), max_batch_size=4)
    with pytest.raises(ValueError, match=r"positions must be a 1-D array of 4 non-negative ints"):
        rope.get_rot_idxs([1, 2])
    with pytest.raises(ValueError, match=r"positions \[60, 70\) are outside the tables' \[0, 64\)"):
        rope.prefill_forward(60, 10)
    with pytest.raises(ValueError, match=r"pad_to 8 is shorter than seq_len 10"):
        rope.prefill_forward(0, 10, pad_to=8)
    with pytest.raises(ValueError, match=r"mode must be 'decode' or 'prefill'"):
        rope.forward("train")
