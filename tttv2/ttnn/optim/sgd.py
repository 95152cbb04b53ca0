"""SGD with momentum, dampening, Nesterov and weight decay — ``torch.optim.SGD`` semantics, by the fused
in-place ``ttnn.sgd_step_``."""

from __future__ import annotations

from typing import Any

from ... import ttnn
from ..errors import ValidationError
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["SGD"]


def _non_negative(owner: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValidationError(f"{owner}: {name}: expected a number >= 0, got {value!r}")
    return float(value)


class SGD(Optimizer):
    """``g ← g + wd·θ``; with momentum ``buf ← g`` on the first step, then ``buf ← μ·buf + (1 − dampening)·g``;
    ``g ← g + μ·buf`` (Nesterov) or ``buf``; ``θ ← θ − lr·g``. Momentum buffers have the parameter's dtype."""

    _STATE_KEYS = frozenset({"step", "momentum_buffer"})

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
        }
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        super()._check_group(group)
        for name in ("momentum", "dampening", "weight_decay"):
            _non_negative("SGD", name, group[name])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValidationError("SGD: nesterov: needs momentum > 0 and dampening = 0")

    def _update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        momentum = float(group["momentum"])
        buffer = None
        first = "momentum_buffer" not in state
        if momentum > 0:
            if first:
                state["momentum_buffer"] = ttnn.zeros_like(param)
            buffer = state["momentum_buffer"]
        state["step"] = state.get("step", 0) + 1
        ttnn.sgd_step_(
            param,
            grad,
            buffer,
            lr=float(group["lr"]),
            momentum=momentum,
            dampening=float(group["dampening"]),
            nesterov=bool(group["nesterov"]),
            weight_decay=float(group["weight_decay"]),
            first_step=first,
        )
