"""Names that make the emulator usable as ``ttnn``: ``install_as_ttnn``, ``ttnn.cluster``, ``ttnn._ttnn``."""

from __future__ import annotations

import enum
import sys
import types

from . import device as _device
from .distribution import dump_tensor, load_tensor
from .errors import ValidationError
from .types import Arch

__all__ = ["cluster", "install_as_ttnn", "uninstall_as_ttnn"]


class ClusterType(enum.Enum):
    INVALID = 0
    N150 = 1
    N300 = 2
    T3K = 3
    GALAXY = 4
    P100 = 5
    P150 = 6
    P150_X2 = 7
    P150_X4 = 8
    P150_X8 = 9
    N300_2x2 = 10
    BLACKHOLE_GALAXY = 11


_cluster_devices = {"count": None, "arch": None}


def set_cluster(num_devices: int | None, arch=None) -> None:
    """Tell ``ttnn.cluster`` which system it emulates (default: the largest mesh opened so far)."""
    _cluster_devices["count"] = num_devices
    _cluster_devices["arch"] = arch


def _get_cluster_type() -> ClusterType:
    """The system the emulator stands for: set_cluster(), else the default device, else the last opened mesh."""
    count, arch = _cluster_devices["count"], _cluster_devices["arch"]
    mesh = _device._default_device or _device._last_opened
    if count is None:
        count = mesh.get_num_devices() if mesh is not None else 1
    if arch is None:
        arch = mesh.arch() if mesh is not None else Arch.WORMHOLE_B0
    if arch is Arch.BLACKHOLE:
        table = {
            1: ClusterType.P150,
            2: ClusterType.P150_X2,
            4: ClusterType.P150_X4,
            8: ClusterType.P150_X8,
            32: ClusterType.BLACKHOLE_GALAXY,
        }
    else:
        table = {
            1: ClusterType.N150,
            2: ClusterType.N300,
            4: ClusterType.N300_2x2,
            8: ClusterType.T3K,
            32: ClusterType.GALAXY,
        }
    return table.get(count, ClusterType.INVALID)


cluster = types.ModuleType("tttv2.ttnn.cluster", "ttnn.cluster on the emulator")
cluster.ClusterType = ClusterType
cluster.get_cluster_type = _get_cluster_type
cluster.set_cluster = set_cluster


def _dump_tensor_flatbuffer(file_name, tensor) -> None:
    dump_tensor(file_name, tensor)


def _load_tensor_flatbuffer(file_name, device=None):
    return load_tensor(file_name, device=device)


# Where real ttnn keeps its bound types (tt-metal's ttnn/ttnn/types.py re-exports them from these submodules);
# code reaches them there in annotations, e.g. ``-> ttnn._ttnn.tensor.MemoryConfig``. Names the emulator lacks
# are left out rather than faked.
_TTNN_SUBMODULES = {
    "tensor": (
        "Tensor",
        "DataType",
        "Layout",
        "StorageType",
        "MemoryConfig",
        "TensorMemoryLayout",
        "BufferType",
        "ShardSpec",
        "ShardOrientation",
        "MathFidelity",
        "CoreCoord",
        "CoreRange",
        "CoreRangeSet",
    ),
    "types": ("Shape", "DRAM_MEMORY_CONFIG", "L1_MEMORY_CONFIG", "CoreGrid"),
    "multi_device": ("MeshDevice", "MeshShape", "MeshCoordinate"),
    "operations.core": ("WormholeComputeKernelConfig", "DeviceComputeKernelConfig"),
    "activation": ("UnaryWithParam", "UnaryOpType"),
}


def _build_ttnn_namespace() -> types.ModuleType:
    """``ttnn._ttnn`` and its submodules, holding the emulator's classes under real ttnn's paths. Each is also
    registered in ``sys.modules`` (as ``tttv2.ttnn._ttnn...``) so ``import ttnn._ttnn.tensor`` finds it."""
    package = sys.modules[__name__.rpartition(".")[0]]
    root = types.ModuleType("tttv2.ttnn._ttnn", "ttnn._ttnn on the emulator")
    modules = {"tttv2.ttnn._ttnn": root, "tttv2.ttnn.cluster": cluster}
    for dotted, names in _TTNN_SUBMODULES.items():
        parent = root
        for part in dotted.split("."):
            name = f"{parent.__name__}.{part}"
            if name not in modules:
                modules[name] = types.ModuleType(name)
                setattr(parent, part, modules[name])
            parent.__path__ = []  # a package: `import ttnn._ttnn.tensor` looks the child up through it
            parent = modules[name]
        for attr in names:
            setattr(parent, attr, getattr(package, attr))
    root.tensor.dump_tensor_flatbuffer = _dump_tensor_flatbuffer
    root.tensor.load_tensor_flatbuffer = _load_tensor_flatbuffer
    for name, module in modules.items():
        sys.modules.setdefault(name, module)
    return root


