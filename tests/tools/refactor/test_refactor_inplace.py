"""A value the forward derives from a tensor that a ttnn op of the same forward writes into stays in the forward
(helper ``snapfix``; ``binding.written_by_ttnn``), on ``inputs/rwide/dense/dense_buffered.py``: Falcon-7B's
optimized prefill writes into an output buffer of its config and returns a slice of it. Before, the slice was
made once at construction, from the empty buffer: the generated module returned zeros."""

from __future__ import annotations

import libcst as cst
import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    InputPackage,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor.binding import mutated_locals, written_by_ttnn

PACKAGE = "rwide"
inputs_importable = importable_inputs(PACKAGE)
_inputs = InputPackage(PACKAGE)


def test_the_slice_of_the_written_buffer_stays_in_the_forward():
    result = _inputs.generate("dense/dense_buffered")
    assert_no_static_branch(result)
    forward = result.modules[0].code.split("    def forward")[1]
    assert "ttnn.fill_cache(out_buffer, out_data, 0)" in forward
    assert "return out_buffer[:, :, :, : self.config.hidden_size]" in forward


def test_the_buffered_mlp_matches_tttv1_bit_for_bit(inputs_importable, tmp_path):
    import torch

    generated = generated_class(_inputs.generate("dense/dense_buffered"), "1d", tmp_path)
    model_args = _inputs.tttv1("model_config", "ModelArgs")
    tttv1_class = _inputs.tttv1("dense.dense_buffered", "TtDenseBuffered")
    torch.manual_seed(2)
    state_dict = {"mlp.up.weight": torch.randn(256, 64) / 8, "mlp.down.weight": torch.randn(64, 256) / 16}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        # one dict: the second module reuses the buffer the first allocated, as in TTTv1
        args = model_args(mesh)
        old = tttv1_class(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        for seed in (0, 1):
            x = np.random.default_rng(seed).standard_normal((1, 1, 32, 64)).astype(np.float32)
            expected = old.forward(replicated(x, mesh))
            got = new.forward(replicated(x, mesh))
            assert np.abs(ttnn.to_torch(got, mesh_composer=None).float().numpy()).max() > 0
            assert_identical(expected, got, f"{shape} call {seed}")
        ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize(
    ("source", "written"),
    [
        ("ttnn.sharded_to_interleaved_partial(out_data, out_tt, 2, i)", {"out_tt"}),
        ("ttnn.experimental.paged_update_cache(cache.k, x, update_idxs_tensor=pos)", {"cache"}),
        ("ttnn.matmul(a, b, optional_output_tensor=buf[0])", {"buf"}),
        ("ttnn.copy(a)", set()),  # no destination given: nothing written
        ("torch.copy(a, b)", set()),  # not a ttnn op
        ("ttnn.fill_cache(self.cache, x, 0)", set()),  # self's own attributes are reported elsewhere
    ],
)
def test_the_arguments_a_ttnn_op_writes_into(source, written):
    func = cst.parse_module(f"def forward(self, a, b, x, i, pos):\n    {source}\n").body[0]
    call = func.body.body[0].body[0].value
    assert isinstance(call, cst.Call)
    assert mutated_locals(func) == written
    assert bool(written_by_ttnn(call)) == (bool(written) or "self" in source)
