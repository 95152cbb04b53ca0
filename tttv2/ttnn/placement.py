"""How a tensor is distributed over a mesh: one placement (shard on a dim, or replicate) per mesh axis."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .device import MeshShape
from .errors import ValidationError

__all__ = ["PlacementReplicate", "PlacementShard", "TensorTopology"]  # reshaped_topology is internal


@dataclass(frozen=True)
class PlacementShard:
    """Split the tensor along ``dim`` over one mesh axis."""

    dim: int

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int):
            raise ValidationError(f"PlacementShard: dim must be an int, got {self.dim!r}")

    def __repr__(self) -> str:
        return f"PlacementShard({self.dim})"


@dataclass(frozen=True)
class PlacementReplicate:
    """Give every device along one mesh axis the whole tensor."""

    def __repr__(self) -> str:
        return "PlacementReplicate()"


@dataclass(frozen=True)
class TensorTopology:
    """Placements per mesh axis plus the shape of the mesh they refer to (used to compose shards back)."""

    distribution_shape: MeshShape
    _placements: tuple

    def placements(self) -> list:
        return list(self._placements)

    @staticmethod
    def replicated(mesh_shape: MeshShape) -> TensorTopology:
        return TensorTopology(mesh_shape, tuple(PlacementReplicate() for _ in range(len(mesh_shape))))

    def __repr__(self) -> str:
        return f"TensorTopology(distribution_shape={self.distribution_shape!r}, placements={list(self._placements)!r})"


def reshaped_topology(
    topology: TensorTopology | None, old_shape, new_shape, *, inserted: tuple[int, int] | None = None
) -> TensorTopology | None:
    """The topology after each device's shard is reshaped from ``old_shape`` to ``new_shape``: a shard dim follows
    its data to its new index, and keeps its sign (a negative dim stays counted from the end, in the new rank).

    ``inserted=(at, count)`` says an unsqueeze inserts ``count`` size-1 dims before dim ``at`` (so even a size-1
    shard dim moves exactly); otherwise the dim is found by its position in the flat data: the new dim whose outer
    dims hold as many elements as the old dim's. When the shard dim ends up inside a merged or split dim (flattening
    a sharded gradient into a buffer, say), no dim of the new shape holds the shards' data as a whole: the shards
    are then placed on dim 0, i.e. the tensor reads as the device buffers stacked one after the other, which is
    what the devices hold, rather than on a dim that would interleave them.
    """
    old, new = [int(d) for d in old_shape], [int(d) for d in new_shape]
    if inserted is not None:
        return _moved_shard_dims(
            topology, old, len(new), lambda k: k + inserted[1] if k >= inserted[0] else k
        )
    return _moved_shard_dims(topology, old, len(new), lambda k: _followed_dim(k, old, new))


def permuted_topology(topology: TensorTopology | None, shape, order) -> TensorTopology | None:
    """The topology after each shard's dims are reordered (new dim ``i`` is old dim ``order[i]``, as in
    ``permute``): a shard dim moves with its data and keeps its sign."""
    order = list(order)
    return _moved_shard_dims(topology, [int(d) for d in shape], len(order), order.index)


def _moved_shard_dims(topology, old: list[int], new_rank: int, move) -> TensorTopology | None:
    """Each shard dim ``k`` (of a tensor of shape ``old``) moved to ``move(k)`` in a rank-``new_rank`` tensor."""
    if topology is None or not any(isinstance(p, PlacementShard) for p in topology.placements()):
        return topology
    placements = []
    for p in topology.placements():
        if not isinstance(p, PlacementShard):
            placements.append(p)
            continue
        if not -len(old) <= p.dim < len(old):
            raise ValueError(f"{p!r} does not fit a rank-{len(old)} tensor of shape {old}")
        j = move(p.dim % len(old))
        placements.append(PlacementShard(j if p.dim >= 0 else j - new_rank))
    return TensorTopology(topology.distribution_shape, tuple(placements))


def _followed_dim(k: int, old: list[int], new: list[int]) -> int:
    outer = math.prod(old[:k])
    same_outer = [j for j in range(len(new)) if math.prod(new[:j]) == outer]
    if not same_outer:
        return 0  # the sharded dim is cut: the device buffers stacked, outermost
    if old[k] != 1:
        return same_outer[-1]  # the size-1 dims before it have the same outer count: skip them
    # a size-1 dim among size-1 dims: keep its distance from the last of them (dims are added or removed in front)
    group_end = max(i for i in range(len(old)) if math.prod(old[:i]) == outer)
    return max(same_outer[0], same_outer[-1] - (group_end - k))
