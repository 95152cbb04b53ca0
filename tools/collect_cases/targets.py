"""Targets: the classes whose calls are recorded, named as every command of the toolkit names them,
``MODULE[:CLASS]`` (docs/cli.md): MODULE a dotted module (``tttv1.tt.mlp``) or its file (``tttv1/tt/mlp.py``),
CLASS by default the module's main class (trace-deps' rule). A target is stored under its dotted name,
``tttv1.tt.mlp:MLP``, whichever way it was typed."""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

from tttv2_tools._cli import (
    TARGET_FORM,
    dotted_module,
    is_dotted_module,
    missing_file,
    module_file,
    split_target,
)

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
    """``'tttv1.tt.mlp:MLP'``, ``'tttv1/tt/mlp.py:MLP'``, ``'tttv1/tt/mlp.py'`` (its main class) → Target; anything
    else is a TargetError naming the expected form."""
    try:
        module, qualname = split_target(text)
    except ValueError:
        module, qualname = "", None
    path = None
    if module and not is_dotted_module(module):  # a file: named by its dotted module, as import names it
        path = Path(module)
        if not path.is_file():
            raise TargetError(f"--target {missing_file(path, 'MODULE')}")
        module = dotted_module(path)
    if not module or not all(p.isidentifier() for p in module.split(".")):
        raise TargetError(f"--target: expected {TARGET_FORM}, e.g. tttv1.tt.mlp:MLP, got {text!r}")
    if qualname is None:
        qualname = default_class(module, text, path)
    return Target(module, qualname)


def default_class(module: str, text: str, path: Path | None = None) -> str:
    """The class a target without ``:CLASS`` names: the module's main class, as trace-deps and tttv2-refactor
    choose it (``trace_dependencies/mainclass.py``), else its first class with a forward or ``__call__``; read
    from the source, nothing imported."""
    from tttv2_tools.trace_dependencies.mainclass import main_class

    path = path or module_file(module)
    if not path.is_file():
        raise TargetError(
            f"--target {text}: found no source of module {module} (no file here, no importable package has it) to "
            f"choose its class; write {module}:CLASS"
        )
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        raise TargetError(
            f"--target {text}: cannot read the module's source to choose its class; write {module}:CLASS"
        ) from None
    entries = ("forward", "__call__")
    name, _ = main_class(tree, entries)
    if name is None:
        name = next(
            (
                c.name
                for c in tree.body
                if isinstance(c, ast.ClassDef)
                and any(
                    isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in entries
                    for f in c.body
                )
            ),
            None,
        )
    if name is None:
        raise TargetError(
            f"--target {text}: {path} has no class with a forward() or __call__(); write {module}:CLASS"
        )
    return name


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
