"""What every op shares: argument checks with standard messages, the op trace, shard mapping, output building.

Conventions for op implementations:

* validate first (``expect_tensor`` …), then compute per device with :func:`map_shards`, then build the output
  with :func:`output_like`; never write into an input's arrays (shards are read-only and shared), nor into an
  array once it is handed to :func:`output_like` (a fresh float32 array becomes the output's storage uncopied);
* compute in float32 on the stored (already quantised) values; the output tensor quantises to its dtype;
* every public op is wrapped with :func:`ttnn_op`, which records it in the op trace.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from .._remote import fill_remote, skipped
from .._threads import single_threaded_blas
from ..autograd.engine import record as _autograd_record
from ..device import MeshDevice
from ..errors import ValidationError, op_error
from ..memory import DRAM_MEMORY_CONFIG, CoreCoord, MemoryConfig
from ..numerics import map_row_blocks
from ..placement import TensorTopology
from ..program_configs import WormholeComputeKernelConfig
from ..tensor import Tensor, resolve_shard_spec
from ..types import DataType, Layout, MathFidelity, UnaryOpType, UnaryWithParam

__all__ = [
    "OpTrace",
    "activation_fn",
    "default_compute_config",
    "expect",
    "expect_tensor",
    "map_shards",
    "output_like",
    "same_mesh",
    "ttnn_op",
]

_trace_state = threading.local()


class OpTrace:
    """Records the ops run inside ``with ttnn.OpTrace() as trace:`` as (name, input shapes) entries; a marker
    op (``ttnn.profiler_no_op``) adds its identifier as a third element: (name, input shapes, identifier)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, tuple]] = []

    def __enter__(self) -> OpTrace:
        stack = getattr(_trace_state, "stack", None)
        if stack is None:
            stack = _trace_state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _trace_state.stack.remove(self)

    @property
    def names(self) -> list[str]:
        return [entry[0] for entry in self.entries]


def _record(name: str, args: tuple, label: Callable | None = None, kwargs: dict | None = None) -> None:
    stack = getattr(_trace_state, "stack", None)
    if not stack:
        return
    shapes = tuple(tuple(a.shape) for a in args if isinstance(a, Tensor))
    depth = getattr(_trace_state, "depth", 0)
    if depth == 0:
        entry = (name, shapes) if label is None else (name, shapes, label(*args, **(kwargs or {})))
        for trace in stack:
            trace.entries.append(entry)


def ttnn_op(name: str, label: Callable | None = None) -> Callable:
    """Mark a function as the public op ``name`` (e.g. ``ttnn.linear``): it shows up in op traces.

    Ops called from inside other ops are not recorded, so a trace lists what the model called. ``label``
    (called with the op's arguments) gives marker ops a third trace element, e.g. a profiler identifier.
    """

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            _record(name, args, label, kwargs)
            outermost = getattr(_trace_state, "depth", 0) == 0
            _trace_state.depth = getattr(_trace_state, "depth", 0) + 1
            try:
                with single_threaded_blas:  # the emulator's BLAS policy (see _threads.py)
                    result = fn(*args, **kwargs)
            finally:
                _trace_state.depth -= 1
            if outermost:
                # ops called inside other ops are part of the outer op's backward, never recorded themselves
                _autograd_record(name, fn, args, kwargs, result)
            return result

        wrapper.op_name = name  # type: ignore[attr-defined]
        return wrapper

    return decorate


@contextlib.contextmanager
def _untraced():
    _trace_state.depth = getattr(_trace_state, "depth", 0) + 1
    try:
        yield
    finally:
        _trace_state.depth -= 1


def expect(condition: bool, op: str, arg: str, expected: str, got: object) -> None:
    if not condition:
        raise op_error(op, arg, expected, got)


def expect_optional(op: str, arg: str, value, cls: type):
    """``value`` when it is None or a ``cls``; else a ValidationError expecting "a ttnn.<cls> or None"."""
    expect(value is None or isinstance(value, cls), op, arg, f"a ttnn.{cls.__name__} or None", repr(value))
    return value


def check_memory_config(op: str, value, arg: str = "memory_config") -> MemoryConfig | None:
    """An op's optional ``memory_config`` (or another argument ``arg`` holding one), returned as given."""
    return expect_optional(op, arg, value, MemoryConfig)


def check_output_mem_config(op: str, value) -> MemoryConfig:
    """The tt_lib era's ``output_mem_config`` (``tensor.mul``, ``operations.primary.matmul`` / ``matmul_1d``): a
    ``MemoryConfig``, never None (that API's default is DRAM interleaved, not the input's placement)."""
    expect(isinstance(value, MemoryConfig), op, "output_mem_config", "a ttnn.MemoryConfig", repr(value))
    return value


def check_compute_config(op: str, value) -> WormholeComputeKernelConfig | None:
    """An op's optional ``compute_kernel_config``, returned as given."""
    return expect_optional(op, "compute_kernel_config", value, WormholeComputeKernelConfig)


