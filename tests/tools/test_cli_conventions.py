"""docs/cli.md: the four commands answer the same bad invocations in the same shape (tools/_cli.py)."""

from __future__ import annotations

import argparse
import io
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
