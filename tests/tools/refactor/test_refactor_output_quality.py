"""The codemod's output reads well: ruff-clean after specialising (B007, SIM105), config fields named after what
they hold, and ``--partial`` markers at the statements that were not transformed. Inputs: ``inputs/rfx``."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import textwrap
from pathlib import Path

import libcst as cst
import numpy as np
import pytest

from tests.tools.refactor.conftest import assert_identical, importable_inputs, load_generated, replicated
from tttv2 import ttnn
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.cleanup import B007_REASON, SIM105_REASON, lint_after_specialising
from tttv2_tools.refactor.cli import main
from tttv2_tools.refactor.errors import MARKER
from tttv2_tools.refactor.markers import mark_gaps
from tttv2_tools.refactor.naming import context_name, expression_name
from tttv2_tools.refactor.track import is_expression
from tttv2_tools.refactor.walk import children

INPUTS = Path(__file__).parent / "inputs"
ROOT = Path(__file__).resolve().parents[3]
#: The review's shapes that generate without gaps (one module each; 1D and 2D where the module has galaxy code).
CLEAN = ("lint", "names", "mixed", "fates", "flagged")


inputs_importable = importable_inputs("rfx")


@pytest.fixture(scope="module")
def results():
    return {name: generate(INPUTS / "rfx" / f"{name}.py") for name in CLEAN}


def _ruff(paths: list[Path], *select: str) -> subprocess.CompletedProcess:
    ruff = shutil.which("ruff")
    assert ruff is not None, "ruff is a test dependency"
    extra = ["--isolated", "--select", ",".join(select)] if select else []
    return subprocess.run(
        [ruff, "check", "--no-cache", "--output-format", "concise", *extra, *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


def _method(code: str, name: str) -> str:
    return code.split(f"    def {name}(", 1)[1].split("\n    def ", 1)[0]


# ------------------------------------------------------------------------------------------ F14: ruff-clean
def test_the_review_shapes_are_ruff_clean(results, tmp_path):
    """Under the project's rules (B007 and SIM105 included), like the eight TTTv1 modules."""
    paths = []
    for result in results.values():
        assert result.gaps == []
        for generated in result.modules:
            (tmp_path / generated.file_name).write_text(generated.code)
            paths.append(tmp_path / generated.file_name)
    assert len(paths) == 9
    done = _ruff(paths)
    assert done.returncode == 0, done.stdout + done.stderr


def test_loop_variables_and_emptied_handlers(results):
    one_d, two_d = (g.code for g in results["lint"].modules)
    decode = _method(one_d, "decode_forward")
    # only the decided galaxy test read i: renamed, nothing else reads it
    assert "for _i, scale in enumerate((1.5, 0.5)):" in decode and "i == 0" not in decode
    # j is read after the loop: it keeps its name, and the header says why
    assert f"for j, shift in enumerate((0.25, 0.75)):  # noqa: B007 {B007_REASON}" in decode
    assert f"try:  # noqa: SIM105 {SIM105_REASON}" in decode and "pass" in decode
    # on 2D the galaxy code runs: the same loops and handler as TTTv1 wrote them, no noqa
    two_decode = _method(two_d, "decode_forward")
    assert "for i, scale in" in two_decode and "i == 0" in two_decode and "noqa" not in two_decode


@pytest.mark.parametrize(("name", "klass"), [("lint", "Lint"), ("names", "Names")])
def test_bit_exact_against_tttv1(results, tmp_path, name, klass):
    """Renaming, noqa comments and field names change nothing: both topologies, both modes, and rows that take
    both sides of the handler (scales[64])."""
    result = results[name]
    ModelArgs = importlib.import_module("rfx.model_config").ModelArgs
    tttv1 = getattr(importlib.import_module(f"rfx.{name}"), klass)
    for generated, shape in zip(result.modules, ((1, 2), (8, 4)), strict=True):
        (tmp_path / generated.file_name).write_text(generated.code)
        new_class = load_generated(str(tmp_path / "test.py"), generated.file_name, generated.class_name)
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = ModelArgs(mesh)
        old, new = tttv1(mesh, args), new_class.from_model_args(mesh, args)
        for mode, rows in (("decode", 32), ("prefill", 64)):
            x = np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)
            assert_identical(
                old.forward(replicated(x, mesh), mode), new.forward(replicated(x, mesh), mode), f"{shape}"
            )
        ttnn.close_mesh_device(mesh)


