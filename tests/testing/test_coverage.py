"""Parameter coverage: recorded TTTv1 cases read back as model dimensions, the recorder, the comparison (untested
values and combinations, unknown values), TestSuite(track_coverage=True) and the tttv2-coverage command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from tttv2 import modules
from tttv2.modules import MLP1D, LazyWeight, RMSNorm1D
from tttv2.testing import CoverageRecorder, TestSuite, coverage_report
from tttv2.testing._coverage import COVERAGE, params_of_case
from tttv2.testing._coverage_cli import main
from tttv2_tools.collect_cases import Case, CaseStore
from tttv2_tools.collect_cases.csvio import import_csv

CSV = Path(__file__).parents[1] / "tools" / "collect_cases" / "data" / "tttv1_catalogue_cases.csv"


@pytest.fixture(scope="module")
def cases():
    return import_csv(CSV, None)


@pytest.fixture(scope="module")
def store(tmp_path_factory, cases):
    path = tmp_path_factory.mktemp("store") / "cases.sqlite"
    with CaseStore(path, create=True) as opened:
        opened.add_cases(cases, "import of the tttv1 catalogue sweep")
    return path


def _classes_of(case):
    return [
        name
        for name, spec in COVERAGE.items()
        if spec.target == case.target and spec.topology == case.topology
    ]


def test_recorded_cases_give_the_catalogue_dimensions(cases):
    """Every case of the real tttv1 catalogue sweep (per-device shapes on 1x1 … 8x4) reads back as its model's
    dimensions."""
    from tttv1.catalogue import config_dict

    checked = set()
    for case in cases:
        for name in _classes_of(case):
            params = params_of_case(name, case)
            model = config_dict(case.flat["model_name"])
            head_dim = model.get("head_dim") or model["hidden_size"] // model["num_attention_heads"]
            assert params["dim"] == model["hidden_size"], (name, case.flat)
            if name.startswith("MLP"):
                assert params["hidden_dim"] >= model["intermediate_size"] and params["hidden_dim"] % 32 == 0
            if name.startswith("Attention"):
                assert (params["n_heads"], params["head_dim"]) == (model["num_attention_heads"], head_dim)
                assert params["n_kv_heads"] in (None, model["num_key_value_heads"])
            if name.startswith("Embedding"):
                assert params["vocab_size"] == model["vocab_size"]
            if name.startswith("LMHead"):
                assert model["vocab_size"] <= params["padded_vocab_size"] < model["vocab_size"] + 32 * 32
            checked.add(name)
    assert checked == set(COVERAGE)


def test_kv_heads_are_unknown_when_every_device_holds_one(cases):
    known = [
        params_of_case("Attention1D", c)["n_kv_heads"]
        for c in cases
        if c.topology == "1d" and c.target.endswith("Attention")
    ]
    by_mesh = {}
    for case, value in zip(
        [c for c in cases if c.topology == "1d" and c.target.endswith("Attention")], known
    ):
        by_mesh.setdefault(case.mesh_shape, set()).add(value)
    assert by_mesh[(1, 1)] == {8} and by_mesh[(1, 8)] == {None}


def _mlp(mesh, hidden=512):
    w = np.random.default_rng(0).standard_normal((256, hidden)).astype(np.float32) / 16
    return MLP1D(LazyWeight(w, device=mesh), LazyWeight(w.T.copy()), LazyWeight(w))


def test_recorder_records_forwards_and_restores_the_classes(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 1))
    before = {name: dict(vars(getattr(modules, name))) for name in COVERAGE}
    mlp = _mlp(mesh)
    with CoverageRecorder() as recorder:
        mlp.decode_forward(LazyWeight(np.ones((1, 1, 32, 256), np.float32)))
        mlp.decode_forward(LazyWeight(np.ones((1, 1, 32, 256), np.float32)))  # the same configuration
        mlp.prefill_forward(LazyWeight(np.ones((1, 1, 64, 256), np.float32)))
    assert {name: dict(vars(getattr(modules, name))) for name in COVERAGE} == before
    assert sorted((r.module, r.values["mode"], r.values["seq_len"]) for r in recorder.records) == [
        ("MLP1D", "decode", 32),
        ("MLP1D", "prefill", 64),
    ]
    assert next(iter(recorder.records)).values["hidden_dim"] == 512
    mlp.decode_forward(LazyWeight(np.ones((1, 1, 32, 256), np.float32)))
    assert len(recorder.records) == 2  # not recording any more


def _case(mesh, mode, seq, dim, w1_dtype="bfloat8_b"):
    n = mesh[0] * mesh[1]
    return Case(
        "tttv1.tt.mlp:MLP",
        {
            "mesh_shape": list(mesh),
            "mode": mode,
            "inputs": [["x", {"shape": [1, 1, seq, dim], "dtype": "bfloat16"}]],
            "weights": {
                "w1": {"shape": [dim, 512 // n], "dtype": w1_dtype},
                "w2": {"shape": [512 // n, dim], "dtype": "bfloat8_b"},
            },
        },
    )


def test_report_lists_untested_values_and_combinations(ttnn_mesh_pool):
    with CoverageRecorder() as recorder:
        _mlp(ttnn_mesh_pool((1, 2))).decode_forward(LazyWeight(np.ones((1, 1, 32, 256), np.float32)))
    cases = [
        _case((1, 2), "decode", 32, 256),  # tested
        _case((1, 2), "prefill", 128, 256),  # another mode and length
        _case((1, 8), "decode", 32, 256, "bfloat4_b"),  # another mesh and dtype
        Case("tttv1.tt.mlp:MLP", {"mesh_shape": [1, 2], "mode": "decode"}),  # only the mesh and mode known
        Case("tttv1.tt.mlp:MLP", {"mesh_shape": [8, 4], "mode": "decode"}),  # another topology: not MLP1D's
    ]
    report = coverage_report(recorder.records, cases, modules=["RMSNorm1D"])
    assert report.store == "5 given cases"
    mlp = report.entry("MLP1D")
    assert len(mlp.recorded) == 4 and len(mlp.tested) == 1
    assert mlp.untested_values == {
        "mesh_shape": [(1, 8)],
        "mode": ["prefill"],
        "seq_len": [128],
        "w1_w3_dtype": ["bfloat4_b"],
    }
    assert [(c["mesh_shape"], c["mode"]) for c in mlp.untested_combinations] == [
        ((1, 2), "prefill"),
        ((1, 8), "decode"),
    ]
    assert mlp.unknown == {"seq_len": 1, "dim": 1, "hidden_dim": 1, "w1_w3_dtype": 1, "w2_dtype": 1}
    assert report.entry("RMSNorm1D").tested == [] and report.gaps == 2
    data = report.to_dict()
    assert data["classes"][0]["untested_values"]["mesh_shape"] == ["(1, 8)"]
    console = Console(file=io.StringIO(), width=200)
    report.print(console)
    text = console.file.getvalue()
    assert "MLP1D: recorded combinations no test ran" in text and "bfloat4_b" in text
    with pytest.raises(KeyError, match=r"no entry for 'LMHead1D'"):
        report.entry("LMHead1D")
    with pytest.raises(ValueError, match=r"no coverage mapping for RotarySetup1D"):
        coverage_report([], cases, modules=["RotarySetup1D"])


def test_suite_coverage_against_a_store(store, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 1))
    norm = RMSNorm1D(LazyWeight(np.ones(512, np.float32), device=mesh))
    model = type("Model", (), {"norm": norm})()

    def reference(x):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)

    with TestSuite(model, track_coverage=True, console=Console(file=io.StringIO())) as suite:
        suite.test(norm).reference(reference)
    report = suite.coverage_report(against=store)
    entry = report.entry("RMSNorm1D")
    assert {(t["mode"], t["seq_len"], t["dim"]) for t in entry.tested} == {
        ("prefill", 128, 512),
        ("decode", 32, 512),
    }
    # the catalogue sweep ran RMSNorm on 1x1, 1x2 and 1x8 (and prefill on 32 rows): only 1x1 at 128 / 32 is tested
    untested = {(c["mesh_shape"], c["mode"], c["seq_len"]) for c in entry.untested_combinations}
    assert ((1, 1), "prefill", 32) in untested and ((1, 8), "decode", 32) in untested
    assert ((1, 1), "prefill", 128) not in untested and ((1, 1), "decode", 32) not in untested
    assert entry.untested_values["mesh_shape"] == [(1, 2), (1, 8)]


TINY_TEST = """
import numpy as np
from tttv2.modules import MLP1D, LazyWeight

