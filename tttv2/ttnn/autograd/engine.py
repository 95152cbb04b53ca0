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
  node; writing into a caller-provided output tensor that takes part in differentiation raises;
* hooks on leaves (what data-parallel gradient reduction needs): ``register_hook`` sees (and may replace) each
  gradient before it is added into ``.grad``; ``register_post_accumulate_grad_hook`` runs once per backward,
  after the leaf's last contribution of that backward was added; ``queue_callback`` runs a function when the
  outermost backward has finished.
* every tensor carries a version counter that each in-place write bumps (KV-cache fills and updates, the
  optimizer steps, ``copy_host_to_device_tensor``, ``output_tensor=`` and persistent output buffers,
  ``load_state_dict``). A node remembers the versions of the tensors it saved (its tensor arguments and its
  outputs; a custom :class:`Function` those passed to ``save_for_backward``); before its rule runs, a changed
  version raises an error naming the op that saved the tensor and the op that last modified it, as torch does,
  instead of computing gradients from the new values.

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
from .._upcalls import provide, upcall
from ..errors import ValidationError
from ..tensor import Tensor

__all__ = [
    "BackwardContext",
    "Function",
    "FunctionContext",
    "Node",
    "RemovableHandle",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "register_backward",
    "register_hook",
    "register_non_differentiable",
    "register_post_accumulate_grad_hook",
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

    __slots__ = ("_output", "_weak", "args", "needs", "op_name", "versions")

    def __init__(
        self,
        op_name: str,
        args: dict[str, Any],
        output: Any,
        needs: dict[str, Any],
        versions: dict[str, Any] | None = None,
    ) -> None:
        self.op_name = op_name
        self.args = args
        self.needs = needs
        self.output = output
        # argument name (or _OUTPUT_KEY) -> the saved tensors' versions (a list for a list of tensors)
        self.versions = versions if versions is not None else {}

    @property
    def output(self) -> Any:
        """The forward output (a tuple/list for multi-output ops); None once the graph was freed."""
        return self._output() if self._weak else self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._weak = isinstance(value, Tensor)
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


def _tracks(value) -> bool:
    return isinstance(value, Tensor) and (value.requires_grad or value._node is not None)


class _Binder:
    """The named arguments of one call of an op, as ``inspect.Signature.bind`` + ``apply_defaults`` give them, with
    ``**kwargs`` flattened at the end: every parameter in signature order, then the extra keywords in call order.

    ``Signature.bind`` costs tens of microseconds per call, about a tenth of the bookkeeping of a recorded op in a
    training step. The common case (positional-or-keyword and keyword-only parameters, maybe ``**kwargs``, a call
    the op has already accepted) is bound here from the parameter list computed once; any other signature or call
    (``*args``, positional-only parameters, surplus positionals, a name given twice) takes ``Signature.bind``."""

    __slots__ = ("names", "params", "positional", "signature", "simple", "var_keyword")

    def __init__(self, fn: Callable) -> None:
        self.signature = inspect.signature(fn)
        kinds = inspect.Parameter
        self.params = []
        self.var_keyword: str | None = None
        self.simple = True
        for param in self.signature.parameters.values():
            if param.kind is kinds.VAR_KEYWORD:
                self.var_keyword = param.name
            elif param.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY):
                self.params.append((param.name, param.kind is kinds.POSITIONAL_OR_KEYWORD, param.default))
            else:  # *args or positional-only
                self.simple = False
        self.positional = sum(1 for _, positional, _ in self.params if positional)
        self.names = frozenset(name for name, _, _ in self.params)

    def arguments(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        if self.simple and len(args) <= self.positional:
            arguments: dict[str, Any] = {}
            empty = inspect.Parameter.empty
            for index, (name, _, default) in enumerate(self.params):
                if index < len(args):  # the positional parameters come first
                    if name in kwargs:
                        break  # given twice: Signature.bind raises
                    arguments[name] = args[index]
                elif name in kwargs:
                    arguments[name] = kwargs[name]
                elif default is not empty:
                    arguments[name] = default
                else:
                    break  # missing: Signature.bind raises
            else:
                extra = [name for name in kwargs if name not in self.names]
                if not extra or self.var_keyword is not None:
                    for name in extra:
                        arguments[name] = kwargs[name]
                    return arguments
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if self.var_keyword is not None:  # flatten **kwargs into the mapping
            arguments.update(arguments.pop(self.var_keyword, {}))
        return arguments


_BINDERS: dict[Callable, _Binder] = {}

# arguments through which an op writes its result into a caller-provided tensor
_OUTPUT_BUFFER_ARGS = (
    "output_tensor",
    "optional_output_tensor",
    "output",
    "out",
    "persistent_output_buffer",
    "persistent_output_tensor",
)
_BUFFER_NAMES = frozenset(_OUTPUT_BUFFER_ARGS)


def _any_tracked(values) -> bool:
    """Whether a tensor among ``values``, or in a list / tuple among them, takes part in differentiation."""
    for value in values:
        if isinstance(value, Tensor):
            if value._requires_grad or value._node is not None:
                return True
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, Tensor) and (item._requires_grad or item._node is not None):
                    return True
    return False


