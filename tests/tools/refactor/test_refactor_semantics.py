"""Regressions from the second held-out review of tttv2-refactor (R-ids of review 2): inputs whose generated module
used to be wrong or impossible to construct while the run said "everything was transformed". Each is now
bit-exact against TTTv1 on the emulator, or reported as not transformed (a gap)."""

from __future__ import annotations

from pathlib import Path

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
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.errors import UsageError
from tttv2_tools.refactor.report import build_report

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rsem"


inputs_importable = importable_inputs(PACKAGE)

_inputs = InputPackage(PACKAGE)
_generate = _inputs.generate
_tttv1 = _inputs.tttv1


def _outcome(call, *args):
    try:
        return call(*args)
    except Exception as exc:  # TTTv1's refusals are part of its behaviour
        return exc


def _same(expected, got, what: str) -> None:
    if isinstance(expected, Exception):
        assert type(got) is type(expected) and str(got) == str(expected), f"{what}: {got!r} vs {expected!r}"
    else:
        assert_identical(expected, got, what)


def _equivalent(module: str, class_name: str, folder: Path, calls=(("decode", 32), ("prefill", 64))) -> None:
    """TTTv1's class and the generated one on 1x2 (1D) and 8x4 (2D, or the one module when there is no 2D),
    called in order on one instance each: the same outputs, or the same exception."""
    result = _generate(module, class_name)
    assert result.gaps == [], [g.describe() for g in result.gaps]
    ModelArgs = _tttv1("model_config", "ModelArgs")
    topologies = {g.topology for g in result.modules}
    for shape in ((1, 2), (8, 4)):
        topology = "2d" if shape == (8, 4) and "2d" in topologies else "1d"
        generated = generated_class(result, topology, folder)
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = ModelArgs(mesh)
        old, new = _tttv1(module, class_name)(mesh, args), generated.from_model_args(mesh, args)
        for mode, rows in calls:
            expected = _outcome(old.forward, replicated(input_rows(rows), mesh), mode)
            got = _outcome(new.forward, replicated(input_rows(rows), mesh), mode)
            _same(expected, got, f"{class_name} {shape} {mode} {rows}")
        ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ R3 / R20
def test_class_constants_properties_and_classmethods_are_exact(tmp_path):
    """Class constants (one computed from another), a property of the config and a classmethod reading
    ``cls.OFFSET``: construction used to fail (a namespace has no class attributes)."""
    _equivalent("members", "Members", tmp_path)


def test_class_constants_are_carried_into_the_generated_class():
    code = "".join(g.code for g in _generate("members", "Members").modules)
    assert "    DECODE_GAIN = 2.0\n" in code and "    OFFSET = DECODE_GAIN + 1.0\n" in code
    assert "legacy.gain" not in code and 'legacy.model_config["GAIN"] * 2' in code  # the property, evaluated


# ------------------------------------------------------------------------------------------ R25 / R25b
@pytest.mark.parametrize("class_name", ["Chosen", "Picked", "Dispatched"])
def test_a_method_chosen_by_a_static_test_is_called_as_a_method(class_name, tmp_path):
    """``self.impl = self._galaxy if args.is_galaxy else self._flat`` in __init__, ``fn = self._galaxy if galaxy
    else self._flat; fn(x)`` and ``{"decode": self._decode, …}[mode](x)`` in forward: the choice is decided per
    topology / mode and the chosen method copied (construction used to fail)."""
    _equivalent("methvals", class_name, tmp_path)


def test_a_method_used_as_a_value_is_the_generated_class_own_method(tmp_path):
    """A method passed on as a value (here: stored in a list) stays ``self._flat``, a method the generated class
    has (its copy), never a config field computed from TTTv1's object (it used to be a gap)."""
    _equivalent("methvals", "Passed", tmp_path)
    code = _generate("methvals", "Passed").modules[0].code
    assert "steps = [self._flat]" in code and "def _flat(self, x):" in code


