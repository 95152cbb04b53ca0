"""``sweep``: the tttv1 text demo over models × meshes, as parallel recorded processes into one store.

Each run is ``python -m tttv1.demo.simple_text_demo --model M --mesh X ...`` started through the recorder
(``record.start``); its output goes to ``<logs>/<model>-<mesh>.log``. A run passes when the demo exits 0.
Under ``tttv2-run --np N`` the runs are spread over the ranks (``sweep_ranks``).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import CollectCasesError
from .fields import UserField
from .record import Recording, exit_status, start
from .targets import Target

DEMO = "tttv1.demo.simple_text_demo"
MESHES = ("N150", "N300", "N150x4", "T3K", "TG")
PROGRESS_COLUMNS = (
    TextColumn("[bold]sweep"),
    BarColumn(),
    MofNCompleteColumn(),
    TextColumn("{task.fields[status]}"),
    TimeElapsedColumn(),
)


@dataclass
class Run:
    model: str
    mesh: str
    log: Path
    code: int | None = None
    seconds: float = 0.0
    calls: int = 0
    new_cases: int = 0
    rank: int | None = None  # the MPI rank that ran it (a sweep under tttv2-run)

    @property
    def passed(self) -> bool:
        return self.code == 0


def catalogue_models() -> list[str]:
    from tttv1.catalogue import catalogue_names

    return list(catalogue_names())


def parse_models(text: str) -> list[str]:
    names = catalogue_models()
    if text == "all":
        return names
    chosen = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in names]
    if unknown or not chosen:
        raise CollectCasesError(
            f"--models: expected 'all' or a comma-separated list of {', '.join(names)}, got {text!r}"
        )
    return chosen


def parse_meshes(text: str) -> list[str]:
    chosen = [m.strip() for m in text.split(",") if m.strip()]
    upper = {m.upper(): m for m in MESHES}
    bad = [
        m for m in chosen if m.upper() not in upper and not all(p.isdigit() for p in m.lower().split("x", 1))
    ]
    if bad or not chosen:
        raise CollectCasesError(
            f"--meshes: expected a comma-separated list of {', '.join(MESHES)} or RxC, got {text!r}"
        )
    return [upper.get(m.upper(), m) for m in chosen]


def demo_command(model: str, mesh: str, demo_args: list[str], demo: str = DEMO) -> list[str]:
    return [sys.executable, "-m", demo, "--model", model, "--mesh", mesh, *demo_args]


def start_run(run: Run, store, targets: list[Target], fields, demo_args, demo: str) -> tuple:
    """Start ``run``'s demo under the recorder (into ``store``), its output into its log."""
    run.log.parent.mkdir(parents=True, exist_ok=True)
    log = open(run.log, "w")  # noqa: SIM115 - closed when the run ends
    recording = start(
        store,
        targets,
        demo_command(run.model, run.mesh, list(demo_args), demo),
        fields,
        stdout=log,
        stderr=log,
        env=child_environment(),
    )
    return run, recording, time.perf_counter(), log


def finish_run(item: tuple) -> None:
    """Record the outcome of a run whose process ended (a bad target raises ``TargetError``)."""
    run, recording, started, log = item
    log.close()
    code, status = recording.finish()
    run.code = exit_status(code)
    run.seconds = time.perf_counter() - started
    run.calls = status.get("calls", 0)
    run.new_cases = status.get("new", 0)


def stop_runs(active: list[tuple]) -> None:
    for _, other, _, other_log in active:
        other.process.kill()
        other.finish()
        other_log.close()


def child_environment() -> dict[str, str]:
    """This process's environment without MPI's rank variables: a demo started by a sweep running as an MPI
    rank (``tttv2-run``) is a process of its own, not another rank."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "MPI_LOCAL", "HYDRA_", "MPIR_"))}


def planned_runs(models: list[str], meshes: list[str], jobs: int, logs: Path) -> list[Run]:
    """Every model × mesh as a run logging into ``logs`` (made here: a new or empty folder), after the checks a
    sweep in one process and a sweep over ranks share."""
    if jobs < 1:
        raise CollectCasesError(f"--jobs: expected at least 1, got {jobs}")
    if logs.exists() and (not logs.is_dir() or any(logs.iterdir())):
        raise CollectCasesError(f"--logs {logs}: exists and is not an empty folder; choose a new one")
    logs.mkdir(parents=True, exist_ok=True)
    return [Run(m, x, logs / f"{m}-{x}.log") for m in models for x in meshes]


def sweep(
    store: str | os.PathLike,
    models: list[str],
    meshes: list[str],
    targets: list[Target],
    *,
    fields: tuple[UserField, ...] = (),
    jobs: int = 2,
    logs: Path,
    demo_args: list[str] = (),
    console: Console | None = None,
    demo: str = DEMO,
) -> list[Run]:
    """Run every model × mesh (``jobs`` at a time), show progress, return the runs with their outcome."""
    console = console or Console(stderr=True)
    queue = planned_runs(models, meshes, jobs, logs)
    runs = list(queue)
    active: list[tuple[Run, Recording, float, object]] = []
    with Progress(*PROGRESS_COLUMNS, console=console, transient=False) as progress:
        task = progress.add_task("sweep", total=len(runs), status="")
        while queue or active:
            while queue and len(active) < jobs:
                run = queue.pop(0)
                active.append(start_run(run, store, targets, fields, demo_args, demo))
            time.sleep(0.05)
            for item in list(active):
                run, recording = item[:2]
                if recording.process.poll() is None:
                    continue
                active.remove(item)
                try:
                    finish_run(item)
                except CollectCasesError:  # a bad target: every other run would fail the same way
                    stop_runs(active)
                    raise
                progress.update(
                    task,
                    advance=1,
                    status=f"{run.model} {run.mesh} {'ok' if run.passed else f'FAILED ({run.code})'}",
                )
    return runs


def summary_table(runs: list[Run], meshes: list[str]) -> Table:
    """Models down, meshes across: ``ok 12.3 s`` or ``FAILED (1)`` per run."""
    table = Table(title="collect-cases sweep")
    table.add_column("model", overflow="fold")  # cells wrap, never end in "…": a CI log needs every name
    for mesh in meshes:
        table.add_column(mesh, overflow="fold")
    for model in dict.fromkeys(r.model for r in runs):
        cells = []
        for mesh in meshes:
            run = next(r for r in runs if r.model == model and r.mesh == mesh)
            where = "" if run.rank is None else f", rank {run.rank}"
            cells.append(
                f"[green]ok[/] {run.seconds:.1f} s, {run.calls} calls{where}"
                if run.passed
                else f"[red]FAILED ({run.code})[/] see {escape(run.log.name)}{where}"
            )
        table.add_row(model, *cells)
    return table
