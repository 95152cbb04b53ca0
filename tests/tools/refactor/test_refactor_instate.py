"""Plain Python state a forward keeps on its instance (issue 21, item 3): a call counter, a memory config cached
on the first call, a position table grown when a longer sequence arrives (as tt_transformers' rotary embedding
grows its cos/sin cache). The generated module keeps each as its own per-instance state, started in ``_bind()``
with the literal TTTv1's ``__init__`` leaves in it; the forward reads and writes it as TTTv1 does, and a test on
it stays a run-time test. A starting value computed at construction stays a gap."""

from __future__ import annotations

import importlib
from pathlib import Path

import libcst as cst
import pytest

from tests.tools.refactor.conftest import (
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.instate import instance_state
from tttv2_tools.refactor.source import methods_of

FIXTURE = Path(__file__).parent / "inputs" / "rzen" / "instate.py"

inputs_importable = importable_inputs("rzen")


def _state_dict():
    import torch

    generator = torch.Generator().manual_seed(5)
    return {"lm.head.weight": torch.randn(64, 96, generator=generator) / 8}


def test_a_call_counter_and_a_config_cached_on_the_first_call_are_instance_state(tmp_path):
    result = generate(FIXTURE, class_name="CountingHead")
    assert_no_static_branch(result)
    code = result.modules[0].code
    bind, forward = code.split("def _bind")[1].split("def forward")
    for line in ("self.calls = 0", "self.seen_rows = []", "self.output_memory_config = None"):
        assert line in bind
    assert "self.calls += 1" in forward and "if self.output_memory_config is None:" in forward
    assert "if self.calls > 2:" in forward  # a run-time test, on the state
    assert result.notes == [
        f"self.{attr}: plain state the forward changes: kept as the generated module's own per-instance state, "
        f"started in _bind() as TTTv1's __init__ starts it (`{start}`)"
        for attr, start in (("calls", "0"), ("output_memory_config", "None"), ("seen_rows", "[]"))
    ]
    tttv1 = importlib.import_module("rzen.instate").CountingHead
    new_class = generated_class(result, "1d", tmp_path)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        for rows_seq in (
            (32, 64, 32, 64),
            (64, 32, 32, 32),
        ):  # the first call's rows choose the memory config
            old = tttv1(mesh, _state_dict(), "lm.")
            new = new_class.from_model_args(mesh, _state_dict(), "lm.")
            for call, rows in enumerate(rows_seq):
                expected = old.forward(replicated(input_rows(rows), mesh))
                got = new.forward(replicated(input_rows(rows), mesh))
                assert_identical(expected, got, f"{shape} {rows_seq} call {call}")
                assert (new.calls, new.seen_rows) == (old.calls, old.seen_rows)
                assert new.output_memory_config == old.output_memory_config
        # two modules of one config: each its own list (a fresh literal per instance)
        again = new_class.from_config(new.config)
        assert again.calls == 0 and again.seen_rows == [] and new.seen_rows == list(rows_seq)
        ttnn.close_mesh_device(mesh)


def test_a_cache_grown_for_longer_sequences_is_instance_state(tmp_path):
    result = generate(FIXTURE, class_name="GrowingPositions")
    assert_no_static_branch(result)
    code = result.modules[0].code
    bind, forward = code.split("def _bind")[1].split("def forward")
    assert "self.rows_cached = None" in bind and "self.table = None" in bind
    assert "if self.rows_cached is None or rows > self.rows_cached:" in forward
    tttv1 = importlib.import_module("rzen.instate").GrowingPositions
    new_class = generated_class(result, "1d", tmp_path)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    old = tttv1(mesh, 64, scale=0.03)
    new = new_class.from_model_args(mesh, 64, scale=0.03)
    for call, rows in enumerate((32, 96, 64, 128, 32)):  # grows at 32, 96, 128; reuses in between
        expected = old.forward(replicated(input_rows(rows), mesh))
        got = new.forward(replicated(input_rows(rows), mesh))
        assert_identical(expected, got, f"call {call}")
        assert new.rows_cached == old.rows_cached
    assert new.rows_cached == 128
    ttnn.close_mesh_device(mesh)


def _state(init_body: str, forward_body: str = "self.n = self.n + 1", extra: str = "") -> dict[str, str]:
    source = (
        f"class C:\n    def __init__(self, args):\n        {init_body}\n"
        f"    def forward(self, x):\n        {forward_body}\n{extra}"
    )
    methods = methods_of(cst.parse_module(source).body[0])
    changed = {"n"} if "+=" in forward_body or ".append" in forward_body else set()
    return {a: v.source for a, v in instance_state(methods, {"n"}, changed).items()}


_RESET = "\n    def reset(self):\n        self.n = 3\n"


@pytest.mark.parametrize(
    ("init_body", "extra", "expected"),
    [
        ("self.n = 0", "", {"n": "0"}),
        ("self.n = ttnn.DRAM_MEMORY_CONFIG", "", {"n": "ttnn.DRAM_MEMORY_CONFIG"}),
        ("self.n = (None, [1, 2])", "", {"n": "(None, [1, 2])"}),
        ("self.n = args.first", "", {"n": "self.config.n_start"}),  # computed at construction: a field
        ("self.n = len([])", "", {"n": "self.config.n_start"}),  # a call
        ("self.n = other.DRAM", "", {"n": "self.config.n_start"}),  # not a ttnn constant
        ("self.n = x", "", {"n": "self.config.n_start"}),  # a name
        ("pass", "", {}),  # never started
        ("self.n = 0\n        self.n = None", "", {"n": "None"}),  # the last one
        ("self.n = 0\n        if args:\n            self.n = 1", "", {}),  # then set under a test
        ("self.n = 0\n        self.n += 1", "", {}),  # then changed
        ("self.n = 0\n        self.reset()", _RESET, {}),  # then set by a method it calls
        ("self.reset()\n        self.n = 0", _RESET, {"n": "0"}),  # set by a method, then started
        ("self.n = 0\n        self.other()", "\n    def other(self):\n        pass\n", {"n": "0"}),
    ],
)
def test_which_starting_values_are_taken(init_body, extra, expected):
    assert _state(init_body, extra=extra) == expected


@pytest.mark.parametrize(
    ("init_body", "forward_body", "expected"),
    [
        ("self.n = []", "self.n.append(x)", {"n": "[]"}),  # a fresh literal per instance
        ("self.n = list(args.rows)", "self.n.append(x)", {}),  # a field's object would be shared
        ("self.n = args.first", "self.n += 1", {}),  # += may change it in place
        ("self.n = 0", "self.n += 1", {"n": "0"}),
    ],
)
def test_state_changed_in_place_needs_a_literal_start(init_body, forward_body, expected):
    assert _state(init_body, forward_body) == expected


@pytest.mark.parametrize(
    "source",
    [
        "class C:\n    def forward(self):\n        self.n = 1\n",  # no __init__
        "class C:\n    def __init__(self): self.n = 0\n    def forward(self):\n        self.n = 1\n",  # one line
    ],
)
def test_no_init_block_means_no_instance_state(source):
    methods = methods_of(cst.parse_module(source).body[0])
    assert instance_state(methods, {"n"}) == {}


def test_a_start_computed_at_construction_and_changed_by_augmented_assignment_stays_a_gap(tmp_path):
    """``self.calls += 1`` on a value of a config field: ``+=`` may change the object in place (a list would be
    shared by every module built from that config), so it stays a gap."""
    source = FIXTURE.read_text().replace(
        "        self.calls = 0\n", "        self.calls = len(state_dict) * 0\n"
    )
    changed = tmp_path / "instate.py"
    changed.write_text(source)
    gaps = generate(changed, class_name="CountingHead").gaps
    assert {(g.what, g.reason) for g in gaps} == {("self.calls", "forward changes module state")}


def test_a_start_computed_at_construction_is_a_config_field(tmp_path):
    result = generate(FIXTURE, class_name="WarmupScale")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert "current_pos_start: Any  # starting value of self.current_pos" in code
    assert "current_pos_start=legacy.current_pos" in code
    assert "self.current_pos = self.config.current_pos_start" in code.split("def _bind")[1]
    assert "if self.current_pos >= self.config.warmup_rows:" in code.split("def forward")[1]
    tttv1 = importlib.import_module("rzen.instate").WarmupScale
    new_class = generated_class(result, "1d", tmp_path)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    for start in (0, 64):
        old, new = (
            tttv1(mesh, start, warmup_rows=160),
            new_class.from_model_args(mesh, start, warmup_rows=160),
        )
        for call in range(4):  # scaled while below 160 rows, passed through after
            expected = old.forward(replicated(input_rows(32), mesh))
            assert_identical(
                expected, new.forward(replicated(input_rows(32), mesh)), f"start {start} call {call}"
            )
            assert new.current_pos == old.current_pos
        # another module of the same config starts where TTTv1's __init__ started, not where this one is
        assert new_class.from_config(new.config).current_pos == start
    ttnn.close_mesh_device(mesh)


def test_a_value_named_like_a_start_field_takes_another_name(tmp_path):
    """TTTv1's own ``self.current_pos_start``, read by the forward, is a field too: it yields the name to the
    starting value of ``self.current_pos``, and both are what TTTv1 computes."""
    source = (
        FIXTURE.read_text()
        .replace(
            "        self.current_pos = start_pos\n",
            "        self.current_pos = start_pos\n        self.current_pos_start = start_pos + 1\n",
        )
        .replace("return x\n", "return ttnn.mul(x, float(self.current_pos_start))\n")
    )
    changed = tmp_path / "rzen_named.py"
    changed.write_text(source)
    result = generate(changed, class_name="WarmupScale")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert "current_pos_start=legacy.current_pos," in code
    assert code.count("current_pos_start: Any") == 1 and "self.config.current_pos_start)" not in code
