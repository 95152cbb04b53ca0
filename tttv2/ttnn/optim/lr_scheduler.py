"""Learning-rate schedulers: each is a function of the step count that sets ``group["lr"]`` of an optimizer.

``scheduler.step()`` after ``optimizer.step()`` advances the count by one; the learning rate of step t is
``base_lr · factor(t)`` (``base_lr`` is each group's lr when the scheduler was made). Formulas:

* :class:`ConstantScheduler`: ``factor = 1``;
* :class:`WarmupLinearScheduler`: ``t / warmup_steps`` while ``t < warmup_steps``, then a straight line from 1
  down to ``end_factor`` at ``total_steps`` (held there afterwards);
* :class:`CosineScheduler`: optional linear warm-up as above, then
  ``eta_min + (base − eta_min) · ½ (1 + cos(π · (t − W) / (T − W)))`` with ``T = total_steps``, held at
  ``eta_min`` after T (with W = 0 this is ``torch.optim.lr_scheduler.CosineAnnealingLR(T_max=T)``);
* :class:`LambdaScheduler`: ``factor = fn(t)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import ValidationError
from .optimizer import Optimizer

__all__ = ["ConstantScheduler", "CosineScheduler", "LRScheduler", "LambdaScheduler", "WarmupLinearScheduler"]


def _count(owner: str, name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(f"{owner}: {name}: expected an int >= {minimum}, got {value!r}")
    return value


class LRScheduler:
    """Base class: subclasses define :meth:`lr_at` (the learning rate of step ``t`` for one base lr)."""

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise ValidationError(
                f"{type(self).__name__}: optimizer: expected a ttnn.optim.Optimizer, got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        self.base_lrs = [float(g.setdefault("initial_lr", g["lr"])) for g in optimizer.param_groups]
        self.last_step = 0
        self._apply()

    def lr_at(self, step: int, base_lr: float) -> float:
        raise NotImplementedError

    def _apply(self) -> None:
        self._last_lr = [self.lr_at(self.last_step, base) for base in self.base_lrs]
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def step(self) -> None:
        """Advance one step and set the optimizer's learning rates."""
        self.last_step += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {"last_step": self.last_step, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict) -> None:
        self.last_step = int(state["last_step"])
        self.base_lrs = [float(b) for b in state["base_lrs"]]
        self._apply()


class ConstantScheduler(LRScheduler):
    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr


class LambdaScheduler(LRScheduler):
    def __init__(self, optimizer: Optimizer, fn: Callable[[int], float]) -> None:
        if not callable(fn):
            raise ValidationError(f"LambdaScheduler: fn: expected a callable step -> factor, got {fn!r}")
        self.fn = fn
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * float(self.fn(step))


def _warmup(step: int, warmup: int) -> float | None:
    return step / warmup if step < warmup else None


class WarmupLinearScheduler(LRScheduler):
    """Linear warm-up from 0 over ``warmup_steps``, then linear decay to ``end_factor · base`` at ``total_steps``."""

    def __init__(
        self, optimizer: Optimizer, warmup_steps: int, total_steps: int, end_factor: float = 0.0
    ) -> None:
        owner = "WarmupLinearScheduler"
        self.warmup_steps = _count(owner, "warmup_steps", warmup_steps)
        self.total_steps = _count(owner, "total_steps", total_steps, self.warmup_steps + 1)
        self.end_factor = float(end_factor)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        w = _warmup(step, self.warmup_steps)
        if w is not None:
            return base_lr * w
        frac = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return base_lr * (1.0 + (self.end_factor - 1.0) * frac)


class CosineScheduler(LRScheduler):
    """Cosine decay from ``base`` to ``eta_min`` over ``total_steps`` (after an optional linear warm-up)."""

    def __init__(
        self, optimizer: Optimizer, total_steps: int, eta_min: float = 0.0, warmup_steps: int = 0
    ) -> None:
        owner = "CosineScheduler"
        self.warmup_steps = _count(owner, "warmup_steps", warmup_steps)
        self.total_steps = _count(owner, "total_steps", total_steps, self.warmup_steps + 1)
        self.eta_min = float(eta_min)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        w = _warmup(step, self.warmup_steps)
        if w is not None:
            return base_lr * w
        frac = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return self.eta_min + (base_lr - self.eta_min) * 0.5 * (1.0 + math.cos(math.pi * frac))
