"""trace-deps command line: outputs, determinism, bad input (clear message, exit code 2, never a traceback)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import networkx as nx
import pytest

from tttv2_tools.trace_dependencies import SCHEMA_VERSION, analyze
from tttv2_tools.trace_dependencies.cli import builtin_paths, main
from tttv2_tools.trace_dependencies.export import focus, to_dot, to_graphml, to_json

FIX = Path(__file__).parent / "fixtures"
MLP = str(FIX / "g2" / "mlp.py")
CFG = str(FIX / "g2" / "model_config.py")
BROKEN = 'class MLP:\n    def forward(self, x, mode):\n        if mode == "decode"\n            return x\n'


def run(capsys, *argv):
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_default_report_sections(capsys):
    code, out, err = run(capsys, MLP, CFG, "--width", "200")
    assert code == 0 and err == ""
    for section in (
        "Config reads (model_config keys)",
        "Definitions of the keys read",
        "Branches in mlp.py",
        "Branches in helpers the module calls",
        "Root parameters and hierarchy levels",
        "Terminal ttnn ops per path (forward)",
        "Not understood",
    ):
        assert section in out
    assert "QKV_OUT_GATHERED_MEMCFG" in out and "[survives when not (device is not None)]" in out
    assert "hw.num_devices → args.num_devices@model_config.py:29" in out  # proof chains


def test_builtin_input_when_no_arguments(capsys):
    module, _config = builtin_paths()
    assert module.name == "mlp.py" and module.parent.name == "tt"
    code, out, _ = run(capsys, "--quiet", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["module"].endswith("mlp.py") and data["config"].endswith("model_config.py")


def test_json_schema_and_determinism(capsys):
    code, first, _ = run(capsys, MLP, CFG, "--json")
    code2, second, _ = run(capsys, MLP, CFG, "--json")
    assert code == code2 == 0 and first == second
    data = json.loads(first)
    assert data["schema"] == "trace-deps" and data["schema_version"] == SCHEMA_VERSION
    for field in (
        "module",
        "config",
        "files",
        "stats",
        "keys_read",
        "reads",
        "definitions",
        "attr_definitions",
        "branches",
        "ops",
        "paths",
        "construction_ops",
        "roots",
        "levels",
        "unknowns",
        "skipped",
        "nodes",
        "edges",
    ):
        assert field in data
    ids = [n["id"] for n in data["nodes"]]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert {"id", "category", "level", "label", "loc", "kinds", "depth"} <= set(data["nodes"][0])
    assert all({"source", "target", "kind", "loc"} == set(e) for e in data["edges"])
    assert "seconds" not in data["stats"]  # nothing time-dependent
    branch = next(b for b in data["branches"] if b["loc"] == "mlp.py:51:15")
    assert branch["classification"] == "static" and branch["chain"]["static"][0]["node"] == "hw:num_devices"
    assert data["definitions"]["DECODE_RESIDUAL_MEMCFG"][0]["live"] is True


def test_graph_formats_to_files(tmp_path, capsys):
    paths = {fmt: tmp_path / f"out.{fmt}" for fmt in ("json", "dot", "graphml", "mermaid", "html", "svg")}
    argv = [MLP, CFG, "--quiet"]
    for fmt, path in paths.items():
        argv += [f"--{fmt}={path}"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and out == "" and err == ""
    g = nx.read_graphml(paths["graphml"])
    assert "key:MLP_ACT_MEMCFG" in g and g.nodes["hw:num_devices"]["category"] == "hardware"
    dot = paths["dot"].read_text()
    assert dot.startswith("digraph trace_deps {") and "subgraph cluster_hardware" in dot
    assert paths["mermaid"].read_text().startswith("flowchart LR")
    html = paths["html"].read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and 'id="data"' in html
    assert not re.search(r"(src|href)=\"https?://", html)  # self-contained: no network, no CDN
    svg = paths["svg"].read_text()
    assert svg.startswith("<svg") and svg.count('class="node"') == len(
        json.loads(paths["json"].read_text())["nodes"]
    )
    # an output file is the chosen output: the report's summary alone, as plain lines (rich is not even imported),
    # unless --report or -v asks for the whole report; -q: nothing
    code, out, err = run(capsys, MLP, CFG, f"--dot={paths['dot']}")
    assert code == 0 and err == f"wrote {paths['dot']} (dot)\n" and out.startswith("Summary: class MLP")
    assert "needs a look:" in out.splitlines()[-1] and "Config reads" not in out
    code, out, err = run(capsys, MLP, CFG, f"--dot={paths['dot']}", "-q")
    assert code == 0 and out == err == ""
    code, out, err = run(capsys, MLP, CFG, f"--dot={paths['dot']}", "-v")
    assert code == 0 and out.startswith("Summary: class MLP") and "Config reads" in out
    code, out, err = run(capsys, MLP, CFG, f"--dot={paths['dot']}", "--report")
    assert (
        f"wrote {paths['dot']} (dot)" in err
        and "Config reads" in out
        and out.startswith("Summary: class MLP")
    )
    # the report never shares stdout with an output
    code, out, err = run(capsys, MLP, CFG, "--json", "--report")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "only one output can go to stdout, got --json --report" in err


def test_the_report_starts_with_its_answer(capsys):
    """Issue 23: the keys reached through args.get_*() are counted with the direct reads, the roots, the branch
    counts and what needs a look come first, on an input in tt-metal's G3 style (tttv1/tt/mlp.py)."""
    mlp, config = builtin_paths()
    code, out, _ = run(capsys, mlp, config, "--width", "400")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "Summary: class MLP in mlp.py with model_config.py"
    keys = re.search(
        r"reads (\d+) config keys \((\d+) read directly, (\d+) more through args.get_\*\(\)\)", lines[1]
    )
    assert keys and int(keys[1]) == int(keys[2]) + int(keys[3]) and int(keys[3]) > 0
    assert "FF1_3_TG_PROGCFG" in lines[1] and "get_mlp_ff1_3_prg_config()" in lines[2]
    head = out[: out.index("Config reads (model_config keys)")]  # the summary, before the first table
    assert re.search(r"\n  root parameters, per-call inputs: .*x \(input\)", head)
    assert re.search(r"\n  branches in mlp.py: .*mode \d+", head) and "\n  needs a look: " in head
    assert out.index("Summary") < out.index("Config reads (model_config keys)")


