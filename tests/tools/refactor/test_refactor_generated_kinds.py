"""Held-out review 2 of what tttv2-refactor generates: the generated tests run the INPUT module (R36), and the
generated modules check the topology fact they were specialised on (R37), load every weight (R42) and run an
``__init__`` with an early return (R41) as TTTv1 does."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tests.tools.refactor.conftest import assert_identical, load_generated, replicated
from tttv2 import ttnn
from tttv2.testing.generated import load_legacy
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.run import plan_run

pytest_plugins = ["pytester"]
TTTV1_TT = Path(__file__).resolve().parents[3] / "tttv1" / "tt"
#: The conftest.py of a folder of generated tests of tttv1 modules (docs/refactor.md).
TTTV1_CONFTEST = "from tttv1.testing import *  # noqa: F403\n"


def _write(run) -> None:
    for item in run.planned:
        item.path.parent.mkdir(parents=True, exist_ok=True)
        item.path.write_text(item.text)


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"_refactorgen_{path.stem}_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ R36
def test_the_generated_equivalence_test_runs_the_input_module(tmp_path, pytester, nested_run_imports):
    """A user's ``embedding.py`` (class ``Embedding``, like the built-in one) with one op changed: its generated
    test compares the generated module with the user's class and passes. Before, the test ran the built-in
    ``tttv1.tt.embedding.Embedding`` and failed although the transformation was right."""
    source = (TTTV1_TT / "embedding.py").read_text()
    changed = source.replace(
        "return self.lookup(x)",
        "return ttnn.multiply(self.lookup(x), 2.0, memory_config=ttnn.DRAM_MEMORY_CONFIG)",
        1,
    )
    assert changed != source
    module = tmp_path / "user" / "embedding.py"
    module.parent.mkdir()
    module.write_text(changed)
    run = plan_run(module, TTTV1_TT / "model_config.py", out=tmp_path / "out", tests_out=tmp_path / "tests")
    assert run.gaps == []
    _write(run)
    (tmp_path / "tests" / "conftest.py").write_text(TTTV1_CONFTEST)
    test_file = tmp_path / "tests" / "test_embedding_1d.py"
    generated_tests = _import(test_file)
    assert generated_tests.TTTV1_CLASS.__module__ != "tttv1.tt.embedding"
    assert Path(sys.modules[generated_tests.TTTV1_CLASS.__module__].__file__).samefile(module)
    result = pytester.runpytest_inprocess(
        str(test_file), "-q", "-p", "no:cacheprovider", "-k", "1x1-forward-128"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1 and not outcomes.get("failed"), result.stdout.str()[-2000:]
    # what the test used to check: the built-in Embedding, which does not double its rows
    from tttv1.testing import _model
    from tttv1.tt.embedding import Embedding
    from tttv2.testing.equivalence import assert_equivalent_outputs

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        args, state_dict, _ = _model(mesh, "Llama-3.1-8B-tiny")
        kwargs = dict(
            mesh_device=mesh, args=args, weight_cache_path=None, state_dict=state_dict, dtype=ttnn.bfloat16
        )
        ids = np.arange(32, dtype=np.uint32).reshape(1, 1, 1, 32)
        tokens = ttnn.from_numpy(ids, dtype=ttnn.uint32, device=mesh)
        with pytest.raises(AssertionError, match="device 0"):
            assert_equivalent_outputs(
                Embedding(**kwargs)(tokens), generated_tests.Embedding1D.from_model_args(**kwargs)(tokens)
            )
    finally:
        ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ R37, R41, R42
INPUTS = Path(__file__).parent / "inputs"


@pytest.fixture(scope="module")
def rgen():
    """The inputs package ``rgen`` importable, as the generated from_model_args and TTTv1 callers need."""
    sys.path.insert(0, str(INPUTS))
    yield lambda module, name: getattr(importlib.import_module(f"rgen.{module}"), name)
    sys.path.remove(str(INPUTS))
    for name in [n for n in sys.modules if n.split(".")[0] == "rgen"]:
        del sys.modules[name]


def _generated(module: str, folder: Path) -> dict:
    """{topology: generated class} of ``inputs/rgen/<module>.py``, written to ``folder``."""
    result = generate(INPUTS / "rgen" / f"{module}.py")
    assert result.gaps == []
    out = {}
    for generated in result.modules:
        (folder / generated.file_name).write_text(generated.code)
        out[generated.topology] = load_generated(
            str(folder / "t.py"), generated.file_name, generated.class_name
        )
    return out


def _x(rows: int = 32) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def _same(old, new, mesh, modes=("decode", "prefill")) -> None:
    for mode in modes:
        assert_identical(
            old.forward(replicated(_x(), mesh), mode), new.forward(replicated(_x(), mesh), mode), mode
        )


def test_a_2d_module_refuses_a_2d_mesh_where_tttv1_is_not_galaxy(rgen, tmp_path, ttnn_mesh_pool):
    """On 2x4 (8 devices) TTTv1's ``args.is_galaxy`` is False: Topo2D (its galaxy code) refuses, naming the
    test, where it used to run the galaxy code silently; on 8x4 and 1x2 both agree with TTTv1."""
    classes, model_args, topo = (
        _generated("topo", tmp_path),
        rgen("model_config", "ModelArgs"),
        rgen("topo", "Topo"),
    )
    t3k = ttnn_mesh_pool((2, 4))
    with pytest.raises(ValueError, match=r"`args.is_galaxy` \(topo.py:11\) is False for these arguments"):
        classes["2d"].from_model_args(t3k, model_args(t3k))
    for topology, shape in (("2d", (8, 4)), ("1d", (1, 2))):
        mesh = ttnn_mesh_pool(shape)
        args = model_args(mesh)
        _same(topo(mesh, args), classes[topology].from_model_args(mesh, args), mesh)


def test_every_weight_is_loaded_whatever_builds_or_holds_it(rgen, tmp_path, ttnn_mesh_pool):
    """A weight from a helper method, from a local lambda, in a list, a dict or a conditional: converted by
    load_device_weights() (they reached ttnn as LazyWeights); one hidden where loading cannot reach is refused
    by from_config."""
    import torch

    classes, model_args, weights = (
        _generated("weights", tmp_path),
        rgen("model_config", "ModelArgs"),
        rgen("weights", "Weights"),
    )
    torch.manual_seed(0)
    state_dict = {"w": torch.randn(64, 64) * 0.1, "b": torch.randn(1, 1, 32, 64)}
    for topology, shape in (("1d", (1, 2)), ("2d", (8, 4))):
        mesh = ttnn_mesh_pool(shape)
        args = model_args(mesh)
        _same(
            weights(mesh, args, state_dict), classes[topology].from_model_args(mesh, args, state_dict), mesh
        )
    mesh = ttnn_mesh_pool((1, 2))
    module = classes["1d"].from_model_args(mesh, model_args(mesh), state_dict)
    hidden = dataclasses.replace(module.config, w=types.SimpleNamespace(weight=module.config.w))
    with pytest.raises(ValueError, match="config field w holds a LazyWeight inside a SimpleNamespace"):
        classes["1d"].from_config(hidden)


def test_an_early_return_in_init_ends_only_the_init_body(rgen, tmp_path, ttnn_mesh_pool):
    """``if extra is None: return`` in TTTv1's __init__: from_model_args still returns the module (it returned
    None), with the gain TTTv1 has on either path."""
    (early,) = _generated("early", tmp_path).values()
    model_args, tttv1_early = rgen("model_config", "ModelArgs"), rgen("early", "Early")
    mesh = ttnn_mesh_pool((1, 1))
    args = model_args(mesh)
    for extra in ({}, {"extra": 5.0}):
        _same(tttv1_early(mesh, args, **extra), early.from_model_args(mesh, args, **extra), mesh)


def test_a_galaxy_test_the_bridge_cannot_write_is_a_gap():
    """``if on_galaxy(self.args)``: the test is a module function's own parameter, so from_model_args could not
    check it; reported instead of a 2D module that would run on any 2-D mesh."""
    gaps = generate(INPUTS / "rgen" / "hidden.py").gaps
    assert [(g.loc, g.what) for g in gaps] == [("hidden.py:1", "Hidden: the galaxy test")]
    assert "can be written with the constructor's arguments alone" in gaps[0].reason


def test_load_legacy_says_what_is_missing(tmp_path):
    with pytest.raises(ImportError, match="does not exist"):
        load_legacy(str(tmp_path / "t.py"), "gone.py", "gone", "Gone")
    (tmp_path / "plain.py").write_text("VALUE = 1\n")
    with pytest.raises(ImportError, match="has no class Plain"):
        load_legacy(str(tmp_path / "t.py"), "plain.py", "plain", "Plain")
    with pytest.raises(
        ImportError, match="has no class Plain"
    ):  # a package that does not import: the file alone
        load_legacy(str(tmp_path / "t.py"), "plain.py", "nowhere_pkg.plain", "Plain")
    with pytest.raises(ImportError, match="does not exist"):
        load_generated(str(tmp_path / "t.py"), "gone_1d.py", "Gone1D")
    with pytest.raises(ImportError, match="has no class Plain1D"):
        load_generated(str(tmp_path / "t.py"), "plain.py", "Plain1D")
