"""A TTML-style model around a ``ttnn.nn`` module: ttml tensors in and out, ``parameters()`` as a name map."""

from __future__ import annotations

from ..autograd import Tensor, _value


class ModelShim:
    def __init__(self, module) -> None:
        self.module = module

    def __call__(self, *args, **kwargs) -> Tensor:
        out = self.module(*(_value(a) for a in args), **{k: _value(v) for k, v in kwargs.items()})
        return Tensor(out)

    def parameters(self) -> dict[str, Tensor]:
        """``{name: ttml Tensor}`` (TTML's NamedParameters); ``model.module.named_parameters()`` in the new API."""
        return {name: Tensor(p) for name, p in self.module.named_parameters()}

    def train(self) -> None:
        self.module.train()

    def eval(self) -> None:
        self.module.eval()
