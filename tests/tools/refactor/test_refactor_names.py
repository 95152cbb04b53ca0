"""Every name a generated module reads resolves, and it imports (issue 21, items 3 and 5): the check on the
finished text (``tools/refactor/names.py``) and what it catches in a run."""

from __future__ import annotations

from pathlib import Path

from tttv2_tools.refactor import cli
from tttv2_tools.refactor.helpers import HelperCopier
from tttv2_tools.refactor.names import (
    call_mismatches,
    import_errors,
    output_gaps,
    unbound_locals,
    undefined_names,
)
from tttv2_tools.refactor.run import plan_run

INPUTS = Path(__file__).parent / "inputs"

SCOPED = """
import os
from x import y as z
A = 1


def f(p, q=undefined_default):
    r = [k for k in p if k > missing_in_comp]
    lam = lambda v: v + missing_lam + A
    inner = [[j for j in k] for k in r]

    class K:
        w = missing_cls
        u = p

    global G
    G = 2
    return num_to_corerange(r), nearest_32, os, z, G, print, __file__, lam, inner, K


def g(a=lambda: late):
    return G, H, a


for H in []:
    pass
"""


def test_reads_that_no_scope_binds_are_gaps_with_their_line():
    gaps = undefined_names(SCOPED, "m_1d.py")
    assert [(g.loc, g.what) for g in gaps] == [
        ("m_1d.py:7", "undefined_default"),
        ("m_1d.py:8", "missing_in_comp"),
        ("m_1d.py:9", "missing_lam"),
        ("m_1d.py:13", "missing_cls"),
        ("m_1d.py:18", "nearest_32"),
        ("m_1d.py:18", "num_to_corerange"),
        ("m_1d.py:21", "late"),
    ]
    assert gaps[0].reason.endswith("neither defined nor imported in it (NameError when this line runs)")
    twice = undefined_names("def f():\n    return g\n\n\ndef h():\n    return g, g\n\n\nk = g\n", "m.py")
    assert [(g.loc, g.what) for g in twice] == [("m.py:2", "g")]
    assert twice[0].reason.endswith("(NameError when this line runs; also read at lines 6, 9)")
    once_more = undefined_names("a = g\nb = g\n", "m.py")
    assert once_more[0].reason.endswith("(NameError when this line runs; also read at line 2)")


def test_a_star_import_leaves_the_names_to_the_import_check():
    assert undefined_names("from os.path import *\nprint(join, nowhere)\n", "m.py") == []


def test_what_raises_at_import_is_a_gap_at_its_line():
    gaps = import_errors(
        {
            "ok_1d.py": "import math\nfrom tttv2 import ttnn\nX = ttnn.bfloat16\n",
            "missing_1d.py": "\n\nimport no_such_module_anywhere\n",
            "decorated_1d.py": "@deco\ndef f():\n    pass\n",
            "emulated_1d.py": "import ttnn\nY = ttnn.TILE_LAYOUT\n",
        },
        [],
    )
    assert [(g.loc, g.what) for g in gaps] == [("decorated_1d.py:1", "import"), ("missing_1d.py:3", "import")]
    assert "NameError: name 'deco' is not defined" in gaps[0].reason
    assert "ModuleNotFoundError" in gaps[1].reason


