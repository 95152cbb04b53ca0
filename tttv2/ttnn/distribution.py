"""Host ↔ device movement and distribution over a mesh: mappers, composers, torch/numpy I/O, the tensor cache."""

from __future__ import annotations

import itertools
import json
import math
import os
import stat
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._tempfiles import STALE_TEMP_SECONDS, remove_stale_temps, temp_name, writer_gone
from ._remote import full_shards, full_stored_shards
from ._upcalls import provide
from .device import MeshCoordinate, MeshDevice, MeshShape
from .errors import ValidationError
from .memory import DRAM_MEMORY_CONFIG, MemoryConfig
from .numerics import check_integer_range
from .ops.data_movement import to_memory_config
from .placement import PlacementReplicate, PlacementShard, TensorTopology
from .storage import Bf16Storage, BlockFloatStorage
from .tensor import Tensor
from .types import DataType, Layout

__all__ = [
    "ConcatMesh2dToTensor",
    "ConcatMeshToTensor",
    "MeshComposerConfig",
    "MeshMapperConfig",
    "ReplicateTensorToMesh",
    "ShardTensor2dMesh",
    "ShardTensorToMesh",
    "aggregate_as_tensor",
    "as_tensor",
    "combine_device_tensors",
    "concat_mesh_to_tensor_composer",
    "create_mesh_composer",
    "create_mesh_mapper",
    "dump_tensor",
    "from_buffer",
    "from_device",
    "from_numpy",
    "from_torch",
    "get_device_tensors",
    "load_tensor",
    "replicate_tensor_to_mesh_mapper",
    "shard_tensor_to_mesh_mapper",
    "to_device",
    "to_numpy",
    "to_torch",
]


# --- mappers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeshMapperConfig:
    """One placement per mesh axis; ``mesh_shape_override`` distributes over a reshaped view of the mesh."""

    placements: tuple
    mesh_shape_override: MeshShape | None = None

    def __init__(
        self, placements: Sequence, mesh_shape_override: MeshShape | Sequence[int] | None = None
    ) -> None:
        placements = tuple(placements)
        for p in placements:
            if not isinstance(p, (PlacementShard, PlacementReplicate)):
                raise ValidationError(
                    f"MeshMapperConfig: placements must be PlacementShard/PlacementReplicate, got {p!r}"
                )
        if mesh_shape_override is not None and not isinstance(mesh_shape_override, MeshShape):
            mesh_shape_override = MeshShape(*mesh_shape_override)
        if mesh_shape_override is not None and len(mesh_shape_override) != len(placements):
            raise ValidationError(
                f"MeshMapperConfig: {len(placements)} placements for a {len(mesh_shape_override)}-D mesh_shape_override"
            )
        object.__setattr__(self, "placements", placements)
        object.__setattr__(self, "mesh_shape_override", mesh_shape_override)

    def __repr__(self) -> str:
        return f"MeshMapperConfig(placements={list(self.placements)!r}, mesh_shape_override={self.mesh_shape_override!r})"


class TensorToMesh:
    """Splits a host array into one array per device, in row-major device order."""

    def __init__(self, mesh_device: MeshDevice, placements: Sequence, distribution_shape: MeshShape) -> None:
        if not isinstance(mesh_device, MeshDevice):
            raise ValidationError(
                f"mesh mapper: mesh_device must be a MeshDevice, got {type(mesh_device).__name__}"
            )
        if distribution_shape.mesh_size() != mesh_device.get_num_devices():
            raise ValidationError(
                f"mesh mapper: distribution shape {distribution_shape} has {distribution_shape.mesh_size()} devices, "
                f"the mesh has {mesh_device.get_num_devices()}"
            )
        if len(placements) != len(distribution_shape):
            raise ValidationError(
                f"mesh mapper: {len(placements)} placements for a {len(distribution_shape)}-D distribution shape"
            )
        self.mesh_device = mesh_device
        self.placements = tuple(placements)
        self.distribution_shape = distribution_shape

    @property
    def topology(self) -> TensorTopology:
        return TensorTopology(self.distribution_shape, self.placements)

    def map(self, array: np.ndarray) -> list[np.ndarray]:
        """One array per device. The replicas of a piece are one array object (a replicated weight is held and
        packed once, and ops on replicated values compute them once); per-device writes copy their shard first,
        as for any shared shard."""
        pieces = [array]
        for axis, placement in enumerate(self.placements):
            count = self.distribution_shape[axis]
            nxt = []
            split: dict[
                int, list[np.ndarray]
            ] = {}  # the parts of each distinct piece (a replica is split once)
            for piece in pieces:
                if isinstance(placement, PlacementReplicate):
                    nxt.extend([piece] * count)
                    continue
                dim = placement.dim
                if not -piece.ndim <= dim < piece.ndim:
                    raise ValidationError(
                        f"mesh mapper: shard dim {dim} is out of range for a rank-{array.ndim} tensor {list(array.shape)}"
                    )
                size = piece.shape[dim]
                if size % count:
                    raise ValidationError(
                        f"mesh mapper: dim {dim} of size {size} (tensor {list(array.shape)}) does not divide into "
                        f"{count} shards over mesh axis {axis}"
                    )
                parts = split.get(id(piece))
                if parts is None:
                    parts = split[id(piece)] = np.split(piece, count, axis=dim)
                nxt.extend(parts)
            pieces = nxt
        done: dict[int, np.ndarray] = {}
        for p in pieces:
            if id(p) not in done:
                done[id(p)] = np.ascontiguousarray(p).reshape(p.shape)  # reshape: 0-d stays 0-d
        return [done[id(p)] for p in pieces]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(placements={list(self.placements)!r}, distribution_shape={self.distribution_shape!r})"


