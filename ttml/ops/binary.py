"""Deprecated ``ttml.ops.binary``: use ``ttnn.add`` / ``ttnn.subtract`` / ``ttnn.multiply`` / ``ttnn.divide``."""

from __future__ import annotations

from tttv2 import ttnn

from .._deprecation import deprecated
from ..autograd import Tensor, _value

__all__ = ["add", "div", "mul", "sub"]


def _binary(name: str, op, a, b) -> Tensor:
    deprecated(f"ttml.ops.binary.{name}", f"ttnn.{op.__name__}(a, b)", stacklevel=4)
    return Tensor(op(_value(a), _value(b)))


def add(a, b) -> Tensor:
    return _binary("add", ttnn.add, a, b)


def sub(a, b) -> Tensor:
    return _binary("sub", ttnn.subtract, a, b)


def mul(a, b) -> Tensor:
    return _binary("mul", ttnn.multiply, a, b)


def div(a, b) -> Tensor:
    return _binary("div", ttnn.divide, a, b)
