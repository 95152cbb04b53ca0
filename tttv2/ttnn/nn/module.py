"""``Module`` and ``Parameter``: parameters and sub-modules registered by attribute assignment.

A :class:`Parameter` is a ttnn tensor that requires grad and that a module owns. Assigning one (or a
sub-module) to a module attribute registers it under that name, in assignment order; ``named_parameters()``
walks the tree with dotted names and lists a shared (tied) parameter once. ``state_dict()`` snapshots the
parameters and persistent buffers; ``load_state_dict()`` writes values into the existing parameter tensors
(optimizers keep holding the same objects), distributed over the mesh like each parameter.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from .. import numerics
from .._threads import single_threaded_blas
from ..device import GetDefaultDevice, MeshDevice
from ..distribution import MeshMapperConfig, create_mesh_mapper, from_numpy, to_numpy
from ..errors import ValidationError
from ..ops.creation import zeros_like
from ..placement import PlacementShard
from ..tensor import Tensor
from ..types import DataType, Layout

__all__ = [
    "IncompatibleKeys",
    "Module",
    "ModuleList",
    "Parameter",
    "Sequential",
    "make_parameter",
    "resolve_device",
]


class Parameter(Tensor):
    """A tensor that a :class:`Module` owns and an optimizer updates (``requires_grad`` by default).

    ``Parameter(t)`` adopts ``t`` in place (no copy, no second device allocation) and returns it, now of type
    ``Parameter``. A tensor computed by tracked ops is detached first, so a parameter is always a leaf.
    """

    def __new__(cls, data: Tensor, requires_grad: bool = True):
        if not isinstance(data, Tensor):
            raise ValidationError(f"ttnn.nn.Parameter: expected a ttnn.Tensor, got {type(data).__name__}")
        if data._node is not None:
            data = data.detach()
        data.__class__ = cls
        data.requires_grad = requires_grad
        return data

    def __init__(self, data: Tensor, requires_grad: bool = True) -> None:  # adopted in __new__
        pass

    def __repr__(self) -> str:
        return (
            "Parameter(" + super().__repr__().removeprefix("ttnn.") + f", requires_grad={self.requires_grad})"
        )


def resolve_device(device: MeshDevice | None, owner: str) -> MeshDevice:
    """``device`` or the default device (``ttnn.SetDefaultDevice``); modules need one to place parameters."""
    device = device if device is not None else GetDefaultDevice()
    if not isinstance(device, MeshDevice):
        raise ValidationError(
            f"{owner}: device: expected a ttnn.MeshDevice (pass device= or call ttnn.SetDefaultDevice(mesh)), "
            f"got {device!r}"
        )
    return device


def make_parameter(
    array: np.ndarray,
    *,
    device: MeshDevice,
    dtype: DataType = DataType.FLOAT32,
    layout: Layout = Layout.TILE,
    mesh_mapper=None,
    requires_grad: bool = True,
) -> Parameter:
    """A parameter holding ``array`` (replicated over the mesh unless ``mesh_mapper`` splits it)."""
    t = from_numpy(
        np.asarray(array, dtype=np.float32),
        dtype=dtype,
        layout=layout,
        device=device,
        mesh_mapper=mesh_mapper,
    )
    return Parameter(t, requires_grad=requires_grad)


class IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of layers and models: subclasses set attributes in ``__init__`` and define ``forward``."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # --- registration -------------------------------------------------------------------------------------
    def _registries(self) -> tuple[dict, dict, dict]:
        try:
            return self.__dict__["_parameters"], self.__dict__["_buffers"], self.__dict__["_modules"]
        except KeyError:
            raise ValidationError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        params, buffers, modules = self._registries()
        if isinstance(value, Parameter):
            if name not in params:  # a replaced parameter keeps its place in the order
                self._forget(name)
            params[name] = value
        elif isinstance(value, Module):
            if name not in modules:
                self._forget(name)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise ValidationError(
                    f"{type(self).__name__}.{name}: is a parameter; assign a ttnn.nn.Parameter or None, "
                    f"got {type(value).__name__}"
                )
            params[name] = None
        elif name in modules:
            if value is not None:
                raise ValidationError(
                    f"{type(self).__name__}.{name}: is a sub-module; assign a ttnn.nn.Module or None, "
                    f"got {type(value).__name__}"
                )
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise ValidationError(
                    f"{type(self).__name__}.{name}: is a buffer; assign a ttnn.Tensor or None, got {type(value).__name__}"
                )
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        for registry in self._registries():
            registry.pop(name, None)
        self.__dict__.pop(name, None)
        self.__dict__["_non_persistent"].discard(name)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: registered members live in the registries
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            registry = d.get(key)
            if registry is not None and name in registry:
                return registry[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        params, buffers, modules = self._registries()
        if name in params or name in buffers or name in modules:
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise ValidationError(
                f"{type(self).__name__}.register_parameter({name!r}): expected a ttnn.nn.Parameter or None, "
                f"got {type(param).__name__}"
            )
        self._forget(name)
        self._registries()[0][name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that belongs to the module's state but is not trained (e.g. RoPE tables)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise ValidationError(
                f"{type(self).__name__}.register_buffer({name!r}): expected a ttnn.Tensor or None, "
                f"got {type(tensor).__name__}"
            )
        self._forget(name)
        self._registries()[1][name] = tensor
        if not persistent:
            self.__dict__["_non_persistent"].add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise ValidationError(
                f"{type(self).__name__}.add_module({name!r}): expected a ttnn.nn.Module or None, "
                f"got {type(module).__name__}"
            )
        self._forget(name)
        self._registries()[2][name] = module

    register_module = add_module

    # --- traversal ------------------------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", _seen: set | None = None) -> Iterator[tuple[str, Module]]:
        seen = set() if _seen is None else _seen
        if id(self) in seen:
            return
        seen.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name, seen)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, child in self._modules.items():
            if child is not None:
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def _named_members(self, key: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for mod_prefix, mod in mods:
            for name, value in mod.__dict__[key].items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by several modules is listed once."""
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self) -> int:
        """Number of scalar parameters (logical elements, counting a mesh-sharded parameter in full)."""
        total = 0
        for p in self.parameters():
            count = math.prod(p.shape)
            for axis, placement in enumerate(p.tensor_topology().placements()):
                if isinstance(placement, PlacementShard):
                    count *= p.tensor_topology().distribution_shape[axis]
            total += count
        return total

    # --- modes and gradients ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active) for this module and every sub-module."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (default) or zero the gradients of every parameter."""
        for p in self.parameters():
            if p.grad is None:
                continue
            p.grad = None if set_to_none else zeros_like(p.grad)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.modules():
            fn(m)
        return self

    # --- state ----------------------------------------------------------------------------------------------
    def state_dict(self, prefix: str = "") -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name, as snapshots that later updates do not change."""
        out: OrderedDict[str, Tensor] = OrderedDict()
        for mod_prefix, mod in self.named_modules(prefix):
            for kind in ("_parameters", "_buffers"):
                for name, value in mod.__dict__[kind].items():
                    if value is None or (kind == "_buffers" and name in mod.__dict__["_non_persistent"]):
                        continue
                    key = f"{mod_prefix}.{name}" if mod_prefix else name
                    out.setdefault(key, value.detach())
        return out

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values (ttnn tensors, numpy arrays or torch tensors of the parameter's shape) into the
        parameters and buffers in place. ``strict`` raises on missing or unexpected keys.

        All or nothing: every entry is checked and converted first; a bad one raises before any parameter
        is written."""
        if not isinstance(state_dict, dict):
            raise ValidationError(
                f"{type(self).__name__}.load_state_dict: state_dict: expected a dict, got {type(state_dict).__name__}"
            )
        targets: dict[str, Tensor] = {}
        for mod_prefix, mod in self.named_modules():
            for kind in ("_parameters", "_buffers"):
                for name, value in mod.__dict__[kind].items():
                    if value is None or (kind == "_buffers" and name in mod.__dict__["_non_persistent"]):
                        continue
                    targets.setdefault(f"{mod_prefix}.{name}" if mod_prefix else name, value)
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        if strict and (missing or unexpected):
            raise ValidationError(
                f"{type(self).__name__}.load_state_dict: missing keys {missing}, unexpected keys {unexpected}"
            )
        what = f"{type(self).__name__}.load_state_dict"
        staged = [
            (target, prepare_assign(target, state_dict[key], f"{what}: {key}"), f"{what}: {key}")
            for key, target in targets.items()
            if key in state_dict
        ]
        for target, arrays, label in staged:
            write_assign(target, arrays, label)
        return IncompatibleKeys(missing, unexpected)

    def get_submodule(self, target: str) -> Module:
        """The sub-module at dotted path ``target`` ("" is this module)."""
        mod: Module = self
        for part in target.split(".") if target else ():
            child = mod._modules.get(part)
            if child is None:
                raise ValidationError(f"{type(self).__name__}.get_submodule: no sub-module {target!r}")
            mod = child
        return mod

    def load_torch_state_dict(self, state_dict: dict, strict: bool = True) -> IncompatibleKeys:
        """:meth:`load_state_dict` from a torch-style state dict: linear weights ``[out, in]`` are transposed to
        this library's ``[in, out]``, and a value with the parameter's element count is reshaped to it
        (torch's ``[C]`` norm weights to ``[1, 1, 1, C]``)."""
        targets = dict(self.named_parameters())
        converted = {}
        for key, value in state_dict.items():
            array = _host_array(value)
            target = targets.get(key)
            if target is not None:
                prefix, _, leaf = key.rpartition(".")
                hook = getattr(type(self.get_submodule(prefix)), "_from_torch", None)
                if hook is not None:
                    array = hook(leaf, array)
                if array.size == math.prod(target.shape):
                    array = array.reshape(tuple(target.shape))
            converted[key] = array
        return self.load_state_dict(converted, strict=strict)

    # --- calling ----------------------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        # BLAS on one thread for the whole forward, set once here instead of at each op inside (the ops nest in
        # it at no cost); the same policy as each op's, see tttv2/ttnn/_threads.py
        with single_threaded_blas:
            return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"


