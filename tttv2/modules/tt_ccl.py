"""TT_CCL: the global semaphores the asynchronous collectives of one mesh cycle through.

Each collective kind keeps one bank per mesh axis (0, 1) plus one for whole-mesh collectives (``cluster_axis=None``),
and each bank is double-buffered: consecutive calls get alternating handles, so a collective never reuses the
semaphores of the one still in flight. A barrier takes one semaphore, an all-gather two, a reduce-scatter three.
``get_tt_ccl(mesh)`` hands out one shared instance per mesh.
"""

from __future__ import annotations

from tttv2 import ttnn

__all__ = [
    "CCL_CHUNKS_PER_SYNC",
    "CCL_NUM_BUFFERS_PER_CHANNEL",
    "CCL_NUM_WORKERS_PER_LINK",
    "TT_CCL",
    "clear_tt_ccl_cache",
    "get_tt_ccl",
]

# tuning of the asynchronous collectives (the values TTTv1 passes everywhere)
CCL_CHUNKS_PER_SYNC = 10
CCL_NUM_WORKERS_PER_LINK = 2
CCL_NUM_BUFFERS_PER_CHANNEL = 2

_BANK_OF_AXIS = {0: 0, 1: 1, None: 2}
_SEMAPHORES_PER_USE = {"barrier": 1, "all_gather": 2, "reduce_scatter": 3}
_BUFFERS = 2


class TT_CCL:
    """Double-buffered global semaphores per collective kind and mesh axis."""

    def __init__(self, mesh_device) -> None:
        if not hasattr(mesh_device, "get_num_devices"):
            raise ValueError(
                f"TT_CCL: mesh_device must be a ttnn.MeshDevice, got {type(mesh_device).__name__}"
            )
        self.mesh_device = mesh_device
        grid = mesh_device.compute_with_storage_grid_size()
        self.core_range_set = ttnn.CoreRangeSet(
            {ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(grid.x - 1, grid.y - 1))}
        )
        self._handles = {
            kind: [[self._make(count) for _ in range(_BUFFERS)] for _ in _BANK_OF_AXIS]
            for kind, count in _SEMAPHORES_PER_USE.items()
        }
        self._next = {kind: [0] * len(_BANK_OF_AXIS) for kind in _SEMAPHORES_PER_USE}

    def _make(self, count: int):
        made = [ttnn.create_global_semaphore(self.mesh_device, self.core_range_set, 0) for _ in range(count)]
        return made[0] if count == 1 else made

    def _cycle(self, kind: str, cluster_axis):
        # a bool is refused although True == 1 would find bank 1 (as the CCL ops refuse it)
        if isinstance(cluster_axis, bool) or cluster_axis not in _BANK_OF_AXIS:
            raise ValueError(f"TT_CCL: cluster_axis must be 0, 1 or None, got {cluster_axis!r}")
        bank = _BANK_OF_AXIS[cluster_axis]
        index = self._next[kind][bank]
        self._next[kind][bank] = (index + 1) % _BUFFERS
        return self._handles[kind][bank][index]

    def get_and_cycle_barrier_semaphore_handle(self, cluster_axis=None):
        return self._cycle("barrier", cluster_axis)

    def get_and_cycle_ag_semaphore_handles(self, cluster_axis=None):
        return self._cycle("all_gather", cluster_axis)

    def get_and_cycle_rs_semaphore_handles(self, cluster_axis=None):
        return self._cycle("reduce_scatter", cluster_axis)

    def get_num_links(self, cluster_axis=None) -> int:
        """Ethernet links along ``cluster_axis`` (0 on a single device)."""
        if self.mesh_device.get_num_devices() == 1:
            return 0
        return ttnn.get_num_links(self.mesh_device, cluster_axis)


_CACHE: dict[int, TT_CCL] = {}


def get_tt_ccl(mesh_device) -> TT_CCL:
    """The shared TT_CCL of ``mesh_device`` (a new one if that mesh object has none yet)."""
    cached = _CACHE.get(id(mesh_device))
    if cached is None or cached.mesh_device is not mesh_device:
        cached = _CACHE[id(mesh_device)] = TT_CCL(mesh_device)
    return cached


def clear_tt_ccl_cache() -> None:
    """Forget every shared TT_CCL (tests that open and close meshes call this)."""
    _CACHE.clear()