LINT_CASES = {
    # the variable nothing reads is renamed; a name already spelled in the function is not reused
    "renamed": (
        "def f(xs, _i):\n    for i, x in enumerate(xs):\n        print(x, _i)\n    return xs\n",
        "for _i_2, x in enumerate(xs):",
    ),
    # locals() / eval can read any local; nonlocal / global bind outside the function: no rename
    "locals": (
        "def f(xs):\n    for i in xs:\n        print(locals())\n",
        f"for i in xs:  # noqa: B007 {B007_REASON}",
    ),
    "nonlocal": (
        "def f(xs):\n    i = 0\n\n    def g():\n        nonlocal i\n        for i in xs:\n            pass\n\n"
        "    g()\n    return xs\n",
        f"for i in xs:  # noqa: B007 {B007_REASON}",
    ),
    "module level": ("for i in range(3):\n    pass\n", f"for i in range(3):  # noqa: B007 {B007_REASON}"),
    "class body": (
        "def f():\n    class A:\n        for i in range(3):\n            pass\n\n    return A\n",
        f"for i in range(3):  # noqa: B007 {B007_REASON}",
    ),
    # a comment already on the line stays first
    "comment": (
        "def f(d):\n    try:  # optional\n        d.pop('a')\n    except KeyError:\n        pass\n",
        f"try:  # optional  # noqa: SIM105 {SIM105_REASON}",
    ),
    # TTTv1's `a = 1; b = 2` line with its E702 exemption comes out one statement a line: E702 would be unused
    "semicolon": (
        "def f():\n    a = 1\n    b = 2  # noqa: E702  # fmt: skip\n    return a + b\n",
        "    b = 2  # fmt: skip\n",
    ),
    "semicolon alone": ("def f():\n    b = 2  # noqa: E702\n    return b\n", "    b = 2\n"),
    # a one-line body; a noqa already there is the author's
    "one line": (
        "def f(d):\n    try: d.pop('a')\n    except KeyError: pass\n",
        f"try: d.pop('a')  # noqa: SIM105 {SIM105_REASON}",
    ),
    "author's noqa": (
        "def f(d):\n    try:  # noqa: SIM105\n        d.pop('a')\n    except KeyError:\n        ...\n",
        "try:  # noqa: SIM105\n",
    ),
    # not SIM105 for ruff: two statements, an else, a return in the body; a used variable stays
    "untouched": (
        "def f(d, xs):\n    try:\n        d.pop('a')\n        d.pop('b')\n    except KeyError:\n        pass\n"
        "    try:\n        d.pop('a')\n    except KeyError:\n        pass\n    else:\n        print(d)\n"
        "    try:\n        return d['a']\n    except KeyError:\n        pass\n"
        "    for x in xs:\n        print(x)\n    return None\n",
        "for x in xs:\n",
    ),
}


def test_lint_after_specialising_agrees_with_ruff(tmp_path):
    """Each case comes out as expected, compiles, and ruff (B007, SIM105, and RUF100: no noqa ruff does not need)
    finds nothing in it."""
    paths = []
    for index, (source, expected) in enumerate(LINT_CASES.values()):
        out = lint_after_specialising(cst.parse_module(source)).code
        assert expected in out, out
        compile(out, "case", "exec")
        paths.append(tmp_path / f"case_{index}.py")
        paths[-1].write_text(out)
    done = _ruff(paths, "B007", "SIM105", "RUF100")
    assert done.returncode == 0, done.stdout
    assert "noqa" not in paths[-1].read_text()


def _context(source: str, text: str) -> tuple[str, bool]:
    """context_name of the first expression spelled ``text`` in the statement ``source``."""
    found: list = []

    def visit(node, stack):
        if not found and is_expression(node) and code_of(node) == text:
            found.append((node, list(stack)))
        for child in children(node):
            visit(child, [*stack, node])

    visit(cst.parse_statement(source), [])
    return context_name(*found[0])


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        ("y = a + b", "a + b", ("y", True)),  # the whole value of an assignment: the local
        ("y = f(a + b)", "a + b", ("a_plus_b", False)),  # a part of it: its own spelling
        ("a, b = c + d", "c + d", ("c_plus_d", False)),  # two targets: none of them
        (
            "out = ttnn.linear(x, w, memory_config=m if t else n)",
            "m if t else n",
            ("linear_memory_config", True),
        ),
        ("mm_kwargs = dict(dtype=a or b)", "a or b", ("mm_dtype", True)),
        ("f()(k=a and b)", "a and b", ("k", True)),
    ],
)
def test_context_name(source, text, expected):
    assert _context(source, text) == expected


