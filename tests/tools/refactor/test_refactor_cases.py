"""``--cases STORE``: the generated equivalence tests are parametrised by the configurations recorded in a
collect-cases store (here: the tttv1 catalogue's recorded cases, imported from the collect-cases test data),
and they pass on them."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from tttv2_tools.collect_cases import CaseStore
from tttv2_tools.collect_cases.csvio import import_csv
from tttv2_tools.refactor.cases import cases_from_store
from tttv2_tools.refactor.cli import main

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
TTTV1 = ROOT / "tttv1" / "tt"
CATALOGUE = ROOT / "tests" / "tools" / "collect_cases" / "data" / "tttv1_catalogue_cases.csv"
RMSNORM = "tttv1.tt.rmsnorm:RMSNorm"


def _store(path: Path, target: str) -> Path:
    cases = [c for c in import_csv(CATALOGUE, None) if c.target == target]
    with CaseStore(path, create=True) as store:
        store.add_cases(cases, "test")
    return path


def _expected_from_csv(target: str) -> set[tuple]:
    """(mesh, mode, rows, model) read straight from the CSV: what the generated test must list."""
    out = set()
    with open(CATALOGUE, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["target"] != target:
                continue
            mesh = (int(row["cluster_shape_x"]), int(row["cluster_shape_y"]))
            rows = json.loads(row["input.x.shape"])[-2]
            out.add((mesh, row["mode"], rows, row["hf_model_name"]))
    return out


def _listed_cases(test_file: Path) -> set[tuple]:
    tree = ast.parse(test_file.read_text())
    cases = next(
        n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CASES"
    )
    return {tuple(ast.literal_eval(a) for a in call.args[:4]) for call in cases.elts}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("cases")
    store = _store(root / "cases.sqlite", RMSNORM)
    argv = [TTTV1 / "rmsnorm.py", "--out", root / "m", "--tests-out", root / "t", "--cases", store, "--quiet"]
    assert main([str(a) for a in argv]) == 0
    (root / "t" / "conftest.py").write_text("from tttv1.testing import *  # noqa: F403\n")
    return root


def test_generated_tests_list_the_recorded_cases(generated):
    test_file = generated / "t" / "test_rmsnorm_1d.py"
    expected = _expected_from_csv(RMSNORM)
    assert len(expected) > 20
    assert _listed_cases(test_file) == expected
    assert (
        "# the cases of tttv1.tt.rmsnorm:RMSNorm recorded in cases.sqlite (collect-cases)"
        in test_file.read_text()
    )


def test_a_recorded_case_passes(generated, pytester, nested_run_imports):
    """Two recorded cases the default matrix does not have (other models, 32-row prefill), bit-exact."""
    test_file = generated / "t" / "test_rmsnorm_1d.py"
    selected = "matches_tttv1 and (1x2-prefill-32-Phi-3-mini-tiny or 1x8-decode-32-Mistral-7B-tiny)"
    result = pytester.runpytest_inprocess(str(test_file), "-q", "-p", "no:cacheprovider", "-k", selected)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and not outcomes.get("failed"), result.stdout.str()[-2000:]


def test_a_store_without_the_target_keeps_the_default_matrix(tmp_path):
    store = _store(tmp_path / "mlp.sqlite", "tttv1.tt.mlp:MLP")
    recorded, origin = cases_from_store(store, TTTV1 / "rmsnorm.py", "RMSNorm", ("decode", "prefill"))
    assert recorded == {} and "tttv1.tt.rmsnorm:RMSNorm" in origin
    mlp, _ = cases_from_store(store, TTTV1 / "mlp.py", "MLP", ("decode", "prefill"))
    assert set(mlp) == {"1d", "2d"} and all(c.mesh_shape == (8, 4) for c in mlp["2d"])
    assert {c.mode for c in mlp["1d"]} == {"decode", "prefill"}
    only_decode, _ = cases_from_store(store, TTTV1 / "mlp.py", "MLP", ("decode",))
    assert {c.mode for c in only_decode["1d"]} == {"decode"}


def test_bad_stores_are_one_line_errors(tmp_path, capsys):
    out = tmp_path / "out"
    not_a_store = tmp_path / "x.sqlite"
    not_a_store.write_text("hello")
    tests = ["--tests-out", str(tmp_path / "t")]
    for store, more, message in (
        (tmp_path / "missing.sqlite", tests, "missing.sqlite: no such file"),
        (not_a_store, tests, "not a collect-cases"),
        (not_a_store, [], "give --tests-out DIR too"),
    ):
        argv = [str(TTTV1 / "rmsnorm.py"), "--out", str(out), "--cases", str(store), *more, "--quiet"]
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not (tmp_path / "t").exists()


def test_cases_the_tests_cannot_take_as_recorded_are_reported(tmp_path):
    """R27: a model the catalogue lacks, a case with no model name or no tensor input is named at generation
    time, not silently defaulted; the rows come from the first tensor input whatever its name."""
    from tttv2_tools.collect_cases import Case
    from tttv2_tools.refactor.cases import case_notes

    def case(model, inputs):
        fields = {"mode": "prefill", "mesh_shape": [1, 2], "inputs": inputs}
        return Case(RMSNORM, fields | ({"model_name": model} if model else {}))

    hidden = [["hidden", {"shape": [1, 1, 64, 512], "dtype": "bfloat16"}]]
    with CaseStore(tmp_path / "s.sqlite", create=True) as store:
        store.add_cases(
            [case("Llama-3.1-8B-tiny", hidden), case("Llama-99B-nonexistent", hidden), case(None, [])], "test"
        )
    module = TTTV1 / "rmsnorm.py"
    notes = case_notes(tmp_path / "s.sqlite", module, "RMSNorm", ("decode", "prefill"))
    assert len(notes) == 3, notes
    assert "not in the tttv1 catalogue (Llama-99B-nonexistent)" in notes[0]
    assert "1 recorded case(s) of tttv1.tt.rmsnorm:RMSNorm have no model name" in notes[1]
    assert "1 recorded case(s) of tttv1.tt.rmsnorm:RMSNorm have no recorded tensor input" in notes[2]
    recorded, _ = cases_from_store(tmp_path / "s.sqlite", module, "RMSNorm", ("decode", "prefill"))
    # rows from `hidden`, not the default 32 (which only the case without a tensor input gets, as noted)
    assert {(c.seq_len, c.model) for c in recorded["1d"]} == {
        (64, "Llama-3.1-8B-tiny"),
        (64, "Llama-99B-nonexistent"),
        (32, None),  # the conftest's default model
    }
    # the recorded inputs travel with the case, by parameter name
    assert sorted(len(c.inputs) for c in recorded["1d"]) == [0, 1, 1]
    assert all(c.inputs == (("hidden", hidden[0][1]),) for c in recorded["1d"] if c.inputs)


# --- one list layout with collect-cases emit (issue 23) --------------------------------------------------------


def _emit(store: Path, module: str, test_file: Path, *options: str) -> int:
    from tttv2_tools.collect_cases.cli import main as collect_cases

    command = [
        "emit",
        "--store",
        str(store),
        "--target",
        str(TTTV1 / f"{module}.py"),
        "--into",
        str(test_file),
    ]
    return collect_cases([*command, "--name", "CASES", *options, "-q"])


@pytest.mark.parametrize(
    "module, target, files",
    [
        # two generated modules: each test's header names its topology; recorded entries are past 110 columns
        (
            "mlp",
            "tttv1.tt.mlp:MLP",
            {"test_mlp_1d.py": ["--topology", "1d"], "test_mlp_2d.py": ["--topology", "2d"]},
        ),
        # one module for every mesh, whose forward takes no mode
        ("embedding", "tttv1.tt.embedding:Embedding", {"test_embedding_1d.py": []}),
    ],
)
def test_emit_check_passes_right_after_cases(tmp_path, module, target, files):
    """``tttv2-refactor --cases`` writes its CASES as ``collect-cases emit`` does (one implementation): the first
    ``emit --check`` on the generated tests finds them up to date, and a real emit changes no byte."""
    store = _store(tmp_path / "cases.sqlite", target)
    argv = [
        TTTV1 / f"{module}.py",
        "--out",
        tmp_path / "m",
        "--tests-out",
        tmp_path / "t",
        "--cases",
        store,
        "-q",
    ]
    assert main([str(a) for a in argv]) == 0
    assert sorted(p.name for p in (tmp_path / "t").glob("test_*.py")) == sorted(files)
    for name, options in files.items():
        test_file = tmp_path / "t" / name
        before = test_file.read_bytes()
        assert f"# collect-cases: target={target} fields=mesh_device,mode,seq_len,model_name,recorded" in (
            before.decode()
        )
        assert _emit(store, module, test_file, *options, "--check") == 0, name
        assert _emit(store, module, test_file, *options) == 0 and test_file.read_bytes() == before, name


def test_a_module_without_modes_gets_the_documented_forward_mode_in_both_tools(tmp_path):
    """docs/refactor.md: `mode` is "forward" for a module whose forward takes no mode. The Embedding's recorded
    cases have no mode: --cases and a fresh emit (a new file: the generated tests' columns) write "forward" and
    the same ids, which the default matrix's ids also use."""
    store = _store(tmp_path / "cases.sqlite", "tttv1.tt.embedding:Embedding")
    argv = [
        TTTV1 / "embedding.py",
        "--out",
        tmp_path / "m",
        "--tests-out",
        tmp_path / "t",
        "--cases",
        store,
        "-q",
    ]
    assert main([str(a) for a in argv]) == 0
    generated = _listed_ids(tmp_path / "t" / "test_embedding_1d.py")
    assert len(generated) == 40 and all(mode == "forward" for mode, _ in generated.values())
    assert "1x8-forward-32-Llama-3.1-8B-tiny" in generated
    fresh = tmp_path / "test_recorded_embedding.py"
    assert _emit(store, "embedding", fresh) == 0
    assert _listed_ids(fresh) == generated
    default = tmp_path / "default"
    argv = [TTTV1 / "embedding.py", "--out", default / "m", "--tests-out", default / "t", "-q"]
    assert main([str(a) for a in argv]) == 0
    assert _listed_ids(default / "t" / "test_embedding_1d.py")["1x8-forward-128"] == ("forward", 128)


def _listed_ids(test_file: Path) -> dict[str, tuple]:
    """id -> (mode, rows) of every entry of CASES."""
    tree = ast.parse(test_file.read_text())
    cases = next(
        n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CASES"
    )
    return {
        next(k.value.value for k in call.keywords if k.arg == "id"): (
            ast.literal_eval(call.args[1]),
            ast.literal_eval(call.args[2]),
        )
        for call in cases.elts
    }


def test_a_one_mode_module_names_its_mode_in_the_list_header(tmp_path):
    """A module with only a decode forward over a store that also has prefill cases: the list keeps the decode
    ones and its header says `mode=decode`, so `emit --mode decode --check` agrees with it."""
    from tttv2_tools.refactor.cases import cases_list

    store = _store(tmp_path / "cases.sqlite", "tttv1.tt.mlp:MLP")
    code = cases_list(store, TTTV1 / "mlp.py", "MLP", ("decode",), "1d")
    assert code.splitlines()[0].endswith("recorded topology=1d mode=decode")
    test_file = tmp_path / "test_decode_mlp.py"
    test_file.write_text(f"import pytest\n\n{code}\n")
    assert _emit(store, "mlp", test_file, "--topology", "1d", "--mode", "decode", "--check") == 0
    assert _emit(store, "mlp", test_file, "--topology", "1d", "--check") == 1  # the prefill cases are missing
    both = cases_list(store, TTTV1 / "mlp.py", "MLP", ("decode", "prefill"), "1d")
    assert both.splitlines()[0].endswith("recorded topology=1d") and len(both) > len(code)