def test_mlp(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 1))
    w = np.random.default_rng(0).standard_normal((512, 1792)).astype(np.float32) / 16
    mlp = MLP1D(LazyWeight(w, device=mesh), LazyWeight(w.T.copy()), LazyWeight(w))
    mlp.decode_forward(LazyWeight(np.ones((1, 1, 32, 512), np.float32)))
    assert {FAIL}
"""


def test_the_command(store, tmp_path, capsys):
    tests = tmp_path / "test_tiny.py"
    tests.write_text(TINY_TEST.replace("{FAIL}", "True"))
    out = tmp_path / "report.json"
    assert main(["--store", str(store), "--tests", str(tests), "--module", "MLP1D", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    (mlp,) = report["classes"]
    assert mlp["module"] == "MLP1D" and mlp["tested"] == 1 and mlp["recorded"] == 36
    assert "'prefill'" in mlp["untested_values"]["mode"]
    # the tested combination (1x1 decode, 512 / 1792, bfloat8_b) is a recorded one: one fewer gap than cases
    assert len(mlp["untested_combinations"]) == len({json.dumps(c) for c in mlp["untested_combinations"]})
    assert "MLP1D: parameters" in capsys.readouterr().out
    assert report["schema"] == "tttv2-coverage"
    # a second run replaces its own earlier report; a file it did not write needs --force
    assert main(["--store", str(store), "--tests", str(tests), "--module", "MLP1D", "--json", str(out)]) == 0
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}')
    assert (
        main(["--store", str(store), "--tests", str(tests), "--module", "MLP1D", "--json", str(notes)]) == 2
    )
    assert "not a tttv2-coverage json report written earlier (pass --force" in capsys.readouterr().err
    assert notes.read_text() == '{"mine": 1}'
    assert (
        main(
            [
                "--store",
                str(store),
                "--tests",
                str(tests),
                "--module",
                "MLP1D",
                "--json",
                str(notes),
                "--force",
                "--fail-on-gaps",
            ]
        )
        == 1
    )
    assert main(["--store", str(store), "--tests", str(tests), "--json", str(store)]) == 2
    assert "onto the input file" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "none.sqlite"), "--tests", str(tests)]) == 2
    assert main(["--store", str(store), "--tests", str(tmp_path / "missing.py")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["--store", str(store), "--tests", str(tests), "-k", "nothing_matches"]) == 2
    failing = tmp_path / "test_tiny_failing.py"  # a new module name: pytest has imported test_tiny already
    failing.write_text(TINY_TEST.replace("{FAIL}", "False"))
    assert main(["--store", str(store), "--tests", str(failing), "--module", "MLP1D"]) == 1
    assert "some tests failed" in capsys.readouterr().err


def test_the_command_speaks_the_toolkit_language(store, tmp_path, capsys):
    """docs/cli.md: ``--json`` alone or ``-`` is the JSON on stdout (pytest's lines go to stderr, no tables),
    never a file named ``-``; -q leaves the tables out; --version; errors are ``tttv2-coverage: error:``."""
    from tttv2_tools import _cli

    tests = tmp_path / "test_tiny_cli.py"
    tests.write_text(TINY_TEST.replace("{FAIL}", "True"))
    base = ["--store", str(store), "--tests", str(tests), "--module", "MLP1D"]
    for flag in (["--json"], ["--json=-"], ["--json", "-"]):
        assert main([*base, *flag]) == 0, flag
        out, err = capsys.readouterr()
        assert json.loads(out)["schema"] == "tttv2-coverage" and "passed" in err
    assert not (tmp_path / "-").exists()
    assert main([*base, "-q"]) == 0 and "MLP1D: parameters" not in capsys.readouterr().out
    assert main([*base, "--width", "200"]) == 0 and "MLP1D: parameters" in capsys.readouterr().out
    assert main(["--store", str(store), "--tests", str(tmp_path / "missing.py")]) == 2
    assert (
        capsys.readouterr().err
        == f"tttv2-coverage: error: --tests {tmp_path / 'missing.py'}: no such file or folder\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert (
        capsys.readouterr().out == f"tttv2-coverage {_cli.package_version()} (JSON schema tttv2-coverage)\n"
    )