# ------------------------------------------------------------------------------------------ F17: field names
def test_fields_are_named_after_what_they_hold(results):
    generated = results["names"].modules[0]
    names = {f.name: code_of(f.value) for f in generated.rendered.fields.fields}
    # ``links = 1`` (1D) and ``u = "a"`` are literals put in where they are read: ``float(1)`` needs no field,
    # ``u == "a"`` is decided (both used to be fields, links_float and u_is_a)
    assert "x = ttnn.mul(x, float(1))" in generated.code and "u_is_a" not in names
    assert names["scale_plus_steps"] == "scale + steps"  # was x_2
    assert names["big"] == 'legacy.model_config["BIG"]'
    galaxy = {f.name: code_of(f.value) for f in results["names"].modules[1].rendered.fields.fields}
    assert "links_float" not in galaxy and "x = ttnn.mul(x, float(2))" in results["names"].modules[1].code
    # the same keyword of the same op twice: the second is spelled from its value, not numbered
    assert names["add_memory_config"].startswith("ttnn.DRAM_MEMORY_CONFIG if")
    assert names["ttnn_l1_memory_config_if_wide"].startswith("ttnn.L1_MEMORY_CONFIG if")
    assert not [n for n in names if n[-2:] in ("_2", "_3")]


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("float(links)", "links_float"),
        ("scale + steps", "scale_plus_steps"),
        ('u == "a"', "u_is_a"),
        ("self.args.dim >= 64", "dim_ge_64"),
        ("x is not None", "x_is_not_none"),
        ("not self.TG", "not_tg"),
        ('self.model_config["QKV_MEMCFG"](rows)', "qkv_memcfg"),
        ("None if m is None else m", "m"),
        ("[1, self.heads, -1]", "value_1_heads_minus_1"),
        ('größe == "ä"', "größe_is_ä"),
        ("self.w.reshape(shape)", "w_reshape_shape"),
        ("make()(rows)", "make_rows"),
        ("lookup()[0].value", "lookup_0_value"),
        ('"!"', "value"),
        (
            "a.very_long_attribute_name + another_very_long_name * third",
            "a_very_long_attribute_name_plus_another_very",
        ),
    ],
)
def test_expression_name(source, expected):
    name = expression_name(cst.parse_expression(source))
    assert name == expected and name.isidentifier()


# ------------------------------------------------------------------------------------------ --partial markers
def _preceded_by_marker(code: str, statement: str) -> list[str]:
    """The marker comments right above each line that is ``statement``."""
    lines = code.splitlines()
    found = []
    for index, line in enumerate(lines):
        if line.strip() == statement:
            above = lines[index - 1].strip()
            found.append(above if above.startswith(MARKER) else "")
    return found


def test_partial_marks_each_untransformed_statement():
    """Both reads inside try/except are marked where they are, in decode_forward and in prefill_forward."""
    result = generate(INPUTS / "rfx" / "optional.py")
    code = mark_gaps(result.modules[0], result.gaps, result.inputs)
    shift = _preceded_by_marker(code, "x = ttnn.add(x, self.config.optional_shift)")
    scale = _preceded_by_marker(code, "x = ttnn.mul(x, self.config.fallback_scale)")
    assert len(shift) == len(scale) == 2
    assert all(m.startswith(f'{MARKER}: optional.py:13: self.model_config["OPTIONAL_SHIFT"]') for m in shift)
    assert all(m.startswith(f'{MARKER}: optional.py:15: self.model_config["FALLBACK_SCALE"]') for m in scale)
    header = code.split('"""', 1)[0]
    assert header.count(MARKER) == 2 and header.count("(marked below)") == 2
    compile(code, "optional_1d.py", "exec")


def test_a_gap_with_no_statement_here_stays_in_the_header():
    result = generate(INPUTS / "rfx" / "called.py", class_name="Called")
    code = mark_gaps(result.modules[0], result.gaps, result.inputs)
    assert (
        code.startswith(f"{MARKER}: called.py:13: Called.__call__") and "(no statement of this file)" in code
    )
    assert code.count(MARKER) == 1


def test_partial_cli_writes_the_markers_at_the_spot(tmp_path):
    source = tmp_path / "odd.py"
    source.write_text(
        textwrap.dedent(
            """
            import ttnn


            class Odd:
                def __init__(self, mesh_device, args):
                    self.args = args

                def forward(self, x, mode):
                    x = ttnn.mul(x, 2.0)
                    y = ttnn.relu(x, config=self.args)  # the ModelArgs object itself at run time
                    return y
            """
        )
    )
    assert main([str(source), "--out", str(tmp_path / "out"), "--partial", "--quiet"]) == 1
    text = (tmp_path / "out" / "odd_1d.py").read_text()
    marked = _preceded_by_marker(
        text, "y = ttnn.relu(x, config=self.args)  # the ModelArgs object itself at run time"
    )
    assert marked and all(m.startswith(f"{MARKER}: odd.py:11: ") for m in marked)
    assert _preceded_by_marker(text, "x = ttnn.mul(x, 2.0)") == [""] * len(marked)


# ------------------------------------------------------------------------------------------ a mode that is not the mode
def test_a_parameter_named_mode_that_is_not_the_mode_is_a_gap():
    """Each thing that gives it away is reported where it is; nothing is transformed silently (exit 1)."""
    gaps = generate(INPUTS / "rfx" / "phased.py").gaps
    assert [(g.loc, g.what) for g in gaps] == [
        ("phased.py:12", "Phased._round: mode against 'fast'"),
        ("phased.py:18", "Phased.forward(mode='exact')"),
        ("phased.py:19", "Phased.forward: phase against a mode"),
        ("phased.py:23", "Phased.forward: mode against 'fast'"),
    ]
    assert all("taken to be the module's mode" in g.reason for g in gaps)
