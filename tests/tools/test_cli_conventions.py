"""docs/cli.md: the four commands answer the same bad invocations in the same shape (tools/_cli.py)."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pytest

from tttv2.testing import _coverage_cli
from tttv2_tools import _cli
from tttv2_tools.collect_cases import cli as collect_cli
from tttv2_tools.collect_cases.store import CaseStore
from tttv2_tools.refactor import cli as refactor_cli
from tttv2_tools.trace_dependencies import cli as trace_cli

FIX = Path(__file__).parent / "fixtures"
MLP = FIX / "g2" / "mlp.py"


def _commands(tmp_path):
    """Each command, with a run that is valid apart from the one thing each case below changes."""
    store = tmp_path / "cases.sqlite"
    CaseStore(store, create=True).close()
    return {
        "trace-deps": (trace_cli.main, [str(MLP)]),
        "tttv2-refactor": (refactor_cli.main, [str(MLP), "--out", str(tmp_path / "out")]),
        "collect-cases": (collect_cli.main, ["list", "--store", str(store)]),
        "tttv2-coverage": (_coverage_cli.main, ["--store", str(store), "--tests", str(tmp_path)]),
    }


TOOLS = ["trace-deps", "tttv2-refactor", "collect-cases", "tttv2-coverage"]


@pytest.mark.parametrize("tool", TOOLS)
def test_version_is_the_package_version_and_the_schemas_on_one_line(tool, tmp_path, capsys):
    main, _ = _commands(tmp_path)[tool]
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    out = capsys.readouterr().out
    assert (
        exc.value.code == 0 and out.startswith(f"{tool} {_cli.package_version()} (") and out.count("\n") == 1
    )


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unknown_option_is_a_usage_error_naming_it(tool, tmp_path, capsys):
    main, argv = _commands(tmp_path)[tool]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--no-such-option"])
    err = capsys.readouterr().err
    assert exc.value.code == _cli.EXIT_USAGE and "error:" in err and "--no-such-option" in err


@pytest.mark.parametrize("tool", TOOLS)
def test_a_missing_input_is_one_error_line_phrased_the_same(tool, tmp_path, capsys):
    main, argv = _commands(tmp_path)[tool]
    missing = tmp_path / "nope" / "missing.py"
    if tool in ("trace-deps", "tttv2-refactor"):
        argv = [str(missing), *argv[1:]]
    elif tool == "collect-cases":
        argv = ["list", "--store", str(missing)]
    else:
        argv = [*argv[:3], str(missing)]
    assert main(argv) == _cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"{tool}: error: ") and err.count("\n") == 1, err
    assert f"{missing}: no such file" in err, err


@pytest.mark.parametrize("tool", TOOLS)
def test_common_options_are_accepted_everywhere(tool, tmp_path):
    module = {
        "trace-deps": trace_cli,
        "tttv2-refactor": refactor_cli,
        "collect-cases": collect_cli,
        "tttv2-coverage": _coverage_cli,
    }[tool]
    _, argv = _commands(tmp_path)[tool]
    args = module.parse_args([*argv, "-q", "--debug"])
    assert args.quiet is True and args.debug is True
    assert module.parse_args([*argv, "--quiet"]).quiet is True
    if tool != "tttv2-refactor":  # the three that print tables
        assert module.parse_args([*argv, "--width", "99"]).width == 99
        with pytest.raises(SystemExit):
            module.parse_args([*argv, "--width", "5"])


@pytest.mark.parametrize("tool", TOOLS)
def test_an_internal_error_is_one_line_and_exit_3_with_the_same_shape(tool, tmp_path, capsys, monkeypatch):
    main, argv = _commands(tmp_path)[tool]
    entry = {
        "trace-deps": (trace_cli, "_run"),
        "tttv2-refactor": (refactor_cli, "_main"),
        "collect-cases": (collect_cli.VERBS, "list"),
        "tttv2-coverage": (_coverage_cli, "_main"),
    }[tool]

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    if isinstance(entry[0], dict):
        monkeypatch.setitem(entry[0], entry[1], broken)
    else:
        monkeypatch.setattr(entry[0], entry[1], broken)
    assert main(argv) == _cli.EXIT_INTERNAL
    assert capsys.readouterr().err == f"{tool}: internal error: ZeroDivisionError: a bug (run with --debug)\n"
    assert main([*argv, "--debug"]) == _cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("(run with --debug)\n")


def test_normalise_argv_never_gives_a_bare_flag_a_positional():
    flags = ["--json", "--html"]
    assert _cli.normalise_argv(["a.py", "--json", "b.py"], flags) == ["a.py", "--json=-", "b.py"]
    assert _cli.normalise_argv(["--json", "-", "a.py"], flags) == ["--json=-", "a.py"]
    assert _cli.normalise_argv(["--json=x", "--", "--json"], flags) == ["--json=x", "--", "--json"]
    told = []
    argv = _cli.normalise_argv(
        ["--html", "out.html", "--json", "m.py"],
        flags,
        lambda w: not w.endswith(".py"),
        lambda *a: told.append(a),
    )
    assert argv == ["--html=out.html", "--json=-", "m.py"] and told == [("--html", "out.html")]


def test_help_shows_an_output_option_as_it_is_typed():
    p = argparse.ArgumentParser(prog="x", formatter_class=_cli.HelpFormatter)
    _cli.add_output(p, "--json", "json")
    text = p.format_help()
    assert "[--json[=FILE]]" in text and "  --json[=FILE]" in text and "--json FILE" not in text
    with pytest.raises(SystemExit):  # an empty FILE and a repeated flag are usage errors
        p.parse_args(["--json="])
    with pytest.raises(SystemExit):
        p.parse_args(["--json=a", "--json=b"])


def test_the_table_width_is_the_same_in_a_pipe(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert _cli.table_width(None) == _cli.PIPE_WIDTH == 140
    assert _cli.table_width(60) == 60

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdout", Terminal())
    assert _cli.table_width(None) is None  # the terminal's own width (rich asks it)

    class Closed(io.StringIO):
        def isatty(self):
            raise ValueError("I/O operation on closed file")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert _cli.table_width(None) == _cli.PIPE_WIDTH


def test_the_version_falls_back_to_the_source_tree(monkeypatch):
    from importlib import metadata

    import tttv2

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert _cli.package_version() == tttv2.__version__


def test_ctrl_c_after_a_file_was_written_names_it(tmp_path, capsys, monkeypatch):
    """trace-deps --json=FILE then Ctrl-C during the terminal report: the file is in place, and said so (never
    "nothing written" after "wrote FILE"); tttv2-coverage's Ctrl-C is one line and 130 too."""
    from tttv2_tools.trace_dependencies import report

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "render", interrupt)
    out = tmp_path / "a.json"
    assert trace_cli.main([str(MLP), f"--json={out}", "--report"]) == _cli.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.endswith(f"trace-deps: interrupted; already written: {out}\n") and out.is_file(), err
    monkeypatch.setattr(_coverage_cli, "_main", interrupt)
    main, argv = _commands(tmp_path)["tttv2-coverage"]
    assert main(argv) == _cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "tttv2-coverage: interrupted; nothing written\n"


