"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad`` / ``step`` / ``state_dict``.

Parameters may be given as tensors, ``(name, tensor)`` pairs (``model.named_parameters()``), a
``{name: tensor}`` dict, or a list of group dicts (``{"params": ..., "lr": ...}``) as in PyTorch. When every
parameter has a name, ``state_dict()`` keys the state by name (checkpoints survive model refactors that keep
names); otherwise by position. Subclasses implement :meth:`_update` for one parameter; the update runs in
place on the device (the fused ``ttnn.*_step_`` ops), so the model keeps holding the same tensor objects.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .._threads import single_threaded_blas
from ..autograd import no_grad
from ..errors import ValidationError
from ..nn.module import prepare_assign, write_assign
from ..ops.creation import zeros_like
from ..tensor import Tensor

__all__ = ["Optimizer"]


def _named(params, owner: str) -> list[tuple[str | None, Tensor]]:
    items = params.items() if isinstance(params, dict) else params
    out = []
    for item in items:
        name, tensor = item if isinstance(item, tuple) else (None, item)
        if not isinstance(tensor, Tensor):
            raise ValidationError(f"{owner}: params: expected ttnn tensors, got {type(tensor).__name__}")
        if not tensor.is_leaf:
            raise ValidationError(
                f"{owner}: params: {name or 'a parameter'} is not a leaf tensor (detach it first)"
            )
        if not tensor.dtype.is_float:
            raise ValidationError(
                f"{owner}: params: {name or 'a parameter'} has dtype {tensor.dtype.name}; expected a float tensor"
            )
        out.append((name, tensor))
    return out


