"""Input Python accepts is accepted by every tool that reads user code (issue 22, items 4 and 5): classic-Mac
``\\r`` line ends, PEP 263 coding lines, and expressions long enough to exhaust a recursive walk. Each case is a
module in the style of a TTTv1 block (a norm with a decode/prefill branch), varied one way at a time."""

from __future__ import annotations

import json
import textwrap

import pytest

from tttv2_tools.refactor.cli import main as refactor_main
from tttv2_tools.trace_dependencies.cli import main as trace_main

NORM = textwrap.dedent(
    '''
    import ttnn


    class Norm:
        """Résumé: RMS norm of one decoder layer."""

        def __init__(self, mesh_device, args):
            self.args = args
            self.eps = args.eps

        def forward(self, x, mode):
            if mode == "decode" and self.args.is_galaxy:
                x = ttnn.to_memory_config(x, ttnn.L1_MEMORY_CONFIG)
            y = SUM  # somme des entrées (à garder)
            return ttnn.rms_norm(y, epsilon=self.eps)
    '''
)
CONFIG = textwrap.dedent(
    """
    class ModelArgs:
        def __init__(self, mesh_device):
            self.is_galaxy = mesh_device.get_num_devices() == 32
            self.eps = 1e-5
            self.model_config = {}
    """
)


def _module(terms: int = 3, newline: str = "\n", coding: str | None = None) -> bytes:
    text = NORM.replace("SUM", " + ".join(["x"] * terms))
    encoding = "utf-8"
    if coding is not None:
        text = f"# -*- coding: {coding} -*-\n" + text
        encoding = coding
    return text.replace("\n", newline).encode(encoding)