def record(op_name: str, fn: Callable, args: tuple, kwargs: dict, output: Any) -> None:
    """Attach a backward node to ``output`` if grad mode is on and an input takes part in differentiation.

    Outputs that are one of the inputs (ops that return their input unchanged, e.g. a reshape to the same
    shape) get no node: the gradient reaches the input directly. Non-float outputs (indices) get no node.
    Writing into a caller-provided output tensor that takes part in differentiation (or that is also an
    input) is an in-place update, which autograd does not support: it raises.

    Called after every op a model runs (about 220 times per NanoGPT training step), so it walks the arguments
    once, with the parameter list of the op computed once (:class:`_Binder`).
    """
    if not getattr(_state, "enabled", True) or op_name in _NON_DIFFERENTIABLE:
        return
    if not (_any_tracked(args) or (kwargs and _any_tracked(kwargs.values()))):
        return
    rule = _RULES.get(op_name)
    if rule is None:
        raise ValidationError(
            f"{op_name}: an input requires grad but {op_name} has no backward; run it under ttnn.autograd.no_grad() "
            "or detach() the input"
        )
    binder = _BINDERS.get(fn)
    if binder is None:
        binder = _BINDERS[fn] = _Binder(fn)
    arguments = binder.arguments(args, kwargs)
    needs: dict[str, Any] = {}
    versions: dict[str, Any] = {}
    input_ids: set[int] = set()
    buffers: set[int] = set()
    for name, value in arguments.items():
        if isinstance(value, Tensor):
            if name in _BUFFER_NAMES:
                buffers.add(id(value))
                continue
            needs[name] = value._requires_grad or value._node is not None
            versions[name] = value._versions.count
            input_ids.add(id(value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Tensor) for v in value):
            needs[name] = [v._requires_grad or v._node is not None for v in value]
            versions[name] = [v._versions.count for v in value]
            input_ids.update(id(v) for v in value)
    if buffers:
        for name in _OUTPUT_BUFFER_ARGS:
            buf = arguments.get(name)
            if isinstance(buf, Tensor) and (_tracks(buf) or id(buf) in input_ids):
                raise ValidationError(
                    f"{op_name}: {name} is written in place, but it "
                    + ("requires grad" if _tracks(buf) else "is also an input of the op")
                    + "; autograd does not support in-place updates (leave the output to the op)"
                )
    if isinstance(output, Tensor):  # the common case: one output
        outputs: tuple | list = (output,)
    else:
        outputs = output if isinstance(output, (tuple, list)) else (output,)
    targets = [
        (index, out)
        for index, out in enumerate(outputs)
        if isinstance(out, Tensor) and out.dtype.is_float and (id(out) not in input_ids or id(out) in buffers)
    ]
    if not targets:
        return
    versions[_OUTPUT_KEY] = _versions_of(list(outputs))
    ctx = BackwardContext(op_name, arguments, output, needs, versions)
    node = Node(op_name, rule, ctx)
    for index, out in targets:
        out._node = node
        out._output_index = index


_OUTPUT_KEY = "<output>"  # BackwardContext.versions key of the op's outputs


def _versions_of(values: list) -> list:
    """The versions of a list of values (None for non-tensors): an op's outputs, a Function's saved tensors."""
    return [v._version if isinstance(v, Tensor) else None for v in values]


def check_versions(op_name: str, saved: dict[str, Any], values: dict[str, Any], outputs: Any = None) -> None:
    """Raise if a tensor saved for the backward of ``op_name`` was modified in place since it was saved.

    ``saved`` maps a name to a version (or a list of versions); ``values`` maps the same names to the tensors
    (or lists of tensors) now; ``outputs`` are the op's outputs now (saved under ``_OUTPUT_KEY``).
    """
    for name, then in saved.items():
        value = _outputs_of(outputs) if name == _OUTPUT_KEY else values.get(name)
        if not isinstance(then, list):
            if then is not None and isinstance(value, Tensor) and value._version != then:
                _raise_modified(op_name, name, value, then)
            continue
        if isinstance(value, (list, tuple)):
            for index, (tensor, version) in enumerate(zip(value, then)):
                if version is not None and isinstance(tensor, Tensor) and tensor._version != version:
                    _raise_modified(op_name, f"{name}[{index}]" if len(then) > 1 else name, tensor, version)