def _check_mesh(owner: str, mesh_device) -> MeshDevice:
    if not isinstance(mesh_device, MeshDevice):
        raise ValidationError(f"{owner}: mesh_device must be a MeshDevice, got {type(mesh_device).__name__}")
    return mesh_device


def _flat_shape(owner: str, mesh_device: MeshDevice) -> MeshShape:
    """All devices of the mesh as one axis."""
    return MeshShape(_check_mesh(owner, mesh_device).get_num_devices())


def ReplicateTensorToMesh(mesh_device: MeshDevice) -> TensorToMesh:
    return TensorToMesh(
        mesh_device, (PlacementReplicate(),), _flat_shape("ReplicateTensorToMesh", mesh_device)
    )


def replicate_tensor_to_mesh_mapper(mesh_device: MeshDevice) -> TensorToMesh:
    return ReplicateTensorToMesh(mesh_device)


def ShardTensorToMesh(mesh_device: MeshDevice, dim: int) -> TensorToMesh:
    """Split ``dim`` over all devices of the mesh, in row-major device order."""
    return TensorToMesh(mesh_device, (PlacementShard(dim),), _flat_shape("ShardTensorToMesh", mesh_device))


def shard_tensor_to_mesh_mapper(mesh_device: MeshDevice, dim: int) -> TensorToMesh:
    return ShardTensorToMesh(mesh_device, dim)


def ShardTensor2dMesh(
    mesh_device: MeshDevice, dims: Sequence[int | None], mesh_shape: Sequence[int] | MeshShape | None = None
) -> TensorToMesh:
    """Split ``dims[0]`` over mesh rows and ``dims[1]`` over mesh columns (None replicates along that axis)."""
    _check_mesh("ShardTensor2dMesh", mesh_device)
    dims = tuple(dims)
    if len(dims) != 2:
        raise ValidationError(f"ShardTensor2dMesh: dims must be a pair, got {dims!r}")
    shape = (
        MeshShape(*mesh_shape)
        if mesh_shape is not None and not isinstance(mesh_shape, MeshShape)
        else mesh_shape
    )
    shape = shape or mesh_device.shape
    if tuple(shape.as_2d()) != tuple(mesh_device.shape.as_2d()):
        raise ValidationError(
            f"ShardTensor2dMesh: mesh_shape {tuple(shape)} does not match the mesh {tuple(mesh_device.shape)}"
        )
    placements = tuple(PlacementReplicate() if d is None else PlacementShard(d) for d in dims)
    return TensorToMesh(mesh_device, placements, MeshShape(*shape.as_2d()))


def create_mesh_mapper(mesh_device: MeshDevice, config: MeshMapperConfig) -> TensorToMesh:
    _check_mesh("create_mesh_mapper", mesh_device)
    if not isinstance(config, MeshMapperConfig):
        raise ValidationError(f"create_mesh_mapper: config must be a MeshMapperConfig, got {config!r}")
    shape = config.mesh_shape_override or mesh_device.shape
    if config.mesh_shape_override is None and len(config.placements) != len(shape):
        raise ValidationError(
            f"create_mesh_mapper: {len(config.placements)} placements for the {len(shape)}-D mesh {tuple(shape)}"
        )
    return TensorToMesh(mesh_device, config.placements, shape)


# --- composers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeshComposerConfig:
    dims: tuple
    mesh_shape_override: MeshShape | None = None

    def __init__(
        self, dims: Sequence[int], mesh_shape_override: MeshShape | Sequence[int] | None = None
    ) -> None:
        if mesh_shape_override is not None and not isinstance(mesh_shape_override, MeshShape):
            mesh_shape_override = MeshShape(*mesh_shape_override)
        object.__setattr__(self, "dims", tuple(int(d) for d in dims))
        object.__setattr__(self, "mesh_shape_override", mesh_shape_override)


