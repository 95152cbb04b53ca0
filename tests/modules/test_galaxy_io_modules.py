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
from tttv2.testing.cases import ModuleCase, pcc_threshold
from tttv2.testing.references import (
    hf_config,
    hf_embedding,
    hf_lm_head,
    random_activations,
    rope_reference,
    run_reference,
)

from .cases import (
    EMBEDDING_2D_CASES,
    LM_HEAD_2D_CASES,
    ROPE_2D_CASES,
    embedding_case,
    module_case_args,
    recorded,
)
from .rope.test_rope_1d import BF16_STEP, _interleaved_to_hf, catalogue_rope

ROWS, COLS = 8, 4


def _columns(tensor) -> np.ndarray:
    """The devices of mesh row 0 side by side (the output is split over the columns, the same on every row)."""
    parts = [ttnn.to_numpy(p) for p in ttnn.get_device_tensors(tensor)]
    for row in range(1, ROWS):  # every row holds the same
        np.testing.assert_array_equal(
            np.concatenate(parts[row * COLS : (row + 1) * COLS], -1), np.concatenate(parts[:COLS], -1)
        )
    return np.concatenate(parts[:COLS], axis=-1).astype(np.float32)


# (case, embed_scale): the cases tttv1's Galaxy demos run (emitted by collect-cases into cases.py), then a scale
EMBEDDING_CASES = [
    *recorded(EMBEDDING_2D_CASES, lambda *values: (embedding_case(*values), 1.0)),
    pytest.param(ModuleCase((ROWS, COLS), "qwen2", "decode", 64), 4.0, id="8x4-qwen2-decode-64-x4"),
]


@pytest.mark.parametrize(("case", "scale"), EMBEDDING_CASES)
def test_embedding_2d_vs_reference(case, scale, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config = hf_config(case.family)
    table = hf_embedding(config, seed=31).weight.detach().numpy()
    module = Embedding2D(LazyWeight(table, device=mesh), embed_scale=scale)
    ids = np.random.default_rng(case.seq_len).integers(0, config.vocab_size, (1, 1, 1, case.seq_len))
    out = module.forward(LazyWeight(ids.astype(np.uint32)), case.mode)
    assert list(out.shape) == [1, 1, case.seq_len, config.hidden_size // COLS]
    assert_pcc(table[ids[0, 0, 0]] * scale, _columns(out)[0, 0], pcc_threshold("embedding"))
    assert module.config.weights.dtype == ttnn.bfloat16


@pytest.mark.parametrize("case", recorded(LM_HEAD_2D_CASES, module_case_args))
def test_lm_head_2d_vs_reference(case, ttnn_mesh_pool):
    """The cases tttv1's Galaxy demos run (emitted by collect-cases into cases.py): every family, both modes; the
    vocab is padded to whole tiles on each of the 32 devices (phi3's 500 to 1024)."""
    mesh = ttnn_mesh_pool(case.mesh_shape)
    config = hf_config(case.family)
    head = hf_lm_head(config, seed=41)
    module = LMHead2D(LazyWeight(head.weight.detach().numpy().T.copy(), device=mesh))
    assert module.config.padded_vocab_size == -(-config.vocab_size // 1024) * 1024
    x = random_activations((1, 1, case.seq_len, config.hidden_size), seed=5)
    expected = run_reference(head, x).reshape(case.seq_len, -1)
    out = module.forward(LazyWeight(x), case.mode)
    parts = [ttnn.to_numpy(p).astype(np.float32) for p in ttnn.get_device_tensors(out)]
    # the vocab is split over the mesh rows; every column holds the whole sum
    logits = np.concatenate([parts[r * COLS] for r in range(ROWS)], axis=-1)[0, 0]
    np.testing.assert_array_equal(parts[1], parts[0])
    assert np.all(logits[:, config.vocab_size :] == 0)
    assert_pcc(expected, logits[:, : config.vocab_size], pcc_threshold("lm_head"))


# (mesh_shape, mode, model_name, rot_mats_shape, max_batch_size): the cases tttv1's Galaxy demos run (one user,
# emitted by collect-cases into cases.py), then eight users (two per column), which they never run
ROPE_CASES = [
    *recorded(ROPE_2D_CASES, lambda *values: (*values, 1)),
    pytest.param(
        (ROWS, COLS),
        "decode",
        "Llama-3.1-8B-tiny",
        ((1, 2, 1, 32), (1, 2, 1, 32)),
        8,
        id="8x4-decode-Llama-3.1-8B-tiny-8-users",
    ),
]


@pytest.mark.parametrize("mesh_shape, mode, model_name, rot_mats_shape, batch", ROPE_CASES)
def test_rotary_setup_2d_vs_reference(mesh_shape, mode, model_name, rot_mats_shape, batch, ttnn_mesh_pool):
    """The catalogue model's theta and scaling against HF's tables, in the shapes tttv1's attention received:
    decode rows [1, users per column, 1, head_dim] height-sharded, each column its own users (every column the
    same one user when there is one); prefill rows padded with zeros to the recorded length."""
    mesh = ttnn_mesh_pool(mesh_shape)
    config, head_dim, cos, sin = catalogue_rope(model_name, rot_mats_shape)
    module = RotarySetup2D(LazyWeight(cos, device=mesh), LazyWeight(sin), max_batch_size=batch)
    if mode == "decode":
        users = rot_mats_shape[0][1]
        assert module.config.users_per_column == users
        positions = np.random.default_rng(3).integers(0, 512, batch)
        got = module.forward("decode", module.get_rot_idxs(positions))
        assert got[0].memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
        assert list(module.transformation_mats["decode"].shape) == [1, 1, 32 * users, 32]
        # column c holds users [c * users, (c + 1) * users); one user is on every column
        expected = [
            rope_reference(config, positions[c * users : (c + 1) * users] if batch > 1 else positions)
            for c in range(COLS)
        ]
        valid = users
    else:
        rows = rot_mats_shape[0][-2]
        valid = rows - 4  # a prompt padded to the recorded rows: the padding rows are zero
        got = module.forward("prefill", 100, valid, pad_to=rows)
        assert list(module.transformation_mats["prefill"].shape) == [1, 1, 32, 32]
        expected = [rope_reference(config, range(100, 100 + valid))] * COLS
    for index, (table, shape) in enumerate(zip(got, rot_mats_shape)):
        assert list(table.shape) == list(shape)
        devices = ttnn.get_device_tensors(table)
        for device, tensor in enumerate(devices):
            host = ttnn.to_numpy(tensor).astype(np.float32).reshape(-1, head_dim)
            reference = expected[device % COLS][index]
            assert np.all(host[valid:] == 0)
            assert np.abs(_interleaved_to_hf(host[:valid]) - reference).max() <= BF16_STEP
            assert_pcc(reference, _interleaved_to_hf(host[:valid]), pcc_threshold("rope"))


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
