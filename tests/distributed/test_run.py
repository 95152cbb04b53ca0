"""tttv2-run: ranks started through the mpich wheel's mpiexec, rank 0's output, failures that end the job with
a clear error and never a hang, rank bindings, and its bad input (docs/distributed.md)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tttv2.distributed import run as launcher

ROOT = Path(__file__).resolve().parents[2]
HANG = 120  # seconds: a run that takes this long has hung (the failing runs below end in a few seconds)


def tttv2_run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``tttv2-run ARGS`` from the repository root (the console script is ``tttv2.distributed.run:main``)."""
    return subprocess.run(
        [sys.executable, "-m", "tttv2.distributed.run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
        env={**os.environ, **(env or {})},
    )


def program(mode: str) -> list[str]:
    return ["--", sys.executable, "-m", "tests.distributed.rank_program", mode]


def test_two_ranks_show_rank_0_only():
    done = tttv2_run("--np", "2", *program("ok"))
    assert done.returncode == 0, done.stderr
    assert "hello from rank 0 of 2" in done.stdout
    assert "rank 0 passed the barrier" in done.stdout
    assert "rank 1" not in done.stdout + done.stderr


def test_all_output_shows_every_rank_with_its_number():
    done = tttv2_run("--np", "2", "--all-output", *program("ok"))
    assert done.returncode == 0, done.stderr
    assert "[0] hello from rank 0 of 2" in done.stdout
    assert "[1] hello from rank 1 of 2" in done.stdout


def test_a_killed_rank_ends_the_job_with_its_signal():
    done = tttv2_run("--np", "2", *program("kill"))
    assert done.returncode == 128 + signal.SIGKILL
    assert done.stderr.startswith("tttv2-run: rank 1 was killed by SIGKILL\n")
    assert "[rank 1] hello from rank 1 of 2" in done.stderr  # the hidden rank's output, shown on failure
    assert "rank 0 passed the barrier" not in done.stdout


def test_an_exception_in_a_rank_aborts_every_rank():
    done = tttv2_run("--np", "2", *program("raise"))
    assert done.returncode == 1
    assert done.stderr.startswith("tttv2-run: rank 1 failed: ValueError: rank 1 cannot go on\n")
    assert "rank 0 passed the barrier" not in done.stdout


def test_a_rank_that_leaves_makes_the_barrier_time_out():
    done = tttv2_run("--np", "2", "--timeout", "2", *program("leave"))
    assert done.returncode == 1
    assert (
        "tttv2-run: rank 0 failed: tttv2.distributed.DistributedTimeoutError: rank 0: "
        "ttnn.distributed_context_barrier did not complete within 2 s"
    ) in done.stderr


def test_ranks_running_different_collectives_fail_on_every_rank():
    done = tttv2_run("--np", "2", *program("mismatch"))
    assert done.returncode == 1
    assert "ranks disagree" in done.stderr
    assert "a four-float exchange on 16 bytes" in done.stderr
    assert "ttnn.distributed_context_barrier on 0 bytes" in done.stderr


def test_a_rank_without_mpi_that_fails_ends_the_others(tmp_path):
    """Rank 1 exits 3 without MPI; rank 0 would sleep a minute: MPI's process manager (or the launcher, after
    --grace) ends it."""
    done = tttv2_run("--np", "2", "--grace", "1", *program("no-mpi"))
    assert done.returncode == 3  # the cause: rank 1, whatever happened to rank 0 afterwards
    assert done.stderr.startswith("tttv2-run: rank 1 exited with code 3\n")
    assert "plain rank 0" in done.stdout


def test_rank_binding_sets_each_ranks_environment(tmp_path):
    binding = tmp_path / "binding.yaml"
    binding.write_text(
        "rank_bindings:\n"
        "  - rank: 0\n    mesh_id: 0\n    env_overrides: {GREETING: bonjour}\n"
        "  - rank: 1\n    mesh_id: 0\n    env_overrides: {GREETING: hallo}\n"
        "global_env: {TT_METAL_LOGGER_LEVEL: Debug}\n"
    )
    done = tttv2_run("--np", "2", "--all-output", "--rank-binding", str(binding), *program("ok"))
    assert done.returncode == 0, done.stderr
    assert "[0] hello from rank 0 of 2 bonjour" in done.stdout
    assert "[1] hello from rank 1 of 2 hallo" in done.stdout


def test_a_tt_metal_style_preamble_runs_unchanged():
    """tests/distributed/fixtures/layer_split.py: `import ttnn`, the context stood up if needed, layers split
    over the ranks; once alone, once over 4 ranks."""
    alone = subprocess.run(
        [sys.executable, "-m", "tests.distributed.fixtures.layer_split"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.splitlines() == ["rank 0/1: layers 0..10 first=True last=True", "all ranks ready"]
    done = tttv2_run(  # 4 ranks on this 2-core machine: MPICH oversubscribes without a flag
        "--np", "4", "--all-output", "--", sys.executable, "-m", "tests.distributed.fixtures.layer_split"
    )
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert lines == [
        "[0] all ranks ready",
        "[0] rank 0/4: layers 0..2 first=True last=False",
        "[1] rank 1/4: layers 3..5 first=False last=False",
        "[2] rank 2/4: layers 6..8 first=False last=False",
        "[3] rank 3/4: layers 9..10 first=False last=True",
    ]


# --- bad input, in process -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--np", "2", "python"], "expected `-- COMMAND ...` after the options"),
        (["--np", "2", "--bogus", "python"], "unrecognized arguments: --bogus"),
        (["python", "x.py"], "the following arguments are required: --np"),
        (["--np", "2", "--"], "no COMMAND after `--`"),
        (["--np", "0", "--", "true"], "--np: expected at least 1 rank, got 0"),
        (["--np", "2", "--timeout", "0", "--", "true"], "--timeout: expected a positive, finite number"),
        (["--np", "2", "--timeout", "nan", "--", "true"], "--timeout: expected a positive, finite number"),
        (["--np", "2", "--grace", "inf", "--", "true"], "--grace: expected a positive, finite number"),
        (["--np", "2", "--grace", "-1", "--", "true"], "--grace: expected a positive, finite number"),
        (["--np", "2", "--rank-binding", "/nonexistent.yaml", "--", "true"], "cannot read it"),
        (["--np", "2", "--np", "3", "--", "true"], "--np given twice (2 and 3); give it once"),
        (["-n", "2", "--", "true"], "-n: the number of ranks is spelled --np N"),
        (["-np=2", "python", "x.py"], "-np=2: the number of ranks is spelled --np N"),
        (["--np", "2", "--timeout", "9", "--timeout", "1", "--", "true"], "--timeout given twice"),
        (["--np", "2", "--grace", "9", "--grace", "1", "--", "true"], "--grace given twice"),
        (
            ["--np", "2", "--rank-binding", "a", "--rank-binding", "b", "--", "true"],
            "--rank-binding given twice",
        ),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(capsys, argv, message):
    try:
        code = launcher.main(argv)
    except SystemExit as exc:  # argparse's own refusals (tools/_cli.py's one-line usage error)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("tttv2-run: error: ") and message in err and err.count("\n") == 1


def test_more_ranks_than_the_memory_can_hold_are_refused_before_any_starts(capsys, monkeypatch):
    monkeypatch.setattr(launcher, "find_mpiexec", lambda: pytest.fail("mpiexec was looked for"))
    assert launcher.main(["--np", "100000", "--", "true"]) == 2  # the real /proc/meminfo: far too many
    err = capsys.readouterr().err
    assert err.startswith("tttv2-run: error: --np 100000: 100000 ranks need at least 6250.0 GiB (64 MiB each")
    assert err.count("\n") == 1
    monkeypatch.setattr(launcher, "_available_memory", lambda: 3 * launcher.RANK_BYTES)
    assert launcher.main(["--np", "4", "--", "true"]) == 2
    assert "this machine has 0.2 GiB available" in capsys.readouterr().err


def test_available_memory_is_read_from_proc_meminfo_or_unknown(monkeypatch, tmp_path):
    assert launcher._available_memory() > 0  # Linux
    fake = tmp_path / "meminfo"
    fake.write_text("MemTotal: 100 kB\n")
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda path, *a, **k: real_open(fake if path == "/proc/meminfo" else path, *a, **k)
    )
    assert launcher._available_memory() is None  # no MemAvailable line
    fake.write_text("MemAvailable: lots kB\n")
    assert launcher._available_memory() is None
    fake.unlink()
    assert launcher._available_memory() is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2", "not valid YAML at line 1, column 6"),
        ("rank_bindings:\n  - rank: 0\n  bad: : x\n", "not valid YAML at line 3"),
        ("- 1\n", "expected a map with rank_bindings, got list"),
        (
            "mesh_graph_desc_path: x.textproto\nrank_bindings: []\n",
            "mesh graph descriptors are not read",
        ),
        ("rank_bindings: [{rank: 0, mesh_devices: 3}]\n", "mesh_devices: expected a list of device ids"),
        ("rank_bindings: [{rank: 0, mesh_devices: []}]\n", "mesh_devices: expected a list of device ids"),
        (
            "rank_bindings: [{rank: 0, mesh_devices: [1, -2]}]\n",
            "mesh_devices: expected a list of device ids",
        ),
        ("rank_bindings: []\nmeshes: 2\n", "unknown keys ['meshes']"),
        ("rank_bindings: {rank: 0}\n", "rank_bindings: expected a list of ranks"),
        ("rank_bindings: [3]\n", "rank_bindings[0]: expected a map with a rank, got 3"),
        ("rank_bindings: [{rank: 0, device: 1}]\n", "rank_bindings[0]: unknown keys ['device']"),
        ("rank_bindings: [{rank: 2}]\n", "rank: expected an integer in 0..1 (--np 2), got 2"),
        ("rank_bindings: [{rank: true}]\n", "rank: expected an integer in 0..1 (--np 2), got True"),
        ("rank_bindings: [{rank: 0}, {rank: 0}]\n", "rank 0 is bound twice"),
        ("rank_bindings: [{rank: 0}]\n", "ranks [1] of --np 2 have no binding"),
        ("rank_bindings: [{rank: 0, mesh_id: -1}]\n", "mesh_id: expected a non-negative integer, got -1"),
        ("rank_bindings: [{rank: 0, env_overrides: [A]}]\n", "env_overrides: expected a map of environment"),
        (
            "rank_bindings: [{rank: 0, env_overrides: {A=B: 1}}]\n",
            "'A=B' is not an environment variable name",
        ),
        ("global_env: {A: {b: 1}}\nrank_bindings: []\n", "global_env.A: expected a string or number"),
    ],
)
def test_bad_rank_bindings_are_named(tmp_path, text, message):
    path = tmp_path / "binding.yaml"
    path.write_text(text)
    with pytest.raises(launcher.RunError, match=r"--rank-binding .*binding\.yaml: ") as info:
        launcher.load_rank_binding(str(path), 2)
    assert message in str(info.value)


