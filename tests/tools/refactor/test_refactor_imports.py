"""Helpers and constants from files the analysis did not read (issue 21, item 3): resolved as Python would
find them (``tools/refactor/imports.py``), then copied (a function, a constant) or imported (a class, an
installed package); copies keep their signatures' defaults; iterators never become config fields. Proven on
``inputs/rhelp`` (tt-metal's style: ``num_to_corerange`` in model_config.py, ``nearest_32`` in a utilities
module, a collective in another demo's ``*_ccl.py``, a ``TensorGroup`` enum) by running the generated module
against TTTv1's class, bit for bit, twice per mode."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import libcst as cst
import numpy as np
import pytest

from tests.tools.refactor.conftest import assert_identical, load_generated, replicated
from tttv2_tools.refactor import cli, generate
from tttv2_tools.refactor.imports import resolve_module
from tttv2_tools.refactor.reiterable import yields_iterator
from tttv2_tools.refactor.run import plan_run

INPUTS = Path(__file__).parent / "inputs"


def test_modules_resolve_as_python_finds_them(tmp_path):
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "sub" / "__init__.py").write_text("")
    (tmp_path / "proj" / "sub" / "tools.py").write_text("")
    (tmp_path / "flat.py").write_text("")
    assert resolve_module("proj.sub.tools", tmp_path).path == (tmp_path / "proj/sub/tools.py").resolve()
    assert resolve_module("proj.sub", tmp_path).path == (tmp_path / "proj/sub/__init__.py").resolve()
    assert resolve_module("flat", tmp_path).installed is False
    assert resolve_module("proj.missing", tmp_path) is None  # the project's package: Python looks no further
    assert resolve_module("libcst", tmp_path).installed
    assert resolve_module("libcst._nodes.expression", tmp_path).installed
    assert resolve_module("numpy.core._multiarray_umath", tmp_path).installed  # a compiled submodule
    assert resolve_module("libcst.no_such_module", tmp_path) is None
    assert resolve_module("no_such_package_anywhere", tmp_path) is None
    assert resolve_module("a..b", tmp_path) is None
    assert resolve_module("libcst.no_such_folder.module", tmp_path) is None  # a folder that is not there


def test_a_package_the_finder_cannot_look_at_resolves_to_nothing(tmp_path, monkeypatch):
    def refuses(name):
        raise ValueError(f"{name}.__spec__ is None")

    monkeypatch.setattr(importlib.util, "find_spec", refuses)
    assert resolve_module("somewhere.else", tmp_path) is None


def test_iterators_and_what_holds_them_are_told_apart():
    def parse(text):
        return cst.parse_expression(text)

    for text in (
        "zip(a, b)",
        "(x for x in a)",
        "itertools.chain(a, b)",
        "(zip(a, b), c)",
        "{'k': map(f, a)}",
        "zip(a, b) if t else ()",
        "a or reversed(b)",
    ):
        assert yields_iterator(parse(text)), text
    for text in (
        "list(zip(a, b))",
        "dict(zip(a, b))",
        "(a, b)",
        "{'k': a}",
        "a if t else b",
        "self.ws",
        "[x for x in a]",
    ):
        assert not yields_iterator(parse(text)), text
    assert not yields_iterator(None)


@pytest.fixture
def rhelp(monkeypatch):
    """The inputs package ``rhelp`` importable, as TTTv1 callers and the generated module need."""
    monkeypatch.syspath_prepend(str(INPUTS))
    yield lambda module, name: getattr(importlib.import_module(f"rhelp.{module}"), name)
    for name in [n for n in sys.modules if n.split(".")[0] == "rhelp"]:
        del sys.modules[name]


def test_helpers_from_unread_files_are_copied_or_imported_and_said_so(rhelp, tmp_path):
    run = plan_run(INPUTS / "rhelp" / "ffn.py", None, out=tmp_path / "out")
    assert run.gaps == []
    text = next(p.text for p in run.planned if p.path.name == "ffn_1d.py")
    assert "# copied from rhelp/model_config.py:19\ndef num_to_corerange(cores):" in text
    assert "\ndef nearest_32(x):" in text and "\nTILE = 32\n" in text
    assert "\nfrom rhelp.model_config import TensorGroup\n" in text  # a class: TTTv1's own members
    # the copy's ``if num_links is None: num_links = 1`` is decided at construction (a field), so the copy no
    # longer takes ``num_links`` (the call-binding check itself: test_refactor_names)
    assert "    def _gather_rows(self, x):" in text and "num_links=self.config.num_links" in text
    assert "zip(self.config.ws, self.config.gains)" in text and "enumerate(self.config.gains)" in text
    helpers = {h["name"]: h["source"] for h in run.report.helpers}
    assert helpers["num_to_corerange"] == "rhelp/model_config.py:19"
    assert helpers["TensorGroup"].startswith(
        "imported: `from rhelp.model_config import TensorGroup` (a class"
    )


def _x(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def test_the_generated_module_runs_as_tttv1_call_after_call(rhelp, tmp_path, ttnn_mesh_pool):
    """Before: num_to_corerange was not copyable (a gap), the copy of gather_rows lost ``num_links=None`` (the
    call omitting it raised TypeError), and ``zip(self.ws, self.gains)`` was one field: the second call looped
    over nothing, and its LazyWeights were never loaded."""
    import torch  # here, not at collection: torch must not be imported before the nested runs' session setup

    result = generate(INPUTS / "rhelp" / "ffn.py")
    assert result.gaps == []
    (generated,) = result.modules
    (tmp_path / generated.file_name).write_text(generated.code)
    ffn1d = load_generated(str(tmp_path / "t.py"), generated.file_name, generated.class_name)
    model_args, ffn = rhelp("model_config", "ModelArgs"), rhelp("ffn", "FFN")
    torch.manual_seed(0)
    state_dict = {"w1": torch.randn(64, 64) * 0.1, "w2": torch.randn(64, 64) * 0.1}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn_mesh_pool(shape)
        args = model_args(mesh)
        old, new = ffn(mesh, args, state_dict), ffn1d.from_model_args(mesh, args, state_dict)
        for mode, rows in (("decode", 32), ("prefill", 64), ("decode", 32), ("prefill", 64)):
            assert_identical(
                old.forward(replicated(_x(rows), mesh), mode),
                new.forward(replicated(_x(rows), mesh), mode),
                f"{shape} {mode}",
            )


def test_an_import_that_resolves_to_nothing_is_a_gap(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "blk.py").write_text(
        "import ttnn\nfrom pkg.gone import helper\nfrom pkg.blk_utils import missing\n"
        "from packaging.version import Version\nimport pkg.blk_utils as bu\n\n\n"
        "class Blk:\n    def __init__(self, mesh_device):\n        self.mesh_device = mesh_device\n\n"
        "    def forward(self, x, mode):\n        x = helper(x)\n        x = missing(x)\n"
        "        x = ttnn.multiply(x, float(Version(str(x.shape[0])).major) * bu.other(x.shape[0]))\n"
        "        return ttnn.add(x, x)\n"
    )
    (package / "blk_utils.py").write_text("def other(n=1):\n    return n\n")
    result = generate(package / "blk.py")
    reasons = {g.what: g.reason for g in result.gaps}
    assert {g.what: g.loc for g in result.gaps if g.what in ("helper", "missing")} == {
        "helper": "blk.py:2",
        "missing": "blk.py:3",
    }
    assert "resolves to no file under" in reasons["helper"]
    assert (
        reasons["missing"] == "needed at run time and imported from pkg.blk_utils, which does not define it"
    )
    assert "Version" not in reasons
    assert "\nfrom packaging.version import Version\n" in result.modules[0].code
    assert "\nimport pkg.blk_utils as bu\n" in result.modules[0].code  # a module object: imported, said so
    assert "bu" not in reasons
    code = cli.main([str(package / "blk.py"), "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 1


def test_a_re_exported_helper_is_followed_to_its_definition(tmp_path):
    package = tmp_path / "pkg2"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "api.py").write_text("from pkg2.impl import double  # re-exported\n")
    (package / "impl.py").write_text(
        "import ttnn\n\nSCALE = 2.0\n\n\ndef double(x):\n    return ttnn.multiply(x, SCALE)\n"
    )
    (package / "blk.py").write_text(
        "import ttnn\nfrom pkg2.api import double\n\n\n"
        "class Blk:\n    def __init__(self, mesh_device):\n        self.mesh_device = mesh_device\n\n"
        "    def forward(self, x, mode):\n        return double(x)\n"
    )
    run = plan_run(package / "blk.py", None, out=tmp_path / "out")
    assert run.gaps == []
    text = run.planned[0].text
    assert (
        "# copied from pkg2/impl.py:6\ndef double(x):" in text
        and "# copied from pkg2/impl.py:3\nSCALE = 2.0" in text
    )


def test_a_static_branch_nested_in_another_receives_the_locals_it_reads(rhelp, tmp_path, ttnn_mesh_pool):
    """``if last_layer: if qk_norm: h = to_memory_config(h, skip_mem_cfg)`` (the Llama-3 70B Galaxy decoder):
    the inner branch's methods receive ``h`` and ``skip_mem_cfg`` from the outer branch's method. Before, they
    received neither (NameError, UnboundLocalError) and the tool exited 0; the module now runs as TTTv1's, on
    both arms of the inner test."""
    result = generate(INPUTS / "rhelp" / "block.py")
    assert result.gaps == []
    (generated,) = result.modules
    assert "def _decode_qk_norm_true(self, h, skip_mem_cfg):" in generated.code
    (tmp_path / generated.file_name).write_text(generated.code)
    block1d = load_generated(str(tmp_path / "t.py"), generated.file_name, generated.class_name)
    model_args, block = rhelp("model_config", "ModelArgs"), rhelp("block", "Block")
    mesh = ttnn_mesh_pool((1, 1))
    for dim, rows in ((64, 32), (32, 64), (64, 64)):
        args = model_args(mesh, dim=dim)
        old, new = block(mesh, args), block1d.from_model_args(mesh, args)
        for mode in ("decode", "prefill"):
            assert_identical(
                old.forward(replicated(_x(rows), mesh), mode),
                new.forward(replicated(_x(rows), mesh), mode),
                f"dim {dim} rows {rows} {mode}",
            )


def test_a_copied_helper_keeps_a_default_built_at_import(rhelp, tmp_path, ttnn_mesh_pool):
    """tt-metal's later ``num_to_corerange(x, start_core=ttnn.CoreCoord(0, 0), ...)``, called with and without
    ``start_core`` (attention.py's Q and K grids): the copy keeps the default, and the generated module reshards
    onto the same cores as TTTv1, bit for bit."""
    result = generate(INPUTS / "rhelp" / "grids.py")
    assert result.gaps == []
    (generated,) = result.modules
    assert "def cores_from(count, start_core=ttnn.CoreCoord(0, 0), grid_x=8):  # noqa: B008" in generated.code
    (tmp_path / generated.file_name).write_text(generated.code)
    grids1d = load_generated(str(tmp_path / "t.py"), generated.file_name, generated.class_name)
    model_args, grids = rhelp("model_config", "ModelArgs"), rhelp("grids", "Grids")
    mesh = ttnn_mesh_pool((1, 2))
    args = model_args(mesh)
    old, new = grids(mesh, args), grids1d.from_model_args(mesh, args)
    for mode, first_core in (("decode", (0, 1)), ("prefill", (0, 0))):
        expected = old.forward(replicated(_x(32), mesh), mode)
        got = new.forward(replicated(_x(32), mesh), mode)
        assert_identical(expected, got, mode)
        (core_range,) = got.memory_config().shard_spec.grid.ranges
        assert (core_range.start.x, core_range.start.y) == first_core
