"""Collective ops (CCL) across the emulated mesh: all-gather, reduce-scatter, all-reduce and their async forms.

Every device of a mesh holds one shard; a collective runs independently in each *group* of devices:

* ``cluster_axis=None``: one group, all devices of the mesh in row-major order;
* ``cluster_axis=0``: one group per mesh column (the devices that differ only in their row), in row order;
* ``cluster_axis=1``: one group per mesh row, in column order.

On a 1-D mesh (``MeshShape([n])``) only axis 0 exists. Position ``k`` in a group is the device's ring index:
all-gather concatenates the group's shards in ring order, reduce-scatter leaves slice ``k`` of the sum on
ring index ``k`` — the per-device layout real hardware produces (tt-metal runs a 2-D ``cluster_axis=None``
reduce-scatter as axis 0 then axis 1, and an all-gather as axis 1 then axis 0, which both reduce to the
row-major order used here).

Numerics: reductions add the group's shards in float32 in ring order (ring index 0 first) and the result is
quantised once to the output dtype. Fabric tuning arguments (links, workers, buffers, chunks, semaphores,
sub-devices) are validated and otherwise have no effect on the result. A group of one device (and a 1×1 mesh)
makes every op an identity copy into a new tensor.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .._remote import full_shards
from ..device import FabricTensixConfig, MeshDevice, MeshShape
from ..errors import op_error
from ..memory import DRAM_MEMORY_CONFIG, CoreCoord, CoreRange, CoreRangeSet, MemoryConfig
from ..numerics import quantize
from ..placement import PlacementReplicate, PlacementShard, TensorTopology
from ..program_configs import (
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    WormholeComputeKernelConfig,
)
from ..tensor import Tensor
from ..types import BufferType, DataType, Layout, ReduceType, Topology, _NamedEnum
from ._common import (
    check_compute_config,
    check_memory_config,
    expect,
    expect_tensor,
    output_like,
    same_mesh,
    ttnn_op,
)
from .data_movement import clone, per_device
from .matmul import linear

__all__ = [
    "FabricConfig",
    "FabricReliabilityMode",
    "FabricTensixConfig",
    "GlobalSemaphore",
    "all_gather",
    "all_reduce",
    "create_global_semaphore",
    "get_global_semaphore_address",
    "get_num_links",
    "reduce_scatter",
    "reset_global_semaphore_value",
    "set_fabric_config",
]
__experimental__ = [
    "all_gather_async",
    "all_gather_matmul",
    "all_gather_matmul_async",
    "fast_reduce_nc",
    "reduce_scatter_minimal_async",
]
__transformer__: list[str] = []

_FLOAT_DTYPES = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B, DataType.BFLOAT4_B)
_UNSET = object()


# --- fabric configuration and semaphores ------------------------------------------------------------------


class FabricConfig(_NamedEnum):
    """How the ethernet fabric is brought up; recorded by :func:`set_fabric_config`, no effect on results."""

    DISABLED = 0
    FABRIC_1D = 1
    FABRIC_1D_RING = 2
    FABRIC_2D = 3
    FABRIC_2D_TORUS_X = 4
    FABRIC_2D_TORUS_Y = 5
    FABRIC_2D_TORUS_XY = 6
    FABRIC_2D_DYNAMIC = 7
    CUSTOM = 8


class FabricReliabilityMode(_NamedEnum):
    STRICT_INIT = 0
    RELAXED_INIT = 1
    DYNAMIC_RECONFIGURATION_INIT = 2


_fabric_state: dict[str, object] = {
    "fabric_config": FabricConfig.DISABLED,
    "reliability_mode": FabricReliabilityMode.STRICT_INIT,
    "num_planes": None,
    "fabric_tensix_config": FabricTensixConfig.DISABLED,
}


def set_fabric_config(
    fabric_config: FabricConfig,
    reliability_mode: FabricReliabilityMode | None = None,
    num_planes: int | None = None,
    fabric_tensix_config: FabricTensixConfig | None = None,
    *args,
    **kwargs,
) -> None:
    """Record the fabric configuration (validated). The emulator has no fabric: collectives do not depend on it."""
    op = "ttnn.set_fabric_config"
    expect(
        isinstance(fabric_config, FabricConfig),
        op,
        "fabric_config",
        "a ttnn.FabricConfig",
        repr(fabric_config),
    )
    if reliability_mode is None:
        reliability_mode = FabricReliabilityMode.STRICT_INIT
    expect(
        isinstance(reliability_mode, FabricReliabilityMode),
        op,
        "reliability_mode",
        "a ttnn.FabricReliabilityMode",
        repr(reliability_mode),
    )
    if num_planes is not None:
        _check_count(op, "num_planes", num_planes)
    if fabric_tensix_config is None:
        fabric_tensix_config = FabricTensixConfig.DISABLED
    expect(
        isinstance(fabric_tensix_config, FabricTensixConfig),
        op,
        "fabric_tensix_config",
        "a ttnn.FabricTensixConfig",
        repr(fabric_tensix_config),
    )
    _fabric_state.update(
        fabric_config=fabric_config,
        reliability_mode=reliability_mode,
        num_planes=num_planes,
        fabric_tensix_config=fabric_tensix_config,
        extra=(args, dict(kwargs)),
    )


_semaphore_addresses = itertools.count(0x10000, 16)


class GlobalSemaphore:
    """A semaphore allocated at one L1 address on a set of cores of every device of a mesh.

    Made by :func:`create_global_semaphore`. The emulator runs collectives eagerly, so semaphores only have to
    be valid (right mesh, right count); their value is kept but never waited on.
    """

    __slots__ = ("_address", "_cores", "_mesh", "_value")

    def __init__(self, mesh_device: MeshDevice, cores: CoreRangeSet, initial_value: int) -> None:
        self._mesh = mesh_device
        self._cores = cores
        self._value = initial_value
        self._address = next(_semaphore_addresses)

    @property
    def mesh_device(self) -> MeshDevice:
        return self._mesh

    @property
    def cores(self) -> CoreRangeSet:
        return self._cores

    @property
    def value(self) -> int:
        return self._value

    def address(self) -> int:
        return self._address

    def __repr__(self) -> str:
        return f"GlobalSemaphore(address={self._address:#x}, cores={self._cores!r}, value={self._value})"


def create_global_semaphore(
    mesh_device: MeshDevice,
    cores: CoreRangeSet | CoreRange,
    initial_value: int,
    buffer_type: BufferType = BufferType.L1,
) -> GlobalSemaphore:
    """A semaphore on ``cores`` of every device of ``mesh_device`` (the cores must exist on the device)."""
    op = "ttnn.create_global_semaphore"
    expect(
        isinstance(mesh_device, MeshDevice),
        op,
        "mesh_device",
        "a ttnn.MeshDevice",
        type(mesh_device).__name__,
    )
    expect(mesh_device.is_open, op, "mesh_device", "an open mesh device", f"{mesh_device} (closed)")
    if isinstance(cores, CoreRange):
        cores = CoreRangeSet({cores})
    expect(isinstance(cores, CoreRangeSet), op, "cores", "a ttnn.CoreRangeSet", repr(cores))
    expect(cores.num_cores() > 0, op, "cores", "a non-empty CoreRangeSet", repr(cores))
    grid = mesh_device.compute_with_storage_grid_size()
    box = cores.bounding_box()
    expect(
        box.end.x < grid.x and box.end.y < grid.y,
        op,
        "cores",
        f"cores inside the device's {grid.x}x{grid.y} compute grid",
        repr(cores),
    )
    expect(
        not isinstance(initial_value, bool) and isinstance(initial_value, int) and initial_value >= 0,
        op,
        "initial_value",
        "a non-negative int",
        repr(initial_value),
    )
    expect(isinstance(buffer_type, BufferType), op, "buffer_type", "a ttnn.BufferType", repr(buffer_type))
    return GlobalSemaphore(mesh_device, cores, initial_value)


def get_global_semaphore_address(global_semaphore: GlobalSemaphore) -> int:
    """The (emulated) L1 address of the semaphore."""
    op = "ttnn.get_global_semaphore_address"
    expect(
        isinstance(global_semaphore, GlobalSemaphore),
        op,
        "global_semaphore",
        "a ttnn.GlobalSemaphore",
        type(global_semaphore).__name__,
    )
    return global_semaphore.address()


def reset_global_semaphore_value(global_semaphore: GlobalSemaphore, reset_value: int) -> None:
    """Set the semaphore's value (kept for inspection; nothing waits on it)."""
    op = "ttnn.reset_global_semaphore_value"
    expect(
        isinstance(global_semaphore, GlobalSemaphore),
        op,
        "global_semaphore",
        "a ttnn.GlobalSemaphore",
        type(global_semaphore).__name__,
    )
    expect(
        not isinstance(reset_value, bool) and isinstance(reset_value, int) and reset_value >= 0,
        op,
        "reset_value",
        "a non-negative int",
        repr(reset_value),
    )
    global_semaphore._value = reset_value


