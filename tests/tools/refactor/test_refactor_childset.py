"""A dict setter that also switches the module's children (issue 21, item 3; Falcon-40B's and Llama-2-70B's T3000
decoders: ``set_model_config`` sets ``self.model_config`` and runs ``self.mlp.set_model_config(model_config)``).
Each mode's specialisation reads its own view of each child (``tttv2.modules._tttv1_bridge.mode_view``), switched
by the child's own setter to that mode's dict. Fixtures: ``inputs/rpm/parallel_block.py`` (Falcon style: the
forward takes ``llm_mode``; one child rebuilds a prefill buffer in its setter) and ``inputs/rcon/dict_mode_block.py``
(Llama-2 style: the mode is the dict's ``LLM_MODE``; one child hands the dict on to its own child)."""

from __future__ import annotations

import pytest

from tests.tools.refactor.conftest import (
    INPUTS,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    input_rows,
    replicated,
)
from tttv2 import ttnn
from tttv2.modules._tttv1_bridge import mode_view
from tttv2_tools.refactor import generate

inputs_importable = importable_inputs("rpm", "rcon")

FIXTURES = {"rpm": "parallel_block", "rcon": "dict_mode_block"}


# ------------------------------------------------------------------------------------------------ the view
class _Leaf:
    """A TTTv1-style child: its setter rebuilds a buffer for a prefill dict; its forward counts its calls in a
    shared list (in place) and keeps the last input (an assignment)."""

    scale = 3

    def __init__(self, model_config):
        self.model_config = model_config
        self.calls = [0]
        self.buffer = None

    def set_model_config(self, model_config):
        self.model_config = model_config
        if model_config["LLM_MODE"] == "prefill":
            self.buffer = f"rows={model_config['ROWS']}"

    @property
    def mode(self):
        return self.model_config["LLM_MODE"]

    def __call__(self, x):
        self.calls[0] += 1
        self.last = x
        return self.mode, self.buffer, x * self.scale


class _Holder:
    """A child whose setter hands the dict on to its own child."""

    def __init__(self, model_config):
        self.model_config = model_config
        self.leaf = _Leaf(model_config)

    def set_model_config(self, model_config):
        self.model_config = model_config
        self.leaf.set_model_config(model_config)

    def __call__(self, x):
        return self.model_config["LLM_MODE"], self.leaf(x)


DECODE = {"LLM_MODE": "decode"}
PREFILL = {"LLM_MODE": "prefill", "ROWS": 128}


def test_a_mode_view_keeps_what_the_setter_sets_and_shares_the_rest():
    leaf = _Leaf(DECODE)
    decode, prefill = (
        mode_view(leaf, "set_model_config", DECODE),
        mode_view(leaf, "set_model_config", PREFILL),
    )
    assert isinstance(prefill, _Leaf) and type(prefill).__name__ == "_Leaf"
    assert decode(2) == ("decode", None, 6) and prefill(5) == ("prefill", "rows=128", 15)
    # the child itself is untouched by the switch, and sees what the forwards did to it (in place or assigned)
    assert (leaf.model_config, leaf.buffer, leaf.calls, leaf.last) == (DECODE, None, [2], 5)
    assert decode.last == 5  # read through to the child
    leaf.calls.append("x")
    assert prefill.calls == [2, "x"]


def test_a_mode_view_switches_a_grandchild_its_setter_hands_the_dict_to():
    holder = _Holder(DECODE)
    decode, prefill = (
        mode_view(holder, "set_model_config", DECODE),
        mode_view(holder, "set_model_config", PREFILL),
    )
    assert prefill(1) == ("prefill", ("prefill", "rows=128", 3))
    assert decode(1) == ("decode", ("decode", None, 3))
    assert holder.leaf.model_config is DECODE and holder.leaf.buffer is None
    assert holder.leaf.calls == [2]  # both modes' views of the grandchild share its state


