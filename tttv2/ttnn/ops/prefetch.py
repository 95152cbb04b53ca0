"""The Galaxy demo's prefetcher resources: a global circular buffer between DRAM-reader (sender) cores and the
matmul (receiver) cores. On hardware the prefetcher streams the next weights into it while the model computes; the
values of every op are the same without it. The emulator keeps it as bookkeeping: the core mapping is checked
against the device grid, and its L1 (``size`` bytes on every sender and receiver core) is counted on each device
of the mesh for as long as the object lives."""

from __future__ import annotations

import weakref

from ..device import MeshDevice
from ..errors import op_error
from ..memory import CoreCoord, CoreRangeSet
from ..tensor import _Allocation
from ..types import BufferType

__all__ = ["GlobalCircularBuffer", "create_global_circular_buffer"]
__experimental__: list[str] = []
__transformer__: list[str] = []


class GlobalCircularBuffer:
    """What ``ttnn.create_global_circular_buffer`` returns: its mesh, sender → receivers mapping and size."""

    def __init__(
        self, mesh_device: MeshDevice, mapping: list[tuple[CoreCoord, CoreRangeSet]], size: int
    ) -> None:
        self.mesh_device = mesh_device
        self.sender_receiver_core_mapping = mapping
        self.size = size
        cores = len(mapping) + sum(receivers.num_cores() for _, receivers in mapping)
        self._allocation = _Allocation(
            mesh_device,
            BufferType.L1,
            size * cores,
            f"global circular buffer of {size} bytes on {cores} cores",
        )
        self._finalizer = weakref.finalize(self, self._allocation.release)

    def sender_cores(self) -> list[CoreCoord]:
        return [sender for sender, _ in self.sender_receiver_core_mapping]

    def receiver_cores(self) -> list[CoreCoord]:
        return [c for _, receivers in self.sender_receiver_core_mapping for c in receivers.cores()]

    def __repr__(self) -> str:
        return f"GlobalCircularBuffer(size={self.size}, senders={len(self.sender_receiver_core_mapping)})"


def create_global_circular_buffer(
    mesh_device: MeshDevice, sender_receiver_core_mapping, size: int, buffer_type: BufferType = BufferType.L1
) -> GlobalCircularBuffer:
    """A global circular buffer of ``size`` bytes per core from each sender core to its receiver cores. Checked as
    tt-metal does: every core in the device grid, no core used twice (a sender is never a receiver), each sender with
    receivers, L1 only, and ``size`` within one core's L1."""
    op = "ttnn.create_global_circular_buffer"
    if not isinstance(mesh_device, MeshDevice):
        raise op_error(op, "mesh_device", "a ttnn.MeshDevice", type(mesh_device).__name__)
    if buffer_type is not BufferType.L1:
        raise op_error(op, "buffer_type", "BufferType.L1", repr(buffer_type))
    # ``size`` bytes sit on each sender and receiver core: L1 is per core, so one core must hold it (the device's
    # pooled L1, counted below, holds the sum over the cores)
    limit = mesh_device._l1_free_per_core()
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= limit:
        raise op_error(
            op,
            "size",
            f"an int in [1, {limit}] (bytes per core; one core's L1 is {limit:,} bytes)",
            repr(size),
        )
    pairs = (
        list(sender_receiver_core_mapping)
        if isinstance(sender_receiver_core_mapping, (list, tuple))
        else None
    )
    ok = bool(pairs) and all(
        isinstance(p, (list, tuple))
        and len(p) == 2
        and isinstance(p[0], CoreCoord)
        and isinstance(p[1], CoreRangeSet)
        for p in pairs
    )
    if not ok:
        raise op_error(
            op,
            "sender_receiver_core_mapping",
            "a non-empty list of (CoreCoord sender, CoreRangeSet receivers) pairs",
            repr(sender_receiver_core_mapping),
        )
    grid = mesh_device.compute_with_storage_grid_size()
    seen: set[CoreCoord] = set()
    for sender, receivers in pairs:
        if receivers.num_cores() == 0:
            raise op_error(
                op,
                "sender_receiver_core_mapping",
                "at least one receiver core for each sender",
                f"sender ({sender.x}, {sender.y}) with none",
            )
        for core in [sender, *receivers.cores()]:
            if core.x >= grid.x or core.y >= grid.y:
                raise op_error(
                    op,
                    "sender_receiver_core_mapping",
                    f"cores within the {grid.x}x{grid.y} grid",
                    f"({core.x}, {core.y})",
                )
            if core in seen:
                raise op_error(
                    op, "sender_receiver_core_mapping", "each core used once", f"({core.x}, {core.y}) twice"
                )
            seen.add(core)
    return GlobalCircularBuffer(mesh_device, [(s, r) for s, r in pairs], size)