def test_mode_topology_focus_why(capsys):
    code, out, _ = run(capsys, MLP, CFG, "--mode", "decode", "--topology", "2d", "--json")
    data = json.loads(out)
    assert data["assumptions"] == {"mode": "decode", "topology": "2d"}
    assert list(data["paths"]) == ["decode/galaxy"]
    assert "PREFILL_MLP_W1_W3_PRG_CONFIG" not in data["keys_read"]
    code, out, _ = run(capsys, MLP, CFG, "--focus", "FF1_3_TG_PROGCFG", "--mermaid")
    assert code == 0 and "FF1_3_TG_PROGCFG" in out and "ttnn.linear" not in out
    code, out, _ = run(capsys, MLP, CFG, "--why", "FF1_3_TG_PROGCFG", "--width", "200")
    assert code == 0 and out.startswith("why FF1_3_TG_PROGCFG: key:FF1_3_TG_PROGCFG")
    assert "→ args.is_galaxy" in out and "model_config.py:33:8" in out
    answers = [run(capsys, MLP, CFG, "--why", "nothing-like-this", *extra) for extra in ([], ["--json"])]
    for code, out, err in answers:  # the same one line on stderr, with and without --json; nothing on stdout
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err.startswith("trace-deps: error: --why 'nothing-like-this': nothing by that name")
    assert answers[0] == answers[1]
    code, _, err = run(capsys, MLP, CFG, "--focus", "nothing-like-this", "--dot")
    assert code == 2 and "matches nothing" in err