def device_grid(op: str, arg: str, value, device) -> CoreCoord:
    """A grid of cores, given as a ``CoreCoord`` or an ``(x, y)`` pair of ints, within ``device``'s compute grid
    (``compute_with_storage_grid_size()``)."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        value = CoreCoord(*value)
    expect(isinstance(value, CoreCoord), op, arg, "a ttnn.CoreCoord or an (x, y) pair of ints", repr(value))
    limit = device.compute_with_storage_grid_size()
    expect(
        1 <= value.x <= limit.x and 1 <= value.y <= limit.y,
        op,
        arg,
        f"a grid within the device's {limit.x}x{limit.y} cores",
        f"{value.x}x{value.y}",
    )
    return value


def expect_tensor(
    op: str,
    arg: str,
    value: object,
    *,
    dtypes: Iterable[DataType] | None = None,
    layouts: Iterable[Layout] | None = None,
    rank: int | Sequence[int] | None = None,
    on_device: bool = True,
) -> Tensor:
    """Check an op input; returns it typed. Deallocated tensors and closed devices are rejected here."""
    if not isinstance(value, Tensor):
        raise op_error(op, arg, "a ttnn.Tensor", type(value).__name__)
    value.shards(f"{op}: {arg}")
    if on_device and value.device() is None:
        raise op_error(op, arg, "a tensor on device (use ttnn.to_device)", "a host tensor")
    if dtypes is not None:
        dtypes = tuple(dtypes)
        if value.dtype not in dtypes:
            raise op_error(
                op, f"{arg}.dtype", "one of " + ", ".join(d.name for d in dtypes), value.dtype.name
            )
    if layouts is not None:
        layouts = tuple(layouts)
        if value.layout not in layouts:
            raise op_error(
                op, f"{arg}.layout", "one of " + ", ".join(lay.name for lay in layouts), value.layout.name
            )
    if rank is not None:
        ranks = (rank,) if isinstance(rank, int) else tuple(rank)
        if len(value.shape) not in ranks:
            raise op_error(
                op,
                f"{arg} rank",
                " or ".join(map(str, ranks)),
                f"{len(value.shape)} (shape {list(value.shape)})",
            )
    return value


def same_mesh(op: str, **tensors: Tensor | None) -> MeshDevice | None:
    """All given tensors must live on one mesh (or all on host); returns that mesh."""
    items = [(k, v) for k, v in tensors.items() if isinstance(v, Tensor)]
    if not items:
        return None
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.device() is not first.device():
            raise op_error(
                op, name, f"a tensor on the same device as {first_name} ({first.device()})", t.device()
            )
    return first.device()


def map_shards(fn: Callable[..., np.ndarray], *tensors, float_inputs: bool = True) -> list:
    """Apply ``fn`` per device to the shards of the tensors (non-tensor arguments are passed through); devices whose
    shards are the same arrays share one result (``fn`` must depend on its arguments only). On a mesh spread over
    ranks only this rank's devices are computed; the others' results are remote stand-ins."""
    count = None
    for t in tensors:
        if isinstance(t, Tensor):
            n = len(t.shards())
            if count is not None and n != count:  # pragma: no cover - same_mesh is checked first
                raise ValidationError(f"map_shards: tensors have {count} and {n} shards")
            count = n
    mesh = next((t.device() for t in tensors if isinstance(t, Tensor) and t.device() is not None), None)
    remote = skipped(mesh, count or 1)
    stored = [t.stored_shards() if isinstance(t, Tensor) else None for t in tensors]
    results = []
    done: dict[tuple[int, ...], object] = {}
    for i in range(count or 1):
        if i in remote:
            results.append(None)  # another rank's device (tttv2/ttnn/_remote.py)
            continue
        # devices whose inputs are the same shards (a tensor replicated over devices holds one) share one result
        key = tuple(0 if shards is None else id(shards[i]) for shards in stored)
        if key in done:
            results.append(done[key])
            continue
        args = []
        for t in tensors:
            if isinstance(t, Tensor):
                shard = t.shards()[i]  # unpacked for this device only: one input at a time is held unpacked
                args.append(
                    shard.astype(np.float32, copy=False) if float_inputs and t.dtype.is_float else shard
                )
            else:
                args.append(t)
        results.append(done.setdefault(key, fn(*args)))
    return fill_remote(results, remote) if remote else results


def output_like(
    op: str,
    shards: list[np.ndarray],
    like: Tensor,
    *,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    memory_config: MemoryConfig | None = None,
    topology: TensorTopology | None = None,
    shard_grid=None,
    padded_shape=None,
) -> Tensor:
    """Build an op's output on the same device as ``like``; dtype/layout/memory default to ``like``'s."""
    dtype = like.dtype if dtype is None else dtype
    layout = like.layout if layout is None else layout
    if not isinstance(dtype, DataType):
        raise op_error(op, "dtype", "a ttnn.DataType", repr(dtype))
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    device = like.device()
    # float32 arrays the op computed (or frozen shards it passes on) need no quantising copy
    quantized = dtype is DataType.FLOAT32 and all(_fresh_float32(s) for s in shards)
    if device is None:
        return Tensor(
            shards,
            dtype,
            layout,
            None,
            None,
            topology or like.tensor_topology(),
            what=op,
            padded_shape=padded_shape,
            quantized=quantized,
        )
    memory_config = memory_config or like.memory_config() or DRAM_MEMORY_CONFIG
    if memory_config.is_sharded():
        shape = shards[0].shape
        keep_spec = memory_config.shard_spec is not None
        if not keep_spec or (like.memory_config() == memory_config and tuple(like.shape) != tuple(shape)):
            # an inherited shard spec only fits if the shape is unchanged; otherwise let the op choose
            base = MemoryConfig(memory_config.memory_layout, memory_config.buffer_type)
            memory_config = resolve_shard_spec(base, shape, layout, device, op, grid=shard_grid)
    if dtype.is_block_float and layout is not Layout.TILE:
        raise op_error(op, "dtype", f"a dtype valid for {layout.name} layout (not {dtype.name})", dtype.name)
    return Tensor(
        shards,
        dtype,
        layout,
        device,
        memory_config,
        topology or like.tensor_topology(),
        what=op,
        padded_shape=padded_shape,
        quantized=quantized,
    )


def _fresh_float32(shard) -> bool:
    """A C-contiguous float32 array owning its data: one the op computed (writeable), or a read-only one, which
    is already a tensor's frozen shard (in-place updates copy a read-only shard first)."""
    if not isinstance(shard, np.ndarray) or shard.dtype != np.float32:
        return False
    flags = shard.flags
    return flags.c_contiguous and flags.owndata


