"""Constructs of real tt-metal code (issue 21, items 3 and 4), on the ``inputs/rcon`` package: a test that ANDs
a static part with a run-time part (the Llama-3 70B Galaxy MLP's ``use_bh_decode_no_pf and … and
w2_out.memory_config().buffer_type == …``, in parentheses over several lines; a test with an ``else``), and the
per-layer dtype of tt_transformers' ``Transformer.forward`` (``activation_dtype is not None and x.dtype !=
activation_dtype`` in a loop over the layers). Each generated module is run against its TTTv1 class, bit for
bit, on the emulator."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.zencheck import static_branches

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rcon"

inputs_importable = importable_inputs(PACKAGE)

_inputs = InputPackage(PACKAGE)
_generate = _inputs.generate
_tttv1 = _inputs.tttv1

pytest_plugins = ["pytester"]


def _state_dict(layers: int) -> dict:
    import torch

    torch.manual_seed(0)
    return {f"layers.{i}.w": torch.randn(64, 64) / 8 for i in range(layers)}


# ------------------------------------------------------------------------------------------ static `and` run-time
def test_the_static_prefix_of_an_and_is_bound_and_the_run_time_rest_stays():
    """``if (no_pf and not cfg.get(…) and out.memory_config().buffer_type == DRAM):`` over several lines: the
    static prefix (two operands) is the bound choice, the tensor test stays in the arm it guards; ``if
    scale_residual and out.dtype == bf16: A else: B``: the true arm keeps ``if out.dtype …: A else: B``, the
    false arm is ``B`` alone. Both were static branches left (a gap each, per mode)."""
    result = _generate("gated_ffn")
    assert_no_static_branch(result)
    code = result.modules[0].code
    forwards = code.split("def decode_forward")[1]
    assert "if out.memory_config().buffer_type == ttnn.BufferType.DRAM:" in forwards
    assert "no_pf and" not in forwards.split("def _decode")[0]  # the forward calls the bound method
    true_arm = forwards.split("def _decode_scale_residual_true(self, out):")[1].split("    def ")[0]
    false_arm = forwards.split("def _decode_scale_residual_false(self, out):")[1].split("    def ")[0]
    assert "if out.dtype == ttnn.bfloat16:" in true_arm and "else:" in true_arm
    assert "ttnn.add(out, 1.0)" in false_arm and "if " not in false_arm.split("rows")[0]
    # ``if is_blackhole and rows > 64: A elif rows > 32: B``: the elif chain is kept in both arms
    blackhole = forwards.split("def _decode_is_blackhole_true(self, out, rows):")[1].split("    def ")[0]
    other = forwards.split("def _decode_is_blackhole_false(self, out, rows):")[1].split("    def ")[0]
    assert "if rows > 64:" in blackhole and "elif rows > 32:" in blackhole
    assert "if rows > 32:" in other and "rows > 64" not in other


@pytest.mark.parametrize(
    ("is_blackhole", "use_prefetcher", "scale_residual"),
    [(True, False, True), (True, True, False), (False, False, True)],
)
def test_the_gated_ffn_matches_tttv1_bit_for_bit(is_blackhole, use_prefetcher, scale_residual, tmp_path):
    generated = generated_class(_generate("gated_ffn"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    state_dict = _state_dict(1)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(
            mesh, is_blackhole=is_blackhole, use_prefetcher=use_prefetcher, scale_residual=scale_residual
        )
        old = _tttv1("gated_ffn", "TtGatedFFN")(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        for mode, rows in (("decode", 32), ("prefill", 128), ("prefill", 64), ("decode", 32)):
            expected = old.forward(replicated(input_rows(rows), mesh), mode)
            got = new.forward(replicated(input_rows(rows), mesh), mode)
            assert_identical(expected, got, f"{shape} {mode}")
            assert got.memory_config() == expected.memory_config()
        ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ a value per layer
def test_a_test_on_a_per_layer_value_is_not_a_static_branch_left():
    """``activation_dtype`` is computed from the loop variable: one value per layer, which no field or bound
    method makes once; the Zen check treats it as it treats the loop variable itself (it was a gap)."""
    result = _generate("stack")
    assert_no_static_branch(result)
    prefill = next(g.code for g in result.modules if g.topology == "1d").split("def prefill_forward")[1]
    assert "if activation_dtype is not None and x.dtype != activation_dtype:" in prefill


PER_LAYER = """import ttnn