class MeshToTensor:
    """Concatenates per-device arrays back into one host array (mesh axis i concatenates along dims[i])."""

    def __init__(self, mesh_device: MeshDevice, dims: Sequence[int], shape: MeshShape) -> None:
        if len(dims) != len(shape):
            raise ValidationError(
                f"mesh composer: {len(dims)} dims for a {len(shape)}-D mesh shape {tuple(shape)}"
            )
        self.mesh_device = mesh_device
        self.dims = tuple(dims)
        self.shape = shape

    def compose(self, shards: list[np.ndarray]) -> np.ndarray:
        if len(shards) != self.shape.mesh_size():
            raise ValidationError(
                f"mesh composer: expected {self.shape.mesh_size()} device shards for mesh {tuple(self.shape)}, got {len(shards)}"
            )
        pieces = list(shards)
        for axis in reversed(range(len(self.shape))):
            count = self.shape[axis]
            dim = self.dims[axis]
            pieces = [np.concatenate(pieces[i : i + count], axis=dim) for i in range(0, len(pieces), count)]
        return pieces[0]


def ConcatMeshToTensor(mesh_device: MeshDevice, dim: int) -> MeshToTensor:
    return MeshToTensor(mesh_device, (dim,), _flat_shape("ConcatMeshToTensor", mesh_device))


def concat_mesh_to_tensor_composer(mesh_device: MeshDevice, dim: int) -> MeshToTensor:
    return ConcatMeshToTensor(mesh_device, dim)


def ConcatMesh2dToTensor(
    mesh_device: MeshDevice, dims: Sequence[int], mesh_shape: Sequence[int] | MeshShape | None = None
) -> MeshToTensor:
    """Concatenate mesh rows along ``dims[0]`` and mesh columns along ``dims[1]``."""
    _check_mesh("ConcatMesh2dToTensor", mesh_device)
    shape = (
        mesh_shape
        if isinstance(mesh_shape, MeshShape)
        else MeshShape(*(mesh_shape or tuple(mesh_device.shape)))
    )
    dims = tuple(dims)
    if len(dims) != 2:
        raise ValidationError(f"ConcatMesh2dToTensor: dims must be a pair, got {dims!r}")
    if dims[0] == dims[1]:
        raise ValidationError(f"ConcatMesh2dToTensor: the two dims must differ, got {dims!r}")
    return MeshToTensor(mesh_device, dims, shape)


def create_mesh_composer(mesh_device: MeshDevice, config: MeshComposerConfig) -> MeshToTensor:
    _check_mesh("create_mesh_composer", mesh_device)
    if not isinstance(config, MeshComposerConfig):
        raise ValidationError(f"create_mesh_composer: config must be a MeshComposerConfig, got {config!r}")
    shape = config.mesh_shape_override or mesh_device.shape
    return MeshToTensor(mesh_device, config.dims, shape)


# --- host ↔ device ------------------------------------------------------------------------------------------------

_TORCH_TO_TTNN = {
    "torch.bfloat16": DataType.BFLOAT16,
    "torch.float32": DataType.FLOAT32,
    "torch.float16": DataType.BFLOAT16,
    "torch.float64": DataType.FLOAT32,
    "torch.int32": DataType.INT32,
    "torch.int64": DataType.INT32,
    "torch.uint8": DataType.UINT8,
    "torch.int16": DataType.UINT16,
    "torch.bool": DataType.UINT8,
}
_NUMPY_TO_TTNN = {
    "float32": DataType.FLOAT32,
    "float64": DataType.FLOAT32,
    "float16": DataType.BFLOAT16,
    "bfloat16": DataType.BFLOAT16,
    "int32": DataType.INT32,
    "int64": DataType.INT32,
    "uint32": DataType.UINT32,
    "uint16": DataType.UINT16,
    "uint8": DataType.UINT8,
    "bool": DataType.UINT8,
}


def _host_array_from_torch(tensor) -> np.ndarray:
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise ValidationError(f"ttnn.from_torch: tensor must be a torch.Tensor, got {type(tensor).__name__}")
    t = tensor.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.numpy()


