"""``super().method(…)`` into a base class of another file (tt-metal's Qwen2.5-VL vision attention subclasses
tt_transformers' ``Attention`` and runs ``super().forward_prefill(…)``): the base's method is copied into the
generated class and specialised like the class's own methods, with the helpers and constants of its file
(``inputs/rsuper``: the base in ``common/``, the subclass in ``vision/``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    replicated,
)
from tttv2 import ttnn
from tttv2.modules._topology import TopologyError
from tttv2_tools.refactor import generate

INPUTS = Path(__file__).parent / "inputs"
VISION = INPUTS / "rsuper" / "vision" / "vision_projection.py"
CONFIG = INPUTS / "rsuper" / "model_config.py"

inputs_importable = importable_inputs("rsuper")


def _rows(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def test_the_base_methods_are_copied_and_specialised():
    """No gap and no static branch: ``super().forward_prefill(x, scale=self.scale)`` and ``super().project(x,
    mode)`` (and the ``self.project(x, "prefill")`` the first makes) are private methods of the generated class,
    their mode tests folded, the base file's ``padded_rows`` and ``TILE`` copied along."""
    result = generate(VISION, CONFIG)
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert "super()" not in code.split("def load_device_weights")[1]
    assert "# copied from common/projection.py:12\ndef padded_rows(rows):" in code
    assert "def _forward_prefill(self, x):" in code and "def _project(self, x):" in code
    assert 'mode == "decode"' not in code.split("def decode_forward")[1]
    assert "to_memory_config" not in code and "ttnn.to_memory_config(out" in result.modules[1].code
    # ``bounds=None`` substituted: the base's ``if bounds:`` is ``if None:``, folded (it was a bound branch
    # ``_prefill_none_true`` running ``None[0]``)
    assert "None[0]" not in code and "def _prefill_none_true" not in code
    assert "return ttnn.clamp(out, min=self.config.low, max=self.config.high)" in code


def test_a_tuple_field_value_keeps_its_parentheses():
    """A field whose value is a bare tuple (``self.layer_past[0], self.layer_past[1]`` in tt_transformers'
    ``Attention.forward_prefill``, copied for Qwen2.5-VL's vision attention) is a keyword argument of the
    fields' ``dict(…)`` and an arm of a conditional: without parentheses the generated file did not parse."""
    import libcst as cst

    from tttv2_tools.refactor.emit import _grouped

    value = cst.parse_expression("legacy.layer_past[0], legacy.layer_past[1]")
    expression = cst.IfExp(test=cst.Name("t"), body=cst.Name("None"), orelse=_grouped(value))
    assert (
        cst.Module([]).code_for_node(expression)
        == "None if t else (legacy.layer_past[0], legacy.layer_past[1])"
    )


