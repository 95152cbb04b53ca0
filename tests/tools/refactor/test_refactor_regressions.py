"""Regressions from the held-out review of tttv2-refactor: each input (``inputs/``) once gave a silently wrong
module or report. Now the output is equivalent (bit-exact against TTTv1 on the emulator) or the spot is reported
as not transformed (a gap: exit 1)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from tests.tools.refactor.conftest import (
    InputPackage,
    assert_identical,
    importable_inputs,
    load_generated,
    replicated,
)
from tests.tools.refactor.conftest import generated_class as _generated_class
from tests.tools.refactor.conftest import input_rows as _rows
from tttv2 import ttnn
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.errors import UsageError
from tttv2_tools.refactor.fstrings import compatible_fstring
from tttv2_tools.refactor.report import build_report

INPUTS = Path(__file__).parent / "inputs"


inputs_importable = importable_inputs("rfx", "rfx_fn")


#: A class of the TTTv1 inputs by name (they are test inputs on ``sys.path``, not a distribution).
_tttv1 = InputPackage("rfx").tttv1


# ------------------------------------------------------------------------------------------ F12: report fates
@pytest.fixture(scope="module")
def fates():
    result = generate(INPUTS / "rfx" / "fates.py")
    report = build_report(
        result, ["fates_1d.py", "fates_2d.py"], [], {"1d": "fates_1d.py", "2d": "fates_2d.py"}
    )
    return [(b.test, {(f.topology, f.mode): f for f in b.fates}) for b in report.branches]


def _fates_of(fates, test: str) -> list[dict]:
    return [by_path for branch_test, by_path in fates if branch_test == test]


def test_a_branch_in_the_kept_arm_is_followed(fates):
    """The first statement of the arm a mode test keeps is runtime there (it was reported removed)."""
    (nested,) = _fates_of(fates, "x.shape[-2] > 32")
    for topology in ("1d", "2d"):
        assert nested[(topology, "prefill")].kind == "runtime"
        assert nested[(topology, "prefill")].new_loc.startswith(f"fates_{topology}.py:")
        removed = nested[(topology, "decode")]
        assert removed.kind == "removed" and 'else arm of `mode == "decode"`' in removed.detail


def test_a_value_nested_in_a_decided_choice_is_followed(fates):
    """``scale = 4.0 if galaxy else (2.0 if dim >= 64 else 1.0)``: the inner choice moves to construction on 1D
    (a static statement), and is removed on 2D with the test that removed it."""
    (inner,) = _fates_of(fates, "self.dim >= 64")
    assert {inner[("1d", m)].kind for m in ("decode", "prefill")} == {"construction"}
    for mode in ("decode", "prefill"):
        assert inner[("2d", mode)].kind == "removed"
        assert "else arm of `self.args.is_galaxy`" in inner[("2d", mode)].detail


def test_a_decided_branch_in_a_dropped_arm_is_removed(fates):
    """A mode test under ``if galaxy``: decided on 2D; on 1D its code is gone with the arm (it said decided)."""
    (inner,) = _fates_of(fates, 'mode == "decode"')[1:]
    assert {inner[("2d", m)].kind for m in ("decode", "prefill")} == {"decided"}
    for mode in ("decode", "prefill"):
        assert inner[("1d", mode)].kind == "removed"
        assert "then arm of `self.args.is_galaxy`" in inner[("1d", mode)].detail


def test_match_cases_are_followed(fates):
    """Both cases of a match on the input shape are kept at run time (they were reported removed)."""
    cases = _fates_of(fates, "x.shape[-1]")
    assert len(cases) == 2
    for by_path in cases:
        assert {f.kind for f in by_path.values()} == {"runtime"} and all(f.new_loc for f in by_path.values())


def test_removed_always_says_why(fates):
    for _, by_path in fates:
        for fate in by_path.values():
            assert fate.kind != "removed" or fate.detail.startswith("does not run: "), fate


# ------------------------------------------------------------------------------------------ F2, F7, F8, F9
@pytest.fixture(scope="module")
def mixed():
    result = generate(INPUTS / "rfx" / "mixed.py")
    assert result.gaps == []
    return result.modules[0].code


def test_mixed_module_is_bit_exact(mixed, tmp_path):
    """llm_mode (F8), a helper given another mode than the caller's (F2), the mode in an f-string (F7) and a
    static local on a ``;`` line (F9): TTTv1 and the generated module agree on every device."""
    (tmp_path / "mixed_1d.py").write_text(mixed)
    generated = load_generated(str(tmp_path / "test.py"), "mixed_1d.py", "Mixed1D")
    ModelArgs = _tttv1("model_config", "ModelArgs")
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = ModelArgs(mesh)
        old, new = _tttv1("mixed", "Mixed")(mesh, args), generated.from_model_args(mesh, args)
        for mode, rows in (("decode", 32), ("prefill", 32), ("prefill", 64)):
            expected = old.forward(replicated(_rows(rows), mesh), mode)
            assert_identical(
                expected, new.forward(replicated(_rows(rows), mesh), llm_mode=mode), f"{shape} {mode}"
            )
            assert_identical(expected, new(replicated(_rows(rows), mesh), mode), f"{shape} {mode} call")
        ttnn.close_mesh_device(mesh)


def test_a_helper_copy_is_specialised_for_the_mode_it_is_given(mixed):
    """decode passes "prefill" to the helper: both modes run the prefill scaling, and no copy of the decode one
    is made (prefill used to reuse decode's copy)."""
    code = mixed
    assert "ttnn.mul(x, 4.0)" in code and "ttnn.mul(x, 2.0)" not in code


def test_a_mode_put_into_an_fstring_compiles_on_310(mixed):
    code = mixed
    # the f-string's mode became a literal ("decode_out"), which then decided ``tag == "decode_out"`` per mode
    assert 'f"{' not in code and "tag" not in code.split("def forward(")[1].split("# decode: if")[0]
    assert 'if self.config.label == "mode decode"' in code and '"prefill_out" ==' not in code
    assert 'label = "mode " + "decode"' in code and "str(" not in code  # ruff UP018 otherwise


def test_a_match_on_the_mode_keeps_the_case_that_runs(mixed):
    code = mixed
    assert "match " not in code and "ttnn.add(x, 0.25)" in code and "ttnn.add(x, 0.75)" in code


def test_the_dispatcher_uses_tttv1s_mode_parameter(mixed):
    code = mixed
    # TTTv1's annotation of the mode may name a TTTv1 type (Mode): the dispatcher takes either spelling, unannotated
    assert "def forward(self, x, llm_mode):" in code and 'llm_mode = mode_name("Mixed1D", llm_mode)' in code
    assert 'if llm_mode == "decode":' in code


def test_a_static_local_on_a_compound_line_moves_with_its_use(mixed):
    code = mixed
    forwards = code.partition("def decode_forward")[2]
    # the literal reaches its use (``if u == "a"``), which is then decided: nothing of it is left to run
    assert 'u = "a"' not in forwards and 'u == "a"' not in code.split("# decode: if")[-1]
    assert "big = rows >= self.config.big" in forwards


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            'f"{x}_out"',
            '"decode_out"',
        ),  # the string alone in a field: literal text; nothing left: a plain string
        ('f"{x}{y}"', 'f"{{{y}"'),  # braces of the text are doubled while a field is left
        ('f"{d[x]}"', "f\"{d['decode']}\""),  # deeper in a field: the other quote
        ("f'{x!r}'", "f'{x!r}'"),  # a conversion keeps the field (the quotes already differ)
    ],
)
def test_compatible_fstring(source, expected):
    node = cst.parse_expression(source)
    value = '"{"' if "{y}" in source else '"decode"'

    class _Put(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            return cst.SimpleString(value) if updated_node.value == "x" else updated_node

    put = node.visit(_Put())
    out = cst.Module([]).code_for_node(compatible_fstring(put))
    assert out == (expected if "!r" not in source else "f'{\"decode\"!r}'")
    compile(out, "<f-string>", "eval")


# ------------------------------------------------------------------------------------------ F3: TG=
def test_a_galaxy_flag_next_to_the_mesh_is_checked(tmp_path):
    result = generate(INPUTS / "rfx" / "flagged.py")
    assert [g.topology for g in result.modules] == ["1d", "2d"] and result.gaps == []
    ModelArgs = _tttv1("model_config", "ModelArgs")
    flagged = _tttv1("flagged", "Flagged")
    for topology, shape, right in (("1d", (1, 2), False), ("2d", (8, 4), True)):
        generated = _generated_class(result, topology, tmp_path)
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = ModelArgs(mesh)
        with pytest.raises(ValueError, match=f"TG is {not right}"):
            generated.from_model_args(mesh, args, TG=not right)
        new, old = generated.from_model_args(mesh, args, TG=right), flagged(mesh, args, TG=right)
        x = _rows(32)
        assert_identical(
            old.forward(replicated(x, mesh), "decode"), new.forward(replicated(x, mesh), "decode")
        )
        ttnn.close_mesh_device(mesh)
    with pytest.raises(ValueError, match="TG is False"):  # TTTv1's default on a galaxy runs the 1D code
        _generated_class(result, "2d", tmp_path).from_model_args(
            ttnn.open_mesh_device(ttnn.MeshShape(8, 4)), args
        )


# ------------------------------------------------------------------------------------------ gaps: F4, F5, F6
def test_a_call_that_differs_from_forward_is_a_gap():
    gaps = generate(INPUTS / "rfx" / "called.py", class_name="Called").gaps
    assert len(gaps) == 1 and gaps[0].what == "Called.__call__" and gaps[0].loc == "called.py:13"
    assert generate(INPUTS / "rfx" / "called.py", class_name="Delegating").gaps == []


def test_a_config_read_inside_try_is_a_gap():
    gaps = generate(INPUTS / "rfx" / "optional.py").gaps
    assert [(g.loc, g.what) for g in gaps] == [
        ("optional.py:13", 'self.model_config["OPTIONAL_SHIFT"]'),
        ("optional.py:15", 'self.model_config["FALLBACK_SCALE"]'),
    ]
    assert all("try/except" in g.reason for g in gaps)


def test_a_config_built_per_mode_is_read_per_mode():
    """Was one gap per key; now each mode's fields read that mode's dict (test_refactor_permode.py)."""
    result = generate(INPUTS / "rfx_fn" / "ffn.py")
    assert result.gaps == []
    assert "*, decode_model_config=None, prefill_model_config=None" in result.modules[0].code


# ------------------------------------------------------------------------------------------ F16
def test_a_syntax_error_is_placed_where_python_places_it(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("class A:\n    def forward(self, x, mode)\n        return x\n")
    with pytest.raises(UsageError, match=r"broken.py:2:31: does not parse: expected ':'$"):
        generate(broken)


# ------------------------------------------------------------------------------------------ a local set in both arms
def test_a_local_set_in_both_arms_of_a_runtime_if_stays_a_local(tmp_path):
    """``step`` takes ``dim * 2`` or ``dim - 1`` by a run-time test: each value is a field and ``step`` stays a
    local. It was one field ``step=step`` (a ``NameError`` in ``from_model_args``)."""
    result = generate(INPUTS / "rfx" / "arms.py")
    assert result.gaps == []
    generated = _generated_class(result, "1d", tmp_path)
    ModelArgs = _tttv1("model_config", "ModelArgs")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    args = ModelArgs(mesh)
    old, new = _tttv1("arms", "Arms")(mesh, args), generated.from_model_args(mesh, args)
    for mode, rows in (("decode", 32), ("prefill", 32), ("prefill", 64)):
        expected = old.forward(replicated(_rows(rows), mesh), mode)
        assert_identical(expected, new.forward(replicated(_rows(rows), mesh), mode), f"{mode} {rows}")
    ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ R33, R30 (review 2)
def test_a_nested_mode_given_something_else_than_the_callers_mode_is_a_gap():
    """``inner(t, mode="prefill")`` and ``pick("prefill")`` were decided as the caller's mode (all cases wrong);
    ``passed_on(t, mode)``, given the caller's mode as TTTv1's attention does, is not a gap."""
    gaps = generate(INPUTS / "rfx" / "shadowed.py", class_name="Shadowed").gaps
    lines = sorted(int(g.loc.rsplit(":", 1)[1]) for g in gaps)
    assert lines == [19, 25], gaps
    assert all("its own parameter mode" in g.what for g in gaps)


def test_a_mode_compared_as_a_string_and_as_an_enum_member_is_a_gap():
    """``mode == "decode"`` and ``mode == Mode.DECODE`` were one fact: decode ran both arms."""
    (gap,) = generate(INPUTS / "rfx" / "shadowed.py", class_name="Spelled").gaps
    assert "a string and with an enum member" in gap.what and gap.loc.endswith(":35")
