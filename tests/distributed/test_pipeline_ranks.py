"""Pipeline parallelism across ranks: a NanoGPT (bfloat16, AdamW, 2 micro-batches) in 2 stages over 2 ranks (GPipe
and 1F1B) and in 4 stages over 4 ranks with RankPipeline trains bit for bit like the single-process Pipeline on a
1x2 / 1x4 mesh, step by step: the loss and every parameter after every optimizer step
(tests/distributed/pipeline_program.py; docs/distributed.md)."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from tests.distributed.test_run import ROOT, tttv2_run
from tests.distributed.thread_world import PerThread, ThreadWorld
from tttv2 import ttnn
from tttv2.distributed import _mpi
from tttv2.ttnn import ValidationError
from tttv2.ttnn.ops import sockets

HANG = 180
PROGRAM = (sys.executable, "-m", "tests.distributed.pipeline_program")


@pytest.mark.parametrize(("stages", "schedule"), [(2, "gpipe"), (2, "1f1b"), (4, "1f1b")])
def test_ranks_train_a_pipeline_bit_identically_to_one_process(tmp_path, stages, schedule):
    alone = subprocess.run(
        [*PROGRAM, str(tmp_path), "--schedule", schedule, "--stages", str(stages)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert alone.returncode == 0, alone.stderr
    done = tttv2_run("--np", str(stages), "--", *PROGRAM, str(tmp_path), "--schedule", schedule)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ranks {schedule}: 3 steps, loss ")
    single = dict(np.load(tmp_path / f"single{stages}-{schedule}-rank0.npz"))
    ranks = [dict(np.load(tmp_path / f"ranks{stages}-{schedule}-rank{r}.npz")) for r in range(stages)]
    params = sorted(k for k in single if k.startswith("param/"))
    assert len(params) == 3 * (5 + 12 * max(2, stages))  # every parameter of the GPT (untied head), 3 steps
    held = []
    for rank, record in enumerate(ranks):  # each rank holds exactly its stage's parameters
        mine = sorted(k for k in record if k.startswith("param/"))
        assert mine and all(k.split("/")[2].startswith(f"stages.{rank}.") for k in mine)
        different = [k for k in mine if not np.array_equal(record[k], single[k])]
        assert not different, different[:5]
        for step in range(3):  # every rank returns the mean loss of the step, as the single process
            assert record[f"loss/{step}"] == single[f"loss/{step}"]
        held += mine
    assert sorted(held) == params
    assert not np.array_equal(
        single["param/0/stages.0.embed.weight"], single["param/2/stages.0.embed.weight"]
    )


def _stages(mesh, n):
    ttnn.nn.manual_seed(5)
    config = ttnn.nn.GPTConfig(
        vocab_size=17, block_size=32, n_layer=1, n_head=1, n_embd=32, dropout=0.0, weight_tying=False
    )
    return ttnn.nn.parallel.pipeline_stages(ttnn.nn.GPT(config, device=mesh, dtype=ttnn.bfloat16), n)


def test_one_rank_holds_the_whole_pipeline_and_trains_like_pipeline():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        ids = np.random.default_rng(2).integers(0, 17, size=(2, 33))
        losses = []
        for kind in (ttnn.nn.parallel.Pipeline, ttnn.nn.parallel.RankPipeline):
            pipe = kind(_stages(mesh, 1), mesh, micro_batches=2, schedule="1f1b")
            losses.append(pipe.forward_backward(ids[:, :-1], ids[:, 1:]))
            grads = [np.array(p.grad.shards()[0]) for p in pipe.parameters()]
            losses.append(grads)
        assert losses[0] == losses[2]
        assert all(np.array_equal(a, b) for a, b in zip(losses[1], losses[3]))
        assert "stage 0 of 1 on 1x1, micro_batches=2, schedule=1f1b" in repr(pipe)
        with pytest.raises(ValidationError, match="a stage runs only inside forward_backward"):
            pipe(ids)
        with pytest.raises(ValidationError, match=r"targets: expected the batch size of inputs \(2\), got 4"):
            pipe.forward_backward(ids[:, :-1], np.concatenate([ids, ids])[:, 1:])
    finally:
        ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"stages": 2},
            r"expected one stage per rank, got 2 stages for 1 rank\(s\) \(start the program with "
            r"tttv2-run --np 2\)",
        ),
        ({"stages": []}, "stages: expected a non-empty list of ttnn.nn.Modules"),
        ({"micro_batches": 0}, "micro_batches: expected a positive int, got 0"),
        ({"schedule": "zigzag"}, "schedule: expected one of gpipe, 1f1b, got 'zigzag'"),
    ],
)
def test_bad_rank_pipelines_are_named(kwargs, message):
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        stages = kwargs.pop("stages", 1)
        stages = _stages(mesh, stages) if stages else stages
        with pytest.raises(ValidationError, match=message):
            ttnn.nn.parallel.RankPipeline(stages, mesh, **kwargs)
    finally:
        ttnn.close_mesh_device(mesh)


def test_two_threads_as_ranks_train_like_the_pipeline_in_process(monkeypatch):
    """The rank code paths inside coverage: ranks 0 and 1 as two threads over a stand-in for MPI, each with its own
    1x1 mesh, against Pipeline on a 1x2 mesh (the same bit-identity as over real ranks, checked above)."""
    whole = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))  # the reference, opened before the ranks exist
    world = ThreadWorld()
    world.me.rank = 0
    monkeypatch.setattr(_mpi, "_state", {"comm": world})
    monkeypatch.setattr(_mpi, "_import_mpi", lambda: world)
    monkeypatch.setattr(sockets, "_pair_counts", PerThread())
    monkeypatch.setattr(sockets, "_exit_hook", [True])
    monkeypatch.setattr(sockets, "_live", sockets.weakref.WeakSet())
    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "60")
    ids = np.random.default_rng(4).integers(0, 17, size=(4, 33))
    meshes = [ttnn.open_mesh_device(ttnn.MeshShape(1, 1)) for _ in range(2)]
    try:
        pipe = ttnn.nn.parallel.Pipeline(_stages(whole, 2), whole, micro_batches=2, schedule="1f1b")
        expected = pipe.forward_backward(ids[:, :-1], ids[:, 1:])
        grads = {n: np.array(p.grad.shards()[0]) for n, p in pipe.named_parameters()}
        built = [_stages(meshes[r], 2) for r in (0, 1)]  # every rank builds all stages, from the same seed
        results: dict = {}

        def rank(r):
            world.me.rank = r
            try:
                mine = ttnn.nn.parallel.RankPipeline(built[r], meshes[r], micro_batches=2, schedule="1f1b")
                loss = mine.forward_backward(ids[:, :-1], ids[:, 1:])
                results[r] = (loss, {n: np.array(p.grad.shards()[0]) for n, p in mine.named_parameters()})
            except Exception as exc:  # pragma: no cover - shown by the assertion below
                results[r] = exc

        threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=HANG)
        for r in (0, 1):
            loss, mine = results[r]
            assert loss == expected
            assert mine and all(
                np.array_equal(g, grads[n.replace("stage.", f"stages.{r}.", 1)]) for n, g in mine.items()
            )
    finally:
        for m in (whole, *meshes):
            ttnn.close_mesh_device(m)