class Loop1D:
    def __init__(self, config):
        self.config = config

    def forward(self, x, mode):
        if mode == "decode":
            return self.decode_forward(x)
        return self.prefill_forward(x)

    def decode_forward(self, x):
        for i, layer in enumerate(self.config.layers):
            dt = self.config.opts.get_dtype(i)
            if dt is not None:
                x = ttnn.typecast(x, dt)
            x = layer(x)
        return x

    def prefill_forward(self, x):
        gain = self.config.gain
        total = x
        for layer in self.config.layers:
            scaled = gain
            if scaled is not None:
                x = ttnn.mul(x, scaled)
            total = layer(total)
        if total is not None:
            x = ttnn.add(x, 1.0)
        return x
"""


def test_the_zen_check_skips_per_layer_values_only():
    """A local every assignment of which reads the loop variable is per layer (skipped); a local assigned from
    a field in the loop is not (``scaled = gain``: static once, reported), nor one that reads a parameter."""
    found = static_branches(PER_LAYER, "loop_1d.py", "Loop1D")
    assert [test for _, _, test, _ in found] == ["scaled is not None"]


@pytest.mark.parametrize(("shape", "topology"), [((1, 2), "1d"), ((8, 4), "2d")])
def test_the_stack_matches_tttv1_bit_for_bit(shape, topology, tmp_path):
    result = _generate("stack")
    generated = generated_class(result, topology, tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    args = model_args(mesh)
    state_dict = _state_dict(args.n_layers)
    old = _tttv1("stack", "TtStack")(mesh, args, state_dict)
    new = generated.from_model_args(mesh, args, state_dict)
    for mode in ("decode", "prefill"):
        expected = old.forward(replicated(input_rows(32), mesh), mode)
        got = new.forward(replicated(input_rows(32), mesh), mode)
        assert_identical(expected, got, f"{shape} {mode}")
        assert got.dtype == expected.dtype
    ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ two levels of helpers
def test_a_value_through_two_helper_copies_is_decided_at_construction():
    """``tt_split_norm(…, num_links=None)`` asks the CCL object (``if num_links is None: num_links =
    tt_ccl.get_num_links(cluster_axis=1)``) and passes the answer to ``tt_all_gather``, which asks again when
    given None: its ``if num_links is None`` was a static branch left (tt_transformers' distributed_norm.py,
    2D path). The outer copy's decided local now reaches the inner copy, whose test is made at construction."""
    result = _generate("split_norm")
    assert_no_static_branch(result)
    code = next(g.code for g in result.modules if g.topology == "2d")
    forwards = code.split("def load_device_weights")[1]
    assert "num_links is None" not in forwards and "get_num_links" not in forwards
    assert "num_links=self.config.num_links" in forwards


