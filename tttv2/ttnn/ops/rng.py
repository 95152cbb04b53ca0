"""``ttnn.manual_seed``: the per-core random seeds of the devices.

On hardware it programs the random number generators of the compute cores that serve "users" (ids 0–31), which
``ttnn.sampling`` and other on-device draws read. Every random op of the emulator takes its seed explicitly
(``ttnn.rand(seed=)``, ``ttnn.sample(seed=)``, the dropout seeds), so no emulated op reads these generators:
``manual_seed`` checks its arguments as ttnn documents them and records the seeds in each device's
``core_seeds`` (``{user id: seed}``); it changes no result.
"""

from __future__ import annotations

import numpy as np

from ..device import MeshDevice
from ..memory import CoreRangeSet
from ..tensor import Tensor
from ..types import DataType
from ._common import expect, expect_tensor, same_mesh, ttnn_op

__all__ = ["manual_seed"]

USERS = 32  # user (core) ids 0..31
_SEED_LIMIT = 2**32


def _scalar(op: str, arg: str, value, limit: int) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < limit
    expect(ok, op, arg, f"an integer in [0, {limit})", repr(value))
    return int(value)


def _values(op: str, arg: str, value: Tensor, limit: int) -> list[np.ndarray]:
    t = expect_tensor(op, arg, value, dtypes=(DataType.UINT32,))
    shards = [np.asarray(s).reshape(-1) for s in t.shards(op)]
    for shard in shards:
        bad = shard[shard >= limit]
        expect(bad.size == 0, op, arg, f"values in [0, {limit})", int(bad[0]) if bad.size else None)
    return shards


@ttnn_op("ttnn.manual_seed")
def manual_seed(seeds, device: MeshDevice | None = None, user_ids=None, sub_core_grids=None) -> None:
    """Seed the cores of ``user_ids`` (all 32 when None) with ``seeds``: one uint32 for every core, or a uint32
    tensor with one seed per id of the ``user_ids`` tensor. The devices are ``device``'s, or those of the tensors
    (a scalar seed without tensors needs ``device``)."""
    op = "ttnn.manual_seed"
    expect(
        sub_core_grids is None or isinstance(sub_core_grids, CoreRangeSet),
        op,
        "sub_core_grids",
        "None or a ttnn.CoreRangeSet",
        type(sub_core_grids).__name__,
    )
    tensors = {k: v for k, v in (("seeds", seeds), ("user_ids", user_ids)) if isinstance(v, Tensor)}
    if tensors:
        mesh = same_mesh(op, **tensors)
        expect(device is None or device is mesh, op, "device", f"None or the tensors' mesh {mesh}", device)
    else:
        expect(isinstance(device, MeshDevice), op, "device", "a MeshDevice when seeds is an integer", device)
        mesh = device
    devices = mesh.get_devices()
    if isinstance(seeds, Tensor):
        expect(
            isinstance(user_ids, Tensor), op, "user_ids", "a uint32 tensor when seeds is a tensor", user_ids
        )
        per_device = zip(_values(op, "seeds", seeds, _SEED_LIMIT), _values(op, "user_ids", user_ids, USERS))
        plans = []
        for seed_values, ids in per_device:
            expect(
                seed_values.size == ids.size,
                op,
                "seeds",
                f"one seed per user id ({ids.size})",
                f"{seed_values.size} seeds",
            )
            plans.append(dict(zip(ids.tolist(), seed_values.tolist())))
    else:
        seed = _scalar(op, "seeds", seeds, _SEED_LIMIT)
        if user_ids is None:
            ids = [list(range(USERS))] * len(devices)
        elif isinstance(user_ids, Tensor):
            ids = [shard.tolist() for shard in _values(op, "user_ids", user_ids, USERS)]
        else:
            ids = [[_scalar(op, "user_ids", user_ids, USERS)]] * len(devices)
        plans = [dict.fromkeys(device_ids, seed) for device_ids in ids]
    for chip, plan in zip(devices, plans, strict=True):
        chip.core_seeds.update(plan)