# links per mesh axis (axis 0 = along a column, axis 1 = along a row) of the systems the emulator stands for
_GALAXY_LINKS = (4, 3)


def get_num_links(mesh_device: MeshDevice, cluster_axis: int | None = None) -> int:
    """Ethernet links a CCL can use along ``cluster_axis`` (the lowest over both axes when None).

    The counts are those of the real systems: 1 on Wormhole N300/T3K-style meshes, 2 on Blackhole
    P150x4/x8, (4, 3) per axis on a 32-device Galaxy; a single device reports 1, as ttnn does.
    """
    op = "ttnn.get_num_links"
    expect(
        isinstance(mesh_device, MeshDevice),
        op,
        "mesh_device",
        "a ttnn.MeshDevice",
        type(mesh_device).__name__,
    )
    if cluster_axis is not None:
        check_cluster_axis(op, cluster_axis, (0, 1), "None, 0 or 1")
    n = mesh_device.get_num_devices()
    if n == 1:
        return 1
    if n == 32:
        links = _GALAXY_LINKS
    elif mesh_device.is_blackhole():
        links = (2, 2)
    else:
        links = (1, 1)
    return min(links) if cluster_axis is None else links[cluster_axis]


# --- argument checks ----------------------------------------------------------------------------------------


def _check_count(op: str, name: str, value, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    expect(
        not isinstance(value, bool) and isinstance(value, int) and value >= 1,
        op,
        name,
        "a positive int" + (" or None" if optional else ""),
        repr(value),
    )


def _check_tuning(op: str, num_links, **optional_counts) -> None:
    """Fabric tuning knobs: positive ints (or None); they change speed on hardware, never the values."""
    _check_count(op, "num_links", num_links, optional=True)
    for name, value in optional_counts.items():
        _check_count(op, name, value, optional=True)


def _check_topology(op: str, topology, allowed: Sequence[Topology] | None = None) -> None:
    if topology is None and allowed is None:
        return
    names = ", ".join(f"Topology.{t.name}" for t in (allowed or Topology))
    ok = isinstance(topology, Topology) and (allowed is None or topology in allowed)
    expect(ok, op, "topology", names, repr(topology))


def _check_mesh_device(op: str, mesh_device, mesh: MeshDevice) -> None:
    if mesh_device is None:
        return
    expect(
        isinstance(mesh_device, MeshDevice),
        op,
        "mesh_device",
        "a ttnn.MeshDevice",
        type(mesh_device).__name__,
    )
    expect(
        mesh_device is mesh,
        op,
        "mesh_device",
        f"the mesh the input tensor lives on ({mesh})",
        mesh_device,
    )


def _check_semaphores(op: str, name: str, value, mesh: MeshDevice, count: int) -> None:
    """A GlobalSemaphore or a list of them, created on a mesh that contains the tensor's devices."""
    if value is _UNSET or value is None:
        raise op_error(
            op, name, "a ttnn.GlobalSemaphore (or a list of them) from ttnn.create_global_semaphore", None
        )
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        expect(
            isinstance(item, GlobalSemaphore),
            op,
            name,
            "ttnn.GlobalSemaphore objects from ttnn.create_global_semaphore",
            type(item).__name__,
        )
        _check_semaphore_mesh(op, name, item, mesh)
    expect(len(items) == count, op, name, f"{count} global semaphores", f"{len(items)}")


def _check_semaphore_mesh(op: str, name: str, semaphore: GlobalSemaphore, mesh: MeshDevice) -> None:
    sem_mesh = semaphore.mesh_device
    ok = sem_mesh.is_open and {id(d) for d in mesh.get_devices()} <= {id(d) for d in sem_mesh.get_devices()}
    expect(ok, op, name, f"a semaphore created on the input's mesh ({mesh})", f"one on {sem_mesh}")


def _check_barrier(op: str, barrier_semaphore, mesh: MeshDevice) -> None:
    if barrier_semaphore is None:
        return
    expect(
        isinstance(barrier_semaphore, GlobalSemaphore),
        op,
        "barrier_semaphore",
        "a ttnn.GlobalSemaphore or None",
        type(barrier_semaphore).__name__,
    )
    _check_semaphore_mesh(op, "barrier_semaphore", barrier_semaphore, mesh)


def _check_math_op(op: str, math_op) -> None:
    expect(
        math_op is None or math_op is ReduceType.Sum,
        op,
        "math_op",
        "ReduceType.Sum (the only reduction the CCL kernels implement)",
        repr(math_op),
    )


def check_cluster_axis(op: str, cluster_axis, valid: tuple[int, ...], expected: str) -> None:
    """The one check of every ``cluster_axis`` the CCL ops read: an int (numpy ints too) in ``valid``. A bool is
    refused although Python counts ``True == 1``: ttnn binds the argument as an unsigned int, and a flag there
    is a mistake, not an axis."""
    expect(
        not isinstance(cluster_axis, (bool, np.bool_))
        and isinstance(cluster_axis, (int, np.integer))
        and cluster_axis in valid,
        op,
        "cluster_axis",
        expected,
        repr(cluster_axis),
    )


def _resolve_axis(op: str, mesh: MeshDevice, cluster_axis) -> int | None:
    if cluster_axis is None:
        return None
    dims = mesh.shape.dims()
    valid = (0,) if dims == 1 else (0, 1)
    check_cluster_axis(
        op,
        cluster_axis,
        valid,
        f"None or {' or '.join(map(str, valid))} for the {dims}-D mesh {list(mesh.shape)}",
    )
    return int(cluster_axis)


def _normalize_dim(op: str, dim, rank: int, name: str = "dim") -> int:
    if dim is _UNSET or dim is None:
        raise op_error(op, name, "an int (the tensor dimension to operate on)", None)
    expect(
        not isinstance(dim, bool) and isinstance(dim, (int, np.integer)) and -rank <= dim < rank,
        op,
        name,
        f"an int in [{-rank}, {rank - 1}] for a rank-{rank} input",
        repr(dim),
    )
    return int(dim) % rank


def _input(op: str, value, *, min_rank: int = 1, dtypes=None) -> Tensor:
    tensor = expect_tensor(op, "input_tensor", value, dtypes=dtypes)
    rank = len(tensor.shape)
    expect(
        rank >= min_rank, op, "input_tensor rank", f">= {min_rank}", f"{rank} (shape {list(tensor.shape)})"
    )
    return tensor


def _collective_input(
    op: str, input_tensor, dim, cluster_axis, mesh_device, *, min_rank: int = 1, dtypes=None
) -> tuple[Tensor, MeshDevice, int, int | None]:
    """A collective's input along ``dim``: (tensor, its mesh, ``dim`` normalised, the mesh axis or None for the
    whole mesh), with the optional ``mesh_device`` checked against the tensor's mesh (``_UNSET`` reads as None)."""
    tensor = _input(op, input_tensor, min_rank=min_rank, dtypes=dtypes)
    mesh = tensor.device()
    dim = _normalize_dim(op, dim, len(tensor.shape))
    axis = _resolve_axis(op, mesh, None if cluster_axis is _UNSET else cluster_axis)
    _check_mesh_device(op, None if mesh_device is _UNSET else mesh_device, mesh)
    return tensor, mesh, dim, axis


def _bind(
    op: str, args: tuple, names: Sequence[str], values: dict, leading: tuple = ("input_tensor",)
) -> dict:
    """Assign extra positional arguments to ``names`` (one overload of a ttnn binding)."""
    if len(args) > len(names):
        raise op_error(
            op,
            "positional arguments",
            f"at most {len(names) + len(leading)} ({', '.join((*leading, *names))})",
            f"{len(args) + len(leading)}",
        )
    for name, value in zip(names, args):
        if values[name] is not _UNSET:
            raise op_error(op, name, "one value", "a value both positionally and by keyword")
        values[name] = value
    return values


# --- groups, topology metadata and shard arithmetic -----------------------------------------------------------


def _groups(mesh: MeshDevice, axis: int | None) -> list[list[int]]:
    """Device indices (row-major) of each group, each in ring order."""
    n = mesh.get_num_devices()
    if axis is None or mesh.shape.dims() == 1:
        return [list(range(n))]
    rows, cols = mesh.shape.as_2d()
    if axis == 0:
        return [[r * cols + c for r in range(rows)] for c in range(cols)]
    return [[r * cols + c for c in range(cols)] for r in range(rows)]


def _group_axes(mesh: MeshDevice, axis: int | None) -> list[int]:
    return list(range(mesh.shape.dims())) if axis is None else [axis]


def _output_topology(tensor: Tensor, mesh: MeshDevice, axis: int | None, placement) -> TensorTopology:
    """The input's placements with the collective's mesh axes set to ``placement``.

    The input topology is kept in its own distribution shape when its axes map onto the mesh's (equal
    shapes, or equal once size-1 axes are dropped). A 1-D distribution over all devices of a 2-D mesh is the
    row-major nesting of one placement per mesh axis. Anything else is only rewritten when the collective
    covers the whole mesh (then nothing of the old distribution survives).
    """
    topo = tensor.tensor_topology() or TensorTopology.replicated(mesh.shape)
    dist = tuple(topo.distribution_shape)
    placements = list(topo.placements())
    mesh_shape = tuple(mesh.shape)
    axes = _group_axes(mesh, axis)
    axis_map = None
    if dist == mesh_shape:
        axis_map = {a: a for a in range(len(mesh_shape))}
    else:
        mesh_big = [a for a, s in enumerate(mesh_shape) if s > 1]
        dist_big = [a for a, s in enumerate(dist) if s > 1]
        if [mesh_shape[a] for a in mesh_big] == [dist[a] for a in dist_big]:
            axis_map = dict(zip(mesh_big, dist_big))
    if axis_map is not None:
        for a in axes:
            if a in axis_map:
                placements[axis_map[a]] = placement
        return TensorTopology(topo.distribution_shape, tuple(placements))
    if all(mesh_shape[a] == 1 or a in axes for a in range(len(mesh_shape))):
        return TensorTopology(topo.distribution_shape, tuple(placement for _ in dist))
    if len(dist) == 1 and dist[0] == mesh.get_num_devices():
        nested = [placements[0]] * len(mesh_shape)
        for a in axes:
            nested[a] = placement
        return TensorTopology(MeshShape(*mesh_shape), tuple(nested))
    return topo


def _ring_sum(arrays: list[np.ndarray]) -> np.ndarray:
    """Float32 sum in ring order: ((x0 + x1) + x2) + …"""
    acc = np.array(arrays[0], dtype=np.float32, copy=True)
    for a in arrays[1:]:
        acc += a
    return acc


def _sum_outer_dims(shard: np.ndarray, dims: tuple[int, ...], shape: list[int]) -> np.ndarray:
    """Float32 sum over ``dims``, slice by slice in index order (row-major over the reduced dims)."""
    moved = np.moveaxis(shard, dims, tuple(range(len(dims))))
    rest = moved.shape[len(dims) :]
    acc = np.zeros(rest, dtype=np.float32)
    for part in moved.reshape((math.prod(moved.shape[: len(dims)]), *rest)):
        acc += part
    return acc.reshape(shape)


def _per_group(shards: list[np.ndarray], groups: list[list[int]], combine) -> list:
    """``combine(the group's shards in ring order)`` for each group, a list of one result per member. Groups whose
    members hold the same arrays in the same order (a tensor replicated over the other mesh axis holds one array
    per replica) share one result, computed once: the same inputs in the same order give the same bits."""
    out: list = [None] * len(shards)
    done: dict[tuple[int, ...], list] = {}
    for group in groups:
        members = [shards[i] for i in group]
        key = tuple(id(m) for m in members)
        results = done.get(key)
        if results is None:
            results = done[key] = combine(members)
        for i, result in zip(group, results):
            out[i] = result
    return out


def _gathered(shards: list[np.ndarray], groups: list[list[int]], dim: int) -> list[np.ndarray]:
    def gather(members):
        whole = members[0] if len(members) == 1 else np.concatenate(members, axis=dim)
        return [whole] * len(members)

    return _per_group(shards, groups, gather)


def _reduced(shards: list[np.ndarray], groups: list[list[int]]) -> list[np.ndarray]:
    return _per_group(shards, groups, lambda members: [_ring_sum(members)] * len(members))


def _scattered(shards: list[np.ndarray], groups: list[list[int]], dim: int) -> list[np.ndarray]:
    # each device gets a view of its piece of the group's sum: the output tensor packs (or copies) it as it stores
    # it, so no contiguous copy is made here
    return _per_group(shards, groups, lambda members: np.split(_ring_sum(members), len(members), axis=dim))


def _check_output_buffer(
    op: str, name: str, buffer, like: Tensor, shape: Sequence[int], memory_config: MemoryConfig | None
) -> Tensor | None:
    """A preallocated output must match what the op would allocate (hardware writes into it)."""
    if buffer is None or buffer is _UNSET:
        return None
    buffer = expect_tensor(op, name, buffer)
    same_mesh(op, input_tensor=like, **{name: buffer})
    expect(buffer.dtype is like.dtype, op, f"{name}.dtype", like.dtype.name, buffer.dtype.name)
    expect(buffer.layout is like.layout, op, f"{name}.layout", like.layout.name, buffer.layout.name)
    expect(tuple(buffer.shape) == tuple(shape), op, f"{name}.shape", list(shape), list(buffer.shape))
    wanted = memory_config or like.memory_config()
    expect(
        buffer.memory_config() == wanted,
        op,
        f"{name}.memory_config",
        f"the op's output memory config {wanted}",
        buffer.memory_config(),
    )
    return buffer


def _emit(
    op: str,
    shards: list[np.ndarray],
    like: Tensor,
    memory_config: MemoryConfig | None,
    topology: TensorTopology,
    output: Tensor | None = None,
) -> Tensor:
    """Build the op's output, or write it into a preallocated/persistent output tensor and return that."""
    if output is None:
        return output_like(op, shards, like, memory_config=memory_config, topology=topology)
    for i, shard in enumerate(shards):
        output._writable_shard(i, op)[...] = quantize(shard, output.dtype)
    output._topology = topology
    return output


# --- the collectives ----------------------------------------------------------------------------------------


def _all_gather(
    op: str,
    tensor: Tensor,
    dim: int,
    axis: int | None,
    memory_config: MemoryConfig | None,
    output: Tensor | None,
) -> Tensor:
    mesh = tensor.device()
    groups = _groups(mesh, axis)
    shards = _gathered(full_shards(tensor, op, groups), groups, dim)
    topology = _output_topology(tensor, mesh, axis, PlacementReplicate())
    return _emit(op, shards, tensor, memory_config, topology, output)


def _gather_shape(tensor: Tensor, dim: int, axis: int | None) -> list[int]:
    shape = list(tensor.shape)
    shape[dim] *= len(_groups(tensor.device(), axis)[0])
    return shape


def _scatter_shape(op: str, tensor: Tensor, dim: int, axis: int | None) -> list[int]:
    size = len(_groups(tensor.device(), axis)[0])
    shape = list(tensor.shape)
    expect(
        shape[dim] % size == 0,
        op,
        "dim",
        f"a dim whose size divides by the {size} devices of the group (input shape {list(tensor.shape)})",
        f"dim {dim} of size {shape[dim]}",
    )
    shape[dim] //= size
    return shape


def _reduce_scatter(
    op: str,
    tensor: Tensor,
    dim: int,
    axis: int | None,
    memory_config: MemoryConfig | None,
    output: Tensor | None,
) -> Tensor:
    mesh = tensor.device()
    groups = _groups(mesh, axis)
    shards = _scattered(full_shards(tensor, op, groups), groups, dim)
    topology = _output_topology(tensor, mesh, axis, PlacementShard(dim))
    return _emit(op, shards, tensor, memory_config, topology, output)


@ttnn_op("ttnn.all_gather")
def all_gather(
    input_tensor: Tensor,
    dim: int = _UNSET,  # type: ignore[assignment]
    cluster_axis: int | None = None,
    mesh_device: MeshDevice | None = None,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    subdevice_id=None,
    sub_core_grids: CoreRangeSet | None = None,
    num_links: int | None = None,
    topology: Topology | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    num_workers: int | None = None,
    use_l1_small_for_semaphores: bool = False,
) -> Tensor:
    """Every device gets its group's shards concatenated along ``dim`` in ring order.

    ``cluster_axis`` (and the older positional ``mesh_device``) select the groups as described in the module
    docstring. ``output_tensor`` is filled and returned. Links, topology, workers, chunks and sub-device
    arguments are validated and do not change the result.
    """
    op = "ttnn.all_gather"
    tensor, _, dim, axis = _collective_input(op, input_tensor, dim, cluster_axis, mesh_device)
    check_memory_config(op, memory_config)
    _check_topology(op, topology)
    _check_tuning(
        op,
        num_links,
        chunks_per_sync=chunks_per_sync,
        num_workers_per_link=num_workers_per_link,
        num_buffers_per_channel=num_buffers_per_channel,
        num_workers=num_workers,
    )
    output = _check_output_buffer(
        op, "output_tensor", output_tensor, tensor, _gather_shape(tensor, dim, axis), memory_config
    )
    return _all_gather(op, tensor, dim, axis, memory_config, output)


@ttnn_op("ttnn.reduce_scatter")
def reduce_scatter(
    input_tensor: Tensor,
    dim: int = _UNSET,  # type: ignore[assignment]
    *args,
    math_op: ReduceType = _UNSET,  # type: ignore[assignment]
    cluster_axis: int | None = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = _UNSET,  # type: ignore[assignment]
    scatter_dim: int | None = None,
    subdevice_id=None,
    memory_config: MemoryConfig | None = None,
    intermediate_memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    num_links: int | None = None,
    topology: Topology | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    num_workers: int | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    use_l1_small_for_semaphores: bool = False,
) -> Tensor:
    """Sum the group's shards, then ring index ``k`` keeps slice ``k`` of ``dim`` (which must divide evenly).

    Accepts the older positional forms ``(t, dim, math_op)`` and ``(t, dim, cluster_axis, mesh_device)``;
    ``scatter_dim=`` is the old name of ``dim``. Only ``ReduceType.Sum`` exists on hardware.
    """
    op = "ttnn.reduce_scatter"
    values = {"math_op": math_op, "cluster_axis": cluster_axis, "mesh_device": mesh_device}
    names = (
        ("math_op",)
        if args and isinstance(args[0], ReduceType)
        else ("cluster_axis", "mesh_device", "math_op")
    )
    values = _bind(op, args, names, values, leading=("input_tensor", "dim"))
    values = {k: (None if v is _UNSET else v) for k, v in values.items()}
    if dim is _UNSET:
        dim = scatter_dim
    tensor, _, dim, axis = _collective_input(
        op, input_tensor, dim, values["cluster_axis"], values["mesh_device"], min_rank=2, dtypes=_FLOAT_DTYPES
    )
    _check_math_op(op, values["math_op"])
    check_memory_config(op, memory_config)
    check_memory_config(op, intermediate_memory_config, "intermediate_memory_config")
    _check_topology(op, topology)
    check_compute_config(op, compute_kernel_config)
    _check_tuning(
        op,
        num_links,
        chunks_per_sync=chunks_per_sync,
        num_workers_per_link=num_workers_per_link,
        num_buffers_per_channel=num_buffers_per_channel,
        num_workers=num_workers,
    )
    shape = _scatter_shape(op, tensor, dim, axis)
    output = _check_output_buffer(op, "output_tensor", output_tensor, tensor, shape, memory_config)
    return _reduce_scatter(op, tensor, dim, axis, memory_config, output)


@ttnn_op("ttnn.all_reduce")
def all_reduce(
    input_tensor: Tensor,
    *,
    cluster_axis: int | None = None,
    math_op: ReduceType | None = None,
    subdevice_id=None,
    memory_config: MemoryConfig | None = None,
    num_links: int | None = None,
    topology: Topology | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """Every device of a group gets the float32 ring-order sum of the group's shards (same shape as the input)."""
    op = "ttnn.all_reduce"
    tensor = _input(op, input_tensor, dtypes=_FLOAT_DTYPES)
    mesh = tensor.device()
    axis = _resolve_axis(op, mesh, cluster_axis)
    _check_math_op(op, math_op)
    check_memory_config(op, memory_config)
    _check_topology(op, topology)
    check_compute_config(op, compute_kernel_config)
    _check_tuning(op, num_links)
    groups = _groups(mesh, axis)
    shards = _reduced(full_shards(tensor, op, groups), groups)
    topology_out = _output_topology(tensor, mesh, axis, PlacementReplicate())
    return _emit(op, shards, tensor, memory_config, topology_out)


# --- ttnn.experimental ------------------------------------------------------------------------------------------


_RING_OR_LINEAR = (Topology.Ring, Topology.Linear)


@ttnn_op("ttnn.experimental.all_gather_async")
def all_gather_async(
    input_tensor: Tensor,
    *args,
    persistent_output_buffer: Tensor | None = _UNSET,  # type: ignore[assignment]
    dim: int = _UNSET,  # type: ignore[assignment]
    multi_device_global_semaphore=_UNSET,
    cluster_axis: int | None = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = _UNSET,  # type: ignore[assignment]
    topology: Topology = _UNSET,  # type: ignore[assignment]
    persistent_output_tensor: Tensor | None = None,
    num_links: int | None = 1,
    memory_config: MemoryConfig | None = None,
    subdevice_id=None,
    use_optimal_ccl_for_llama: bool = False,
    barrier_semaphore: GlobalSemaphore | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    sub_core_grids: CoreRangeSet | None = None,
) -> Tensor:
    """The fabric all-gather TTTv1 uses: same result as :func:`all_gather`.

    The three ttnn overloads are accepted: ``(t, dim, semaphores)``, ``(t, persistent_output_buffer, dim,
    semaphores)`` and ``(t, dim, cluster_axis, mesh_device, topology, semaphores)`` (which names its buffer
    ``persistent_output_tensor``), each with keyword arguments. ``multi_device_global_semaphore`` must be two
    global semaphores on the input's mesh; a persistent output buffer is filled and returned. Topology must be
    Ring or Linear; links, chunks, workers and buffers are validated and do not change the result.
    """
    op = "ttnn.experimental.all_gather_async"
    values = {
        "persistent_output_buffer": persistent_output_buffer,
        "dim": dim,
        "multi_device_global_semaphore": multi_device_global_semaphore,
        "cluster_axis": cluster_axis,
        "mesh_device": mesh_device,
        "topology": topology,
    }
    if args and (args[0] is None or isinstance(args[0], Tensor)):
        names: tuple[str, ...] = ("persistent_output_buffer", "dim", "multi_device_global_semaphore")
    elif len(args) >= 3 and isinstance(args[2], MeshDevice):
        names = ("dim", "cluster_axis", "mesh_device", "topology", "multi_device_global_semaphore")
    else:
        names = ("dim", "multi_device_global_semaphore")
    values = _bind(op, args, names, values)
    buffer = values["persistent_output_buffer"]
    if buffer is _UNSET or buffer is None:
        buffer = persistent_output_tensor
    elif persistent_output_tensor is not None:
        raise op_error(op, "persistent_output_tensor", "only one of persistent_output_buffer/_tensor", "both")
    topology = Topology.Ring if values["topology"] is _UNSET else values["topology"]

    tensor, mesh, dim, axis = _collective_input(
        op, input_tensor, values["dim"], values["cluster_axis"], values["mesh_device"], min_rank=2
    )
    _check_semaphores(op, "multi_device_global_semaphore", values["multi_device_global_semaphore"], mesh, 2)
    _check_barrier(op, barrier_semaphore, mesh)
    check_memory_config(op, memory_config)
    _check_topology(op, topology, _RING_OR_LINEAR)
    _check_tuning(
        op,
        num_links,
        chunks_per_sync=chunks_per_sync,
        num_workers_per_link=num_workers_per_link,
        num_buffers_per_channel=num_buffers_per_channel,
    )
    _check_links_fit(op, num_links, mesh)
    output = _check_output_buffer(
        op, "persistent_output_buffer", buffer, tensor, _gather_shape(tensor, dim, axis), memory_config
    )
    return _all_gather(op, tensor, dim, axis, memory_config, output)


def _check_links_fit(op: str, num_links, mesh: MeshDevice) -> None:
    """Each link's workers sit on one core row, so links cannot exceed the grid's rows."""
    if num_links is None:
        return
    rows = mesh.compute_with_storage_grid_size().y
    expect(num_links <= rows, op, "num_links", f"at most {rows} (rows of the worker grid)", num_links)


@ttnn_op("ttnn.experimental.reduce_scatter_minimal_async")
def reduce_scatter_minimal_async(
    input_tensor: Tensor,
    persistent_output_buffers: Sequence[Tensor] | None = None,
    dim: int = _UNSET,  # type: ignore[assignment]
    multi_device_global_semaphore=_UNSET,
    *,
    barrier_semaphore: GlobalSemaphore | None = None,
    num_links: int | None = 1,
    memory_config: MemoryConfig | None = None,
    intermediate_memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Ring,
    subdevice_id=None,
    cluster_axis: int | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """The fabric reduce-scatter TTTv1 uses: same result as :func:`reduce_scatter`.

    ``multi_device_global_semaphore`` must be three global semaphores on the input's mesh.
    ``persistent_output_buffers`` is ``[intermediate, output]``: the output (if given) is filled and returned,
    the intermediate is only checked (dtype and layout of the input). Topology must be Ring or Linear.
    """
    op = "ttnn.experimental.reduce_scatter_minimal_async"
    tensor, mesh, dim, axis = _collective_input(
        op, input_tensor, dim, cluster_axis, None, min_rank=2, dtypes=_FLOAT_DTYPES
    )
    _check_semaphores(op, "multi_device_global_semaphore", multi_device_global_semaphore, mesh, 3)
    _check_barrier(op, barrier_semaphore, mesh)
    check_memory_config(op, memory_config)
    check_memory_config(op, intermediate_memory_config, "intermediate_memory_config")
    _check_topology(op, topology, _RING_OR_LINEAR)
    check_compute_config(op, compute_kernel_config)
    _check_tuning(
        op,
        num_links,
        chunks_per_sync=chunks_per_sync,
        num_workers_per_link=num_workers_per_link,
        num_buffers_per_channel=num_buffers_per_channel,
    )
    shape = _scatter_shape(op, tensor, dim, axis)
    output = None
    if persistent_output_buffers is not None:
        expect(
            isinstance(persistent_output_buffers, (list, tuple)) and len(persistent_output_buffers) <= 2,
            op,
            "persistent_output_buffers",
            "a list [intermediate, output] of ttnn.Tensors",
            repr(persistent_output_buffers),
        )
        buffers = list(persistent_output_buffers)
        if buffers:
            inter = expect_tensor(op, "persistent_output_buffers[0]", buffers[0])
            same_mesh(op, input_tensor=tensor, intermediate=inter)
            expect(
                inter.dtype is tensor.dtype,
                op,
                "persistent_output_buffers[0].dtype",
                tensor.dtype.name,
                inter.dtype.name,
            )
            expect(
                inter.layout is tensor.layout,
                op,
                "persistent_output_buffers[0].layout",
                tensor.layout.name,
                inter.layout.name,
            )
            expect(
                intermediate_memory_config is None or inter.memory_config() == intermediate_memory_config,
                op,
                "persistent_output_buffers[0].memory_config",
                f"intermediate_memory_config {intermediate_memory_config}",
                inter.memory_config(),
            )
        if len(buffers) == 2:
            output = _check_output_buffer(
                op, "persistent_output_buffers[1]", buffers[1], tensor, shape, memory_config
            )
    return _reduce_scatter(op, tensor, dim, axis, memory_config, output)


def _core_offset(op: str, offset) -> CoreCoord:
    if isinstance(offset, CoreCoord):
        return offset
    ok = (
        isinstance(offset, (tuple, list))
        and len(offset) == 2
        and all(not isinstance(v, bool) and isinstance(v, int) and v >= 0 for v in offset)
    )
    expect(ok, op, "all_gather_core_grid_offset", "a ttnn.CoreCoord or an (x, y) pair of ints", repr(offset))
    return CoreCoord(*offset)


@ttnn_op("ttnn.experimental.all_gather_matmul_async")
def all_gather_matmul_async(
    input_tensor: Tensor,
    weight_tensor: Tensor,
    persistent_output_buffer: Tensor | None = None,
    dim: int = _UNSET,  # type: ignore[assignment]
    multi_device_global_semaphore=_UNSET,
    all_gather_core_grid_offset=_UNSET,
    *,
    bias: Tensor | None = None,
    num_links: int | None = 1,
    memory_config_ag: MemoryConfig | None = None,
    topology: Topology = Topology.Ring,
    barrier_semaphore: GlobalSemaphore | None = None,
    subdevice_id=None,
    memory_config_mm: MemoryConfig | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    dtype: DataType | None = None,
    program_config=None,
    activation=None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    core_grid=None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
) -> tuple[Tensor, Tensor]:
    """All-gather the activation over the whole mesh on dim 3, then ``ttnn.linear`` it with the local weight.

    Returns ``(gathered, matmul_output)``. As on hardware: rank-4 input and weight, ``dim == 3``, batch dims of
    the input 1, a 1-D or 2-D multicast program config if one is given, two global semaphores. The matmul
    output defaults to the input's memory config and dtype (``memory_config_mm``/``dtype`` override).
    """
    op = "ttnn.experimental.all_gather_matmul_async"
    tensor, weight, mesh = _gather_matmul_inputs(op, input_tensor, weight_tensor, bias, dim)
    _check_semaphores(op, "multi_device_global_semaphore", multi_device_global_semaphore, mesh, 2)
    _check_barrier(op, barrier_semaphore, mesh)
    _check_topology(op, topology, _RING_OR_LINEAR)
    _check_tuning(
        op,
        num_links,
        chunks_per_sync=chunks_per_sync,
        num_workers_per_link=num_workers_per_link,
        num_buffers_per_channel=num_buffers_per_channel,
    )
    _check_gather_matmul_configs(
        op, mesh, num_links, all_gather_core_grid_offset, memory_config_ag, memory_config_mm, program_config
    )
    output = _check_output_buffer(
        op,
        "persistent_output_buffer",
        persistent_output_buffer,
        tensor,
        _gather_shape(tensor, 3, None),
        memory_config_ag,
    )
    gathered = _all_gather(op, tensor, 3, None, memory_config_ag, output)
    out = _gathered_linear(
        gathered,
        weight,
        tensor,
        bias=bias,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        memory_config_mm=memory_config_mm,
        dtype=dtype,
        program_config=program_config,
        compute_kernel_config=compute_kernel_config,
        core_grid=core_grid,
        activation=activation,
    )
    return gathered, out


def _gather_matmul_inputs(
    op: str, input_tensor, weight_tensor, bias, dim
) -> tuple[Tensor, Tensor, MeshDevice]:
    """The fused all-gather + matmul's operands: rank-4 input ``[1, 1, M, K]`` and weight, gathered on dim 3."""
    tensor = _input(op, input_tensor)
    expect(
        len(tensor.shape) == 4,
        op,
        "input_tensor rank",
        "4",
        f"{len(tensor.shape)} (shape {list(tensor.shape)})",
    )
    weight = expect_tensor(op, "weight_tensor", weight_tensor, rank=4)
    mesh = same_mesh(op, input_tensor=tensor, weight_tensor=weight, bias=bias)
    dim = _normalize_dim(op, dim, 4)
    expect(dim == 3, op, "dim", "3 (the gather runs on the last dim)", dim)
    expect(
        tensor.shape[0] == 1 and tensor.shape[1] == 1,
        op,
        "input_tensor.shape",
        "batch dims of 1 ([1, 1, M, K])",
        list(tensor.shape),
    )
    return tensor, weight, mesh


def _check_gather_matmul_configs(
    op: str, mesh: MeshDevice, num_links, offset, memory_config_ag, memory_config_mm, program_config
) -> None:
    """The fused op's core-grid offset, memory configs, links and program config (a 1-D or 2-D multicast)."""
    if offset is _UNSET:
        raise op_error(op, "all_gather_core_grid_offset", "a ttnn.CoreCoord or an (x, y) pair", None)
    _core_offset(op, offset)
    check_memory_config(op, memory_config_ag, "memory_config_ag")
    check_memory_config(op, memory_config_mm, "memory_config_mm")
    _check_links_fit(op, num_links, mesh)
    expect(
        program_config is None
        or isinstance(
            program_config,
            (MatmulMultiCoreReuseMultiCast1DProgramConfig, MatmulMultiCoreReuseMultiCastProgramConfig),
        ),
        op,
        "program_config",
        "a MatmulMultiCoreReuseMultiCast1DProgramConfig or MatmulMultiCoreReuseMultiCastProgramConfig",
        type(program_config).__name__,
    )


def _gathered_linear(gathered: Tensor, weight: Tensor, tensor: Tensor, *, memory_config_mm, dtype, **matmul):
    """The fused ops' matmul: ``ttnn.linear`` of the gathered activation with the fused op's matmul arguments
    ``matmul``, in the input's memory config and dtype unless ``memory_config_mm`` / ``dtype`` say otherwise."""
    return linear(
        gathered,
        weight,
        memory_config=memory_config_mm or tensor.memory_config(),
        dtype=dtype or tensor.dtype,
        **matmul,
    )


@ttnn_op("ttnn.experimental.all_gather_matmul")
def all_gather_matmul(
    input_tensor: Tensor,
    weight_tensor: Tensor,
    dim: int = _UNSET,  # type: ignore[assignment]
    all_gather_core_grid_offset=_UNSET,
    *,
    bias: Tensor | None = None,
    num_links: int = 1,
    memory_config_ag: MemoryConfig | None = None,
    num_workers: int | None = None,
    num_buffers_per_channel: int | None = None,
    memory_config_mm: MemoryConfig | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    dtype: DataType | None = None,
    program_config=None,
    activation=None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    core_grid=None,
) -> list[Tensor]:
    """The older, synchronous fused all-gather + matmul (T3000 demos): the gather runs over the whole mesh as a
    ring, on dim 3, then ``ttnn.linear`` with the local weight.

    Returns ``[gathered, matmul_output, datacopy]`` as ttnn does: the datacopy output is a second tensor holding
    the gathered activation (hardware's copy of it into the matmul's input buffer). Same operand and config
    checks as :func:`all_gather_matmul_async`, without semaphores or persistent buffers; ``num_workers`` and
    ``num_buffers_per_channel`` are tuning only.
    """
    op = "ttnn.experimental.all_gather_matmul"
    tensor, weight, mesh = _gather_matmul_inputs(op, input_tensor, weight_tensor, bias, dim)
    _check_tuning(op, num_links, num_workers=num_workers, num_buffers_per_channel=num_buffers_per_channel)
    _check_gather_matmul_configs(
        op, mesh, num_links, all_gather_core_grid_offset, memory_config_ag, memory_config_mm, program_config
    )
    gathered = _all_gather(op, tensor, 3, None, memory_config_ag, None)
    datacopy = clone(gathered)  # ttnn's second output: the same gathered values in a buffer of its own
    out = _gathered_linear(
        gathered,
        weight,
        tensor,
        bias=bias,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        memory_config_mm=memory_config_mm,
        dtype=dtype,
        program_config=program_config,
        compute_kernel_config=compute_kernel_config,
        core_grid=core_grid,
        activation=activation,
    )
    return [gathered, out, datacopy]


@ttnn_op("ttnn.experimental.fast_reduce_nc")
def fast_reduce_nc(
    input: Tensor,
    *,
    dims: Sequence[int] = (),
    output: Tensor | None = None,
    memory_config: MemoryConfig = DRAM_MEMORY_CONFIG,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    queue_id: int = 0,
) -> Tensor:
    """Per device, sum over ``dims`` (keeping them as size 1): the local reduction after an all-gather.

    Only outer dims can be reduced (not the last two, the tile dims); the sum runs in float32 in index order and
    is quantised to the input's dtype (or ``output``'s, which is filled and returned). TILE layout; bfloat16,
    bfloat8_b or float32 input, as on hardware.
    """
    op = "ttnn.experimental.fast_reduce_nc"
    tensor = expect_tensor(
        op,
        "input",
        input,
        dtypes=(DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32),
        layouts=(Layout.TILE,),
    )
    rank = len(tensor.shape)
    dims = list(dims) if isinstance(dims, (list, tuple)) else dims
    expect(isinstance(dims, list) and len(dims) > 0, op, "dims", "a non-empty list of dims", repr(dims))
    for d in dims:
        expect(
            not isinstance(d, bool) and isinstance(d, int) and 0 <= d < rank - 2,
            op,
            "dims",
            f"dims in [0, {rank - 3}] (not the last two of a rank-{rank} input)",
            repr(dims),
        )
    expect(len(set(dims)) == len(dims), op, "dims", "distinct dims", repr(dims))
    check_memory_config(op, memory_config)
    check_compute_config(op, compute_kernel_config)
    reduce_dims = tuple(sorted(dims))
    shape = [1 if i in reduce_dims else s for i, s in enumerate(tensor.shape)]
    if output is not None:
        output = expect_tensor(
            op,
            "output",
            output,
            dtypes=(DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32),
            layouts=(Layout.TILE,),
        )
        same_mesh(op, input=tensor, output=output)
        expect(tuple(output.shape) == tuple(shape), op, "output.shape", shape, list(output.shape))
    # per distinct shard: after an all-gather the devices of a group hold one array, summed once for all of them
    shards = per_device(lambda s: _sum_outer_dims(s, reduce_dims, shape), tensor.shards(op))
    if output is not None:
        return _emit(op, shards, tensor, None, tensor.tensor_topology(), output)
    return output_like(op, shards, tensor, memory_config=memory_config)