def _host_array(value: Any, what: str = "value") -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "numpy") and not isinstance(value, Tensor):  # torch
        return value.detach().to("cpu").float().numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise ValidationError(
            f"{what}: expected a ttnn tensor, numpy array, torch tensor or numbers, got "
            f"{type(value).__name__} of dtype {array.dtype}"
        )
    return array.astype(np.float32, copy=False)


def assign_(target: Tensor, value: Any, what: str) -> None:
    """Overwrite ``target``'s values in place with ``value``: a ttnn tensor distributed like it, or a full host
    array (numpy / torch / host ttnn tensor) that is split over the mesh like ``target``."""
    write_assign(target, prepare_assign(target, value, what), what)


def prepare_assign(target: Tensor, value: Any, what: str) -> list[np.ndarray]:
    """Check ``value`` against ``target`` and return the quantised per-device arrays :func:`write_assign`
    writes; nothing is modified, so a caller can check every value before writing any."""
    shards = target.shards(what)
    if isinstance(value, Tensor) and value.device() is not None:
        if value.device() is not target.device() or len(value.shards(what)) != len(shards):
            raise ValidationError(
                f"{what}: expected a tensor on {target.device()}, got one on {value.device()}"
            )
        if tuple(value.shape) != tuple(target.shape):
            raise ValidationError(f"{what}: expected shape {list(target.shape)}, got {list(value.shape)}")
        arrays = [np.asarray(s, dtype=np.float32) for s in value.shards(what)]
    else:
        if isinstance(value, Tensor):
            value = to_numpy(value)
        array = _host_array(value, what)
        device = target.device()
        if device is None or len(shards) == 1:
            arrays = [array]
        else:
            top = target.tensor_topology()
            mapper = create_mesh_mapper(
                device, MeshMapperConfig(top.placements(), mesh_shape_override=top.distribution_shape)
            )
            arrays = mapper.map(array)
        if tuple(arrays[0].shape) != tuple(target.shape):
            raise ValidationError(
                f"{what}: expected an array that gives per-device shape {list(target.shape)}, got {list(array.shape)}"
            )
    done: dict[int, np.ndarray] = {}
    out = []
    for arr in arrays:
        q = done.get(id(arr))
        if q is None:
            numerics.check_integer_range(arr, target.dtype, what)
            q = done[id(arr)] = numerics.quantize(arr, target.dtype)
        out.append(q)
    return out


def write_assign(target: Tensor, arrays: list[np.ndarray], what: str) -> None:
    """Write arrays from :func:`prepare_assign` into ``target``'s shards (in place: its version is bumped)."""
    for i, q in enumerate(arrays):
        target._writable_shard(i, what)[...] = q


class ModuleList(Module):
    """A list of sub-modules registered under their indices ("0", "1", …)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))

    def __getitem__(self, index: int | slice):
        items = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(items[index])
        return items[index]


class Sequential(ModuleList):
    """Sub-modules applied in order."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x