@pytest.mark.parametrize("fuse_bias", [True, False])
def test_the_vision_projection_matches_tttv1_bit_for_bit(fuse_bias, tmp_path):
    import torch
    from rsuper.model_config import ModelArgs
    from rsuper.vision.vision_projection import TtVisionProjection

    result = generate(VISION, CONFIG)
    torch.manual_seed(0)
    state_dict = {"visual.proj.weight": torch.randn(64, 64) / 8, "visual.proj.bias": torch.randn(64)}
    # 1x1 and 1x2: the 1D module; 8x4, a galaxy: the 2D module (the base's galaxy branch kept)
    for shape in ((1, 1), (1, 2), (8, 4)):
        generated = generated_class(result, "2d" if shape == (8, 4) else "1d", tmp_path)
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = ModelArgs(mesh, fuse_bias=fuse_bias)
        old = TtVisionProjection(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        for mode, rows in (("decode", 32), ("prefill", 64), ("prefill", 128)):
            expected = old.forward(replicated(_rows(rows), mesh), mode)
            got = new.forward(replicated(_rows(rows), mesh), mode)
            assert_identical(expected, got, f"{shape} {mode} {rows}")
        ttnn.close_mesh_device(mesh)


def test_the_bases_galaxy_test_is_checked_in_the_constructors_terms(tmp_path):
    """The base's ``if self.args.is_galaxy:`` (its ``self.args = args``, given ``args`` by the class's
    ``super().__init__(mesh_device, args, …)``) is checked by ``from_model_args`` as ``args.is_galaxy``; it was
    the gap "no galaxy test of the class can be written with the constructor's arguments alone"."""
    from rsuper.model_config import ModelArgs

    result = generate(VISION, CONFIG)
    assert [g.topology for g in result.modules] == ["1d", "2d"]
    code = result.modules[0].code
    assert "galaxy_test = args.is_galaxy\n" in code
    generated = generated_class(result, "1d", tmp_path)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    args = ModelArgs(mesh)
    args.is_galaxy = True  # TTTv1 would take its galaxy code
    with pytest.raises(TopologyError, match=r"`args\.is_galaxy`"):
        generated.from_model_args(mesh, args, {})
    ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize(
    "edit",
    [
        (
            "        super().__init__(mesh_device, args, state_dict, prefix)\n",
            "        super().__init__(*[mesh_device, args, state_dict, prefix])\n",
        ),
        ("        self.scale = scale\n", "        self.scale = scale\n        self.args = args\n"),
    ],
    ids=["unpacked", "reassigned"],
)
def test_a_base_galaxy_test_the_class_cannot_write_stays_a_gap(edit, tmp_path):
    """Not written when the constructor's call of the base's ``__init__`` unpacks its arguments, or when the class
    sets the attribute itself (its value is then the class's, not the base's)."""
    folder = tmp_path / "rsuper"
    shutil.copytree(INPUTS / "rsuper", folder)
    child = folder / "vision" / "vision_projection.py"
    child.write_text(child.read_text().replace(*edit))
    result = generate(child, folder / "model_config.py")
    assert "TtVisionProjection: the galaxy test" in [g.what for g in result.gaps]


def test_a_base_galaxy_test_through_keyword_arguments_and_defaults(tmp_path):
    """``super().__init__(mesh_device, args=args, …)`` by keyword, to a base ``__init__`` with a default the class
    does not pass: the base's ``self.args.is_galaxy`` is still ``args.is_galaxy`` for ``from_model_args``."""
    folder = tmp_path / "rsuper"
    shutil.copytree(INPUTS / "rsuper", folder)
    child = folder / "vision" / "vision_projection.py"
    child.write_text(
        child.read_text().replace(
            "super().__init__(mesh_device, args, state_dict, prefix)",
            "super().__init__(mesh_device, args=args, state_dict=state_dict, prefix=prefix)",
        )
    )
    base = folder / "common" / "projection.py"
    base.write_text(
        base.read_text().replace(
            "def __init__(self, mesh_device, args, state_dict, prefix):",
            "def __init__(self, mesh_device, args, state_dict, prefix, dtype=ttnn.bfloat16):",
        )
    )
    result = generate(child, folder / "model_config.py")
    assert result.gaps == []
    assert "galaxy_test = args.is_galaxy\n" in result.modules[0].code


def test_a_super_call_left_in_a_generated_module_is_a_gap():
    """The output itself is checked: a zero-argument ``super().m(…)`` left in a generated class would run
    ``TTModule``'s; ``from_model_args``'s ``super(Class, legacy).__init__(…)`` is TTTv1's construction."""
    from types import SimpleNamespace

    from tttv2_tools.refactor.unsupported import leftover_super_gaps

    code = (
        "class A:\n    def f(self, legacy):\n        super(A, legacy).__init__()\n"
        "        return super().forward_prefill(1)\n"
    )
    (gap,) = leftover_super_gaps([SimpleNamespace(code=code, file_name="a_1d.py")])
    assert (gap.loc, gap.what) == ("a_1d.py:4", "super().forward_prefill(...)")
    assert generate(VISION, CONFIG).gaps == []  # every super() of the fixture was copied
