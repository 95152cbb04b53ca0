"""Tensor parallelism: the Megatron layers against their dense counterparts (outputs and gradients), per-device
parameter memory 1/N, TensorParallel NanoGPT / Llama training equal to one device on 1×2 and 1×8, DP×TP on 2×4
(and a step on 8×4), and errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ttnn.test_parallel.conftest import (
    GPT_WIDE,
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
from tttv2.ttnn.tensor import device_bytes

TILE = ttnn.TILE_LAYOUT
RNG = np.random.default_rng(3)


def dense_and_parallel(mesh, dense_mesh, make_dense, make_parallel, x):
    """Run a dense layer on one device and its parallel version (wrapped for training) on ``mesh`` with the same
    input and upstream gradient; return both layers, the per-device outputs and the input gradients."""
    ttnn.nn.manual_seed(0)
    dense = make_dense(dense_mesh)
    parallel = make_parallel(dense)
    wrapper = P.TensorParallel(parallel, mesh)
    outs, grads = [], []
    for layer, m in ((dense, dense_mesh), (wrapper, mesh)):
        xt = ttnn.from_numpy(x, dtype=ttnn.float32, layout=TILE, device=m)
        xt.requires_grad = True
        y = layer(xt)
        y.backward(ttnn.from_numpy(np.ones(y.shape, np.float32) * 0.5, layout=TILE, device=m))
        outs.append([np.array(s) for s in y.shards()])
        # the input is replicated: its gradient is the mean of the devices' gradients (see reducer.py)
        grads.append(np.mean([np.array(s) for s in xt.grad.shards()], axis=0))
    return dense, wrapper, outs, grads


def _moved(dense, mesh):
    """A copy of the dense layer on ``mesh`` (replicated), for the ``from_dense`` converters."""
    ttnn.nn.manual_seed(0)
    clone = type(dense)(dense.in_features, dense.out_features, dense.bias is not None, device=mesh)
    clone.load_state_dict({k: ttnn.to_numpy(v) for k, v in dense.state_dict().items()})
    return clone


@pytest.mark.parametrize("gather", [True, False])
def test_column_parallel_linear_matches_linear(mesh, gather):
    m, one = mesh((1, 4)), mesh((1, 1))
    x = RNG.standard_normal((2, 1, 32, 64)).astype(np.float32)
    dense, wrapper, outs, grads = dense_and_parallel(
        m,
        one,
        lambda d: ttnn.nn.Linear(64, 128, device=d),
        lambda dense: P.ColumnParallelLinear.from_dense(_moved(dense, m), gather_output=gather),
        x,
    )
    layer = wrapper.module
    assert list(layer.weight.shape) == [64, 32] and list(layer.bias.shape) == [1, 32]
    for k, shard in enumerate(outs[1]):  # gathered: the whole output; else device k's 32 columns
        want = outs[0][0] if gather else outs[0][0][..., 32 * k : 32 * (k + 1)]
        np.testing.assert_allclose(shard, want, rtol=1e-5, atol=1e-5)
    if gather:  # the loss (here: the seeded output) is replicated, as the reduction expects
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-5)
        full = wrapper.dense_state_dict(grads=True)
        np.testing.assert_allclose(
            full["weight"], np.array(dense.weight.grad.shards()[0]), rtol=1e-5, atol=1e-5
        )
        np.testing.assert_allclose(full["bias"], np.array(dense.bias.grad.shards()[0]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("input_is_parallel", [False, True])
def test_row_parallel_linear_matches_linear(mesh, input_is_parallel):
    m, one = mesh((1, 4)), mesh((1, 1))
    x = RNG.standard_normal((2, 1, 32, 128)).astype(np.float32)

    def make(dense):
        return P.RowParallelLinear.from_dense(_moved(dense, m), input_is_parallel=input_is_parallel)

    if input_is_parallel:  # feed it the column-split input a ColumnParallelLinear would produce

        class Split(ttnn.nn.Module):
            def __init__(self, row):
                super().__init__()
                self.row = row
                self.identity = P.ColumnParallelLinear(
                    128, 128, bias=False, device=m, init=(np.eye(128), None)
                )
                self.identity.weight.requires_grad = False

            def forward(self, t):
                return self.row(self.identity(t))

        def make_split(dense):
            return Split(make(dense))

        maker = make_split
    else:
        maker = make
    dense, wrapper, outs, grads = dense_and_parallel(
        m, one, lambda d: ttnn.nn.Linear(128, 64, device=d), maker, x
    )
    for shard in outs[1]:  # replicated after the all-reduce
        np.testing.assert_allclose(shard, outs[0][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-5)
    full = wrapper.dense_state_dict(grads=True)
    prefix = "row." if input_is_parallel else ""
    np.testing.assert_allclose(
        full[f"{prefix}weight"], np.array(dense.weight.grad.shards()[0]), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        full[f"{prefix}bias"], np.array(dense.bias.grad.shards()[0]), rtol=1e-5, atol=1e-5
    )


def test_vocab_parallel_embedding_matches_embedding(mesh):
    m, one = mesh((1, 4)), mesh((1, 1))
    ids = RNG.integers(0, 64, (2, 32)).astype(np.uint32)
    ttnn.nn.manual_seed(0)
    dense = ttnn.nn.Embedding(64, 32, device=one)
    table = np.array(dense.weight.shards()[0])
    layer = P.VocabParallelEmbedding(64, 32, device=m, init=table)
    wrapper = P.TensorParallel(layer, m)
    results = []
    for module, d in ((dense, one), (wrapper, m)):
        out = module(ttnn.from_numpy(ids, dtype=ttnn.uint32, device=d))
        out.backward(ttnn.from_numpy(np.full(out.shape, 0.25, np.float32), layout=TILE, device=d))
        results.append(ttnn.to_numpy(out))
    np.testing.assert_array_equal(results[1], results[0])
    grad = wrapper.dense_state_dict(grads=True)["weight"]
    np.testing.assert_allclose(grad, np.array(dense.weight.grad.shards()[0]), rtol=1e-2, atol=1e-3)
    assert np.count_nonzero(grad.any(axis=1)) == len(np.unique(ids))


def _layer_pairs(m):
    """(dense layer, tensor-parallel layer) makers on mesh ``m``."""
    return [
        (lambda: ttnn.nn.Linear(256, 512, device=m), lambda: P.ColumnParallelLinear(256, 512, device=m)),
        (
            lambda: ttnn.nn.Linear(512, 256, bias=False, device=m),
            lambda: P.RowParallelLinear(512, 256, bias=False, device=m),
        ),
        (lambda: ttnn.nn.Embedding(512, 256, device=m), lambda: P.VocabParallelEmbedding(512, 256, device=m)),
        (lambda: ttnn.nn.LlamaMLP(256, 512, device=m), lambda: P.LlamaMLP(256, 512, device=m)),
    ]


@pytest.mark.parametrize("n", [2, 8])
def test_tensor_parallel_layers_hold_one_nth_of_the_parameters_per_device(mesh, n):
    m = mesh((1, n))
    for make_dense, make_parallel in _layer_pairs(m):
        before = m.memory_report()[0]["dram_used"]
        dense = make_dense()
        dense_bytes = m.memory_report()[0]["dram_used"] - before
        parallel = make_parallel()
        parallel_bytes = m.memory_report()[0]["dram_used"] - before - dense_bytes
        per_device = sum(int(np.prod(p.shape)) for p in parallel.parameters())
        assert per_device * n == sum(int(np.prod(p.shape)) for p in dense.parameters())
        # VocabParallelEmbedding adds its vocab-range start (one uint32 per device)
        extra = sum(device_bytes(b.shape, b.dtype, b.layout, b.memory_config()) for b in parallel.buffers())
        assert parallel_bytes - extra == dense_bytes // n, type(parallel).__name__
        del dense, parallel


@pytest.mark.parametrize(
    ("kind", "shape", "batch"),
    [("gpt-mid", (1, 2), 4), ("gpt-wide", (1, 8), 2), ("llama", (1, 2), 4), ("llama-wide", (1, 8), 2)],
)
def test_tensor_parallel_trains_like_one_device(mesh, kind, shape, batch):
    m = mesh(shape)
    model = P.TensorParallel(build(kind, m), m, check_parameters=True)
    assert isinstance(model.module.embed, P.VocabParallelEmbedding)
    assert isinstance(model.module.blocks[0], P.GPTBlock if kind.startswith("gpt") else P.LlamaBlock)
    run = train(model, m, batches(batch))
    assert_same_training(run, reference(kind, batch))  # includes the gathered gradients of every weight
    assert run.losses[-1] < run.losses[0]


@pytest.mark.parametrize("kind", ["gpt-mid", "llama-mid"])
def test_data_and_tensor_parallel_on_2x4(mesh, kind):
    m = mesh((2, 4))
    model = P.DistributedDataParallel(P.TensorParallel(build(kind, m), m, cluster_axis=1), m, cluster_axis=0)
    assert model.data_parallel_size == 2 and model.tensor_parallel_size == 4
    # a TP weight is split over a row of the mesh and replicated down the columns
    attn = model.module.module.blocks[0].attn
    weight = (attn.qkv if kind.startswith("gpt") else attn.q_proj).weight
    assert not np.array_equal(weight.shards()[0], weight.shards()[1])
    np.testing.assert_array_equal(weight.shards()[0], weight.shards()[4])
    run = train(model, m, batches(4), data_axis=0)
    assert_same_training(run, reference(kind, 4))
    model.assert_replicas_identical()


def test_data_and_tensor_parallel_on_8x4(mesh):
    m = mesh((8, 4))
    model = P.DistributedDataParallel(
        P.TensorParallel(build("gpt-mid", m), m, cluster_axis=1), m, cluster_axis=0
    )
    run = train(model, m, batches(8, steps=2), data_axis=0)
    ref = mesh((1, 1))
    dense = train(build("gpt-mid", ref), ref, batches(8, steps=2))
    np.testing.assert_allclose(run.losses, dense.losses, rtol=2e-5)
    assert_grads_close(run.first_grads, dense.first_grads)


def test_accumulating_onto_reduced_gradients_reduces_only_the_new_part(mesh):
    m, one = mesh((1, 2)), mesh((1, 1))
    data = batches(4, steps=2, distinct=2)
    dense, model = build("gpt-mid", one), P.TensorParallel(build("gpt-mid", m), m)
    for module, d in ((dense, one), (model, m)):
        for x, y in data:  # two synchronised backward passes, no zero_grad in between
            ids = ttnn.from_numpy(x.astype(np.uint32), dtype=ttnn.uint32, device=d)
            t = ttnn.from_numpy(y.astype(np.uint32), dtype=ttnn.uint32, device=d)
            ttnn.cross_entropy_loss(module(ids), t).backward()
    want = {n: np.array(p.grad.shards()[0]) for n, p in dense.named_parameters()}
    assert_grads_close(model.dense_state_dict(grads=True), want)


def test_a_tensor_parallel_layer_refuses_to_train_unwrapped(mesh):
    m = mesh((1, 2))
    layer = P.ColumnParallelLinear(64, 64, device=m)
    x = ttnn.from_numpy(np.ones((1, 1, 32, 64), np.float32), layout=TILE, device=m)
    with pytest.raises(ValidationError, match=r"wrap the model in ttnn\.nn\.parallel\.TensorParallel"):
        layer(x)
    with ttnn.autograd.no_grad():
        assert list(layer(x).shape) == [1, 1, 32, 32]  # inference needs no wrapper
    wrapper = P.TensorParallel(layer, m)
    wrapper(x)
    wrapper.reducer.remove()
    with pytest.raises(ValidationError, match="wrap the model"):
        layer(x)


def test_bad_input_errors_name_the_argument(mesh):
    m = mesh((1, 4))
    with pytest.raises(
        ValidationError, match="out_features: expected a multiple of the tensor-parallel size 4"
    ):
        P.ColumnParallelLinear(64, 70, device=m)
    with pytest.raises(
        ValidationError, match="in_features: expected a multiple of the tensor-parallel size 4"
    ):
        P.RowParallelLinear(70, 64, device=m)
    with pytest.raises(
        ValidationError, match="hidden_dim: expected a multiple of the tensor-parallel size 4"
    ):
        P.LlamaMLP(64, 90, device=m)
    with pytest.raises(
        ValidationError, match="hidden_dim: expected a multiple of the tensor-parallel size 4"
    ):
        P.GPTMLP(64, hidden_dim=90, device=m)
    with pytest.raises(ValidationError, match="num_heads: expected a multiple of the tensor-parallel size 4"):
        P.MultiHeadAttention(192, 6, device=m)
    with pytest.raises(
        ValidationError, match="num_kv_heads: expected a multiple of the tensor-parallel size 4"
    ):
        P.GroupedQueryAttention(256, 4, 2, device=m)
    with pytest.raises(
        ValidationError, match="num_embeddings: expected a multiple of the tensor-parallel size 4"
    ):
        P.VocabParallelEmbedding(66, 32, device=m)
    with pytest.raises(ValidationError, match="cluster_axis: expected None on the 1-D mesh 1x4"):
        P.ColumnParallelLinear(64, 64, cluster_axis=1, device=m)
    with pytest.raises(ValidationError, match="cluster_axis: expected None on the 1-D mesh 1x4"):
        P.TensorParallel(build("gpt-mid", m), m, cluster_axis=0)
    with pytest.raises(ValidationError, match=r"init: expected a weight of shape \[64, 64\]"):
        P.ColumnParallelLinear(64, 64, device=m, init=(np.zeros((3, 3)), np.zeros(64)))
    with pytest.raises(ValidationError, match="init: expected a bias of 64 values"):
        P.ColumnParallelLinear(64, 64, device=m, init=(np.zeros((64, 64)), None))
    with pytest.raises(ValidationError, match="column_order: expected a permutation of range"):
        P.ColumnParallelLinear(64, 64, device=m, column_order=np.zeros(64, int))
    with pytest.raises(ValidationError, match=r"init: expected a table of shape \[64, 32\]"):
        P.VocabParallelEmbedding(64, 32, device=m, init=np.zeros((2, 2)))
    with pytest.raises(ValidationError, match="padding_idx is not supported"):
        P.VocabParallelEmbedding.from_dense(ttnn.nn.Embedding(64, 32, padding_idx=0, device=m))
    with pytest.raises(ValidationError, match="found no tensor-parallel layer"):
        P.TensorParallel(ttnn.nn.Linear(4, 4, device=m), m)
    tied = ttnn.nn.GPT(ttnn.nn.GPTConfig(**{**GPT_WIDE, "weight_tying": True}), device=m)
    with pytest.raises(ValidationError, match="weight tying"):
        P.TensorParallel(tied, m)
    row = P.RowParallelLinear(64, 64, device=m)
    P.TensorParallel(row, m)
    with pytest.raises(ValidationError, match=r"x: expected a replicated tensor \[\.\.\., 64\]"):
        row(ttnn.from_numpy(np.ones((1, 1, 32, 16), np.float32), layout=TILE, device=m))
    wide = mesh((2, 2))
    with pytest.raises(ValidationError, match="overlap the tensor-parallel axes"):
        P.DistributedDataParallel(
            P.TensorParallel(build("gpt-mid", wide), wide, cluster_axis=1), wide, cluster_axis=1
        )


def test_blocks_built_from_scratch_are_initialised_like_the_dense_ones(mesh):
    m = mesh((1, 2))
    for dense_block, parallel_block in (
        (lambda: ttnn.nn.GPTBlock(128, 4, device=m), lambda: P.GPTBlock(128, 4, device=m)),
        (
            lambda: ttnn.nn.LlamaBlock(128, 2, 2, hidden_dim=64, device=m),
            lambda: P.LlamaBlock(128, 2, 2, hidden_dim=64, device=m),
        ),
    ):
        ttnn.nn.manual_seed(5)
        dense = {n: np.array(p.shards()[0]) for n, p in dense_block().named_parameters()}
        ttnn.nn.manual_seed(5)
        wrapper = P.TensorParallel(parallel_block(), m)
        got = wrapper.dense_state_dict()
        assert set(got) == set(dense)
        for name, value in dense.items():
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        x = ttnn.from_numpy(RNG.standard_normal((1, 1, 32, 128)).astype(np.float32), layout=TILE, device=m)
        ttnn.sum(wrapper(x)).backward()
        assert all(p.grad is not None for p in wrapper.parameters())


def test_row_parallel_splits_a_replicated_input_along_one_axis_of_a_2d_mesh(mesh):
    m, one = mesh((2, 2)), mesh((1, 1))
    x = RNG.standard_normal((1, 1, 32, 64)).astype(np.float32)
    ttnn.nn.manual_seed(0)
    dense = ttnn.nn.Linear(64, 32, device=one)
    weight, bias = (np.array(p.shards()[0]) for p in (dense.weight, dense.bias))
    row = P.RowParallelLinear(64, 32, cluster_axis=1, device=m, init=(weight, bias))
    wrapper = P.TensorParallel(row, m, cluster_axis=1)
    want = np.array(dense(ttnn.from_numpy(x, layout=TILE, device=one)).shards()[0])
    out = wrapper(ttnn.from_numpy(x, layout=TILE, device=m))
    for shard in out.shards():
        np.testing.assert_allclose(shard, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(row.weight.shards()[0], weight[:32])  # device (0, 0): rows of rank 0
    np.testing.assert_array_equal(row.weight.shards()[3], weight[32:])  # device (1, 1): rank 1
    ttnn.sum(out).backward()
    np.testing.assert_array_equal(wrapper.dense_state_dict(grads=True)["bias"], np.full((1, 32), 32.0))


def test_tensor_parallel_wrapper_errors(mesh):
    m, other = mesh((1, 2)), mesh((1, 2))
    with pytest.raises(ValidationError, match=r"module: expected a ttnn\.nn\.Module"):
        P.TensorParallel(object(), m)
    with pytest.raises(ValidationError, match="lives on"):
        P.TensorParallel(build("gpt-mid", other), m)
    closed = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    ttnn.close_mesh_device(closed)
    with pytest.raises(ValidationError, match="is closed"):
        P.TensorParallel(build("gpt-mid", m), closed)
    layer = P.ColumnParallelLinear(64, 64, device=m)
    with pytest.raises(ValidationError, match="expected a replicated"):
        P.ColumnParallelLinear.from_dense(layer)  # its weight is already split
