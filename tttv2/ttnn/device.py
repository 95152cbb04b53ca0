"""Emulated devices: a MeshDevice is a grid of devices, each with its own L1 and DRAM accounting."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..distributed import _mpi
from ..distributed._mesh import span_ranks
from ._upcalls import upcall
from .errors import DeviceMemoryError, ValidationError
from .memory import CoreCoord, CoreRangeSet
from .types import Arch, BufferType, _NamedEnum

__all__ = [
    "Device",
    "DispatchCoreAxis",
    "DispatchCoreConfig",
    "DispatchCoreType",
    "GetDefaultDevice",
    "MeshCoordinate",
    "MeshDevice",
    "MeshShape",
    "SetDefaultDevice",
    "SubDevice",
    "SubDeviceId",
    "SubDeviceManagerId",
    "close_device",
    "close_mesh_device",
    "get_arch_name",
    "open_device",
    "open_mesh_device",
    "synchronize_device",
]


@dataclass(frozen=True)
class ArchSpec:
    """Per-chip facts the emulator needs (sizes as the allocator sees them)."""

    arch: Arch
    compute_grid: tuple[int, int]
    dram_grid: tuple[int, int]
    l1_bytes_per_core: int
    dram_bytes: int


ARCH_SPECS = {
    # Wormhole n150: 8x8 worker grid, 12 DRAM banks of 1 GiB, 1.5 MiB L1 per Tensix of which ~1.36 MiB is
    # available to the allocator after firmware and kernel-config reservations.
    Arch.WORMHOLE_B0: ArchSpec(Arch.WORMHOLE_B0, (8, 8), (12, 1), 1_396_736, 12 * 1024**3),
    # Blackhole p150: 13x10 worker grid, 8 DRAM banks (32 GiB), 1.5 MiB L1 per Tensix.
    Arch.BLACKHOLE: ArchSpec(Arch.BLACKHOLE, (13, 10), (8, 1), 1_462_272, 32 * 1024**3),
}
# A Galaxy's Wormhole chips are not harvested (8x10 Tensix); with the dispatch cores on a column, as tt-metal's
# Llama-3 70B Galaxy demo opens its mesh, 7x10 are workers (its sub-core grids reach x = 6, y = 9).
GALAXY_WORMHOLE_SPEC = ArchSpec(Arch.WORMHOLE_B0, (7, 10), (12, 1), 1_396_736, 12 * 1024**3)


class MeshShape:
    """The shape of a mesh of devices: ``MeshShape(r, c)``, ``MeshShape([r, c])`` or ``MeshShape([n])``."""

    __slots__ = ("_dims",)

    def __init__(self, *dims) -> None:
        if len(dims) == 1 and isinstance(dims[0], (list, tuple, MeshShape)):
            dims = tuple(dims[0])
        if not dims:
            raise ValidationError("MeshShape: at least one dimension is needed")
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ValidationError(f"MeshShape: dimensions must be positive ints, got {dims!r}")
        self._dims = tuple(int(d) for d in dims)

    def dims(self) -> int:
        return len(self._dims)

    def mesh_size(self) -> int:
        n = 1
        for d in self._dims:
            n *= d
        return n

    def as_2d(self) -> tuple[int, int]:
        if len(self._dims) == 1:
            return (1, self._dims[0])
        if len(self._dims) == 2:
            return self._dims  # type: ignore[return-value]
        raise ValidationError(f"MeshShape: only 1-D and 2-D meshes are emulated, got {self._dims}")

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    def __getitem__(self, index):
        return self._dims[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, MeshShape):
            return self._dims == other._dims
        if isinstance(other, (tuple, list)):
            return self._dims == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return f"MeshShape([{', '.join(map(str, self._dims))}])"


@dataclass(frozen=True)
class MeshCoordinate:
    row: int
    col: int

    def __iter__(self):
        return iter((self.row, self.col))


class FabricTensixConfig(_NamedEnum):
    """ttnn's fabric tensix setting (ops.ccl's fabric state; here because DispatchCoreConfig names it)."""

    DISABLED = 0
    MUX = 1


class DispatchCoreType(_NamedEnum):
    WORKER = 0
    ETH = 1


class DispatchCoreAxis(_NamedEnum):
    ROW = 0
    COL = 1


@dataclass(frozen=True)
class DispatchCoreConfig:
    """Accepted for API compatibility; dispatch cores are not emulated. One effect: a Wormhole mesh of 32 chips (a
    Galaxy) opened with ``axis=DispatchCoreAxis.COL`` has the Galaxy's 7x10 worker grid (``open_mesh_device``).

    Each field is None (ttnn's default) or its ttnn enum, as ttnn's binding requires: a string such as
    ``axis="col"`` is refused instead of silently giving the default grid."""

    type: DispatchCoreType | None = None
    axis: DispatchCoreAxis | None = None
    fabric_tensix_config: object = None

    def __post_init__(self) -> None:
        for name, kind in (
            ("type", DispatchCoreType),
            ("axis", DispatchCoreAxis),
            ("fabric_tensix_config", FabricTensixConfig),
        ):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ValidationError(
                    f"ttnn.DispatchCoreConfig: {name}: expected a ttnn.{kind.__name__} or None, got {value!r}"
                )


class SubDeviceId:
    """``ttnn.SubDeviceId(n)``: the n-th sub-device of the loaded sub-device manager (0 when none is loaded: the
    whole device). The emulator runs every op on the whole device; ops check the id exists."""

    def __init__(self, value: int = 0) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(f"ttnn.SubDeviceId: id: expected an int >= 0, got {value!r}")
        self.id = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubDeviceId) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("SubDeviceId", self.id))

    def __repr__(self) -> str:
        return f"SubDeviceId({self.id})"


class SubDevice:
    """``ttnn.SubDevice([CoreRangeSet, ...])``: a group of worker cores that ops can be given to run on (tt-metal's
    prefetcher puts its DRAM readers on one and the model on another). Bookkeeping in the emulator."""

    def __init__(self, cores) -> None:
        items = list(cores) if isinstance(cores, (list, tuple)) else None
        if not items or not all(isinstance(c, CoreRangeSet) for c in items):
            raise ValidationError(
                f"ttnn.SubDevice: cores: expected a non-empty list of ttnn.CoreRangeSet, got {cores!r}"
            )
        self.cores = items

    def core_list(self) -> list[CoreCoord]:
        return [c for crs in self.cores for c in crs.cores()]


@dataclass(frozen=True)
class SubDeviceManagerId:
    id: int


class _Allocator:
    """Byte accounting of one buffer kind on one device."""

    def __init__(self, kind: BufferType, capacity: int) -> None:
        self.kind = kind
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self.live = 0

    def allocate(self, nbytes: int, what: str, device_id: int) -> None:
        if self.used + nbytes > self.capacity:
            raise DeviceMemoryError(
                f"device {device_id}: out of {self.kind.name} memory allocating {what}: needs {nbytes:,} bytes, "
                f"{self.capacity - self.used:,} of {self.capacity:,} bytes free"
            )
        self.used += nbytes
        self.live += 1
        self.peak = max(self.peak, self.used)

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        self.live -= 1


class Device:
    """One emulated chip of a mesh. Tensors allocate per-device bytes here."""

    def __init__(
        self, device_id: int, spec: ArchSpec, l1_small_size: int = 0, trace_region_size: int = 0
    ) -> None:
        self._id = device_id
        self.spec = spec
        cores = spec.compute_grid[0] * spec.compute_grid[1]
        l1_capacity = cores * spec.l1_bytes_per_core - l1_small_size * cores
        self.allocators = {
            BufferType.L1: _Allocator(BufferType.L1, l1_capacity),
            BufferType.DRAM: _Allocator(BufferType.DRAM, spec.dram_bytes - trace_region_size),
        }
        self.core_seeds: dict[int, int] = {}  # user (core) id -> seed, set by ttnn.manual_seed
        # the rank that emulates this device when a mesh spans tttv2-run's ranks (None: this process alone)
        self.owner: int | None = None
        self.local = True

    def rank(self) -> int | None:
        """The rank that owns this device when the mesh spans ranks, else None (docs/distributed.md)."""
        return self.owner

    def id(self) -> int:
        return self._id

    def arch(self) -> Arch:
        return self.spec.arch

    def compute_with_storage_grid_size(self) -> CoreCoord:
        """This chip's worker grid (its mesh's: a Galaxy opened with column dispatch has 7×10), as ttnn's
        ``IDevice`` gives it; tt-metal's Falcon-40B decode asks ``mesh.get_devices()[0]`` for it."""
        return CoreCoord(*self.spec.compute_grid)

    def memory_used(self, buffer_type: BufferType) -> int:
        return self.allocators[buffer_type].used

    def __repr__(self) -> str:
        return f"Device(id={self._id}, arch={self.spec.arch.name})"


