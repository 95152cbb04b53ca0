"""collect-cases under bad input (issue 22, item 3): a damaged store row, a CSV that is not UTF-8, a FIFO where a
file is expected, a test file with a very long expression, paths that look like rich markup, and anything
unexpected: each is one line naming what was wrong and exit 2 (3 for a bug in the tool), never a traceback or a
hang; a damaged row is never emitted into a test."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from tttv2_tools.collect_cases import Case
from tttv2_tools.collect_cases.cli import main
from tttv2_tools.collect_cases.store import CaseStore, StoreError

T = "tttv1.tt.mlp:MLP"


def _case(mesh, mode, seq):
    return Case(
        T,
        {
            "mesh_shape": list(mesh),
            "num_devices": mesh[0] * mesh[1],
            "arch": "wormhole_b0",
            "mode": mode,
            "model_name": "Llama-3.2-1B",
            "inputs": [["x", {"shape": [1, 1, seq, 2048], "dtype": "bfloat16"}]],
            "weights": {"w1": {"shape": [2048, 8192], "dtype": "bfloat8_b"}},
        },
        hits=3,
        layers=(0, 1),
    )


CASES = [_case((1, 8), "decode", 32), _case((1, 8), "prefill", 128), _case((8, 4), "decode", 32)]


def _store(path, cases=CASES):
    with CaseStore(path, create=True) as store:
        store.add_cases(cases, "python demo.py")
    return path


def _damage(path, row: int, **columns) -> None:
    db = sqlite3.connect(path)
    for column, value in columns.items():
        db.execute(f"UPDATE cases SET {column} = ? WHERE id = ?", (value, row))
    db.commit()
    db.close()


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    return captured.err


def _verbs(store, tmp_path):
    return {
        "list": ["list", "--store", store],
        "list --json": ["list", "--store", store, "--json"],
        "export": ["export", "--store", store, "--csv", tmp_path / "out.csv"],
        "emit": [
            "emit",
            "--store",
            store,
            "--target",
            T,
            "--into",
            tmp_path / "test_mlp.py",
            "--name",
            "CASES",
        ],
    }


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ({"fields": '{"mesh_shape": [1, 8], "mode": "dec'}, "fields are not JSON"),
        ({"layers": "[0, 1"}, "layers are not JSON"),
        # a torn row: valid JSON that is not what was recorded (its key is the hash of the recorded fields)
        ({"fields": '{"mesh_shape": [4, 8], "mode": "decode"}'}, "do not match its key (a torn row)"),
    ],
)
def test_a_damaged_row_stops_every_reader_naming_the_store_and_the_row(tmp_path, capsys, damage, message):
    """Promise 56: a row whose JSON does not parse or no longer matches its hash is never used: list, export
    and emit stop with one line naming the store and the row (exit 2) and write nothing."""
    store = _store(tmp_path / "cases.sqlite")
    _damage(store, 2, **damage)
    for verb, argv in _verbs(store, tmp_path).items():
        assert main([str(a) for a in argv]) == 2, verb
        err = _one_line(capsys)
        assert f"{store}: case 2 of {T}" in err and message in err, (verb, err)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "test_mlp.py").exists()


def test_a_csv_that_is_not_utf8_is_one_line(tmp_path, capsys):
    csv = tmp_path / "cases.csv"
    csv.write_bytes("target,mesh_shape,mode\ntttv1.tt.mlp:MLP,1x8,d\xe9code\n".encode("latin-1"))
    assert main(["import", "--store", str(tmp_path / "s.sqlite"), "--csv", str(csv)]) == 2
    err = _one_line(capsys)
    assert f"--csv {csv}: not UTF-8 text" in err and "line 2" in err


def _fifo(path):
    os.mkfifo(path)
    return path


def test_fifos_are_refused_at_once_never_waited_on(tmp_path, capsys):
    """Promise 55: a FIFO (or any non-regular file) as --store, --csv or --into is refused before it is opened:
    opening a FIFO for reading waits for a writer, forever."""
    good = _store(tmp_path / "good.sqlite")
    assert main(["export", "--store", str(good), "--csv", str(tmp_path / "x.csv")]) == 0
    capsys.readouterr()
    fifo = _fifo(tmp_path / "pipe")
    runs = {
        "--store (list)": ["list", "--store", fifo],
        "--store (emit)": [
            "emit",
            "--store",
            fifo,
            "--target",
            T,
            "--into",
            tmp_path / "t.py",
            "--name",
            "C",
        ],
        "--store (import)": ["import", "--store", fifo, "--csv", tmp_path / "x.csv"],
        "--csv (import)": ["import", "--store", good, "--csv", fifo],
        "--into (emit)": ["emit", "--store", good, "--target", T, "--into", fifo, "--name", "C"],
    }
    for what, argv in runs.items():
        result = {}

        def run(argv=argv, result=result):
            result["code"] = main([str(a) for a in argv])

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(20)
        if worker.is_alive():  # unblock the reader so the test process can end, then fail
            with open(fifo, "wb"):
                pass
            worker.join(5)
            pytest.fail(f"{what}: waits on the FIFO")
        assert result["code"] == 2, what
        err = _one_line(capsys)
        assert f"{fifo}" in err and "not a regular file" in err, (what, err)


def test_emit_into_a_test_file_with_a_very_long_expression(tmp_path, capsys):
    """A test file Python accepts, with a 400-term sum (deeper than Python's default recursion limit for
    libcst's visitors): emit edits it like any other."""
    store = _store(tmp_path / "cases.sqlite")
    test_file = tmp_path / "test_mlp.py"
    total = " + ".join(["1"] * 400)
    test_file.write_text(f"import pytest\n\nfrom tttv2 import ttnn\n\nTOTAL = {total}\n\nCASES = []\n")
    argv = ["emit", "--store", store, "--target", T, "--into", test_file, "--name", "CASES"]
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    text = test_file.read_text()
    assert f"TOTAL = {total}\n" in text and text.count("pytest.param(") == 3
    compile(text, str(test_file), "exec")


def test_paths_are_printed_as_given_never_as_markup(tmp_path, capsys):
    """Promise 60: a path with brackets is printed as it is (rich markup would drop ``[v2]`` and crash on
    ``[/x]``)."""
    odd = tmp_path / "cases[v2]"
    odd.mkdir()
    for store in (odd / "cases[/x].sqlite", odd / "cases[bold].sqlite"):
        assert main(["list", "--store", str(store)]) == 2
        assert f"{store}: no such file" in _one_line(capsys)
    good = _store(odd / "[red]s.sqlite")
    assert main(["export", "--store", str(good), "--csv", str(odd / "[bold]o.csv")]) == 0
    assert f"exported 3 cases to {odd / '[bold]o.csv'}" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_and_exit_3(tmp_path, capsys, monkeypatch):
    """Promise 59: a bug in the tool is one line naming the exception (exit 3); --debug shows the traceback."""
    import tttv2_tools.collect_cases.cli as cli

    store = _store(tmp_path / "cases.sqlite")

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "export_csv", broken)
    argv = ["export", "--store", str(store), "--csv", "-"]
    assert main(argv) == 3
    err = _one_line(capsys)
    assert err == "collect-cases: internal error: ZeroDivisionError: a bug (run with --debug)\n"
    assert main(["--debug", *argv]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err


def test_store_reader_api_raises_store_error_for_a_damaged_row(tmp_path):
    store = _store(tmp_path / "cases.sqlite")
    _damage(store, 1, fields="not json")
    with CaseStore(store) as opened, pytest.raises(StoreError, match=r"case 1 of .*fields are not JSON"):
        opened.cases(T)
    with CaseStore(store) as opened:  # check() still reports it without raising
        assert opened.check() == ["case 1: fields are not JSON"]


def test_a_damaged_row_stops_import_and_coverage_before_any_work(tmp_path, capsys):
    """Writers and the other reader of the store: ``import`` merging into a damaged row, and tttv2-coverage,
    which now verifies every row before it runs the test suite (not after)."""
    from tttv2.testing._coverage_cli import main as coverage_main

    store = _store(tmp_path / "cases.sqlite")
    assert main(["export", "--store", str(store), "--csv", str(tmp_path / "all.csv")]) == 0
    capsys.readouterr()
    _damage(store, 1, layers="{broken")
    assert main(["import", "--store", str(store), "--csv", str(tmp_path / "all.csv")]) == 2
    assert "is damaged (layers are not a JSON list); nothing was added" in _one_line(capsys)
    never_run = tmp_path / "test_never_run.py"
    never_run.write_text("def test_x():\n    raise AssertionError('the suite ran')\n")
    assert coverage_main(["--store", str(store), "--tests", str(never_run)]) == 2
    assert f"tttv2-coverage: error: --store: store {store}: case 1 of {T} is damaged" in _one_line(capsys)


def test_tttv2_coverage_turns_a_bug_into_one_line(tmp_path, capsys, monkeypatch):
    import tttv2.testing._coverage_cli as coverage_cli

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(coverage_cli, "_check_arguments", broken)
    argv = ["--store", str(tmp_path / "s.sqlite"), "--tests", str(tmp_path)]
    assert coverage_cli.main(argv) == 3
    assert _one_line(capsys) == "tttv2-coverage: internal error: KeyError: 'a bug' (run with --debug)\n"
    assert coverage_cli.main([*argv, "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err
