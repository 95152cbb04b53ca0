"""``ttnn.autograd``: gradient tracking on ttnn tensors (see engine.py for the design)."""

from . import rules  # registers the backward rules of the ops
from .engine import (
    BackwardContext,
    Function,
    FunctionContext,
    RemovableHandle,
    enable_grad,
    is_grad_enabled,
    no_grad,
    queue_callback,
    register_backward,
    register_hook,
    register_non_differentiable,
    register_post_accumulate_grad_hook,
    set_grad_enabled,
)

__all__ = [
    "BackwardContext",
    "Function",
    "FunctionContext",
    "RemovableHandle",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "register_backward",
    "register_hook",
    "register_non_differentiable",
    "register_post_accumulate_grad_hook",
    "set_grad_enabled",
]
