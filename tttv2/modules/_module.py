"""What every building block shares: construction from a resolved config, the ``forward(x, mode)`` dispatcher,
``__call__`` and idempotent weight loading. The per-mode paths themselves are the subclasses' own methods."""

from __future__ import annotations

import dataclasses

from tttv2.modules.lazy_weight import LazyWeight

MODES = ("decode", "prefill")


def mode_name(owner: str, mode) -> str:
    """'decode' / 'prefill' from a string or an enum whose value is one of them (TTTv1's ``Mode``)."""
    name = getattr(mode, "value", mode)
    if name not in MODES:
        raise ValueError(f"{owner}: mode must be 'decode' or 'prefill' (or a Mode enum), got {mode!r}")
    return name


def lazy_weights_of(config) -> list[LazyWeight]:
    """Every LazyWeight held by a config dataclass (directly, in a list/tuple, or in a nested config)."""
    found: list[LazyWeight] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, LazyWeight):
                found.append(item)
            elif dataclasses.is_dataclass(item) and not isinstance(item, type):
                found.extend(lazy_weights_of(item))
    return found


class TTModule:
    """Base class: ``config`` is the resolved config (a copy; the caller's object is never changed)."""

    CONFIG_CLASS: type = type(None)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    @classmethod
    def from_config(cls, config):
        """Power-user path: every field of the config is honoured, unset ones are resolved."""
        if not isinstance(config, cls.CONFIG_CLASS):
            raise TypeError(
                f"{cls.__name__}.from_config: config must be a {cls.CONFIG_CLASS.__name__}, got {type(config).__name__}"
            )
        module = object.__new__(cls)
        module._setup(config)
        return module

    def _setup(self, config) -> None:
        self.config = self._resolve_config(config)
        self._bind()

    @staticmethod
    def _resolve_config(config):  # pragma: no cover - every module defines its resolver
        raise NotImplementedError

    def _bind(self) -> None:
        """Choose the per-mode strategies once (bound methods), from the resolved config."""

    def load_device_weights(self) -> None:
        """Convert every weight now rather than on first use; calling it again does nothing."""
        for weight in lazy_weights_of(self.config):
            weight.get_device_weight()

    def forward(self, x, mode, *args, **kwargs):
        name = mode_name(type(self).__name__, mode)
        step = self.decode_forward if name == "decode" else self.prefill_forward
        return step(x, *args, **kwargs)