_mesh_ids = itertools.count()
_open_device_ids: set[int] = set()
_lock = threading.Lock()


class MeshDevice:
    """A rows × cols grid of emulated devices (1×1 is a single chip)."""

    def __init__(
        self,
        mesh_shape: MeshShape | Sequence[int],
        *,
        arch: Arch = Arch.WORMHOLE_B0,
        l1_small_size: int = 0,
        trace_region_size: int = 0,
        devices: Sequence[Device] | None = None,
        parent: MeshDevice | None = None,
        spec: ArchSpec | None = None,
    ) -> None:
        shape = mesh_shape if isinstance(mesh_shape, MeshShape) else MeshShape(*mesh_shape)
        rows, cols = (
            shape.as_2d()
        )  # a 1-D MeshShape([n]) keeps its 1-D shape (cluster_axis 1 is then invalid)
        if not isinstance(arch, Arch) or arch not in ARCH_SPECS:
            raise ValidationError(
                f"open_mesh_device: arch must be one of {sorted(a.name for a in ARCH_SPECS)}, got {arch!r}"
            )
        self._shape = shape
        self._id = next(_mesh_ids)
        # a view of existing devices keeps their spec (a Galaxy grid stays 7x10 in a submesh)
        self._spec = spec or (devices[0].spec if devices else ARCH_SPECS[arch])
        self._parent = parent
        if devices is None:
            devices = [Device(i, self._spec, l1_small_size, trace_region_size) for i in range(rows * cols)]
        self._devices = list(devices)
        self._update_ownership()
        self._open = True
        self._program_cache_enabled = True
        self._submeshes: list[MeshDevice] = []
        self._sub_device_managers: dict[int, list[SubDevice]] = {}
        # the id objects handed out, by id: ids are never reused (tt-metal's grow per device), and an id is this
        # mesh's only if it is the object create_sub_device_manager returned (another mesh's id 1 is not ours)
        self._manager_ids: dict[int, SubDeviceManagerId] = {}
        self._loaded_manager: int | None = None
        self._stall_group: list[SubDeviceId] = []

    # --- identity and shape -------------------------------------------------------------------------
    @property
    def shape(self) -> MeshShape:
        return self._shape

    def id(self) -> int:
        return self._id

    def get_num_devices(self) -> int:
        return len(self._devices)

    def get_device_ids(self) -> list[int]:
        return [d.id() for d in self._devices]

    def get_devices(self) -> list[Device]:
        return list(self._devices)

    def get_device(self, row: int, col: int | None = None) -> Device:
        if col is None:
            return self._devices[row]
        return self._devices[row * self._shape.as_2d()[1] + col]

    def arch(self) -> Arch:
        return self._spec.arch

    # --- ownership across ranks (tttv2-run; docs/distributed.md) --------------------------------------
    def _update_ownership(self) -> None:
        self._remote = frozenset(i for i, d in enumerate(self._devices) if not d.local)
        self._spans_ranks = any(d.owner is not None for d in self._devices)

    def rank_group(self):
        """(the MPI communicator of the ranks this mesh spans, their world ranks); set by ``span_ranks``."""
        root = self
        while not hasattr(root, "_ranks") and root._parent is not None:
            root = root._parent
        return root._ranks

    def spans_ranks(self) -> bool:
        """Whether this mesh (or the mesh it is a view of) is spread over ranks: its transfers are collectives
        of every rank, even in a rank that owns all of its devices."""
        return self._spans_ranks

    def remote_indices(self) -> frozenset[int]:
        """Row-major indices of the devices another rank emulates (empty unless the mesh spans ranks)."""
        return self._remote

    def device_ranks(self) -> list[int | None]:
        """The owning rank of each device, row-major (all None unless the mesh spans ranks)."""
        return [d.owner for d in self._devices]

    def local_device_ids(self) -> list[int]:
        """Ids of the devices this process emulates (all of them unless the mesh spans ranks)."""
        return [d.id() for d in self._devices if d.local]

    def is_blackhole(self) -> bool:
        return self._spec.arch is Arch.BLACKHOLE

    def is_wormhole_b0(self) -> bool:
        return self._spec.arch is Arch.WORMHOLE_B0

    # --- sub-devices (bookkeeping: every op runs on the whole device) ---------------------------------------
    def create_sub_device_manager(self, sub_devices, local_l1_size: int) -> SubDeviceManagerId:
        """Register a split of the worker cores into sub-devices: each a ``SubDevice`` whose cores lie in the grid,
        no core in two sub-devices. Returns its id for ``load_sub_device_manager``."""
        owner = "MeshDevice.create_sub_device_manager"
        items = list(sub_devices) if isinstance(sub_devices, (list, tuple)) else None
        if not items or not all(isinstance(d, SubDevice) for d in items):
            raise ValidationError(
                f"{owner}: sub_devices: expected a non-empty list of ttnn.SubDevice, got {sub_devices!r}"
            )
        # the sub-devices' local L1 is carved out of every worker core's L1 (tt-metal shrinks the global
        # allocator's banks by it when the manager loads), so it must fit in one core
        limit = self._l1_free_per_core()
        if (
            isinstance(local_l1_size, bool)
            or not isinstance(local_l1_size, int)
            or not 0 <= local_l1_size <= limit
        ):
            raise ValidationError(
                f"{owner}: local_l1_size: expected an int in [0, {limit}] (bytes per core; one core's L1 is "
                f"{limit:,} bytes), got {local_l1_size!r}"
            )
        grid = self.compute_with_storage_grid_size()
        seen: set[CoreCoord] = set()
        for n, dev in enumerate(items):
            for core in dev.core_list():
                if core.x >= grid.x or core.y >= grid.y:
                    raise ValidationError(
                        f"{owner}: sub_devices[{n}]: core ({core.x}, {core.y}) is outside the {grid.x}x{grid.y} grid"
                    )
                if core in seen:
                    raise ValidationError(
                        f"{owner}: sub_devices[{n}]: core ({core.x}, {core.y}) is in two sub-devices"
                    )
                seen.add(core)
        manager = len(self._manager_ids) + 1  # removed managers keep their ids: never handed out again
        self._sub_device_managers[manager] = items
        self._manager_ids[manager] = SubDeviceManagerId(manager)
        return self._manager_ids[manager]

    def _manager(self, owner: str, manager_id) -> int:
        if (
            not isinstance(manager_id, SubDeviceManagerId)
            or self._manager_ids.get(manager_id.id) is not manager_id
            or manager_id.id not in self._sub_device_managers
        ):
            raise ValidationError(
                f"{owner}: expected a SubDeviceManagerId this mesh created and has not removed, got {manager_id!r}"
            )
        return manager_id.id

    def load_sub_device_manager(self, manager_id: SubDeviceManagerId) -> None:
        self._loaded_manager = self._manager("MeshDevice.load_sub_device_manager", manager_id)
        self._stall_group = []

    def clear_loaded_sub_device_manager(self) -> None:
        self._loaded_manager = None
        self._stall_group = []

    def remove_sub_device_manager(self, manager_id: SubDeviceManagerId) -> None:
        owner = "MeshDevice.remove_sub_device_manager"
        manager = self._manager(owner, manager_id)
        if manager == self._loaded_manager:
            raise ValidationError(f"{owner}: the manager is loaded (clear_loaded_sub_device_manager first)")
        del self._sub_device_managers[manager]

    def get_sub_device_ids(self) -> list[SubDeviceId]:
        """The sub-devices of the loaded manager (one, the whole device, when none is loaded)."""
        count = 1 if self._loaded_manager is None else len(self._sub_device_managers[self._loaded_manager])
        return [SubDeviceId(i) for i in range(count)]

    def set_sub_device_stall_group(self, sub_device_ids) -> None:
        owner = "MeshDevice.set_sub_device_stall_group"
        ids = list(sub_device_ids) if isinstance(sub_device_ids, (list, tuple)) else None
        valid = self.get_sub_device_ids()
        if not ids or not all(i in valid for i in ids):
            raise ValidationError(
                f"{owner}: expected a non-empty list of the loaded manager's ids {valid}, got {sub_device_ids!r}"
            )
        self._stall_group = ids

    def reset_sub_device_stall_group(self) -> None:
        self._stall_group = []

    def get_sub_device_stall_group(self) -> list[SubDeviceId]:
        return list(self._stall_group)

    def compute_with_storage_grid_size(self) -> CoreCoord:
        return CoreCoord(*self._spec.compute_grid)

    def dram_grid_size(self) -> CoreCoord:
        return CoreCoord(*self._spec.dram_grid)

    def l1_size_per_core(self) -> int:
        return self._spec.l1_bytes_per_core

    def _l1_free_per_core(self) -> int:
        """What one worker core can hold: its L1 less the ``l1_small_size`` region the mesh was opened with. L1 is
        accounted per device (all cores pooled); what must fit in a single core is checked against this."""
        cores = self._spec.compute_grid[0] * self._spec.compute_grid[1]
        return self._devices[0].allocators[BufferType.L1].capacity // cores

    @property
    def is_open(self) -> bool:
        return self._open

    # --- submeshes ------------------------------------------------------------------------------------
    def create_submesh(
        self, submesh_shape: MeshShape | Sequence[int], offset: MeshCoordinate | None = None
    ) -> MeshDevice:
        """A view on a sub-rectangle of this mesh; it shares the devices (and their memory)."""
        shape = submesh_shape if isinstance(submesh_shape, MeshShape) else MeshShape(*submesh_shape)
        rows, cols = shape.as_2d()
        r0, c0 = (offset.row, offset.col) if offset is not None else (0, 0)
        prow, pcol = self._shape.as_2d()
        if r0 + rows > prow or c0 + cols > pcol:
            raise ValidationError(
                f"MeshDevice.create_submesh: a {rows}x{cols} submesh at ({r0}, {c0}) does not fit the {prow}x{pcol} mesh"
            )
        devices = [self._devices[(r0 + r) * pcol + (c0 + c)] for r in range(rows) for c in range(cols)]
        sub = MeshDevice(MeshShape(rows, cols), arch=self._spec.arch, devices=devices, parent=self)
        self._submeshes.append(sub)
        return sub

    def create_submeshes(self, submesh_shape: MeshShape | Sequence[int]) -> list[MeshDevice]:
        """Tile the mesh with submeshes of one shape (data parallelism)."""
        shape = submesh_shape if isinstance(submesh_shape, MeshShape) else MeshShape(*submesh_shape)
        rows, cols = shape.as_2d()
        prow, pcol = self._shape.as_2d()
        if prow % rows or pcol % cols:
            raise ValidationError(
                f"MeshDevice.create_submeshes: {rows}x{cols} submeshes do not tile the {prow}x{pcol} mesh"
            )
        return [
            self.create_submesh(MeshShape(rows, cols), MeshCoordinate(r, c))
            for r in range(0, prow, rows)
            for c in range(0, pcol, cols)
        ]

    def reshape(self, new_shape: MeshShape | Sequence[int]) -> None:
        shape = new_shape if isinstance(new_shape, MeshShape) else MeshShape(*new_shape)
        if shape.mesh_size() != len(self._devices):
            raise ValidationError(
                f"MeshDevice.reshape: {shape} has {shape.mesh_size()} devices, this mesh has {len(self._devices)}"
            )
        self._shape = shape

    # --- memory ---------------------------------------------------------------------------------------
    def memory_report(self) -> list[dict[str, int]]:
        """Bytes in use and peak, per device and buffer type."""
        return [
            {
                "device": d.id(),
                "l1_used": d.allocators[BufferType.L1].used,
                "l1_peak": d.allocators[BufferType.L1].peak,
                "dram_used": d.allocators[BufferType.DRAM].used,
                "dram_peak": d.allocators[BufferType.DRAM].peak,
            }
            for d in self._devices
        ]

    # --- program cache (accepted; the emulator has nothing to cache) ----------------------------------------
    def enable_program_cache(self) -> None:
        self._program_cache_enabled = True

    def disable_and_clear_program_cache(self) -> None:
        self._program_cache_enabled = False

    def clear_program_cache(self) -> None:
        pass

    def num_program_cache_entries(self) -> int:
        return 0

    def __repr__(self) -> str:
        rows, cols = self._shape.as_2d()
        return f"MeshDevice({rows}x{cols}, arch={self._spec.arch.name}, id={self._id})"

    def __iter__(self) -> Iterable[Device]:
        return iter(self._devices)