def _build(
    op: str,
    array: np.ndarray,
    dtype: DataType | None,
    inferred: DataType,
    layout: Layout | None,
    device: MeshDevice | None,
    memory_config: MemoryConfig | None,
    mesh_mapper: TensorToMesh | None,
    pad_value: float | None = None,
) -> Tensor:
    dtype = inferred if dtype is None else dtype
    if not isinstance(dtype, DataType):
        raise ValidationError(f"{op}: dtype must be a ttnn.DataType, got {dtype!r}")
    check_integer_range(array, dtype, f"{op}: tensor")
    layout = Layout.ROW_MAJOR if layout is None else layout
    if not isinstance(layout, Layout):
        raise ValidationError(f"{op}: layout must be a ttnn.Layout, got {layout!r}")
    if dtype.is_block_float and layout is not Layout.TILE:
        raise ValidationError(f"{op}: dtype {dtype} requires layout TILE_LAYOUT, got {layout}")
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise ValidationError(f"{op}: memory_config must be a ttnn.MemoryConfig, got {memory_config!r}")
    if device is not None and not isinstance(device, MeshDevice):
        raise ValidationError(f"{op}: device must be a ttnn.MeshDevice, got {type(device).__name__}")
    if mesh_mapper is not None:
        if not isinstance(mesh_mapper, TensorToMesh):
            raise ValidationError(f"{op}: mesh_mapper must be a ttnn mesh mapper, got {mesh_mapper!r}")
        if device is not None and mesh_mapper.mesh_device.get_num_devices() != device.get_num_devices():
            raise ValidationError(
                f"{op}: mesh_mapper was made for {mesh_mapper.mesh_device} but device is {device}"
            )
        shards = mesh_mapper.map(array)
        topology = mesh_mapper.topology
    else:
        shards = [np.ascontiguousarray(array).reshape(array.shape)]  # reshape: 0-d stays 0-d
        topology = None
        if device is not None:
            topology = TensorTopology.replicated(device.shape)
            shards = shards * device.get_num_devices()
    if device is not None:
        # Tensor() quantises each distinct shard array once, so replicated shards stay one shared array
        return Tensor(shards, dtype, layout, device, memory_config or DRAM_MEMORY_CONFIG, topology, what=op)
    return Tensor(shards, dtype, layout, None, None, topology if len(shards) > 1 else None, what=op)


def from_torch(
    tensor,
    dtype: DataType | None = None,
    *,
    layout: Layout | None = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
    mesh_mapper: TensorToMesh | None = None,
    pad_value: float | None = None,
    tile=None,
    cq_id: int | None = None,
    spec=None,
) -> Tensor:
    """torch.Tensor → ttnn.Tensor (host, or on ``device`` distributed by ``mesh_mapper``)."""
    array = _host_array_from_torch(tensor)
    inferred = _TORCH_TO_TTNN.get(str(tensor.dtype))
    if inferred is None and dtype is None:
        raise ValidationError(
            f"ttnn.from_torch: torch dtype {tensor.dtype} has no ttnn equivalent; pass dtype="
        )
    if array.dtype.kind == "c":
        raise ValidationError(
            f"ttnn.from_torch: tensor: expected a real (not complex) tensor, got {tensor.dtype}"
        )
    return _build(
        "ttnn.from_torch", array, dtype, inferred, layout, device, memory_config, mesh_mapper, pad_value
    )


def from_numpy(
    array: np.ndarray,
    dtype: DataType | None = None,
    *,
    layout: Layout | None = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
    mesh_mapper: TensorToMesh | None = None,
) -> Tensor:
    """numpy.ndarray → ttnn.Tensor."""
    if not isinstance(array, np.ndarray):
        raise ValidationError(f"ttnn.from_numpy: array must be a numpy.ndarray, got {type(array).__name__}")
    inferred = _NUMPY_TO_TTNN.get(str(array.dtype))
    if inferred is None and dtype is None:
        raise ValidationError(
            f"ttnn.from_numpy: numpy dtype {array.dtype} has no ttnn equivalent; pass dtype="
        )
    if array.dtype.name in ("bfloat16", "float16", "float64"):
        array = array.astype(np.float32)
    if array.dtype.kind not in "biuf":
        raise ValidationError(
            f"ttnn.from_numpy: array: expected a numeric array (bool, integer or float), got dtype {array.dtype}"
        )
    return _build("ttnn.from_numpy", array, dtype, inferred, layout, device, memory_config, mesh_mapper)


def from_buffer(
    buffer,
    shape,
    dtype: DataType,
    device: MeshDevice | None = None,
    layout: Layout = Layout.ROW_MAJOR,
    memory_config: MemoryConfig | None = None,
) -> Tensor:
    """A flat sequence of Python numbers → a tensor of ``shape`` and ``dtype`` (ttnn's ``from_buffer``, which
    TTML's generation loops use to upload token ids)."""
    op = "ttnn.from_buffer"
    if not isinstance(dtype, DataType):
        raise ValidationError(f"{op}: dtype must be a ttnn.DataType, got {dtype!r}")
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise ValidationError(f"{op}: shape must be a sequence of ints, got {shape!r}") from None
    values = np.asarray(buffer, dtype=np.float32 if dtype.is_float else dtype.numpy_dtype)
    if values.ndim != 1 or values.size != math.prod(dims):
        raise ValidationError(
            f"{op}: buffer must be a flat sequence of {math.prod(dims)} values for shape {dims}, "
            f"got {values.size} values of shape {list(values.shape)}"
        )
    return from_numpy(values.reshape(dims), dtype, layout=layout, device=device, memory_config=memory_config)


