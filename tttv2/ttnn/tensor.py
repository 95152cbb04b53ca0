"""ttnn.Tensor on the emulator: one numpy shard per device of a mesh (or host buffers), plus metadata.

A device tensor's ``shape`` is the shape of each device's shard (as in ttnn). Shards hold the logical
values only; the tile padding of TILE layout is implied (``padded_shape``) and accounted in device memory.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import weakref
from collections.abc import Sequence

import numpy as np

from . import storage as _storage
from ._remote import remote_shard
from ._upcalls import upcall
from .device import ARCH_SPECS, MeshDevice
from .errors import ValidationError
from .memory import (
    DRAM_MEMORY_CONFIG,
    CoreGrid,
    CoreRangeSet,
    MemoryConfig,
    ShardSpec,
    num_cores_to_corerangeset,
)
from .numerics import store
from .placement import TensorTopology
from .types import TILE_SIZE, BufferType, DataType, Layout, StorageType, TensorMemoryLayout

__all__ = ["Shape", "Tensor"]


class Shape(tuple):
    """A tensor shape: a tuple that also compares equal to lists and prints like ttnn's."""

    def __new__(cls, dims: Sequence[int] = (), padded_shape: Sequence[int] | None = None):
        """``padded_shape``: the older two-argument form, ``ttnn.Shape(logical, padded)`` (the Llama-2-70B T3000
        attention reshapes its fused QKV to one). The emulator pads by layout alone, so the padded shape must be
        the logical shape itself or its tile padding; the shape is the logical one."""
        shape = super().__new__(cls, (int(d) for d in dims))
        if padded_shape is not None:
            padded = tuple(int(d) for d in padded_shape)
            if padded not in (tuple(shape), tuple(padded_shape_of(shape, Layout.TILE))):
                raise ValidationError(
                    f"ttnn.Shape: padded_shape {list(padded)} must be {list(shape)} or its tile padding "
                    f"{list(padded_shape_of(shape, Layout.TILE))} (the emulator pads by layout only)"
                )
        return shape

    @property
    def rank(self) -> int:
        return len(self)

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = tuple.__hash__

    def __getitem__(self, index):
        result = super().__getitem__(index)
        return Shape(result) if isinstance(index, slice) else result

    def with_tile_padding(self) -> Shape:
        return padded_shape_of(self, Layout.TILE)

    def to_rank(self, rank: int) -> Shape:
        if rank < len(self):
            raise ValidationError(f"Shape.to_rank: cannot reduce {self} to rank {rank}")
        return Shape((1,) * (rank - len(self)) + tuple(self))

    def __repr__(self) -> str:
        return f"Shape([{', '.join(str(d) for d in self)}])"

    __str__ = __repr__


