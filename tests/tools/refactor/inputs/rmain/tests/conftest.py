"""The rmain package's fixtures, one per constructor / forward parameter name, as the tests tttv2-refactor
generates take them (docs/refactor.md, "Generated tests"): the 2D-only modules' tests run on the emulated
8x4 mesh (and check that a 1x8 mesh is refused). The package is imported inside the fixtures only."""

import functools

import numpy as np
import pytest

from tttv2 import ttnn

_MESHES = {}


@pytest.fixture(scope="session", autouse=True)
def _close_meshes():
    yield
    for mesh in _MESHES.values():
        ttnn.close_mesh_device(mesh)
    _MESHES.clear()


@pytest.fixture
def mesh_device(request):
    shape = tuple(getattr(request, "param", (8, 4)))
    if shape not in _MESHES:
        _MESHES[shape] = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    return _MESHES[shape]


@functools.cache
def _built(mesh):
    import torch
    from rmain.model_config import ModelArgs

    model_args = ModelArgs(mesh)
    generator = torch.Generator().manual_seed(0)
    weights = {"layers.0.w1": torch.randn(model_args.dim, model_args.dim, generator=generator) * 0.1}
    return model_args, weights


@pytest.fixture
def args(mesh_device):
    return _built(mesh_device)[0]


@pytest.fixture
def state_dict(mesh_device):
    return _built(mesh_device)[1]


@pytest.fixture
def layer_num():
    return 0


@pytest.fixture
def x(mesh_device, args, seq_len):
    values = np.random.default_rng(seq_len).standard_normal((1, 1, seq_len, args.dim)).astype(np.float32)
    return ttnn.from_numpy(
        values,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh_device,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
    )
