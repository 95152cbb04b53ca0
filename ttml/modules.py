"""Deprecated ``ttml.modules``: write ``ttnn.nn.Module`` subclasses and use ``ttnn.nn.Linear`` /
``ttnn.nn.parallel.ColumnParallelLinear`` / ``RowParallelLinear``.

``AbstractModuleBase`` *is* a ``ttnn.nn.Module``: a ``Parameter`` or ``Buffer`` attribute registers its tensor
as a ``ttnn.nn`` parameter or buffer (``.tensor`` stays a ttml tensor on the same storage), sub-modules register
as usual, and ``forward`` receives what the caller passes (ttml tensors, as in TTML). ``parameters()`` is
``ttnn.nn``'s iterator, which ``ttml.optimizers`` accept. The layers below keep TTML's constructor arguments and
take and return ttml tensors; their weights are ``ttnn.nn``'s ``[in, out]`` (TTML stored ``[1, 1, out, in]``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from tttv2 import ttnn

from ._deprecation import deprecated
from .autograd import AutoContext, Tensor, _value

__all__ = [
    "AbstractModuleBase",
    "Buffer",
    "ColumnParallelLinear",
    "LinearLayer",
    "ModuleBase",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "RowParallelLinear",
    "RunMode",
]


class RunMode(enum.Enum):
    """TTML's train/eval switch; use ``module.train()`` / ``module.eval()``."""

    TRAIN = "train"
    EVAL = "eval"


class Parameter:
    """Marks a ttml tensor as a trainable parameter when assigned to a module attribute."""

    def __init__(self, tensor) -> None:
        self.tensor = tensor if isinstance(tensor, Tensor) else Tensor(_tensor("Parameter", tensor))

    def __repr__(self) -> str:
        return f"Parameter({self.tensor!r})"


class Buffer(Parameter):
    """Marks a ttml tensor as module state that is not trained (a ``ttnn.nn`` buffer)."""

    def __repr__(self) -> str:
        return f"Buffer({self.tensor!r})"


def _tensor(owner: str, value) -> ttnn.Tensor:
    value = _value(value)
    if not isinstance(value, ttnn.Tensor):
        raise TypeError(
            f"ttml.modules.{owner}: tensor: expected a ttml or ttnn Tensor, got {type(value).__name__}"
        )
    return value


class AbstractModuleBase(ttnn.nn.Module):
    """TTML's Python module base, as a ``ttnn.nn.Module`` (see the module docstring)."""

    def __init__(self) -> None:
        deprecated(f"ttml.modules.AbstractModuleBase ({type(self).__name__})", "ttnn.nn.Module", stacklevel=3)
        super().__init__()

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, Buffer):
            self.register_buffer(name, _tensor("Buffer", value.tensor))
            object.__setattr__(self, name, value)
        elif isinstance(value, (Parameter, Tensor)):
            wrapper = value if isinstance(value, Parameter) else Parameter(value)
            param = ttnn.nn.Parameter(_tensor("Parameter", wrapper.tensor), requires_grad=True)
            wrapper.tensor = Tensor(param)  # the wrapper now reads the registered parameter
            self.register_parameter(name, param)
            object.__setattr__(self, name, wrapper if isinstance(value, Parameter) else wrapper.tensor)
        else:
            super().__setattr__(name, value)

    def set_run_mode(self, mode: RunMode) -> None:
        if not isinstance(mode, RunMode):
            raise TypeError(f"ttml.modules.set_run_mode: mode: expected a ttml.modules.RunMode, got {mode!r}")
        self.train(mode is RunMode.TRAIN)

    def get_run_mode(self) -> RunMode:
        return RunMode.TRAIN if self.training else RunMode.EVAL


ModuleBase = AbstractModuleBase


class ModuleList(AbstractModuleBase, ttnn.nn.ModuleList):
    """TTML's ``ModuleList`` (indexing, ``append``, ``extend``, iteration): ``ttnn.nn.ModuleList``."""

    def __init__(self, modules=()) -> None:
        AbstractModuleBase.__init__(self)
        for module in modules:
            self.append(module)