# --- one-line usage errors, and tttv2-run among the commands ------------------------------------------------------


def _exit_code(main, argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's refusals
        return exc.code


@pytest.mark.parametrize(
    ("tool", "argv", "names"),
    [
        ("trace-deps", [str(MLP), "--no-such-option"], "unrecognized arguments: --no-such-option"),
        ("trace-deps", [str(MLP), "--width", "x"], "argument --width: expected an integer"),
        ("tttv2-refactor", [str(MLP)], "the following arguments are required: --out"),
        ("collect-cases", [], "the following arguments are required: VERB"),
        ("collect-cases", ["emit", "--store", "s"], "emit: the following arguments are required: --target"),
        ("collect-cases", ["list", "--store", "s", "--mode", "x"], "list: argument --mode: invalid choice"),
        ("tttv2-coverage", ["--tests", "t"], "the following arguments are required: --store"),
        ("tttv2-run", ["--np", "2", "--bogus", "--", "true"], "unrecognized arguments: --bogus"),
    ],
)
def test_a_usage_error_is_one_line_with_the_tools_prefix(tool, argv, names, capsys):
    """argparse's own refusals too: no usage block before the line (tools/_cli.ArgumentParser)."""
    from tttv2.distributed import run as run_cli

    main = {
        "trace-deps": trace_cli.main,
        "tttv2-refactor": refactor_cli.main,
        "collect-cases": collect_cli.main,
        "tttv2-coverage": _coverage_cli.main,
        "tttv2-run": run_cli.main,
    }[tool]
    assert _exit_code(main, argv) == _cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"{tool}: error: ") and names in err and err.count("\n") == 1, err
    assert err.rstrip().endswith("--help)") and "usage:" not in err


def test_tttv2_run_speaks_the_same_language(capsys, monkeypatch):
    """--version, and an internal error in the one shape (with --debug: the traceback, then the same line)."""
    from tttv2.distributed import run as run_cli

    with pytest.raises(SystemExit) as done:
        run_cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"tttv2-run {_cli.package_version()}\n"

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(run_cli, "run", broken)
    assert run_cli.main(["--np", "1", "--", "true"]) == _cli.EXIT_INTERNAL
    assert (
        capsys.readouterr().err == "tttv2-run: internal error: ZeroDivisionError: a bug (run with --debug)\n"
    )