_default_device: MeshDevice | None = None
_last_opened: MeshDevice | None = None


def open_mesh_device(
    mesh_shape: MeshShape | Sequence[int] | None = None,
    *,
    arch: Arch | None = None,
    l1_small_size: int = 0,
    trace_region_size: int = 0,
    num_command_queues: int = 1,
    dispatch_core_config: DispatchCoreConfig | None = None,
    offset: MeshCoordinate | None = None,
    physical_device_ids: Sequence[int] | None = None,
    worker_l1_size: int | None = None,
) -> MeshDevice:
    """Open an emulated mesh. ``arch`` defaults to Wormhole B0 (env ``TTTV2_ARCH=blackhole`` changes it). Each
    Wormhole chip has the n150's 8x8 worker grid, except a mesh of 32 (a Galaxy) opened with
    ``dispatch_core_config=DispatchCoreConfig(axis=DispatchCoreAxis.COL)``: the Galaxy's 7x10.

    In ranks started by ``tttv2-run`` (or once the distributed context is initialised) opening a mesh initialises
    the distributed context, and a mesh of more than one device is one logical mesh over all the ranks, each emulating its share of the devices (every rank must open
    the same mesh at the same point; docs/distributed.md)."""
    import os

    if mesh_shape is None:
        mesh_shape = MeshShape(1, 1)
    if arch is None:
        name = os.environ.get("TTTV2_ARCH", "wormhole_b0").upper()
        try:
            arch = Arch[name]
        except KeyError:
            raise ValidationError(
                f"open_mesh_device: TTTV2_ARCH must be wormhole_b0 or blackhole, got {name!r}"
            ) from None
    if dispatch_core_config is not None and not isinstance(dispatch_core_config, DispatchCoreConfig):
        raise ValidationError(
            "open_mesh_device: dispatch_core_config: expected a ttnn.DispatchCoreConfig or None, got "
            f"{dispatch_core_config!r}"
        )
    global _last_opened
    shape = mesh_shape if isinstance(mesh_shape, MeshShape) else MeshShape(*mesh_shape)
    galaxy_grid = (
        dispatch_core_config is not None
        and dispatch_core_config.axis is DispatchCoreAxis.COL
        and arch is Arch.WORMHOLE_B0
        and shape.mesh_size() == 32
    )
    mesh = MeshDevice(
        shape,
        arch=arch,
        l1_small_size=l1_small_size,
        trace_region_size=trace_region_size,
        spec=GALAXY_WORMHOLE_SPEC if galaxy_grid else None,
    )
    if _mpi.world() is not None or _mpi.launched():
        _mpi.initialize()  # as in tt-metal, opening a device in a launched rank initialises the context
        if mesh.get_num_devices() > 1:
            span_ranks(mesh)  # one logical mesh over the ranks: each emulates its share of the devices
    with _lock:
        _open_device_ids.add(mesh.id())
        _last_opened = mesh
    return mesh


