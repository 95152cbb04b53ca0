"""``ttnn.experimental`` and ``ttnn.transformer``: sub-namespaces assembled from the op modules' name lists."""

from __future__ import annotations

import types

from .ops import OP_MODULES
from .program_configs import (
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig,
    WormholeComputeKernelConfig,
)
from .types import UnaryOpType, UnaryWithParam

__all__ = ["experimental", "transformer", "tt_lib_tensor"]


def _namespace(name: str, attr: str) -> types.ModuleType:
    module = types.ModuleType(f"tttv2.ttnn.{name}", f"ttnn.{name} on the emulator")
    names = []
    for ops_module in OP_MODULES:
        for entry in getattr(ops_module, attr, ()):
            # an entry is the op's name, or (its name here, the function's name in the module) where the module
            # already has a top-level op of that name (``ttnn.experimental.typecast`` beside ``ttnn.typecast``)
            op_name, function = entry if isinstance(entry, tuple) else (entry, entry)
            setattr(module, op_name, getattr(ops_module, function))
            names.append(op_name)
    module.__all__ = sorted(names)
    return module


experimental = _namespace("experimental", "__experimental__")
transformer = _namespace("transformer", "__transformer__")

# The tt_lib era's names, which older demos (tt-metal's T3000 Mixtral) still call: ``ttnn.experimental.operations.
# primary`` (its matmul and the program configs it took) and ``ttnn.experimental.tensor`` (tt_lib's ``tensor``
# module: the bound types, its fused-activation enum and its own ops). docs/emulator.md, "The T3000 demos' older ops".
_primary = _namespace("experimental.operations.primary", "__primary__")
for _config in (
    MatmulMultiCoreReuseProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
):
    setattr(_primary, _config.__name__, _config)
    _primary.__all__.append(_config.__name__)
_operations = types.ModuleType(
    "tttv2.ttnn.experimental.operations", "ttnn.experimental.operations on the emulator"
)
_operations.primary = _primary
_operations.__all__ = ["primary"]
experimental.operations = _operations
# packages, so ``import ttnn.experimental.operations.primary`` finds the children (registered in sys.modules by
# the package's __init__)
experimental.__path__ = []
_operations.__path__ = []


def tt_lib_tensor(bound: types.ModuleType) -> types.ModuleType:
    """``ttnn.experimental.tensor``: the public names of ``bound`` (``ttnn._ttnn.tensor``, the bound types),
    ``FusibleActivation`` (tt_lib's name for ``UnaryOpType``), ``FusibleActivationWithParam`` (``UnaryWithParam``),
    ``WormholeComputeKernelConfig`` (bound there too in that era) and the ops the op modules list in ``__tt_lib_tensor__``."""
    module = _namespace("experimental.tensor", "__tt_lib_tensor__")
    for name, value in vars(bound).items():
        if not name.startswith("_"):
            setattr(module, name, value)
            module.__all__.append(name)
    module.FusibleActivation = UnaryOpType
    module.FusibleActivationWithParam = UnaryWithParam
    module.WormholeComputeKernelConfig = WormholeComputeKernelConfig
    module.__all__ = sorted(
        [*module.__all__, "FusibleActivation", "FusibleActivationWithParam", "WormholeComputeKernelConfig"]
    )
    return module