def _compose(tensor: Tensor, mesh_composer: MeshToTensor | None, op: str) -> np.ndarray:
    shards = full_shards(tensor, op)  # on a mesh spread over ranks: every rank gets every device's values
    if mesh_composer is not None:
        if not isinstance(mesh_composer, MeshToTensor):
            raise ValidationError(f"{op}: mesh_composer must be a ttnn mesh composer, got {mesh_composer!r}")
        return mesh_composer.compose(shards)
    if len(shards) == 1:
        return shards[0]
    topology = tensor.tensor_topology()
    if topology is not None and all(isinstance(p, PlacementReplicate) for p in topology.placements()):
        return shards[0]
    raise ValidationError(
        f"{op}: the tensor is distributed over {len(shards)} devices ({topology}); pass mesh_composer= "
        f"(e.g. ttnn.ConcatMeshToTensor(mesh_device, dim=...))"
    )


def to_numpy(tensor: Tensor, *, mesh_composer: MeshToTensor | None = None, dtype=None) -> np.ndarray:
    """ttnn.Tensor → numpy array (float32 for float types); a copy."""
    if not isinstance(tensor, Tensor):
        raise ValidationError(f"ttnn.to_numpy: expected a ttnn.Tensor, got {type(tensor).__name__}")
    out = np.array(_compose(tensor, mesh_composer, "ttnn.to_numpy"), copy=True)
    return out if dtype is None else out.astype(dtype)


def to_torch(
    tensor: Tensor, dtype=None, *, mesh_composer: MeshToTensor | None = None, device=None, cq_id=None
):
    """ttnn.Tensor → torch.Tensor (bfloat16 tensors come back as torch.bfloat16, block floats as float32)."""
    import torch

    if not isinstance(tensor, Tensor):
        raise ValidationError(f"ttnn.to_torch: expected a ttnn.Tensor, got {type(tensor).__name__}")
    array = np.array(_compose(tensor, mesh_composer, "ttnn.to_torch"), copy=True)
    if tensor.dtype is DataType.UINT32:
        array = array.astype(np.int64)
    elif tensor.dtype is DataType.UINT16:
        array = array.astype(np.int32)
    out = torch.from_numpy(array)
    if tensor.dtype is DataType.BFLOAT16:
        out = out.to(torch.bfloat16)
    if dtype is not None:
        out = out.to(dtype)
    return out


def to_device(
    tensor: Tensor, device: MeshDevice, memory_config: MemoryConfig | None = None, cq_id: int = 0
) -> Tensor:
    """Host tensor → device. A single host buffer is replicated onto every device of the mesh."""
    op = "ttnn.to_device"
    if not isinstance(tensor, Tensor):
        raise ValidationError(f"{op}: expected a ttnn.Tensor, got {type(tensor).__name__}")
    if not isinstance(device, MeshDevice):
        raise ValidationError(f"{op}: device must be a ttnn.MeshDevice, got {type(device).__name__}")
    shards = tensor.stored_shards(op)
    if tensor.device() is not None:
        if tensor.device() is device and (memory_config is None or memory_config == tensor.memory_config()):
            return tensor

        if tensor.device() is not device:
            raise ValidationError(f"{op}: the tensor is already on {tensor.device()}, not {device}")
        return to_memory_config(tensor, memory_config)
    n = device.get_num_devices()
    topology = tensor.tensor_topology()
    if len(shards) == 1:
        shards = shards * n
        topology = TensorTopology.replicated(device.shape)
    elif len(shards) != n:
        raise ValidationError(
            f"{op}: the host tensor has {len(shards)} device shards, {device} has {n} devices"
        )
    return Tensor(
        shards,
        tensor.dtype,
        tensor.layout,
        device,
        memory_config or DRAM_MEMORY_CONFIG,
        topology,
        padded_shape=tensor._padded_shape,
        what=op,
        quantized=True,
    )


def from_device(tensor: Tensor, blocking: bool = True, cq_id: int = 0) -> Tensor:
    """Device tensor → host tensor (one host buffer per device shard)."""
    op = "ttnn.from_device"
    if not isinstance(tensor, Tensor):
        raise ValidationError(f"{op}: expected a ttnn.Tensor, got {type(tensor).__name__}")
    shards = [s.copy() for s in full_stored_shards(tensor, op)]
    topology = tensor.tensor_topology() if len(shards) > 1 else None
    return Tensor(
        shards,
        tensor.dtype,
        tensor.layout,
        None,
        None,
        topology,
        padded_shape=tensor._padded_shape,
        quantized=True,
    )


# --- per-device views ---------------------------------------------------------------------------------------------


def _device_views(mesh: MeshDevice) -> list[MeshDevice]:
    views = getattr(mesh, "_device_views", None)
    if views is None or any(not v.is_open for v in views):
        rows, cols = mesh.shape.as_2d()
        views = [
            mesh.create_submesh(MeshShape(1, 1), MeshCoordinate(r, c))
            for r in range(rows)
            for c in range(cols)
        ]
        mesh._device_views = views
    return views