def test_rank_binding_values_become_strings(tmp_path):
    path = tmp_path / "binding.yaml"
    path.write_text(
        "global_env: {FLAG: true, N: 3}\n"
        "rank_bindings:\n  - {rank: 1, mesh_id: 0, mesh_host_rank: 1, mesh_devices: [3, 1]}\n"
        "  - {rank: 0, env_overrides: {N: 4}}\n"
    )
    assert launcher.load_rank_binding(str(path), 2) == [
        {"FLAG": "true", "N": "4"},
        {
            "FLAG": "true",
            "N": "3",
            "TTTV2_MESH_ID": "0",
            "TTTV2_MESH_HOST_RANK": "1",
            "TTTV2_MESH_DEVICES": "3,1",
        },
    ]


def test_mpi_missing_says_which_extra_to_install(capsys, monkeypatch):
    real = launcher.importlib.util.find_spec
    monkeypatch.setattr(
        launcher.importlib.util, "find_spec", lambda name, *a: None if name == "mpi4py" else real(name, *a)
    )
    assert launcher.main(["--np", "2", "--", "true"]) == 2
    assert capsys.readouterr().err == (
        "tttv2-run: error: MPI is not installed: pip install 'tttv2[distributed]' (mpi4py and the mpich wheel)\n"
    )