def test_a_mode_view_of_a_view_chain_reads_class_attributes_of_the_child():
    leaf = _Leaf(DECODE)
    view = mode_view(leaf, "set_model_config", PREFILL)
    view.scale = 5  # not set by the setter: written to the child, as a forward's assignment would be
    assert leaf.scale == 5 and view(1)[2] == 5


class _Scaled(_Leaf):
    """A child with a property that has a setter (a data descriptor: Python looks it up before the instance)."""

    @property
    def gain(self):
        return self._gain

    @gain.setter
    def gain(self, value):
        self._gain = value * 2


def test_a_mode_view_runs_a_property_setter_on_itself():
    leaf = _Scaled(DECODE)
    leaf.gain = 1
    view = mode_view(leaf, "set_model_config", PREFILL)
    view.gain = 3  # the setter runs with the view as self; what it assigns (_gain) goes to the child
    assert view.gain == 6 and leaf.gain == 6 and "_gain" not in vars(view)


def test_the_shadow_adds_the_mode_only_for_an_entry_without_one():
    from tttv2_tools.collect_cases.verify import _with_mode

    copies = ([1], {"k": 2})
    assert (
        _with_mode(lambda self, x, llm_mode: x, copies, "decode") is copies
    )  # Falcon style: passed by the caller
    assert _with_mode(lambda self, x: x, copies, None) is copies
    assert _with_mode(lambda self, x: x, copies, "prefill") == ([1], {"k": 2, "mode": "prefill"})


# ------------------------------------------------------------------------------------------------ the transform
@pytest.mark.parametrize("package", sorted(FIXTURES))
def test_a_setter_that_switches_its_children_is_transformed(package):
    result = generate(INPUTS / package / f"{FIXTURES[package]}.py")
    assert_no_static_branch(result)
    code = result.modules[0].code
    for mode in ("decode", "prefill"):
        assert f'legacy.model_config = _mode_config("{mode}", {mode}_model_config)' in code
    assert 'tttv1_children = {"' in code and '= _mode_view(tttv1_children["' in code


def _rpm_configs(shape):
    from rpm.model_config import get_model_config

    return {m: get_model_config("BFLOAT16-DRAM", m, 128, shape[1]) for m in ("decode", "prefill")}


def _rcon_configs(_shape):
    return {
        "decode": {"LLM_MODE": "decode", "OUT_MEMCFG": ttnn.L1_MEMORY_CONFIG},
        "prefill": {"LLM_MODE": "prefill", "OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG},
    }


def _rpm_build(cls, mesh, model_config, **given):
    import torch

    generator = torch.Generator().manual_seed(0)
    state_dict = {
        f"m.1.mlp.{w}.weight": torch.randn(64, 64, generator=generator) / 10 for w in ("ff1", "ff2")
    }
    build = cls.from_model_args if given or hasattr(cls, "from_model_args") else cls
    return build(mesh, state_dict, "m", 1, 64, model_config, **given)


def _rcon_build(cls, mesh, model_config, **given):
    import torch

    state_dict = {"layers.0.w": torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) / 8}
    build = cls.from_model_args if hasattr(cls, "from_model_args") else cls
    return build(mesh, state_dict, model_config, **given)


CASES = {
    # the child whose prefill view the negative check replaces, and how the twin then fails: TTTv1's decode dict has
    # no PREFILL_SLICES (rpm); the decode dict's output memory config is L1 where prefill's is DRAM (rcon)
    "rpm": ("TtParallelBlock", _rpm_configs, _rpm_build, ("mixer", KeyError)),
    "rcon": ("TtDictModeBlock", _rcon_configs, _rcon_build, ("pair", AssertionError)),
}


