"""Deprecated ``ttml.common.utils``: TTML's training-script helpers, forwarded to ``tttv2.ttnn``."""

from __future__ import annotations

import os
import random
import time

import numpy as np

from tttv2 import ttnn

from .._deprecation import deprecated
from ..autograd import AutoContext, Tensor

__all__ = [
    "PerformanceMeter",
    "build_logits_mask",
    "create_optimizer",
    "get_loss_over_devices",
    "get_tt_metal_home",
    "initialize_device",
    "no_grad",
    "round_up_to_tile",
    "set_seed",
]


def set_seed(seed: int = 42) -> None:
    """Seed Python's ``random``, numpy's global generator and ``ttnn.nn``'s stream."""
    deprecated("ttml.common.utils.set_seed", "ttnn.nn.manual_seed(seed) (and random / numpy seeds)")
    random.seed(seed)
    AutoContext._shared().set_seed(seed)


def get_tt_metal_home() -> str:
    return os.environ.get("TT_METAL_HOME") or os.path.expanduser("~/.tt-metal")


def round_up_to_tile(value: int, tile: int = 32) -> int:
    value, tile = int(value), int(tile)
    if tile < 1:
        raise ValueError(f"ttml.common.utils.round_up_to_tile: tile: expected an integer >= 1, got {tile}")
    return -(-value // tile) * tile


def initialize_device(yaml_config: dict) -> None:
    """Open the mesh of the config's ``device_config`` (fabric needs no set-up on the emulator)."""
    from .config import DeviceConfig

    device = DeviceConfig(yaml_config)
    AutoContext._shared().open_device(tuple(device.mesh_shape), device.device_ids)


def create_optimizer(model, yaml_config: dict):
    """AdamW from the config's ``training_config`` (``use_moreh_adamw`` gives the same AdamW: there is one)."""
    from ..optimizers import AdamW, AdamWConfig

    training = yaml_config.get("training_config") or {}
    config = AdamWConfig(
        lr=float(training.get("learning_rate", 3e-4)),
        beta1=float(training.get("beta1", 0.9)),
        beta2=float(training.get("beta2", 0.999)),
        epsilon=float(training.get("eps", 1e-8)),
        weight_decay=float(training.get("weight_decay", 0.01)),
    )
    return AdamW(model.parameters(), config)


def get_loss_over_devices(loss) -> float:
    """The mean of the loss over every device of the mesh."""
    deprecated(
        "ttml.common.utils.get_loss_over_devices", "loss.item() (the mean over the data-parallel group)"
    )
    value = loss._value if isinstance(loss, Tensor) else loss
    mesh = value.device()
    return float(ttnn.to_numpy(value, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)).mean())


def build_logits_mask(vocab_size: int, padded_vocab_size: int) -> Tensor:
    """``[1, 1, 1, padded]`` bfloat16: 0 on the vocabulary, 1e4 on the padding (``ttml.ops.sample.sample_op``)."""
    if not 0 < int(vocab_size) <= int(padded_vocab_size):
        raise ValueError(
            "ttml.common.utils.build_logits_mask: vocab_size: expected 0 < vocab_size <= padded_vocab_size "
            f"({padded_vocab_size}), got {vocab_size}"
        )
    mask = np.zeros((1, 1, 1, int(padded_vocab_size)), np.float32)
    mask[..., int(vocab_size) :] = 1e4
    return Tensor.from_numpy(mask, ttnn.TILE_LAYOUT, ttnn.bfloat16)


class PerformanceMeter:
    """Samples and tokens per second over the last ``window_size`` steps (``cfg`` has ``batch_size``,
    ``gradient_accumulation_steps`` and ``seq_len``)."""

    def __init__(self, cfg, window_size: int = 10) -> None:
        self.cfg = cfg
        self.window_size = int(window_size)
        self.steps: list[float] = []

    def step(self) -> None:
        self.steps = [*self.steps, time.perf_counter()][-self.window_size :]

    def get_metrics(self) -> tuple[float, float]:
        span = self.steps[-1] - self.steps[0] if len(self.steps) > 1 else 0.0
        if span == 0:
            return 0, 0
        samples = len(self.steps) * self.cfg.batch_size * self.cfg.gradient_accumulation_steps
        return samples / span, samples * self.cfg.seq_len / span


class no_grad:
    """TTML's ``no_grad()``, as a context manager or a decorator: ``ttnn.autograd.no_grad``."""

    def __init__(self) -> None:
        deprecated("ttml.common.utils.no_grad", "ttnn.autograd.no_grad()")
        self._scope = None

    def __enter__(self) -> no_grad:
        self._scope = ttnn.autograd.no_grad()
        self._scope.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._scope.__exit__(*exc)
        return False

    def __call__(self, func):
        def wrapper(*args, **kwargs):
            with no_grad():
                return func(*args, **kwargs)

        return wrapper
