"""Backward rule of the point-to-point transfer: the gradient travels back from the receiver to the sender."""

from __future__ import annotations

from ...ops import p2p
from ..engine import register_backward


@register_backward("ttnn.experimental.send_recv")
def send_recv_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    return {"input_tensor": p2p.send_recv(grad, x.device(), memory_config=x.memory_config())}
