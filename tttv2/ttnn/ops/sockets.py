"""Sockets between meshes: ``ttnn.MeshSocket`` / ``ttnn.SocketConfig`` and ``ttnn.experimental.send_async`` /
``recv_async``, as tt-metal's Python API spells them (docs/distributed.md).

* **Between ranks** (``MeshSocket(mesh_device, SocketConfig(connections, memory_config, sender_rank=0,
  receiver_rank=1))``, built by both ranks): the tensor travels over MPI point-to-point messages (mpi4py, the
  ``distributed`` extra): a header (shape, dtype, layout, padded shape, distribution) and the shards' bytes.
  Building the socket is a handshake: both ranks exchange their configs and refuse, on both sides, configs that
  differ or sockets built in another order.
* **In one process** (``create_socket_pair(sender_mesh, receiver_mesh, config)``): the same transfer through an
  in-process queue, e.g. between two submeshes.

Each connection joins one sender device to one receiver device (``MeshCoreCoord(device_coord, core_coord)``):
that device's shard arrives, bit for bit, in the receiving tensor's shard on the connected device.
``recv_async(output_tensor, socket)`` fills a tensor allocated beforehand (``ttnn.allocate_tensor_on_device(
spec, mesh)``) whose spec (shape, dtype, layout) must equal the sent one; otherwise both sides raise.

``send_async`` does not wait for the receiver (as on hardware the transfer is queued): its completion is checked
at the next socket call, at ``ttnn.synchronize_device`` and when the program ends; a refusal by the receiver, or
a receiver that never takes the tensor within ``TTTV2_DISTRIBUTED_TIMEOUT`` seconds, raises there. A receiver
waits at most as long for a sender.
"""

from __future__ import annotations

import atexit
import enum
import itertools
import json
import math
import sys
import weakref
from collections import deque
from dataclasses import dataclass

import numpy as np

from ...distributed import _mpi
from ..device import MeshCoordinate, MeshDevice, MeshShape
from ..distributed_context import distributed_context_get_rank, distributed_context_get_size
from ..errors import ValidationError, op_error
from ..memory import CoreCoord, MemoryConfig
from ..numerics import store
from ..placement import PlacementReplicate, PlacementShard, TensorTopology
from ..tensor import Shape, Tensor, _seal
from ..types import TILE_SIZE, BufferType, DataType, Layout, TensorMemoryLayout
from ._common import expect_tensor, ttnn_op
from .creation import zeros

__all__ = [
    "MeshCoordinateRange",
    "MeshCoreCoord",
    "MeshSocket",
    "SocketConfig",
    "SocketConnection",
    "SocketEndpoint",
    "SocketMemoryConfig",
    "TensorSpec",
    "allocate_tensor_on_device",
    "create_socket_pair",
]
__experimental__ = ["recv_async", "send_async"]
__transformer__: list[str] = []

_TAG_BASE = 20480  # MPI tags of socket k between two ranks: _TAG_BASE + 4k + (handshake, header, data, ack)
_ALIGNMENT = {BufferType.DRAM: 32, BufferType.L1: 16}  # page alignment of a buffer (wormhole)


def _coord(owner: str, name: str, value) -> tuple[int, int]:
    if isinstance(value, MeshCoordinate):
        return (value.row, value.col)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (int(value[0]), int(value[1]))
    raise ValidationError(f"{owner}: {name}: expected a ttnn.MeshCoordinate, got {value!r}")


class SocketEndpoint(enum.Enum):
    """Which end of a socket this process holds."""

    SENDER = 0
    RECEIVER = 1


