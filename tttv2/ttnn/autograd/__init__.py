"""``ttnn.autograd``: gradient tracking on ttnn tensors (see engine.py for the design)."""

from . import rules  # registers the backward rules of the ops
from .engine import (
    BackwardContext,
    Function,
    FunctionContext,
    enable_grad,
    is_grad_enabled,
    no_grad,
    register_backward,
    register_non_differentiable,
    set_grad_enabled,
)

__all__ = [
    "BackwardContext",
    "Function",
    "FunctionContext",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "register_backward",
    "register_non_differentiable",
    "set_grad_enabled",
]