def test_version_and_an_internal_error_in_one_line(capsys, monkeypatch):
    """The conventions of the other commands (docs/cli.md): --version prints the package version; an unexpected
    exception is one line and exit 3, the traceback only with --debug."""
    with pytest.raises(SystemExit) as done:
        launcher.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("tttv2-run ")

    def broken(args):
        raise OSError("disk on fire")

    monkeypatch.setattr(launcher, "run", broken)
    assert launcher.main(["--np", "2", "--", "true"]) == 3
    assert capsys.readouterr().err == "tttv2-run: internal error: OSError: disk on fire (run with --debug)\n"
    assert launcher.main(["--np", "2", "--debug", "--", "true"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith(
        "tttv2-run: internal error: OSError: disk on fire (run with --debug)\n"
    )


def test_mpiexec_is_found_in_the_mpich_package_and_its_absence_named(monkeypatch):
    path = Path(launcher.find_mpiexec())
    assert path.name in ("mpiexec.hydra", "mpiexec") and path.is_file()

    def missing(name):
        raise launcher.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(launcher.importlib.metadata, "distribution", missing)
    with pytest.raises(launcher.RunError, match=r"^MPI is not installed: pip install 'tttv2\[distributed\]'"):
        launcher.find_mpiexec()

    class NoBin:
        files = ()

    monkeypatch.setattr(launcher.importlib.metadata, "distribution", lambda name: NoBin())
    with pytest.raises(launcher.RunError, match="the mpich package is installed without its mpiexec"):
        launcher.find_mpiexec()


# --- the launcher's supervision and report, in process ---------------------------------------------------------


def _write(run_dir: Path, rank: int, kind: str, text: str, when: int = 0) -> None:
    """A rank's status file, recorded ``when`` seconds after the epoch (the report orders failures by time)."""
    path = run_dir / f"rank-{rank}.{kind}"
    path.write_text(text)
    os.utime(path, (when, when))


def test_report_of_a_clean_run_and_of_each_failure(tmp_path, capsys):
    for r in range(3):
        _write(tmp_path, r, "exit", "0")
    assert launcher._report(tmp_path, 3, 0, False, False) == 0
    assert launcher._report(tmp_path, 3, 7, False, False) == 1
    assert "every rank succeeded but mpiexec exited with code 7" in capsys.readouterr().err
    # rank 2 is killed first, then rank 1 reports an exception: rank 2 is the cause
    _write(tmp_path, 2, "exit", "-9", when=100)
    _write(tmp_path, 1, "error", "KeyError: 'x'", when=200)
    (tmp_path / "rank-1.exit").unlink()
    (tmp_path / "rank-2.log").write_text("line a\nline b\n")
    assert launcher._report(tmp_path, 3, 1, False, False) == 128 + 9
    assert capsys.readouterr().err.splitlines() == [
        "tttv2-run: rank 2 was killed by SIGKILL",
        "tttv2-run: rank 1 failed: KeyError: 'x'",
        "[rank 2] line a",
        "[rank 2] line b",
    ]
    # a SIGTERM is the cleanup of the others: never the cause while another rank failed, even if recorded first
    _write(tmp_path, 2, "exit", "-15", when=100)
    assert launcher._report(tmp_path, 3, 1, False, False) == 1
    assert capsys.readouterr().err.splitlines()[:2] == [
        "tttv2-run: rank 1 failed: KeyError: 'x'",
        "tttv2-run: rank 2 was killed by SIGTERM",
    ]
    # the exception first: exit code 1; an unknown signal; rank 0 never recorded anything
    _write(tmp_path, 2, "exit", "-77", when=300)
    (tmp_path / "rank-0.exit").unlink()
    assert launcher._report(tmp_path, 3, 1, True, True) == 1
    assert capsys.readouterr().err.splitlines() == [
        "tttv2-run: rank 1 failed: KeyError: 'x'",
        "tttv2-run: rank 2 was killed by signal 77",
        "tttv2-run: ranks [0] did not finish (killed by tttv2-run after rank 1 failed)",
    ]
    (tmp_path / "rank-1.error").unlink()
    assert launcher._report(tmp_path, 3, 1, True, True) == 128 + 77


def test_the_launcher_kills_a_job_that_outlives_a_failed_rank_by_the_grace(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    _write(tmp_path, 1, "exit", "4")
    code, killed = launcher._supervise(proc, tmp_path, 2, grace=0.2)
    assert killed and code == -signal.SIGTERM


def test_interrupting_the_launcher_stops_the_ranks(tmp_path, monkeypatch, capsys):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher, "_supervise", interrupted)
    assert launcher.main(["--np", "1", "--", sys.executable, "-c", "import time; time.sleep(60)"]) == 130
    assert "tttv2-run: interrupted; the ranks were stopped" in capsys.readouterr().err


def test_sigterm_to_the_launcher_stops_every_rank(tmp_path):
    """``timeout 60 tttv2-run ...`` (SIGTERM to the launcher): the ranks run in the job's own session, so the
    launcher stops them before it exits 128 + SIGTERM (they once ran on, orphaned)."""
    started = tmp_path / "started"
    started.mkdir()
    rank = (
        "import os, pathlib, sys, time; "
        f"pathlib.Path({str(started)!r}, str(os.getpid())).touch(); time.sleep(HANG)"
    ).replace("HANG", str(HANG))
    launcher_proc = subprocess.Popen(
        [sys.executable, "-m", "tttv2.distributed.run", "--np", "2", "--", sys.executable, "-c", rank],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + HANG
        while (
            len(list(started.iterdir())) < 2 and launcher_proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        pids = [int(p.name) for p in started.iterdir()]
        assert len(pids) == 2, launcher_proc.stderr.read() if launcher_proc.poll() is not None else pids
        launcher_proc.send_signal(signal.SIGTERM)
        assert launcher_proc.wait(HANG) == 128 + signal.SIGTERM
        assert "tttv2-run: stopped by SIGTERM; the ranks were stopped" in launcher_proc.stderr.read()
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in pids)
    finally:  # never leave a sleeping rank behind, even when the test fails
        for path in started.iterdir():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(path.name), signal.SIGKILL)
        if launcher_proc.poll() is None:
            launcher_proc.kill()
        launcher_proc.stderr.close()


def test_the_stop_signals_are_left_alone_outside_the_main_thread():
    """Python runs signal handlers in the main thread only: a launcher driven from another thread (an embedding
    program) keeps the signals as they were."""
    import threading

    seen = []

    def body():
        with launcher._stop_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before] and signal.getsignal(signal.SIGTERM) == before
    with launcher._stop_signals():  # in the main thread: the launcher's own handler, then the old one back
        assert signal.getsignal(signal.SIGTERM) is launcher._raise_stopped
        with pytest.raises(launcher._Stopped) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode; never reached
        assert stop.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_stop_signal_to_the_launcher_stops_the_ranks_in_process(monkeypatch, capsys):
    killed = []

    def stopped(*args):
        raise launcher._Stopped(signal.SIGHUP)

    monkeypatch.setattr(launcher, "_supervise", stopped)
    kill_group = launcher._kill_group  # the real one: the job's whole process group goes
    monkeypatch.setattr(launcher, "_kill_group", lambda proc: killed.append(proc) or kill_group(proc))
    argv = ["--np", "1", "--", sys.executable, "-c", "import time; time.sleep(60)"]
    assert launcher.main(argv) == 128 + signal.SIGHUP and len(killed) == 1
    assert "tttv2-run: stopped by SIGHUP; the ranks were stopped" in capsys.readouterr().err


def test_the_rank_wrapper_records_output_and_exit(tmp_path, monkeypatch):
    """tttv2.distributed._rank in process: rank 1's output goes to its log, its exit status to a file."""
    from tttv2.distributed import _rank

    (tmp_path / "plan.json").write_text(json.dumps({"env": [{}, {"WHO": "one"}], "all_output": False}))
    monkeypatch.setenv("PMI_RANK", "1")
    code = _rank.main(
        [str(tmp_path), sys.executable, "-c", "import os, sys; print(os.environ['WHO']); sys.exit(5)"]
    )
    assert code == 5
    assert (tmp_path / "rank-1.log").read_text() == "one\n"
    assert (tmp_path / "rank-1.exit").read_text() == "5"
    assert _rank.main([str(tmp_path), str(tmp_path / "no-such-program")]) == 127
    assert (tmp_path / "rank-1.exit").read_text() == "127"


def test_the_rank_wrapper_prefixes_every_line_with_all_output(tmp_path, monkeypatch, capfdbinary):
    from tttv2.distributed import _rank

    (tmp_path / "plan.json").write_text(json.dumps({"env": [{}, {}], "all_output": True}))
    monkeypatch.setenv("PMI_RANK", "1")
    script = "import sys; print('a'); print('b', file=sys.stderr); sys.stdout.write('no newline')"
    assert _rank.main([str(tmp_path), sys.executable, "-c", script]) == 0
    out, err = capfdbinary.readouterr()
    assert out == b"[1] a\n[1] no newline\n" and err == b"[1] b\n"
    assert not (tmp_path / "rank-1.log").exists()


def test_rank_binding_needs_pyyaml_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(
        launcher.RunError, match=r"^--rank-binding needs pyyaml: pip install 'tttv2\[distributed\]'"
    ):
        launcher.load_rank_binding(str(tmp_path / "b.yaml"), 2)


def test_the_console_script_and_the_extras_are_declared():
    """`tttv2-run` is the launcher's main; the distributed extra brings mpi4py and the mpich wheel, and the test
    extra (what CI installs in a fresh venv) includes all of it."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["tttv2-run"] == "tttv2.distributed.run:main"
    extras = project["optional-dependencies"]
    names = {spec.split(">")[0].split(";")[0].strip() for spec in extras["distributed"]}
    assert {"mpi4py", "mpich"} <= names
    assert set(extras["distributed"]) - {"pyyaml>=6"} <= set(extras["test"])
    assert any(spec.startswith("pyyaml") for spec in extras["test"])


def test_rank_binding_that_is_not_text_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "binding.yaml"
    path.write_bytes(b"rank_bindings:\n  - rank: 0\n    mesh_id: \xff\xfe\n")
    with pytest.raises(launcher.RunError, match=r"binding\.yaml: not UTF-8 text \(byte 40\)"):
        launcher.load_rank_binding(str(path), 2)
    assert launcher.main(["--np", "2", "--rank-binding", str(path), "--", "python", "-c", "pass"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("tttv2-run: error: --rank-binding ") and "not UTF-8" in err and "Traceback" not in err
    )
