"""A forward's ``<tensor>.device()`` read as the module's own device (issue 21, helper ``devicein``;
``tools/refactor/inputdevice.py``), on ``inputs/rwide/dense``: Falcon-7B's ``get_falcon_default_core_grid(x.device())``
pattern, a hardware query made of the input's device."""

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
from tttv2_tools.refactor.inputdevice import NO_DEVICE_ARGUMENT, input_device_to_mesh, note

PACKAGE = "rwide"
inputs_importable = importable_inputs(PACKAGE)
_inputs = InputPackage(PACKAGE)


def _rows(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def test_the_grid_asked_of_the_input_device_is_a_field():
    """``default_matmul_grid(x.device())`` and ``default_matmul_grid(hidden.device())``: the helper's
    ``is_wormhole_b0() and grid_size.y >= 8`` stayed in the forward (its argument was a fact of the run-time input);
    the device is now the constructor's, so each grid is a field computed in ``from_model_args``."""
    result = _inputs.generate("dense/dense_grid")
    assert_no_static_branch(result)
    code = result.modules[0].code
    forward = code.split("    def forward")[1]
    assert ".device()" not in code and "default_matmul_grid" not in forward
    assert "core_grid=self.config.linear_core_grid" in forward
    assert "linear_core_grid=default_matmul_grid(legacy.mesh_device)" in code


def test_a_helper_asking_its_own_argument_for_its_device_is_decided_at_construction():
    """``up_matmul`` calls ``default_matmul_grid(a.device())`` itself; the forward calls it with device ops, so it
    is copied into the class per call site (``_up_matmul(self, a)``), where ``a.device()`` is the module's device
    too (``self.device = mesh_device``: the attribute's name does not matter)."""
    result = _inputs.generate("dense/dense_grid_helper")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert ".device()" not in code
    assert "grid=default_matmul_grid(legacy.device)" in code
    assert "        grid = self.config.grid\n" in code.split("    def _up_matmul(self, a):")[1]


@pytest.mark.parametrize(
    ("fixture", "class_name"), [("dense_grid", "TtDenseGrid"), ("dense_grid_helper", "TtDenseGridHelper")]
)
def test_the_dense_grid_matches_tttv1_bit_for_bit(fixture, class_name, inputs_importable, tmp_path):
    import torch

    generated = generated_class(_inputs.generate(f"dense/{fixture}"), "1d", tmp_path)
    model_args = _inputs.tttv1("model_config", "ModelArgs")
    grid_utils = _inputs.tttv1("dense.grid_utils", "default_matmul_grid")
    torch.manual_seed(1)
    state_dict = {"mlp.up.weight": torch.randn(256, 64) / 8, "mlp.down.weight": torch.randn(64, 256) / 16}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        old = _inputs.tttv1(f"dense.{fixture}", class_name)(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        grids = [v for v in vars(new.config).values() if isinstance(v, ttnn.CoreGrid)]
        # the emulator's 8x8 Wormhole grid: one row short, as TTTv1's helper answers for the module's mesh
        assert grids and all(grid == grid_utils(mesh) for grid in grids)
        assert grids[0].y == mesh.compute_with_storage_grid_size().y - 1
        for rows in (32, 128):
            expected = old.forward(replicated(_rows(rows), mesh))
            got = new.forward(replicated(_rows(rows), mesh))
            assert_identical(expected, got, f"{shape} {rows} rows")
        ttnn.close_mesh_device(mesh)


def test_a_module_without_a_device_argument_keeps_the_query_and_says_why():
    """``TtDenseGridGiven(args, up_weight, down_weight)``: no device to take ``x.device()`` for, so the branch
    stays, and its gap says why."""
    result = _inputs.generate("dense/dense_grid_given")
    assert [g.what for g in result.gaps] == [
        "static branch left in default_matmul_grid: `is_wormhole_b0() and grid_size.y >= 8`"
    ]
    assert result.gaps[0].reason.endswith(NO_DEVICE_ARGUMENT)
    assert "default_matmul_grid(x.device())" in result.modules[0].code


def _rewritten(source: str) -> str:
    func = cst.parse_module(source).body[0]
    return cst.Module([input_device_to_mesh(func, "mesh_device", None)]).code


def test_only_a_local_or_parameter_asked_for_its_device_is_read_as_the_module_device():
    source = (
        "def forward(self, x, y):\n"
        "    h = op(x)\n"
        "    for part in parts:\n"
        "        pass\n"
        "    return g(x.device(), h.device(), part.device(), self.w.device(), x.device(0), x.shape(), z.device())\n"
    )
    assert _rewritten(source).splitlines()[-1] == (
        "    return g(self.mesh_device, self.mesh_device, self.mesh_device, self.w.device(), x.device(0), "
        "x.shape(), z.device())"
    )
    unchanged = "def forward(self, x):\n    return x.shape\n"
    assert _rewritten(unchanged) == unchanged


@pytest.mark.parametrize(("code", "added"), [("y = x.device()\n", NO_DEVICE_ARGUMENT), ("y = x\n", "")])
def test_the_gap_note_names_a_device_query_left(code, added):
    assert note(code) == added


# ------------------------------------------------------------------------------------------ loop targets
def test_loop_targets_read_after_the_loop_reach_the_extracted_arm():
    """``for slice_idx, weight in enumerate(self.blocks): …`` then ``if self.model_config["SUBTRACT_BIAS"]:``
    whose arm reads ``weight`` and ``slice_idx``: the flow scan never recorded a loop's target as written
    (``names_written`` of a bare name is empty), so neither was passed to the extracted arm, which read them
    unbound, and the tool exited 0 on it."""
    result = _inputs.generate("sliced_mlp")
    assert result.gaps == []
    code = result.modules[0].code
    assert "out = self._forward_subtract_bias(out, slice_idx, weight)" in code
    assert "def _forward_subtract_bias_true(self, out, slice_idx, weight):" in code


@pytest.mark.parametrize("subtract_bias", [False, True])
def test_the_sliced_mlp_matches_tttv1_bit_for_bit(subtract_bias, inputs_importable, tmp_path):
    import torch

    generated = generated_class(_inputs.generate("sliced_mlp"), "1d", tmp_path)
    model_args = _inputs.tttv1("model_config", "ModelArgs")
    torch.manual_seed(2)
    state_dict = {f"mlp.{i}.weight": torch.randn(64, 64) / 8 for i in range(3)}
    for shape, blocks in (((1, 1), 2), ((1, 2), 3)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh, subtract_bias=subtract_bias, head_blocks=blocks)
        old = _inputs.tttv1("sliced_mlp", "TtSlicedMLP")(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        expected = old.forward(replicated(_rows(32), mesh))
        got = new.forward(replicated(_rows(32), mesh))
        assert_identical(expected, got, f"{shape} {blocks} blocks")
        ttnn.close_mesh_device(mesh)