@pytest.mark.parametrize(
    ("shape", "topology", "links"), [((1, 2), "1d", (1, 2)), ((8, 4), "2d", (1, 2)), ((8, 4), "2d", (2, 4))]
)
def test_the_split_norm_matches_tttv1_bit_for_bit(shape, topology, links, tmp_path):
    import torch

    generated = generated_class(_generate("split_norm"), topology, tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    torch.manual_seed(0)
    state_dict = {"gamma": torch.rand(64) + 0.5}
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    args = model_args(mesh)
    tt_ccl = _tttv1("ccl", "TT_CCL")(mesh, links=links)
    old = _tttv1("split_norm", "TtSplitNorm")(mesh, args, state_dict, tt_ccl)
    new = generated.from_model_args(mesh, args, state_dict, tt_ccl)
    for mode in ("decode", "prefill"):
        expected = old(replicated(input_rows(32), mesh), mode)
        assert_identical(expected, new(replicated(input_rows(32), mesh), mode), f"{shape} {mode}")
    ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ 2D-only generated tests
def test_the_generated_tests_of_2d_only_modules_pass_on_8x4(tmp_path, pytester, nested_run_imports):
    """``rmain``'s Galaxy-only MLPs (one asserting the galaxy, one forced with ``--topology 2d``): the tests
    tttv2-refactor writes for them run with the package's own ``tests/conftest.py`` and pass: the equivalence
    cases on the emulated 8x4 mesh (decode, prefill 128 and 256 rows) and the refusal of a 1x8 mesh."""
    from tttv2_tools.refactor.cli import main

    rmain = INPUTS / "rmain"
    sys.path.insert(0, str(INPUTS))
    try:
        for name, more in (("ring_mlp", ()), ("plain_ring_mlp", ("--topology", "2d"))):
            argv = [str(rmain / f"{name}.py"), "--out", str(tmp_path), "--tests-out", str(tmp_path / "tests")]
            assert main([*argv, "--quiet", *more]) == 0, name
        (tmp_path / "tests" / "conftest.py").write_text((rmain / "tests" / "conftest.py").read_text())
        assert sorted(p.name for p in (tmp_path / "tests").glob("test_*.py")) == [
            "test_plain_ring_mlp_2d.py",
            "test_ring_mlp_2d.py",
        ]
        texts = [p.read_text() for p in sorted((tmp_path / "tests").glob("test_*.py"))]
        result = pytester.runpytest_inprocess(str(tmp_path / "tests"), "-q", "-p", "no:cacheprovider")
        out = result.stdout.str()
        outcomes = result.parseoutcomes()
    finally:
        sys.path.remove(str(INPUTS))
        for name in [n for n in sys.modules if n.split(".")[0] == "rmain"]:
            del sys.modules[name]
    assert outcomes.get("passed") == 8 and not outcomes.get("failed") and not outcomes.get("error"), out[
        -3000:
    ]
    for text in texts:  # three equivalence cases on 8x4, the refusal on 1x8, no other mesh
        assert text.count('id="8x4-') == 3 and text.count('id="1x8-') == 1 and text.count('id="') == 4


# ------------------------------------------------------------------------------------------ a base class's attributes
def test_attributes_a_base_class_of_another_file_sets_are_computed_at_construction():
    """``self.norm_eps`` and ``self.out_memcfg`` are set by ``TtNormBase.__init__`` (norm_base.py), which
    ``TtFinalNorm.__init__`` runs through ``super().__init__(mesh_device, args)``: from_model_args runs it too,
    on an uninitialised TTTv1 instance, and the fields read what it set (they were gaps: "__init__ does not set
    it")."""
    result = _generate("final_norm")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert "legacy = TtFinalNorm.__new__(TtFinalNorm)" in code
    assert "super(TtFinalNorm, legacy).__init__(mesh_device, args)" in code
    assert "norm_eps=legacy.norm_eps" in code and "out_memcfg=legacy.out_memcfg" in code


def test_the_final_norm_matches_tttv1_bit_for_bit(tmp_path):
    import torch

    generated = generated_class(_generate("final_norm"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    torch.manual_seed(0)
    state_dict = {"norm.weight": torch.rand(64) + 0.5}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        args.norm_eps = 1e-2  # not the default: the base must read it
        old = _tttv1("final_norm", "TtFinalNorm")(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        for mode in ("decode", "prefill"):
            expected = old(replicated(input_rows(32), mesh), mode)
            got = new(replicated(input_rows(32), mesh), mode)
            assert_identical(expected, got, f"{shape} {mode}")
            assert got.memory_config() == expected.memory_config()
        ttnn.close_mesh_device(mesh)


def _tree(tmp_path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_base_attributes_follow_imports_and_stop_where_python_does(tmp_path):
    """Bases of the same file, of a relative and an absolute import, a base of a base only while each
    ``__init__`` runs its base's, nested functions ignored; a base of an installed package, an unresolvable
    import or a missing file adds nothing."""
    from tttv2_tools.refactor.bases import base_attributes

    root = _tree(
        tmp_path,
        {
            "pk/__init__.py": "",
            "pk/grand.py": "class Grand:\n    def __init__(self):\n        self.g = 1\n",
            "pk/base.py": (
                "from pk.grand import Grand\n\n\nclass Base(Grand):\n    def __init__(self, a):\n"
                "        super().__init__()\n        self.a, self.b = a, 2\n"
                "        def inner(s):\n            s.hidden = 3\n"
            ),
            "pk/stop.py": "from .grand import Grand\n\n\nclass Stop(Grand):\n    def __init__(self):\n        self.s = 1\n",
            "pk/child.py": (
                "import torch\nfrom .base import Base\nfrom .stop import Stop\nfrom pk.nowhere import Gone\n"
                "from torch.nn import Module\n\n\nclass Local:\n    def __init__(self):\n        self.loc: int = 0\n"
                "\n\nclass C(Base):\n    def __init__(self):\n        super().__init__(1)\n        self.own = 1\n"
                "\n\nclass D(Stop, Local, Gone, Module, torch.nn.Module):\n    pass\n"
            ),
        },
    )
    child = root / "pk" / "child.py"
    text = child.read_text()
    assert base_attributes("C", child, text) == {"a": "base.py:7", "b": "base.py:7", "g": "grand.py:3"}
    assert base_attributes("D", child, text) == {"s": "stop.py:6", "loc": "child.py:10"}
    assert base_attributes("Missing", child, text) == {}
    (root / "pk" / "stop.py").write_text("class Stop(:\n")  # unreadable as Python: nothing
    assert base_attributes("D", child, text) == {"loc": "child.py:10"}


def test_an_attribute_of_a_base_the_tool_cannot_find_is_still_a_gap(tmp_path):
    """The base is imported from a module nothing provides: its attributes are unknown, and the read is
    reported as before (no ``super(…)`` call is written)."""
    source = tmp_path / "lost_norm.py"
    source.write_text(
        "import ttnn\n\nfrom nowhere_pkg.bases import NormBase\n\n\nclass LostNorm(NormBase):\n"
        "    def __init__(self, mesh_device, args):\n        super().__init__(mesh_device, args)\n\n"
        "    def forward(self, x, mode):\n        return ttnn.add(x, self.norm_eps)\n"
    )
    result = generate(source)
    assert [(g.loc, g.what) for g in result.gaps if g.what == "self.norm_eps"] == [
        ("lost_norm.py:11", "self.norm_eps")
    ]
    assert all("super(" not in g.code for g in result.modules)


# ------------------------------------------------------------------------------------------ the mode in the dict
def test_a_mode_read_from_the_config_dict_is_the_mode(tmp_path, capsys):
    """Llama-2-70B T3000's ``if self.model_config["LLM_MODE"] == "decode": …`` in a ``__call__`` without a mode,
    the caller switching dicts with ``set_model_config``: the module gets ``decode_forward`` / ``prefill_forward``
    and ``forward(x, mode)``, each mode's fields read that mode's dict (``from_model_args``' per-mode keywords),
    no static branch is left; the generated tests (TTTv1 switched by its own setter before each mode) run with
    the package's conftest and all pass (it was a gap: "reads the mode from the config dict")."""
    from tttv2_tools.refactor.cli import main

    result = _generate("dict_mode_mlp")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert (
        "def forward(self, x, mode):" in code
        and "decode_model_config=None, prefill_model_config=None" in code
    )
    assert 'decode_out_memcfg=legacy.model_config["OUT_MEMCFG"]' in code and "prefill_out_memcfg=" in code
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((INPUTS / PACKAGE / "tests" / "conftest.py").read_text())
    sys.path.insert(0, str(INPUTS))
    try:
        argv = [
            str(INPUTS / PACKAGE / "dict_mode_mlp.py"),
            "--out",
            str(tmp_path / "out"),
            "--tests-out",
            str(tests),
        ]
        assert main(argv) == 0
    finally:
        sys.path.remove(str(INPUTS))
        for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
            del sys.modules[name]
    err = capsys.readouterr().err
    assert "shadow verification: 9 of 9 case(s) equal to TTTv1" in err, err
    assert 'mode, recorded, setter="set_model_config")' in (tests / "test_dict_mode_mlp_1d.py").read_text()


def test_the_dict_mode_module_matches_tttv1_switched_by_its_setter(inputs_importable, tmp_path):
    """Built with either mode's dict (the other given by keyword), on 1x1 and 1x2, over decode / prefill /
    decode / prefill: bit for bit against one TTTv1 instance switched by ``set_model_config`` between calls
    (the output memory config differs per mode, so a field read from the wrong dict would show)."""
    generated = generated_class(_generate("dict_mode_mlp"), "1d", tmp_path)
    mlp = _tttv1("dict_mode_mlp", "TtDictModeMLP")
    state_dict = _state_dict(1)
    configs = {
        "decode": {"LLM_MODE": "decode", "OUT_MEMCFG": ttnn.L1_MEMORY_CONFIG},
        "prefill": {"LLM_MODE": "prefill", "OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG},
    }
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        for built_with, other in (("decode", "prefill"), ("prefill", "decode")):
            old = mlp(mesh, state_dict, configs[built_with])
            given = {f"{other}_model_config": configs[other]}
            new = generated.from_model_args(mesh, state_dict, configs[built_with], **given)
            for mode, rows in (("decode", 32), ("prefill", 128), ("decode", 32), ("prefill", 128)):
                old.set_model_config(configs[mode])
                x = replicated(input_rows(rows), mesh)
                assert_identical(old(x), new(x, mode))
        with pytest.raises(ValueError, match="the prefill fields read the prefill config dict"):
            generated.from_model_args(mesh, state_dict, configs["decode"])
        ttnn.close_mesh_device(mesh)


def _dict_mode_variant(tmp_path, old: str, new: str) -> Path:
    text = (INPUTS / PACKAGE / "dict_mode_mlp.py").read_text()
    text = text.replace("from rcon.lightweightmodule import LightweightModule\n", "")
    text = text.replace("(LightweightModule)", "")
    assert old in text
    (tmp_path / "model_config.py").write_text((INPUTS / PACKAGE / "model_config.py").read_text())
    source = tmp_path / "dict_mode_mlp.py"
    source.write_text(text.replace(old, new))
    return source


SETTER = "    def set_model_config(self, model_config):\n        self.model_config = model_config\n"


@pytest.mark.parametrize(
    ("old", "new", "what", "reason"),
    [
        (  # no setter: TTTv1 runs in its construction dict's mode only
            SETTER,
            "",
            'self.model_config["LLM_MODE"] == "decode"',
            "without such a setter the module runs in its construction dict's mode only",
        ),
        (  # the dict is set by the setter, not kept from __init__'s parameter
            "        self.model_config = model_config\n        self.w",
            "        self.set_model_config(model_config)\n        self.w",
            "TtDictModeMLP.__init__",
            "so each mode needs its own dict, but __init__ does not keep a `model_config` parameter",
        ),
        (  # the setter changes other state too
            SETTER,
            SETTER + "        self.rows = 1\n",
            "TtDictModeMLP.set_model_config",
            "set_model_config sets another mode's dict and also runs `self.rows = 1`",
        ),
    ],
    ids=["no-setter", "dict-not-kept", "setter-does-more"],
)
def test_what_the_dict_mode_cannot_take_is_a_precise_gap(tmp_path, old, new, what, reason):
    result = generate(_dict_mode_variant(tmp_path, old, new))
    assert result.gaps[0].what == what and reason in result.gaps[0].reason, [
        g.describe() for g in result.gaps
    ]


def test_a_dict_mode_forward_with_a_default_takes_the_mode_by_keyword(tmp_path):
    """A TTTv1 ``__call__(self, x, scale=0.5)``: the generated forward's added ``mode`` follows a parameter with
    a default, so it is keyword-only."""
    old = "    def __call__(self, x):\n"
    result = generate(_dict_mode_variant(tmp_path, old, "    def __call__(self, x, scale=0.5):\n"))
    assert result.gaps == [], [g.describe() for g in result.gaps]
    assert "def forward(self, x, scale=0.5, *, mode):" in result.modules[0].code


def test_a_generated_dict_mode_test_without_a_modes_dict_fixture_fails_naming_it(tmp_path, pytester):
    """The conftest gives no ``prefill_model_config``: the generated test fails in one line naming it."""
    from tttv2_tools.refactor.cli import main

    tests = tmp_path / "tests"
    argv = [
        str(INPUTS / PACKAGE / "dict_mode_mlp.py"),
        "--out",
        str(tmp_path / "out"),
        "--tests-out",
        str(tests),
    ]
    assert main([*argv, "--quiet", "--no-verify"]) == 0
    conftest = (INPUTS / PACKAGE / "tests" / "conftest.py").read_text()
    (tests / "conftest.py").write_text(conftest.replace("def prefill_model_config", "def other_config"))
    sys.path.insert(0, str(INPUTS))
    try:
        result = pytester.runpytest_inprocess(str(tests), "-q", "-p", "no:cacheprovider", "-k", "1x1-decode")
    finally:
        sys.path.remove(str(INPUTS))
        for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
            del sys.modules[name]
    assert result.parseoutcomes().get("failed") == 1
    assert (
        "reads its config from one dict per mode: the test needs `prefill_model_config`"
        in result.stdout.str()
    )


def test_trace_deps_takes_the_config_dicts_llm_mode_as_the_mode():
    """trace-deps classifies both tests of the entry as ``mode`` branches with the mode facts (they were
    ``unknown``: the key has no definition in the package's model_config.py)."""
    from tttv2_tools.trace_dependencies import analyze

    analysis = analyze(INPUTS / PACKAGE / "dict_mode_mlp.py", INPUTS / PACKAGE / "model_config.py")
    assert [(b.loc.split(":")[1], b.classification) for b in analysis.branches] == [
        ("26", "mode"),
        ("28", "mode"),
    ]


# ------------------------------------------------------------------------------------------ a setter that rebuilds
_rpm = InputPackage("rpm").tttv1


@pytest.fixture
def rpm_importable():
    sys.path.insert(0, str(INPUTS))
    yield
    sys.path.remove(str(INPUTS))
    for name in [n for n in sys.modules if n.split(".")[0] == "rpm"]:
        del sys.modules[name]


def test_a_setter_that_rebuilds_a_buffer_is_run_again_per_mode(rpm_importable, tmp_path):
    """Falcon-40B's ``set_model_config`` also runs ``self._allocate_output_tensors()`` (a method ``__init__``
    calls): from_model_args runs it again when it sets a mode's dict that the state was not built from, and the
    prefill dict (the mode that reads the buffer) is set last. It was a gap ("what that rebuilds for the new dict
    is built once"). Bit for bit against TTTv1 switched by ``set_model_config``, built with either dict."""
    import torch

    result = generate(INPUTS / "rpm" / "buffered_mlp.py")
    assert result.gaps == [], [g.describe() for g in result.gaps]
    code = result.modules[0].code
    assert "if legacy.model_config is not built_from:" in code and "_allocate_output_tensors()" in code
    generated = generated_class(result, "1d", tmp_path)
    get_model_config, mlp = _rpm("model_config", "get_model_config"), _rpm("buffered_mlp", "TtBufferedMLP")
    torch.manual_seed(0)
    state_dict = {"m.1.mlp.ff1.weight": torch.randn(64, 64) * 0.1}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        configs = {m: get_model_config("BFLOAT16-DRAM", m, 128, shape[1]) for m in ("decode", "prefill")}
        for built_with, other in (("decode", "prefill"), ("prefill", "decode")):
            old = mlp(mesh, state_dict, "m", 1, 64, configs[built_with])
            given = {f"{other}_model_config": configs[other]}
            new = generated.from_model_args(mesh, state_dict, "m", 1, 64, configs[built_with], **given)
            for mode, rows in (("decode", 32), ("prefill", 128), ("decode", 32), ("prefill", 128)):
                old.set_model_config(configs[mode])
                expected = old(replicated(input_rows(rows), mesh), mode)
                got = new(replicated(input_rows(rows), mesh), mode)
                assert_identical(expected, got, f"{shape} built with {built_with}, {mode}")
        ttnn.close_mesh_device(mesh)


def test_a_rebuilt_attribute_both_modes_read_stays_a_gap(tmp_path):
    """One generated module holds one such state: when decode reads the rebuilt buffer too, a gap names it."""
    (tmp_path / "model_config.py").write_text((INPUTS / "rpm" / "model_config.py").read_text())
    text = (INPUTS / "rpm" / "buffered_mlp.py").read_text()
    both = text.replace(
        'return ttnn.to_memory_config(h, self.model_config["OUTPUT_MEMCFG"])',
        'return ttnn.to_memory_config(ttnn.add(h, self.output), self.model_config["OUTPUT_MEMCFG"])',
    )
    assert both != text
    (tmp_path / "buffered_mlp.py").write_text(both)
    gaps = generate(tmp_path / "buffered_mlp.py").gaps
    assert [g.what for g in gaps] == ["TtBufferedMLP dict setter"]
    assert "rebuilds self.output (by _allocate_output_tensors), and both modes read it" in gaps[0].reason


def _rpm_tests(tmp_path, capsys) -> tuple[Path, Path, str]:
    """tttv2-refactor on ``rpm/buffered_mlp.py`` with ``--tests-out`` and ``rpm/tests/conftest.py``: (the generated
    module, its generated test, the CLI's stderr)."""
    from tttv2_tools.refactor.cli import main

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((INPUTS / "rpm" / "tests" / "conftest.py").read_text())
    argv = [
        str(INPUTS / "rpm" / "buffered_mlp.py"),
        "--out",
        str(tmp_path / "out"),
        "--tests-out",
        str(tests),
    ]
    assert main(argv) == 0
    return tmp_path / "out" / "buffered_mlp_1d.py", tests / "test_buffered_mlp_1d.py", capsys.readouterr().err


def test_the_generated_tests_of_a_falcon_style_module_switch_tttv1_by_its_setter(
    rpm_importable, tmp_path, capsys
):
    """Falcon-40B style (the forward takes ``llm_mode``, one dict per mode, ``set_model_config`` switches them):
    the generated test passes ``setter=`` too, so TTTv1 runs each mode with that mode's dict and the twin is built
    with both; every case of the default matrix, decode and prefill, equals TTTv1 (without the setter, on the
    construction dict only, no case did: 0 of 4 equal, 5 not compared)."""
    _module, test, err = _rpm_tests(tmp_path, capsys)
    assert "shadow verification: 9 of 9 case(s) equal to TTTv1" in err, err
    assert 'mode, recorded, setter="set_model_config")' in test.read_text()


def test_a_falcon_style_generated_test_fails_when_the_prefill_value_is_wrong(
    rpm_importable, tmp_path, capsys, pytester, monkeypatch
):
    """The generated module's prefill field given the decode dict's value (L1 where the prefill dict says DRAM):
    the generated tests fail on every prefill case and pass on every decode one, so they do compare each mode
    with its own dict. (In a subprocess: a second in-process run of generated tests in one process has crashed.)"""
    module, test, _err = _rpm_tests(tmp_path, capsys)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(INPUTS), os.environ.get("PYTHONPATH")]))
    )
    text = module.read_text()
    wrong = text.replace(
        'prefill_output_memcfg=legacy.model_config["OUTPUT_MEMCFG"]',
        "prefill_output_memcfg=ttnn.L1_MEMORY_CONFIG",
    )
    assert wrong != text
    module.write_text(wrong)
    result = pytester.runpytest_subprocess(str(test), "-q", "-p", "no:cacheprovider", "-k", "matches_tttv1")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("failed"), outcomes.get("passed")) == (5, 4), result.stdout.str()
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert len(failed) == 5 and all("-prefill-" in line for line in failed), failed
