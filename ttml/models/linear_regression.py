"""Deprecated ``ttml.models.linear_regression``: use ``ttnn.nn.Linear(in_features, out_features)``."""

from __future__ import annotations

from tttv2 import ttnn

from .._deprecation import deprecated
from ..autograd import AutoContext
from ._shim import ModelShim

__all__ = ["create_linear_regression_model"]


def create_linear_regression_model(in_features: int, out_features: int) -> ModelShim:
    """A bfloat16 linear layer (as TTML built it) called with ttml tensors."""
    deprecated(
        "ttml.models.linear_regression.create_linear_regression_model",
        "ttnn.nn.Linear(in_features, out_features, device=mesh)",
    )
    device = AutoContext._shared().get_device()
    return ModelShim(ttnn.nn.Linear(in_features, out_features, device=device, dtype=ttnn.bfloat16))
