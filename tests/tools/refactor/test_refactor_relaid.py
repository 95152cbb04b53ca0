"""A forward that converts a device weight in place on every call (issue 21, item 3; tt-metal's Gemma-3
multi-modal projector re-tiles its projection weight before the matmul): a constant, idempotent conversion is
made once, where the generated module loads its weights, and the forward only reads the weight. A weight the
forward replaces with a run-time value, or reads before its conversion, is kept as the generated module's own
per-instance state; one the forward also changes in place stays a gap."""

from __future__ import annotations

import importlib
from pathlib import Path

import libcst as cst
import pytest
import torch

from tests.tools.refactor.conftest import (
    assert_identical,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.relaid import drop_conversions, relaid_weights
from tttv2_tools.refactor.source import methods_of

INPUTS = Path(__file__).parent / "inputs"
FIXTURE = INPUTS / "rzen" / "relaid_proj.py"

inputs_importable = importable_inputs("rzen")


def _state_dict():
    generator = torch.Generator().manual_seed(3)
    return {
        "mm.proj.weight": torch.randn(64, 96, generator=generator) / 8,
        "mm.proj.bias": torch.randn(1, 1, 1, 96, generator=generator),
    }


def test_a_weight_converted_in_place_is_converted_once_at_loading(tmp_path):
    result = generate(FIXTURE, class_name="RelaidProjector")
    assert result.gaps == [], [g.describe() for g in result.gaps]
    code = result.modules[0].code
    load, forward = code.split("def load_device_weights")[1].split("def forward")
    assert "self.proj_weight = ttnn.to_layout(_on_device(self.config.proj_weight), ttnn.TILE_LAYOUT)" in load
    assert "self.proj_bias = ttnn.typecast(_on_device(self.config.proj_bias), dtype=ttnn.bfloat16)" in load
    assert "self.proj_weight =" not in forward and "self.proj_bias =" not in forward
    assert "ttnn.matmul(normed, self.proj_weight)" in forward
    # a test on the converted weight is made at run time, on the weight the forward reads (at construction it
    # would see the unconverted one)
    assert "if self.proj_bias.dtype == ttnn.bfloat16:" in forward
    assert result.notes == [
        "relaid_proj.py:33: self.proj_weight: the forward converts it in place on every call "
        "(`ttnn.to_layout(self.proj_weight, ttnn.TILE_LAYOUT)`); the generated module converts it once, in "
        "load_device_weights()",
        "relaid_proj.py:34: self.proj_bias: the forward converts it in place on every call "
        "(`ttnn.typecast(self.proj_bias, dtype=ttnn.bfloat16)`); the generated module converts it once, in "
        "load_device_weights()",
    ]
    tttv1 = importlib.import_module("rzen.relaid_proj").RelaidProjector
    new_class = generated_class(result, "1d", tmp_path)
    for shape in ((1, 1), (1, 2), (1, 8)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        old = tttv1(mesh, _state_dict(), "mm.")
        new = new_class.from_model_args(mesh, _state_dict(), "mm.")
        # the first call converts in TTTv1, the later ones find it done
        for call, rows in enumerate((32, 32, 64)):
            expected = old.forward(replicated(input_rows(rows), mesh))
            got = new.forward(replicated(input_rows(rows), mesh))
            assert_identical(expected, got, f"{shape} call {call}")
        assert old.proj_weight.layout == ttnn.TILE_LAYOUT and new.proj_weight.layout == ttnn.TILE_LAYOUT
        assert new.proj_bias.dtype == ttnn.bfloat16
        ttnn.close_mesh_device(mesh)


def _run_both(result, tmp_path, class_name, calls):
    """TTTv1's ``class_name`` and its generated module, on the same calls (each an input and its memory config):
    equal bit for bit, call after call, and so is the weight each keeps."""
    tttv1 = getattr(importlib.import_module("rzen.relaid_proj"), class_name)
    new_class = generated_class(result, "1d", tmp_path)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        old = tttv1(mesh, _state_dict(), "mm.")
        new = new_class.from_model_args(mesh, _state_dict(), "mm.")
        for call, memory_config in enumerate(calls):
            x = [ttnn.to_memory_config(replicated(input_rows(32), mesh), memory_config) for _ in range(2)]
            assert_identical(old.forward(x[0]), new.forward(x[1]), f"{shape} call {call}")
            assert_identical(old.proj_weight, new.proj_weight, f"{shape} weight after call {call}")
        ttnn.close_mesh_device(mesh)


def test_a_weight_the_forward_replaces_per_call_is_kept_as_instance_state(tmp_path):
    """Converted to each input's memory config (a run-time value): the forward keeps writing ``self.proj_weight``,
    an attribute of the generated module, as TTTv1 writes its own."""
    result = generate(FIXTURE, class_name="FollowingProjector")
    assert result.gaps == [], [g.describe() for g in result.gaps]
    forward = result.modules[0].code.split("def forward")[1]
    assert "self.proj_weight = ttnn.to_memory_config(self.proj_weight, features.memory_config())" in forward
    assert result.notes == [
        "self.proj_weight: a device tensor of __init__ that the forward replaces with a value of the call: kept "
        "as the generated module's own per-instance state, written by the forward as TTTv1 writes it"
    ]
    _run_both(result, tmp_path, "FollowingProjector", [ttnn.L1_MEMORY_CONFIG, ttnn.DRAM_MEMORY_CONFIG] * 2)


def test_a_weight_read_before_its_conversion_is_kept_as_instance_state(tmp_path):
    """The first call sees the weight row-major, the later ones tiled (their output doubled): the test stays in
    the forward, on the state, and each call gives what TTTv1's gives."""
    result = generate(FIXTURE, class_name="PeekingProjector")
    assert result.gaps == [], [g.describe() for g in result.gaps]
    forward = result.modules[0].code.split("def forward")[1]
    assert "tiled = self.proj_weight.layout == ttnn.TILE_LAYOUT" in forward
    _run_both(result, tmp_path, "PeekingProjector", [ttnn.DRAM_MEMORY_CONFIG] * 3)


def test_a_weight_a_forward_also_changes_in_place_stays_a_gap(tmp_path):
    source = FIXTURE.read_text().replace(
        "        return ttnn.matmul(features, self.proj_weight)",
        "        self.proj_weight += 1\n        return ttnn.matmul(features, self.proj_weight)",
    )
    changed = tmp_path / "relaid_proj.py"
    changed.write_text(source)
    gaps = generate(changed, class_name="FollowingProjector").gaps
    assert {(g.loc, g.what, g.reason) for g in gaps} == {
        (f"relaid_proj.py:{line}", "self.proj_weight", "forward changes module state")
        for line in (53, 54, 55)
    }


_OTHER = "\n    def other(self):\n        return self.b\n"


@pytest.mark.parametrize(
    ("body", "extra", "relaid"),
    [
        ("self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n        return self.w", "", {"w"}),
        ("self.w = ttnn.to_memory_config(self.w, memory_config=ttnn.L1_MEMORY_CONFIG)", "", {"w"}),
        ("self.h = ttnn.to_layout(self.h, ttnn.TILE_LAYOUT)", "", set()),  # not a device tensor of __init__
        ("self.w = ttnn.reshape(self.w, (1, 64))", "", set()),  # not a conversion
        ("self.w = ttnn.to_layout(self.b, ttnn.TILE_LAYOUT)", "", set()),  # converts another tensor
        ("self.w = ttnn.to_layout(x, ttnn.TILE_LAYOUT)", "", set()),  # an input
        ("self.w = ttnn.to_layout(layout=ttnn.TILE_LAYOUT, input_tensor=self.w)", "", set()),  # by keyword
        ("self.w = ttnn.typecast(self.w, self.dtype)", "", set()),  # reads self
        ("self.w = ttnn.typecast(self.w, *kinds)", "", set()),  # starred
        (
            "self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n        self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)",
            "",
            set(),
        ),
        (
            "self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n        if x:\n            self.w = None",
            "",
            set(),
        ),
        (
            "self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n        self.w += 1",
            "",
            set(),
        ),  # changed in place
        ("self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n        ttnn.deallocate(self.w)", "", set()),
        (
            "self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)",
            "\n    def later(self):\n        return self.w\n",
            set(),
        ),
        (
            "self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)",
            "\n    def later(self):\n        self.w = ttnn.to_layout(self.w, ttnn.ROW_MAJOR_LAYOUT)\n",
            set(),
        ),
        (
            "self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)",
            "\n    def later(self):\n        self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n        return self.w\n",
            {"w"},
        ),
    ],
)
def test_which_weights_are_converted_once(body, extra, relaid):
    source = f"class C:\n    def forward(self, x):\n        {body}\n{_OTHER}{extra}"
    methods = methods_of(cst.parse_module(source).body[0])
    forwards = ["forward", "later"] if extra else ["forward"]
    mutated = {"forward": {"w"}} if "+=" in body else {}
    assert set(relaid_weights(methods, forwards, ["__init__"], {"w", "b"}, mutated)) == relaid


def test_dropping_the_only_statement_leaves_a_valid_body():
    source = "class C:\n    def forward(self):\n        self.w = ttnn.to_layout(self.w, ttnn.TILE_LAYOUT)\n"
    methods = methods_of(cst.parse_module(source).body[0])
    relaid = relaid_weights(methods, ["forward"], ["__init__"], {"w"}, {})
    out = drop_conversions(methods["forward"], relaid, None)
    assert cst.Module(body=[out]).code.strip().endswith("pass")
    assert drop_conversions(methods["forward"], {}, None) is methods["forward"]
