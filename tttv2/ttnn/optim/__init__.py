"""``ttnn.optim``: optimizers that update ttnn parameters in place with fused device ops, and learning-rate
schedulers. See docs/training.md."""

from .adamw import AdamW
from .lr_scheduler import (
    ConstantScheduler,
    CosineScheduler,
    LambdaScheduler,
    LRScheduler,
    WarmupLinearScheduler,
)
from .optimizer import Optimizer
from .sgd import SGD

__all__ = [
    "SGD",
    "AdamW",
    "ConstantScheduler",
    "CosineScheduler",
    "LRScheduler",
    "LambdaScheduler",
    "Optimizer",
    "WarmupLinearScheduler",
]