# ------------------------------------------------------------------------------------------ R24
def test_a_key_read_only_under_a_test_is_read_under_it(tmp_path):
    """``WIDE_GAIN`` exists only on galaxy: TTTv1 reads it under ``x.shape[-2] > 1024`` and after an ``in``
    test. The 1D module used to fail at construction (KeyError), the ``in`` test to read ``self.model_config``
    on the generated module."""
    _equivalent("lazykey", "LazyKey", tmp_path)
    code = _generate("lazykey", "LazyKey").modules[0].code
    assert 'legacy.model_config["WIDE_GAIN"] if "WIDE_GAIN" in legacy.model_config else None' in code
    # the `in` test is a field (its name is the naming pass's business), never a read of self.model_config
    assert '="WIDE_GAIN" in legacy.model_config,' in code and " in self.model_config else" not in code


# ------------------------------------------------------------------------------------------ R23 / R8
def test_a_list_forward_grows_is_built_per_call(tmp_path):
    """Prefill appends to a list built from the config: the second prefill call used to see the first's tile."""
    _equivalent("mutables", "Grown", tmp_path, calls=(("prefill", 64), ("prefill", 64), ("decode", 32)))


def test_module_state_changed_through_an_alias_is_instance_state(tmp_path):
    """A dict ``__init__`` starts with a literal and prefill changes through an alias: the generated module's own
    per-instance state (a fresh dict per instance, instate.py), so each call sees what the calls before it left."""
    calls = (("prefill", 64), ("prefill", 64), ("decode", 32), ("prefill", 64))
    _equivalent("mutables", "Aliased", tmp_path, calls=calls)


def test_module_state_started_from_the_config_and_changed_in_place_is_a_gap(tmp_path):
    """Started from ModelArgs, the dict would be a config field shared by every module built from that config:
    changed in place, it stays a gap."""
    source = (INPUTS / "rsem" / "mutables.py").read_text()
    changed = tmp_path / "mutables.py"
    changed.write_text(source.replace('self.opts = {"scale": 2.0}', 'self.opts = {"scale": args.dim / 32}'))
    gaps = generate(changed, class_name="Aliased").gaps
    assert [(g.loc, g.what, g.reason) for g in gaps] == [
        ("mutables.py:24", "self.opts", "forward changes module state")
    ]


# ------------------------------------------------------------------------------------------ R17 / R18
def test_a_refusal_stays_a_refusal(tmp_path):
    """On galaxy TTTv1 asserts in prefill and raises in decode: the 2D module raises the same, from
    ``decode_forward(x)`` / ``prefill_forward(x)`` (the assert used to vanish, decode to lose ``x``)."""
    _equivalent("refusal", "Refusal", tmp_path)
    result = _generate("refusal", "Refusal")
    two_d = next(g for g in result.modules if g.topology == "2d").code
    assert "def decode_forward(self, x):" in two_d and "def prefill_forward(self, x):" in two_d
    report = build_report(result, [], [], {"1d": "refusal_1d.py", "2d": "refusal_2d.py"})
    (assert_row,) = [b for b in report.branches if b.construct == "assert"]
    fate = next(f for f in assert_row.fates if (f.topology, f.mode) == ("2d", "prefill"))
    assert fate.kind == "decided" and "fails (assert False) in prefill_forward" in fate.detail


OPTIMIZED_RUN = """
import importlib.util
import sys

import numpy as np

from tttv2 import ttnn
from rsem.model_config import ModelArgs
from rsem.refusal import Refusal

spec = importlib.util.spec_from_file_location("refusal_2d", sys.argv[1])
module = sys.modules["refusal_2d"] = importlib.util.module_from_spec(spec)  # its dataclasses read it there
spec.loader.exec_module(module)
mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))
args = ModelArgs(mesh)
old, new = Refusal(mesh, args), module.Refusal2D.from_model_args(mesh, args)
x = np.ones((1, 1, 32, 64), np.float32)
for what, block in (("tttv1", old), ("generated", new)):
    xt = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh,
                         mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))
    try:
        out = block.forward(xt, "prefill")
        print(what, "returned", float(ttnn.to_numpy(ttnn.get_device_tensors(out)[0]).flat[0]))
    except AssertionError as exc:
        print(what, "AssertionError", exc)
"""


