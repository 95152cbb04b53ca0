"""What every building block shares: construction from a resolved config, the ``forward(x, mode)`` dispatcher,
``__call__`` and idempotent weight loading. The per-mode paths themselves are the subclasses' own methods."""

from __future__ import annotations

import dataclasses

from tttv2 import ttnn
from tttv2.modules._hardware import HardwareGroups, ModuleHardwareConfig
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


def _mesh_of(owner: str, config):
    """The mesh a config will resolve to (its own, a weight's device, the default device), for the architecture
    hardware defaults depend on."""
    candidates = [config.mesh_device, *(w.device for w in lazy_weights_of(config)), ttnn.GetDefaultDevice()]
    for mesh in candidates:
        if mesh is not None:
            return mesh
    raise ValueError(
        f"{owner}: hw_mode needs the mesh (its architecture decides the defaults): set mesh_device, a weight's "
        "device or ttnn.SetDefaultDevice"
    )


class TTModule:
    """Base class: ``config`` is the resolved config (a copy; the caller's object is never changed)."""

    CONFIG_CLASS: type = type(None)
    # which config fields take the per-op-group dtypes / compute kernels / placements (see _hardware.py)
    HARDWARE: HardwareGroups | None = None
    hw_config: ModuleHardwareConfig | None = None  # the hardware defaults applied at construction, if any

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    @classmethod
    def from_config(cls, config, *, hw_mode=None):
        """Power-user path: every field of the config is honoured, unset ones are resolved. ``hw_mode``
        ("performance" / "accuracy", or a ``ModuleHardwareConfig``) fills the dtype and compute-kernel fields
        left None from ``get_default_hw_config`` first."""
        if not isinstance(config, cls.CONFIG_CLASS):
            raise TypeError(
                f"{cls.__name__}.from_config: config must be a {cls.CONFIG_CLASS.__name__}, got {type(config).__name__}"
            )
        module = object.__new__(cls)
        module._setup(config, hw_mode)
        return module

    @classmethod
    def get_default_hw_config(cls, arch_or_mesh, mode: str = "performance") -> ModuleHardwareConfig:
        """This module's hardware defaults for a device architecture (a mesh, a ``ttnn.Arch`` or a name such as
        "wormhole_b0", "T3K", "blackhole") in ``mode`` ("performance" / "accuracy")."""
        if cls.HARDWARE is None:
            raise TypeError(
                f"{cls.__name__}.get_default_hw_config: {cls.__name__} declares no hardware defaults"
            )
        return cls.HARDWARE.resolve(cls.__name__, cls.CONFIG_CLASS, arch_or_mesh, mode)

    def _setup(self, config, hw_mode=None) -> None:
        if hw_mode is not None:
            hw = hw_mode
            if not isinstance(hw_mode, ModuleHardwareConfig):
                hw = self.get_default_hw_config(_mesh_of(type(self).__name__, config), hw_mode)
            config = hw.apply(config)
            self.hw_config = hw
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