def _raise_modified(op_name: str, name: str, tensor, version: int) -> None:
    what = name.replace(_OUTPUT_KEY, "the output")
    raise ValidationError(
        f"Tensor.backward: {what} of {op_name} was saved for backward at version {version} and has "
        f"since been modified in place by {tensor._versions.last_op} (now version {tensor._version}); "
        f"the gradients of {op_name} would be computed from the new values. Run the in-place op after "
        "backward(), or give the op a copy (ttnn.clone) of the tensor"
    )


def _check_saved(node: Node) -> None:
    ctx = node.ctx
    if ctx.versions:
        check_versions(node.name, ctx.versions, ctx.args, ctx.output)


def _outputs_of(output) -> list:
    return list(output) if isinstance(output, (tuple, list)) else [output]


def run_backward(root, grad, retain_graph: bool = False) -> None:
    """Backpropagate ``grad`` from ``root`` to every leaf that requires grad."""
    if root._node is None and not root.requires_grad:
        raise ValidationError("Tensor.backward: this tensor does not require grad and has no grad_fn")
    depth = getattr(_state, "backward_depth", 0)
    _state.backward_depth = depth + 1
    if depth == 0:
        _state.callbacks = []
    try:
        _backward(root, grad, retain_graph)
        while depth == 0 and _state.callbacks:  # a callback may queue another one
            _state.callbacks.pop(0)()
    finally:
        _state.backward_depth = depth
        if depth == 0:
            _state.callbacks = []


def _backward(root, grad, retain_graph: bool) -> None:
    if root._node is None:
        with no_grad():
            _accumulate_leaf(root, grad)
            _run_post_accumulate_hooks(root)
        return
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
    # leaves with post-accumulate hooks: how many edges of this graph still have to deliver their gradient
    waiting: dict[int, int] = {}
    for node in order:
        for parent in node.parents():
            if parent._node is None and getattr(parent, "_post_accumulate_hooks", None):
                waiting[id(parent)] = waiting.get(id(parent), 0) + 1
    received: set[int] = set()
    # gradients per node output: node id -> {output index: grad}
    pending: dict[int, dict[int, Any]] = {id(root._node): {root._output_index: grad}}
    # tensors that received a gradient, kept alive until their node ran (its rule may read ctx.output)
    alive: dict[int, list] = {}
    with no_grad(), single_threaded_blas:  # the emulator's BLAS policy (see _threads.py)
        for node in order:
            grads_out = pending.pop(id(node), None)
            keep = alive.pop(id(node), None)  # noqa: F841 - holds the node's outputs while its rule runs
            if grads_out is None:
                _leaf_edges_done(node, waiting, received)
                if not retain_graph:
                    _free(node)
                continue
            outputs = node.ctx.output if isinstance(node.ctx.output, (tuple, list)) else None
            upstream = (
                grads_out.get(0) if outputs is None else tuple(grads_out.get(i) for i in range(len(outputs)))
            )
            _check_saved(node)
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
                        received.add(id(tensor))
            _leaf_edges_done(node, waiting, received)
            if not retain_graph:
                _free(node)


def _leaf_edges_done(node: Node, waiting: dict[int, int], received: set[int]) -> None:
    """Count down the edges from ``node`` to hooked leaves; run a leaf's post-accumulate hooks after its last one
    (only if it received a gradient in this backward)."""
    if not waiting:
        return
    for parent in node.parents():
        key = id(parent)
        if key in waiting:
            waiting[key] -= 1
            if waiting[key] == 0:
                del waiting[key]
                if key in received:
                    _run_post_accumulate_hooks(parent)


def _freed_rule(ctx, grad):  # pragma: no cover - run_backward refuses freed nodes before calling a rule
    raise ValidationError(f"backward of {ctx.op_name}: the graph was freed")


def _free(node: Node) -> None:
    """Drop what a node saved (inputs, outputs, the custom Function's context): the graph's memory goes."""
    node.freed = True
    node.rule = _freed_rule
    node.ctx.args = {k: (None if _holds_tensor(v, Tensor) else v) for k, v in node.ctx.args.items()}
    node.ctx.output = None


def _holds_tensor(value, Tensor) -> bool:
    return isinstance(value, Tensor) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value)
    )


def _add(a, b):
    return upcall("add")(a, b)