def get_device_tensors(tensor: Tensor) -> list[Tensor]:
    """One single-device tensor per device of the mesh (views sharing the device buffers)."""
    op = "ttnn.get_device_tensors"
    shards = tensor.stored_shards(op)
    mesh = tensor.device()
    if mesh is None:
        return [Tensor([s], tensor.dtype, tensor.layout, None, quantized=True) for s in shards]
    views = [
        Tensor(
            [s],
            tensor.dtype,
            tensor.layout,
            view,
            tensor.memory_config(),
            quantized=True,
            view_of=tensor,
            what=op,
        )
        for s, view in zip(shards, _device_views(mesh))
    ]
    for i, v in enumerate(views):
        v._view_index = i  # in-place ops on the view (KV-cache fills) write into the owner's shard i
    return views


def combine_device_tensors(tensors: Sequence[Tensor]) -> Tensor:
    """Inverse of :func:`get_device_tensors`: the per-device tensors of one mesh as one multi-device tensor.

    As in ttnn (``ttnn/cpp/ttnn/distributed/api.cpp``): every shard must come from the same mesh, the shards are
    placed by their device's mesh coordinate (sorted, whatever the list order), a coordinate given twice is an
    error, the list may cover only part of the mesh (Galaxy attention prefill combines the tensors of one mesh
    column), and the result's topology is ttnn's: a 1-D distribution over the ``len(tensors)`` shards, sharded
    on dim 0 (``TensorTopology(MeshShape(n), [PlacementShard(0)])``).

    One difference, for a list that covers only part of the mesh: ttnn keeps the whole mesh as the tensor's
    device and records which coordinates hold data; the emulator's tensors hold a shard on every device of their
    device, so ``device()`` is a view of the mesh made of exactly those devices (the rectangle they form, else a
    1×n line) and not the mesh itself. Ops that take it together with tensors on the whole mesh (``fill_cache``,
    ``paged_fill_cache``) run on those devices only, as ttnn runs an op on the smallest coordinate set of its
    inputs.
    """
    op = "ttnn.combine_device_tensors"
    tensors = list(tensors)
    if not tensors:
        raise ValidationError(f"{op}: tensors: expected a non-empty list, got []")
    first = tensors[0]
    for t in tensors:
        if not isinstance(t, Tensor):
            raise ValidationError(f"{op}: tensors: expected ttnn.Tensor items, got {type(t).__name__}")
        if t.shape != first.shape or t.dtype is not first.dtype or t.layout is not first.layout:
            raise ValidationError(
                f"{op}: tensors: expected one shape/dtype/layout, got {list(first.shape)} {first.dtype.name} and "
                f"{list(t.shape)} {t.dtype.name}"
            )
    shards = [t.stored_shards(op)[0] for t in tensors]
    devices = [t.device() for t in tensors]
    if all(d is None for d in devices):
        return Tensor(
            shards,
            first.dtype,
            first.layout,
            None,
            None,
            TensorTopology(MeshShape(len(shards)), (PlacementShard(0),)),
            quantized=True,
        )
    parent = devices[0]._parent if devices[0] is not None else None
    if parent is None or any(
        d is None or d._parent is not parent or d.get_num_devices() != 1 for d in devices
    ):
        raise ValidationError(
            f"{op}: tensors: expected single-device tensors of one mesh (from ttnn.get_device_tensors)"
        )
    mesh_devices = parent.get_devices()
    placed = sorted(
        zip((mesh_devices.index(d.get_devices()[0]) for d in devices), shards), key=lambda p: p[0]
    )
    indices = [i for i, _ in placed]
    for a, b in itertools.pairwise(indices):
        if a == b:
            raise ValidationError(
                f"{op}: tensors: two tensors of the device at mesh coordinate {_coordinate(parent, a)}"
            )
    owner = parent if len(indices) == parent.get_num_devices() else _devices_view(parent, indices)
    return Tensor(
        [shard for _, shard in placed],
        first.dtype,
        first.layout,
        owner,
        first.memory_config(),
        TensorTopology(MeshShape(len(placed)), (PlacementShard(0),)),
        what=op,
        quantized=True,
    )


def aggregate_as_tensor(tensors: Sequence[Tensor]) -> Tensor:
    """The older name of :func:`combine_device_tensors` (ttnn's distributed API of 2024), which tt-metal's
    Falcon-40B T3000 MLP calls to hand ``reduce_scatter`` the per-device tensors of ``get_device_tensors``."""
    return combine_device_tensors(tensors)


def _coordinate(mesh: MeshDevice, index: int) -> tuple[int, int]:
    return divmod(index, mesh.shape.as_2d()[1])


def _devices_view(mesh: MeshDevice, indices: list[int]) -> MeshDevice:
    """A view of ``mesh`` made of the devices at ``indices`` (row-major, sorted), one per set of devices: their
    rectangle's shape when they fill one, else 1×n."""
    views = mesh.__dict__.setdefault("_combined_views", {})
    key = tuple(indices)
    view = views.get(key)
    if view is None or not view.is_open:
        coords = [_coordinate(mesh, i) for i in indices]
        rows = sorted({r for r, _ in coords})
        cols = sorted({c for _, c in coords})
        rectangle = (
            len(rows) * len(cols) == len(coords)
            and rows == list(range(rows[0], rows[-1] + 1))
            and cols == list(range(cols[0], cols[-1] + 1))
        )
        shape = MeshShape(len(rows), len(cols)) if rectangle else MeshShape(1, len(indices))
        devices = [mesh.get_devices()[i] for i in indices]
        view = MeshDevice(shape, arch=mesh.arch(), devices=devices, parent=mesh)
        mesh._submeshes.append(view)
        views[key] = view
    return view