@pytest.mark.parametrize("optimize", [False, True])
def test_a_refusal_is_an_assert_with_or_without_python_dash_o(tmp_path, optimize):
    """TTTv1 refuses prefill on galaxy with ``assert not self.args.is_galaxy``; the 2D module keeps it an assert
    (``assert False, …``) with the code after it. Plain: both fail with TTTv1's message; under ``python -O``
    TTTv1's assert is stripped and prefill returns ``x + 1``, and so does the generated module (a ``raise
    AssertionError`` would still refuse)."""
    import os
    import subprocess
    import sys

    result = _generate("refusal", "Refusal")
    two_d = next(g for g in result.modules if g.topology == "2d")
    assert 'assert False, "prefill is not supported on galaxy"' in two_d.code
    assert "AssertionError" not in two_d.code
    (tmp_path / "refusal_2d.py").write_text(two_d.code)
    (tmp_path / "run.py").write_text(OPTIMIZED_RUN)
    flags = ["-O"] if optimize else []
    root = Path(__file__).resolve().parents[3]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(INPUTS), str(root), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, *flags, str(tmp_path / "run.py"), str(tmp_path / "refusal_2d.py")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    if optimize:
        assert run.stdout.splitlines() == ["tttv1 returned 2.0", "generated returned 2.0"], run.stdout
    else:
        refused = "AssertionError prefill is not supported on galaxy"
        assert run.stdout.splitlines() == [f"tttv1 {refused}", f"generated {refused}"], run.stdout


def test_the_report_names_only_functions_that_exist():
    """A construction fate names a function of the generated from_model_args."""
    for module, class_name in (("members", "Members"), ("refusal", "Refusal"), ("lazykey", "LazyKey")):
        result = _generate(module, class_name)
        names = {g.topology: g.file_name for g in result.modules}
        codes = {g.file_name: g.code for g in result.modules}
        for branch in build_report(result, [], [], names).branches:
            for fate in branch.fates:
                if fate.kind == "construction" and fate.detail.endswith("in from_model_args"):
                    function = fate.detail.split("(", 1)[0]
                    assert f"def {function}(" in codes[names[fate.topology]], fate


# ------------------------------------------------------------------------------------------ R6 / R7
def test_a_default_class_without_init_is_a_usage_error():
    with pytest.raises(
        UsageError,
        match=r"based.py:6: class _Base has no __init__ of its own .* name the class TTTv1 callers build \(MODULE:CLASS\)",
    ):
        generate(INPUTS / PACKAGE / "based.py")


def test_an_inherited_forward_is_named():
    with pytest.raises(
        UsageError,
        match=r"class Child has no forward\(\) of its own: it inherits forward\(\) from _Base \(based.py:7\)",
    ):
        generate(INPUTS / PACKAGE / "based.py", class_name="Child")


# ------------------------------------------------------------------------------------------ R2 / R19 / R5
def test_a_decorated_forward_or_helper_is_a_gap():
    gaps = _generate("decorated", "Decorated").gaps
    assert [(g.loc, g.what) for g in gaps] == [
        ("decorated.py:24", "@doubled on Decorated._scale"),
        ("decorated.py:28", "@plus_one on Decorated.forward"),
    ]


def test_a_super_call_in_forward_runs_the_bases_method(tmp_path):
    """``super().forward(x, mode)`` into a base of the same file: the base's forward is copied per mode (it was a
    gap, "super() is TTModule"), and the result equals TTTv1's."""
    code = _generate("supered", "Extended").modules[0].code
    assert "super()" not in code.split("def load_device_weights")[1]
    assert "def _forward(self, x):\n        return ttnn.mul(x, 2.0)" in code
    _equivalent("supered", "Extended", tmp_path)
    assert _generate("supered", "Plain").gaps == []


