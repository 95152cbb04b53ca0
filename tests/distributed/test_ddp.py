"""Data parallelism across ranks: a NanoGPT (bfloat16, AdamW) trained over 2 ranks with the gradient all-reduce
over MPI is bit for bit the single-process DDP run on a 1x2 mesh, step by step: every parameter after every
optimizer step and every rank's loss (tests/distributed/ddp_program.py; docs/distributed.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.distributed import DistributedError, _training

ROOT = Path(__file__).resolve().parents[2]
HANG = 180


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    done = subprocess.run(
        [sys.executable, "-m", "tests.distributed.ddp_program", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr
    return out, dict(np.load(out / "single-rank0.npz"))


@pytest.mark.parametrize("sync", ["tttv2", "ttml", "mesh"])
def test_two_ranks_train_bit_identically_to_one_process(single, sync):
    """tttv2 / ttml: each rank its own 1x1 mesh and the gradient all-reduce over MPI; mesh: the single-process
    program unchanged, its 1x2 mesh one logical mesh over the two ranks (ttnn's DDP all-reduce crosses them)."""
    out, reference = single
    done = subprocess.run(
        [
            *(sys.executable, "-m", "tttv2.distributed.run", "--np", "2", "--"),
            *(sys.executable, "-m", "tests.distributed.ddp_program", str(out), "--sync", sync),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ranks-{sync}: 3 steps, rank 0 loss ")
    keys = sorted(k for k in reference if k.startswith("param/"))
    assert len(keys) == 3 * 29  # every parameter of the 2-layer GPT, after each of the 3 steps
    for rank in (0, 1):
        ranks = dict(np.load(out / f"ranks-{sync}-rank{rank}.npz"))
        different = [k for k in keys if not np.array_equal(ranks[k], reference[k])]
        assert not different, f"rank {rank}: {different[:5]}"
        for step in range(3):  # this rank's loss is the single process's device `rank`
            key = f"loss/{step}/{rank}"
            assert np.array_equal(ranks[key], reference[key])
    # the steps changed the parameters (the comparison is not of untouched initial values)
    assert not np.array_equal(reference["param/0/embed.weight"], reference["param/2/embed.weight"])


def test_the_reduction_is_the_emulators_all_reduce():
    """In process: summing two ranks' byte buffers gives exactly ttnn.all_reduce over a 1x2 mesh's shards."""
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    try:
        rng = np.random.default_rng(3)
        x = rng.standard_normal((2, 64, 32)).astype(np.float32)
        t = ttnn.from_numpy(
            x,
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
        )
        shards = [np.ascontiguousarray(s) for s in t.shards()]
        gathered = [s.reshape(-1).view(np.uint8) for s in shards]  # rank r holds device r's shard
        summed = _training.reduce_gathered(shards[:1], gathered)
        assert summed[0].dtype == np.float32
        assert np.array_equal(
            summed[0], np.asarray(shards[0], np.float32) + np.asarray(shards[1], np.float32)
        )
        expected = ttnn.all_reduce(t).shards()[0]  # the same sum, rounded to bfloat16
        rounded = ttnn.from_numpy(summed[0], dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT).shards()[0]
        assert np.array_equal(np.asarray(rounded, np.float32), np.asarray(expected, np.float32))
    finally:
        ttnn.close_mesh_device(mesh)


def test_parameters_must_be_tensors():
    with pytest.raises(DistributedError, match="parameters: expected ttnn tensors, got a list"):
        _training.all_reduce_gradients_({"w": [1.0]})