# --- MODULE[:CLASS]: one way to name what a command works on ------------------------------------------------------


def test_split_target_and_module_resolution(tmp_path, monkeypatch):
    assert _cli.split_target("tttv1/tt/mlp.py:MLP") == ("tttv1/tt/mlp.py", "MLP")
    assert _cli.split_target("tttv1.tt.mlp:Outer.Inner") == ("tttv1.tt.mlp", "Outer.Inner")
    assert _cli.split_target("mlp.py") == ("mlp.py", None)
    assert _cli.split_target("c:/models/mlp.py") == ("c:/models/mlp.py", None)  # a colon inside a path
    for bad in ("mlp.py:", ":MLP", "mlp.py:3"):
        with pytest.raises(ValueError, match=r"expected MODULE\[:CLASS\]"):
            _cli.split_target(bad)
    odd = tmp_path / "odd:name.py"
    odd.write_text("")
    assert _cli.split_target(str(odd)) == (str(odd), None)  # an existing file is a file, colon or not
    # a dotted module: found here first, then under its importable top package; never imported
    package = tmp_path / "pkg" / "sub"
    package.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert _cli.module_file("pkg.sub.mod") == Path("pkg/sub/mod.py").resolve()
    assert _cli.module_file("pkg.sub") == Path("pkg/sub/__init__.py").resolve()
    assert _cli.module_file("pkg.nope") == Path("pkg.nope")  # not found: the caller says "no such file"
    assert _cli.module_file("mlp.py") == Path("mlp.py")
    assert _cli.dotted_module(package / "mod.py") == "pkg.sub.mod"
    monkeypatch.chdir(FIX.parent)
    import tttv2

    found = _cli.module_file("tttv2.testing._coverage_cli")  # through find_spec of the top package only
    assert found == Path(tttv2.__file__).parent / "testing" / "_coverage_cli.py"
    assert _cli.names_module("pkg.x:C") and _cli.names_module("a.py") and not _cli.names_module("r.json")
    assert not _cli.names_module("r.json:")
    import argparse as a_top_level_module

    assert _cli.module_file("argparse") == Path(
        a_top_level_module.__file__
    )  # a top-level module, not a package
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None)  # find_spec raises ValueError for it
    assert _cli.module_file("__main__.x") == Path("__main__.x")


def test_collect_cases_targets_without_a_class_are_read_from_the_source(tmp_path):
    """``--target FILE`` (no CLASS): the main class, else the first class with an entry; a missing file, a source
    that does not parse and one with no class to record are one clear TargetError each."""
    from tttv2_tools.collect_cases.errors import TargetError
    from tttv2_tools.collect_cases.targets import parse_target

    two = tmp_path / "two.py"  # two unrelated classes with an entry: no main class, so the first one
    two.write_text(
        "class A:\n    def forward(self, x):\n        return x\n\n\nclass B:\n    def __call__(self):\n        pass\n"
    )
    assert parse_target(str(two)).name == "two:A"
    for text, source, message in (
        (str(tmp_path / "nope.py"), None, "MODULE .*nope.py: no such file"),
        (
            str(tmp_path / "broken.py"),
            "def f(:\n",
            "cannot read the module's source to choose its class; write broken:CLASS",
        ),
        (
            str(tmp_path / "plain.py"),
            "class P:\n    pass\n",
            "has no class with a forward\\(\\) or __call__\\(\\); write plain:CLASS",
        ),
    ):
        if source is not None:
            Path(text).write_text(source)
        with pytest.raises(TargetError, match=message):
            parse_target(text)


RFIX = FIX / "fn_t3k" / "rotary_attention.py"  # Falcon-40B's style: a rotary class before the attention class


def test_every_command_takes_the_same_target_words(tmp_path, capsys):
    """trace-deps, tttv2-refactor and collect-cases accept MODULE[:CLASS] in its three spellings: a file with a
    class, a dotted module with a class, and a file alone (its main class, chosen by one rule)."""
    from tttv2_tools.collect_cases.targets import parse_target

    dotted = _cli.dotted_module(RFIX)
    for word, cls in (
        (f"{RFIX}:TtRotaryEmbedding", "TtRotaryEmbedding"),
        (f"{RFIX}", "TtRotaryAttention"),
    ):
        assert parse_target(word).name == f"{dotted}:{cls}"
        assert trace_cli.main([word, "--json=-", "-q", "--no-helpers"]) == 0
        assert json.loads(capsys.readouterr().out)["module_class"] == cls
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(RFIX.parent.parent)
        word = f"{RFIX.parent.name}.{RFIX.stem}:TtRotaryAttention"  # dotted, found from here
        assert parse_target(word).name == word
        assert trace_cli.main([word, "--json=-", "-q", "--no-helpers"]) == 0
        assert json.loads(capsys.readouterr().out)["module_class"] == "TtRotaryAttention"
        args = refactor_cli.parse_args(["--json", word, "--out", str(tmp_path)])
        assert args.module == word and args.json == "-"  # a target word after a bare flag is the MODULE
    capsys.readouterr()


