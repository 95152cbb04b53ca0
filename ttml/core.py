"""Deprecated ``ttml.core``: use ``ttnn.nn.clip_grad_norm_`` (and ``ttnn.nn.parallel`` for ``ttml.core.distributed``)."""

from __future__ import annotations

from tttv2 import ttnn

from . import _core_distributed as distributed
from ._deprecation import deprecated
from .optimizers import _params

__all__ = ["clip_grad_norm", "distributed"]


def clip_grad_norm(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> float:
    deprecated("ttml.core.clip_grad_norm", "ttnn.nn.clip_grad_norm_(model.parameters(), max_norm)")
    return ttnn.nn.clip_grad_norm_(_params(parameters), max_norm, norm_type, error_if_nonfinite)
