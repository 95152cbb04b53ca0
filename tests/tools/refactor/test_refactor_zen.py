"""The Zen on real code (issue 21, item 4): no static branch is left in ``decode_forward`` / ``prefill_forward`` or
in any method they reach, copied helpers included, and the run fails (a gap naming the generated file:line) when
one is. Inputs in ``inputs/rzen`` follow tt-metal's own constructs: a norm choosing a bound method and a device
weight with one static test (``models/common/rmsnorm.py``), a choice of run-time inputs made by a sub-module's
attribute (tt_transformers' decoder), and a collective helper whose ``None`` parameter is reassigned in its body
(``tt_all_reduce``). Each generated module is run against its TTTv1 class, bit for bit, on the emulator."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    InputPackage,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor.cli import main
from tttv2_tools.refactor.zencheck import static_branch_gaps, static_branches

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rzen"


inputs_importable = importable_inputs(PACKAGE)

_inputs = InputPackage(PACKAGE)
_generate = _inputs.generate
_tttv1 = _inputs.tttv1


# ------------------------------------------------------------------------------------------ the check itself
LEFT = """import ttnn


class TTModule:
    pass


def scaled(x, wide):
    if wide:
        return ttnn.mul(x, 2.0)
    return x


class Left1D(TTModule):
    def __init__(self, config):
        self.config = config

    def forward(self, x, mode):
        if mode == "decode":
            return self.decode_forward(x)
        return self.prefill_forward(x)

    def decode_forward(self, x):
        return self._bound(x)

    def _bind(self):
        self._bound = self._bound_true if self.config.flag else self._bound_false

    def _bound_true(self, x):
        if self.config.dim == 8192:
            x = ttnn.relu(x)
        return x

    def _bound_false(self, x):
        return x

    def prefill_forward(self, x):
        if x.shape[-2] > 32:
            x = ttnn.relu(x)
        for i, gain in enumerate((1.5, 0.5)):
            if i == 0:
                x = ttnn.mul(x, gain)
        return scaled(x, self.config.wide)
