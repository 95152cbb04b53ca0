"""How a tensor is distributed over a mesh: one placement (shard on a dim, or replicate) per mesh axis."""

from __future__ import annotations

from dataclasses import dataclass

from .device import MeshShape
from .errors import ValidationError

__all__ = ["PlacementReplicate", "PlacementShard", "TensorTopology"]


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
