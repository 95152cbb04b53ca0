"""pytest plugin (registered as ``tttv2_ttnn``).

* ``--ttnn-emulator`` makes ``import ttnn`` load the emulator.
* ``ttnn_mesh_pool``: ``ttnn_mesh_pool((rows, cols))`` opens that mesh once per test module.
* ``ttnn_mesh_device``: one mesh per test module, its shape given by indirect parametrisation
  (``@pytest.mark.parametrize("ttnn_mesh_device", [(1, 2)], indirect=True)``; default 1x1).
"""

from __future__ import annotations

import pytest

__all__ = ["ttnn_mesh_device", "ttnn_mesh_pool"]


def pytest_addoption(parser) -> None:
    group = parser.getgroup("tttv2")
    group.addoption(
        "--ttnn-emulator",
        action="store_true",
        default=False,
        help="make `import ttnn` resolve to tttv2.ttnn, the CPU mesh emulator, for this test run",
    )


def pytest_configure(config) -> None:
    if config.getoption("--ttnn-emulator", default=False):
        from tttv2 import ttnn

        ttnn.install_as_ttnn()


@pytest.fixture(scope="module")
def ttnn_mesh_pool():
    from tttv2.testing.meshes import MeshPool

    pool = MeshPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def ttnn_mesh_device(request, ttnn_mesh_pool):
    return ttnn_mesh_pool(getattr(request, "param", (1, 1)))
