"""Shared fixtures: emulated meshes opened per test and closed afterwards."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn


@pytest.fixture
def open_mesh():
    """``open_mesh((rows, cols), arch=None)`` opens an emulated mesh that is closed after the test."""
    opened = []

    def _open(shape=(1, 1), **kwargs):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape), **kwargs)
        opened.append(mesh)
        return mesh

    yield _open
    for mesh in opened:
        ttnn.close_mesh_device(mesh)
    ttnn.SetDefaultDevice(None)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