def padded_shape_of(shape: Sequence[int], layout: Layout) -> Shape:
    """TILE layout pads the last two dims up to multiples of 32; ROW_MAJOR does not pad."""
    dims = list(shape)
    if layout is Layout.TILE:
        for axis in (-1, -2):
            if len(dims) >= -axis:
                dims[axis] = -(-dims[axis] // TILE_SIZE) * TILE_SIZE
    return Shape(dims)


def device_bytes(shape: Sequence[int], dtype: DataType, layout: Layout, memory_config: MemoryConfig) -> int:
    """Bytes one device shard occupies: sharded tensors take a whole shard on every core of the grid."""
    spec = memory_config.shard_spec
    if memory_config.is_sharded() and spec is not None:
        per_core = spec.shape[0] * spec.shape[1]
        return math.ceil(per_core * dtype.element_bytes(layout)) * spec.num_cores()
    return _interleaved_bytes(tuple(shape), dtype, layout)


@functools.lru_cache(maxsize=4096)
def _interleaved_bytes(shape: tuple[int, ...], dtype: DataType, layout: Layout) -> int:
    """:func:`device_bytes` of an interleaved tensor; cached: every op output asks it, for a handful of shapes."""
    padded = padded_shape_of(shape, layout)
    volume = math.prod(padded) if padded else 1
    if layout is Layout.TILE and len(padded) < 2:
        volume = TILE_SIZE * (padded[-1] if padded else TILE_SIZE)
    return math.ceil(volume * dtype.element_bytes(layout))


_addresses = itertools.count(0x10000, 0x400)


class _Allocation:
    """Bytes held on each device of a mesh; released once, by deallocate() or garbage collection."""

    __slots__ = ("__weakref__", "address", "allocators", "nbytes", "released")

    def __init__(self, mesh: MeshDevice, buffer_type: BufferType, nbytes: int, what: str) -> None:
        self.address = next(_addresses)  # a stand-in for the buffer's device address: unique per allocation
        self.allocators = _allocators(mesh, buffer_type)
        self.nbytes = nbytes
        self.released = False
        done = []
        try:
            for allocator, device_id in self.allocators:
                allocator.allocate(nbytes, what, device_id)
                done.append(allocator)
        except Exception:
            for allocator in done:
                allocator.release(nbytes)
            raise

    def release(self) -> None:
        if not self.released:
            self.released = True
            nbytes = self.nbytes
            for allocator, _device_id in self.allocators:
                allocator.release(nbytes)


# (id of the mesh, buffer type) -> (the mesh, its devices' allocators of that type with the device ids): a
# device's allocators never change, and looking them up per device per tensor (an enum-keyed dict) was a
# measurable part of building a decode step's outputs on 32 devices
_ALLOCATORS: dict[tuple[int, BufferType], tuple[MeshDevice, tuple]] = {}
_ALLOCATORS_MAX = 256


def _allocators(mesh: MeshDevice, buffer_type: BufferType) -> tuple:
    key = (id(mesh), buffer_type)
    known = _ALLOCATORS.get(key)
    if known is None or known[0] is not mesh:
        if len(_ALLOCATORS) >= _ALLOCATORS_MAX:
            _ALLOCATORS.clear()  # meshes opened and closed by the hundred (tests): start again
        known = _ALLOCATORS[key] = (
            mesh,
            tuple((dev.allocators[buffer_type], dev.id()) for dev in mesh.get_devices()),
        )
    return known[1]


def _release(allocation: _Allocation) -> None:
    allocation.release()


class _VersionCounter:
    """In-place writes a tensor's values have had, and the op of the last one (autograd compares it with the
    version a backward rule saved). ``ttnn.view`` results share their input's counter: they alias its buffer."""

    __slots__ = ("count", "last_op")

    def __init__(self) -> None:
        self.count = 0
        self.last_op: str | None = None


def _base_chain(array) -> list:
    chain = []
    while isinstance(array, np.ndarray):
        chain.append(array)
        array = array.base
    if array is not None:
        chain.append(array)  # a buffer that is not an ndarray (bytes, mmap, a torch tensor's memory)
    return chain


def _sealed_if_private(stored: np.ndarray, source) -> np.ndarray:
    """Make every array under a freshly quantised shard read-only when quantising made all of them (none is the
    caller's data): nothing can then change the shard's values, which ``numerics`` relies on to remember facts
    about a weight (``explicit_bits_used``) across ops."""
    theirs = {id(a) for a in _base_chain(source)}
    chain = _base_chain(stored)
    if all(isinstance(a, np.ndarray) and id(a) not in theirs for a in chain):
        for a in chain:
            a.flags.writeable = False
    return stored


def _stored(values, dtype: DataType, quantized: bool):
    """The shard a tensor of ``dtype`` holds for ``values`` (already quantised ones are kept as they are)."""
    if type(values) is np.ndarray:
        if dtype.is_packed and values.dtype == np.float32 and values.flags.writeable:
            # what store() does for an array no storage unpacked (those are read-only to their last base):
            # an op's fresh output, packed without looking for its source
            return _storage.pack(values, dtype)
    elif _storage.is_storage(values):
        if values.dtype is not dtype:
            raise ValidationError(
                f"ttnn.Tensor: a {values.dtype.name} shard cannot make a {dtype.name} tensor"
            )
        return values
    if quantized and not dtype.is_packed:
        return values
    stored = store(values, dtype)
    return stored if _storage.is_storage(stored) else _sealed_if_private(stored, values)


def _seal(shard) -> None:
    if _storage.is_storage(shard):
        shard.seal()
    else:
        shard.flags.writeable = False


class _UnpackedShards(Sequence):
    """A tensor's shards as float32 arrays, each unpacked from its storage when first read (replicated shards,
    one storage object, give one array)."""

    __slots__ = ("_arrays", "_stored")

    def __init__(self, stored: list) -> None:
        self._stored = stored
        self._arrays: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._stored)

    def _item(self, index: int) -> np.ndarray:
        shard = self._stored[
            index
        ]  # a storage, or the float32 stand-in of another rank's device (_remote.py)
        if isinstance(shard, np.ndarray):
            return shard
        array = self._arrays.get(id(shard))
        if array is None:
            array = self._arrays[id(shard)] = _storage.unpacked(shard)
        return array

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(i) for i in range(len(self._stored))[index]]
        return self._item(range(len(self._stored))[index])

    def __iter__(self):
        return (self._item(i) for i in range(len(self._stored)))

    def __add__(self, other):
        return list(self) + list(other)

    def __mul__(self, n: int):
        return list(self) * n


