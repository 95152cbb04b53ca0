"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad`` / ``step`` / ``state_dict``.

Parameters may be given as tensors, ``(name, tensor)`` pairs (``model.named_parameters()``), a
``{name: tensor}`` dict, or a list of group dicts (``{"params": ..., "lr": ...}``) as in PyTorch. When every
parameter has a name, ``state_dict()`` keys the state by name (checkpoints survive model refactors that keep
names); otherwise by position. Subclasses implement :meth:`_update` for one parameter; the update runs in
place on the device (the fused ``ttnn.*_step_`` ops), so the model keeps holding the same tensor objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd import no_grad
from ..errors import ValidationError
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
        from ..ops.creation import zeros_like

        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad = None if set_to_none else zeros_like(p.grad)

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a gradient; returns ``closure()`` if given (called with grad on)."""
        loss = closure() if closure is not None else None
        with no_grad():
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

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {key: {...}}, "param_groups": [{..., "params": [key, ...]}]}`` with keys = parameter names
        (or positions); state tensors are snapshots."""
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
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyper-parameters and state saved by :meth:`state_dict` (state tensors are copied in place or
        created like their parameter)."""
        from ..nn.module import assign_
        from ..ops.creation import zeros_like

        owner = f"{type(self).__name__}.load_state_dict"
        saved_groups = state_dict.get("param_groups")
        if not isinstance(saved_groups, list) or len(saved_groups) != len(self.param_groups):
            raise ValidationError(
                f"{owner}: expected {len(self.param_groups)} parameter groups, got {saved_groups!r}"
            )
        keys = iter(self._keys())
        for group, saved in zip(self.param_groups, saved_groups):
            if len(saved.get("params", ())) != len(group["params"]):
                raise ValidationError(
                    f"{owner}: a group has {len(group['params'])} parameters, the saved one {len(saved.get('params', ()))}"
                )
            mine = [next(keys) for _ in group["params"]]
            if list(saved["params"]) != mine:
                raise ValidationError(f"{owner}: saved parameter keys {saved['params']} differ from {mine}")
            group.update({k: v for k, v in saved.items() if k != "params"})
            for key, p in zip(mine, group["params"]):
                entry = state_dict.get("state", {}).get(key)
                if entry is None:
                    self.state.pop(p, None)
                    continue
                current = self.state.setdefault(p, {})
                for name, value in entry.items():
                    if isinstance(value, Tensor) or hasattr(value, "shape"):
                        target = current.get(name)
                        if not isinstance(target, Tensor):
                            target = current[name] = zeros_like(p)
                        assign_(target, value, f"{owner}: state {key}.{name}")
                    else:
                        current[name] = value

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join([*lines, ")"])
