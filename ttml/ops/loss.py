"""Deprecated ``ttml.ops.loss``: use ``ttnn.cross_entropy_loss`` / ``ttnn.mse_loss``."""

from __future__ import annotations

from tttv2 import ttnn

from .._deprecation import deprecated
from ..autograd import Tensor, _value

__all__ = ["cross_entropy_loss", "mse_loss"]


def _reduction(reduce) -> str:
    from . import _ReduceType

    if reduce is None:
        return "mean"
    return reduce.value if isinstance(reduce, _ReduceType) else str(reduce).lower()


def mse_loss(prediction, target, reduce=None) -> Tensor:
    deprecated("ttml.ops.loss.mse_loss", "ttnn.mse_loss(prediction, target, reduction='mean')")
    return Tensor(ttnn.mse_loss(_value(prediction), _value(target), reduction=_reduction(reduce)))


def cross_entropy_loss(logits, target, reduce=None) -> Tensor:
    deprecated(
        "ttml.ops.loss.cross_entropy_loss", "ttnn.cross_entropy_loss(logits, target, reduction='mean')"
    )
    return Tensor(ttnn.cross_entropy_loss(_value(logits), _value(target), reduction=_reduction(reduce)))
