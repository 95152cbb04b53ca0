"""Fixtures for the tests tttv2-refactor generates from the ``rpm`` modules (Falcon-40B style: the forward takes
``llm_mode``, one config dict per mode built by ``get_model_config(..., llm_mode, seq_len, num_devices)`` and
switched by ``set_model_config``; docs/refactor.md, "Generated tests"). Each mode's dict is a fixture
(``decode_model_config`` / ``prefill_model_config``); the prefill dict is built for the case's length (its
``PREFILL_SLICES`` sizes the buffer prefill writes into). The constructor's ``model_config`` is the decode dict."""

import functools

import numpy as np
import pytest

from tttv2 import ttnn

_MESHES = {}
HIDDEN = 64


@pytest.fixture(scope="session", autouse=True)
def _close_meshes():
    yield
    for mesh in _MESHES.values():
        ttnn.close_mesh_device(mesh)
    _MESHES.clear()


@pytest.fixture
def mesh_device(request):
    shape = tuple(getattr(request, "param", (1, 2)))
    if shape not in _MESHES:
        _MESHES[shape] = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    return _MESHES[shape]


@functools.cache
def _weights():
    import torch

    generator = torch.Generator().manual_seed(0)
    return {f"m.1.mlp.{w}.weight": torch.randn(HIDDEN, HIDDEN, generator=generator) / 10 for w in ("ff1", "ff2")}


@functools.cache
def _dict(llm_mode, seq_len, num_devices):
    # imported here: the project's own test run collects this folder too, where the rpm package is not importable
    from rpm.model_config import get_model_config

    return get_model_config("BFLOAT16-DRAM", llm_mode, seq_len, num_devices)


@pytest.fixture
def state_dict():
    return _weights()


@pytest.fixture
def base_url():
    return "m"


@pytest.fixture
def layer_num():
    return 1


@pytest.fixture
def hidden_size():
    return HIDDEN


@pytest.fixture
def decode_model_config(mesh_device):
    return _dict("decode", 32, mesh_device.get_num_devices())


@pytest.fixture
def prefill_model_config(mesh_device, seq_len):
    return _dict("prefill", max(seq_len, 64), mesh_device.get_num_devices())


@pytest.fixture
def model_config(decode_model_config):
    return decode_model_config


@pytest.fixture
def x(mesh_device, seq_len):
    values = np.random.default_rng(seq_len).standard_normal((1, 1, seq_len, HIDDEN)).astype(np.float32)
    return ttnn.from_numpy(
        values,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh_device,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
    )


@pytest.fixture
def hidden_states(x):
    return x
