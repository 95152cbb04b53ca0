"""``collect-cases record``: command forms, exit codes passed through, bad targets and stores before the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tttv2_tools.collect_cases import CaseStore, CollectCasesError, load_cases
from tttv2_tools.collect_cases.cli import main
from tttv2_tools.collect_cases.command import BOOTSTRAP, bootstrapped

RUN = textwrap.dedent(
    """
    import sys
    from plain_layers import Plain

    layer = Plain(layer_num=1)
    for i in range(int(sys.argv[1])):
        layer.forward(i % 3, mode="decode")
    open(sys.argv[2], "w").write("ran")
    sys.exit(int(sys.argv[3]))
    """
)
PY = sys.executable


@pytest.fixture
def run_script(plain_module):
    (plain_module / "run_plain.py").write_text(RUN)
    return plain_module / "run_plain.py"


def _record(store, *command, target="plain_layers:Plain", fields=("v=x",)):
    args = ["record", "--store", str(store), "--target", target]
    for f in fields:
        args += ["--field", f]
    return main([*args, "--", *command])


def test_record_passes_the_exit_code_through_and_keeps_what_it_recorded(tmp_path, run_script, capsys):
    store, marker = tmp_path / "s.sqlite", tmp_path / "ran"
    assert _record(store, PY, str(run_script), "7", str(marker), "3") == 3
    assert marker.read_text() == "ran"
    cases = load_cases(store, "plain_layers:Plain")
    assert sorted(c.fields["extra"]["v"] for c in cases) == [0, 1, 2]
    assert [c.hits for c in sorted(cases, key=lambda c: c.fields["extra"]["v"])] == [3, 2, 2]
    case = cases[0]
    assert case.flat["mesh_shape"] == (1, 8) and case.flat["model_name"] == "Plain-7B" and case.layers == (1,)
    assert case.first_command == f"{PY} {run_script} 7 {marker} 3"
    err = capsys.readouterr().err
    assert "7 calls" in err and "plain_layers:Plain: 3 cases (+3)" in err and "exited with 3" in err
    # a second run adds hits, not cases
    assert _record(store, PY, str(run_script), "3", str(marker), "0") == 0
    assert sum(c.hits for c in load_cases(store, "plain_layers:Plain")) == 10
    assert len(load_cases(store, "plain_layers:Plain")) == 3


def test_module_code_and_console_script_commands(tmp_path, run_script, monkeypatch):
    store, marker = tmp_path / "s.sqlite", tmp_path / "ran"
    monkeypatch.chdir(run_script.parent)
    assert _record(store, PY, "-u", "-m", "run_plain", "2", str(marker), "0") == 0
    code = "from plain_layers import Plain; Plain(model_name='C').forward(9)"
    assert _record(store, PY, "-c", code) == 0
    script = tmp_path / "console-script"
    script.write_text(f"#!/usr/bin/env {os.path.basename(PY)}\n" + RUN)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{os.path.dirname(PY)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(run_script.parent))
    assert _record(store, str(script), "1", str(marker), "5") == 5
    values = sorted(str(c.fields["extra"]["v"]) for c in load_cases(store, "plain_layers:Plain"))
    assert values == ["0", "1", "9"]


def test_a_bad_target_stops_before_the_command_runs(tmp_path, run_script, capsys):
    store, marker = tmp_path / "s.sqlite", tmp_path / "ran"
    assert _record(store, PY, str(run_script), "1", str(marker), "0", target="plain_layers:Nope") == 2
    assert not marker.exists()
    assert (
        "--target plain_layers:Nope: module 'plain_layers' has no attribute 'Nope'" in capsys.readouterr().err
    )
    assert _record(store, PY, str(run_script), "1", str(marker), "0", target="no_such_mod:X") == 2
    assert "does not import: ModuleNotFoundError" in capsys.readouterr().err
    assert not marker.exists()


def test_a_bad_target_leaves_no_new_store_and_is_said_once(tmp_path, run_script, capfd):
    """R27: the store a failed record created is removed again (an existing one is kept), and the child's
    error is printed by the parent only."""
    store, marker = tmp_path / "new.sqlite", tmp_path / "ran"
    assert _record(store, PY, str(run_script), "1", str(marker), "0", target="plain_layers:Nope") == 2
    err = capfd.readouterr().err
    assert err.count("has no attribute 'Nope'") == 1 and err.startswith("collect-cases: error: "), err
    assert not list(tmp_path.glob("new.sqlite*")) and not marker.exists()
    CaseStore(store, create=True).close()  # an existing store, even an empty one, is kept
    assert _record(store, PY, str(run_script), "1", str(marker), "0", target="plain_layers:Nope") == 2
    assert store.is_file() and load_cases(store, "plain_layers:Plain") == []


def test_a_store_that_is_not_a_store_is_refused_before_the_command_runs(tmp_path, run_script, capsys):
    junk, marker = tmp_path / "notes.txt", tmp_path / "ran"
    junk.write_text("my notes")
    assert _record(junk, PY, str(run_script), "1", str(marker), "0") == 2
    assert not marker.exists() and junk.read_text() == "my notes"
    assert "not an SQLite database" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (
            [
                "record",
                "--store",
                "a.sqlite",
                "--store",
                "b.sqlite",
                "--target",
                "m:C",
                "--",
                "python",
                "x.py",
            ],
            "--store",
        ),
        (["list", "--store", "a.sqlite", "--target", "m:A", "--target", "m:B"], "--target"),
        (["emit", "--store", "a.sqlite", "--target", "m:A", "--target", "m:B", "--into", "t.py"], "--target"),
        (["import", "--store", "a.sqlite", "--csv", "a.csv", "--csv", "b.csv"], "--csv"),
        (
            ["verify", "--store", "a.sqlite", "--generated", "g.py", "--target", "m:A", "--target", "m:B"],
            "--target",
        ),
    ],
)
def test_a_single_valued_option_given_twice_is_a_usage_error(tmp_path, monkeypatch, capsys, argv, named):
    """``--store a --store b`` once recorded into b alone, silently: an option that names one thing is given
    once (as ``--into`` / ``--name`` / ``export --csv`` already were), before anything is read or created."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1
    assert err.startswith("collect-cases: error: ") and f"{named} given twice" in err
    assert not list(tmp_path.iterdir())