def default_compute_config(
    config: WormholeComputeKernelConfig | None, op: str
) -> WormholeComputeKernelConfig:
    """ttnn's default for matmul-class ops when no compute_kernel_config is passed: LoFi, bf16 accumulation."""
    if config is None:
        return WormholeComputeKernelConfig(
            math_fidelity=MathFidelity.LoFi, math_approx_mode=True, fp32_dest_acc_en=False
        )
    if not isinstance(config, WormholeComputeKernelConfig):
        raise op_error(op, "compute_kernel_config", "a ttnn.WormholeComputeKernelConfig", repr(config))
    return config


def _gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    c1, c3 = np.float32(0.7978845608028654), np.float32(0.044715)
    if approximate and not (isinstance(x, np.ndarray) and x.ndim > 0 and x.dtype in (np.float32, np.float64)):
        return 0.5 * x * (1.0 + np.tanh(c1 * (x + c3 * (x * x * x))))
    if approximate:
        # the same expression evaluated in place, in the same order (identical rounding, fewer temporaries)
        t = x * x
        t *= x
        t *= c3
        t += x
        t *= c1
        np.tanh(t, out=t)
        t += 1.0
        out = 0.5 * x
        out *= t
        return out
    from math import erf, sqrt

    verf = np.vectorize(erf, otypes=[np.float32])
    return 0.5 * x * (1.0 + verf(x / np.float32(sqrt(2.0))))


def activation_fn(act, op: str) -> Callable[[np.ndarray], np.ndarray]:
    """Map a UnaryOpType / UnaryWithParam (or a list of them, applied in order) to a numpy function."""
    if act is None:
        return lambda x: x
    if isinstance(act, (list, tuple)) and not isinstance(act, UnaryWithParam):
        fns = [activation_fn(a, op) for a in act]

        def chain(x):
            for f in fns:
                x = f(x)
            return x

        return chain
    if isinstance(act, UnaryWithParam):
        kind, param = act.op_type, act.param
    elif isinstance(act, UnaryOpType):
        kind, param = act, None
    elif isinstance(act, str) and act.upper() in UnaryOpType.__members__:
        kind, param = UnaryOpType[act.upper()], None
    else:
        raise op_error(op, "activation", "a ttnn.UnaryOpType or UnaryWithParam", repr(act))
    table = {
        UnaryOpType.SILU: lambda x: x / (1.0 + np.exp(-x)),
        UnaryOpType.GELU: lambda x: map_row_blocks(functools.partial(_gelu, approximate=bool(param)), x),
        UnaryOpType.RELU: lambda x: np.maximum(x, 0),
        UnaryOpType.SIGMOID: lambda x: 1.0 / (1.0 + np.exp(-x)),
        UnaryOpType.EXP: np.exp,
        UnaryOpType.TANH: np.tanh,
        UnaryOpType.IDENTITY: lambda x: x,
        UnaryOpType.RECIP: lambda x: 1.0 / x,
        UnaryOpType.RSQRT: lambda x: 1.0 / np.sqrt(x),
        UnaryOpType.SQRT: np.sqrt,
        UnaryOpType.NEG: np.negative,
    }
    return table[kind]
