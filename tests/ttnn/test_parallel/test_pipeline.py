"""Pipeline parallelism: the point-to-point transfer op, the GPipe / 1F1B step orders, NanoGPT and Llama trained in 2
and 4 stages equal to one device, 1F1B's lower peak memory, and errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ttnn.test_parallel.conftest import P, assert_same_training, batches, build, reference, train
from tttv2 import ttnn
from tttv2.ttnn import ValidationError
from tttv2.ttnn.memory_tracker import MemoryTracker

TILE = ttnn.TILE_LAYOUT


def test_send_recv_moves_shards_to_the_other_submesh_and_back_in_backward(mesh):
    m = mesh((1, 4))
    left, right = m.create_submeshes(ttnn.MeshShape(1, 2))
    x = np.arange(2 * 32 * 32, dtype=np.float32).reshape(2, 1, 32, 32)
    t = ttnn.from_numpy(x, layout=TILE, device=left, mesh_mapper=ttnn.ShardTensorToMesh(left, dim=0))
    t.requires_grad = True
    before = [r["dram_used"] for r in m.memory_report()]
    moved = ttnn.experimental.send_recv(t, right)
    after = [r["dram_used"] for r in m.memory_report()]
    assert moved.device() is right and moved.tensor_topology() == t.tensor_topology()
    for i in (0, 1):
        np.testing.assert_array_equal(moved.shards()[i], t.shards()[i])
    # the received copy is allocated on the receiving devices only
    assert after[0] == before[0] and after[1] == before[1]
    assert after[2] - before[2] == after[3] - before[3] == 32 * 32 * 4
    ttnn.sum(ttnn.multiply(moved, 3.0)).backward()
    assert t.grad.device() is left
    np.testing.assert_array_equal(
        ttnn.to_numpy(t.grad, mesh_composer=ttnn.ConcatMeshToTensor(left, dim=0)), 3.0
    )


def test_send_recv_errors_name_the_argument(mesh):
    m = mesh((1, 4))
    left, right = m.create_submeshes(ttnn.MeshShape(1, 2))
    t = ttnn.from_numpy(np.ones((32, 32), np.float32), layout=TILE, device=left)
    with pytest.raises(ValidationError, match=r"mesh_device: expected a ttnn\.MeshDevice"):
        ttnn.experimental.send_recv(t, "right")
    with pytest.raises(ValidationError, match="receiving mesh of the sender's shape"):
        ttnn.experimental.send_recv(t, m)
    with pytest.raises(ValidationError, match="no device in common"):
        ttnn.experimental.send_recv(t, m.create_submesh(ttnn.MeshShape(1, 2), ttnn.MeshCoordinate(0, 1)))
    with pytest.raises(ValidationError, match=r"memory_config: expected a ttnn\.MemoryConfig"):
        ttnn.experimental.send_recv(t, right, memory_config="L1")
    closed = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    ttnn.close_mesh_device(closed)
    with pytest.raises(ValidationError, match="closed"):
        ttnn.experimental.send_recv(t, closed)


def test_schedules_order_the_steps():
    gpipe = P.schedule_steps("gpipe", 2, 3)
    assert gpipe[0] == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)]
    one_f_one_b = P.schedule_steps("1f1b", 3, 4)
    assert one_f_one_b[0] == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1), ("B", 2), ("B", 3)]
    assert one_f_one_b[2] == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]
    for steps in one_f_one_b:  # every micro-batch once forward, once backward, forward first
        assert sorted(steps) == sorted([("F", m) for m in range(4)] + [("B", m) for m in range(4)])


@pytest.mark.parametrize(
    ("kind", "shape", "stages", "micro_batches", "schedule"),
    [
        ("gpt", (1, 2), 2, 2, "gpipe"),
        ("gpt", (1, 4), 4, 4, "1f1b"),
        ("llama", (1, 2), 2, 2, "1f1b"),
        ("llama", (2, 2), 4, 2, "gpipe"),
    ],
)
def test_pipeline_trains_like_one_device(mesh, kind, shape, stages, micro_batches, schedule):
    m = mesh(shape)
    pipe = P.Pipeline(
        P.pipeline_stages(build(kind, m), stages), m, micro_batches=micro_batches, schedule=schedule
    )
    per_stage = m.get_num_devices() // stages
    assert [sub.get_num_devices() for sub in pipe.submeshes] == [per_stage] * stages
    first = next(pipe.stages[0].parameters())
    assert first.device() is pipe.submeshes[0]
    run = train(pipe, m, batches(4))
    assert_same_training(run, reference(kind, 4))
    assert run.losses[-1] < run.losses[0]
    assert pipe.last_losses and len(pipe.last_losses) == micro_batches


def test_one_f_one_b_keeps_less_activation_memory_than_gpipe(mesh):
    peaks = {}
    x, y = batches(8, steps=1)[0]
    for schedule in ("gpipe", "1f1b"):
        m = mesh((1, 2))
        pipe = P.Pipeline(P.pipeline_stages(build("gpt", m), 2), m, micro_batches=8, schedule=schedule)
        tracker = MemoryTracker(m)
        with tracker.phase("forward+backward"):
            loss = pipe.forward_backward(x, y)
        peaks[schedule] = [s.dram_peak - (s.dram_used - s.dram_delta) for s in tracker.snapshots]
        peaks[schedule + " loss"] = loss
    # stage 0 holds up to 8 micro-batches of activations under GPipe, 2 under 1F1B
    assert peaks["1f1b"][0] < 0.5 * peaks["gpipe"][0]
    assert peaks["1f1b"][1] <= peaks["gpipe"][1]
    assert peaks["1f1b loss"] == pytest.approx(peaks["gpipe loss"], rel=1e-6)


def test_plain_forward_backpropagates_through_the_transfers(mesh):
    m, one = mesh((1, 2)), mesh((1, 1))
    x, y = batches(4, steps=1)[0]
    dense = build("gpt", one)
    ids = ttnn.from_numpy(x.astype(np.uint32), dtype=ttnn.uint32, device=one)
    ttnn.cross_entropy_loss(
        dense(ids), ttnn.from_numpy(y.astype(np.uint32), dtype=ttnn.uint32, device=one)
    ).backward()
    pipe = P.Pipeline(P.pipeline_stages(build("gpt", m), 2), m)
    logits = pipe(x)
    assert logits.device() is pipe.submeshes[1]
    target = ttnn.from_numpy(y.astype(np.uint32), dtype=ttnn.uint32, device=pipe.submeshes[1])
    ttnn.cross_entropy_loss(logits, target).backward()
    for (name, p), q in zip(dense.named_parameters(), pipe.parameters()):
        np.testing.assert_allclose(
            np.array(q.grad.shards()[0]), np.array(p.grad.shards()[0]), rtol=1e-4, atol=1e-6, err_msg=name
        )


def test_pipeline_generates_and_takes_device_inputs(mesh):
    m = mesh((1, 2))
    pipe = P.Pipeline(P.pipeline_stages(build("llama", m), 2), m)
    assert pipe.context == 32
    out = pipe.generate(np.array([[1, 2, 3]]), 3)
    assert out.shape == (1, 6) and list(out[0, :3]) == [1, 2, 3]
    ids = ttnn.from_numpy(np.ones((1, 32), np.uint32), dtype=ttnn.uint32, device=pipe.submeshes[0])
    with ttnn.autograd.no_grad():
        assert list(pipe(ids).shape) == [1, 1, 32, 64]
    plain = P.Pipeline([ttnn.nn.Sequential(), ttnn.nn.Sequential()], m)
    with pytest.raises(ValidationError, match="generation needs stages made by pipeline_stages"):
        plain.generate(np.array([[1]]), 1)


def test_bad_input_errors_name_the_argument(mesh):
    m = mesh((1, 4))
    with pytest.raises(ValidationError, match="stages: expected a stage count that tiles the 1x4 mesh"):
        P.Pipeline(P.pipeline_stages(build("gpt", m), 3), m)
    with pytest.raises(ValidationError, match="micro_batches: expected a positive int"):
        P.Pipeline(P.pipeline_stages(build("gpt", m), 2), m, micro_batches=0)
    with pytest.raises(ValidationError, match="schedule: expected one of gpipe, 1f1b"):
        P.Pipeline(P.pipeline_stages(build("gpt", m), 2), m, schedule="zero-bubble")
    with pytest.raises(ValidationError, match="stages: expected a non-empty list"):
        P.Pipeline([], m)
    with pytest.raises(ValidationError, match="num_stages: expected a positive int"):
        P.pipeline_stages(build("gpt", m), 0)
    with pytest.raises(ValidationError, match=r"model: expected a ttnn.nn.GPT or ttnn.nn.Llama"):
        P.pipeline_stages(ttnn.nn.Linear(4, 4, device=m), 2)
    pipe = P.Pipeline(P.pipeline_stages(build("gpt", m), 2), m, micro_batches=4)
    x, y = batches(4, steps=1)[0]
    with pytest.raises(
        ValidationError, match=r"inputs: expected a batch \(dim 0\) divisible by micro_batches=4"
    ):
        pipe.forward_backward(x[:3], y[:3])
    with pytest.raises(ValidationError, match="targets: expected the batch size of inputs"):
        pipe.forward_backward(x, np.concatenate([y, y]))
    shared = ttnn.nn.Linear(32, 32, device=m)
    with pytest.raises(ValidationError, match="is shared by stages 0 and 1"):
        P.Pipeline([ttnn.nn.Sequential(shared), ttnn.nn.Sequential(shared)], m)
    sharded = ttnn.nn.Module()
    sharded.w = ttnn.nn.module.make_parameter(
        np.ones((4, 32)), device=m, mesh_mapper=ttnn.ShardTensorToMesh(m, dim=0)
    )
    with pytest.raises(ValidationError, match="is sharded"):
        P.Pipeline([sharded, ttnn.nn.Sequential()], m)
    tied = ttnn.nn.GPT(
        ttnn.nn.GPTConfig(vocab_size=64, block_size=32, n_layer=1, n_head=2, n_embd=64, weight_tying=True),
        device=m,
    )
    with pytest.raises(ValidationError, match="weight tying"):
        P.pipeline_stages(tied, 2)