class Tensor:
    """A ttnn tensor. Build one with ``ttnn.from_torch`` / ``ttnn.from_numpy``; ops return new ones."""

    def __init__(
        self,
        shards: Sequence[np.ndarray] | np.ndarray,
        dtype: DataType,
        layout: Layout = Layout.ROW_MAJOR,
        device: MeshDevice | None = None,
        memory_config: MemoryConfig | None = None,
        topology: TensorTopology | None = None,
        *,
        padded_shape: Sequence[int] | None = None,
        what: str = "tensor",
        quantized: bool = False,
        view_of: Tensor | None = None,
    ) -> None:
        if isinstance(shards, np.ndarray):
            shards = [shards]
        shards = list(shards)
        if not shards:
            raise ValidationError("ttnn.Tensor: at least one shard is needed")
        if not isinstance(dtype, DataType):
            raise ValidationError(f"ttnn.Tensor: dtype must be a ttnn.DataType, got {dtype!r}")
        if not isinstance(layout, Layout):
            raise ValidationError(f"ttnn.Tensor: layout must be a ttnn.Layout, got {layout!r}")
        if dtype.is_block_float and layout is not Layout.TILE:
            raise ValidationError(f"ttnn.Tensor: {dtype} requires TILE layout, got {layout}")
        shape = shards[0].shape
        for shard in shards[1:]:
            if shard.shape != shape:
                raise ValidationError(
                    f"ttnn.Tensor: all shards must have one shape, got {shape} and {shard.shape}"
                )
        remote = (
            device.remote_indices()
            if isinstance(device, MeshDevice) and len(shards) == device.get_num_devices()
            else frozenset()
        )
        packed = dtype.is_packed
        if not quantized or packed:
            # replicated shards are one array object: quantise (pack) it once and keep them shared
            done: dict[int, object] = {}
            for i, s in enumerate(shards):
                if id(s) not in done and i not in remote:
                    done[id(s)] = _stored(s, dtype, quantized)
            shards = [s if i in remote else done[id(s)] for i, s in enumerate(shards)]
        if remote:
            # devices another rank emulates hold a stand-in of no memory (tttv2/ttnn/_remote.py); for the packed
            # dtypes it is float32, what shards() gives for a local device
            local = next((s for i, s in enumerate(shards) if i not in remote), None)
            if packed:
                kind = np.float32
            else:
                kind = local.dtype if local is not None else dtype.numpy_dtype
            stand_in = remote_shard(shape, kind)  # one object: per-device helpers compute it once
            shards = [stand_in if i in remote else s for i, s in enumerate(shards)]
        for shard in shards:
            # shards are shared between devices, views and host copies: nobody may write them in place
            if type(shard) is np.ndarray:
                if shard.flags.writeable:
                    shard.flags.writeable = False
            elif shard.writeable if _storage.is_storage(shard) else shard.flags.writeable:
                _seal(shard)
        self._shards: list | None = shards
        self._dtype = dtype
        self._layout = layout
        self._device = device
        self._shape = Shape(shape)
        self._padded_shape = Shape(padded_shape) if padded_shape is not None else None
        self._allocation: _Allocation | None = None
        self._finalizer = None
        # autograd (tttv2.ttnn.autograd): the node that produced this tensor, and leaf gradient state
        self._node = None
        self._output_index = 0
        self._requires_grad = False
        self._retains_grad = False
        self._grad: Tensor | None = None
        self._versions = _VersionCounter()
        if device is None:
            self._memory_config = None
            self._topology = topology
            if len(shards) > 1 and topology is None:
                raise ValidationError("ttnn.Tensor: a multi-device host tensor needs a topology")
        else:
            if not isinstance(device, MeshDevice):
                raise ValidationError(
                    f"ttnn.Tensor: device must be a MeshDevice, got {type(device).__name__}"
                )
            if not device.is_open:
                raise ValidationError(f"ttnn.Tensor: {device} is closed")
            if len(shards) != device.get_num_devices():
                raise ValidationError(
                    f"ttnn.Tensor: {device} has {device.get_num_devices()} devices, got {len(shards)} shards"
                )
            memory_config = memory_config if memory_config is not None else DRAM_MEMORY_CONFIG
            if not isinstance(memory_config, MemoryConfig):
                raise ValidationError(
                    f"ttnn.Tensor: memory_config must be a ttnn.MemoryConfig, got {memory_config!r}"
                )
            memory_config, nbytes = _placement(memory_config, self._shape, layout, dtype, device, what)
            self._memory_config = memory_config
            self._topology = topology or TensorTopology.replicated(device.shape)
            if view_of is not None:
                # a view (get_device_tensors) shares the owner's buffers: keep the owner alive, allocate nothing
                self._view_of = view_of
            else:
                desc = f"{what} {list(self._shape)} {dtype.name} {layout.name}"
                self._allocation = _Allocation(device, memory_config.buffer_type, nbytes, desc)
                self._finalizer = weakref.finalize(self, _release, self._allocation)

    # --- metadata -------------------------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def padded_shape(self) -> Shape:
        if self._padded_shape is not None:
            return self._padded_shape
        return padded_shape_of(self._shape, self._layout)

    def get_legacy_shape(self) -> Shape:
        """The older API's name of :attr:`padded_shape` (tt_lib-era models, e.g. the T3000 Falcon-40B demo)."""
        return self.padded_shape

    @property
    def logical_shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DataType:
        return self._dtype

    def get_dtype(self) -> DataType:
        return self._dtype

    @property
    def layout(self) -> Layout:
        return self._layout

    def get_layout(self) -> Layout:
        return self._layout

    @property
    def volume(self) -> int:
        return math.prod(self._shape)

    def logical_volume(self) -> int:
        return math.prod(self._shape)

    def device(self) -> MeshDevice | None:
        return self._device

    @property
    def spec(self):
        """This tensor's ``ttnn.TensorSpec`` (shape, dtype, layout, memory config), e.g. to allocate a receiver."""
        return upcall("TensorSpec").of(self)

    def memory_config(self) -> MemoryConfig | None:
        return self._memory_config

    def is_sharded(self) -> bool:
        return self._memory_config is not None and self._memory_config.is_sharded()

    def storage_type(self) -> StorageType:
        return StorageType.HOST if self._device is None else StorageType.DEVICE

    def is_allocated(self) -> bool:
        return self._shards is not None

    def buffer_address(self) -> int:
        """The address of the tensor's device buffer, the same on every device of its mesh (tt-metal's prefetcher
        sends the weights' addresses to its reader cores). The emulator's addresses are unique per allocation and
        stable for its lifetime; a view reports its owner's."""
        owner = getattr(self, "_view_of", None)
        owner = self if owner is None else owner
        if self._device is None or owner._allocation is None or not self.is_allocated():
            raise ValidationError(
                "ttnn.Tensor.buffer_address: the tensor has no device buffer (host or deallocated)"
            )
        return owner._allocation.address

    def tensor_topology(self) -> TensorTopology | None:
        return self._topology

    def shard_spec(self) -> ShardSpec | None:
        return None if self._memory_config is None else self._memory_config.shard_spec

    @property
    def num_shards(self) -> int:
        return len(self.stored_shards("Tensor.num_shards"))

    # --- storage --------------------------------------------------------------------------------------
    def shards(self, op: str = "ttnn op"):
        """The per-device values as float32 arrays for float dtypes (integer dtypes: their own arrays), read-only;
        raises if the tensor was deallocated. bfloat16 and block-float shards are unpacked from their storage
        when an item is first read, once per distinct storage, into arrays the caller drops after the op."""
        stored = self.stored_shards(op)
        if not any(_storage.is_storage(s) for s in stored):
            return stored
        return _UnpackedShards(stored)

    def stored_shards(self, op: str = "ttnn op") -> list:
        """The per-device shards as stored: numpy arrays, or storage objects (``tttv2.ttnn.storage``) for bfloat16
        and the block floats; raises if the tensor was deallocated."""
        if self._shards is None:
            raise ValidationError(
                f"{op}: the input tensor {list(self._shape)} {self._dtype.name} was deallocated"
            )
        if self._device is not None and not self._device.is_open:
            raise ValidationError(f"{op}: the input tensor lives on {self._device}, which is closed")
        return self._shards

    def _writable_shard(self, index: int, op: str):
        """Shard ``index`` as an array (or storage, which takes ``shard[index] = values`` and stores the values as
        the dtype does) this tensor owns alone, for ops that update in place (KV caches)."""
        shards = self.stored_shards(op)
        self._mark_modified(op)
        shard = shards[index]
        if self._device is not None and index in self._device.remote_indices():
            return np.empty(shard.shape, shard.dtype)  # another rank's device: a scratch the write lands in
        if not (shard.writeable if _storage.is_storage(shard) else shard.flags.writeable):
            shard = shard.copy()
            shards[index] = shard
            owner, owner_index = getattr(self, "_view_of", None), getattr(self, "_view_index", None)
            if owner is not None and owner_index is not None and owner._shards is not None:
                owner._shards[owner_index] = shard  # a per-device view shares its owner's buffer
        return shard

    @contextlib.contextmanager
    def _updated_shard(self, index: int, op: str):
        """``with t._updated_shard(i, op) as values:`` a writable array of shard ``index`` that in-place kernels
        (optimizer steps) may write; a bfloat16 or block-float shard is unpacked for it and stored back (as the
        dtype stores values) when the block ends without an error."""
        shard = self._writable_shard(index, op)
        if not _storage.is_storage(shard):
            yield shard
            return
        values = shard.to_float32().copy()
        yield values
        shard[...] = values

    @property
    def _version(self) -> int:
        """Bumped by every in-place write into this tensor (as torch's ``Tensor._version``)."""
        return self._versions.count

    def _mark_modified(self, op: str) -> None:
        """Record an in-place write by ``op`` (a per-device view's write lands in its owner's buffer too)."""
        self._versions.count += 1
        self._versions.last_op = op
        owner = getattr(self, "_view_of", None)
        if owner is not None and getattr(self, "_view_index", None) is not None:
            owner._mark_modified(op)

    def deallocate(self, force: bool = True) -> None:
        """Free the device memory now; any later use raises."""
        if self._allocation is not None:
            self._allocation.release()
        self._shards = None

    # --- autograd -------------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """True for leaves marked for gradients and for every tensor computed from them with grad mode on."""
        return self._requires_grad or self._node is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._node is not None:
            raise ValidationError("Tensor.requires_grad: only leaf tensors can be marked; use detach() first")
        if value and not self._dtype.is_float:
            raise ValidationError(
                f"Tensor.requires_grad: only float tensors can require grad, this is {self._dtype.name}"
            )
        self._requires_grad = bool(value)

    def requires_grad_(self, value: bool = True) -> Tensor:
        self.requires_grad = value
        return self

    @property
    def grad(self) -> Tensor | None:
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, Tensor):
            raise ValidationError(f"Tensor.grad: expected a ttnn.Tensor or None, got {type(value).__name__}")
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    def register_hook(self, hook):
        """``hook(grad)`` sees each gradient reaching this leaf before it is added into ``.grad`` (see autograd)."""
        return upcall("register_hook")(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(self)`` runs once per backward, after this leaf's ``.grad`` is complete (see autograd)."""
        return upcall("register_post_accumulate_grad_hook")(self, hook)

    def retain_grad(self) -> None:
        """Keep ``.grad`` on a non-leaf tensor too."""
        self._retains_grad = True

    def backward(self, grad: Tensor | None = None, retain_graph: bool = False) -> None:
        """Backpropagate ``grad`` (default: ones shaped like this tensor) to every leaf that requires grad."""
        if grad is None:
            grad = upcall("ones_like")(self)
        elif not isinstance(grad, Tensor) or tuple(grad.shape) != tuple(self._shape):
            got = list(grad.shape) if isinstance(grad, Tensor) else type(grad).__name__
            raise ValidationError(
                f"Tensor.backward: grad: expected a tensor of shape {list(self._shape)}, got {got}"
            )
        upcall("run_backward")(self, grad, retain_graph=retain_graph)

    def detach(self) -> Tensor:
        """The same values, cut from the graph (shares the shards)."""
        out = Tensor(
            self.stored_shards("Tensor.detach"),
            self._dtype,
            self._layout,
            self._device,
            self._memory_config,
            self._topology,
            padded_shape=self._padded_shape,
            quantized=True,
            view_of=self if self._device else None,
        )
        return out

    # --- movement -------------------------------------------------------------------------------------
    def to(self, device: MeshDevice, memory_config: MemoryConfig | None = None, cq_id: int = 0) -> Tensor:
        return upcall("to_device")(self, device, memory_config=memory_config)

    def cpu(self, blocking: bool = True, cq_id: int = 0) -> Tensor:
        return upcall("from_device")(self)

    def to_layout(self, layout: Layout) -> Tensor:
        return upcall("to_layout")(self, layout)

    def to_torch(self, mesh_composer=None):
        return upcall("to_torch")(self, mesh_composer=mesh_composer)

    def to_numpy(self, mesh_composer=None):
        return upcall("to_numpy")(self, mesh_composer=mesh_composer)

    def reshape(self, *shape) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        return upcall("reshape")(self, shape)

    # --- Python values and device lists (ttnn's Tensor.item / to_list / devices) -------------------------
    def _host_values(self, op: str) -> np.ndarray:
        return np.asarray(upcall("compose")(self, None, op))

    def item(self) -> float | int:
        """The value of a one-element tensor as a Python number: a float for float dtypes, an int for integer
        ones (what ttnn's ``Tensor.item()`` returns). A tensor distributed over devices must be replicated."""
        values = self._host_values("Tensor.item")
        if values.size != 1:
            raise ValidationError(
                f"Tensor.item: expected a tensor with exactly one element, got shape {list(self._shape)} "
                f"({values.size} elements); use Tensor.to_list() or ttnn.to_numpy() for more"
            )
        return values.reshape(()).item()

    def to_list(self) -> list | float | int:
        """The values as nested Python lists in the tensor's shape, floats for float dtypes and ints for
        integer ones (ttnn's ``Tensor.to_list()``); a rank-0 tensor gives its number."""
        return self._host_values("Tensor.to_list").tolist()

    def devices(self) -> list[MeshDevice]:
        """The mesh the tensor lives on, as a one-element list (ttnn's ``Tensor.devices()``); [] on host."""
        return [] if self._device is None else [self._device]

    def __getitem__(self, index) -> Tensor:
        return upcall("getitem")(self, index)

    # --- arithmetic -------------------------------------------------------------------------------------
    def __add__(self, other) -> Tensor:
        return upcall("add")(self, other)

    def __radd__(self, other) -> Tensor:
        return upcall("add")(self, other)

    def __sub__(self, other) -> Tensor:
        return upcall("subtract")(self, other)

    def __rsub__(self, other) -> Tensor:
        return upcall("rsub")(self, other)

    def __mul__(self, other) -> Tensor:
        return upcall("multiply")(self, other)

    def __rmul__(self, other) -> Tensor:
        return upcall("multiply")(self, other)

    def __neg__(self) -> Tensor:
        return upcall("neg")(self)

    def __matmul__(self, other) -> Tensor:
        return upcall("matmul")(self, other)

    def __repr__(self) -> str:
        where = "host" if self._device is None else repr(self._device)
        state = "" if self._shards is not None else ", deallocated"
        mem = (
            ""
            if self._memory_config is None
            else f", {self._memory_config.memory_layout.name}/{self._memory_config.buffer_type.name}"
        )
        return f"ttnn.Tensor(shape={list(self._shape)}, dtype={self._dtype.name}, layout={self._layout.name}, {where}{mem}{state})"


# --- memory config resolution and validation -------------------------------------------------------------

# (memory config, shape, layout, dtype, device grid) -> (the resolved memory config, bytes per device): what
# resolve_shard_spec, validate_memory_config and device_bytes give, all three pure functions of these. A decode
# step builds ~40 tensors per layer of a handful of placements; each was resolved and checked again. Only
# placements that passed the checks are remembered (a bad one raises every time, naming the tensor); bounded.
_PLACEMENTS: dict[tuple, tuple[MemoryConfig, int]] = {}
_PLACEMENTS_MAX = 4096


def _placement(
    memory_config: MemoryConfig,
    shape: Shape,
    layout: Layout,
    dtype: DataType,
    device: MeshDevice,
    what: str,
) -> tuple[MemoryConfig, int]:
    """The memory config a device tensor gets (a sharded one without a shard spec resolved for this shape) and
    the bytes it occupies per device; raises ValidationError for a shard spec that does not fit."""
    key = (memory_config, shape, layout, dtype, device.compute_with_storage_grid_size())
    known = _PLACEMENTS.get(key)
    if known is not None:
        return known
    resolved = resolve_shard_spec(memory_config, shape, layout, device, what)
    validate_memory_config(resolved, shape, layout, dtype, what)
    known = (resolved, device_bytes(shape, dtype, layout, resolved))
    if len(_PLACEMENTS) >= _PLACEMENTS_MAX:
        _PLACEMENTS.clear()
    _PLACEMENTS[key] = known
    return known


def _height_width(shape: Sequence[int], layout: Layout) -> tuple[int, int]:
    padded = padded_shape_of(shape, layout)
    if not padded:
        return 1, 1
    width = padded[-1]
    height = math.prod(padded[:-1]) if len(padded) > 1 else 1
    return height, width


def resolve_shard_spec(
    memory_config: MemoryConfig,
    shape: Sequence[int],
    layout: Layout,
    device: MeshDevice,
    what: str,
    grid=None,
) -> MemoryConfig:
    """Give a sharded config without a shard spec (e.g. ``L1_WIDTH_SHARDED_MEMORY_CONFIG``) a concrete spec.

    ttnn lets some ops choose the shard grid; here the choice is: the grid the op passes, else as many
    cores of the device grid as divide the sharded extent in tiles.
    """
    if not memory_config.is_sharded() or memory_config.shard_spec is not None:
        return memory_config

    height, width = _height_width(shape, layout)
    full = device.compute_with_storage_grid_size()
    align = TILE_SIZE if layout is Layout.TILE else 1
    layout_kind = memory_config.memory_layout
    if layout_kind is TensorMemoryLayout.BLOCK_SHARDED:
        if grid is None:
            grid = CoreGrid(
                x=_largest_divisor(width // align, full.x), y=_largest_divisor(height // align, full.y)
            )
        crs = grid if isinstance(grid, CoreRangeSet) else grid.to_core_range_set()
        box = crs.bounding_box().grid_size()
        shard = (height // box.y, width // box.x)
    else:
        extent = width if layout_kind is TensorMemoryLayout.WIDTH_SHARDED else height
        if grid is None:
            n = _largest_divisor(max(extent // align, 1), full.x * full.y)
            crs = num_cores_to_corerangeset(n, full, row_wise=True)
        else:
            crs = grid if isinstance(grid, CoreRangeSet) else grid.to_core_range_set()
        n = crs.num_cores()
        per_core = -(-extent // n)
        per_core = -(-per_core // align) * align
        shard = (height, per_core) if layout_kind is TensorMemoryLayout.WIDTH_SHARDED else (per_core, width)
    return MemoryConfig(layout_kind, memory_config.buffer_type, ShardSpec(crs, shard))


def _largest_divisor(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def validate_memory_config(
    memory_config: MemoryConfig, shape: Sequence[int], layout: Layout, dtype: DataType, what: str
) -> None:
    """Check that a shard spec tiles the tensor the way the hardware requires."""
    if not memory_config.is_sharded():
        return
    spec = memory_config.shard_spec
    if spec is None:  # pragma: no cover - resolve_shard_spec always runs first
        raise ValidationError(f"{what}: memory_config: a sharded memory config needs a shard_spec")
    height, width = _height_width(shape, layout)
    sh, sw = spec.shape
    n = spec.num_cores()
    kind = memory_config.memory_layout
    if layout is Layout.TILE and (sh % TILE_SIZE or sw % TILE_SIZE):
        raise ValidationError(
            f"{what}: memory_config: shard shape {spec.shape} must be a multiple of the 32×32 tile for TILE layout"
        )
    # as in ttnn's TensorSpec check: the shards must cover the tensor with at most one shard per core (spare cores
    # may stay empty, the last shard may be partly empty: a 32-row tensor fits one 128-row height shard); the
    # unsharded dimension must match exactly (a width shard is exactly as tall as the tensor)
    hint = ""
    if kind is TensorMemoryLayout.HEIGHT_SHARDED:
        ok = sw == width and sh * n >= height
        expected = f"shard width {width} and at most {n} shards of height {sh} covering height {height}"
    elif kind is TensorMemoryLayout.WIDTH_SHARDED:
        ok = sh == height and sw * n >= width
        expected = f"shard height {height} and at most {n} shards of width {sw} covering width {width}"
        if sh != height:
            # ttnn's rule (tensor_spec.cpp, validate_shard_spec_with_tensor_shape), fatal since tt-metal PR #17799
            hint = (
                "; ttnn's TensorSpec rule: a width shard's height must equal the tensor's physical height "
                f"(tile-padded in TILE layout) (shard height {sh} must match physical height {height})"
            )
        if sh > height:
            hint += (
                ", so a width shard taller than the tensor is refused (only a height or block shard may be "
                f"partly filled): gather the rows first, or use a shard of height {height}"
            )
    else:
        box = spec.grid.bounding_box().grid_size()
        cols, rows = (box.x, box.y)
        if spec.orientation.name == "COL_MAJOR":
            cols, rows = rows, cols
        ok = sh * rows >= height and sw * cols >= width and len(spec.grid.ranges) == 1
        expected = f"a {cols}x{rows} rectangular grid of {sh}x{sw} shards covering {height}x{width}"
    if not ok:
        raise ValidationError(
            f"{what}: memory_config: shard spec does not tile the tensor {list(shape)} ({kind.name}): "
            f"expected {expected}, got shard {spec.shape} on {n} cores{hint}"
        )
    if memory_config.buffer_type is BufferType.L1:
        per_core = sh * sw * dtype.element_bytes(layout)
        # capacity is checked by the allocator too; this names the per-core limit precisely
        limit = min(s.l1_bytes_per_core for s in ARCH_SPECS.values())
        if per_core > limit:
            raise ValidationError(
                f"{what}: memory_config: one L1 shard needs {int(per_core):,} bytes per core, more than the "
                f"{limit:,} bytes a core has"
            )
