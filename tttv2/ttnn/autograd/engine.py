"""Reverse-mode autograd for ttnn tensors: nodes owned by the tensors they produced, no global graph.

How it fits together:

* an op decorated with ``ttnn_op`` calls :func:`record` after computing its output; when grad mode is on and an
  input tensor requires grad, a :class:`Node` is attached to the output holding the op's bound arguments and
  the backward rule registered for that op name (``register_backward``);
* ``tensor.backward(grad)`` walks the nodes reachable from the tensor in reverse topological order, calls each
  rule under ``no_grad`` with the summed upstream gradient, accumulates gradients that reach a tensor along
  several paths, and adds leaf gradients into ``.grad``;
* without ``retain_graph`` the nodes drop their saved arguments and outputs afterwards, so the graph's memory
  goes away at once, and a second backward through it raises. A node holds a single-tensor output only
  weakly (no reference cycle), so a graph that never runs backward also goes with the last reference to its
  loss; the engine keeps each tensor that received a gradient alive until its node has run;
* outputs that are one of the op's inputs (ops returning their input unchanged) and integer outputs get no
  node; writing into a caller-provided output tensor that takes part in differentiation raises.

Gradients are ttnn tensors distributed like their forward counterparts: every rule works per device.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from .._threads import single_threaded_blas
from ..errors import ValidationError

__all__ = [
    "BackwardContext",
    "Function",
    "FunctionContext",
    "Node",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "register_backward",
    "register_non_differentiable",
    "set_grad_enabled",
]

_state = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_state, "enabled", True)


@contextlib.contextmanager
def set_grad_enabled(mode: bool) -> Iterator[None]:
    previous = is_grad_enabled()
    _state.enabled = bool(mode)
    try:
        yield
    finally:
        _state.enabled = previous


def no_grad():
    """Context manager: ops inside record no backward."""
    return set_grad_enabled(False)


def enable_grad():
    """Context manager: turn recording back on inside a ``no_grad`` block."""
    return set_grad_enabled(True)


# op name -> rule(ctx: BackwardContext, grad_output) -> {argument name: gradient or list of gradients}
_RULES: dict[str, Callable] = {}


def register_backward(op_name: str) -> Callable:
    """Register the backward rule of the op ``op_name`` (e.g. ``"ttnn.linear"``)."""

    def decorate(rule: Callable) -> Callable:
        if op_name in _RULES:
            raise ValidationError(f"register_backward: {op_name} already has a backward rule")
        _RULES[op_name] = rule
        return rule

    return decorate


def has_backward(op_name: str) -> bool:
    return op_name in _RULES


# ops whose outputs carry no gradient (shape-only creation, comparisons, indices, in-place bookkeeping)
_NON_DIFFERENTIABLE: set[str] = {
    "ttnn.ones_like",
    "ttnn.zeros_like",
    "ttnn.full_like",
    "ttnn.empty_like",
    "ttnn.rand_like",
    "ttnn.eq",
    "ttnn.ne",
    "ttnn.gt",
    "ttnn.ge",
    "ttnn.lt",
    "ttnn.le",
    "ttnn.argmax",
    "ttnn.deallocate",
    "ttnn.plus_one",
    "ttnn.copy_host_to_device_tensor",
}


def register_non_differentiable(*op_names: str) -> None:
    """Declare ops whose outputs never carry gradients; they record nothing even on tracked inputs."""
    _NON_DIFFERENTIABLE.update(op_names)


class BackwardContext:
    """What a backward rule sees: the op's bound arguments (by parameter name) and its output.

    A single-tensor output is held weakly (the tensor owns the node; a strong reference back would make a
    reference cycle that only the garbage collector frees). It is alive whenever the rule runs: the engine
    keeps every tensor that received a gradient alive until its node has run. Multi-output ops keep their
    outputs strongly until their backward has run (so a rule can read statistics the caller dropped).
    """

    __slots__ = ("_output", "_weak", "args", "needs", "op_name")

    def __init__(self, op_name: str, args: dict[str, Any], output: Any, needs: dict[str, Any]) -> None:
        self.op_name = op_name
        self.args = args
        self.needs = needs
        self.output = output

    @property
    def output(self) -> Any:
        """The forward output (a tuple/list for multi-output ops); None once the graph was freed."""
        return self._output() if self._weak else self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._weak = isinstance(value, _tensor_type())
        self._output = weakref.ref(value) if self._weak else value

    def needs_grad(self, name: str) -> bool:
        """Whether argument ``name`` (a tensor, or a list of tensors) needs a gradient."""
        return bool(self.needs.get(name))

    def __getitem__(self, name: str) -> Any:
        return self.args[name]


class Node:
    """One recorded op: the rule to run and the tensors to send gradients to."""

    __slots__ = ("ctx", "freed", "name", "rule")

    def __init__(self, name: str, rule: Callable, ctx: BackwardContext) -> None:
        self.name = name
        self.rule = rule
        self.ctx = ctx
        self.freed = False

    def parents(self) -> list:
        """Input tensors that take part in differentiation."""
        out = []
        for name, flag in self.ctx.needs.items():
            value = self.ctx.args[name]
            if isinstance(flag, list):
                out.extend(t for t, f in zip(value, flag) if f)
            elif flag:
                out.append(value)
        return out

    def __repr__(self) -> str:
        return f"<backward of {self.name}>"


def _tensor_type():
    from ..tensor import Tensor

    return Tensor


def _tracks(value) -> bool:
    Tensor = _tensor_type()
    return isinstance(value, Tensor) and (value.requires_grad or value._node is not None)


_SIGNATURES: dict[Callable, inspect.Signature] = {}

# arguments through which an op writes its result into a caller-provided tensor
_OUTPUT_BUFFER_ARGS = (
    "output_tensor",
    "optional_output_tensor",
    "output",
    "out",
    "persistent_output_buffer",
    "persistent_output_tensor",
)


def record(op_name: str, fn: Callable, args: tuple, kwargs: dict, output: Any) -> None:
    """Attach a backward node to ``output`` if grad mode is on and an input takes part in differentiation.

    Outputs that are one of the inputs (ops that return their input unchanged, e.g. a reshape to the same
    shape) get no node: the gradient reaches the input directly. Non-float outputs (indices) get no node.
    Writing into a caller-provided output tensor that takes part in differentiation (or that is also an
    input) is an in-place update, which autograd does not support: it raises.
    """
    if not is_grad_enabled() or op_name in _NON_DIFFERENTIABLE:
        return
    Tensor = _tensor_type()
    flat_inputs = [a for a in args if isinstance(a, Tensor)] + [
        v for v in kwargs.values() if isinstance(v, Tensor)
    ]
    list_inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))]
    involved = any(_tracks(t) for t in flat_inputs) or any(
        _tracks(t) for seq in list_inputs for t in seq if isinstance(t, Tensor)
    )
    if not involved:
        return
    rule = _RULES.get(op_name)
    if rule is None:
        raise ValidationError(
            f"{op_name}: an input requires grad but {op_name} has no backward; run it under ttnn.autograd.no_grad() "
            "or detach() the input"
        )
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    for param in sig.parameters.values():  # flatten **kwargs into the mapping
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(arguments.pop(param.name, {}))
    needs: dict[str, Any] = {}
    input_ids: set[int] = set()
    buffers: set[int] = set()
    for name, value in arguments.items():
        if isinstance(value, Tensor):
            if name in _OUTPUT_BUFFER_ARGS:
                buffers.add(id(value))
                continue
            needs[name] = _tracks(value)
            input_ids.add(id(value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Tensor) for v in value):
            needs[name] = [_tracks(v) for v in value]
            input_ids.update(id(v) for v in value)
    for name in _OUTPUT_BUFFER_ARGS:
        buf = arguments.get(name)
        if isinstance(buf, Tensor) and (_tracks(buf) or id(buf) in input_ids):
            raise ValidationError(
                f"{op_name}: {name} is written in place, but it "
                + ("requires grad" if _tracks(buf) else "is also an input of the op")
                + "; autograd does not support in-place updates (leave the output to the op)"
            )
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    targets = [
        (index, out)
        for index, out in enumerate(outputs)
        if isinstance(out, Tensor) and out.dtype.is_float and (id(out) not in input_ids or id(out) in buffers)
    ]
    if not targets:
        return
    ctx = BackwardContext(op_name, arguments, output, needs)
    node = Node(op_name, rule, ctx)
    for index, out in targets:
        out._node = node
        out._output_index = index


def run_backward(root, grad, retain_graph: bool = False) -> None:
    """Backpropagate ``grad`` from ``root`` to every leaf that requires grad."""
    if root._node is None:
        if root.requires_grad:
            with no_grad():
                _accumulate_leaf(root, grad)
            return
        raise ValidationError("Tensor.backward: this tensor does not require grad and has no grad_fn")
    if root._retains_grad:
        with no_grad():
            _accumulate_leaf(root, grad)
    # topological order over nodes, from the root's node
    order: list[Node] = []
    seen: set[int] = set()
    stack = [(root._node, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.freed:
            raise ValidationError(
                f"Tensor.backward: the graph through {node.name} was already freed by an earlier backward; "
                "pass retain_graph=True to the first backward to run it twice"
            )
        stack.append((node, True))
        for parent in node.parents():
            if parent._node is not None and id(parent._node) not in seen:
                stack.append((parent._node, False))
    order.reverse()
    # gradients per node output: node id -> {output index: grad}
    pending: dict[int, dict[int, Any]] = {id(root._node): {root._output_index: grad}}
    # tensors that received a gradient, kept alive until their node ran (its rule may read ctx.output)
    alive: dict[int, list] = {}
    with no_grad(), single_threaded_blas:  # the emulator's BLAS policy (see _threads.py)
        for node in order:
            grads_out = pending.pop(id(node), None)
            keep = alive.pop(id(node), None)  # noqa: F841 - holds the node's outputs while its rule runs
            if grads_out is None:
                if not retain_graph:
                    _free(node)
                continue
            outputs = node.ctx.output if isinstance(node.ctx.output, (tuple, list)) else None
            upstream = (
                grads_out.get(0) if outputs is None else tuple(grads_out.get(i) for i in range(len(outputs)))
            )
            input_grads = node.rule(node.ctx, upstream)
            for name, flag in node.ctx.needs.items():
                if not flag:
                    continue
                value = node.ctx.args[name]
                g = input_grads.get(name) if input_grads else None
                if g is None:
                    continue
                pairs = list(zip(value, g, flag)) if isinstance(flag, list) else [(value, g, True)]
                for tensor, tgrad, wanted in pairs:
                    if not wanted or tgrad is None:
                        continue
                    _check_grad(node.name, name, tensor, tgrad)
                    if tensor._node is not None:
                        alive.setdefault(id(tensor._node), []).append(tensor)
                        slot = pending.setdefault(id(tensor._node), {})
                        idx = tensor._output_index
                        slot[idx] = tgrad if idx not in slot else _add(slot[idx], tgrad)
                        if tensor._retains_grad:
                            _accumulate_leaf(tensor, tgrad)
                    elif tensor.requires_grad:
                        _accumulate_leaf(tensor, tgrad)
            if not retain_graph:
                _free(node)


def _freed_rule(ctx, grad):  # pragma: no cover - run_backward refuses freed nodes before calling a rule
    raise ValidationError(f"backward of {ctx.op_name}: the graph was freed")


def _free(node: Node) -> None:
    """Drop what a node saved (inputs, outputs, the custom Function's context): the graph's memory goes."""
    Tensor = _tensor_type()
    node.freed = True
    node.rule = _freed_rule
    node.ctx.args = {k: (None if _holds_tensor(v, Tensor) else v) for k, v in node.ctx.args.items()}
    node.ctx.output = None


def _holds_tensor(value, Tensor) -> bool:
    return isinstance(value, Tensor) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value)
    )


def _add(a, b):
    from ..ops.eltwise import add

    return add(a, b)


def _check_grad(op_name: str, arg: str, tensor, grad) -> None:
    if tuple(grad.shape) != tuple(tensor.shape):
        raise ValidationError(
            f"backward of {op_name}: gradient for {arg}: expected shape {list(tensor.shape)}, got {list(grad.shape)}"
        )


def _accumulate_leaf(tensor, grad) -> None:
    """``tensor.grad += grad``, in the tensor's dtype and layout (also for host tensors)."""
    from ..ops._common import output_like

    if (grad.dtype is not tensor.dtype and tensor.dtype.is_float) or grad.layout is not tensor.layout:
        shards = [s.astype("float32", copy=False) for s in grad.shards("Tensor.backward")]
        grad = output_like("Tensor.backward", shards, grad, dtype=tensor.dtype, layout=tensor.layout)
    tensor._grad = grad if tensor._grad is None else _add(tensor._grad, grad)


class FunctionContext:
    """``ctx`` of a custom :class:`Function`: save tensors for backward, stash anything else as attributes."""

    def __init__(self) -> None:
        self.saved_tensors: tuple = ()
        self.needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors


class Function:
    """A differentiable op written by the user: subclass with static ``forward(ctx, *args)`` and
    ``backward(ctx, *grad_outputs)``; call ``MyOp.apply(*args)``. ``backward`` receives one gradient per output
    (None for an output that received none) and returns one gradient (or None) per positional argument of
    ``forward``; a wrong count raises."""

    @staticmethod
    def forward(ctx: FunctionContext, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionContext, *grad_outputs):  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        Tensor = _tensor_type()
        ctx = FunctionContext()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and _tracks(a) for a in args)
        with no_grad():
            output = cls.forward(ctx, *args, **kwargs)
        if not is_grad_enabled() or not any(ctx.needs_input_grad):
            return output
        names = [f"arg{i}" for i in range(len(args))]

        def rule(bctx: BackwardContext, upstream):
            grads = upstream if isinstance(upstream, tuple) else (upstream,)
            result = cls.backward(ctx, *grads)
            if not isinstance(result, tuple):
                result = (result,)
            if len(result) != len(args):
                raise ValidationError(
                    f"{cls.__name__}.backward returned {len(result)} gradients for {len(args)} forward arguments"
                )
            return dict(zip(names, result))

        bctx = BackwardContext(
            cls.__name__,
            dict(zip(names, args)),
            output,
            {n: f for n, f in zip(names, ctx.needs_input_grad) if f},
        )
        node = Node(cls.__name__, rule, bctx)
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        inputs = {id(a) for a in args if isinstance(a, Tensor)}
        for index, out in enumerate(outputs):
            if isinstance(out, Tensor) and out.dtype.is_float and id(out) not in inputs:
                out._node = node
                out._output_index = index
        return output
