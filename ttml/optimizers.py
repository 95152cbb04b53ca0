"""Deprecated ``ttml.optimizers``: use ``ttnn.optim.SGD`` / ``ttnn.optim.AdamW`` (keyword hyper-parameters,
PyTorch-style)."""

from __future__ import annotations

from dataclasses import dataclass

from tttv2 import ttnn

from ._deprecation import deprecated
from .autograd import _value

__all__ = ["SGD", "AdamW", "AdamWConfig", "SGDConfig"]


@dataclass
class SGDConfig:
    lr: float = 1e-3
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    @staticmethod
    def make(lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False) -> SGDConfig:
        deprecated("ttml.optimizers.SGDConfig.make", "ttnn.optim.SGD(params, lr=..., momentum=..., ...)")
        return SGDConfig(float(lr), float(momentum), float(dampening), float(weight_decay), bool(nesterov))


@dataclass
class AdamWConfig:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    weight_decay: float = 0.01
    amsgrad: bool = False
    stochastic_rounding: bool = False

    @staticmethod
    def make(
        lr=1e-3,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-8,
        weight_decay=0.01,
        amsgrad=False,
        stochastic_rounding=False,
    ) -> AdamWConfig:
        deprecated(
            "ttml.optimizers.AdamWConfig.make",
            "ttnn.optim.AdamW(params, lr=..., betas=(b1, b2), eps=..., ...)",
        )
        return AdamWConfig(
            float(lr),
            float(beta1),
            float(beta2),
            float(epsilon),
            float(weight_decay),
            bool(amsgrad),
            bool(stochastic_rounding),
        )


def _params(parameters) -> dict:
    """TTML passed ``model.parameters()``: a name → tensor map (ttml or ttnn tensors)."""
    if isinstance(parameters, dict):
        return {name: _value(t) for name, t in parameters.items()}
    return {f"param{i}": _value(t) for i, t in enumerate(parameters)}


def _expect_config(owner: str, config, expected: type, other: str) -> None:
    if not isinstance(config, expected):
        hint = (
            f" (an {type(config).__name__} goes with ttml.optimizers.{other})"
            if type(config).__name__.startswith(other)
            else ""
        )
        raise TypeError(
            f"ttml.optimizers.{owner}: config: expected a ttml.optimizers.{expected.__name__}, got "
            f"{type(config).__name__}{hint}"
        )


class SGD(ttnn.optim.SGD):
    def __init__(self, parameters, config: SGDConfig) -> None:
        deprecated("ttml.optimizers.SGD(params, config)", "ttnn.optim.SGD(model.parameters(), lr=..., ...)")
        _expect_config("SGD", config, SGDConfig, "AdamW")
        super().__init__(
            _params(parameters),
            lr=config.lr,
            momentum=config.momentum,
            dampening=config.dampening,
            weight_decay=config.weight_decay,
            nesterov=config.nesterov,
        )


class AdamW(ttnn.optim.AdamW):
    def __init__(self, parameters, config: AdamWConfig) -> None:
        deprecated(
            "ttml.optimizers.AdamW(params, config)", "ttnn.optim.AdamW(model.parameters(), lr=..., ...)"
        )
        _expect_config("AdamW", config, AdamWConfig, "SGD")
        if config.stochastic_rounding:
            deprecated(
                "AdamWConfig.stochastic_rounding",
                "round-to-nearest updates (stochastic rounding is not emulated)",
            )
        super().__init__(
            _params(parameters),
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=config.epsilon,
            weight_decay=config.weight_decay,
            amsgrad=config.amsgrad,
        )