"""


def test_the_check_covers_bound_arms_and_copied_helpers():
    """A static test in a method bound in ``_bind`` and one in a module-level helper the forward calls with a
    construction-time value are found (as generated file:line); the run-time test is not, nor the test of a loop
    variable over constants (one value per iteration: no field or bound method can make it once)."""
    found = static_branches(LEFT, "left_1d.py", "Left1D")
    assert sorted((loc, test) for loc, _, test, _ in found) == [
        ("left_1d.py:30", "self.config.dim == 8192"),
        ("left_1d.py:9", "wide"),
    ]
    gaps = static_branch_gaps([SimpleNamespace(code=LEFT, file_name="left_1d.py", class_name="Left1D")])
    assert sorted(g.loc for g in gaps) == ["left_1d.py:30", "left_1d.py:9"]
    assert all(g.what.startswith("static branch left in ") and "construction" in g.reason for g in gaps)


def test_a_static_branch_left_fails_the_run(tmp_path, monkeypatch, capsys):
    """The tool runs the check on what it generates: a static branch left is a gap (exit 1, nothing written)."""
    from tttv2_tools.refactor import api

    real = api.static_branch_gaps

    def with_one_left(modules):
        # the generated module as the codemod made it, plus one static test in its decode path
        for generated in modules:
            rendered = generated.rendered
            code = rendered.module.code.replace(
                "        self.load_device_weights()\n",
                "        self.load_device_weights()\n        if self.config.eps > 1.0:\n            x = ttnn.relu(x)\n",
                1,
            )
            import libcst as cst

            rendered.module = cst.parse_module(code)
        return real(modules)

    monkeypatch.setattr(api, "static_branch_gaps", with_one_left)
    code = main([str(INPUTS / PACKAGE / "gain_norm.py"), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and not (tmp_path / "out").exists()
    assert "gain_norm_1d.py:" in err and "static branch left in GainNorm1D.decode_forward" in err


# ------------------------------------------------------------------------------------------ rmsnorm.py style
def test_a_bound_method_chosen_as_a_value_is_bound_not_a_field():
    """``norm = self._split_norm if split else ttnn.rms_norm`` and ``weight = self.weight_split if split else
    self.weight``: each choice is a method bound at construction; the method keeps ``self._split_norm`` (the
    generated class's copy), never a config field made from TTTv1's object (it used to be a gap)."""
    result = _generate("gain_norm")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert (
        "norm = self._split_norm" in code and "def _split_norm(self, inp, epsilon=None, weight=None):" in code
    )
    assert "weight = self.weight_split" in code and "legacy._split_norm" not in code
    assert "if self.config.decode_split else" in code  # the choice, in _bind


@pytest.mark.parametrize("split", [False, True])
def test_the_norm_matches_tttv1_bit_for_bit(split, tmp_path):
    import torch

    result = _generate("gain_norm")
    generated = generated_class(result, "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    torch.manual_seed(0)
    state_dict = {"gamma": torch.rand(64) + 0.5}
    is_split = (lambda mode: mode == "decode") if split else None
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        old = _tttv1("gain_norm", "GainNorm")(mesh, args, state_dict, is_split=is_split)
        new = generated.from_model_args(mesh, args, state_dict, is_split=is_split)
        for mode in ("decode", "prefill"):
            expected = old.forward(replicated(input_rows(32), mesh), mode)
            assert_identical(expected, new.forward(replicated(input_rows(32), mesh), mode), f"{shape} {mode}")
        with pytest.raises(AssertionError, match="split norm takes interleaved") if split else _nothing():
            new.forward(replicated(input_rows(32), mesh), "decode", in_sharded=True)
        ttnn.close_mesh_device(mesh)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ------------------------------------------------------------------------------------------ decoder / ccl style
def test_a_static_test_choosing_run_time_values_is_bound():
    """``rot = rot_local if (hasattr(self.attention, "is_sliding") and …) else rot_global``: the arms are
    inputs, so no field can hold the choice; it is bound (it used to stay, as a config field's test, in the
    forward). The helper's ``if num_links is None`` is decided by the default one call site leaves, and made
    at construction for the other, which passes ``self.num_links``."""
    result = _generate("block")
    assert_no_static_branch(result)
    code = "".join(g.code for g in result.modules)
    assert "rot = rot_local if" not in code and "rot = self._decode_hasattr_attention_is_sliding" in code
    # one field for the whole test: ``self.attention.is_sliding`` is read only when ``hasattr`` says it exists
    assert "if self.config.hasattr_attention_is_sliding_and_attention else" in code
    forwards = "".join(c.split("def load_device_weights")[1] for c in (g.code for g in result.modules))
    assert "num_links is None" not in forwards and "scale is None" not in forwards
    assert "if legacy.num_links is None:" in code  # TTTv1's test, run once in from_model_args
    assert "def _all_reduce(self, x):" in code and "def _all_reduce_2(self, x):" in code


@pytest.mark.parametrize(("sliding", "num_links"), [(False, None), (True, 2)])
def test_the_block_matches_tttv1_bit_for_bit(sliding, num_links, tmp_path):
    result = _generate("block")
    model_args = _tttv1("model_config", "ModelArgs")
    attention = _tttv1("block", "Sliding")() if sliding else None
    rng = np.random.default_rng(1)
    local, overall = (rng.standard_normal((1, 1, 32, 64)).astype(np.float32) for _ in range(2))
    for shape, topology in (((1, 1), "1d"), ((1, 2), "1d"), ((8, 4), "2d")):
        generated = generated_class(result, topology, tmp_path)
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        old = _tttv1("block", "Block")(mesh, args, attention=attention, num_links=num_links)
        new = generated.from_model_args(mesh, args, attention=attention, num_links=num_links)
        for mode in ("decode", "prefill"):
            inputs = [replicated(a, mesh) for a in (input_rows(32), overall, local)]
            expected = old.forward(inputs[0], mode, rot_global=inputs[1], rot_local=inputs[2])
            inputs = [replicated(a, mesh) for a in (input_rows(32), overall, local)]
            got = new.forward(inputs[0], mode, rot_global=inputs[1], rot_local=inputs[2])
            assert_identical(expected, got, f"{shape} {mode}")
        ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ ModelArgs at run time
def test_a_part_of_model_args_queried_in_forward_is_a_field():
    """``self.decoders_optimizations = self.args.decoders_optimizations`` then
    ``self.decoders_optimizations.get_scale(…, configuration=self.args)`` in forward: config queries computed at
    construction (they used to be gaps: ModelArgs used at run time, an attribute the generated class lacks)."""
    result = _generate("tuned")
    assert_no_static_branch(result)
    forwards = result.modules[0].code.split("def decode_forward")[1]
    assert "decoders_optimizations" not in forwards and "self.args" not in forwards
    assert "self.config.activation_dtype_or_ttnn_bfloat8_b" in forwards


@pytest.mark.parametrize("layer_num", [0, 1])
def test_the_tuned_module_matches_tttv1_bit_for_bit(layer_num, tmp_path):
    generated = generated_class(_generate("tuned"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    args = model_args(mesh)
    old = _tttv1("tuned", "Tuned")(mesh, args, layer_num=layer_num)
    new = generated.from_model_args(mesh, args, layer_num=layer_num)
    for mode in ("decode", "prefill"):
        expected = old.forward(replicated(input_rows(32), mesh), mode)
        assert_identical(expected, new.forward(replicated(input_rows(32), mesh), mode), mode)
    ttnn.close_mesh_device(mesh)


def test_an_attribute_from_a_model_args_member_trace_deps_cannot_follow_is_a_field(tmp_path):
    """``self.eps = args.rope_eps`` where ModelArgs sets ``rope_eps`` by name: trace-deps marks it unknown, but
    __init__ sets it and no forward does, so it is a field computed at construction (it was a gap: read at run
    time, not set on the generated module)."""
    result = _generate("tuned", "Eps")
    assert_no_static_branch(result)
    assert "epsilon=self.config.eps" in result.modules[0].code
    generated = generated_class(result, "1d", tmp_path)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    args = _tttv1("model_config", "ModelArgs")(mesh)
    old, new = _tttv1("tuned", "Eps")(mesh, args), generated.from_model_args(mesh, args)
    for mode in ("decode", "prefill"):
        expected = old.forward(replicated(input_rows(32), mesh), mode)
        assert_identical(expected, new.forward(replicated(input_rows(32), mesh), mode), mode)
    ttnn.close_mesh_device(mesh)
