"""The pytest plugin and ``sweep`` (with a stand-in demo: the real catalogue sweep is in the docs/benchmark)."""

from __future__ import annotations

import importlib
import textwrap

import pytest
from rich.console import Console

from tttv2_tools.collect_cases import CollectCasesError, load_cases
from tttv2_tools.collect_cases.cli import main
from tttv2_tools.collect_cases.sweep import parse_meshes, parse_models, summary_table, sweep
from tttv2_tools.collect_cases.targets import parse_target

pytest_plugins = ["pytester"]
# the inner sessions need none of these (hypothesis' summary would import and rewrite all of hypothesis)
QUIET = ("-p", "no:hypothesispytest", "-p", "no:cacheprovider")

SUITE = textwrap.dedent(
    """
    import pytest
    from plain_layers import Plain

    @pytest.mark.parametrize("value", [1, 2, 2, 3])
    def test_uses_the_module(value):
        Plain(model_name="Suite-1B").forward(value, mode="prefill")
    """
)


def test_plugin_records_while_a_suite_runs(pytester, plain_module, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(plain_module))
    pytester.makepyfile(test_suite=SUITE)
    store = tmp_path / "s.sqlite"
    result = pytester.runpytest_inprocess(
        f"--collect-cases={store}", "--collect-target=plain_layers:Plain", "--collect-field=v=x", *QUIET
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["collect-cases: 4 calls, 3 distinct cases (3 new) recorded into *"])
    cases = load_cases(store, "plain_layers:Plain")
    assert sorted((c.fields["extra"]["v"], c.hits) for c in cases) == [(1, 1), (2, 2), (3, 1)]
    assert all(c.mode == "prefill" and c.first_command.startswith("pytest --collect-cases=") for c in cases)
    plain_layers = importlib.import_module("plain_layers")  # written by the fixture, not a distribution
    assert not hasattr(plain_layers.Plain.forward, "__collect_cases_original__")  # unpatched after the run


@pytest.mark.parametrize(
    "args, message",
    [
        (["--collect-target=plain_layers:Plain"], "--collect-target: needs --collect-cases=STORE"),
        (["--collect-cases={store}"], "needs at least one --collect-target"),
        (["--collect-cases={store}", "--collect-target=plain_layers:Nope"], "has no attribute 'Nope'"),
        (["--collect-cases={store}", "--collect-target=bad"], "found no source of module bad"),
        (["--collect-cases={store}", "--collect-target=bad:"], "expected MODULE[:CLASS]"),
    ],
)
def test_plugin_usage_errors(pytester, plain_module, tmp_path, monkeypatch, args, message):
    monkeypatch.syspath_prepend(str(plain_module))
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_inprocess(*(a.format(store=tmp_path / "s.sqlite") for a in args), *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


FAKE_DEMO = textwrap.dedent(
    """
    import argparse
    from plain_layers import Plain

    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--mesh")
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    print("demo", args.model, args.mesh)
    for _ in range(args.steps):
        Plain(model_name=args.model).forward(args.mesh, mode="decode")
    raise SystemExit(3 if args.mesh == "TG" else 0)
    """
)


def test_sweep_runs_models_by_meshes_in_parallel_into_one_store(plain_module, tmp_path, monkeypatch):
    (plain_module / "fake_demo.py").write_text(FAKE_DEMO)
    monkeypatch.chdir(plain_module)
    monkeypatch.setenv("PYTHONPATH", str(plain_module))
    store, logs = tmp_path / "s.sqlite", tmp_path / "logs"
    console = Console(record=True, width=160)
    runs = sweep(
        store,
        ["A-1B", "B-7B"],
        ["N150", "T3K", "TG"],
        [parse_target("plain_layers:Plain")],
        fields=(),
        jobs=3,
        logs=logs,
        demo_args=["--steps", "2"],
        console=console,
        demo="fake_demo",
    )
    assert [(r.model, r.mesh, r.code) for r in runs] == [
        (m, x, 3 if x == "TG" else 0) for m in ("A-1B", "B-7B") for x in ("N150", "T3K", "TG")
    ]
    assert all(r.calls == 2 for r in runs)  # a failed run keeps what it recorded
    assert (logs / "B-7B-T3K.log").read_text().startswith("demo B-7B T3K")
    cases = load_cases(store, "plain_layers:Plain")
    assert len(cases) == 2 and sum(c.hits for c in cases) == 12  # Plain's mesh is fixed: 1 case per model
    console.print(summary_table(runs, ["N150", "T3K", "TG"]))
    text = console.export_text()
    assert "FAILED (3)" in text and "see A-1B-TG.log" in text and "ok" in text


def test_sweep_arguments_are_checked(tmp_path, capsys):
    assert parse_models("all")[:1] == ["Llama-3.2-1B-tiny"]
    assert parse_meshes("n150, t3k,2x4") == ["N150", "T3K", "2x4"]
    with pytest.raises(CollectCasesError, match="--models: expected 'all' or"):
        parse_models("Llama-9000")
    with pytest.raises(CollectCasesError, match="--meshes: expected"):
        parse_meshes("T9K")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "old.log").write_text("a previous sweep")
    with pytest.raises(CollectCasesError, match=r"--logs .*used: exists and is not an empty folder"):
        sweep(tmp_path / "s.sqlite", ["m"], ["N150"], [], logs=tmp_path / "used")
    with pytest.raises(CollectCasesError, match="--jobs: expected at least 1"):
        sweep(tmp_path / "s.sqlite", ["m"], ["N150"], [], jobs=0, logs=tmp_path / "logs")
    assert main(["sweep", "--store", str(tmp_path / "s.sqlite"), "--meshes", "Mars"]) == 2
    assert "--meshes: expected" in capsys.readouterr().err