class MeshCoordinateRange:
    """Every coordinate of a mesh shape (``MeshCoordinateRange(shape)``) or of a box (``MeshCoordinateRange(
    start, end)``, both inclusive), in row-major order."""

    def __init__(self, start, end=None) -> None:
        owner = "ttnn.MeshCoordinateRange"
        if end is None:
            if not isinstance(start, MeshShape):
                raise ValidationError(f"{owner}: expected a ttnn.MeshShape or (start, end), got {start!r}")
            rows, cols = start.as_2d()
            self._start, self._end = (0, 0), (rows - 1, cols - 1)
        else:
            self._start, self._end = _coord(owner, "start", start), _coord(owner, "end", end)
            if self._start[0] > self._end[0] or self._start[1] > self._end[1]:
                raise ValidationError(f"{owner}: start {start!r} is after end {end!r}")

    def __iter__(self):
        for r in range(self._start[0], self._end[0] + 1):
            for c in range(self._start[1], self._end[1] + 1):
                yield MeshCoordinate(r, c)

    def __len__(self) -> int:
        return (self._end[0] - self._start[0] + 1) * (self._end[1] - self._start[1] + 1)

    def __repr__(self) -> str:
        return f"MeshCoordinateRange(start={self._start}, end={self._end})"


@dataclass(frozen=True)
class MeshCoreCoord:
    """A core of one device of a mesh: ``MeshCoreCoord(device_coord, core_coord)``."""

    device_coord: MeshCoordinate
    core_coord: CoreCoord

    def __post_init__(self) -> None:
        owner = "ttnn.MeshCoreCoord"
        row, col = _coord(owner, "device_coord", self.device_coord)
        object.__setattr__(self, "device_coord", MeshCoordinate(row, col))
        if not isinstance(self.core_coord, CoreCoord):
            raise ValidationError(f"{owner}: core_coord: expected a ttnn.CoreCoord, got {self.core_coord!r}")


@dataclass(frozen=True)
class SocketConnection:
    """One link of a socket: a sender core to a receiver core (each on one device of its mesh)."""

    sender_core: MeshCoreCoord
    receiver_core: MeshCoreCoord

    def __post_init__(self) -> None:
        for name in ("sender_core", "receiver_core"):
            if not isinstance(getattr(self, name), MeshCoreCoord):
                raise ValidationError(
                    f"ttnn.SocketConnection: {name}: expected a ttnn.MeshCoreCoord, got {getattr(self, name)!r}"
                )


@dataclass(frozen=True)
class SocketMemoryConfig:
    """The receiver's FIFO: in DRAM or L1, ``fifo_size`` bytes (at least one page of the tensors sent)."""

    socket_storage_type: BufferType
    fifo_size: int
    sender_sub_device: object = None
    receiver_sub_device: object = None
    per_core_allocation: bool = False

    def __post_init__(self) -> None:
        owner = "ttnn.SocketMemoryConfig"
        if not isinstance(self.socket_storage_type, BufferType):
            raise ValidationError(
                f"{owner}: socket_storage_type: expected a ttnn.BufferType, got {self.socket_storage_type!r}"
            )
        if isinstance(self.fifo_size, bool) or not isinstance(self.fifo_size, int) or self.fifo_size < 1:
            raise ValidationError(
                f"{owner}: fifo_size: expected a positive number of bytes, got {self.fifo_size!r}"
            )