class ModuleDict(AbstractModuleBase):
    """TTML's ``ModuleDict``: sub-modules by key, registered under their keys."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        self.update(modules or {})

    def __getitem__(self, key: str):
        return self._modules[key]

    def __setitem__(self, key: str, module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules) -> None:
        for key, module in modules.items() if isinstance(modules, dict) else modules:
            self[key] = module


def _no_init(owner: str, weight_init: Callable | None, bias_init: Callable | None) -> None:
    for arg, value in (("weight_init", weight_init), ("bias_init", bias_init)):
        if value is not None:
            raise NotImplementedError(
                f"ttml.modules.{owner}: {arg}: ttml.init initialisers are not shimmed; expected None (the "
                f"ttnn.nn default U(-1/sqrt(in), 1/sqrt(in)), as TTML's), got {value!r}"
            )


class _LayerShim(AbstractModuleBase):
    """A TTML layer around one ``ttnn.nn`` layer (``self.layer``): ttml tensors in and out."""

    def forward(self, x) -> Tensor:
        return Tensor(self.layer(_value(x)))

    @classmethod
    def around(cls, layer: ttnn.nn.Module) -> _LayerShim:
        """The TTML layer around an existing ``ttnn.nn`` layer (``ttml.distributed.parallelize_module``)."""
        shim = cls.__new__(cls)
        AbstractModuleBase.__init__(shim)
        shim.layer = layer
        return shim


class LinearLayer(_LayerShim):
    """TTML's ``LinearLayer(in_features, out_features, has_bias=True)``: a ``ttnn.nn.Linear`` on the open mesh."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        has_bias: bool = True,
        weight_init: Callable | None = None,
        bias_init: Callable | None = None,
    ) -> None:
        super().__init__()
        _no_init("LinearLayer", weight_init, bias_init)
        device = AutoContext._shared().get_device()
        self.layer = ttnn.nn.Linear(in_features, out_features, bool(has_bias), device=device)


def tp_cluster_axis(owner: str, mesh, axis) -> int | None:
    """TTML names the tensor-parallel mesh axis (``axis_name="tp"``, ``tp_axis=i``); ``ttnn.nn.parallel`` takes
    ``cluster_axis`` only on a 2-D mesh with several devices on both axes (None: the whole mesh)."""
    shape = list(mesh.shape)
    if isinstance(axis, str):  # an axis name: the one axis with several devices
        big = [a for a, size in enumerate(shape) if size > 1]
        if len(big) != 1:
            raise ValueError(
                f"{owner}: axis_name: the {'x'.join(map(str, shape))} mesh has no single axis with several devices "
                f"for {axis!r}; build the layer with cluster_axis=0 or 1"
            )
        return None
    if isinstance(axis, bool) or axis not in range(len(shape)) or shape[axis] == 1:
        raise ValueError(
            f"{owner}: tp_axis: expected the index of a mesh axis with several devices on the "
            f"{'x'.join(map(str, shape))} mesh, got {axis!r}"
        )
    return axis if sum(size > 1 for size in shape) > 1 else None


class _ParallelLinearShim(_LayerShim):
    """TTML's tensor-parallel linear layers: the ``ttnn.nn.parallel`` layer of the same name on the open mesh,
    over the axis TTML calls ``axis_name`` (or ``cluster_axis`` of a 2-D mesh). Train them inside
    ``ttnn.nn.parallel.TensorParallel`` (``ttml.distributed.parallelize_module`` returns one): it owns the
    gradient reduction."""

    def _build(
        self, in_features, out_features, has_bias, weight_init, bias_init, axis_name, cluster_axis, **kw
    ):
        name = type(self).__name__
        _no_init(name, weight_init, bias_init)
        mesh = AutoContext._shared().get_device()
        if cluster_axis is None:
            cluster_axis = tp_cluster_axis(f"ttml.modules.{name}", mesh, axis_name)
        layer_class = getattr(ttnn.nn.parallel, name)
        self.layer = layer_class(
            in_features, out_features, bool(has_bias), cluster_axis=cluster_axis, device=mesh, **kw
        )


class ColumnParallelLinear(_ParallelLinearShim):
    """TTML's ``ColumnParallelLinear``: output features split over the tensor-parallel axis; ``gather_output``
    all-gathers them."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        has_bias: bool = True,
        weight_init: Callable | None = None,
        bias_init: Callable | None = None,
        gather_output: bool = False,
        axis_name: str = "tp",
        *,
        cluster_axis: int | None = None,
    ) -> None:
        super().__init__()
        args = (in_features, out_features, has_bias, weight_init, bias_init, axis_name, cluster_axis)
        self._build(*args, gather_output=gather_output)


class RowParallelLinear(_ParallelLinearShim):
    """TTML's ``RowParallelLinear``: input features split over the tensor-parallel axis, partial products
    all-reduced, the bias added once."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        has_bias: bool = True,
        weight_init: Callable | None = None,
        bias_init: Callable | None = None,
        input_is_parallel: bool = False,
        axis_name: str = "tp",
        *,
        cluster_axis: int | None = None,
    ) -> None:
        super().__init__()
        args = (in_features, out_features, has_bias, weight_init, bias_init, axis_name, cluster_axis)
        self._build(*args, input_is_parallel=input_is_parallel)
