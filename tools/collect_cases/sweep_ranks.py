"""``collect-cases sweep`` over MPI ranks: ``tttv2-run --np N -- collect-cases sweep --store S ...``.

Rank 0 coordinates and is the only writer of the store: it runs ``--jobs`` runs itself (recorded straight into
the store, as a sweep of one process does) and hands the others out, one message per run, to the other ranks,
``--jobs`` at a time each, as slots free up (fast and slow runs balance). A worker rank records each run into a
private store of its own (a temporary folder), then sends the run's outcome and its cases to rank 0, which adds
them to the store in one transaction (``CaseStore.add_cases``: hits added, layers merged). So the store is only
ever opened on rank 0's host, never concurrently from several hosts (SQLite's locks are not safe on network
file systems), and it ends with the same cases, hits and layers as a sweep of one process.

Messages are JSON over MPI point-to-point (``tttv2.distributed._mpi``): a worker that waits for rank 0 gives up
after ``TTTV2_DISTRIBUTED_TIMEOUT`` seconds (rank 0 answers within a poll); rank 0 waits for a busy worker as long
as its demo runs (a rank that dies ends the job through MPI). Logs go to ``--logs`` on the host of the rank that
ran the run; rank 0 prints the table.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress

from .cases import Case
from .errors import CollectCasesError
from .store import CaseStore
from .sweep import DEMO, PROGRESS_COLUMNS, Run, finish_run, planned_runs, start_run, stop_runs
from .targets import Target

__all__ = ["DEMO", "coordinate", "rank_world", "work"]

ORDER, RESULT = (
    30000,
    30001,
)  # MPI tags: rank 0 -> worker (a run, or stop), worker -> rank 0 (a run's outcome)
POLL = 0.05


def rank_world() -> tuple[int, int] | None:
    """``(rank, size)`` when this process is one of several ranks started by ``tttv2-run`` / ``mpiexec``."""
    from tttv2.distributed import _mpi

    if not _mpi.launched() or _mpi.launched_size() < 2:
        return None
    comm = _mpi.initialize()
    return comm.Get_rank(), comm.Get_size()


def _send(message: dict, dest: int, tag: int) -> None:
    from tttv2.distributed import _mpi

    payload = np.frombuffer(json.dumps(message).encode(), dtype=np.uint8)
    _mpi.wait(_mpi.isend_bytes(payload, dest, tag), f"collect-cases sweep: a message to rank {dest}")


def _receive(source: int, tag: int) -> dict:
    from tttv2.distributed import _mpi

    return json.loads(
        bytes(_mpi.recv_bytes(source, tag, f"collect-cases sweep: a message from rank {source}"))
    )


def coordinate(
    store: str | os.PathLike,
    models: list[str],
    meshes: list[str],
    targets: list[Target],
    *,
    size: int,
    fields=(),
    jobs: int = 2,
    logs: Path,
    demo_args: list[str] = (),
    console: Console | None = None,
    demo: str,
) -> list[Run]:
    """Rank 0's side (see the module docstring): every model × mesh, over this rank and ranks 1..size-1."""
    from tttv2.distributed import _mpi

    console = console or Console(stderr=True)
    workers = list(range(1, size))
    try:
        CaseStore(store, create=True).close()  # not a store: fail here, where the workers still get stop
        runs = planned_runs(models, meshes, jobs, logs)
        queue = list(range(len(runs)))
        active: list[tuple] = []
        busy = dict.fromkeys(workers, 0)
        with Progress(*PROGRESS_COLUMNS, console=console, transient=False) as progress:
            task = progress.add_task("sweep", total=len(runs), status="")

            def done(run: Run, where: int) -> None:
                run.rank = where
                outcome = "ok" if run.passed else f"FAILED ({run.code})"
                progress.update(task, advance=1, status=f"{run.model} {run.mesh} {outcome} (rank {where})")

            while queue or active or any(busy.values()):
                while queue and len(active) < jobs:
                    active.append(start_run(runs[queue.pop(0)], store, targets, fields, demo_args, demo))
                for w in workers:
                    while queue and busy[w] < jobs:
                        index = queue.pop(0)
                        run = runs[index]
                        _send(
                            {"run": index, "model": run.model, "mesh": run.mesh, "log": str(run.log)},
                            w,
                            ORDER,
                        )
                        busy[w] += 1
                time.sleep(POLL)
                for item in [a for a in active if a[1].process.poll() is not None]:
                    active.remove(item)
                    try:
                        finish_run(item)
                    except CollectCasesError:  # a bad target: every other run would fail the same way
                        stop_runs(active)
                        raise
                    done(item[0], 0)
                for w in workers:
                    while busy[w] and _mpi.has_message(w, RESULT):
                        result = _receive(w, RESULT)
                        busy[w] -= 1
                        if "error" in result:
                            stop_runs(active)
                            raise CollectCasesError(result["error"])
                        run = runs[result["run"]]
                        run.code, run.seconds, run.calls = result["code"], result["seconds"], result["calls"]
                        cases = [Case(**c) for c in result["cases"]]
                        with CaseStore(store) as s:
                            run.new_cases = s.add_cases(cases, "collect-cases sweep")
                        done(run, w)
    finally:  # the workers end (and kill what they still run) whatever happened here
        for w in workers:
            _send({"stop": True}, w, ORDER)
    return runs


def work(
    rank: int, targets: list[Target], *, fields=(), jobs: int = 2, demo_args: list[str] = (), demo: str
) -> int:
    """A worker rank's side: run what rank 0 orders (``jobs`` at a time), each into a private store, and send
    back each run's outcome and cases; return 0 when rank 0 says stop."""
    from tttv2.distributed import _mpi

    active: list[tuple] = []
    stopping = False
    last = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"collect-cases-rank{rank}-") as private:
        while not stopping:
            while _mpi.has_message(0, ORDER):
                order = _receive(0, ORDER)
                last = time.monotonic()
                if order.get("stop"):
                    stopping = True
                    break
                own = Path(private) / f"run-{order['run']}.sqlite"
                run = Run(order["model"], order["mesh"], Path(order["log"]))
                active.append((order["run"], own, start_run(run, own, targets, fields, demo_args, demo)))
            for entry in [a for a in active if a[2][1].process.poll() is not None]:
                active.remove(entry)
                index, own, item = entry
                last = time.monotonic()
                try:
                    finish_run(item)
                except CollectCasesError as exc:
                    _send({"run": index, "error": str(exc)}, 0, RESULT)
                    continue
                with CaseStore(own) as s:
                    cases = [
                        {"target": c.target, "fields": c.fields, "hits": c.hits, "first_command": c.first_command,
                         "layers": list(c.layers)}
                        for c in s.cases()
                    ]  # fmt: skip
                run = item[0]
                _send(
                    {
                        "run": index,
                        "code": run.code,
                        "seconds": run.seconds,
                        "calls": run.calls,
                        "cases": cases,
                    },
                    0,
                    RESULT,
                )
            if not stopping and not active and time.monotonic() - last > _mpi.timeout():
                raise _mpi.DistributedTimeoutError(
                    f"rank {rank}: collect-cases sweep: no order from rank 0 within {_mpi.timeout():g} s (rank 0 "
                    "died or hangs; TTTV2_DISTRIBUTED_TIMEOUT sets the deadline)"
                )
            time.sleep(0 if stopping else POLL)
        stop_runs([a[2] for a in active])
    return 0
