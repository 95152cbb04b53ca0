"""Calls from a lower layer of the emulator into a higher one, without an import.

The emulator is layered (docs/emulator.md, "Layers"): types/storage/numerics at the bottom, then ``tensor``, the
autograd engine, ``ops``, ``distribution`` and the autograd rules, then ``nn``/``optim``. A module imports only
from layers below it. Where a lower layer must call up (``Tensor.__add__`` runs ``ttnn.add``, the autograd engine
adds gradients with ``ttnn.add``, ``synchronize_device`` waits for socket sends), the higher module hands its
function in here when it loads (``provide``) and the lower one looks it up by name when it runs (``upcall``).
tests/ttnn/test_layers.py checks that no import goes up instead.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import ValidationError

_PROVIDED: dict[str, Callable] = {}


def provide(**functions: Callable) -> None:
    """Register ``name=function`` pairs of a higher layer; called once at the bottom of the module defining them."""
    _PROVIDED.update(functions)


def upcall(name: str) -> Callable:
    """The function a higher layer registered as ``name``."""
    try:
        return _PROVIDED[name]
    except KeyError:
        raise ValidationError(
            f"tttv2.ttnn: {name!r} is provided by a layer that has not been loaded; import tttv2.ttnn first"
        ) from None