SLEEPER = textwrap.dedent(
    """
    import os, sys, time
    from plain_layers import Plain  # the recorder is active: the target was imported before this script ran

    open(sys.argv[1], "w").write(str(os.getpid()))
    time.sleep(120)
    """
)


def test_sigterm_to_record_reaches_the_recorded_command(plain_module):
    """``timeout 600 collect-cases record ... -- python long.py`` (SIGTERM to collect-cases): the command gets the
    signal too, as from any wrapper, and its status comes through (it once ran on, orphaned)."""
    (plain_module / "sleeper.py").write_text(SLEEPER)
    pid_file = plain_module / "pid"
    argv = [PY, "-m", "tttv2_tools.collect_cases.cli", "record", "--store", str(plain_module / "s.sqlite")]
    argv += ["--target", "plain_layers:Plain", "--", PY, str(plain_module / "sleeper.py"), str(pid_file)]
    proc = subprocess.Popen(argv, cwd=plain_module, stderr=subprocess.PIPE, text=True)
    child = None
    try:
        deadline = time.monotonic() + 120
        while not pid_file.is_file() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        child = int(pid_file.read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 128 + signal.SIGTERM
        assert "the command exited with 143" in proc.stderr.read()
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:  # never leave the sleeper behind, even when the test fails
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_stop_signal_with_no_command_running_does_what_it_would_have_done():
    code = (
        "import os, signal\n"
        "from tttv2_tools.collect_cases.record import forwarding_stop_signals\n"
        "with forwarding_stop_signals():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "print('survived')\n"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGTERM and "survived" not in done.stdout


def test_stop_signals_are_forwarded_only_from_the_main_thread():
    import threading

    from tttv2_tools.collect_cases import record

    seen = []

    def body():
        with record.forwarding_stop_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before] and signal.getsignal(signal.SIGTERM) == before
    with record.forwarding_stop_signals():
        assert signal.getsignal(signal.SIGTERM) is record._forward
    assert signal.getsignal(signal.SIGTERM) == before


def test_forwarding_a_stop_signal_in_process(monkeypatch):
    """``_forward``: to every command still running; with none, the default action (here recorded, not done)."""
    from tttv2_tools.collect_cases import record

    sleeper = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])
    done = subprocess.Popen([PY, "-c", "pass"])
    done.wait()
    monkeypatch.setattr(record, "_LIVE", {sleeper, done})
    try:
        record._forward(signal.SIGTERM, None)
        assert sleeper.wait(120) == -signal.SIGTERM
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    calls = []
    monkeypatch.setattr(record.signal, "signal", lambda *a: calls.append(("signal", *a)))
    monkeypatch.setattr(record.os, "kill", lambda *a: calls.append(("kill", *a)))
    record._forward(signal.SIGTERM, None)  # nothing running any more
    assert calls == [("signal", signal.SIGTERM, signal.SIG_DFL), ("kill", os.getpid(), signal.SIGTERM)]


def test_a_command_killed_before_the_recorder_started_is_said_so(tmp_path, capsys):
    from rich.console import Console

    from tttv2_tools.collect_cases import cli

    class Killed:  # a recording whose command a signal ended before the bootstrap reported
        def finish(self):
            return -signal.SIGTERM, {"ready": False}

    code, _ = cli._finish(Killed(), tmp_path / "s.sqlite", False, ["python"], "record", "recorded", Console())
    err = capsys.readouterr().err
    assert code == -signal.SIGTERM
    assert "'python' was killed by signal 15 before the recorder started; nothing was recorded" in err
    assert "is tttv2 installed" not in err


