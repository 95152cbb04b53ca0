"""Emulated meshes for tests: the shapes modules are tested on, and a pool that opens each shape once.

The pytest plugin (``tttv2.testing.pytest_plugin``) turns these into the ``ttnn_mesh_device`` and
``ttnn_mesh_pool`` fixtures, so the library's tests and the codemod's generated tests open meshes the same way.
"""

from __future__ import annotations

from tttv2 import ttnn

__all__ = ["MESH_1D", "MESH_2D", "MeshPool", "mesh_id"]

# 1D modules: N150, N300, T3K; 2D modules: Galaxy
MESH_1D: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (1, 8))
MESH_2D: tuple[tuple[int, int], ...] = ((8, 4),)


def mesh_id(shape) -> str:
    """``(1, 8)`` → ``"1x8"`` (the case-id spelling)."""
    return "x".join(str(int(d)) for d in shape)


class MeshPool:
    """Opens each requested mesh shape once; ``close()`` closes them all and clears the default device."""

    def __init__(self) -> None:
        self._open: dict[tuple[int, ...], object] = {}

    def __call__(self, shape):
        shape = tuple(int(d) for d in shape)
        if shape not in self._open:
            self._open[shape] = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        return self._open[shape]

    def close(self) -> None:
        from tttv2.modules.tt_ccl import clear_tt_ccl_cache

        for mesh in self._open.values():
            ttnn.close_mesh_device(mesh)
        self._open.clear()
        clear_tt_ccl_cache()
        ttnn.SetDefaultDevice(None)