def test_a_global_a_setter_changes_is_a_gap():
    gaps = _generate("globalled", "Globalled").gaps
    assert [(g.loc, g.what) for g in gaps] == [("globalled.py:18", "FAST")]
    assert "`global FAST` changes in set_fast()" in gaps[0].reason
    # `global LIMIT` without an assignment changes nothing
    assert _generate("globalled", "Declared").gaps == []


# ------------------------------------------------------------------------------------------ R9
def test_a_relative_import_becomes_absolute(tmp_path):
    """The generated module lives outside the TTTv1 package: ``from .scales import …`` there used to fail."""
    code = _generate("sibling", "Sibling").modules[0].code
    assert "from .scales" not in code and "from rsem.scales import links_for" in code
    _equivalent("sibling", "Sibling", tmp_path, calls=(("decode", 32),))


# ------------------------------------------------------------------------------------------ R41 / R43 / R44
def test_an_early_return_in_init_stays_inside_init(tmp_path):
    """An early ``return`` in ``__init__`` (it runs as a nested ``_tttv1_init``) and the member checks together."""
    _equivalent("construction", "EarlyReturn", tmp_path, calls=(("decode", 32),))


def test_a_constructor_default_from_a_module_constant_is_a_gap():
    gaps = _generate("construction", "ModuleDefault").gaps
    assert [(g.what, g.reason) for g in gaps] == [
        ("bias=BIAS", "a constructor default that reads BIAS, which the generated module does not define")
    ]


def test_a_constructor_default_from_a_class_constant_is_carried(tmp_path):
    _equivalent("construction", "ClassDefault", tmp_path, calls=(("decode", 32),))


def test_an_attribute_the_base_init_sets_is_computed_as_tttv1_does(tmp_path):
    """``super().__init__`` is followed (it used to be a gap, "does not set it (set by a base class…"):
    from_model_args runs the base's __init__ on an uninitialised instance, and ``self.eps`` is its value."""
    code = _generate("construction", "Scaled").modules[0].code
    assert "super(Scaled, legacy).__init__(mesh_device, args)" in code
    _equivalent("construction", "Scaled", tmp_path, calls=(("decode", 32), ("prefill", 64)))


# ------------------------------------------------------------------------------------------ R32
def test_a_parameter_shadowing_a_static_local_is_not_a_field(tmp_path):
    """``def g(t, scale=0.25)`` inside forward reads its own ``scale``, not the outer static local's field."""
    _equivalent("shadowed", "Shadowed", tmp_path, calls=(("decode", 32),))
    code = _generate("shadowed", "Shadowed").modules[0].code
    assert "ttnn.mul(t, scale * 2.0)" in code and "ttnn.add(t, scale)" in code


def test_class_members_that_cannot_be_rebuilt_are_gaps():
    gaps = {g.what: g.reason for g in _generate("odd", "Odd").gaps}
    assert set(gaps) == {"self.twice", "self.FROM_MODULE"}
    assert "more than one statement" in gaps["self.twice"]
    assert "computed from BASE" in gaps["self.FROM_MODULE"]


def test_an_assert_false_line_says_why_ruff_should_keep_it():
    """B011 (``assert False``) is what keeps ``python -O`` parity: the line says so, after a comment already
    there; a line with its own ``noqa`` is left as it is."""
    import libcst as cst

    from tttv2_tools.refactor.cleanup import B011_REASON, lint_after_specialising

    source = (
        "def f(x):\n"
        "    assert False, 'no'\n"
        "    assert False  # removed upstream\n"
        "    assert False  # noqa: B011 (as tt-metal)\n"
        "    assert x\n"
    )
    lines = lint_after_specialising(cst.parse_module(source)).code.splitlines()
    assert lines[1] == f"    assert False, 'no'  # noqa: B011 {B011_REASON}"
    assert lines[2] == f"    assert False  # removed upstream  # noqa: B011 {B011_REASON}"
    assert lines[3:] == ["    assert False  # noqa: B011 (as tt-metal)", "    assert x"]
