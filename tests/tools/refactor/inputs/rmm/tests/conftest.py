"""Fixtures for the tests tttv2-refactor generates from ``rmm/t3k/fused_qkv.py`` (docs/refactor.md, "Generated
tests"): one per constructor / forward parameter name, and each mode's config dict (``decode_model_config`` /
``prefill_model_config``, from the package's ``get_model_config(llm_mode)``). The constructor's ``model_config``
is the decode dict. The package itself is imported inside the fixtures, never at import time."""

import functools

import numpy as np
import pytest

from tttv2 import ttnn

_MESHES = {}
DIM = 64
QKV = 96


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
    return {
        "layers.0.attention.wqkv": torch.randn(DIM, QKV, generator=generator) / 8,
        "layers.0.attention.wo": torch.randn(QKV, DIM, generator=generator) / 8,
    }


def _dict(llm_mode):
    from rmm.t3k.model_config import get_model_config

    return get_model_config(llm_mode)


@pytest.fixture
def state_dict():
    return _weights()


@pytest.fixture
def decode_model_config():
    return _dict("decode")


@pytest.fixture
def prefill_model_config():
    return _dict("prefill")


@pytest.fixture
def model_config(decode_model_config):
    return decode_model_config


@pytest.fixture
def xs(mesh_device, seq_len):
    values = np.random.default_rng(seq_len).standard_normal((1, 1, seq_len, DIM)).astype(np.float32)
    return ttnn.from_numpy(
        values,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh_device,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
    )
