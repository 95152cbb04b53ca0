"""``collect-cases sweep`` under ``tttv2-run --np 2``: the runs are spread over the ranks, rank 0 alone writes
the store, and the store ends with the same cases, hits and layers as the sweep of one process
(tools/collect_cases/sweep_ranks.py; docs/collect_cases.md)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from rich.console import Console

from tests.distributed.test_run import ROOT
from tests.distributed.thread_world import ThreadWorld
from tttv2.distributed import _mpi
from tttv2_tools.collect_cases import CollectCasesError, load_cases, sweep_ranks
from tttv2_tools.collect_cases.store import CaseStore
from tttv2_tools.collect_cases.sweep import summary_table
from tttv2_tools.collect_cases.targets import parse_target

HANG = 180
DEMO = textwrap.dedent(
    """
    import argparse
    from plain_layers import Plain

    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--mesh")
    parser.add_argument("--max-new-tokens", type=int)
    args = parser.parse_args()
    print("demo", args.model, args.mesh)
    for layer in range(2):
        Plain(model_name=args.model, layer_num=layer).forward(args.mesh, mode="decode")
    Plain(model_name="Shared-1B", layer_num=2).forward("every run", mode="prefill")
    raise SystemExit(3 if args.mesh == "TG" else 0)
    """
)
MODELS, MESHES = "Llama-3.2-1B-tiny,Mistral-7B-tiny", "N150,TG"


def path(folder) -> str:
    """The repository, the demo's folder, then what the environment had (the worktree's sources in dev)."""
    return os.pathsep.join([str(ROOT), str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])


def collect(folder, *launcher: str, store: str, logs: str) -> subprocess.CompletedProcess:
    command = [
        *(sys.executable, "-m", "tests.tools.collect_cases.sweep_ranks_program", "ranks_demo", "sweep"),
        *("--store", store, "--models", MODELS, "--meshes", MESHES, "--jobs", "1", "--logs", logs),
        *("--target", "plain_layers:Plain", "--field", "where=x"),
    ]
    return subprocess.run(
        [*launcher, *command] if launcher else command,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=HANG,
        env={**os.environ, "PYTHONPATH": path(folder), "COLUMNS": "200"},
    )


def test_a_sweep_over_two_ranks_fills_one_store_like_one_process(plain_module):
    (plain_module / "ranks_demo.py").write_text(DEMO)
    alone = collect(plain_module, store="one.sqlite", logs="logs-one")
    assert alone.returncode == 1, alone.stderr  # the TG runs fail (exit 3): the sweep says so
    launcher = (sys.executable, "-m", "tttv2.distributed.run", "--np", "2", "--")
    ranks = collect(plain_module, *launcher, store="two.sqlite", logs="logs-two")
    assert ranks.returncode == 1, ranks.stderr
    assert "2 of 4 runs passed; store two.sqlite" in ranks.stdout and "FAILED (3)" in ranks.stdout
    assert ", rank 0" in ranks.stdout and ", rank 1" in ranks.stdout  # the table names who ran each: both did
    for model in MODELS.split(","):
        for mesh in MESHES.split(","):
            assert (plain_module / "logs-two" / f"{model}-{mesh}.log").read_text() == f"demo {model} {mesh}\n"

    def content(store):
        return sorted(
            (c.fields["model_name"], c.fields["extra"]["where"], c.hits, c.layers, c.first_command)
            for c in load_cases(plain_module / store, "plain_layers:Plain")
        )

    one, two = content("one.sqlite"), content("two.sqlite")
    assert one == two
    assert len(one) == 4 + 1 and ("Shared-1B", "every run", 4, (2,), one[-1][4]) in one
    assert all(layers == (0, 1) for model, _, hits, layers, _ in one if model != "Shared-1B")
    assert not list(plain_module.glob("two.sqlite-*"))  # no per-rank store was left next to the store


def test_a_bad_target_under_two_ranks_is_one_error_and_no_hang(plain_module):
    (plain_module / "ranks_demo.py").write_text(DEMO)
    command = [
        *(sys.executable, "-m", "tttv2.distributed.run", "--np", "2", "--timeout", "5", "--"),
        *(sys.executable, "-m", "tests.tools.collect_cases.sweep_ranks_program", "ranks_demo", "sweep"),
        *("--store", "s.sqlite", "--models", MODELS, "--meshes", "N150", "--target", "plain_layers:Nope"),
    ]
    done = subprocess.run(
        command,
        cwd=plain_module,
        capture_output=True,
        text=True,
        timeout=HANG,
        env={**os.environ, "PYTHONPATH": path(plain_module)},
    )
    assert done.returncode == 2, done.stderr
    assert "has no attribute 'Nope'" in done.stderr


# --- in process: rank 0 and rank 1 as two threads over a stand-in for MPI (the same code as under tttv2-run) -----


@pytest.fixture
def two_threads(monkeypatch, plain_module):
    world = ThreadWorld()
    world.me.rank = 0
    monkeypatch.setattr(_mpi, "_state", {"comm": world})
    monkeypatch.setattr(_mpi, "_import_mpi", lambda: world)
    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "20")
    (plain_module / "ranks_demo.py").write_text(DEMO)
    monkeypatch.chdir(plain_module)
    monkeypatch.setenv("PYTHONPATH", path(plain_module))
    return world


def _worker(world, outcome, target="plain_layers:Plain"):
    def run():
        world.me.rank = 1
        try:
            outcome.append(sweep_ranks.work(1, [parse_target(target)], jobs=1, demo="ranks_demo"))
        except Exception as exc:  # pragma: no cover - shown by the assertion on `outcome`
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_coordinator_and_a_worker_share_the_runs_and_rank_0_writes_the_store(two_threads, plain_module):
    outcome: list = []
    thread = _worker(two_threads, outcome)
    store = plain_module / "s.sqlite"
    CaseStore(store, create=True).close()
    runs = sweep_ranks.coordinate(
        store,
        ["A-1B", "B-7B"],
        ["N150", "TG"],
        [parse_target("plain_layers:Plain")],
        size=2,
        jobs=1,
        logs=plain_module / "logs",
        console=Console(file=io.StringIO()),
        demo="ranks_demo",
    )
    thread.join(timeout=HANG)
    assert outcome == [0]
    assert {r.rank for r in runs} == {0, 1}  # both ranks ran some
    assert [(r.model, r.mesh, r.code) for r in runs] == [
        ("A-1B", "N150", 0),
        ("A-1B", "TG", 3),
        ("B-7B", "N150", 0),
        ("B-7B", "TG", 3),
    ]
    assert all(r.calls == 3 for r in runs)
    cases = load_cases(store, "plain_layers:Plain")
    assert sum(c.hits for c in cases) == 12 and len(cases) == 3  # per model, and the shared one
    table = Console(file=io.StringIO(), width=200)
    table.print(summary_table(runs, ["N150", "TG"]))
    assert ", rank 1" in table.file.getvalue()


@pytest.mark.parametrize("meshes", [["N150"], ["N150", "TG"]])  # rank 0's own run fails / a worker's too
def test_a_bad_target_fails_the_sweep_on_rank_0_and_stops_the_worker(two_threads, plain_module, meshes):
    outcome: list = []
    thread = _worker(two_threads, outcome, target="plain_layers:Nope")
    with pytest.raises(CollectCasesError, match="Nope"):
        sweep_ranks.coordinate(
            plain_module / "s.sqlite",
            ["A-1B"],
            meshes,
            [parse_target("plain_layers:Nope")],
            size=2,
            jobs=1,
            logs=plain_module / "logs",
            console=Console(file=io.StringIO()),
            demo="ranks_demo",
        )
    thread.join(timeout=HANG)
    assert outcome == [0]  # the worker stopped when rank 0 said so


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"jobs": 0}, "--jobs: expected at least 1, got 0"), ({"logs": "used"}, "--logs")]
)
def test_bad_arguments_on_rank_0_still_stop_the_workers(two_threads, plain_module, kwargs, message):
    (plain_module / "used").mkdir()
    (plain_module / "used" / "old.log").write_text("")
    outcome: list = []
    thread = _worker(two_threads, outcome)
    options = {"jobs": 1, "logs": plain_module / "logs", **kwargs}
    options["logs"] = plain_module / options["logs"]
    with pytest.raises(CollectCasesError, match=message):
        sweep_ranks.coordinate(
            plain_module / "s.sqlite", ["A-1B"], ["N150"], [], size=2, console=Console(file=io.StringIO()),
            demo="ranks_demo", **options,
        )  # fmt: skip
    thread.join(timeout=HANG)
    assert outcome == [0]


def test_a_worker_gives_up_when_rank_0_is_silent(two_threads, monkeypatch):
    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "0.2")
    two_threads.me.rank = 1
    with pytest.raises(
        _mpi.DistributedTimeoutError, match="rank 1: collect-cases sweep: no order from rank 0"
    ):
        sweep_ranks.work(1, [], demo="ranks_demo")


def test_a_silent_rank_0_is_one_line_and_exit_1_from_the_command(
    two_threads, monkeypatch, plain_module, capsys
):
    """Under tttv2-run, a worker rank that loses rank 0 reports it in one line (exit 1), not as a bug (exit 3)."""
    from tttv2_tools.collect_cases import cli

    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "0.2")
    monkeypatch.setattr(sweep_ranks, "rank_world", lambda: (1, 2))
    two_threads.me.rank = 1
    code = cli.main(
        [
            "sweep",
            "--store",
            str(plain_module / "s.sqlite"),
            "--models",
            "Llama-3.2-1B-tiny",
            "--meshes",
            "N150",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(
        "collect-cases: error: rank 1: collect-cases sweep: no order from rank 0 within 0.2 s"
    )
    assert err.count("\n") == 1 and "internal error" not in err


def test_the_rank_world_is_none_outside_a_launch_and_the_rank_inside(two_threads, monkeypatch):
    for var in ("PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert sweep_ranks.rank_world() is None
    monkeypatch.setenv("PMI_RANK", "0")
    monkeypatch.setenv("PMI_SIZE", "2")
    assert sweep_ranks.rank_world() == (0, 2)


def test_a_store_that_is_not_one_on_rank_0_still_stops_the_workers(two_threads, plain_module):
    (plain_module / "notes.sqlite").write_text("my notes, not a database\n")
    outcome: list = []
    thread = _worker(two_threads, outcome)
    with pytest.raises(CollectCasesError, match=r"notes\.sqlite: not a collect-cases store"):
        sweep_ranks.coordinate(
            plain_module / "notes.sqlite", ["A-1B"], ["N150"], [], size=2, jobs=1, logs=plain_module / "logs",
            console=Console(file=io.StringIO()), demo="ranks_demo",
        )  # fmt: skip
    thread.join(timeout=HANG)
    assert outcome == [0]  # stopped by rank 0, not after TTTV2_DISTRIBUTED_TIMEOUT
    assert (plain_module / "notes.sqlite").read_text() == "my notes, not a database\n"
    assert not (plain_module / "logs").exists()