_ttnn = _build_ttnn_namespace()


# The tt_lib era (models of mid-2024, such as the Llama-2-70B T3000 demo): ``ttnn.experimental`` was tt_lib, so
# ``ttnn.experimental.tensor`` held the bound tensor types with the compute-kernel config and the fused-activation
# enum (``FusibleActivation``, the same enum ttnn now calls ``UnaryOpType``), and
# ``ttnn.experimental.operations.primary`` the matmul, the program configs and, under ``transformers``, the SDPA
# config (``SDPAMultiCoreProgramConfig``, today's ``SDPAProgramConfig``) and the sharded softmax config.
_TT_LIB_NAMES = {
    "tensor": {
        **{name: name for name in _TTNN_SUBMODULES["tensor"]},
        "WormholeComputeKernelConfig": "WormholeComputeKernelConfig",
        "FusibleActivation": "UnaryOpType",
        "FusibleActivationWithParam": "UnaryWithParam",
    },
    "operations.primary": {
        name: name
        for name in (
            "MatmulMultiCoreReuseProgramConfig",
            "MatmulMultiCoreReuseMultiCastProgramConfig",
            "MatmulMultiCoreReuseMultiCast1DProgramConfig",
            "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig",
            "LayerNormDefaultProgramConfig",
            "LayerNormShardedMultiCoreProgramConfig",
        )
    },
    "operations.primary.transformers": {
        "SDPAMultiCoreProgramConfig": "SDPAProgramConfig",
        "SoftmaxShardedMultiCoreProgramConfig": "SoftmaxShardedMultiCoreProgramConfig",
    },
}


def build_tt_lib_namespaces(experimental: types.ModuleType, op_modules) -> None:
    """Give ``experimental`` the tt_lib era's ``tensor`` and ``operations`` sub-namespaces (names above, and the
    ops that the op modules list in ``__primary__`` and ``__tt_lib_tensor__``), each registered in
    ``sys.modules`` under ``experimental``'s name so ``import ttnn.experimental.operations.primary`` finds it
    too. The one builder of these namespaces: each keeps its ``__all__``."""
    package = sys.modules[__name__.rpartition(".")[0]]
    for dotted, names in _TT_LIB_NAMES.items():
        parent = experimental
        for part in dotted.split("."):
            child = getattr(parent, part, None)
            if not isinstance(child, types.ModuleType):
                child = types.ModuleType(
                    f"{parent.__name__}.{part}", f"ttnn.experimental's tt_lib-era {part}"
                )
                child.__all__ = []
                setattr(parent, part, child)
                parent.__path__ = []
                sys.modules.setdefault(child.__name__, child)
            parent = child
        for name, target in names.items():
            _export(parent, name, getattr(package, target))
    for module in op_modules:
        for name, function in getattr(module, "__primary__", ()):
            _export(experimental.operations.primary, name, getattr(module, function))
        for name, function in getattr(module, "__tt_lib_tensor__", ()):
            _export(experimental.tensor, name, getattr(module, function))


def _export(namespace: types.ModuleType, name: str, value) -> None:
    setattr(namespace, name, value)
    namespace.__all__.append(name)


_previous: dict[str, object] = {}


def install_as_ttnn() -> types.ModuleType:
    """Make ``import ttnn`` (and ``ttnn.experimental``, ``ttnn.transformer``, …) resolve to the emulator in this
    process, even where Tenstorrent's ttnn is installed (the import hook prefers the real package)."""
    emulator = sys.modules["tttv2.ttnn"]
    existing = sys.modules.get("ttnn")
    if (
        existing is not None
        and existing is not emulator
        and not getattr(existing, "IS_TTTV2_EMULATOR", False)
    ):
        raise ValidationError(
            "install_as_ttnn: a different `ttnn` module is already imported; install the emulator before importing ttnn"
        )
    names = {
        "ttnn" + name[len("tttv2.ttnn") :]: module
        for name, module in list(sys.modules.items())
        if name == "tttv2.ttnn" or name.startswith("tttv2.ttnn.")
    }
    for name, module in names.items():
        if name not in _previous:
            _previous[name] = sys.modules.get(name)
        sys.modules[name] = module
    return emulator


def uninstall_as_ttnn() -> None:
    """Undo :func:`install_as_ttnn` (restores whatever ``ttnn`` modules were there before)."""
    for name, module in _previous.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
    _previous.clear()
