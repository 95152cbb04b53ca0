"""``tttv2.ttnn``: the ttnn Python API on a CPU emulator of a Tenstorrent mesh.

``from tttv2 import ttnn`` gives the emulator. With ``TTTV2_BACKEND=ttnn`` (and Tenstorrent's ttnn installed)
it gives the real module instead, so the same code runs on hardware. A plain ``import ttnn`` is resolved by the
import hook installed with the package (``_tttv2_ttnn_import``): the real ttnn where it is importable, else this
emulator. ``install_as_ttnn()`` forces the emulator as ``ttnn`` in the running process.
"""

from __future__ import annotations

import os as _os
import sys as _sys

_BACKEND = _os.environ.get("TTTV2_BACKEND", "").strip().lower() or "emulator"
if _BACKEND not in ("emulator", "ttnn"):
    raise ImportError(f"TTTV2_BACKEND must be 'emulator' or 'ttnn', got {_BACKEND!r}")

if _BACKEND == "ttnn":  # pragma: no cover - needs Tenstorrent's ttnn and hardware
    try:
        import ttnn as _real_ttnn
    except ImportError as _exc:
        raise ImportError(
            "TTTV2_BACKEND=ttnn asks for Tenstorrent's real ttnn package, which is not installed; "
            "unset TTTV2_BACKEND to use the emulator"
        ) from _exc
    if getattr(_real_ttnn, "IS_TTTV2_EMULATOR", False):
        raise ImportError(
            "TTTV2_BACKEND=ttnn, but `import ttnn` resolves to the emulator (install_as_ttnn was called)"
        )
    _sys.modules[__name__] = _real_ttnn
else:
    from . import _kernels, autograd, memory_tracker, nn, ops, optim
    from .device import *
    from .device import ARCH_SPECS, MeshDevice, MeshShape
    from .distributed_context import *
    from .distribution import *
    from .errors import *
    from .memory import *
    from .namespaces import experimental, transformer
    from .namespaces import tt_lib_tensor as _tt_lib_tensor
    from .ops._common import OpTrace
    from .placement import *
    from .program_configs import *
    from .tensor import Shape, Tensor
    from .types import *

    IS_TTTV2_EMULATOR = True

    for _module in ops.OP_MODULES:
        for _name in _module.__all__:
            globals()[_name] = getattr(_module, _name)
    _sys.modules[f"{__name__}.experimental"] = experimental
    _sys.modules[f"{__name__}.transformer"] = transformer

    from ._compat import _ttnn, cluster, install_as_ttnn, uninstall_as_ttnn

    # the tt_lib era's ``ttnn.experimental.tensor`` (``ttnn.experimental.tensor.Tensor`` in older models'
    # annotations, evaluated when their modules load; ``FusibleActivation``, ``mul``): the bound types of
    # ``ttnn._ttnn.tensor`` and tt_lib's own names. ``ttnn.experimental.operations.primary`` (``matmul_1d``) too.
    experimental.tensor = _tt_lib_tensor(_ttnn.tensor)
    _sys.modules[f"{__name__}.experimental.tensor"] = experimental.tensor
    _sys.modules[f"{__name__}.experimental.operations"] = experimental.operations
    _sys.modules[f"{__name__}.experimental.operations.primary"] = experimental.operations.primary
