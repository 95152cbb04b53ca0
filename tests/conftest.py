"""Shared fixtures: emulated meshes opened per test and closed afterwards."""

from __future__ import annotations

import sys

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


def pytest_runtest_setup(item):
    """torch is only the reference here: one intra-op thread. On a shared 2-core machine a second thread makes
    each small torch op wait for the other core (a tiny MLP backward: 0.85 ms with one thread, up to 40 ms with
    two under load). Not imported here: tests that need torch import it, and it is set once they have."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)
