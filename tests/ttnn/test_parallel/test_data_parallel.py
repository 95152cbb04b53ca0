"""DistributedDataParallel: equal to single-device full-batch training (NanoGPT, Llama, 1×2 and 1×8), replicas stay
identical, the reported loss is the group mean, gradients are reduced in buckets during backward, no_sync
accumulation, and errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ttnn.test_parallel.conftest import (
    P,
    assert_grads_close,
    assert_same_training,
    batches,
    build,
    reference,
    train,
)
from tttv2 import ttnn
from tttv2.ttnn import ValidationError


@pytest.mark.parametrize(
    ("kind", "shape"), [("gpt", (1, 2)), ("gpt", (1, 8)), ("llama", (1, 2)), ("llama", (1, 8))]
)
def test_ddp_trains_like_one_device_on_the_full_batch(mesh, kind, shape):
    m = mesh(shape)
    model = P.DistributedDataParallel(build(kind, m), m, bucket_cap_mb=0.1, check_parameters=True)
    run = train(model, m, batches(8), data_axis=None)
    assert_same_training(run, reference(kind, 8))
    model.assert_replicas_identical()
    assert len(model.reducer.buckets) > 1
    assert run.losses[-1] < run.losses[0]


def test_ddp_works_with_gradient_checkpointing(mesh):
    # the blocks' parameters get their gradients in the backward nested inside the outer one
    m, one = mesh((1, 2)), mesh((1, 1))
    x, y = batches(4, steps=1)[0]
    dense = build("gpt", one)
    ids = ttnn.from_numpy(x.astype(np.uint32), dtype=ttnn.uint32, device=one)
    ttnn.cross_entropy_loss(
        dense(ids), ttnn.from_numpy(y.astype(np.uint32), dtype=ttnn.uint32, device=one)
    ).backward()
    model = build("gpt", m)
    model.config.checkpointing = True
    ddp = P.DistributedDataParallel(model, m, bucket_cap_mb=0.05)
    ttnn.cross_entropy_loss(ddp(P.shard_batch(x, m)), P.shard_batch(y, m)).backward()
    want = {n: np.array(p.grad.shards()[0]) for n, p in dense.named_parameters()}
    assert_grads_close(ddp.dense_state_dict(grads=True), want)


def test_reported_loss_is_the_mean_over_the_group_and_gradients_do_not_change(mesh):
    m = mesh((1, 4))
    model = P.DistributedDataParallel(build("gpt", m), m)
    x, y = batches(8, steps=1)[0]
    local = ttnn.cross_entropy_loss(model(P.shard_batch(x, m)), P.shard_batch(y, m))
    per_device = [float(s.reshape(-1)[0]) for s in local.shards()]
    assert len(set(per_device)) == 4  # each replica its own slice
    reported = model.reduce_loss(local)
    assert ttnn.nn.utils.item(reported) == pytest.approx(np.mean(per_device), rel=1e-6)
    reported.backward()
    with_reduce = {k: v.copy() for k, v in model.dense_state_dict(grads=True).items()}
    model.module.zero_grad()
    ttnn.cross_entropy_loss(model(P.shard_batch(x, m)), P.shard_batch(y, m)).backward()
    for name, g in model.dense_state_dict(grads=True).items():
        np.testing.assert_array_equal(g, with_reduce[name], err_msg=name)


def test_buckets_are_all_reduced_while_the_backward_runs(mesh):
    m = mesh((1, 2))
    model = P.DistributedDataParallel(build("gpt", m), m, bucket_cap_mb=0.02)
    buckets = model.reducer.buckets
    assert len(buckets) > 3 and buckets[0].params[0] is model.module.lm_head.weight  # reverse order
    x, y = batches(4, steps=1)[0]
    loss = ttnn.cross_entropy_loss(model(P.shard_batch(x, m)), P.shard_batch(y, m))
    seen = []
    with ttnn.OpTrace() as trace:
        # the token table is the last parameter the backward reaches: count the reductions issued before
        model.module.embed.weight.register_hook(lambda g: seen.append(trace.names.count("ttnn.all_reduce")))
        loss.backward()
    assert trace.names.count("ttnn.all_reduce") == len(buckets)
    assert seen == [len(buckets) - 1]  # every other bucket was reduced before the backward reached the table
    assert "ttnn.concat" in trace.names  # a bucket of several gradients goes through one flat buffer


def test_no_sync_accumulates_and_a_reduced_gradient_is_not_reduced_twice(mesh):
    m = mesh((1, 2))
    (x1, y1), (x2, y2) = batches(4, steps=2, distinct=2)
    single = mesh((1, 1))
    dense = build("gpt", single)
    for x, y in ((x1, y1), (x2, y2)):
        ids = ttnn.from_numpy(x.astype(np.uint32), dtype=ttnn.uint32, device=single)
        t = ttnn.from_numpy(y.astype(np.uint32), dtype=ttnn.uint32, device=single)
        ttnn.cross_entropy_loss(dense(ids), t).backward()
    want = {n: np.array(p.grad.shards()[0]) for n, p in dense.named_parameters()}

    model = P.DistributedDataParallel(build("gpt", m), m)
    with model.no_sync():
        ttnn.cross_entropy_loss(model(P.shard_batch(x1, m)), P.shard_batch(y1, m)).backward()
    local = model.module.lm_head.weight.grad.shards()
    assert not np.array_equal(local[0], local[1])  # not reduced inside no_sync
    ttnn.cross_entropy_loss(model(P.shard_batch(x2, m)), P.shard_batch(y2, m)).backward()
    assert_grads_close(model.dense_state_dict(grads=True), want)

    # accumulating onto gradients that were already reduced: only the new part is reduced
    model.module.zero_grad()
    for x, y in ((x1, y1), (x2, y2)):
        ttnn.cross_entropy_loss(model(P.shard_batch(x, m)), P.shard_batch(y, m)).backward()
    assert_grads_close(model.dense_state_dict(grads=True), want)


def test_check_parameters_catches_diverged_replicas(mesh):
    m = mesh((1, 2))
    model = P.DistributedDataParallel(build("gpt", m), m, check_parameters=True)
    x, _ = batches(2, steps=1)[0]
    model(P.shard_batch(x, m))  # identical replicas pass
    weight = model.module.ln_f.weight
    weight._writable_shard(1, "test")[...] += 1.0
    with pytest.raises(ValidationError, match=r"'ln_f\.weight' differs between devices 0 and 1"):
        model(P.shard_batch(x, m))


def test_a_parameter_the_backward_does_not_reach_keeps_no_gradient(mesh):
    m = mesh((1, 2))
    model = P.DistributedDataParallel(build("gpt", m), m)
    _, y = batches(4, steps=1)[0]
    # only the head takes part: the embedding and blocks get no gradient, the head's is still reduced
    hidden = ttnn.from_numpy(np.ones((2, 1, 32, 64), np.float32), layout=ttnn.TILE_LAYOUT, device=m)
    loss = model.reduce_loss(ttnn.cross_entropy_loss(model.module.lm_head(hidden), P.shard_batch(y, m)))
    loss.backward()
    assert model.module.embed.weight.grad is None
    head = model.module.lm_head.weight.grad.shards()
    np.testing.assert_array_equal(head[0], head[1])


def test_shard_batch_splits_dim_0_over_the_group(mesh):
    m = mesh((2, 4))
    x = np.arange(8 * 3).reshape(8, 3)
    rows = P.shard_batch(x, m, cluster_axis=0)
    assert rows.dtype == ttnn.uint32 and list(rows.shape) == [4, 3]
    np.testing.assert_array_equal(rows.shards()[0], x[:4])
    np.testing.assert_array_equal(rows.shards()[3], x[:4])  # replicated along the other axis
    np.testing.assert_array_equal(rows.shards()[4], x[4:])
    flat = P.shard_batch(x.astype(np.float32), m)
    assert flat.dtype == ttnn.float32 and flat.layout == ttnn.TILE_LAYOUT and list(flat.shape) == [1, 3]
    host = ttnn.from_numpy(x.astype(np.float32))
    np.testing.assert_array_equal(P.shard_batch(host, m, 1).shards()[1], x[2:4])


def test_bad_input_errors_name_the_argument(mesh):
    m = mesh((1, 4))
    with pytest.raises(
        ValidationError, match=r"shard_batch: x: expected a batch \(dim 0\) divisible by the 4"
    ):
        P.shard_batch(np.zeros((6, 32)), m)
    with pytest.raises(ValidationError, match=r"x: expected a batch with a leading batch dim"):
        P.shard_batch(np.float32(1.0), m)
    with pytest.raises(ValidationError, match="cluster_axis: expected None on the 1-D mesh 1x4"):
        P.DistributedDataParallel(build("gpt", m), m, cluster_axis=1)
    with pytest.raises(ValidationError, match="cluster_axis: expected None on the 1-D mesh 1x4"):
        P.shard_batch(np.zeros((4, 2)), m, cluster_axis=0)
    wide = mesh((2, 2))
    with pytest.raises(ValidationError, match="cluster_axis: expected None, 0 or 1, got 2"):
        P.DistributedDataParallel(build("gpt", wide), wide, cluster_axis=2)
    for flag in (True, np.bool_(False)):  # the CCL ops' shared check: a flag is not an axis (True == 1)
        with pytest.raises(
            ValidationError, match=r"cluster_axis: expected None, 0 or 1, got (True|np\.False_)$"
        ):
            P.shard_batch(np.zeros((4, 2)), wide, cluster_axis=flag)
    assert P.shard_batch(np.zeros((4, 2)), wide, cluster_axis=np.int64(0)).shape[0] == 2  # a numpy int is one
    model = build("gpt", m)
    with pytest.raises(ValidationError, match=r"mesh_device: expected a ttnn\.MeshDevice"):
        P.DistributedDataParallel(model, "mesh")
    with pytest.raises(ValidationError, match=r"module: expected a ttnn\.nn\.Module"):
        P.DistributedDataParallel(object(), m)
    with pytest.raises(ValidationError, match="bucket_cap_mb: expected a positive number"):
        P.DistributedDataParallel(model, m, bucket_cap_mb=0)
    ddp = P.DistributedDataParallel(model, m)
    with pytest.raises(ValidationError, match="module: is already a DistributedDataParallel"):
        P.DistributedDataParallel(ddp, m)
    with pytest.raises(
        ValidationError, match=r"is already reduced by ttnn\.nn\.parallel\.DistributedDataParallel"
    ):
        P.DistributedDataParallel(model, m)  # a second wrapper would reduce every gradient twice
    ddp.reducer.remove()
    P.DistributedDataParallel(model, m)
    with pytest.raises(ValidationError, match="lives on"):
        P.DistributedDataParallel(build("gpt", mesh((1, 1))), m)