def test_command_rewriting():
    assert bootstrapped(["python3", "-X", "dev", "-u", "-m", "pkg.mod", "-a"]) == [
        "python3", "-X", "dev", "-u", "-m", BOOTSTRAP, "-m", "pkg.mod", "-a"
    ]  # fmt: skip
    assert bootstrapped([PY, "demo.py", "x"]) == [PY, "-m", BOOTSTRAP, "demo.py", "x"]
    assert bootstrapped(["python", "-c", "pass"]) == ["python", "-m", BOOTSTRAP, "-c", "pass"]
    for bad, message in [
        ([], "expected a command"),
        (["python"], "must run a module, a script or code"),
        (["python", "-m"], "must run a module, a script or code"),
        (["python", "-"], "must run a module, a script or code"),
        (["bash", "-c", "true"], "can only run Python commands"),
        (["no-such-program-here"], "can only run Python commands"),
    ]:
        with pytest.raises(CollectCasesError, match=message):
            bootstrapped(bad)


def test_non_python_commands_are_refused(tmp_path, capsys):
    assert (
        main(["record", "--store", str(tmp_path / "s.sqlite"), "--target", "a:B", "--", "bash", "-c", "true"])
        == 2
    )
    assert "can only run Python commands" in capsys.readouterr().err


def test_bootstrap_in_process(tmp_path, plain_module, monkeypatch):
    """The child's side, run here: settings from the environment, targets first, then the program."""
    import json
    import runpy

    from tttv2_tools.collect_cases import bootstrap

    store, status = tmp_path / "s.sqlite", tmp_path / "status.json"
    config = {
        "store": str(store),
        "targets": ["plain_layers:Plain"],
        "fields": [["v", "x"]],
        "status": str(status),
    }
    monkeypatch.syspath_prepend(str(plain_module))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    finish = []
    monkeypatch.setenv(bootstrap.CONFIG_ENV, json.dumps(config))
    bootstrap.main(["-c", "from plain_layers import Plain; Plain().forward(5)"], at_exit=finish.append)
    assert json.loads(status.read_text()) == {"ready": True}
    finish[0]()
    assert json.loads(status.read_text()) == {"ready": True, "calls": 1, "distinct": 1, "new": 1}
    monkeypatch.setenv(bootstrap.CONFIG_ENV, json.dumps(config))
    script = plain_module / "script.py"
    script.write_text("from plain_layers import Plain\nPlain().forward(6)\n")
    bootstrap.main([str(script)], at_exit=finish.append)
    finish[1]()
    monkeypatch.setattr(runpy, "run_module", lambda name, **kw: None)  # -m: what would run, not run here
    monkeypatch.setenv(bootstrap.CONFIG_ENV, json.dumps(config))
    bootstrap.main(["-m", "some.module", "--flag"], at_exit=finish.append)
    finish[2]()
    assert sys.argv == ["some.module", "--flag"]
    assert sorted(c.fields["extra"]["v"] for c in load_cases(store, "plain_layers:Plain")) == [5, 6]
    monkeypatch.setenv(bootstrap.CONFIG_ENV, json.dumps({**config, "targets": ["plain_layers:Nope"]}))
    with pytest.raises(SystemExit) as stopped:
        bootstrap.main(["-c", "pass"], at_exit=finish.append)
    assert stopped.value.code == bootstrap.TARGET_ERROR_EXIT
    assert "has no attribute 'Nope'" in json.loads(status.read_text())["error"]
    monkeypatch.delenv(bootstrap.CONFIG_ENV, raising=False)  # main() took it out already
    with pytest.raises(SystemExit, match="is not set"):
        bootstrap.main(["-c", "pass"])
    monkeypatch.setenv(bootstrap.CONFIG_ENV, json.dumps(config))
    with pytest.raises(SystemExit, match="expected -m MODULE"):
        bootstrap.main(["-m"])


def test_a_missing_script_is_one_line_exit_2_and_leaves_no_store(tmp_path, capsys, monkeypatch):
    """``collect-cases record -- python nosuch.py``: as plain Python says it (one line, exit 2), and no empty
    store left behind; the same for verify."""
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "s.sqlite"
    for verb, extra in (("record", []), ("verify", ["--generated", str(tmp_path / "x_1d.py")])):
        argv = [verb, "--store", str(store), "--target", "plain_layers:Norm", *extra, "--", PY, "nosuch.py"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == "collect-cases: error: SCRIPT nosuch.py: no such file\n", err
        assert not store.exists()
