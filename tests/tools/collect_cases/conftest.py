"""Toy target modules for the collect-cases tests, written into a temporary folder so that each test imports
them fresh (through the recorder's import hook)."""

from __future__ import annotations

import itertools
import sys
import textwrap

import pytest

# a TTTv1-shaped module on the emulator: ModelArgs-like args, a Mode enum, tensors as weights and inputs
TOY_LAYERS = textwrap.dedent(
    '''
    import enum

    import numpy as np

    from tttv2 import ttnn


    class Mode(enum.Enum):
        DECODE = "decode"
        PREFILL = "prefill"


    class Args:
        def __init__(self, mesh, model_name="Toy-1B"):
            self.cluster_shape = list(mesh.shape)
            self.num_devices = mesh.get_num_devices()
            self.arch_name = "wormhole_b0"
            self.model_name = model_name


    def tensor(mesh, shape, dtype=ttnn.bfloat16):
        return ttnn.from_numpy(np.zeros(shape, np.float32), dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)


    class ToyMLP:
        def __init__(self, mesh, args, layer_num, up_dtype=ttnn.bfloat8_b):
            self.args = args
            self.layer_num = layer_num
            self.w1 = tensor(mesh, (64, 64), up_dtype)
            self.w2 = tensor(mesh, (64, 64), ttnn.bfloat8_b)
            self.scale = 2.0

        def forward(self, x, mode):
            return x


    class SubMLP(ToyMLP):
        def forward(self, x, mode):
            return super().forward(x, mode)


    class ToyNorm:
        """No args and no forward: only __call__, and a mesh."""

        def __init__(self, device):
            self.device = device

        def __call__(self, x, mode="decode"):
            return x


    class ToyAttention:
        """Keeps no args (like TTTv1's Attention): model and layer come from its constructor arguments."""

        def __init__(self, mesh, configuration, layer_num):
            self.mesh_device = mesh
            self.wqkv = tensor(mesh, (64, 96), ttnn.bfloat8_b)
            self.layer_past = [tensor(mesh, (1, 1, 32, 32)), tensor(mesh, (1, 1, 32, 32))]
            self.norm = ToyNorm(mesh)

        def forward(self, x, current_pos, rot_mats=None, mode="decode", **extra):
            return self.norm(x, mode)


    class NoEntry:
        pass


    NOT_A_CLASS = 3
    '''
)

# the same without ttnn, for the child processes (they start fast)
PLAIN_LAYERS = textwrap.dedent(
    """
    class Args:
        cluster_shape = [1, 8]
        num_devices = 8
        arch_name = "wormhole_b0"

        def __init__(self, model_name="Plain-7B"):
            self.model_name = model_name


    class Plain:
        def __init__(self, model_name="Plain-7B", layer_num=0):
            self.args = Args(model_name)
            self.layer_num = layer_num

        def forward(self, x, mode="decode"):
            return x
    """
)

_counter = itertools.count()


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    """A fresh, not yet imported module name holding TOY_LAYERS."""
    name = f"cc_toy_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(TOY_LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def plain_module(tmp_path):
    """A folder with plain_layers.py (no ttnn) for child-process tests; returns the folder."""
    (tmp_path / "plain_layers.py").write_text(PLAIN_LAYERS)
    return tmp_path


@pytest.fixture
def mesh():
    from tttv2 import ttnn

    device = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    yield device
    ttnn.close_mesh_device(device)
