"""Which class tttv2-refactor rewrites by default (issue 21, item 3): trace-deps' main-class rule, the one class
with an entry that no other class of the file uses, on ``inputs/rmain/rotary_norm.py`` (a helper class with its
own ``__call__`` before the module's class, as in Falcon-40B's attention). The choice is a note; ``--class``
overrides it."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from tests.tools.refactor.conftest import (
    assert_identical,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.cli import main

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rmain"
MODULE = INPUTS / PACKAGE / "rotary_norm.py"


inputs_importable = importable_inputs(PACKAGE)


def test_the_class_no_other_uses_is_rewritten():
    result = generate(MODULE)
    assert result.inputs.class_name == "TtScaledNorm" and result.gaps == []
    assert result.inputs.class_choice.startswith("class TtScaledNorm chosen: the one class with an entry")
    assert [g.class_name for g in result.modules] == ["TtScaledNorm1D"]


def test_class_overrides_without_a_note():
    result = generate(MODULE, class_name="TtScaleEmbedding")
    assert result.inputs.class_name == "TtScaleEmbedding" and result.inputs.class_choice == ""


def test_the_note_is_on_stderr_and_in_the_report(tmp_path, capsys):
    report = tmp_path / "report.json"
    assert main([str(MODULE), "--out", str(tmp_path / "out"), f"--json={report}"]) == 0
    err = capsys.readouterr().err
    assert "tttv2-refactor: note: class TtScaledNorm chosen: the one class with an entry" in err
    notes = json.loads(report.read_text())["notes"]
    assert any(n.startswith("class TtScaledNorm chosen") for n in notes)


def test_the_chosen_class_matches_tttv1_bit_for_bit(tmp_path):
    generated = generated_class(generate(MODULE), "1d", tmp_path)
    model_args = importlib.import_module(f"{PACKAGE}.model_config").ModelArgs
    tttv1 = importlib.import_module(f"{PACKAGE}.rotary_norm").TtScaledNorm
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        old, new = tttv1(mesh, args), generated.from_model_args(mesh, args)
        for mode in ("decode", "prefill"):
            expected = old(replicated(input_rows(32), mesh), mode)
            assert_identical(expected, new.forward(replicated(input_rows(32), mesh), mode), f"{shape} {mode}")
        ttnn.close_mesh_device(mesh)
