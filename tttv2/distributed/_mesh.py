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

__all__ = ["MESH_DEVICES_VARIABLE", "exchange_shards", "span_ranks"]

MESH_DEVICES_VARIABLE = "TTTV2_MESH_DEVICES"
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
            f"rank {rank}: {MESH_DEVICES_VARIABLE}={raw!r} (mesh_devices of the rank binding): expected distinct "
            f"device ids in 0..{n - 1} of the {n}-device mesh"
        )
    claim[[1 + i for i in ids]] = 1
    return claim, None


def span_ranks(mesh) -> None:
    """Make ``mesh`` (just opened, the same in every rank) one logical mesh over the ranks: set each device's
    owner. Raises :class:`~tttv2.distributed.DistributedError` on every rank if the ranks open different meshes,
    if the mesh does not divide over the ranks, or if the rank binding's ``mesh_devices`` do not partition it."""
    comm = _mpi.initialize()
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return
    n = mesh.get_num_devices()
    rows, cols = mesh.shape.as_2d()
    label = f"ttnn.open_mesh_device({mesh.shape!r}, {mesh.arch().name})"
    claim, problem = _claims(n, size, rank)
    claims = np.stack(_mpi.allgather_bytes(claim, label))
    if problem is not None:
        raise _refused(problem)
    modes = claims[:, 0]
    invalid = [r for r in range(size) if modes[r] == _INVALID]
    if invalid:
        raise _refused(
            f"rank {rank}: ttnn.open_mesh_device: the mesh_devices of rank {invalid[0]} ({MESH_DEVICES_VARIABLE}) "
            f"are not valid device ids of the {rows}x{cols} mesh"
        )
    explicit = [r for r in range(size) if modes[r] == _EXPLICIT]
    if explicit and len(explicit) != size:
        missing = [r for r in range(size) if modes[r] != _EXPLICIT]
        raise _refused(
            f"rank {rank}: ttnn.open_mesh_device: ranks {explicit} name their mesh_devices and ranks {missing} "
            "do not; a rank binding gives mesh_devices to every rank or to none"
        )
    if not explicit and n % size:
        raise _refused(
            f"rank {rank}: ttnn.open_mesh_device: the {rows}x{cols} mesh ({n} devices) does not divide over the "
            f"{size} ranks of tttv2-run --np {size}; open a mesh whose device count is a multiple of {size}, or "
            "give each rank its devices with mesh_devices in a --rank-binding file"
        )
    owned = claims[:, 1:].astype(np.int64)
    per_device = owned.sum(axis=0)
    for device in range(n):
        if per_device[device] != 1:
            holders = [r for r in range(size) if owned[r, device]]
            raise _refused(
                f"rank {rank}: ttnn.open_mesh_device: device {device} of the {rows}x{cols} mesh is claimed by "
                f"ranks {holders} in the rank binding's mesh_devices (each device needs exactly one rank)"
            )
    owners = owned.argmax(axis=0)
    for device, owner in zip(mesh.get_devices(), owners):
        device.owner = int(owner)
        device.local = int(owner) == rank
    mesh._update_ownership()


def exchange_shards(mesh, shards: list[np.ndarray], op: str) -> list[np.ndarray]:
    """Every device's shard: this rank's own as they are, the others' from their owners (one all-gather of
    bytes, its header naming ``op`` and the shard layout, so ranks that run different collectives fail)."""
    comm = _mpi.initialize()
    size, rank = comm.Get_size(), comm.Get_rank()
    owners = mesh.device_ranks()
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
    gathered = _mpi.allgather_bytes(payload, what)
    out = list(shards)
    for owner, devices in enumerate(by_rank):
        if owner == rank:
            continue
        for k, i in enumerate(devices):
            shard = gathered[owner][k * nbytes : (k + 1) * nbytes].view(dtype).reshape(shape)
            shard.flags.writeable = False
            out[i] = shard
    return out
