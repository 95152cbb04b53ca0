"""The module tests' case lists (``cases.py``) are what ``collect-cases emit`` writes from the tttv1 catalogue
recordings: ``emit --check`` runs in-process on each, so a list that is out of date with the recordings (or edited
by hand) fails the suite. Also: every list is parametrising a module test, and the selection keeps what it
promises (every model, mesh and mode of its topology)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tttv2 import ttnn
from tttv2_tools.collect_cases.cli import main

from . import cases

ROOT = Path(__file__).resolve().parents[2]
MODELS = {"Llama-3.2-1B-tiny", "Llama-3.1-8B-tiny", "Qwen2.5-7B-tiny", "Mistral-7B-tiny", "Phi-3-mini-tiny"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("recorded") / "cases.sqlite"
    assert main(["import", "--store", str(path), "--csv", str(ROOT / cases.RECORDINGS)]) == 0
    return path


def _emit(store, into, name, target, options, *extra):
    args = ["emit", "--store", str(store), "--target", target, "--into", str(into), "--name", name]
    return main([*args, *options, *extra])


@pytest.mark.parametrize(("name", "target", "options"), cases.EMITTED, ids=[e[0] for e in cases.EMITTED])
def test_case_list_is_up_to_date(store, name, target, options, capsys):
    assert _emit(store, cases.__file__, name, target, options, "--check") == 0, capsys.readouterr().err


def test_a_stale_list_fails_the_check(store, tmp_path):
    """Drop one entry of a copy: --check exits 1 and writes nothing; emit then restores the list."""
    copy = tmp_path / "cases.py"
    shutil.copy(cases.__file__, copy)
    text = copy.read_text()
    start = text.index("MLP_2D_CASES = [\n") + len("MLP_2D_CASES = [\n")
    end = text.index("    ),\n", start) + len("    ),\n")
    stale = text[:start] + text[end:]
    copy.write_text(stale)
    name, target, options = next(e for e in cases.EMITTED if e[0] == "MLP_2D_CASES")
    assert _emit(store, copy, name, target, options, "--check") == 1
    assert copy.read_text() == stale
    assert _emit(store, copy, name, target, options) == 0
    assert copy.read_text() == text


def test_every_list_parametrises_a_module_test():
    used = set()
    for path in (ROOT / "tests" / "modules").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("cases"):
                used.update(alias.name for alias in node.names)
    assert {name for name, _, _ in cases.EMITTED} <= used


def _values(params, column):
    return [dict(zip(_columns(params), p.values))[column] for p in params]


def _columns(params):
    """The columns pinned by the list's header comment."""
    name = next(n for n, _, _ in cases.EMITTED if getattr(cases, n) is params)
    header = Path(cases.__file__).read_text().split(f"\n{name} = [")[0].rsplit("# collect-cases:", 1)[1]
    fields = next(word for word in header.split() if word.startswith("fields="))
    return fields.removeprefix("fields=").split(",")


@pytest.mark.parametrize(
    ("name", "meshes"),
    [
        ("MLP_1D_CASES", {(1, 1), (1, 2), (1, 8)}),
        ("MLP_2D_CASES", {(8, 4)}),
        ("ATTENTION_1D_CASES", {(1, 1), (1, 2), (1, 8)}),
        ("ATTENTION_2D_CASES", {(8, 4)}),
        ("DECODER_CASES", {(1, 1), (1, 2), (1, 8), (8, 4)}),
    ],
)
def test_the_selection_keeps_every_model_mesh_and_mode(name, meshes):
    params = getattr(cases, name)
    assert set(_values(params, "model_name")) == MODELS
    assert set(_values(params, "mesh_shape")) == meshes
    if "mode" in _columns(params):
        assert set(_values(params, "mode")) == {"decode", "prefill"}
    ids = [p.id for p in params]
    assert len(set(ids)) == len(ids)


def test_recorded_values_map_to_what_the_tests_build():
    assert cases.family_of("Qwen2.5-7B-tiny") == "qwen2" and cases.family_of("Phi-3-mini-tiny") == "phi3"
    assert cases.rows_of((1, 1, 128, 512)) == 128
    assert cases.precision_of(ttnn.bfloat4_b, ttnn.bfloat8_b) == "mixed"
    assert cases.precision_of(ttnn.bfloat8_b, ttnn.bfloat8_b) == "uniform"
    with pytest.raises(
        ValueError, match=r"no test precision has MLP weights w1/w3 .*BFLOAT16 and w2 .*BFLOAT8_B"
    ):
        cases.precision_of(ttnn.bfloat16, ttnn.bfloat8_b)
    converted = cases.recorded(cases.MLP_1D_CASES, lambda mesh_shape, mode, *_: (mesh_shape, mode))
    assert [p.id for p in converted] == [p.id for p in cases.MLP_1D_CASES]
    assert [p.values for p in converted] == [p.values[:2] for p in cases.MLP_1D_CASES]