class SocketConfig:
    """``SocketConfig(connections, memory_config, sender_rank=None, receiver_rank=None)``: the links, the FIFO,
    and (between ranks) which rank sends and which receives."""

    def __init__(self, connections, memory_config, sender_rank=None, receiver_rank=None) -> None:
        owner = "ttnn.SocketConfig"
        connections = list(connections) if isinstance(connections, (list, tuple)) else connections
        if not isinstance(connections, list) or not connections:
            raise ValidationError(f"{owner}: connections: expected a non-empty list of ttnn.SocketConnection")
        bad = next((c for c in connections if not isinstance(c, SocketConnection)), None)
        if bad is not None:
            raise ValidationError(f"{owner}: connections: expected ttnn.SocketConnection items, got {bad!r}")
        for side in ("sender_core", "receiver_core"):
            coords = [tuple(getattr(c, side).device_coord) for c in connections]
            twice = next((c for c in coords if coords.count(c) > 1), None)
            if twice is not None:
                raise ValidationError(
                    f"{owner}: connections: device {list(twice)} has two {side.split('_')[0]} connections (the "
                    "emulator joins each device to one device)"
                )
        if not isinstance(memory_config, SocketMemoryConfig):
            raise ValidationError(
                f"{owner}: memory_config: expected a ttnn.SocketMemoryConfig, got {memory_config!r}"
            )
        for name, rank in (("sender_rank", sender_rank), ("receiver_rank", receiver_rank)):
            if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
                raise ValidationError(f"{owner}: {name}: expected a rank (an int >= 0), got {rank!r}")
        self.socket_connection_config = connections
        self.socket_mem_config = memory_config
        self.sender_rank = None if sender_rank is None else int(sender_rank)
        self.receiver_rank = None if receiver_rank is None else int(receiver_rank)

    def _describe(self) -> dict:
        """The parts both ends of a socket must agree on."""
        return {
            "connections": [
                [list(c.sender_core.device_coord), list(c.receiver_core.device_coord)]
                for c in self.socket_connection_config
            ],
            "fifo": [self.socket_mem_config.socket_storage_type.name, self.socket_mem_config.fifo_size],
            "ranks": [self.sender_rank, self.receiver_rank],
        }

    def __repr__(self) -> str:
        return (
            f"SocketConfig({len(self.socket_connection_config)} connections, fifo "
            f"{self.socket_mem_config.fifo_size} B {self.socket_mem_config.socket_storage_type.name}, "
            f"sender_rank={self.sender_rank}, receiver_rank={self.receiver_rank})"
        )


class TensorSpec:
    """A tensor's shape, dtype, layout and memory config, without its data (``tensor.spec``); give it to
    ``ttnn.allocate_tensor_on_device``."""

    def __init__(
        self,
        shape,
        dtype: DataType,
        layout: Layout,
        memory_layout=TensorMemoryLayout.INTERLEAVED,
        shard_spec=None,
        buffer_type: BufferType = BufferType.DRAM,
        *,
        tile=None,
    ) -> None:
        owner = "ttnn.TensorSpec"
        if isinstance(memory_layout, BufferType):  # TensorSpec(shape, dtype, layout, buffer_type)
            memory_layout, buffer_type = TensorMemoryLayout.INTERLEAVED, memory_layout
        if not isinstance(dtype, DataType):
            raise ValidationError(f"{owner}: dtype: expected a ttnn.DataType, got {dtype!r}")
        if not isinstance(layout, Layout):
            raise ValidationError(f"{owner}: layout: expected a ttnn.Layout, got {layout!r}")
        try:
            self.shape = Shape(tuple(int(d) for d in shape))
        except (TypeError, ValueError):
            raise ValidationError(f"{owner}: shape: expected a sequence of ints, got {shape!r}") from None
        self.dtype, self.layout = dtype, layout
        self.memory_config = MemoryConfig(memory_layout, buffer_type, shard_spec)
        self.tile = tile

    @classmethod
    def of(cls, tensor: Tensor) -> TensorSpec:
        config = tensor.memory_config()
        spec = cls(tensor.shape, tensor.dtype, tensor.layout)
        if config is not None:
            spec.memory_config = config
        return spec

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorSpec) and (
            tuple(self.shape),
            self.dtype,
            self.layout,
            self.memory_config,
        ) == (tuple(other.shape), other.dtype, other.layout, other.memory_config)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TensorSpec(shape={list(self.shape)}, dtype={self.dtype.name}, layout={self.layout.name})"


def allocate_tensor_on_device(spec: TensorSpec, device: MeshDevice) -> Tensor:
    """A tensor of ``spec`` on every device of ``device`` (zero-filled: the emulator's uninitialised memory)."""
    if not isinstance(spec, TensorSpec):
        raise ValidationError(
            f"ttnn.allocate_tensor_on_device: tensor_spec: expected a ttnn.TensorSpec, got {type(spec).__name__}"
        )
    return zeros(list(spec.shape), spec.dtype, spec.layout, device, spec.memory_config)


