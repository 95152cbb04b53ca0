"""AdamW (decoupled weight decay, optional AMSGrad) — ``torch.optim.AdamW`` semantics, by the fused in-place
``ttnn.adamw_step_``."""

from __future__ import annotations

from typing import Any

from ... import ttnn
from ..errors import ValidationError
from ..tensor import Tensor
from .optimizer import Optimizer
from .sgd import _non_negative

__all__ = ["AdamW"]


class AdamW(Optimizer):
    """``θ ← θ·(1 − lr·wd)``; ``m ← β1·m + (1 − β1)·g``; ``v ← β2·v + (1 − β2)·g²`` (AMSGrad: the running max of
    v is used); ``θ ← θ − lr/(1 − β1ᵗ) · m / (√(v/(1 − β2ᵗ)) + ε)``. State tensors have the parameter's dtype."""

    _STATE_KEYS = frozenset({"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
    _STATE_REQUIRED = frozenset({"exp_avg", "exp_avg_sq"})

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
        }
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        super()._check_group(group)
        betas = group["betas"]
        if not (
            isinstance(betas, (tuple, list)) and len(betas) == 2 and all(0.0 <= float(b) < 1.0 for b in betas)
        ):
            raise ValidationError(f"AdamW: betas: expected two numbers in [0, 1), got {betas!r}")
        _non_negative("AdamW", "eps", group["eps"])
        _non_negative("AdamW", "weight_decay", group["weight_decay"])

    def _update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        amsgrad = bool(group["amsgrad"])
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = ttnn.zeros_like(param)
            state["exp_avg_sq"] = ttnn.zeros_like(param)
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = ttnn.zeros_like(param)
        state["step"] += 1
        beta1, beta2 = (float(b) for b in group["betas"])
        ttnn.adamw_step_(
            param,
            grad,
            state["exp_avg"],
            state["exp_avg_sq"],
            state.get("max_exp_avg_sq") if amsgrad else None,
            lr=float(group["lr"]),
            beta1=beta1,
            beta2=beta2,
            eps=float(group["eps"]),
            weight_decay=float(group["weight_decay"]),
            step=state["step"],
            amsgrad=amsgrad,
        )