def test_progress_and_strict(capsys):
    code, _, err = run(capsys, MLP, CFG, "--progress", "--quiet")
    assert code == 0 and err == ""  # --quiet wins
    code, _, err = run(capsys, MLP, CFG, "--progress", "--json=/dev/null")
    assert code == 0 and "[trace-deps +" in err and "parsing" in err and "analysed" in err
    code, _, err = run(capsys, str(FIX / "bad" / "weird.py"), "--strict", "--quiet")
    assert code == 1 and "--strict" in err
    code, _, _ = run(capsys, str(FIX / "g3" / "mlp.py"), "--strict", "--quiet")
    assert code == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/no/such/mlp.py"], "MODULE /no/such/mlp.py: no such file"),
        ([MLP, "/no/such/model_config.py"], "CONFIG /no/such/model_config.py: no such file"),
        (["{broken}"], "broken.py:3:"),
        (
            [str(FIX / "bad" / "no_forward.py")],
            "no_forward.py:1: no class with a forward() or __call__() method",
        ),
        ([f"{MLP}:Nope"], "no class 'Nope'"),
        ([f"{MLP}:MLP", "--entry", "decode_forward"], "class MLP has no decode_forward() method"),
        ([f"{MLP}:"], "expected MODULE[:CLASS]"),
        ([f"{MLP}:MLP", "--class", "Other"], "MODULE names class MLP and --class Other; name it once"),
        ([MLP, "--json", "--dot"], "only one output can go to stdout"),
        ([MLP, "--dot=/no/such/folder/out.dot"], "folder /no/such/folder does not exist"),
        ([MLP, "{broken}"], "broken.py:3:"),
    ],
)
def test_usage_errors_exit_2_with_location(capsys, tmp_path, argv, message):
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    code, out, err = run(capsys, *(a.replace("{broken}", str(broken)) for a in argv))
    assert code == 2
    assert message in err and "Traceback" not in err + out


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--mode", "sideways"])
    assert exc.value.code == 2
    capsys.readouterr()


def test_internal_errors_are_one_line(capsys, monkeypatch):
    import tttv2_tools.trace_dependencies.api as api

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(api, "analyze", boom)
    code, _, err = run(capsys, MLP)
    assert code == 3 and "internal error: RuntimeError: kaboom" in err and "Traceback" not in err
    code, _out, err = run(capsys, MLP, "--debug")
    assert code == 3 and "Traceback" in err


def test_builtin_missing(monkeypatch, capsys, tmp_path):
    import importlib.util

    import tttv2_tools.trace_dependencies.cli as cli

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "a" / "b" / "cli.py"))
    code, _, err = run(capsys)
    assert code == 2 and "built-in input tttv1/tt/mlp.py is not available" in err


def test_partial_understanding_is_reported(capsys):
    code, out, _ = run(capsys, str(FIX / "bad" / "weird.py"), "--width", "200")
    assert code == 0
    assert "[unknown] unknown:dynkey:weird.py:17:23: model_config[name]: key is not a constant" in out
    assert "[warning] weird.py:1:0: model_config.py: no config module given" in out
    assert "getattr on ModelArgs with a non-constant name" in out
    a = analyze(FIX / "bad" / "weird.py")
    assert {s.reason for s in a.skipped} >= {"key is not a constant string"}


def test_helper_that_does_not_parse_is_skipped(tmp_path):
    (tmp_path / "ccl.py").write_text("def tt_all_reduce(x:\n")
    (tmp_path / "mlp.py").write_text(
        "from .ccl import tt_all_reduce\nclass MLP:\n    def forward(self, x, mode):\n        return tt_all_reduce(x)\n"
    )
    a = analyze(tmp_path / "mlp.py")
    assert any(s.what == "ccl.py" and "does not parse" in s.reason for s in a.skipped)
    assert a.stats["files"] == 1


def test_call_signature_mismatches_are_reported(tmp_path):
    (tmp_path / "ccl.py").write_text("def tt_all_reduce(x, mesh_device, cluster_axis=0):\n    return x\n")
    (tmp_path / "mlp.py").write_text(
        "from .ccl import tt_all_reduce\nclass MLP:\n    def forward(self, x, mode):\n"
        "        a = tt_all_reduce(x, 1, 2, 3)\n        b = tt_all_reduce(x, 1, 0, cluster_axis=1)\n"
        "        return tt_all_reduce(x, 1, rs_memory_config=None)\n"
    )
    reasons = sorted(s.reason for s in analyze(tmp_path / "mlp.py").skipped if s.what.startswith("call"))
    assert reasons == [
        "4 positional arguments, but tt_all_reduce() (ccl.py:1:0) takes 3",
        "argument 'cluster_axis' given by position and by keyword (tt_all_reduce() (ccl.py:1:0))",
        "tt_all_reduce() (ccl.py:1:0) has no parameter 'rs_memory_config'",
    ]


def test_exports_are_stable_api():
    a = analyze(MLP, CFG)
    assert to_json(a) == to_json(analyze(MLP, CFG))
    assert to_dot(a) == to_dot(analyze(MLP, CFG))
    small = focus(a, "mlp.py:51")
    assert set(small.graph) <= set(a.graph) and "branch:mlp.py:51:15" in small.graph
    assert "<graphml" in to_graphml(small)
    assert a.to_dict()["module"] == "mlp.py"


