"""``collect-cases sweep`` under ``tttv2-run --np 2``: the runs are spread over the ranks, rank 0 alone writes
the store, and the store ends with the same cases, hits and layers as the sweep of one process
(tools/collect_cases/sweep_ranks.py; docs/collect_cases.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.distributed.test_run import ROOT
from tttv2_tools.collect_cases import load_cases

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
