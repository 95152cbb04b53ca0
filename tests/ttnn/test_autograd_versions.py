"""Version counters: an in-place write into a tensor that a graph saved makes backward raise (as in torch).

One test per kind of in-place op. Each builds ``y = x * t`` (multiply saves ``t`` to compute ``dx``), writes
``t`` in place with the op under test, and expects ``y.backward()`` to raise naming both ops. Without the
check, ``x.grad`` would silently be computed from the new values of ``t``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn.autograd import Function
from tttv2.ttnn.errors import ValidationError

TILE, RM = ttnn.TILE_LAYOUT, ttnn.ROW_MAJOR_LAYOUT


def dev(array, mesh, dtype=ttnn.float32, layout=TILE, mc=None):
    return ttnn.from_numpy(
        np.asarray(array, dtype=np.float32), dtype=dtype, layout=layout, device=mesh, memory_config=mc
    )


def leaf(shape, mesh, seed=0):
    x = dev(np.random.default_rng(seed).standard_normal(shape), mesh)
    x.requires_grad = True
    return x


def expect_stale(y, saved_by: str, modified_by: str):
    with pytest.raises(ValidationError, match="modified in place") as info:
        y.backward()
    message = str(info.value)
    assert saved_by in message and modified_by in message, message


def test_clean_graph_still_differentiates_and_counts_versions(open_mesh):
    mesh = open_mesh()
    x = leaf((1, 1, 32, 32), mesh)
    t = dev(np.full((1, 1, 32, 32), 3.0), mesh)
    assert t._version == 0
    y = ttnn.multiply(x, t)
    y.backward()
    np.testing.assert_allclose(ttnn.to_numpy(x.grad), 3.0)
    # a write after backward is fine, and bumps the version
    ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), layout=TILE), t)
    assert t._version > 0 and t._versions.last_op == "ttnn.copy_host_to_device_tensor"
    # a tensor that the graph did not save can be modified freely
    u = dev(np.ones((1, 1, 32, 32)), mesh)
    y2 = ttnn.multiply(x, 2.0)
    ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), layout=TILE), u)
    y2.backward()


def test_copy_host_to_device_tensor(open_mesh):
    mesh = open_mesh()
    x, t = leaf((1, 1, 32, 32), mesh), dev(np.ones((1, 1, 32, 32)), mesh)
    y = ttnn.multiply(x, t)
    ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), layout=TILE), t)
    expect_stale(y, "input_tensor_b of ttnn.multiply", "ttnn.copy_host_to_device_tensor")


def test_eltwise_output_tensor(open_mesh):
    mesh = open_mesh()
    x, t = leaf((1, 1, 32, 32), mesh), dev(np.ones((1, 1, 32, 32)), mesh)
    y = ttnn.multiply(x, t)
    ttnn.add(dev(np.ones((1, 1, 32, 32)), mesh), 1.0, output_tensor=t)
    expect_stale(y, "ttnn.multiply", "ttnn.add")


def test_matmul_optional_output_tensor(open_mesh):
    mesh = open_mesh()
    x, t = leaf((1, 1, 32, 32), mesh), dev(np.ones((1, 1, 32, 32)), mesh)
    y = ttnn.multiply(x, t)
    ones = dev(np.ones((1, 1, 32, 32)), mesh)
    ttnn.linear(ones, ones, optional_output_tensor=t)
    expect_stale(y, "ttnn.multiply", "ttnn.linear")


def test_fill_cache(open_mesh):
    mesh = open_mesh()
    cache = dev(np.zeros((2, 1, 64, 32)), mesh, ttnn.bfloat16)
    x = leaf((2, 1, 64, 32), mesh)
    y = ttnn.multiply(x, cache)
    ttnn.fill_cache(cache, dev(np.ones((1, 1, 32, 32)), mesh, ttnn.bfloat16), 1)
    expect_stale(y, "input_tensor_b of ttnn.multiply", "ttnn.fill_cache")


def test_update_cache(open_mesh):
    mesh = open_mesh()
    cache = dev(np.zeros((2, 1, 64, 32)), mesh, ttnn.bfloat16)
    y = ttnn.multiply(leaf((2, 1, 64, 32), mesh), cache)
    ttnn.update_cache(cache, dev(np.ones((1, 1, 32, 32)), mesh, ttnn.bfloat16), 5)
    expect_stale(y, "ttnn.multiply", "ttnn.update_cache")


def _height_sharded(mesh, users, hd):
    grid = mesh.compute_with_storage_grid_size()
    cores = [ttnn.CoreCoord(i % grid.x, i // grid.x) for i in range(users)]
    crs = ttnn.CoreRangeSet([ttnn.CoreRange(c, c) for c in cores])
    return ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(crs, (32, hd))
    )


def test_paged_update_cache(open_mesh):
    mesh = open_mesh()
    cache = dev(np.zeros((2, 1, 64, 32)), mesh, ttnn.bfloat16)
    y = ttnn.multiply(leaf((2, 1, 64, 32), mesh), cache)
    k = dev(np.ones((1, 2, 1, 32)), mesh, ttnn.bfloat16, mc=_height_sharded(mesh, 2, 32))
    ttnn.experimental.paged_update_cache(cache, k, update_idxs=[3, 7])
    expect_stale(y, "ttnn.multiply", "ttnn.experimental.paged_update_cache")


def test_paged_fill_cache(open_mesh):
    mesh = open_mesh()
    cache = dev(np.zeros((4, 1, 32, 32)), mesh, ttnn.bfloat16)
    y = ttnn.multiply(leaf((4, 1, 32, 32), mesh), cache)
    table = ttnn.from_torch(
        torch.tensor([[2, 0], [1, 3]], dtype=torch.int32), dtype=ttnn.int32, layout=RM, device=mesh
    )
    ttnn.experimental.paged_fill_cache(
        cache, dev(np.ones((1, 1, 64, 32)), mesh, ttnn.bfloat16), table, batch_idx=0
    )
    expect_stale(y, "ttnn.multiply", "ttnn.experimental.paged_fill_cache")


def test_sgd_step_on_a_weight_before_backward(open_mesh):
    mesh = open_mesh()
    w = leaf((1, 1, 32, 32), mesh)
    x = dev(np.ones((1, 1, 32, 32)), mesh)
    y = ttnn.multiply(x, w)  # saves w to compute dx: not needed here, but saved all the same
    z = ttnn.multiply(y, w)  # dz/dy needs w's value
    with ttnn.autograd.no_grad():
        ttnn.sgd_step_(w, dev(np.ones((1, 1, 32, 32)), mesh), lr=0.5)
    expect_stale(z, "input_tensor_b of ttnn.multiply", "ttnn.sgd_step_")


def test_adamw_step_on_a_weight_before_backward(open_mesh):
    mesh = open_mesh()
    w = leaf((1, 1, 32, 32), mesh)
    z = ttnn.multiply(w, w)
    m, v = dev(np.zeros((1, 1, 32, 32)), mesh), dev(np.zeros((1, 1, 32, 32)), mesh)
    with ttnn.autograd.no_grad():
        ttnn.adamw_step_(
            w,
            dev(np.ones((1, 1, 32, 32)), mesh),
            m,
            v,
            None,
            lr=0.1,
            beta1=0.9,
            beta2=0.99,
            eps=1e-8,
            weight_decay=0.0,
            step=1,
        )
    expect_stale(z, "ttnn.multiply", "ttnn.adamw_step_")


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_optimizer_step_between_two_retained_backwards(open_mesh, optimizer):
    mesh = open_mesh()
    model = ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.float32)
    x = dev(np.random.default_rng(1).standard_normal((1, 1, 32, 32)), mesh)
    x.requires_grad = True
    loss = ttnn.sum(model(x))
    params = model.parameters()
    opt = ttnn.optim.SGD(params, lr=0.1) if optimizer == "sgd" else ttnn.optim.AdamW(params, lr=0.1)
    loss.backward(retain_graph=True)
    opt.step()
    expect_stale(loss, "ttnn.linear", f"ttnn.{optimizer}_step_")


def test_plus_one_on_saved_ids(open_mesh):
    mesh = open_mesh()
    table = dev(np.random.default_rng(0).standard_normal((8, 32)), mesh, ttnn.bfloat16)
    table.requires_grad = True
    ids = ttnn.from_numpy(np.array([[1, 2, 3]], np.uint32), dtype=ttnn.uint32, layout=RM, device=mesh)
    out = ttnn.embedding(ids, table)
    ttnn.plus_one(ids)  # the rule scatters gradients by id: it would send them to the wrong rows
    expect_stale(out, "input_tensor of ttnn.embedding", "ttnn.plus_one")


def test_persistent_output_buffer_of_a_collective(open_mesh):
    mesh = open_mesh((1, 2))
    t = dev(np.ones((1, 1, 32, 64)), mesh)
    y = ttnn.multiply(leaf((1, 1, 32, 64), mesh), t)
    src = ttnn.from_numpy(
        np.ones((1, 1, 32, 64), np.float32),
        dtype=ttnn.float32,
        layout=TILE,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1),
    )
    ttnn.all_gather(src, dim=-1, output_tensor=t)
    expect_stale(y, "ttnn.multiply", "ttnn.all_gather")


def test_load_state_dict_into_a_saved_parameter(open_mesh):
    mesh = open_mesh()
    model = ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.float32)
    x = leaf((1, 1, 32, 32), mesh)
    loss = ttnn.sum(model(x))
    model.load_state_dict({k: np.zeros(v.shape, np.float32) for k, v in model.state_dict().items()})
    expect_stale(loss, "ttnn.linear", "Linear.load_state_dict")


def test_write_through_a_per_device_view_reaches_the_owner(open_mesh):
    mesh = open_mesh((1, 2))
    cache = dev(np.zeros((2, 1, 64, 32)), mesh, ttnn.bfloat16)
    y = ttnn.multiply(leaf((2, 1, 64, 32), mesh), cache)
    view = ttnn.get_device_tensors(cache)[1]
    ttnn.fill_cache(view, ttnn.get_device_tensors(dev(np.ones((1, 1, 32, 32)), mesh, ttnn.bfloat16))[1], 0)
    assert cache._version > 0
    expect_stale(y, "ttnn.multiply", "ttnn.fill_cache")


def test_a_view_shares_its_input_version(open_mesh):
    mesh = open_mesh()
    t = dev(np.ones((2, 1, 32, 32)), mesh)
    v = ttnn.view(t, (1, 2, 32, 32))
    y = ttnn.multiply(leaf((1, 2, 32, 32), mesh), v)
    ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.zeros((2, 1, 32, 32), np.float32), layout=TILE), t)
    assert v._version == t._version > 0
    expect_stale(y, "input_tensor_b of ttnn.multiply", "ttnn.copy_host_to_device_tensor")


def test_modified_output_is_detected(open_mesh):
    mesh = open_mesh()
    x = leaf((1, 1, 32, 32), mesh)
    y = ttnn.exp(x)  # exp's rule may read its output
    z = ttnn.multiply(y, 2.0)
    ttnn.copy_host_to_device_tensor(
        ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), layout=TILE), y.detach()
    )
    z.backward()  # a detached copy is copy-on-write: y itself is unchanged, so this is fine
    x2 = leaf((1, 1, 32, 32), mesh)
    y2 = ttnn.exp(x2)
    with ttnn.autograd.no_grad():
        ttnn.copy_host_to_device_tensor(
            ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), layout=TILE), y2
        )
    with pytest.raises(ValidationError, match=r"the output of ttnn\.exp"):
        y2.backward()


class _Scale(Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(s)
        return ttnn.multiply(x, s)

    @staticmethod
    def backward(ctx, grad):
        (s,) = ctx.saved_tensors
        return ttnn.multiply(grad, s), None


def test_custom_function_saved_tensors(open_mesh):
    mesh = open_mesh()
    s = dev(np.full((1, 1, 32, 32), 2.0), mesh)
    y = _Scale.apply(leaf((1, 1, 32, 32), mesh), s)
    ttnn.copy_host_to_device_tensor(ttnn.from_numpy(np.zeros((1, 1, 32, 32), np.float32), layout=TILE), s)
    expect_stale(y, "saved_tensors of _Scale", "ttnn.copy_host_to_device_tensor")


def test_checkpointed_block_parameters(open_mesh):
    mesh = open_mesh()
    block = ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.float32)
    loss = ttnn.sum(ttnn.nn.checkpoint(block, leaf((1, 1, 32, 32), mesh)))
    block.load_state_dict({k: np.zeros(v.shape, np.float32) for k, v in block.state_dict().items()})
    expect_stale(loss, "_Recompute", "load_state_dict")