VARIANTS = {
    "mac line ends": {"newline": "\r"},
    "windows line ends": {"newline": "\r\n"},
    "latin-1 coding line": {"coding": "latin-1"},
    "latin-1 and mac line ends": {"coding": "latin-1", "newline": "\r"},
    "cp1252 coding line": {"coding": "cp1252"},
    "long expression": {"terms": 400},
    "long expression, mac line ends": {"terms": 250, "newline": "\r"},
}


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "model_config.py").write_text(CONFIG)
    return tmp_path


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_trace_deps_and_refactor_read_what_python_reads(folder, variant, capsys):
    """Promise 57: a module Python compiles is analysed and refactored (exit 0), never exit 3."""
    source = folder / "norm.py"
    source.write_bytes(_module(**VARIANTS[variant]))
    compile(source.read_bytes(), str(source), "exec")  # Python accepts it
    assert trace_main([str(source), "--quiet"]) == 0, capsys.readouterr().err
    out = folder / "out"
    assert refactor_main([str(source), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    for generated in out.iterdir():
        text = generated.read_text(encoding="utf-8")
        compile(text, str(generated), "exec")
        assert "somme des entrées (à garder)" in text  # decoded as Python decodes it, not mojibake


def test_summary_of_a_long_expression_falls_back_to_an_iterative_walk():
    """cstutil.summary (what a statement reads, writes and calls) recursed once per operand; past the recursion
    limit it now summarises bottom up and gives what the recursive walk gives with room to recurse."""
    import sys

    import libcst as cst

    from tttv2_tools.refactor import cstutil

    expression = " + ".join(f"self.w{i % 7}(x{i % 3})" for i in range(600))
    statement = cst.parse_statement(f"y = {expression}\n")
    cstutil.clear_memos()
    got = cstutil.summary(statement)  # deeper than the limit of this interpreter: the fallback
    cstutil.clear_memos()
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        want = cstutil.summary(statement)  # the same nodes, summarised recursively
    finally:
        sys.setrecursionlimit(previous)
        cstutil.clear_memos()
    assert got == want
    assert set(got.reads) >= {"x0", "x1", "x2", "self"} and "y" in got.writes


def test_refactor_stops_with_one_line_past_its_recursion_limit(folder, capsys, monkeypatch):
    """Beyond what the raised recursion limit allows: exit 2 and one line naming the problem, no traceback."""
    import tttv2_tools._recursion as recursion

    monkeypatch.setattr(
        recursion, "RECURSION_LIMIT", 0
    )  # keep this interpreter's limit (1000): 400 operands exceed it
    source = folder / "norm.py"
    source.write_bytes(_module(terms=400))
    assert refactor_main([str(source), "--out", str(folder / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "input nested too deeply to refactor (more than 1000 levels" in err, err


def test_file_arguments_that_are_not_regular_files_are_refused_at_once(folder, capsys):
    """Promise 55 for trace-deps and tttv2-refactor: a FIFO as the module, the config or the --cases store is
    one line and exit 2, decided without opening it (an open would wait for a writer)."""
    import os

    source = folder / "norm.py"
    source.write_bytes(_module())
    fifo = folder / "pipe.py"
    os.mkfifo(fifo)
    runs = [
        (trace_main, [fifo]),
        (trace_main, [source, fifo]),
        (refactor_main, [fifo, "--out", folder / "out"]),
        (refactor_main, [source, fifo, "--out", folder / "out"]),
        (refactor_main, [source, "--out", folder / "out", "--cases", fifo, "--tests-out", folder / "tests"]),
    ]
    for tool, argv in runs:
        assert tool([str(a) for a in argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(fifo) in err, err


@pytest.mark.parametrize(
    ("tool", "module", "entry", "prefix"),
    [
        (trace_main, "tttv2_tools.trace_dependencies.cli", "_run", "trace-deps"),
        (refactor_main, "tttv2_tools.refactor.cli", "_main", "tttv2-refactor"),
    ],
)
def test_an_unexpected_error_is_one_line_and_exit_3(folder, capsys, monkeypatch, tool, module, entry, prefix):
    """Promise 59 for trace-deps and tttv2-refactor: a bug is one line and exit 3; --debug adds the traceback."""
    import importlib

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(importlib.import_module(module), entry, broken)
    source = folder / "norm.py"
    source.write_bytes(_module())
    argv = [str(source), "--quiet"] + (["--out", str(folder / "out")] if prefix == "tttv2-refactor" else [])
    assert tool(argv) == 3
    err = capsys.readouterr().err
    assert err == f"{prefix}: internal error: ZeroDivisionError: a bug (run with --debug)\n", err
    assert tool([*argv, "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("tool", "module", "entry", "prefix"),
    [
        (trace_main, "tttv2_tools.trace_dependencies.cli", "_run", "trace-deps: error"),
        (refactor_main, "tttv2_tools.refactor.cli", "_main", "tttv2-refactor: error"),
    ],
)
def test_a_recursion_error_anywhere_is_one_line_and_exit_2(
    folder, capsys, monkeypatch, tool, module, entry, prefix
):
    """Any recursive walk that still runs out of room (past the raised limit) ends in one clear line."""
    import importlib

    def too_deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(importlib.import_module(module), entry, too_deep)
    source = folder / "norm.py"
    source.write_bytes(_module())
    argv = [str(source), "--quiet"] + (["--out", str(folder / "out")] if "refactor" in prefix else [])
    assert tool(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{prefix}: input nested too deeply to "), err
    assert "split it into shorter statements" in err


def test_tttv1_mlp_with_mac_line_ends_and_a_coding_line_refactors_to_the_same_modules(tmp_path, capsys):
    """An input not shaped for this test: TTTv1's own MLP and the files it imports, rewritten with classic-Mac
    line ends and a latin-1 coding line, give byte-identical generated modules and the same analysis."""
    import shutil
    from pathlib import Path

    tt = Path(__file__).resolve().parents[2] / "tttv1" / "tt"
    plain, odd = tmp_path / "plain" / "tt", tmp_path / "odd" / "tt"
    shutil.copytree(tt, plain, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tt, odd, ignore=shutil.ignore_patterns("__pycache__"))
    for name in [p.relative_to(plain) for p in plain.rglob("*.py")]:
        # the same text for Python in both copies (characters latin-1 lacks, like an arrow, become "?")
        text = (plain / name).read_text(encoding="utf-8").encode("latin-1", "replace").decode("latin-1")
        (plain / name).write_bytes(("# -*- coding: utf-8 -*-\n" + text).encode("utf-8"))
        (odd / name).write_bytes(("# -*- coding: latin-1 -*-\n" + text).replace("\n", "\r").encode("latin-1"))
    outputs = {}
    for name, folder in (("plain", plain), ("odd", odd)):
        assert trace_main([str(folder / "mlp.py"), "--quiet", f"--json={tmp_path / name}.json"]) == 0
        assert refactor_main([str(folder / "mlp.py"), "--out", str(tmp_path / f"out_{name}"), "--quiet"]) == 0
        outputs[name] = {
            p.name: p.read_text().split("\n", 1)[1]  # after the header line, which hashes the source file
            for p in sorted((tmp_path / f"out_{name}").iterdir())
        }
    assert outputs["plain"] == outputs["odd"] and outputs["plain"]
    analyses = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("plain", "odd")]
    assert analyses[0] == analyses[1] and analyses[0]["keys_read"]