@pytest.mark.parametrize("tool", ["trace-deps", "tttv2-refactor"])
def test_the_old_class_option_still_works_with_a_warning(tool, tmp_path, capsys):
    if tool == "trace-deps":
        code = trace_cli.main([str(RFIX), "--class", "TtRotaryEmbedding", "--json=-", "--no-helpers"])
        out, err = capsys.readouterr()
        assert json.loads(out)["module_class"] == "TtRotaryEmbedding"
    else:
        code = refactor_cli.main([str(MLP), "--class", "MLP", "--out", str(tmp_path / "o"), "--check"])
        err = capsys.readouterr().err
    assert code in (0, 1) and f"{tool}: warning: '--class " in err and ":" in err.split("write ", 1)[1]
    main = trace_cli.main if tool == "trace-deps" else refactor_cli.main
    extra = [] if tool == "trace-deps" else ["--out", str(tmp_path / "o")]
    assert main([f"{MLP}:MLP", "--class", "Other", *extra]) == _cli.EXIT_USAGE
    assert capsys.readouterr().err.endswith(
        "MODULE names class MLP and --class Other; name it once, as MODULE:CLASS\n"
    )


# --- tables wrap, never cut; one width in a pipe -------------------------------------------------------------------


def test_trace_deps_tables_wrap_names_instead_of_cutting_them(capsys):
    """The built-in MLP's config reads: at 140 columns (a pipe) the longest read is whole (it was cut at 48
    characters: ``self.model_config["FF1_OUT_REDUCE_SCATTER_MEMCF…``); at 50 columns the table folds, no ``…``."""
    assert trace_cli.main([]) == 0
    out = capsys.readouterr().out
    assert 'self.model_config["FF1_OUT_REDUCE_SCATTER_MEMCFG"]' in out
    assert max(len(line) for line in out.splitlines()) <= _cli.PIPE_WIDTH
    assert trace_cli.main(["--width", "50"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Config reads") : out.index("ModelArgs members read")]
    assert "…" not in section and max(len(line) for line in out.splitlines()) <= 50


def test_coverage_and_test_suite_tables_wrap_and_use_the_pipe_width(monkeypatch):
    from rich.console import Console

    from tttv2.testing._coverage import coverage_report
    from tttv2.testing._suite import CheckResult, TestSuite
    from tttv2_tools.collect_cases.cases import Case

    cases = [
        Case(
            "tttv1.tt.mlp:MLP",
            {"mesh_shape": [1, 8], "mode": "prefill", "model_name": "Llama-3.1-70B-Instruct"},
        )
    ]
    narrow = Console(file=io.StringIO(), width=40)
    report = coverage_report([], cases, modules=["MLP1D"])
    report.print(narrow)
    assert "…" not in narrow.file.getvalue()
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    report.print()  # in a pipe: 140 columns, every cell whole
    assert "tttv1.tt.mlp:MLP (1d)" in sys.stdout.getvalue()
    suite = TestSuite.__new__(TestSuite)  # the table alone: no model needed
    suite.results = [
        CheckResult(
            "layer0_attention_with_a_long_name", "attention", "decode", 32, 0.9999871, 1.5e-3, 12.25, 3.5
        )
    ]
    suite.console = None
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    suite.print()
    printed = sys.stdout.getvalue()
    assert "0.999987" in printed and "layer0_attention_with_a_long_name" in printed
    assert max(len(line) for line in printed.splitlines()) > 80  # the pipe width (140), not rich's 80
    suite.console = Console(file=io.StringIO(), width=40)
    suite.print()
    assert "…" not in suite.console.file.getvalue()


def test_the_sweep_summary_wraps_model_names_and_numbers():
    from rich.console import Console

    from tttv2_tools.collect_cases.sweep import Run, summary_table

    runs = [Run("Llama-3.1-70B-Instruct-tiny", "T3K", Path("a.log"), 0, 123.4, 32)]
    narrow = Console(file=io.StringIO(), width=24)
    narrow.print(summary_table(runs, ["T3K"]))
    text = narrow.file.getvalue()
    assert "…" not in text and "123.4" in text.replace("\n", "").replace("│", "").replace(" ", "")