def _page_bytes(tensor: Tensor) -> int:
    """The size of one page of ``tensor``'s buffer (a tile, or a row in ROW_MAJOR), aligned as the buffer is."""
    if tensor.layout is Layout.TILE:
        page = math.ceil(tensor.dtype.element_bytes(Layout.TILE) * TILE_SIZE * TILE_SIZE)
    else:
        page = (
            int(tensor.shape[-1] * tensor.dtype.element_bytes(Layout.ROW_MAJOR)) if len(tensor.shape) else 1
        )
    align = _ALIGNMENT[tensor.memory_config().buffer_type]
    return -(-page // align) * align


# --- the wire format: a JSON header and the shards' bytes ------------------------------------------------------


def _topology_json(topology: TensorTopology):
    placements = [
        ["shard", p.dim] if isinstance(p, PlacementShard) else ["replicate"] for p in topology.placements()
    ]
    return [list(topology.distribution_shape), placements]


def _topology_of(data) -> TensorTopology:
    shape, placements = data
    return TensorTopology(
        MeshShape(*shape),
        tuple(PlacementShard(p[1]) if p[0] == "shard" else PlacementReplicate() for p in placements),
    )


def _header(tensor: Tensor, shards: list[np.ndarray]) -> dict:
    return {
        "shape": list(tensor.shape),
        "padded": None if tensor._padded_shape is None else list(tensor._padded_shape),
        "dtype": tensor.dtype.name,
        "layout": tensor.layout.name,
        "storage": shards[0].dtype.str,
        "shard": list(shards[0].shape),
        "topology": _topology_json(tensor.tensor_topology()),
    }


def _spec_text(shape, dtype: str, layout: str) -> str:
    return f"{list(shape)} {dtype} {layout}"


def _mismatch(header: dict, output: Tensor) -> tuple[str, str] | None:
    """``(sent, receiving)`` descriptions when the receiving tensor's spec is not the sent tensor's."""
    sent = _spec_text(header["shape"], header["dtype"], header["layout"])
    mine = _spec_text(list(output.shape), output.dtype.name, output.layout.name)
    padded = None if output._padded_shape is None else list(output._padded_shape)
    if sent == mine and header["padded"] != padded:
        sent, mine = f"{sent} padded to {header['padded']}", f"{mine} padded to {padded}"
    return None if sent == mine else (sent, mine)


# --- sockets ---------------------------------------------------------------------------------------------------

_pair_counts: dict[tuple[int, int], itertools.count] = {}
_live: weakref.WeakSet = weakref.WeakSet()
_exit_hook: list[bool] = []


class _Pending:
    """A send that left but whose receipt the receiver has not confirmed yet."""

    def __init__(self, number: int, requests: list, keep: tuple) -> None:
        self.number, self.requests, self.keep = number, requests, keep


class MeshSocket:
    """One end of a socket. Between ranks: ``MeshSocket(mesh_device, config)`` in the sender rank and in the
    receiver rank (a handshake: both wait for each other at most ``TTTV2_DISTRIBUTED_TIMEOUT`` seconds); a rank
    that is neither gets a socket it cannot use. In one process: :func:`create_socket_pair`."""

    def __init__(self, device: MeshDevice, config: SocketConfig) -> None:
        owner = "ttnn.MeshSocket"
        self._check(owner, device, config)
        self._pending: deque[_Pending] = deque()
        self._sent = self._received = 0
        self._queue: deque | None = None  # an in-process pair's shared queue
        self._peer: int | None = None
        self._endpoint: SocketEndpoint | None = None
        if config.sender_rank is None or config.receiver_rank is None:
            raise ValidationError(
                f"{owner}: config: a socket between ranks needs sender_rank and receiver_rank (use "
                "ttnn.create_socket_pair for two meshes of one process)"
            )
        if config.sender_rank == config.receiver_rank:
            raise ValidationError(
                f"{owner}: config: sender_rank and receiver_rank are both {config.sender_rank}; a MeshSocket joins "
                "two ranks (use ttnn.create_socket_pair for two meshes of one process)"
            )
        if device.spans_ranks():
            raise ValidationError(
                f"{owner}: device: {device} is one mesh spread over the ranks; a socket joins meshes that each rank "
                "keeps whole: give each rank its own mesh_id in a --rank-binding file, or open a 1x1 mesh per rank"
            )
        rank, size = int(distributed_context_get_rank()), int(distributed_context_get_size())
        far = max(config.sender_rank, config.receiver_rank)
        if far >= size:
            raise ValidationError(
                f"{owner}: config: rank {far} does not exist: this world has {size} rank(s) (start the program with "
                f"tttv2-run --np {far + 1})"
            )
        self._rank = rank
        if rank not in (config.sender_rank, config.receiver_rank):
            return  # a null socket, as tt-metal's on a rank outside the pair
        self._endpoint = SocketEndpoint.SENDER if rank == config.sender_rank else SocketEndpoint.RECEIVER
        self._peer = config.receiver_rank if self._endpoint is SocketEndpoint.SENDER else config.sender_rank
        pair = (min(rank, self._peer), max(rank, self._peer))
        self._index = next(_pair_counts.setdefault(pair, itertools.count()))
        self._tag = _TAG_BASE + 4 * self._index
        mine = {**config._describe(), "index": self._index, "mesh": list(device.shape.as_2d())}
        what = f"{owner} #{self._index} between ranks {pair[0]} and {pair[1]} (handshake)"
        payload = np.frombuffer(json.dumps(mine).encode(), dtype=np.uint8)
        request = _mpi.isend_bytes(payload, self._peer, self._tag)
        theirs = json.loads(bytes(_mpi.recv_bytes(self._peer, self._tag, what)).decode())
        _mpi.wait(request, what)
        problem = self._disagreement(mine, theirs)
        if problem:
            raise _mpi.DistributedError(f"rank {rank}: {owner}: {problem}")
        sender_mesh = mine["mesh"] if self._endpoint is SocketEndpoint.SENDER else theirs["mesh"]
        receiver_mesh = theirs["mesh"] if self._endpoint is SocketEndpoint.SENDER else mine["mesh"]
        _check_coords(owner, config, sender_mesh, receiver_mesh)
        _live.add(self)
        if not _exit_hook:
            _exit_hook.append(True)
            atexit.register(_complete_at_exit)

    def _check(self, owner: str, device, config) -> None:
        if not isinstance(device, MeshDevice):
            raise op_error(owner, "device", "a ttnn.MeshDevice", type(device).__name__)
        if not device.is_open:
            raise ValidationError(f"{owner}: device: {device} is closed")
        if not isinstance(config, SocketConfig):
            raise op_error(owner, "config", "a ttnn.SocketConfig", type(config).__name__)
        self._device, self._config = device, config

    def _disagreement(self, mine: dict, theirs: dict) -> str | None:
        if theirs["index"] != mine["index"] or theirs["ranks"] != mine["ranks"]:
            return (
                f"rank {self._peer} built its socket #{mine['index']} with this rank for ranks "
                f"{theirs['ranks'][0]}->{theirs['ranks'][1]}, this rank for {mine['ranks'][0]}->{mine['ranks'][1]} "
                "(both ranks must build their sockets in the same order)"
            )
        for key, name in (("connections", "connections"), ("fifo", "memory config")):
            if theirs[key] != mine[key]:
                return (
                    f"the two ends' {name} differ: rank {self._rank} has {mine[key]}, rank {self._peer} has "
                    f"{theirs[key]} (both ranks must build the socket from the same SocketConfig)"
                )
        return None

    # --- tt-metal's accessors ------------------------------------------------------------------------------------
    def get_socket_endpoint_type(self) -> SocketEndpoint:
        if self._endpoint is None:
            raise ValidationError(f"ttnn.MeshSocket: rank {self._rank} holds neither end of {self!r}")
        return self._endpoint

    def get_mesh_device(self) -> MeshDevice:
        return self._device

    def get_connection_config(self) -> list[SocketConnection]:
        return list(self._config.socket_connection_config)

    def get_active_cores(self) -> list[MeshCoreCoord]:
        side = "sender_core" if self._endpoint is SocketEndpoint.SENDER else "receiver_core"
        return [getattr(c, side) for c in self._config.socket_connection_config]

    def __repr__(self) -> str:
        if self._queue is not None:
            where = "in process"
        else:
            where = f"rank {self._config.sender_rank} -> rank {self._config.receiver_rank}"
        end = self._endpoint.name if self._endpoint is not None else "null"
        return f"MeshSocket({end}, {where}, {len(self._config.socket_connection_config)} connections)"

    # --- transfers -----------------------------------------------------------------------------------------------
    def _usable(self, op: str, endpoint: SocketEndpoint, tensor: Tensor, arg: str, fifo: bool = True) -> None:
        """This end can send (receive) ``tensor``; ``fifo``: and a page of it fits the FIFO (the sender checks it:
        a receiving tensor of the sent spec then fits too, and one of another spec is refused by the spec check,
        which the sender hears about)."""
        if self._endpoint is None:
            raise ValidationError(
                f"{op}: mesh_socket: rank {self._rank} is neither the sender ({self._config.sender_rank}) nor the "
                f"receiver ({self._config.receiver_rank}) of this socket"
            )
        if self._endpoint is not endpoint:
            raise ValidationError(
                f"{op}: mesh_socket: expected a {endpoint.name} socket, got the {self._endpoint.name} end"
            )
        if tensor.device() is not self._device:
            raise op_error(
                op, arg, f"a tensor on the socket's mesh {self._device}", f"a tensor on {tensor.device()}"
            )
        page, size = _page_bytes(tensor), self._config.socket_mem_config.fifo_size
        if fifo and size < page:
            raise op_error(
                op,
                "mesh_socket",
                f"a FIFO of at least one page of the tensor ({page} bytes)",
                f"fifo_size {size}",
            )

    def _coords(self, side: str) -> list[int]:
        """The row-major device index of each connection's end on ``side`` of this socket's mesh."""
        cols = self._device.shape.as_2d()[1]
        return [
            getattr(c, side).device_coord.row * cols + getattr(c, side).device_coord.col
            for c in self._config.socket_connection_config
        ]

    def _send(self, op: str, tensor: Tensor) -> None:
        self._usable(op, SocketEndpoint.SENDER, tensor, "input_tensor")
        shards = tensor.shards(op)
        picked = [np.ascontiguousarray(shards[i]) for i in self._coords("sender_core")]
        header = _header(tensor, picked)
        self._check_acks(block=False)
        if self._queue is not None:
            self._queue.append((header, [s.copy() for s in picked]))
            return
        number = self._sent
        self._sent += 1
        head = np.frombuffer(json.dumps({**header, "number": number}).encode(), dtype=np.uint8)
        data = np.concatenate([s.reshape(-1).view(np.uint8) for s in picked])
        requests = [
            _mpi.isend_bytes(head, self._peer, self._tag + 1),
            _mpi.isend_bytes(data, self._peer, self._tag + 2),
        ]
        self._pending.append(_Pending(number, requests, (head, data)))

    def _check_acks(self, block: bool) -> None:
        """Confirm the receipts that arrived (``block``: wait for every one, within the deadline); a refusal by
        the receiver raises here."""
        while self._pending:
            first = self._pending[0]
            what = f"ttnn.experimental.send_async #{first.number} on {self!r} (waiting for rank {self._peer} to take it)"
            if not block and not _mpi.has_message(self._peer, self._tag + 3):
                return
            reply = bytes(_mpi.recv_bytes(self._peer, self._tag + 3, what)).decode()
            for request in first.requests:
                _mpi.wait(request, what)
            self._pending.popleft()
            if reply:
                raise _mpi.DistributedError(
                    f"rank {self._rank}: ttnn.experimental.send_async #{first.number} on {self!r}: rank {self._peer} "
                    f"refused it: {reply}"
                )

    def _take(self, op: str) -> tuple[dict, list[np.ndarray]]:
        """The next tensor sent to this end: its header and the shards of the connected devices."""
        if self._queue is not None:
            if not self._queue:
                raise ValidationError(f"{op}: mesh_socket: nothing was sent on {self!r} (send_async first)")
            return self._queue.popleft()
        what = f"{op} #{self._received} on {self!r} (waiting for rank {self._peer} to send)"
        header = json.loads(bytes(_mpi.recv_bytes(self._peer, self._tag + 1, what)).decode())
        data = _mpi.recv_bytes(self._peer, self._tag + 2, what)
        self._received += 1
        storage = np.dtype(header["storage"])
        count = len(self._config.socket_connection_config)
        per = data.size // count
        shards = [data[k * per : (k + 1) * per].view(storage).reshape(header["shard"]) for k in range(count)]
        return header, shards

    def _acknowledge(self, problem: str | None) -> None:
        """Tell the sender the tensor arrived (``problem``: why this end refused it)."""
        if self._queue is None:
            reply = np.frombuffer((problem or "").encode(), dtype=np.uint8)
            _mpi.wait(
                _mpi.isend_bytes(reply, self._peer, self._tag + 3), f"the receipt of a tensor on {self!r}"
            )

    def _receive_into(self, op: str, output: Tensor) -> None:
        self._usable(op, SocketEndpoint.RECEIVER, output, "output_tensor", fifo=False)
        header, shards = self._take(op)
        problem = _mismatch(header, output)
        self._acknowledge(problem and f"its output_tensor is {problem[1]}, the sent tensor {problem[0]}")
        if problem:
            raise op_error(op, "output_tensor", f"the sent tensor's spec {problem[0]}", problem[1])
        self._write(op, output, header, shards)

    def _write(self, op: str, output: Tensor, header: dict, shards: list[np.ndarray]) -> None:
        stored = output.stored_shards(op)  # bfloat16 / block floats: storage in the device format
        for index, shard in zip(self._coords("receiver_core"), shards):
            shard = store(np.array(shard, copy=True), output.dtype)  # exact: the values are the sender's
            _seal(shard)
            stored[index] = shard
        output._mark_modified(op)
        # the sender's distribution comes along when every device receives its counterpart's shard
        topology = _topology_of(header["topology"])
        links = self._config.socket_connection_config
        whole = len(links) == self._device.get_num_devices() == topology.distribution_shape.mesh_size()
        if whole and all(c.sender_core.device_coord == c.receiver_core.device_coord for c in links):
            output._topology = topology

    def _receive_new(self, op: str) -> Tensor:
        """The next tensor sent to this end, in a tensor allocated from its header (the pipeline's receive)."""
        header, shards = self._take(op)
        output = allocate_tensor_on_device(
            TensorSpec(header["shape"], DataType[header["dtype"]], Layout[header["layout"]]), self._device
        )
        if header["padded"] is not None:
            output._padded_shape = Shape(header["padded"])
        self._usable(op, SocketEndpoint.RECEIVER, output, "output_tensor", fifo=False)
        self._acknowledge(None)
        self._write(op, output, header, shards)
        return output

    def synchronize(self) -> None:
        """Wait until the receiver has taken every tensor sent on this end (``ttnn.synchronize_device`` does it
        for every socket of a mesh)."""
        self._check_acks(block=True)


def _check_coords(owner: str, config: SocketConfig, sender_mesh, receiver_mesh) -> None:
    for side, mesh in (("sender_core", sender_mesh), ("receiver_core", receiver_mesh)):
        for c in config.socket_connection_config:
            row, col = getattr(c, side).device_coord
            if not (0 <= row < mesh[0] and 0 <= col < mesh[1]):
                raise ValidationError(
                    f"{owner}: config: {side.split('_')[0]} device {[row, col]} is outside the "
                    f"{side.split('_')[0]}'s {mesh[0]}x{mesh[1]} mesh"
                )


def create_socket_pair(
    sender_mesh_device: MeshDevice, receiver_mesh_device: MeshDevice, socket_config: SocketConfig
) -> tuple[MeshSocket, MeshSocket]:
    """A sender and a receiver socket between two meshes of this process (e.g. two submeshes)."""
    owner = "ttnn.create_socket_pair"
    ends = []
    queue: deque = deque()
    for device, endpoint in (
        (sender_mesh_device, SocketEndpoint.SENDER),
        (receiver_mesh_device, SocketEndpoint.RECEIVER),
    ):
        socket = MeshSocket.__new__(MeshSocket)
        socket._check(owner, device, socket_config)
        socket._pending, socket._queue, socket._peer, socket._rank = deque(), queue, None, 0
        socket._sent = socket._received = 0
        socket._endpoint = endpoint
        ends.append(socket)
    _check_coords(owner, socket_config, sender_mesh_device.shape.as_2d(), receiver_mesh_device.shape.as_2d())
    return ends[0], ends[1]


def _expect_socket(op: str, value) -> MeshSocket:
    if not isinstance(value, MeshSocket):
        raise op_error(op, "mesh_socket", "a ttnn.MeshSocket", type(value).__name__)
    return value


@ttnn_op("ttnn.experimental.send_async")
def send_async(input_tensor: Tensor, mesh_socket: MeshSocket) -> list:
    """Send each connected device's shard of ``input_tensor`` through the sender socket ``mesh_socket``; returns
    an empty list, as tt-metal's. Does not wait for the receiver (see the module docstring)."""
    op = "ttnn.experimental.send_async"
    tensor = expect_tensor(op, "input_tensor", input_tensor)
    _expect_socket(op, mesh_socket)._send(op, tensor)
    return []


@ttnn_op("ttnn.experimental.recv_async")
def recv_async(output_tensor: Tensor, mesh_socket: MeshSocket) -> list:
    """Receive the next tensor sent to the receiver socket ``mesh_socket`` into ``output_tensor`` (allocated with
    the sent tensor's spec); returns ``[output_tensor]``."""
    op = "ttnn.experimental.recv_async"
    tensor = expect_tensor(op, "output_tensor", output_tensor)
    _expect_socket(op, mesh_socket)._receive_into(op, tensor)
    return [tensor]


def complete_sends(device: MeshDevice | None = None) -> None:
    """Wait for the receipt of every tensor sent from ``device`` (every mesh: None) over a socket."""
    for socket in list(_live):
        if device is None or socket._device is device:
            socket.synchronize()


def check_unreceived() -> None:
    """Raise if a tensor sent to one of this rank's receiver sockets arrived and was never received."""
    for socket in list(_live):
        if socket._endpoint is SocketEndpoint.RECEIVER and _mpi.has_message(socket._peer, socket._tag + 1):
            raise _mpi.DistributedError(
                f"rank {socket._rank}: {socket!r}: rank {socket._peer} sent tensor #{socket._received} on it, which "
                "this rank never received (recv_async)"
            )


def _complete_at_exit() -> None:  # pragma: no cover - runs at a rank's exit (tested end to end)
    """A rank that ends with a tensor sent to it and never received, or with sends nobody took: say so and end
    the job (instead of MPI_Finalize failing on the message, or hanging)."""
    try:
        check_unreceived()
        complete_sends()
    except _mpi.DistributedError as exc:
        print(f"tttv2: error: {exc}", file=sys.stderr, flush=True)
        comm = _mpi.world()
        _mpi._record_error(comm.Get_rank(), str(exc))
        comm.Abort(1)