def test_a_name_the_codemod_forgets_to_import_fails_the_run(tmp_path, monkeypatch, capsys):
    """The codemod made to drop what it should import: the run is not clean (exit 1, nothing written), and the
    gap names the generated file and line."""
    monkeypatch.syspath_prepend(str(INPUTS))
    monkeypatch.setattr(HelperCopier, "_import", lambda self, local, *rest: None)
    run = plan_run(INPUTS / "rhelp" / "ffn.py", None, out=tmp_path / "out")
    names = [g for g in run.gaps if "neither defined nor imported" in g.reason]
    assert {g.what for g in names} >= {"nearest_32", "math"}
    text = next(p.text for p in run.planned if p.path.name == "ffn_1d.py").splitlines()
    for gap in names:
        file, line = gap.loc.rsplit(":", 1)
        assert file == "ffn_1d.py" and gap.what in text[int(line) - 1]
    code = cli.main([str(INPUTS / "rhelp" / "ffn.py"), "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 1 and not (tmp_path / "out").exists()
    assert "ffn_1d.py:" in capsys.readouterr().err


CALLS = """
import math


def helper(a, b=1, /, *, c):
    return a


def spread(*args, **kwargs):
    return args


x = helper(1, c=2)
y = helper(1)
z = helper(1, 2, 3, c=4)
w = helper(*[1], c=3) or spread(1, k=2) or math.floor(1.5) or helper(a=1, c=2)


class K:
    def _f(self, x, num_links):
        return helper(x, c=num_links)

    def run(self, x):
        self._f(x=x)
        self._f(x, 1)
        self._g(x)
        self._bound(x)
        other._f(x)
        return self._f(x=x, num_links=2, extra=3)

    def _g(self):
        pass

    def _bound_true(self, x):
        return x

    def _bind(self):
        self._bound = self._bound_true

    def _bound(self):
        pass

    @staticmethod
    def _static(x):
        return x

    def _no_self():
        pass

    def more(self):
        return self._static(1, 2), self._no_self()
"""


def test_calls_that_do_not_bind_to_the_definition_are_gaps():
    """A copy that lost a default the call relies on (``num_links``), too many arguments, an unknown keyword,
    a positional-only parameter passed by name; not a call through ``*`` / ``**``, of a method a bound
    attribute of the same name shadows, of a decorated method, or of another object."""
    gaps = call_mismatches(CALLS, "k_1d.py")
    assert [(g.loc, g.what) for g in gaps] == [
        ("k_1d.py:14", "helper(...)"),
        ("k_1d.py:15", "helper(...)"),
        ("k_1d.py:16", "helper(...)"),
        ("k_1d.py:24", "self._f(...)"),
        ("k_1d.py:26", "self._g(...)"),
        ("k_1d.py:29", "self._f(...)"),
    ]
    assert "missing a required argument: 'c'" in gaps[0].reason
    assert "missing a required argument: 'num_links'" in gaps[3].reason
    assert "got an unexpected keyword argument 'extra'" in gaps[5].reason


def test_a_copy_whose_signature_its_call_does_not_match_fails_the_run(tmp_path, monkeypatch):
    """The codemod made to write copies whose signature the call does not match (here: one more required
    parameter, as a copy that lost a default the call relied on once did; rhelp's ``num_links=None`` default is
    now decided at construction, so the copy has no such parameter left): the run is not clean."""
    from tttv2_tools.refactor import inline

    original = inline._substituted

    def with_a_required_parameter(*args, **kwargs):
        func = original(*args, **kwargs)
        extra = inline.cst.Param(inline.cst.Name("num_links"))
        return func.with_changes(params=func.params.with_changes(params=[*func.params.params, extra]))

    monkeypatch.syspath_prepend(str(INPUTS))
    monkeypatch.setattr(inline, "_substituted", with_a_required_parameter)
    run = plan_run(INPUTS / "rhelp" / "ffn.py", None, out=tmp_path / "out")
    gaps = [g for g in run.gaps if "does not match the definition" in g.reason]
    assert len(gaps) == 2  # the decode and the prefill call
    for gap in gaps:
        assert (
            gap.what == "self._gather_rows(...)" and "missing a required argument: 'num_links'" in gap.reason
        )


def test_comprehension_scopes_see_their_own_targets_only():
    text = "d = {k: v + late for k in range(3) for v in [k] if v}\ns = {k for k in range(2)} | {bad for _ in [1]}\n"
    assert [(g.loc, g.what) for g in undefined_names(text, "m.py")] == [("m.py:1", "late"), ("m.py:2", "bad")]


def test_the_import_check_says_when_it_could_not_run():
    assert import_errors({}, []) == []
    # a module that imports more than the standard library and the library runs in a fresh interpreter
    (silent,) = import_errors({"quits_1d.py": "import numpy\nimport os\nos._exit(0)\n"}, [])
    assert silent.what == "import" and silent.reason.startswith("the import check did not run")
    (slow,) = import_errors({"slow_1d.py": "import numpy\n"}, [], timeout=0.001)
    assert "took longer than" in slow.reason


def test_a_module_level_name_is_reported_once_not_again_as_an_import_error(tmp_path):
    gaps = output_gaps({"m_1d.py": "import math\n\nx = nowhere + math.pi\n"}, tmp_path)
    assert [(g.loc, g.what) for g in gaps] == [("m_1d.py:3", "nowhere")]
    assert output_gaps({"ok_1d.py": "import math\n"}, None) == []


LOCALS = """
import os


def f(x, y):
    h = g(h)
    a = 1
    a += 1
    b += 1
    for i in x:
        if i:
            c = d
        d = i
    try:
        e = 1
    except ValueError as err:
        print(err, e)
    while y:
        w = w2 if y else 0
        w2 = 1
    k = [q for q in x]

    def inner():
        return h

    import math

    z = math.pi + os.sep
    match x:
        case [m, *rest]:
            z = m, rest
        case {"k": v, **others}:
            z = v, others
        case _:
            z = late
    late = 1
    return inner, k, z, c, w, a


def g(n):
    global counter
    counter = counter + n
    return counter
"""


def test_locals_read_before_anything_assigns_them_are_gaps():
    """In the order the function runs (a value before its targets, ``h += 1`` reads h): ``h = g(h)``, ``b +=
    1`` and a read before the assignment further down are gaps; a read in a loop that an earlier iteration may
    have assigned, a handler's name, a match capture, a global are not."""
    gaps = unbound_locals(LOCALS, "m.py")
    assert [(g.loc, g.what) for g in gaps] == [("m.py:6", "h"), ("m.py:9", "b"), ("m.py:35", "late")]
    assert gaps[0].reason == "read in f before anything assigns it (UnboundLocalError when this line runs)"


def test_a_nested_branch_that_loses_its_locals_fails_the_run(tmp_path, monkeypatch):
    """The codemod made to forget the parameters of a method extracted earlier (the defect the Llama-3 70B
    Galaxy decoder met): the run is not clean, with both kinds of gap."""
    import libcst as cst

    from tttv2_tools.refactor import hoist

    original = hoist.BranchBinder._extract

    def forgetful(self, func, target):
        return original(self, func.with_changes(params=cst.Parameters(params=func.params.params[:1])), target)

    monkeypatch.syspath_prepend(str(INPUTS))
    monkeypatch.setattr(hoist.BranchBinder, "_extract", forgetful)
    run = plan_run(INPUTS / "rhelp" / "block.py", None, out=tmp_path / "out")
    kinds = {(g.what, g.reason.split(" (")[0]) for g in run.gaps}
    assert ("skip_mem_cfg", "read by the generated code but neither defined nor imported in it") in kinds


def test_the_checks_of_one_module_share_one_parse():
    """``output_gaps`` parses each generated module once and hands the tree to every check: each check finds
    the same gaps from that tree as from the text alone (a tree of another text would show: the tree is what is
    read), and the import check sorts the modules the same way."""
    import ast

    for text, check in ((SCOPED, undefined_names), (LOCALS, unbound_locals), (CALLS, call_mismatches)):
        gaps = check(text, "m_1d.py")
        assert gaps and check(text, "m_1d.py", tree=ast.parse(text)) == gaps
        assert check(text, "m_1d.py", tree=ast.parse("x = 1\n")) == []
    modules = {
        "std_1d.py": "import math\n\nx = math.nowhere\n",
        "np_1d.py": "import numpy\n\ny = numpy.nowhere\n",
    }
    gaps = import_errors(modules, [])
    assert [g.loc for g in gaps] == ["np_1d.py:3", "std_1d.py:3"]
    assert import_errors(modules, [], parsed={n: ast.parse(t) for n, t in modules.items()}) == gaps


def test_a_name_read_only_after_assert_false_is_tttv1s_own_not_a_gap():
    """Code after ``assert False`` is kept (it runs under ``python -O``); a name it reads that nothing defines is
    TTTv1's own (Llama-2-70B's attention returns ``tt_matmul_out_tensor``, whose assignment is commented out),
    not one the tool lost. The same name read before the assert, or after an assert that can pass, is a gap."""
    text = (
        "class M:\n"
        "    def f(self, x):\n"
        "        if x:\n"
        "            assert False, 'removed'\n"
        "            return gone_a\n"
        "        assert x, 'may pass'\n"
        "        return gone_b\n"
        "    def g(self):\n"
        "        y = gone_c\n"
        "        assert False\n"
        "        return y, gone_d\n"
    )
    assert [(g.loc, g.what) for g in undefined_names(text, "m_1d.py")] == [
        ("m_1d.py:7", "gone_b"),
        ("m_1d.py:9", "gone_c"),
    ]
