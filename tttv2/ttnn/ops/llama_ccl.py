"""The fused collectives of tt-metal's Llama-3 70B Galaxy demo (``ttnn.experimental.llama_*`` and friends).

On hardware these ops fuse a matmul or a head split into a collective and run on a sub-device of worker cores
with persistent intermediate buffers, global semaphores and (with the prefetcher) a global circular buffer. The
values they produce are those of the unfused ops, which is what the emulator computes:

* ``llama_reduce_scatter``: a reduce-scatter over ``cluster_axis=1`` on dim 3 of a 32-row width-sharded tensor
  (sum in float32 in ring order, slice ``k`` on ring index ``k``). When the input's width does not fill its
  shard grid evenly, ttnn pads the width to ``cores × ceil(tiles / cores)`` tiles before splitting, so each
  device gets ``padded / ring`` columns; the emulator pads with zeros.
* ``llama_rs_matmul``: ``ttnn.linear`` of the input with one weight (the reduce-scatter then runs on
  ``rs_tensor``) or with two weights (the reduce-scatter runs on the first product), then the reduce-scatter
  above. Returns ``(mm, rs)`` or ``(mm1, mm2, rs)``, as ttnn does.
* ``all_reduce_async``: the sum over the group on every device (three ttnn overloads).
* ``reduce_scatter_async``: :func:`ttnn.reduce_scatter` with the fabric semaphores of the older async API.

Persistent buffers (``intermediate_packet_buffer``, ``buffer_tensor``, ``persistent_output_tensors``),
semaphores, sub-device ids, links, ``use_noc1_only`` and ``global_cb`` are resource bookkeeping: they are
validated (type, mesh, the shard shape ttnn requires) and never change the result; an intermediate buffer is
not written (hardware uses it as scratch that no caller reads).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._remote import full_shards
from ..device import MeshDevice, SubDeviceId
from ..errors import op_error
from ..memory import (
    CoreCoord,
    CoreRange,
    CoreRangeSet,
    MemoryConfig,
    ShardSpec,
    TensorMemoryLayout,
    num_cores_to_corerangeset,
    subgrid_cores,
)
from ..placement import PlacementReplicate, PlacementShard
from ..tensor import Tensor
from ..types import BufferType, DataType, Layout, ReduceType, Topology
from ._common import (
    check_compute_config,
    check_memory_config,
    expect,
    expect_tensor,
    output_like,
    same_mesh,
    ttnn_op,
)
from .ccl import (
    _FLOAT_DTYPES,
    _RING_OR_LINEAR,
    _UNSET,
    GlobalSemaphore,
    _check_math_op,
    _check_mesh_device,
    _check_semaphores,
    _check_topology,
    _check_tuning,
    _collective_input,
    _groups,
    _input,
    _normalize_dim,
    _output_topology,
    _reduce_scatter,
    _reduced,
    _resolve_axis,
    _ring_sum,
    _scatter_shape,
    check_cluster_axis,
)
from .matmul import linear

__all__: list[str] = []
__experimental__ = [
    "all_gather_concat",
    "all_reduce_async",
    "llama_reduce_scatter",
    "llama_rs_create_heads",
    "llama_rs_matmul",
    "reduce_scatter_async",
]
__transformer__: list[str] = []


def _check_subdevice(op: str, name: str, value, mesh: MeshDevice) -> None:
    """None, or a SubDeviceId of the mesh's loaded sub-device manager (0 alone when none is loaded)."""
    if value is None:
        return
    valid = mesh.get_sub_device_ids()
    expect(
        isinstance(value, SubDeviceId) and value in valid,
        op,
        name,
        f"a ttnn.SubDeviceId of the loaded sub-device manager ({', '.join(map(repr, valid))}) or None",
        repr(value),
    )


def _check_flag(op: str, name: str, value) -> None:
    expect(isinstance(value, bool), op, name, "a bool", repr(value))


def _shard_spec(tensor: Tensor) -> ShardSpec | None:
    config = tensor.memory_config()
    return config.shard_spec if config is not None and config.is_sharded() else None


# --- llama_reduce_scatter ------------------------------------------------------------------------------------


