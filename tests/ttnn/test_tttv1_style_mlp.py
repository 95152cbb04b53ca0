"""Issue 2's acceptance test: a TTTv1-style MLP in raw ttnn calls matches a float reference on every mesh."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing import pcc
from tttv2.ttnn.demo import main, reference_mlp, tttv1_style_mlp


def _weights(dim: int, hidden: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, dim)).astype(np.float32)
    w1 = (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(np.float32)
    w3 = (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, dim)) / np.sqrt(hidden)).astype(np.float32)
    return x, w1, w2, w3


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2), (1, 8), (8, 4)])
@pytest.mark.parametrize(
    ("weight_dtype", "w2_dtype", "threshold"),
    [(ttnn.bfloat8_b, ttnn.bfloat8_b, 0.99), (ttnn.bfloat4_b, ttnn.bfloat8_b, 0.98)],
    ids=["uniform-bfp8", "mixed-bfp4"],
)
def test_mlp_matches_float_reference(open_mesh, mesh_shape, weight_dtype, w2_dtype, threshold):
    x, w1, w2, w3 = _weights(dim=256, hidden=1024)
    mesh = open_mesh(mesh_shape)
    result = tttv1_style_mlp(mesh, x, w1, w2, w3, weight_dtype, w2_dtype)
    ref = reference_mlp(x, w1, w2, w3)
    assert result.output.shape == ref.shape
    assert pcc(ref, result.output) >= threshold
    # bfloat8_b weights keep the error small in absolute terms too
    if weight_dtype is ttnn.bfloat8_b:
        assert np.abs(ref - result.output).max() < 0.1 * np.abs(ref).max()


def test_mlp_weights_are_sharded_not_replicated(open_mesh):
    x, w1, w2, w3 = _weights(dim=256, hidden=1024)
    single = tttv1_style_mlp(open_mesh((1, 1)), x, w1, w2, w3)
    eight = tttv1_style_mlp(open_mesh((1, 8)), x, w1, w2, w3)
    # each of the 8 devices holds 1/8 of the weights, so far less DRAM than the single device
    assert eight.dram_bytes_per_device < single.dram_bytes_per_device / 4


def test_demo_cli_prints_a_table(capsys):
    assert (
        main(["--dim", "128", "--hidden", "256", "--seq", "32", "--meshes", "1x2,2x4", "--weights", "mixed"])
        == 0
    )
    out = capsys.readouterr().out
    assert "1x2" in out and "2x4" in out and "PCC" in out


def test_demo_cli_rejects_bad_mesh():
    with pytest.raises(SystemExit):
        main(["--meshes", "eight"])
