"""Per-module hardware defaults: which dtype each weight group gets, which math fidelity and accumulation each
op group runs at, and where each tensor lives, for one device architecture and one mode.

Two modes, differing exactly where TTTv1's precision presets (``tttv1/tt/model_config.py``,
``ModelOptimizations.performance`` / ``.accuracy``) differ:

* ``performance``: the MLP's gate/up weights (ff1_3) in bfloat4_b at LoFi; every other decoder weight bfloat8_b
  and every other decoder matmul / decode SDPA at HiFi2 with fp32 accumulation; prefill SDPA at HiFi4.
* ``accuracy``: every decoder weight bfloat8_b and every decoder matmul and SDPA at HiFi4 with fp32 accumulation.

Groups TTTv1's presets do not touch (norms, embedding, LM head) are the same in both modes. Each module declares
which of its config fields belong to which group (``HardwareGroups``, the module class's ``HARDWARE``); the
presets themselves are the two tables below. Model-specific exceptions (TTTv1 keeps Qwen2.5-7B's attention in
bfloat16) are not module defaults: a model sets those fields itself, and a field the user set always wins.

Memory placement is descriptive: the resolver computes the exact (sharded) memory configs from the shapes;
``ModuleHardwareConfig.placement`` says which buffer and layout each one has, and
``placement_mismatches(resolved_config)`` checks the resolved config agrees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tttv2 import ttnn

__all__ = ["HW_MODES", "HardwareGroups", "MathSetting", "ModuleHardwareConfig", "Placement", "arch_name"]

HW_MODES = ("performance", "accuracy")


@dataclass(frozen=True)
class MathSetting:
    """How one op group computes: multiplier fidelity, fp32 accumulation in the destination registers, and
    accumulation in L1 by the packer (TTTv1's LoFi / HiFi2 / HiFi4 kernel configs)."""

    math_fidelity: Any  # ttnn.MathFidelity
    fp32_dest_acc_en: bool
    packer_l1_acc: bool

    def kernel_config(self, arch) -> Any:
        """The compute-kernel config of this setting for ``arch`` (a ``ttnn.Arch``)."""
        cls = (
            ttnn.BlackholeComputeKernelConfig
            if arch == ttnn.Arch.BLACKHOLE
            else ttnn.WormholeComputeKernelConfig
        )
        return cls(
            math_fidelity=self.math_fidelity,
            math_approx_mode=False,
            fp32_dest_acc_en=self.fp32_dest_acc_en,
            packer_l1_acc=self.packer_l1_acc,
        )


@dataclass(frozen=True)
class Placement:
    """Where a tensor lives: ``buffer`` "DRAM" or "L1", ``layout`` "interleaved", "width_sharded",
    "height_sharded" or "block_sharded"."""

    buffer: str
    layout: str

    def matches(self, memory_config) -> bool:
        return (
            memory_config.buffer_type.name == self.buffer
            and memory_config.memory_layout.name.lower() == self.layout
        )

    def __str__(self) -> str:
        return f"{self.buffer} {self.layout.replace('_', '-')}"


_LOFI = MathSetting(ttnn.MathFidelity.LoFi, fp32_dest_acc_en=False, packer_l1_acc=True)
_HIFI2 = MathSetting(ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True, packer_l1_acc=True)
_HIFI4 = MathSetting(ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True, packer_l1_acc=True)

# TTTv1's tensor groups: (performance, accuracy)
WEIGHT_PRESETS: dict[str, tuple[Any, Any]] = {
    "ff1_3": (ttnn.bfloat4_b, ttnn.bfloat8_b),
    "ff2": (ttnn.bfloat8_b, ttnn.bfloat8_b),
    "wqkv": (ttnn.bfloat8_b, ttnn.bfloat8_b),
    "wo": (ttnn.bfloat8_b, ttnn.bfloat8_b),
    "kv_cache": (ttnn.bfloat8_b, ttnn.bfloat8_b),
}
# TTTv1's op groups: (performance, accuracy)
MATH_PRESETS: dict[str, tuple[MathSetting, MathSetting]] = {
    "li_ff1_3": (_LOFI, _HIFI4),
    "li_ff2": (_HIFI2, _HIFI4),
    "li_qkv_decode": (_HIFI2, _HIFI4),
    "li_o_decode": (_HIFI2, _HIFI4),
    "sdpa_decode": (_HIFI2, _HIFI4),
    "li_qkv_prefill": (_HIFI2, _HIFI4),
    "li_o_prefill": (_HIFI2, _HIFI4),
    "sdpa_prefill": (_HIFI4, _HIFI4),
}

# product names (what TTTv1's determine_device_name returns) → architecture
_PRODUCTS = {
    **dict.fromkeys(("n150", "n300", "n150x4", "t3k", "tg"), ttnn.Arch.WORMHOLE_B0),
    **dict.fromkeys(("p150", "p300", "p150x4", "p150x8", "bhglx"), ttnn.Arch.BLACKHOLE),
    "wormhole_b0": ttnn.Arch.WORMHOLE_B0,
    "wormhole": ttnn.Arch.WORMHOLE_B0,
    "blackhole": ttnn.Arch.BLACKHOLE,
}


def _arch(owner: str, arch_or_mesh) -> Any:
    if isinstance(arch_or_mesh, ttnn.Arch):
        return arch_or_mesh
    if isinstance(arch_or_mesh, str) and arch_or_mesh.lower() in _PRODUCTS:
        return _PRODUCTS[arch_or_mesh.lower()]
    if hasattr(arch_or_mesh, "arch") and hasattr(arch_or_mesh, "get_num_devices"):
        return arch_or_mesh.arch()
    raise ValueError(
        f"{owner}: arch_or_mesh must be a ttnn.MeshDevice, a ttnn.Arch or one of "
        f"{', '.join(sorted(_PRODUCTS))} (case-insensitive), got {arch_or_mesh!r}"
    )


def arch_name(arch) -> str:
    return arch.name.lower()


@dataclass(frozen=True)
class HardwareGroups:
    """A module's declaration: each config field it takes a dtype or a compute-kernel config in, mapped to a
    preset group name (varies with the mode) or to a fixed value (the same in both modes); and the placement
    of each memory-config field."""

    dtypes: Mapping[str, Any] = field(default_factory=dict)
    math: Mapping[str, Any] = field(default_factory=dict)
    placement: Mapping[str, Placement] = field(default_factory=dict)

    def resolve(self, module: str, config_class: type, arch_or_mesh, mode: str) -> ModuleHardwareConfig:
        owner = f"{module}.get_default_hw_config"
        if mode not in HW_MODES:
            raise ValueError(f"{owner}: mode must be one of {', '.join(HW_MODES)}, got {mode!r}")
        arch = _arch(owner, arch_or_mesh)
        index = HW_MODES.index(mode)
        dtypes, math, groups = {}, {}, {}
        for name, spec in self.dtypes.items():
            dtypes[name] = WEIGHT_PRESETS[spec][index] if isinstance(spec, str) else spec
            groups[name] = spec if isinstance(spec, str) else "fixed"
        for name, spec in self.math.items():
            math[name] = MATH_PRESETS[spec][index] if isinstance(spec, str) else spec
            groups[name] = spec if isinstance(spec, str) else "fixed"
        return ModuleHardwareConfig(
            module=module,
            config_class=config_class,
            arch=arch_name(arch),
            mode=mode,
            dtypes=dtypes,
            math=math,
            placement=dict(self.placement),
            groups=groups,
        )


@dataclass(frozen=True)
class ModuleHardwareConfig:
    """One module's hardware defaults for one architecture and mode (see the module docstring).

    ``dtypes`` maps config fields to ttnn dtypes, ``math`` config fields to ``MathSetting`` (fidelity, fp32
    accumulation, L1 accumulation), ``placement`` memory-config fields to ``Placement``, ``groups`` each dtype /
    math field to its TTTv1 group ("ff1_3", "li_qkv_decode", …, or "fixed")."""

    module: str
    config_class: type
    arch: str
    mode: str
    dtypes: Mapping[str, Any]
    math: Mapping[str, MathSetting]
    placement: Mapping[str, Placement]
    groups: Mapping[str, str]

    def config_values(self) -> dict[str, Any]:
        """The config fields this sets and their values (dtypes, and compute-kernel configs for the arch)."""
        arch = _PRODUCTS[self.arch]
        values = dict(self.dtypes)
        values.update({name: setting.kernel_config(arch) for name, setting in self.math.items()})
        return values

    def apply(self, config):
        """A copy of ``config`` with these defaults in every dtype / compute-kernel field the user left None."""
        if not isinstance(config, self.config_class):
            raise TypeError(
                f"{self.module} hardware config: config must be a {self.config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        values = self.config_values()
        return dataclasses.replace(
            config, **{name: value for name, value in values.items() if getattr(config, name) is None}
        )

    def placement_mismatches(self, resolved_config) -> list[str]:
        """Memory-config fields of a resolved config whose buffer or layout differs from ``placement``."""
        wrong = []
        for name, placement in self.placement.items():
            memory_config = getattr(resolved_config, name)
            if not placement.matches(memory_config):
                got = f"{memory_config.buffer_type.name} {memory_config.memory_layout.name.lower()}"
                wrong.append(f"{name}: expected {placement}, got {got}")
        return wrong

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(field, group, value, detail) rows for display."""
        out = []
        for name, dtype in self.dtypes.items():
            out.append((name, self.groups[name], dtype.name, "dtype"))
        for name, setting in self.math.items():
            acc = "fp32" if setting.fp32_dest_acc_en else "16-bit"
            l1 = ", L1 acc" if setting.packer_l1_acc else ""
            out.append((name, self.groups[name], setting.math_fidelity.name, f"{acc} accumulation{l1}"))
        for name, placement in self.placement.items():
            out.append((name, "placement", str(placement), "memory"))
        return out

    def __str__(self) -> str:
        lines = [f"{self.module} hardware defaults ({self.arch}, {self.mode})"]
        lines += [
            f"  {name:<36} {group:<15} {value:<22} {detail}" for name, group, value, detail in self.rows()
        ]
        return "\n".join(lines)