@pytest.mark.parametrize("columns", ["57", "200", "", "zero", "-3"])
def test_help_is_laid_out_as_argparse_would(monkeypatch, columns):
    # the parser reads the terminal width itself (argparse's default imports shutil for it): same help text
    import argparse
    import shutil

    from tttv2_tools.trace_dependencies import cli

    monkeypatch.setenv("COLUMNS", columns)
    assert cli.terminal_columns() == shutil.get_terminal_size().columns
    from tttv2_tools import _cli

    ours = cli.parser()
    width = shutil.get_terminal_size().columns - 2  # what argparse's own formatter picks
    monkeypatch.setattr(ours, "formatter_class", functools.partial(_cli.HelpFormatter, width=width))
    assert cli.parser().format_help() == ours.format_help()
    # an output option is shown as it is typed, never as the spelling it refuses (--json =FILE, --json FILE)
    text = cli.parser().format_help()
    assert "--json[=FILE]" in text and "--json =FILE" not in text and "--json FILE" not in text
    assert argparse.HelpFormatter is not _cli.HelpFormatter


def test_console_command_runs_main_then_freezes_the_collector():
    # the trace-deps command (console(), run in a process of its own as the console script runs it): main() on
    # sys.argv with the collector off and the run's engine, analysis and views kept (a list in a cycle), then
    # gc.freeze() (the process exits next; freeing them and its last collection would walk every object still
    # alive for nothing), and glibc's allocator told to keep freed memory
    import subprocess
    import sys

    script = f"""
import gc, sys
from tttv2_tools.trace_dependencies import api, cli
from tttv2_tools.trace_dependencies.engine import Engine
from tttv2_tools.trace_dependencies.model import Analysis
seen = {{}}
real_main, real_keep = cli.main, cli.keep_freed_memory
def spy():
    seen.update(kept=api.retained, enabled=gc.isenabled())
    return real_main()
def keep():
    seen["mallopt"] = real_keep()
    return seen["mallopt"]
cli.main, cli.keep_freed_memory = spy, keep
sys.argv = ["trace-deps", "--json", {MLP!r}, {CFG!r}]
before = gc.get_freeze_count()
code = cli.console()
kept = seen["kept"]
print(code, before, gc.get_freeze_count() > 0, seen["enabled"], "mallopt" in seen, kept[0] is kept,
      isinstance(kept[1], Engine), [type(x).__name__ for x in kept[2]], file=sys.stderr)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["schema"] == "trace-deps"
    assert done.stderr.strip() == "0 0 True False True True True ['Analysis', 'Analysis', 'Analysis']"


def test_console_command_steps_in_order(capsys, monkeypatch):
    # the command's steps in this process with the two that would outlive the test (mallopt, gc.freeze) recorded
    # instead of done: allocator first, the collector off while main() runs with the run kept, the freeze last
    import gc

    from tttv2_tools.trace_dependencies import api, cli

    steps: list = []
    real_main = cli.main

    def spy():
        steps.append(("main", gc.isenabled(), api.retained is not None and api.retained[0] is api.retained))
        return real_main()

    monkeypatch.setattr(cli, "keep_freed_memory", lambda: steps.append("mallopt"))
    monkeypatch.setattr(gc, "freeze", lambda: steps.append(("freeze", len(api.retained))))
    monkeypatch.setattr(cli, "main", spy)
    monkeypatch.setattr(api, "retained", None)  # restored after the test, with what the run kept
    monkeypatch.setattr("sys.argv", ["trace-deps", "--json", MLP, CFG])
    was_enabled = gc.isenabled()
    try:
        assert cli.console() == 0
    finally:
        (gc.enable if was_enabled else gc.disable)()
    assert steps == ["mallopt", ("main", False, True), ("freeze", 3)]  # the cycle, the engine, the views
    assert json.loads(capsys.readouterr().out)["schema"] == "trace-deps"


def test_console_in_process_leaves_the_process_as_it_found_it(capsys, monkeypatch):
    # console(exiting=False), as a test or an embedding program calls it: the same run and output, and the
    # caller's process keeps its allocator settings (no mallopt), its collector (on or off, nothing frozen) and
    # nothing of the run (api.retained stays None)
    import gc

    from tttv2_tools.trace_dependencies import api, cli

    called: list = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: called.append("mallopt"))
    monkeypatch.setattr("sys.argv", ["trace-deps", "--json", MLP, CFG])
    real_main = cli.main

    def spy():
        called.append(("during", api.retained, gc.isenabled()))
        return real_main()

    monkeypatch.setattr(cli, "main", spy)
    frozen, was_enabled = gc.get_freeze_count(), gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            called.clear()
            assert cli.console(exiting=False) == 0
            assert json.loads(capsys.readouterr().out)["schema"] == "trace-deps"
            assert called == [("during", None, enabled)]  # no mallopt, nothing kept, the collector as it was
            assert gc.isenabled() is enabled and gc.get_freeze_count() == frozen and api.retained is None
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_library_analyses_keep_nothing_alive():
    # only the trace-deps command keeps its engine: analyze() called as a library retains nothing
    from tttv2_tools.trace_dependencies import api

    assert api.retained is None
    api.analyze(MLP, CFG)
    assert api.retained is None


def test_rerun_replaces_its_own_json_but_never_a_user_file_made_from_it(capsys, tmp_path):
    """An earlier --json output (also hand-edited, still one object) is replaced on a rerun; outputs collected with
    ``>>``, a broken edit, or "schema" only deeper in are a user's files: exit 2, the file untouched."""
    out = tmp_path / "deps.json"
    assert run(capsys, MLP, CFG, f"--json={out}", "--quiet")[0] == 0
    ours = out.read_text()
    assert run(capsys, MLP, CFG, f"--json={out}", "--quiet")[0] == 0 and out.read_text() == ours
    edited = ours.replace('"entry": "forward"', '"entry": "forward", "note": "mine"', 1)
    assert edited != ours
    out.write_text(edited)  # still one trace-deps object: an earlier output, edited
    assert run(capsys, MLP, CFG, f"--json={out}", "--quiet")[0] == 0 and out.read_text() == ours
    for text in (
        ours + ours,  # trace-deps --json >> runs.json, twice
        ours.replace('"entry": "forward",', '"entry": "forward"', 1),  # an edit that broke it
        '{"runs": [' + ours + "]}",  # "schema" deeper only
        ours.rstrip()[:-1] + ', "schema": "mine"}\n',  # the key repeated: the last one counts
    ):
        out.write_text(text)
        code, _, err = run(capsys, MLP, CFG, f"--json={out}", "--quiet")
        assert code == 2 and "refusing to overwrite" in err and "--force" in err
        assert out.read_text() == text


