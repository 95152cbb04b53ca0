"""Module-level topology (issue 21, item 3): a module that runs only on a Galaxy becomes a 2D module alone, with
the 2D check, not a "1D module for every mesh". The code says so when ``__init__`` asserts a galaxy fact
(``inputs/rmain/ring_mlp.py``); when it says nothing (``plain_ring_mlp.py``, like the Llama-3 70B Galaxy demo's
``llama_mlp.py``), ``--topology 2d`` does. Each 2D module is run against its TTTv1 class, bit for bit, on an 8x4
emulated mesh."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    InputPackage,
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

_inputs = InputPackage(PACKAGE)
_tttv1 = _inputs.tttv1


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


# --- the Galaxy demo's norm wrapper (``llama3_70b_galaxy/tt/distributed_norm.py``), proven on tt-metal's own file ---
RING_NORM = INPUTS / PACKAGE / "ring_norm.py"


def _ring_norm_case(mesh_shape, generated, rows_by_mode):
    """TTTv1's TtRingNorm and ``generated`` on one mesh, each with its own CCL object (its gather state) and the
    same wrapped norm: every mode's output (and residual) identical to the bit."""
    import torch

    from tttv1.tt.rmsnorm import RMSNorm

    tttv1 = _tttv1("ring_norm", "TtRingNorm")
    ring_ccl = _tttv1("ring_ccl", "RingCCL")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    try:
        args = _tttv1("model_config", "ModelArgs")(mesh, dim=128)
        galaxy = args.is_galaxy
        weights = {"layers.0.attention_norm.weight": torch.linspace(0.5, 1.5, args.dim)}
        norm = RMSNorm(
            mesh,
            args.dim,
            weights,
            "attention_norm",
            layer_num=0,
            is_distributed=(lambda mode: True) if galaxy else None,
        )
        old = tttv1(norm, args, TG=galaxy, tt_ccl=ring_ccl(mesh))
        new = generated.from_model_args(norm, args, TG=galaxy, tt_ccl=ring_ccl(mesh))
        mapper = ttnn.ShardTensor2dMesh(
            mesh, dims=(None, 3) if galaxy else (None, None), mesh_shape=args.cluster_shape
        )
        for mode, rows in rows_by_mode:
            values = np.random.default_rng(rows).standard_normal((1, 1, rows, args.dim)).astype(np.float32)
            x = [
                ttnn.from_numpy(
                    values, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper
                )
                for _ in range(2)
            ]
            expected = old.forward(x[0], None, mode)
            got = new.forward(x[1], None, mode)
            assert isinstance(expected, tuple) and expected[1] is None
            assert_identical(expected, got, f"{mesh_shape} {mode}")
    finally:
        ttnn.close_mesh_device(mesh)


def test_a_galaxy_norm_wrapper_with_a_ccl_object_and_a_pair_result_matches_tttv1(tmp_path):
    """The TG flag picks the topology; the 2D path calls a helper of another file through the CCL object it was
    given (whose state cycles on each gather) and returns ``(output, None)``: exit 0, and the 2D module equals
    TTTv1 on 8x4 in decode (32 rows) and prefill (128 rows, the helper's 2D-grid arm), the 1D one on 1x2."""
    result = generate(RING_NORM, INPUTS / PACKAGE / "model_config.py")
    assert result.gaps == [] and sorted(g.topology for g in result.modules) == ["1d", "2d"]
    cases = (("decode", 32), ("prefill", 128))
    _ring_norm_case((8, 4), generated_class(result, "2d", tmp_path), cases)
    _ring_norm_case((1, 2), generated_class(result, "1d", tmp_path), cases)
