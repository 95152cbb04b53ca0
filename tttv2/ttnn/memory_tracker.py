"""Snapshots of emulated device memory by training phase (forward, backward, optimizer …), printed as a table.

Usage::

    tracker = MemoryTracker(mesh)
    with tracker.phase("forward"):
        loss = ttnn.cross_entropy_loss(model(x), y)
    with tracker.phase("backward"):
        loss.backward()
    with tracker.phase("optimizer"):
        opt.step()
    tracker.print()

Each phase records, per device, the bytes in use when it ends, the change over the phase and the peak reached
during it (the device allocators' peak counters are reset to the current use when a phase starts; this is
the only state the tracker changes). Figures come from ``mesh.memory_report()``; only device tensors count
(host tensors use no device memory). The table shows the device with the highest peak.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from .device import MeshDevice
from .errors import ValidationError
from .types import BufferType

__all__ = ["MemoryTracker", "PhaseSnapshot"]

_MB = 1024 * 1024


@dataclass(frozen=True)
class PhaseSnapshot:
    """Memory of one phase on one device, in bytes."""

    phase: str
    device: int
    dram_used: int
    dram_delta: int
    dram_peak: int
    l1_used: int
    l1_delta: int
    l1_peak: int


class MemoryTracker:
    """Records :class:`PhaseSnapshot` rows for every device of ``mesh`` per phase (see the module docstring)."""

    def __init__(self, mesh: MeshDevice) -> None:
        if not isinstance(mesh, MeshDevice):
            raise ValidationError(
                f"MemoryTracker: mesh: expected a ttnn.MeshDevice, got {type(mesh).__name__}"
            )
        self.mesh = mesh
        self.snapshots: list[PhaseSnapshot] = []
        self._start: list[dict[str, int]] | None = None
        self._open: str | None = None

    def _report(self) -> list[dict[str, int]]:
        return self.mesh.memory_report()

    def begin(self, name: str) -> None:
        """Start phase ``name``: remember current use and restart the peak counters."""
        if self._open is not None:
            raise ValidationError(f"MemoryTracker.begin({name!r}): phase {self._open!r} is still open")
        self._open = str(name)
        self._start = self._report()
        for device in self.mesh.get_devices():
            for kind in (BufferType.DRAM, BufferType.L1):
                allocator = device.allocators[kind]
                allocator.peak = allocator.used

    def end(self) -> list[PhaseSnapshot]:
        """Close the open phase and record one snapshot per device."""
        if self._open is None or self._start is None:
            raise ValidationError("MemoryTracker.end: no phase is open")
        rows = []
        for before, now in zip(self._start, self._report()):
            rows.append(
                PhaseSnapshot(
                    phase=self._open,
                    device=now["device"],
                    dram_used=now["dram_used"],
                    dram_delta=now["dram_used"] - before["dram_used"],
                    dram_peak=now["dram_peak"],
                    l1_used=now["l1_used"],
                    l1_delta=now["l1_used"] - before["l1_used"],
                    l1_peak=now["l1_peak"],
                )
            )
        self.snapshots.extend(rows)
        self._open, self._start = None, None
        return rows

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """``with tracker.phase("backward"): ...`` — :meth:`begin` then :meth:`end`."""
        self.begin(name)
        try:
            yield
        finally:
            self.end()

    def snapshot(self, name: str) -> list[PhaseSnapshot]:
        """Record the current use under ``name`` (a phase with nothing in it; peak = current use)."""
        self.begin(name)
        return self.end()

    def reset(self) -> None:
        self.snapshots.clear()

    def phases(self) -> list[str]:
        """Phase names in the order recorded (repeated phases appear once)."""
        return list(dict.fromkeys(s.phase for s in self.snapshots))

    def summary(self) -> list[dict[str, object]]:
        """One row per recorded phase instance: the device with the highest DRAM peak, figures in MiB."""
        rows, n = [], self.mesh.get_num_devices()
        for i in range(0, len(self.snapshots), n):
            group = self.snapshots[i : i + n]
            top = max(group, key=lambda s: (s.dram_peak, s.l1_peak))
            rows.append(
                {
                    "phase": top.phase,
                    "device": top.device,
                    "dram_used_mb": top.dram_used / _MB,
                    "dram_delta_mb": top.dram_delta / _MB,
                    "dram_peak_mb": top.dram_peak / _MB,
                    "l1_used_mb": top.l1_used / _MB,
                    "l1_peak_mb": top.l1_peak / _MB,
                }
            )
        return rows

    def table(self, title: str = "Device memory by phase"):
        """A ``rich.table.Table`` of :meth:`summary`."""
        from rich.table import Table

        table = Table(title=title)
        for header in (
            "phase",
            "device",
            "DRAM in use (MiB)",
            "Δ DRAM (MiB)",
            "DRAM peak (MiB)",
            "L1 in use (MiB)",
            "L1 peak (MiB)",
        ):
            table.add_column(header, justify="left" if header == "phase" else "right")
        for row in self.summary():
            table.add_row(
                str(row["phase"]),
                str(row["device"]),
                f"{row['dram_used_mb']:.2f}",
                f"{row['dram_delta_mb']:+.2f}",
                f"{row['dram_peak_mb']:.2f}",
                f"{row['l1_used_mb']:.3f}",
                f"{row['l1_peak_mb']:.3f}",
            )
        return table

    def print(self, console=None) -> None:
        """Print :meth:`table` (to ``console``, a ``rich.console.Console``, or stdout)."""
        from rich.console import Console

        (console or Console()).print(self.table())