def test_a_large_json_looking_file_is_judged_after_the_analysis(capsys, tmp_path):
    """Before the analysis only files up to EARLY_LIMIT, or that cannot be one JSON object, are judged; a larger
    one that opens like an object is judged with the new text (a rerun: the same bytes, not parsed). Either way a
    user's file is never replaced: with a module that does not parse, the small one is refused first, the large
    one stays as it was behind the syntax error."""
    broken = tmp_path / "mlp.py"
    broken.write_text(BROKEN)
    small = tmp_path / "small.json"
    small.write_text('{"my": "notes"}')
    code, _, err = run(capsys, str(broken), CFG, f"--json={small}")
    assert code == 2 and "refusing to overwrite" in err and small.read_text() == '{"my": "notes"}'
    large = tmp_path / "large.json"
    large.write_text('{"my": "notes", "pad": "' + "x" * 70_000 + '"}')
    code, _, err = run(capsys, str(broken), CFG, f"--json={large}")
    assert code == 2 and "refusing" not in err and "mlp.py" in err and large.read_text().startswith('{"my"')
    code, _, err = run(capsys, MLP, CFG, f"--json={large}")
    assert code == 2 and "refusing to overwrite" in err and large.read_text().startswith('{"my"')


def test_config_that_is_the_module_itself_is_said(capsys):
    """``trace-deps mlp.py mlp.py``: analysed as asked, with the note tttv2-refactor prints for the same mistake
    (it once ran silently, with no ModelArgs resolved); ``-q`` drops it."""
    code, out, err = run(capsys, MLP, MLP)
    assert code == 0 and out
    assert (
        err
        == f"trace-deps: note: CONFIG {MLP} is MODULE itself, so no config was analysed: ModelArgs "
        + ("members (is_galaxy, ...) are not resolved and galaxy facts rest on attribute names alone\n")
    )
    code, out, err = run(capsys, MLP, MLP, "-q")
    assert code == 0 and err == ""
