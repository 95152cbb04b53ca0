"""One logical mesh over the ranks: who owns which device, and the exchange of shards between owners.

``ttnn.open_mesh_device`` in a launched rank calls :func:`span_ranks`: the ranks first agree that they open the
same mesh (a header-checked all-gather, so ranks opening different meshes fail on every rank, naming both), then
each device gets its owner: by default device ``i`` (row-major) belongs to rank ``i // (devices / ranks)``, so an
8×4 mesh over 4 ranks gives each rank two mesh rows. A rank binding's ``mesh_devices`` (``TTTV2_MESH_DEVICES``)
names a rank's devices instead. :func:`exchange_shards` gives every rank the values of every device of a tensor
(the collectives and host transfers need them); MPI only moves bytes, the arithmetic stays the emulator's.
"""

from __future__ import annotations

import os

import numpy as np

from . import _mpi

__all__ = ["MESH_DEVICES_VARIABLE", "MESH_ID_VARIABLE", "exchange_shards", "span_ranks"]

MESH_DEVICES_VARIABLE = "TTTV2_MESH_DEVICES"
MESH_ID_VARIABLE = "TTTV2_MESH_ID"
_DEFAULT, _EXPLICIT, _INVALID = 0, 1, 2


def _refused(message: str) -> _mpi.DistributedError:
    """An error every rank of the mesh raises at the same point (see ``_mpi.every_rank``)."""
    return _mpi.every_rank(_mpi.DistributedError(message))


def _claims(n: int, size: int, rank: int) -> tuple[np.ndarray, str | None]:
    """This rank's claim on the mesh's ``n`` devices: a mode byte, then one byte per device (1: mine)."""
    claim = np.zeros(n + 1, dtype=np.uint8)
    raw = os.environ.get(MESH_DEVICES_VARIABLE, "").strip()
    if not raw:
        if n % size == 0:
            per = n // size
            claim[1 + rank * per : 1 + (rank + 1) * per] = 1
        return claim, None
    claim[0] = _EXPLICIT
    try:
        ids = [int(v) for v in raw.split(",")]
    except ValueError:
        ids = []
    bad = not ids or any(not 0 <= i < n for i in ids) or len(set(ids)) != len(ids)
    if bad:
        claim[0] = _INVALID
        return claim, (
            f"{MESH_DEVICES_VARIABLE}={raw!r} (mesh_devices of the rank binding): expected distinct "
            f"device ids in 0..{n - 1} of the {n}-device mesh"
        )
    claim[[1 + i for i in ids]] = 1
    return claim, None


def _mesh_id(rank: int) -> tuple[int, str | None]:
    raw = os.environ.get(MESH_ID_VARIABLE, "").strip()
    if not raw:
        return 0, None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        return (
            0,
            f"rank {rank}: {MESH_ID_VARIABLE}={raw!r} (mesh_id of the rank binding): expected a non-negative integer",
        )
    return value, None


_groups: dict[
    tuple[int, ...], object
] = {}  # (world, the ranks' mesh ids) -> this rank's communicator of its mesh


def _group(comm, mesh_ids: list[int], rank: int):
    """The communicator of the ranks that share this rank's mesh id: the world when all do, or when each rank has
    a mesh id of its own (nothing is exchanged then); otherwise split once per layout of mesh ids (every rank
    decides alike and splits at the same point)."""
    distinct = set(mesh_ids)
    if len(distinct) == 1 or len(distinct) == len(mesh_ids):
        return comm
    key = (id(comm), *mesh_ids)
    if key not in _groups:
        _groups[key] = comm.Split(mesh_ids[rank], rank)
    return _groups[key]


def span_ranks(mesh) -> None:
    """Make ``mesh`` (just opened, the same in every rank of its mesh id) one logical mesh over those ranks: set
    each device's owner. The ranks first exchange their mesh ids (``mesh_id`` of the rank binding, 0 by
    default): ranks with a mesh id of their own keep the whole mesh, the others share it. Raises
    :class:`~tttv2.distributed.DistributedError` on every rank of the mesh if its ranks open different meshes, if
    the mesh does not divide over them, or if the rank binding's ``mesh_devices`` do not partition it."""
    comm = _mpi.initialize()
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return
    mine, problem = _mesh_id(rank)
    ids = np.stack(_mpi.allgather_bytes(np.array([mine], dtype=np.int64), "ttnn.open_mesh_device (mesh ids)"))
    if problem is not None:
        raise _refused(problem)
    mesh_ids = [int(v) for v in ids.view(np.int64).reshape(-1)]
    members = [r for r in range(size) if mesh_ids[r] == mine]
    group = _group(comm, mesh_ids, rank)
    if len(members) == 1:
        return  # a mesh of this rank alone (tt-metal's one mesh per rank)
    _span(mesh, group, members, rank, mine, size)


