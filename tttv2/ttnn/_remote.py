"""Shards of devices that live in another rank (a mesh spread over ``tttv2-run`` ranks, docs/distributed.md).

Under ``tttv2-run --np N`` one logical mesh spans the ranks: every rank holds the same ``Tensor`` objects with
one shard slot per device, but only its own devices' slots hold values. The others hold a *remote shard*: a
read-only array of the right shape and storage dtype whose every element is the same zero in memory (strides of
0), so it costs no memory. Ops compute the local devices only (:func:`~tttv2.ttnn.ops._common.map_shards` skips
remote slots; ops that loop over shards themselves compute throwaway values there, which the output ``Tensor``
drops again; a tensor's remote slots share one stand-in object, so helpers that compute each distinct array once
compute it once), and the collectives and host transfers fetch the values of remote devices from their owners over MPI
(:func:`full_shards`). Nothing here imports MPI.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..distributed._mesh import exchange_shards
from .numerics import store

__all__ = [
    "fill_remote",
    "full_shards",
    "full_stored_shards",
    "is_remote",
    "local_shards",
    "remote_like",
    "remote_shard",
    "skipped",
]

_ZEROS: dict[np.dtype, np.ndarray] = {}


def remote_shard(shape: Sequence[int], dtype) -> np.ndarray:
    """A read-only stand-in of ``shape`` for a device of another rank: zeros that take no memory."""
    dtype = np.dtype(dtype)
    base = _ZEROS.get(dtype)
    if base is None:
        base = np.zeros(1, dtype=dtype)
        base.flags.writeable = False
        _ZEROS[dtype] = base
    shape = tuple(int(d) for d in shape)
    return np.lib.stride_tricks.as_strided(base, shape=shape, strides=(0,) * len(shape), writeable=False)


def is_remote(array) -> bool:
    """Whether ``array`` is a remote shard (built by :func:`remote_shard`)."""
    if not isinstance(array, np.ndarray) or any(array.strides):
        return False
    base = _ZEROS.get(array.dtype)
    return base is not None and array.__array_interface__["data"][0] == base.__array_interface__["data"][0]


def remote_like(value):
    """A remote stand-in shaped like one device's result ``value`` (an array, or a tuple/list of them)."""
    if isinstance(value, np.ndarray):
        return remote_shard(value.shape, value.dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(remote_like(v) for v in value)
    return value


def skipped(mesh, count: int) -> frozenset:
    """The devices (of ``count`` per-device results on ``mesh``) an op may leave uncomputed: the ones other ranks
    emulate, except device 0 when this rank owns none of the mesh (one result gives the others' shape)."""
    if mesh is None or count != mesh.get_num_devices():
        return frozenset()
    remote = mesh.remote_indices()
    return remote - {0} if len(remote) == count else remote


def fill_remote(results: list, remote: frozenset) -> list:
    """``results`` with each remote slot replaced by a stand-in shaped like the first local result."""
    stand_in = remote_like(next(r for i, r in enumerate(results) if i not in remote))
    return [stand_in if i in remote else r for i, r in enumerate(results)]


def local_shards(tensor, op: str) -> list[np.ndarray]:
    """The shards of the devices this rank emulates (all of them unless the mesh spans ranks; the first one if
    this rank owns none of the mesh, whose results are then all remote anyway)."""
    shards = tensor.shards(op)
    mesh = tensor.device()
    remote = mesh.remote_indices() if mesh is not None else frozenset()
    mine = [s for i, s in enumerate(shards) if i not in remote]
    return mine or shards[:1]


def full_shards(tensor, op: str, groups: list[list[int]] | None = None) -> list[np.ndarray]:
    """Every device's shard of ``tensor`` with its values: the local ones as they are, the remote ones fetched
    from the ranks that own them (one MPI all-gather; every rank of the mesh must call it at the same point).

    ``groups`` (a collective's device groups): when each group lies within one rank, no rank needs another's
    values and nothing is exchanged (the ranks decide alike: they all know every device's owner)."""
    shards = tensor.shards(op)
    mesh = tensor.device()
    if mesh is None or not mesh.spans_ranks():
        return shards
    if groups is not None:
        owners = mesh.device_ranks()
        if all(len({owners[i] for i in group}) == 1 for group in groups):
            return shards
    return exchange_shards(mesh, shards, op)


def full_stored_shards(tensor, op: str) -> list:
    """Every device's shard of ``tensor`` as stored (``Tensor.stored_shards``: storage objects for bfloat16 and the
    block floats), the remote ones fetched from their owners: for host transfers and files that keep the stored
    form. A mesh that does not span ranks gives the stored shards themselves (no unpacking)."""
    mesh = tensor.device()
    if mesh is None or not mesh.spans_ranks():
        return tensor.stored_shards(op)
    values = full_shards(tensor, op)
    if tensor.dtype.is_packed:
        return [store(v, tensor.dtype) for v in values]
    return values