def _check_grad(op_name: str, arg: str, tensor, grad) -> None:
    if tuple(grad.shape) != tuple(tensor.shape):
        raise ValidationError(
            f"backward of {op_name}: gradient for {arg}: expected shape {list(tensor.shape)}, got {list(grad.shape)}"
        )


def _accumulate_leaf(tensor, grad) -> None:
    """``tensor.grad += grad``, in the tensor's dtype and layout (also for host tensors), after the tensor's
    ``register_hook`` hooks have seen (and possibly replaced) ``grad``."""
    output_like = upcall("output_like")
    for hook in list(getattr(tensor, "_grad_hooks", None) or ()):
        replaced = hook(grad)
        if replaced is not None:
            _check_grad("a register_hook hook", "its return value", tensor, replaced)
            grad = replaced
    if (grad.dtype is not tensor.dtype and tensor.dtype.is_float) or grad.layout is not tensor.layout:
        shards = [s.astype("float32", copy=False) for s in grad.shards("Tensor.backward")]
        grad = output_like("Tensor.backward", shards, grad, dtype=tensor.dtype, layout=tensor.layout)
    tensor._grad = grad if tensor._grad is None else _add(tensor._grad, grad)


class RemovableHandle:
    """Returned by the hook registrations: ``handle.remove()`` unregisters the hook (a second call does nothing)."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _leaf_hooks(tensor, attr: str, what: str, hook) -> list:
    if not isinstance(tensor, Tensor):
        raise ValidationError(f"{what}: expected a ttnn.Tensor, got {type(tensor).__name__}")
    if tensor._node is not None or not tensor.requires_grad:
        raise ValidationError(f"{what}: only a leaf tensor that requires grad takes gradient hooks")
    if not callable(hook):
        raise ValidationError(f"{what}: hook: expected a callable, got {type(hook).__name__}")
    hooks = getattr(tensor, attr, None)
    if hooks is None:
        hooks = []
        setattr(tensor, attr, hooks)
    return hooks


def register_hook(tensor, hook: Callable) -> RemovableHandle:
    """``hook(grad)`` is called with each gradient that reaches the leaf ``tensor``, before it is added into
    ``tensor.grad``; a tensor it returns replaces the gradient (None keeps it). Like ``torch.Tensor.register_hook``
    on a leaf."""
    hooks = _leaf_hooks(tensor, "_grad_hooks", "Tensor.register_hook", hook)
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def register_post_accumulate_grad_hook(tensor, hook: Callable) -> RemovableHandle:
    """``hook(tensor)`` runs once per backward, after the last gradient of that backward was added into the leaf
    ``tensor``'s ``.grad`` (not at all if the backward sent it none); like torch's hook of the same name."""
    hooks = _leaf_hooks(tensor, "_post_accumulate_hooks", "Tensor.register_post_accumulate_grad_hook", hook)
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def _run_post_accumulate_hooks(tensor) -> None:
    for hook in list(getattr(tensor, "_post_accumulate_hooks", None) or ()):
        hook(tensor)


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` once the backward that is running now has finished (the outermost one, when a backward
    runs inside another, as gradient checkpointing does). Only valid while a backward runs (e.g. from a hook)."""
    if getattr(_state, "backward_depth", 0) == 0:
        raise ValidationError("ttnn.autograd.queue_callback: no backward is running")
    if not callable(callback):
        raise ValidationError(
            f"ttnn.autograd.queue_callback: callback: expected a callable, got {type(callback).__name__}"
        )
    _state.callbacks.append(callback)


class FunctionContext:
    """``ctx`` of a custom :class:`Function`: save tensors for backward, stash anything else as attributes."""

    def __init__(self) -> None:
        self.saved_tensors: tuple = ()
        self.needs_input_grad: tuple[bool, ...] = ()
        self._saved_versions: list = []

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` for backward; modifying one in place before backward makes backward raise."""
        self.saved_tensors = tensors
        self._saved_versions = _versions_of(list(tensors))


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
        ctx = FunctionContext()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and _tracks(a) for a in args)
        with no_grad():
            output = cls.forward(ctx, *args, **kwargs)
        if not is_grad_enabled() or not any(ctx.needs_input_grad):
            return output
        names = [f"arg{i}" for i in range(len(args))]

        def rule(bctx: BackwardContext, upstream):
            check_versions(
                cls.__name__, {"saved_tensors": ctx._saved_versions}, {"saved_tensors": ctx.saved_tensors}
            )
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


provide(
    register_hook=register_hook,
    register_post_accumulate_grad_hook=register_post_accumulate_grad_hook,
    run_backward=run_backward,
)
