"""The tmx repository's fixtures, one per constructor / forward parameter name, as the tests tttv2-refactor
generates take them (docs/refactor.md, "Generated tests"). The package is imported inside the fixtures only."""

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
    shape = tuple(getattr(request, "param", (1, 1)))
    if shape not in _MESHES:
        _MESHES[shape] = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    return _MESHES[shape]


@functools.cache
def _built(mesh):
    import torch
    from tmx.tt.ccl import TmxCCL
    from tmx.tt.model_config import ModelArgs

    model_args = ModelArgs(mesh)
    generator = torch.Generator().manual_seed(0)

    def weight(rows, cols):
        return torch.randn(rows, cols, generator=generator) * rows**-0.5

    h, f, e = model_args.hidden_size, model_args.intermediate_size, model_args.num_experts
    weights = {
        "layers.0.feed_forward.w1.weight": weight(f, h),
        "layers.0.feed_forward.w3.weight": weight(f, h),
        "layers.0.feed_forward.w2.weight": weight(h, f),
        "layers.0.gate.weight": weight(e, h),
    }
    return model_args, weights, TmxCCL(mesh), model_args.get_model_config()


@pytest.fixture
def args(mesh_device):
    return _built(mesh_device)[0]


@pytest.fixture
def state_dict(mesh_device):
    return _built(mesh_device)[1]


@pytest.fixture
def tt_ccl(mesh_device):
    return _built(mesh_device)[2]


@pytest.fixture
def model_config(mesh_device):
    return _built(mesh_device)[3]


@pytest.fixture
def weight_cache_path():
    return None


@pytest.fixture
def layer_num():
    return 0


@pytest.fixture
def dtype():
    return ttnn.bfloat8_b


def _activations(mesh, args, rows, seed):
    values = np.random.default_rng(seed).standard_normal((1, 1, rows, args.hidden_size)).astype(np.float32)
    return values, ttnn.from_numpy(
        values,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )


@pytest.fixture
def x(mesh_device, args, seq_len):
    return _activations(mesh_device, args, seq_len, seq_len)[1]


@pytest.fixture
def hidden_states(mesh_device, args, seq_len):
    return _activations(mesh_device, args, seq_len, seq_len + 1)[1]


@pytest.fixture
def hf_reference(mesh_device, args, state_dict):
    """The reference of a known kind: here the MLP, as torch computes SwiGLU from the same weights (PCC 0.99)."""

    def check(module, kind, mode):
        import torch

        from tttv2.testing import assert_pcc

        assert kind == "mlp", kind
        values, x = _activations(mesh_device, args, 32, 99)
        out = module(x, mode)
        w = {k.split(".")[3]: v for k, v in state_dict.items() if "feed_forward" in k}
        t = torch.as_tensor(values)
        expected = (torch.nn.functional.silu(t @ w["w1"].T) * (t @ w["w3"].T)) @ w["w2"].T
        got = ttnn.to_numpy(ttnn.get_device_tensors(out)[0])
        assert_pcc(expected.numpy(), np.asarray(got, np.float32), 0.99)

    return check
