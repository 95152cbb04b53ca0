"""Targets: ``package.module:Class`` names of the classes whose calls are recorded."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .errors import TargetError

# the tttv1 modules a catalogue sweep records by default (MLP, attention, norms, embedding, LM head)
TTTV1_TARGETS = (
    "tttv1.tt.mlp:MLP",
    "tttv1.tt.attention:Attention",
    "tttv1.tt.rmsnorm:RMSNorm",
    "tttv1.tt.distributed_norm:DistributedNorm",
    "tttv1.tt.embedding:Embedding",
    "tttv1.tt.lm_head:LMHead",
)


@dataclass(frozen=True)
class Target:
    """One recorded class, named ``module:Class`` (``Class`` may be dotted for a nested class)."""

    module: str
    qualname: str

    @property
    def name(self) -> str:
        return f"{self.module}:{self.qualname}"

    def __str__(self) -> str:
        return self.name


def parse_target(text: str) -> Target:
    """``'tttv1.tt.mlp:MLP'`` → Target; anything else is a TargetError naming the expected form."""
    module, sep, qualname = text.partition(":")
    parts_ok = all(p.isidentifier() for p in module.split(".")) and all(
        p.isidentifier() for p in qualname.split(".")
    )
    if not sep or not module or not qualname or not parts_ok:
        raise TargetError(f"--target: expected 'package.module:Class' (e.g. tttv1.tt.mlp:MLP), got {text!r}")
    return Target(module, qualname)


def entry_method(cls: type) -> str:
    """The method a call goes through: ``forward`` when the class has one, else its own ``__call__``."""
    if callable(getattr(cls, "forward", None)):
        return "forward"
    if any("__call__" in vars(k) for k in cls.__mro__ if k is not object):
        return "__call__"
    raise TargetError(
        f"--target {cls.__module__}:{cls.__qualname__}: the class has no forward() or __call__()"
    )


def resolve_in(module, target: Target) -> type:
    """The class ``target`` names inside the already imported ``module``."""
    obj = module
    for part in target.qualname.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"--target {target}: module {target.module!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise TargetError(f"--target {target}: expected a class, got {type(obj).__name__}")
    entry_method(obj)
    return obj


def import_target(target: Target) -> type:
    """Import ``target``'s module and return its class; a TargetError says why it cannot be recorded."""
    try:
        module = importlib.import_module(target.module)
    except Exception as exc:  # any import failure is the user's target problem, reported as such
        raise TargetError(
            f"--target {target}: module {target.module!r} does not import: {type(exc).__name__}: {exc}"
        ) from exc
    return resolve_in(module, target)