def _span(mesh, group, members: list[int], rank: int, mesh_id: int, world: int) -> None:
    size, me = len(members), members.index(rank)
    n = mesh.get_num_devices()
    rows, cols = mesh.shape.as_2d()
    label = f"ttnn.open_mesh_device({mesh.shape!r}, {mesh.arch().name})"
    where = f"tttv2-run --np {size}" if size == world else f"mesh_id {mesh_id} (ranks {members})"
    claim, problem = _claims(n, size, me)
    claims = np.stack(_mpi.allgather_bytes_on(group, claim, label, members))
    if problem is not None:
        raise _refused(f"rank {rank}: {problem}")
    modes = claims[:, 0]
    invalid = [members[k] for k in range(size) if modes[k] == _INVALID]
    if invalid:
        raise _refused(
            f"rank {rank}: ttnn.open_mesh_device: the mesh_devices of rank {invalid[0]} ({MESH_DEVICES_VARIABLE}) "
            f"are not valid device ids of the {rows}x{cols} mesh"
        )
    explicit = [members[k] for k in range(size) if modes[k] == _EXPLICIT]
    if explicit and len(explicit) != size:
        missing = [r for r in members if r not in explicit]
        raise _refused(
            f"rank {rank}: ttnn.open_mesh_device: ranks {explicit} name their mesh_devices and ranks {missing} "
            "do not; a rank binding gives mesh_devices to every rank or to none"
        )
    if not explicit and n % size:
        raise _refused(
            f"rank {rank}: ttnn.open_mesh_device: the {rows}x{cols} mesh ({n} devices) does not divide over the "
            f"{size} ranks of {where}; open a mesh whose device count is a multiple of {size}, or give each rank "
            "its devices with mesh_devices in a --rank-binding file"
        )
    owned = claims[:, 1:].astype(np.int64)
    per_device = owned.sum(axis=0)
    for device in range(n):
        if per_device[device] != 1:
            holders = [members[k] for k in range(size) if owned[k, device]]
            raise _refused(
                f"rank {rank}: ttnn.open_mesh_device: device {device} of the {rows}x{cols} mesh is claimed by "
                f"ranks {holders} in the rank binding's mesh_devices (each device needs exactly one rank)"
            )
    owners = owned.argmax(axis=0)
    for device, k in zip(mesh.get_devices(), owners):
        device.owner = members[int(k)]
        device.local = members[int(k)] == rank
    mesh._ranks = (group, members)
    mesh._update_ownership()


def exchange_shards(mesh, shards: list[np.ndarray], op: str) -> list[np.ndarray]:
    """Every device's shard: this rank's own as they are, the others' from their owners (one all-gather of
    bytes, its header naming ``op`` and the shard layout, so ranks that run different collectives fail)."""
    group, members = mesh.rank_group()
    size, rank = len(members), members.index(_mpi.initialize().Get_rank())
    owners = [members.index(owner) for owner in mesh.device_ranks()]
    ref = shards[0]
    shape, dtype, nbytes = ref.shape, ref.dtype, ref.nbytes
    by_rank: list[list[int]] = [[] for _ in range(size)]
    for i, owner in enumerate(owners):
        by_rank[owner].append(i)
    slots = max(len(devices) for devices in by_rank)
    payload = np.zeros(slots * nbytes, dtype=np.uint8)
    for k, i in enumerate(by_rank[rank]):
        payload[k * nbytes : (k + 1) * nbytes] = (
            np.ascontiguousarray(shards[i], dtype=dtype).reshape(-1).view(np.uint8)
        )
    what = f"{op} ({len(owners)} shards of {list(shape)} {dtype})"
    gathered = _mpi.allgather_bytes_on(group, payload, what, members)
    out = list(shards)
    for owner, devices in enumerate(by_rank):
        if owner == rank:
            continue
        for k, i in enumerate(devices):
            shard = gathered[owner][k * nbytes : (k + 1) * nbytes].view(dtype).reshape(shape)
            shard.flags.writeable = False
            out[i] = shard
    return out