@pytest.mark.parametrize("package", sorted(FIXTURES))
def test_the_block_matches_tttv1_switched_by_its_setter(package, tmp_path):
    """On 1x1 and 1x2, built with either mode's dict (the other by keyword), decode / prefill / decode / prefill:
    bit for bit against one TTTv1 instance switched by its setter between calls. The children's per-mode dicts
    matter: the same twin with a prefill child replaced by its decode view (TTTv1's child left on one dict)
    no longer matches TTTv1 in prefill."""
    import importlib

    class_name, configs_of, build, (child, failure) = CASES[package]
    tttv1 = getattr(importlib.import_module(f"{package}.{FIXTURES[package]}"), class_name)
    generated = generated_class(generate(INPUTS / package / f"{FIXTURES[package]}.py"), "1d", tmp_path)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        configs = configs_of(shape)
        for built_with, other in (("decode", "prefill"), ("prefill", "decode")):
            old = build(tttv1, mesh, configs[built_with])
            new = build(generated, mesh, configs[built_with], **{f"{other}_model_config": configs[other]})
            for mode, rows in (("decode", 32), ("prefill", 128), ("decode", 32), ("prefill", 128)):
                old.set_model_config(configs[mode])
                x = replicated(input_rows(rows), mesh)
                expected = old(x, mode) if package == "rpm" else old(x)
                assert_identical(expected, new(x, mode), f"{shape} built with {built_with}, {mode}")
        # the prefill child of the twin given the decode dict's view: prefill no longer matches
        setattr(new.config, f"prefill_{child}", getattr(new.config, f"decode_{child}"))
        old.set_model_config(configs["prefill"])
        x = replicated(input_rows(128), mesh)
        expected = old(x, "prefill") if package == "rpm" else old(x)
        with pytest.raises(failure):
            assert_identical(expected, new(x, "prefill"))
        ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize("package", sorted(FIXTURES))
def test_the_generated_tests_of_the_block_pass_under_shadow_verification(package, tmp_path, capsys):
    """``--tests-out`` with the package's own ``tests/conftest.py``: the generated tests switch TTTv1 by its
    setter (which switches its children) and build the twin with both dicts; every case of the default matrix
    equals TTTv1."""
    from tttv2_tools.refactor.cli import main

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((INPUTS / package / "tests" / "conftest.py").read_text())
    argv = [
        str(INPUTS / package / f"{FIXTURES[package]}.py"),
        "--out",
        str(tmp_path / "out"),
        "--tests-out",
        str(tests),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "shadow verification: 9 of 9 case(s) equal to TTTv1" in err, err
    assert 'setter="set_model_config")' in (tests / f"test_{FIXTURES[package]}_1d.py").read_text()


# ------------------------------------------------------------------------------------------------ still gaps
SWITCH = "        self.mlp.set_model_config(model_config)\n"


@pytest.mark.parametrize(
    ("new", "shown"),
    [
        (
            "        self.mlp.set_model_config(dict(model_config))\n",
            "self.mlp.set_model_config(dict(model_config))",
        ),
        ("        self.spare.set_model_config(model_config)\n", "self.spare.set_model_config(model_config)"),
        (
            "        self.mlp.set_model_config(model_config, True)\n",
            "self.mlp.set_model_config(model_config, True)",
        ),
    ],
    ids=["another-dict", "not-built-by-init", "more-arguments"],
)
def test_a_child_switch_the_tool_cannot_follow_stays_a_gap(tmp_path, new, shown):
    """Only ``self.<child>.<setter>(<the new dict>)`` of a child ``__init__`` builds is given a view per mode;
    anything else the setter runs stays the setter's gap, naming the statement."""
    text = (INPUTS / "rpm" / "parallel_block.py").read_text()
    assert SWITCH in text
    (tmp_path / "model_config.py").write_text((INPUTS / "rpm" / "model_config.py").read_text())
    source = tmp_path / "parallel_block.py"
    source.write_text(text.replace(SWITCH, new))
    gaps = generate(source).gaps
    assert [g.what for g in gaps] == ["TtParallelBlock.set_model_config"], [g.describe() for g in gaps]
    assert f"also runs `{shown}`" in gaps[0].reason
