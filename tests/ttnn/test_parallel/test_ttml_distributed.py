"""The deprecated TTML distributed names (``ttml.distributed``, ``ttml.core.distributed``) forward to
``ttnn.nn.parallel`` and warn with the new name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tttv2 import ttnn

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def ttml():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import ttml as module
    ctx = module.autograd.AutoContext.get_instance()
    yield module
    if ctx._device is not None:
        ctx.close_device()


def test_ttml_data_parallel_spelling_trains_replicas_in_step(ttml):
    ctx = ttml.autograd.AutoContext.get_instance()
    ctx.open_device((1, 2))
    device = ctx.get_device()
    config = ttml.models.nanogpt.NanoGPTConfig(
        vocab_size=64, block_size=32, n_embd=64, n_layer=1, n_head=2, dropout=0.0
    )
    with pytest.warns(DeprecationWarning, match=r"use ttnn\.nn\.parallel\.DistributedDataParallel"):
        model = ttml.distributed.DistributedDataParallel(ttml.models.create_nanogpt(config), sync_axes=[1])
    rng = np.random.default_rng(0)
    with pytest.warns(DeprecationWarning, match=r"use ttnn\.ShardTensorToMesh"):
        mapper = ttml.core.distributed.shard_tensor_to_mesh_mapper(device, 0)
    x = ttml.autograd.Tensor.from_numpy(
        rng.integers(0, 64, (4, 1, 1, 32)).astype(np.uint32), layout=ttnn.ROW_MAJOR_LAYOUT, mapper=mapper
    )
    y = ttml.autograd.Tensor.from_numpy(rng.integers(0, 64, (4, 32)).astype(np.uint32), mapper=mapper)
    loss = ttml.ops.loss.cross_entropy_loss(model(x), y, ttml.ops.ReduceType.MEAN)
    loss.backward(False)
    grads = model.module.lm_head.weight.grad.shards()  # reduced during backward: the same on both devices
    np.testing.assert_array_equal(grads[0], grads[1])
    composer = ttml.core.distributed.concat_mesh_to_tensor_composer(device, 0)
    assert ttnn.to_numpy(loss.get_value(), mesh_composer=composer).shape[0] == 2
    with pytest.raises(ValueError, match="nothing to synchronise"):
        ttml.distributed.DistributedDataParallel(model.module, sync_axes=[0])


def test_ttml_synchronize_gradients_averages_over_the_axes(ttml, open_mesh):
    mesh = open_mesh((2, 2))
    p = ttnn.nn.module.make_parameter(np.zeros((32, 32)), device=mesh)
    per_device = [np.full((32, 32), float(i), np.float32) for i in range(4)]
    p.grad = ttnn.from_numpy(
        np.stack(per_device),
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    p.grad = ttnn.reshape(p.grad, (32, 32))
    with pytest.warns(DeprecationWarning, match=r"synchronize_gradients is deprecated"):
        ttml.core.distributed.synchronize_gradients({"p": ttml.autograd.Tensor(p)}, [0])
    # devices (0, 0)=0 and (1, 0)=2 average to 1; (0, 1)=1 and (1, 1)=3 to 2
    assert [float(s[0, 0]) for s in p.grad.shards()] == [1.0, 2.0, 1.0, 2.0]
    module = ttnn.nn.Module()
    module.p = p
    with pytest.warns(DeprecationWarning, match=r"sync_gradients is deprecated"):
        ttml.distributed.sync_gradients(module)  # the whole mesh
    assert [float(s[0, 0]) for s in p.grad.shards()] == [1.5] * 4