class Optimizer:
    """Base class. ``param_groups`` is a list of dicts (hyper-parameters + ``"params"``); ``state`` maps a
    parameter to its dict of state tensors and counters."""

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[Tensor, dict[str, Any]] = {}
        self._names: dict[int, str | None] = {}
        owner = type(self).__name__
        if isinstance(params, Tensor):
            raise ValidationError(f"{owner}: params: expected an iterable of tensors, got a single tensor")
        if isinstance(params, dict) and "params" not in params:
            groups = [{"params": params}]
        elif isinstance(params, dict):
            groups = [params]
        else:
            params = list(params)
            if not params:
                raise ValidationError(f"{owner}: got an empty parameter list")
            groups = params if all(isinstance(g, dict) for g in params) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        owner = type(self).__name__
        if not isinstance(group, dict) or "params" not in group:
            raise ValidationError(
                f"{owner}.add_param_group: expected a dict with a 'params' entry, got {group!r}"
            )
        named = _named(group["params"], owner)
        unknown = set(group) - set(self.defaults) - {"params", "initial_lr"}
        if unknown:
            raise ValidationError(f"{owner}.add_param_group: unknown hyper-parameters {sorted(unknown)}")
        for name, p in named:
            if id(p) in self._names:
                raise ValidationError(
                    f"{owner}: parameter {name or ''} appears in more than one group".replace("  ", " ")
                )
            self._names[id(p)] = name
        full = {**self.defaults, **{k: v for k, v in group.items() if k != "params"}}
        self._check_group(full)
        full["params"] = [p for _, p in named]
        self.param_groups.append(full)

    def _check_group(self, group: dict[str, Any]) -> None:
        """Validate one group's hyper-parameters (subclasses extend)."""
        lr = group.get("lr")
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or lr < 0:
            raise ValidationError(f"{type(self).__name__}: lr: expected a number >= 0, got {lr!r}")

    # --- the training-loop API ----------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (default) or replace it by zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad = None if set_to_none else zeros_like(p.grad)

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a gradient; returns ``closure()`` if given (called with grad on)."""
        loss = closure() if closure is not None else None
        with no_grad(), single_threaded_blas:  # BLAS pinned once for all the updates (tttv2/ttnn/_threads.py)
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self._update(p, p.grad, group, self.state.setdefault(p, {}))
        return loss

    def _update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError

    # --- learning rate (TTML's get_lr / set_lr) ----------------------------------------------------------------
    def get_lr(self) -> float:
        return float(self.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        for group in self.param_groups:
            group["lr"] = float(lr)

    # --- checkpoints ---------------------------------------------------------------------------------------------
    def _keys(self) -> list:
        params = [p for g in self.param_groups for p in g["params"]]
        names = [self._names[id(p)] for p in params]
        if all(n is not None for n in names) and len(set(names)) == len(names):
            return names
        return list(range(len(params)))

    # state entries a subclass keeps per parameter, and those that must come together (checked on load)
    _STATE_KEYS: frozenset[str] = frozenset({"step"})
    _STATE_REQUIRED: frozenset[str] = frozenset()

    @classmethod
    def _kind(cls) -> str:
        """The ``ttnn.optim`` class this optimizer is (subclasses elsewhere, e.g. ttml's, keep their state)."""
        for klass in cls.__mro__:
            if klass.__module__.startswith(__package__ + "."):
                return klass.__name__
        return cls.__name__  # pragma: no cover - every optimizer derives from Optimizer

    def state_dict(self) -> dict[str, Any]:
        """``{"optimizer": class, "state": {key: {...}}, "param_groups": [{..., "params": [key, ...]}]}`` with
        keys = parameter names (or positions); state tensors are snapshots."""
        keys = iter(self._keys())
        state, groups = {}, []
        for group in self.param_groups:
            group_keys = []
            for p in group["params"]:
                key = next(keys)
                group_keys.append(key)
                if p in self.state:
                    state[key] = {
                        k: (v.detach() if isinstance(v, Tensor) else v) for k, v in self.state[p].items()
                    }
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": group_keys})
        return {"optimizer": self._kind(), "state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyper-parameters and state saved by :meth:`state_dict` (state tensors are copied in place or
        created like their parameter).

        All or nothing: the whole state is checked first (optimizer class, groups, parameter keys,
        hyper-parameters, state entries and tensor shapes) and new state tensors are allocated; only then is
        anything changed, so a bad state raises and leaves the optimizer as it was."""
        owner = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise ValidationError(f"{owner}: state_dict: expected a dict, got {type(state_dict).__name__}")
        saved_kind = state_dict.get("optimizer", self._kind())
        if saved_kind != self._kind():
            raise ValidationError(
                f"{owner}: the state was saved by a {saved_kind} optimizer; a {self._kind()} cannot load it "
                f"(create a {saved_kind} to resume from it)"
            )
        saved_groups = state_dict.get("param_groups")
        if not isinstance(saved_groups, list) or len(saved_groups) != len(self.param_groups):
            raise ValidationError(
                f"{owner}: expected {len(self.param_groups)} parameter groups, got {saved_groups!r}"
            )
        saved_state = state_dict.get("state", {})
        if not isinstance(saved_state, dict):
            raise ValidationError(f"{owner}: state: expected a dict, got {type(saved_state).__name__}")
        # 1. check everything and stage the changes
        keys = iter(self._keys())
        new_groups, new_states, writes = [], [], []
        for group, saved in zip(self.param_groups, saved_groups):
            if not isinstance(saved, dict) or len(saved.get("params", ())) != len(group["params"]):
                count = len(saved.get("params", ())) if isinstance(saved, dict) else saved
                raise ValidationError(
                    f"{owner}: a group has {len(group['params'])} parameters, the saved one {count}"
                )
            mine = [next(keys) for _ in group["params"]]
            if list(saved["params"]) != mine:
                raise ValidationError(f"{owner}: saved parameter keys {saved['params']} differ from {mine}")
            hyper = {k: v for k, v in saved.items() if k != "params"}
            unknown = set(hyper) - set(self.defaults) - {"initial_lr"}
            if unknown:
                raise ValidationError(
                    f"{owner}: the state was saved by {_kind_with(set(hyper))}, not a {self._kind()}: its "
                    f"hyper-parameters {sorted(unknown)} are not {self._kind()}'s ({sorted(self.defaults)})"
                )
            merged = {**group, **hyper}
            self._check_group(merged)
            new_groups.append(hyper)
            for key, p in zip(mine, group["params"]):
                entry = saved_state.get(key)
                new_states.append(
                    (p, None if entry is None else self._stage_entry(owner, key, p, entry, writes))
                )
        # 2. apply (nothing below can fail on the saved values)
        for group, hyper in zip(self.param_groups, new_groups):
            group.update(hyper)
        for p, entry in new_states:
            if entry is None:
                self.state.pop(p, None)
            else:
                self.state[p] = entry
        for target, arrays, what in writes:
            write_assign(target, arrays, what)

    def _stage_entry(self, owner: str, key, param: Tensor, entry, writes: list) -> dict[str, Any]:
        """Check one parameter's saved state; returns the state dict to install, and appends the checked,
        converted tensor copies to ``writes`` as ``(target, arrays, what)``. New state tensors are allocated
        here, so that applying cannot fail."""
        if not isinstance(entry, dict):
            raise ValidationError(f"{owner}: state {key}: expected a dict of state entries, got {entry!r}")
        unknown = set(entry) - self._STATE_KEYS
        if unknown:
            raise ValidationError(
                f"{owner}: state {key} has entries {sorted(unknown)} that {self._kind()} does not keep "
                f"(it keeps {sorted(self._STATE_KEYS)}): the state was saved by another optimizer"
            )
        missing = self._STATE_REQUIRED - set(entry)
        if missing and "step" in entry:
            raise ValidationError(f"{owner}: state {key} lacks the entries {sorted(missing)}")
        current = self.state.get(param, {})
        staged: dict[str, Any] = {}
        for name, value in entry.items():
            if isinstance(value, Tensor) or hasattr(value, "shape"):
                target = current.get(name)
                if not isinstance(target, Tensor):
                    target = zeros_like(param)
                what = f"{owner}: state {key}.{name}"
                writes.append((target, prepare_assign(target, value, what), what))
                staged[name] = target
            else:
                staged[name] = value
        return staged

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join([*lines, ")"])


def _kind_with(hyper: set[str]) -> str:
    """Name the ttnn.optim optimizer whose constructor takes exactly these hyper-parameters (a state saved
    before states recorded their optimizer), or say that none does."""
    pending = list(Optimizer.__subclasses__())
    while pending:
        klass = pending.pop()
        pending.extend(klass.__subclasses__())
        if klass.__module__.startswith(__package__ + "."):
            names = set(inspect.signature(klass.__init__).parameters) - {"self", "params"}
            if hyper - {"initial_lr"} == names:
                return f"a {klass.__name__} optimizer"
    return "another optimizer"
