"""Module-level topology (issue 21, item 3): a module that runs only on a Galaxy becomes a 2D module alone, with
the 2D check, not a "1D module for every mesh". The code says so when ``__init__`` asserts a galaxy fact
(``inputs/rmain/ring_mlp.py``); when it says nothing (``plain_ring_mlp.py``, like the Llama-3 70B Galaxy demo's
``llama_mlp.py``), ``--topology 2d`` does. Each 2D module is run against its TTTv1 class, bit for bit, on an 8x4
emulated mesh."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    assert_identical,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2.modules._topology import TopologyError
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.cli import main
from tttv2_tools.refactor.galaxy import galaxy_assert
from tttv2_tools.refactor.source import load_inputs

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rmain"
RING = INPUTS / PACKAGE / "ring_mlp.py"
PLAIN = INPUTS / PACKAGE / "plain_ring_mlp.py"


inputs_importable = importable_inputs(PACKAGE)


def _tttv1(module: str, name: str):
    return getattr(importlib.import_module(f"{PACKAGE}.{module}"), name)


def _state_dict():
    import torch

    rng = np.random.default_rng(3)
    return {"layers.0.w1": torch.from_numpy(rng.standard_normal((64, 64)).astype(np.float32) * 0.1)}


def _bit_exact(generated, tttv1) -> None:
    model_args = _tttv1("model_config", "ModelArgs")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))
    try:
        args = model_args(mesh)
        old, new = tttv1(mesh, args, _state_dict()), generated.from_model_args(mesh, args, _state_dict())
        for mode in ("decode", "prefill"):
            expected = old.forward(replicated(input_rows(32), mesh), mode)
            assert_identical(expected, new.forward(replicated(input_rows(32), mesh), mode), f"8x4 {mode}")
    finally:
        ttnn.close_mesh_device(mesh)


def _refuses_a_1d_mesh(generated) -> None:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    try:
        args = _tttv1("model_config", "ModelArgs")(mesh)
        with pytest.raises(TopologyError, match="runs only on a galaxy"):
            generated.from_model_args(mesh, args, _state_dict())
    finally:
        ttnn.close_mesh_device(mesh)


def test_an_init_asserting_a_galaxy_gives_a_2d_module_alone():
    result = generate(RING)
    assert result.gaps == [] and [g.topology for g in result.modules] == ["2d"]
    assert result.notes == [
        "TtRingMLP runs only on a galaxy (__init__ asserts a galaxy (ring_mlp.py:10)): 2D module only"
    ]
    code = result.modules[0].code
    assert 'require_2d_mesh("TtRingMLP2D", mesh_device, "a galaxy mesh (TTTv1\'s TtRingMLP runs only' in code
    assert "every mesh" not in code and "assert False" not in code


def test_the_asserted_module_matches_tttv1_on_8x4_and_refuses_1d(tmp_path):
    generated = generated_class(generate(RING), "2d", tmp_path)
    _bit_exact(generated, _tttv1("ring_mlp", "TtRingMLP"))
    _refuses_a_1d_mesh(generated)


def test_a_module_saying_nothing_stays_1d_unless_told():
    assert [g.topology for g in generate(PLAIN).modules] == ["1d"]
    result = generate(PLAIN, topology="2d")
    assert [g.topology for g in result.modules] == ["2d"] and result.gaps == []
    assert result.notes == ["TtPlainRingMLP runs only on a galaxy (--topology 2d): 2D module only"]


def test_the_forced_module_matches_tttv1_on_8x4_and_refuses_1d(tmp_path):
    generated = generated_class(generate(PLAIN, topology="2d"), "2d", tmp_path)
    _bit_exact(generated, _tttv1("plain_ring_mlp", "TtPlainRingMLP"))
    _refuses_a_1d_mesh(generated)


def test_cli_topology_note_report_and_tests(tmp_path, capsys):
    report = tmp_path / "report.json"
    argv = [
        str(PLAIN),
        "--topology",
        "2d",
        "--out",
        str(tmp_path / "out"),
        "--tests-out",
        str(tmp_path / "t"),
        "--no-verify",  # no conftest here: the verification would only add its "not run" notes
    ]
    assert main([*argv, f"--json={report}"]) == 0
    err = capsys.readouterr().err
    assert "tttv2-refactor: note: TtPlainRingMLP runs only on a galaxy (--topology 2d): 2D module only" in err
    assert json.loads(report.read_text())["notes"] == [
        "TtPlainRingMLP runs only on a galaxy (--topology 2d): 2D module only"
    ]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["plain_ring_mlp_2d.py"]
    test = (tmp_path / "t" / "test_plain_ring_mlp_2d.py").read_text()
    assert "rejects_a_1d_mesh" in test and "(8, 4)" in test
    assert main([*argv, "--quiet", "--force"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as exit_:
        main([str(PLAIN), "--topology", "1d", "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2 and "argument --topology: invalid choice: '1d'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("statement", "asserted"),
    [
        ("assert args.is_galaxy", True),
        ('assert args.is_galaxy and args.dim % 8 == 0, "galaxy only"', True),
        ("assert mesh_device.get_num_devices() == 32", True),
        ("assert not args.is_galaxy", False),
        ("assert args.is_galaxy or args.dim > 0", False),
        ("if args.dim > 0:\n            assert args.is_galaxy", False),
        ("assert (args.is_galaxy and args.dim > 0)", False),
    ],
)
def test_which_asserts_say_galaxy_only(tmp_path, statement, asserted):
    """Only an unconditional assert of ``__init__`` whose test, or one operand of its ``and``, holds on a
    galaxy; a test under ``if``, negated, or inside ``or`` does not say the module runs only there."""
    shutil.copy(INPUTS / PACKAGE / "model_config.py", tmp_path / "model_config.py")
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\n\n\nclass M:\n    def __init__(self, mesh_device, args):\n"
        f"        {statement}\n        self.args = args\n\n"
        "    def forward(self, x, mode):\n        return ttnn.relu(x)\n"
    )
    assert (galaxy_assert(load_inputs(module, None, None)) == "m.py:6") is asserted


def test_a_one_line_init_asserting_a_galaxy(tmp_path):
    shutil.copy(INPUTS / PACKAGE / "model_config.py", tmp_path / "model_config.py")
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\n\n\nclass M:\n    def __init__(self, mesh_device, args): self.args = args; assert args.is_galaxy\n\n"
        "    def forward(self, x, mode):\n        return ttnn.relu(x)\n"
    )
    assert galaxy_assert(load_inputs(module, None, None)) == "m.py:5"
