"""A forward that keeps a value on the instance for its own later use (issue 21, item 3; tt-metal's lm_head sets
``self.lm_head_output_memory_config`` in forward and reads it a few lines later): the attribute becomes a local
of the generated method, a config field when its value is static. State that lives across calls is kept as
per-instance state (instate.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import libcst as cst
import pytest

from tests.tools.refactor.conftest import (
    assert_identical,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.cached import cached_attributes
from tttv2_tools.refactor.source import methods_of

INPUTS = Path(__file__).parent / "inputs"


inputs_importable = importable_inputs("rzen")


def test_an_attribute_a_forward_keeps_for_itself_is_a_local(tmp_path):
    result = generate(INPUTS / "rzen" / "cached_head.py")
    assert result.gaps == [], [g.describe() for g in result.gaps]
    generated = result.modules[0]
    code = generated.code
    forwards = code.split("def decode_forward")[1]
    assert "self.out_memcfg" not in code and "self.rows" not in code
    assert "rows = x.shape[-2]" in forwards  # per call: a local
    # static: a field per mode, computed at construction
    assert "self.config.decode_out_memcfg" in forwards and "self.config.prefill_out_memcfg" in forwards
    tttv1 = importlib.import_module("rzen.cached_head").CachedHead
    model_args = importlib.import_module("rzen.model_config").ModelArgs
    new_class = generated_class(result, "1d", tmp_path)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        old, new = tttv1(mesh, args), new_class.from_model_args(mesh, args)
        for mode, rows in (("decode", 32), ("prefill", 64)):
            expected = old.forward(replicated(input_rows(rows), mesh), mode)
            assert_identical(
                expected, new.forward(replicated(input_rows(rows), mesh), mode), f"{shape} {mode}"
            )
        ttnn.close_mesh_device(mesh)


def test_state_kept_across_calls_is_instance_state(tmp_path):
    """``__init__`` starts ``self.calls``: the value lives across calls, so it is not a local but the generated
    module's own per-instance state (instate.py), started by the same literal."""
    result = generate(INPUTS / "rzen" / "cached_head.py", class_name="Counted")
    assert result.gaps == [], [g.describe() for g in result.gaps]
    assert "self.calls = 0" in result.modules[0].code.split("def _bind")[1].split("def ")[0]
    tttv1 = importlib.import_module("rzen.cached_head").Counted
    model_args = importlib.import_module("rzen.model_config").ModelArgs
    new_class = generated_class(result, "1d", tmp_path)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    args = model_args(mesh)
    old, new = tttv1(mesh, args), new_class.from_model_args(mesh, args)
    for mode, rows in (("decode", 32), ("prefill", 64), ("decode", 32)):
        expected = old.forward(replicated(input_rows(rows), mesh), mode)
        assert_identical(expected, new.forward(replicated(input_rows(rows), mesh), mode), mode)
        assert new.calls == old.calls
    ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize(
    ("body", "cached"),
    [
        ("self.a = 1\n        return self.a", {"a"}),
        ("x = self.a\n        self.a = 1\n        return x", set()),  # read before it is set
        ("self.a = self.a + 1\n        return self.a", set()),  # reads itself
        ("self.a = 1\n        self.a = 2\n        return self.a", set()),  # set twice
        ("if x:\n            self.a = 1\n        return self.a", set()),  # not straight code
        ("self.b = 1\n        return self.b", set()),  # another method reads it
        ("(self.c, y) = (1, 2)\n        return self.c", set()),  # a tuple target: not a plain assignment
    ],
)
def test_which_attributes_are_a_forwards_own(body, cached):
    source = f"class C:\n    def forward(self, x):\n        {body}\n\n    def other(self):\n        return self.b\n"
    methods = methods_of(cst.parse_module(source).body[0])
    assert cached_attributes(methods, ["forward"], ["__init__"]) == cached
