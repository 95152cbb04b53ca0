"""Gradient checkpointing: keep a block's input only, recompute the block during backward.

``checkpoint(block, x, *args)`` runs ``block(x, *args)`` without recording a graph and records one node.
Its backward restores ``ttnn.nn``'s random stream to the state it had when the forward started — so every
dropout mask (and attention-dropout seed) is drawn again identically — recomputes the block with gradients
on a detached copy of ``x``, backpropagates the upstream gradient through it (the block's parameters
receive their gradients there), hands ``x`` its gradient, and puts the random stream back.
"""

from __future__ import annotations

from collections.abc import Callable

from ..autograd import Function, enable_grad
from ..errors import ValidationError
from ..tensor import Tensor
from . import _random
from .module import Module

__all__ = ["checkpoint"]


class _Recompute(Function):
    @staticmethod
    def forward(ctx, x, *params, fn, extra, rng_state):
        ctx.fn, ctx.extra, ctx.rng_state = fn, extra, rng_state
        ctx.save_for_backward(x, *params)  # params too: an in-place update before backward must raise
        return fn(x, *extra)

    @staticmethod
    def backward(ctx, grad):
        x = ctx.saved_tensors[0]
        needs_x = ctx.needs_input_grad[0]
        resume = _random.get_rng_state()
        _random.set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                x_again = x.detach()
                x_again.requires_grad = needs_x
                out = ctx.fn(x_again, *ctx.extra)
            if out.requires_grad:
                out.backward(grad)
        finally:
            _random.set_rng_state(resume)
        return (x_again.grad if needs_x else None,) + (None,) * (len(ctx.needs_input_grad) - 1)


def checkpoint(fn: Callable | Module, x: Tensor, *args, params=None) -> Tensor:
    """``fn(x, *args)`` with its activations recomputed in backward instead of kept.

    ``fn`` is a module (its parameters are found) or a function whose trainable tensors are passed as
    ``params``; the other ``args`` (e.g. an attention mask) get no gradient.
    """
    if not isinstance(x, Tensor):
        raise ValidationError(f"ttnn.nn.checkpoint: x: expected a ttnn.Tensor, got {type(x).__name__}")
    if params is None:
        params = list(fn.parameters()) if isinstance(fn, Module) else []
    state = _random.get_rng_state()
    return _Recompute.apply(x, *params, fn=fn, extra=tuple(args), rng_state=state)