def close_mesh_device(mesh_device: MeshDevice) -> None:
    """Close a mesh; its tensors become unusable and the default device is cleared if it was this mesh."""
    global _default_device
    if not isinstance(mesh_device, MeshDevice):
        raise ValidationError(f"close_mesh_device: expected a MeshDevice, got {type(mesh_device).__name__}")
    for sub in mesh_device._submeshes:
        sub._open = False
    mesh_device._open = False
    with _lock:
        _open_device_ids.discard(mesh_device.id())
    if _default_device is mesh_device:
        _default_device = None


def open_device(device_id: int = 0, **kwargs) -> MeshDevice:
    """A single device is a 1×1 mesh."""
    return open_mesh_device(MeshShape(1, 1), **kwargs)


def close_device(device: MeshDevice) -> None:
    close_mesh_device(device)


def GetDefaultDevice() -> MeshDevice | None:
    return _default_device


def SetDefaultDevice(device: MeshDevice | None) -> None:
    global _default_device
    if device is not None and not isinstance(device, MeshDevice):
        raise ValidationError(f"SetDefaultDevice: expected a MeshDevice or None, got {type(device).__name__}")
    _default_device = device


def synchronize_device(device: MeshDevice | None = None, *args, **kwargs) -> None:
    """The emulator runs ops eagerly: only tensors sent over sockets from ``device`` (``send_async``) may still be
    on their way; this waits until their receivers took them (tttv2/ttnn/ops/sockets.py)."""
    upcall("complete_sends")(device)


def get_arch_name() -> str:
    """Name of the architecture the emulator opens by default."""
    import os

    return os.environ.get("TTTV2_ARCH", "wormhole_b0").lower()