# --- serialisation and the tensor cache ---------------------------------------------------------------------------

_FORMAT = "tttv2.tensorbin/1"


# one naming pattern and staleness rule for every writer of the project (tttv2/_tempfiles.py)
_STALE_TEMP_SECONDS = STALE_TEMP_SECONDS
_temp_name = temp_name
_writer_gone = writer_gone


def _remove_stale_temps(path: Path) -> None:
    """Delete the temporary files of ``path`` left by writers that were killed mid-write: those whose process
    (on this host) no longer exists, and any older than a day."""
    remove_stale_temps(path.parent, path.name)


def _atomic_write(path: Path, writer) -> None:
    """Write through a temporary file renamed over ``path``: readers see the old file or the new one, never a
    part. The file gets the mode any new file of the user gets (0666 minus the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    tmp = _temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def dump_tensor(file_name: str | os.PathLike, tensor: Tensor, distribute: bool = False) -> None:
    """Write a tensor (all shards, block floats packed) to one file, atomically, with the umask's mode;
    temporary files that killed writers left next to it are removed."""
    op = "ttnn.dump_tensor"
    if not isinstance(tensor, Tensor):
        raise ValidationError(f"{op}: expected a ttnn.Tensor, got {type(tensor).__name__}")
    shards = full_stored_shards(tensor, op)
    topology = tensor.tensor_topology()
    meta = {
        "format": _FORMAT,
        "dtype": tensor.dtype.name,
        "layout": tensor.layout.name,
        "shape": list(tensor.shape),
        "num_shards": len(shards),
        "distribution_shape": list(topology.distribution_shape) if topology else None,
        "placements": [repr(p) for p in topology.placements()] if topology else None,
    }
    arrays = {}
    for i, shard in enumerate(shards):
        if isinstance(shard, BlockFloatStorage):  # the file keeps one sign|magnitude byte per value
            arrays[f"shard{i}_exp"] = shard.exponents
            arrays[f"shard{i}_mant"] = shard.sign_magnitude()
        elif isinstance(shard, Bf16Storage):
            arrays[f"shard{i}"] = shard.to_float32()
        else:
            arrays[f"shard{i}"] = shard

    def writer(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr("meta.json", json.dumps(meta))
            for name, arr in arrays.items():
                with zf.open(f"{name}.npy", "w") as out:
                    np.lib.format.write_array(out, np.ascontiguousarray(arr), allow_pickle=False)

    _atomic_write(Path(file_name), writer)


def _parse_placement(text: str):
    if text == "PlacementReplicate()":
        return PlacementReplicate()
    if text.startswith("PlacementShard(") and text.endswith(")"):
        return PlacementShard(int(text[len("PlacementShard(") : -1]))
    raise ValidationError(f"ttnn.load_tensor: unknown placement {text!r}")


def load_tensor(file_name: str | os.PathLike, device: MeshDevice | None = None) -> Tensor:
    """Read a tensor written by :func:`dump_tensor`; onto ``device`` if given."""
    op = "ttnn.load_tensor"
    path = Path(file_name)
    stream = _open_regular(op, "file_name", path)
    if stream is None:
        raise ValidationError(f"{op}: file_name: no such file {str(path)!r}")
    with stream:
        host = _read_tensor(op, stream, path)
    return host if device is None else to_device(host, device)


def _open_regular(op: str, arg: str, path: Path):
    """``path`` opened for reading, or None when it does not exist. Anything but a regular file (a directory,
    a FIFO, a device) raises at once: the file is opened without waiting for a writer (a FIFO would block the
    open forever) and checked on the open descriptor, so there is no window between the check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValidationError(f"{op}: {arg}: cannot read the file {str(path)!r}: {exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValidationError(f"{op}: {arg}: {str(path)!r} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


_READ_CHUNK = 1 << 20


def _read_npy(zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """One ``.npy`` member, verified end to end: the header must describe exactly the bytes the member holds
    (a flipped shape or dtype is caught before anything is allocated), and the member is read to its end, so
    the zip CRC of every byte is checked (``zipfile`` checks it only there)."""
    info = zf.getinfo(name)
    with zf.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
        if dtype.hasobject:
            raise ValueError(f"{name}: object arrays are never written to tensor files")
        data_bytes = math.prod(shape) * dtype.itemsize
        if member.tell() + data_bytes != info.file_size:
            raise ValueError(
                f"{name}: the header describes {data_bytes} bytes of data, the member holds "
                f"{info.file_size - member.tell()}"
            )
        array = np.empty(shape[::-1] if fortran else shape, dtype)
        view = memoryview(array.reshape(-1).view(np.uint8))
        filled = 0
        while filled < data_bytes:  # 1 MiB at a time: copies that stay in cache (one big read is 4x slower)
            chunk = member.read(min(_READ_CHUNK, data_bytes - filled))
            if not chunk:
                raise ValueError(f"{name}: the data ends after {filled} of {data_bytes} bytes")
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
        member.read()  # reaching the member's end is what makes zipfile check its CRC
    return array.T if fortran else array


def _read_tensor(op: str, stream, path: Path) -> Tensor:
    """The host tensor in an open :func:`dump_tensor` file, verified end to end (every member's CRC, every
    array's header against its size): a damaged file raises naming it, never loads as another tensor."""
    try:
        with zipfile.ZipFile(stream) as zf:
            meta = json.loads(zf.read("meta.json"))
            if meta.get("format") != _FORMAT:
                raise ValidationError(f"{op}: {path} is not a {_FORMAT} file (format {meta.get('format')!r})")
            dtype = DataType[meta["dtype"]]
            layout = Layout[meta["layout"]]
            shape = tuple(meta["shape"])
            shards = []
            for i in range(meta["num_shards"]):
                if dtype.is_block_float:
                    exps = _read_npy(zf, f"shard{i}_exp.npy")
                    mants = _read_npy(zf, f"shard{i}_mant.npy")
                    shards.append(BlockFloatStorage.from_packed(dtype, shape, exps, mants))
                else:
                    shards.append(_read_npy(zf, f"shard{i}.npy"))
            topology = None
            if meta["distribution_shape"] is not None:
                topology = TensorTopology(
                    MeshShape(*meta["distribution_shape"]),
                    tuple(_parse_placement(p) for p in meta["placements"]),
                )
            return Tensor(
                shards, dtype, layout, None, None, topology if len(shards) > 1 else None, quantized=True
            )
    except ValidationError as exc:
        if str(path) in str(exc):
            raise
        raise ValidationError(f"{op}: {path} is not a readable tensor file: {exc}") from exc
    except MemoryError:
        raise
    except Exception as exc:  # any damage: zip structure, CRC, JSON, .npy header, shapes that do not fit
        raise ValidationError(
            f"{op}: {path} is not a readable tensor file: {type(exc).__name__}: {exc}"
        ) from exc


def _load_cached(path: Path) -> Tensor | None:
    """The cached host tensor, or None when there is no cache file (never written, or deleted meanwhile: the
    file is opened once, so there is no window between a check and the read)."""
    stream = _open_regular("ttnn.as_tensor", "cache_file_name", path)
    if stream is None:
        return None
    with stream:
        return _read_tensor("ttnn.as_tensor", stream, path)


def as_tensor(
    tensor,
    dtype: DataType | None = None,
    *,
    layout: Layout | None = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
    mesh_mapper: TensorToMesh | None = None,
    cache_file_name: str | os.PathLike | None = None,
    preprocess=None,
    use_device_tilizer: bool = False,
) -> Tensor:
    """Like :func:`from_torch`, with an on-disk cache: a hit loads the file and never touches ``tensor``.

    A missing cache file (also one deleted by someone else while this call runs) is computed from ``tensor``
    and written atomically (see :func:`dump_tensor`); concurrent writers of one cache file each write a
    complete file and the last rename wins.
    """
    if cache_file_name is None:
        if preprocess is not None:
            tensor = preprocess(tensor)
        return from_torch(
            tensor, dtype, layout=layout, device=device, memory_config=memory_config, mesh_mapper=mesh_mapper
        )
    layout_name = (layout or Layout.ROW_MAJOR).name
    dtype_name = dtype.name if isinstance(dtype, DataType) else "auto"
    mapper_tag = (
        ""
        if mesh_mapper is None
        else f"_{type(mesh_mapper).__name__}_{'-'.join(repr(p) for p in mesh_mapper.placements)}"
    )
    path = Path(f"{os.fspath(cache_file_name)}_dtype_{dtype_name}_layout_{layout_name}{mapper_tag}.tensorbin")
    host = _load_cached(path)
    if host is None:
        if tensor is None:
            raise ValidationError(
                f"ttnn.as_tensor: tensor is None and the cache file {str(path)!r} does not exist"
            )
        if preprocess is not None:
            tensor = preprocess(tensor)
        host = from_torch(
            tensor, dtype, layout=layout, mesh_mapper=None if mesh_mapper is None else mesh_mapper
        )
        dump_tensor(path, host)
    if device is None:
        return host
    return to_device(host, device, memory_config=memory_config)


# Tensor.to / .cpu / .to_torch / .to_numpy / .item call these (tensor sits below this module)
provide(to_device=to_device, from_device=from_device, to_torch=to_torch, to_numpy=to_numpy, compose=_compose)