def _check_llama_rs(
    op: str,
    tensor: Tensor,
    buffer,
    dim,
    semaphore,
    cluster_axis,
    mesh_device,
    memory_config,
    topology,
    num_links,
    name: str = "input_tensor",
) -> tuple[int, int]:
    """The llama reduce-scatter's limits (those of ttnn's validation) on the tensor it scatters, called ``name``
    in messages; returns (dim, ring size)."""
    mesh = tensor.device()
    expect(
        len(tensor.shape) == 4,
        op,
        f"{name} rank",
        "4",
        f"{len(tensor.shape)} (shape {list(tensor.shape)})",
    )
    dim = _normalize_dim(op, dim, 4)
    expect(dim == 3, op, "dim", "3 (the width)", dim)
    check_cluster_axis(op, cluster_axis, (1,), "1 (the op reduces along mesh rows)")
    expect(mesh.shape.dims() == 2, op, "mesh", "a 2-D mesh", list(mesh.shape))
    ring = mesh.shape.as_2d()[1]
    expect(ring in (2, 4), op, "mesh columns", "2 or 4 devices along cluster_axis 1", ring)
    _check_mesh_device(op, mesh_device, mesh)
    _check_semaphores(op, "cross_device_semaphore", semaphore, mesh, 1)
    _check_topology(op, topology, _RING_OR_LINEAR)
    _check_tuning(op, num_links)
    check_memory_config(op, memory_config)
    spec = _shard_spec(tensor)
    expect(spec is not None, op, f"{name}.memory_config", "a sharded memory config", tensor.memory_config())
    expect(spec.shape[0] == 32, op, f"{name} shard height", "32", spec.shape[0])
    buf = expect_tensor(op, "intermediate_packet_buffer", buffer)
    same_mesh(op, **{name: tensor}, intermediate_packet_buffer=buf)
    buf_spec = _shard_spec(buf)
    expect(
        buf_spec is not None,
        op,
        "intermediate_packet_buffer.memory_config",
        "a sharded memory config",
        buf.memory_config(),
    )
    expect(buf_spec.shape[0] == 32, op, "intermediate_packet_buffer shard height", "32", buf_spec.shape[0])
    if memory_config is not None:
        expect(
            memory_config.is_sharded() and memory_config.shard_spec is not None,
            op,
            "memory_config",
            "a sharded memory config with a shard spec",
            memory_config,
        )
        expect(
            memory_config.shard_spec.shape[0] == 32,
            op,
            "memory_config shard height",
            "32",
            memory_config.shard_spec.shape[0],
        )
    width = tensor.shape[3]
    expect(width % ring == 0, op, f"{name} width", f"a multiple of the {ring} devices of a row", width)
    return dim, ring


