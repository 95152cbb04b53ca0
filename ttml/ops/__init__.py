"""Deprecated ``ttml.ops``: differentiable ops are the plain ``ttnn.*`` ops now."""

from __future__ import annotations

import enum

from . import binary, loss, sample


class _ReduceType(enum.Enum):
    """Loss reduction; use ``reduction="none" | "mean" | "sum"`` of ``ttnn.cross_entropy_loss`` / ``ttnn.mse_loss``."""

    NONE = "none"
    MEAN = "mean"
    SUM = "sum"


__all__ = ["ReduceType", "binary", "loss", "sample"]


def __getattr__(name: str):
    if name == "ReduceType":
        from .._deprecation import deprecated

        deprecated("ttml.ops.ReduceType", "reduction='none' | 'mean' | 'sum'")
        return _ReduceType
    raise AttributeError(f"module 'ttml.ops' has no attribute {name!r}")