def _padded_width(tensor: Tensor) -> int:
    """The width ttnn splits: the logical width, or (when it does not fill the shard grid evenly) the width
    padded to ``cores × ceil(tiles / cores)`` tiles."""
    spec = _shard_spec(tensor)
    width = tensor.shape[3]
    if width % spec.shape[1] == 0:
        return width
    cores = spec.num_cores()
    tiles = -(-width // 32)
    return cores * (-(-tiles // cores)) * 32


def _llama_rs(op: str, tensor: Tensor, ring: int, memory_config: MemoryConfig | None) -> Tensor:
    mesh = tensor.device()
    groups = _groups(mesh, 1)
    padded = _padded_width(tensor)
    shards = full_shards(tensor, op, groups)
    out: list[np.ndarray] = [None] * len(shards)  # type: ignore[list-item]
    for group in groups:
        total = _ring_sum([shards[i] for i in group])
        if padded != total.shape[3]:
            pad = [(0, 0)] * 3 + [(0, padded - total.shape[3])]
            total = np.pad(total, pad)
        for k, piece in enumerate(np.split(total, ring, axis=3)):
            out[group[k]] = np.ascontiguousarray(piece)
    if memory_config is None:
        # ttnn's default: the input's memory config, one 32-wide shard per core, row-major from core (0, 0)
        spec = _shard_spec(tensor)
        cores = padded // ring // 32
        expect(
            padded // ring % 32 == 0 and cores >= 1,
            op,
            "input_tensor width",
            f"whole 32-column tiles on each of the {ring} devices (the default output has one tile per core; "
            f"else pass memory_config)",
            f"{tensor.shape[3]} ({padded // ring} columns a device)",
        )
        expect(
            tensor.memory_config().memory_layout is TensorMemoryLayout.WIDTH_SHARDED,
            op,
            "input_tensor.memory_config",
            "WIDTH_SHARDED (the default output keeps its layout with one 32-wide shard per core; else pass "
            "memory_config)",
            tensor.memory_config().memory_layout,
        )
        grid = mesh.compute_with_storage_grid_size()
        crs = num_cores_to_corerangeset(
            cores, CoreCoord(grid.x, grid.y), row_wise=spec.orientation.name == "ROW_MAJOR"
        )
        base = tensor.memory_config()
        memory_config = MemoryConfig(
            base.memory_layout, base.buffer_type, ShardSpec(crs, (tensor.shape[2], 32), spec.orientation)
        )
    topology = _output_topology(tensor, mesh, 1, PlacementShard(3))
    return output_like(op, out, tensor, memory_config=memory_config, topology=topology)


@ttnn_op("ttnn.experimental.llama_reduce_scatter")
def llama_reduce_scatter(
    input_tensor: Tensor,
    intermediate_packet_buffer: Tensor = _UNSET,  # type: ignore[assignment]
    dim: int = _UNSET,  # type: ignore[assignment]
    cross_device_semaphore: GlobalSemaphore = _UNSET,  # type: ignore[assignment]
    subdevice_id: SubDeviceId | None = None,
    cluster_axis: int = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = None,
    num_links: int = 1,
    *,
    memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Linear,
    use_noc1_only: bool = False,
) -> Tensor:
    """Reduce-scatter after FF1/FF3 of the Galaxy MLP: the sum over each mesh row, device ``k`` of the row
    keeping slice ``k`` of the width (see the module docstring for the padded case and the limits)."""
    op = "ttnn.experimental.llama_reduce_scatter"
    tensor = _input(op, input_tensor, dtypes=_FLOAT_DTYPES)
    _check_subdevice(op, "subdevice_id", subdevice_id, tensor.device())
    _check_flag(op, "use_noc1_only", use_noc1_only)
    _, ring = _check_llama_rs(
        op,
        tensor,
        intermediate_packet_buffer,
        dim,
        cross_device_semaphore,
        None if cluster_axis is _UNSET else cluster_axis,
        mesh_device,
        memory_config,
        topology,
        num_links,
    )
    return _llama_rs(op, tensor, ring, memory_config)


@ttnn_op("ttnn.experimental.llama_rs_matmul")
def llama_rs_matmul(
    input_tensor: Tensor,
    weight_tensor: Tensor,
    intermediate_packet_buffer: Tensor = _UNSET,  # type: ignore[assignment]
    dim: int = _UNSET,  # type: ignore[assignment]
    cross_device_semaphore: GlobalSemaphore = _UNSET,  # type: ignore[assignment]
    cluster_axis: int = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = None,
    num_links: int = 1,
    subdevice_id: SubDeviceId | None = None,
    *,
    second_weight_tensor: Tensor | None = None,
    rs_tensor: Tensor | None = None,
    topology: Topology = Topology.Linear,
    memory_config_rs: MemoryConfig | None = None,
    memory_config_mm: MemoryConfig | None = None,
    compute_kernel_config=None,
    global_cb=None,
    core_grid=None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    dtype: DataType | None = None,
    program_config=None,
    activation=None,
    output_tile=None,
    optional_output_tensor: Tensor | None = None,
    use_noc1_only: bool = False,
) -> tuple[Tensor, ...]:
    """A matmul fused with the llama reduce-scatter. Exactly one of ``rs_tensor`` (reduce-scatter that
    tensor, return ``(input @ weight, rs)``) or ``second_weight_tensor`` (return ``(input @ weight,
    input @ second_weight, rs(input @ weight))``) is given. The products are ``ttnn.linear`` with the same
    program/compute config, dtype (default the input's) and ``memory_config_mm`` (default the input's)."""
    op = "ttnn.experimental.llama_rs_matmul"
    tensor = _input(op, input_tensor, dtypes=_FLOAT_DTYPES)
    weight = expect_tensor(op, "weight_tensor", weight_tensor)
    same_mesh(op, input_tensor=tensor, weight_tensor=weight, second_weight_tensor=second_weight_tensor)
    expect(
        (rs_tensor is None) != (second_weight_tensor is None),
        op,
        "rs_tensor / second_weight_tensor",
        "exactly one of them",
        "both" if rs_tensor is not None else "neither",
    )
    _check_subdevice(op, "subdevice_id", subdevice_id, tensor.device())
    _check_flag(op, "use_noc1_only", use_noc1_only)
    check_memory_config(op, memory_config_mm, "memory_config_mm")
    check_compute_config(op, compute_kernel_config)
    expect(optional_output_tensor is None, op, "optional_output_tensor", "None (ttnn ignores it)", "a tensor")

    def product(w: Tensor) -> Tensor:
        return linear(
            tensor,
            w,
            transpose_a=transpose_a,
            transpose_b=transpose_b,
            memory_config=memory_config_mm or tensor.memory_config(),
            dtype=dtype or tensor.dtype,
            program_config=program_config,
            compute_kernel_config=compute_kernel_config,
            core_grid=core_grid,
            activation=activation,
            output_tile=output_tile,
            global_cb=global_cb,
        )

    axis = None if cluster_axis is _UNSET else cluster_axis
    if second_weight_tensor is not None:
        second = expect_tensor(op, "second_weight_tensor", second_weight_tensor)
        mm_config = memory_config_mm or tensor.memory_config()
        expect(
            mm_config is not None and mm_config.is_sharded(),
            op,
            "memory_config_mm",
            "a sharded memory config (the first product is reduce-scattered)",
            f"{mm_config}" + ("" if memory_config_mm else " (the input_tensor's, the default)"),
        )
        first = product(weight)
        _, ring = _check_llama_rs(
            op,
            first,
            intermediate_packet_buffer,
            dim,
            cross_device_semaphore,
            axis,
            mesh_device,
            memory_config_rs,
            topology,
            num_links,
            "first product",
        )
        return first, product(second), _llama_rs(op, first, ring, memory_config_rs)
    scatter = _input(op, rs_tensor, dtypes=_FLOAT_DTYPES)
    same_mesh(op, input_tensor=tensor, rs_tensor=scatter)
    _, ring = _check_llama_rs(
        op,
        scatter,
        intermediate_packet_buffer,
        dim,
        cross_device_semaphore,
        axis,
        mesh_device,
        memory_config_rs,
        topology,
        num_links,
        "rs_tensor",
    )
    return product(weight), _llama_rs(op, scatter, ring, memory_config_rs)


# --- all_reduce_async ----------------------------------------------------------------------------------------


@ttnn_op("ttnn.experimental.all_reduce_async")
def all_reduce_async(
    input_tensor: Tensor,
    *args,
    buffer_tensor: Tensor | None = _UNSET,  # type: ignore[assignment]
    cluster_axis: int | None = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = _UNSET,  # type: ignore[assignment]
    multi_device_global_semaphore=_UNSET,
    num_devices: int = _UNSET,  # type: ignore[assignment]
    barrier_semaphores=_UNSET,
    rs_global_semaphores=_UNSET,
    ag_global_semaphores=_UNSET,
    math_op: ReduceType = _UNSET,  # type: ignore[assignment]
    dtype: DataType | None = None,
    memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Linear,
    num_links: int | None = None,
    subdevice_id: SubDeviceId | None = None,
    use_noc1_only: bool = False,
    use_optimal_ccl_for_llama: bool = False,
) -> Tensor:
    """Every device gets the float32 ring-order sum of its group's shards, quantised to ``dtype`` (default
    the input's). ttnn's three overloads:

    * ``(t, buffer_tensor, cluster_axis, mesh_device, multi_device_global_semaphore, dtype=…)``: the Galaxy
      form, with a persistent intermediate buffer (checked, not written) and one semaphore;
    * ``(t, cluster_axis, mesh_device, barrier_semaphores, rs_global_semaphores, ag_global_semaphores, math_op)``;
    * ``(t, num_devices, barrier_semaphores, rs_global_semaphores, ag_global_semaphores, math_op)``: the whole
      mesh, which must have ``num_devices`` devices.
    """
    op = "ttnn.experimental.all_reduce_async"
    values = {
        "buffer_tensor": buffer_tensor,
        "cluster_axis": cluster_axis,
        "mesh_device": mesh_device,
        "multi_device_global_semaphore": multi_device_global_semaphore,
        "num_devices": num_devices,
        "barrier_semaphores": barrier_semaphores,
        "rs_global_semaphores": rs_global_semaphores,
        "ag_global_semaphores": ag_global_semaphores,
        "math_op": math_op,
    }
    first = args[0] if args else _UNSET
    # the Galaxy form is the only one with a buffer and a multi_device_global_semaphore: either names it
    if (
        isinstance(first, Tensor)
        or buffer_tensor is not _UNSET
        or multi_device_global_semaphore is not _UNSET
    ):
        names: tuple[str, ...] = (
            "buffer_tensor",
            "cluster_axis",
            "mesh_device",
            "multi_device_global_semaphore",
        )
    elif (len(args) >= 2 and isinstance(args[1], MeshDevice)) or mesh_device is not _UNSET:
        names = (
            "cluster_axis",
            "mesh_device",
            "barrier_semaphores",
            "rs_global_semaphores",
            "ag_global_semaphores",
            "math_op",
        )
    else:
        names = (
            "num_devices",
            "barrier_semaphores",
            "rs_global_semaphores",
            "ag_global_semaphores",
            "math_op",
        )
    if len(args) > len(names):
        raise op_error(
            op, "positional arguments", f"at most {len(names) + 1} for this overload", len(args) + 1
        )
    for name, value in zip(names, args):
        if values[name] is not _UNSET:
            raise op_error(op, name, "one value", "a value both positionally and by keyword")
        values[name] = value

    tensor = _input(op, input_tensor, min_rank=2, dtypes=_FLOAT_DTYPES)
    mesh = tensor.device()
    check_memory_config(op, memory_config)
    _check_topology(op, topology, _RING_OR_LINEAR)
    _check_tuning(op, num_links)
    _check_subdevice(op, "subdevice_id", subdevice_id, tensor.device())
    _check_flag(op, "use_noc1_only", use_noc1_only)
    _check_flag(op, "use_optimal_ccl_for_llama", use_optimal_ccl_for_llama)
    expect(dtype is None or isinstance(dtype, DataType), op, "dtype", "a ttnn.DataType or None", repr(dtype))
    if names[0] == "num_devices":
        count = values["num_devices"]
        expect(
            type(count) is int and count == mesh.get_num_devices(),
            op,
            "num_devices",
            f"the {mesh.get_num_devices()} devices of the input's mesh",
            repr(None if count is _UNSET else count),
        )
        axis = None
    else:
        axis_value = values["cluster_axis"]
        expect(axis_value is not _UNSET, op, "cluster_axis", "0 or 1", None)
        axis = _resolve_axis(op, mesh, axis_value)
        _check_mesh_device(op, None if values["mesh_device"] is _UNSET else values["mesh_device"], mesh)
    if names[0] == "buffer_tensor":
        given = values["buffer_tensor"]
        buf = expect_tensor(op, "buffer_tensor", None if given is _UNSET else given)
        same_mesh(op, input_tensor=tensor, buffer_tensor=buf)
        _check_semaphores(
            op, "multi_device_global_semaphore", values["multi_device_global_semaphore"], mesh, 1
        )
    else:
        for name in ("barrier_semaphores", "rs_global_semaphores", "ag_global_semaphores"):
            sems = values[name]
            count = len(sems) if isinstance(sems, (list, tuple)) else 1
            _check_semaphores(op, name, sems, mesh, max(count, 1))
        _check_math_op(op, None if values["math_op"] is _UNSET else values["math_op"])
    groups = _groups(mesh, axis)
    shards = _reduced(full_shards(tensor, op, groups), groups)
    topo = _output_topology(tensor, mesh, axis, PlacementReplicate())
    return output_like(op, shards, tensor, dtype=dtype, memory_config=memory_config, topology=topo)


# --- reduce_scatter_async ------------------------------------------------------------------------------------


@ttnn_op("ttnn.experimental.reduce_scatter_async")
def reduce_scatter_async(
    input_tensor: Tensor,
    dim: int = _UNSET,  # type: ignore[assignment]
    *args,
    cluster_axis: int | None = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = _UNSET,  # type: ignore[assignment]
    from_remote_multi_device_global_semaphore=_UNSET,
    to_remote_multi_device_global_semaphore=_UNSET,
    math_op: ReduceType = ReduceType.Sum,
    memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Linear,
    num_links: int | None = None,
    subdevice_id: SubDeviceId | None = None,
    persistent_output_tensors: Sequence[Tensor] | None = None,
) -> Tensor:
    """The older fabric reduce-scatter: the result of :func:`ttnn.reduce_scatter`. Positional forms
    ``(t, dim, from_sem, to_sem)`` (whole mesh) and ``(t, dim, cluster_axis, mesh_device, from_sem, to_sem)``.
    ``persistent_output_tensors`` are the op's scratch buffers on hardware: checked (tensors on the mesh), not
    written; the result is a new tensor."""
    op = "ttnn.experimental.reduce_scatter_async"
    values = {
        "cluster_axis": cluster_axis,
        "mesh_device": mesh_device,
        "from_remote_multi_device_global_semaphore": from_remote_multi_device_global_semaphore,
        "to_remote_multi_device_global_semaphore": to_remote_multi_device_global_semaphore,
    }
    sem_names = ("from_remote_multi_device_global_semaphore", "to_remote_multi_device_global_semaphore")
    if len(args) >= 2 and isinstance(args[1], MeshDevice):
        names: tuple[str, ...] = ("cluster_axis", "mesh_device", *sem_names)
    else:
        names = sem_names
    if len(args) > len(names):
        raise op_error(op, "positional arguments", f"at most {len(names) + 2}", len(args) + 2)
    for name, value in zip(names, args):
        if values[name] is not _UNSET:
            raise op_error(op, name, "one value", "a value both positionally and by keyword")
        values[name] = value
    tensor, mesh, dim, axis = _collective_input(
        op, input_tensor, dim, values["cluster_axis"], values["mesh_device"], min_rank=2, dtypes=_FLOAT_DTYPES
    )
    for name in sem_names:
        _check_semaphores(op, name, values[name], mesh, 1)
    _check_math_op(op, math_op)
    check_memory_config(op, memory_config)
    _check_topology(op, topology, _RING_OR_LINEAR)
    _check_tuning(op, num_links)
    _check_subdevice(op, "subdevice_id", subdevice_id, tensor.device())
    if persistent_output_tensors is not None:
        expect(
            isinstance(persistent_output_tensors, (list, tuple)),
            op,
            "persistent_output_tensors",
            "a list of ttnn.Tensors or None",
            repr(persistent_output_tensors),
        )
        for i, buf in enumerate(persistent_output_tensors):
            buf = expect_tensor(op, f"persistent_output_tensors[{i}]", buf)
            same_mesh(op, input_tensor=tensor, **{f"persistent_output_tensors[{i}]": buf})
    _scatter_shape(op, tensor, dim, axis)
    expect(tensor.layout is Layout.TILE, op, "input_tensor.layout", "TILE", tensor.layout.name)
    return _reduce_scatter(op, tensor, dim, axis, memory_config, None)


# --- llama_rs_create_heads and all_gather_concat (the Galaxy attention's decode) ------------------------------

# the fused kernels' fixed layout: 8 query heads of 128 per device, one KV head, 8 users per device
_KERNEL_HEADS, _KERNEL_HEAD_DIM, _KERNEL_USERS = 8, 128, 8


def _with_spec(config: MemoryConfig, grid, shape) -> MemoryConfig:
    return MemoryConfig(
        config.memory_layout, config.buffer_type, ShardSpec(grid, shape, config.shard_spec.orientation)
    )


@ttnn_op("ttnn.experimental.llama_rs_create_heads")
def llama_rs_create_heads(
    input_tensor: Tensor,
    intermediate_packet_buffer: Tensor = _UNSET,  # type: ignore[assignment]
    dim: int = _UNSET,  # type: ignore[assignment]
    cross_device_semaphore: GlobalSemaphore = _UNSET,  # type: ignore[assignment]
    subdevice_id: SubDeviceId | None = None,
    cluster_axis: int = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = None,
    topology: Topology = Topology.Linear,
    num_links: int = 1,
    num_heads: int = _UNSET,  # type: ignore[assignment]
    num_kv_heads: int = _UNSET,  # type: ignore[assignment]
    memory_config: MemoryConfig | None = None,
    qkv_memory_config: MemoryConfig | None = None,
    use_noc1_only: bool = False,
    use_optimal_ccl_for_llama: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """The Galaxy decode QKV: reduce the fused ``[1, 1, 32, (nh + 2·nkv)·hd]`` QKV over each mesh row, device
    ``k`` of the row keeps users ``[8k, 8k + 8)``, split into heads. Returns ``(q, k, v)``, each
    ``[1, 8, nh, hd]`` (ttnn gives K and V the query's head count: their one head is head 0, the emulator's other
    rows are zeros; the KV-cache update reads only the first ``nkv``). Layout and dtype are the input's; each
    output is ``qkv_memory_config`` with a shard of ``(nh, hd)`` per user, Q on the first 8 cores of its grid,
    K on the next 8 and V on the 8 after. The kernel is written for one layout, checked here: 8 query heads of
    128, 1 KV head, 32 rows over 4 devices."""
    op = "ttnn.experimental.llama_rs_create_heads"
    tensor = _input(op, input_tensor, dtypes=_FLOAT_DTYPES)
    _check_subdevice(op, "subdevice_id", subdevice_id, tensor.device())
    _check_flag(op, "use_noc1_only", use_noc1_only)
    _check_flag(op, "use_optimal_ccl_for_llama", use_optimal_ccl_for_llama)
    check_memory_config(op, qkv_memory_config, "qkv_memory_config")
    _, ring = _check_llama_rs(
        op,
        tensor,
        intermediate_packet_buffer,
        dim,
        cross_device_semaphore,
        None if cluster_axis is _UNSET else cluster_axis,
        mesh_device,
        memory_config,
        topology,
        num_links,
    )
    expect(
        num_heads == _KERNEL_HEADS,
        op,
        "num_heads",
        f"{_KERNEL_HEADS} (the kernel's fixed layout)",
        repr(num_heads),
    )
    expect(num_kv_heads == 1, op, "num_kv_heads", "1 (the kernel's fixed layout)", repr(num_kv_heads))
    width, rows = tensor.shape[3], tensor.padded_shape[2]
    head_dim = width // (num_heads + 2 * num_kv_heads)
    expect(
        head_dim == _KERNEL_HEAD_DIM and width == head_dim * (num_heads + 2),
        op,
        "input_tensor width",
        f"{(num_heads + 2) * _KERNEL_HEAD_DIM} ({num_heads} + 2 heads of {_KERNEL_HEAD_DIM})",
        width,
    )
    expect(
        rows // ring == _KERNEL_USERS,
        op,
        "input_tensor rows",
        f"{_KERNEL_USERS * ring} ({_KERNEL_USERS} users per device)",
        rows,
    )
    expect(
        qkv_memory_config is not None
        and qkv_memory_config.is_sharded()
        and qkv_memory_config.shard_spec is not None,
        op,
        "qkv_memory_config",
        "a sharded memory config with a shard spec (the grid Q, K and V go to)",
        qkv_memory_config,
    )
    expect(
        qkv_memory_config.shard_spec.shape[0] == 32,
        op,
        "qkv_memory_config shard height",
        "32",
        qkv_memory_config.shard_spec.shape[0],
    )
    users = _KERNEL_USERS
    grid = qkv_memory_config.shard_spec.grid
    start = CoreCoord(min(r.start.x for r in grid.ranges), min(r.start.y for r in grid.ranges))
    expect(
        grid.num_cores() >= 3 * users, op, "qkv_memory_config grid", f">= {3 * users} cores", grid.num_cores()
    )
    ordered = [CoreRange(c, c) for c in subgrid_cores(start, 3 * users, grid, row_wise=True)]
    groups = _groups(tensor.device(), 1)
    shards = full_shards(tensor, op, groups)
    q_out: list[np.ndarray] = [None] * len(shards)  # type: ignore[list-item]
    k_out: list[np.ndarray] = [None] * len(shards)  # type: ignore[list-item]
    v_out: list[np.ndarray] = [None] * len(shards)  # type: ignore[list-item]
    q_cols = num_heads * head_dim
    for group in groups:
        total = _ring_sum([shards[i] for i in group])[0, 0]
        for k, device in enumerate(group):
            part = total[k * users : (k + 1) * users]
            q_out[device] = np.ascontiguousarray(part[:, :q_cols].reshape(1, users, num_heads, head_dim))
            for out, lo in ((k_out, q_cols), (v_out, q_cols + head_dim)):
                padded = np.zeros((1, users, num_heads, head_dim), np.float32)
                padded[0, :, 0] = part[:, lo : lo + head_dim]
                out[device] = padded
    topology_out = _output_topology(tensor, tensor.device(), 1, PlacementShard(1))
    # ttnn's shard is (nh, hd): the op runs on the matmul's untilized (ROW_MAJOR) output; a TILE input (the
    # emulator's ring matmul is not modelled, see docs/emulator.md) keeps each user's heads in one padded tile
    shard = (
        (num_heads, head_dim) if tensor.layout is Layout.ROW_MAJOR else (-(-num_heads // 32) * 32, head_dim)
    )
    results = []
    for n, out in enumerate((q_out, k_out, v_out)):
        config = _with_spec(qkv_memory_config, CoreRangeSet(ordered[n * users : (n + 1) * users]), shard)
        results.append(output_like(op, out, tensor, memory_config=config, topology=topology_out))
    return tuple(results)


@ttnn_op("ttnn.experimental.all_gather_concat")
def all_gather_concat(
    input_tensor: Tensor,
    buffer_tensor: Tensor = _UNSET,  # type: ignore[assignment]
    dim: int = _UNSET,  # type: ignore[assignment]
    *,
    cluster_axis: int = _UNSET,  # type: ignore[assignment]
    mesh_device: MeshDevice | None = None,
    multi_device_global_semaphore=_UNSET,
    num_heads: int = _UNSET,  # type: ignore[assignment]
    memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Linear,
    num_links: int = 1,
    subdevice_id: SubDeviceId | None = None,
    use_noc1_only: bool = False,
) -> Tensor:
    """The Galaxy decode's SDPA output back to rows: all-gather ``[1, B, heads, hd]`` over ``cluster_axis`` on
    the users dim (``dim=1``), then concatenate the first ``num_heads`` heads: ``[1, 1, max(32, B·n), num_heads·hd]``
    (rows past the gathered users are zeros). TILE output in the input's dtype; default memory config: L1 width
    shards of ``(32, hd)`` on ``num_heads`` cores, row-major (ttnn's output spec). ``buffer_tensor`` is the fused
    op's intermediate (checked, not written); Linear topology only, as ttnn requires with ``cluster_axis``."""
    op = "ttnn.experimental.all_gather_concat"
    tensor = _input(op, input_tensor, dtypes=_FLOAT_DTYPES)
    mesh = tensor.device()
    expect(
        len(tensor.shape) == 4,
        op,
        "input_tensor rank",
        "4",
        f"{len(tensor.shape)} (shape {list(tensor.shape)})",
    )
    dim = _normalize_dim(op, dim, 4)
    expect(dim == 1, op, "dim", "1 (the users)", dim)
    axis = _resolve_axis(op, mesh, None if cluster_axis is _UNSET else cluster_axis)
    expect(axis is not None, op, "cluster_axis", "0 or 1", None)
    _check_mesh_device(op, mesh_device, mesh)
    _check_semaphores(op, "multi_device_global_semaphore", multi_device_global_semaphore, mesh, 1)
    _check_topology(op, topology, (Topology.Linear,))
    _check_tuning(op, num_links)
    check_memory_config(op, memory_config)
    _check_subdevice(op, "subdevice_id", subdevice_id, tensor.device())
    _check_flag(op, "use_noc1_only", use_noc1_only)
    buf = expect_tensor(op, "buffer_tensor", None if buffer_tensor is _UNSET else buffer_tensor)
    same_mesh(op, input_tensor=tensor, buffer_tensor=buf)
    seq, users, heads, head_dim = tensor.shape
    expect(seq == 1, op, "input_tensor.shape[0]", "1 (decode)", seq)
    expect(
        not isinstance(num_heads, bool) and isinstance(num_heads, int) and 1 <= num_heads <= heads,
        op,
        "num_heads",
        f"an int in [1, {heads}] (the input's heads)",
        repr(None if num_heads is _UNSET else num_heads),
    )
    groups = _groups(mesh, axis)
    shards = full_shards(tensor, op, groups)
    total_users = users * len(groups[0])
    rows = max(32, total_users)
    out: list[np.ndarray] = [None] * len(shards)  # type: ignore[list-item]
    for group in groups:
        gathered = np.concatenate([shards[i] for i in group], axis=1)[0, :, :num_heads]
        merged = np.zeros((1, 1, rows, num_heads * head_dim), np.float32)
        merged[0, 0, :total_users] = gathered.reshape(total_users, num_heads * head_dim)
        for i in group:
            out[i] = merged
    if memory_config is None:
        grid = mesh.compute_with_storage_grid_size()
        expect(
            head_dim % 32 == 0 and rows % 32 == 0 and num_heads <= grid.x * grid.y,
            op,
            "input_tensor.shape",
            f"a default output of one ({rows}, head_dim) tile-aligned shard per head on the {grid.x}x{grid.y} "
            "grid (head_dim and gathered users multiples of 32, at most one head a core; else pass "
            "memory_config)",
            f"{list(tensor.shape)} ({total_users} users gathered, {num_heads} heads)",
        )
        crs = num_cores_to_corerangeset(num_heads, CoreCoord(grid.x, grid.y), row_wise=True)
        memory_config = MemoryConfig(
            TensorMemoryLayout.WIDTH_SHARDED, BufferType.L1, ShardSpec(crs, (rows, head_dim))
        )
    topo = _output_topology(tensor, mesh, axis, PlacementReplicate())
    return output_like(op, out, tensor, layout=Layout.TILE, memory_config=memory_config, topology=topo)
