"""Attributes a base class's ``__init__`` sets (issue 21: ``self.norm_eps`` set by a ``TtNormBase`` of another
file, LightweightModule subclasses). TTTv1's ``__init__`` runs the base's through ``super().__init__(…)``; the
generated ``from_model_args`` does the same on the namespace of TTTv1's attributes, so such an attribute is
computed at construction like any other.

The base classes are found without running anything: a class of the input module, or one imported from a file
of the project (``tools/refactor/imports.py`` resolves the import as Python would), and their bases in turn. An
attribute counts when the base's ``__init__`` assigns ``self.X`` (anywhere in its body, nested functions
aside)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from .helpers import dotted_module_of, first_party_folder
from .imports import resolve_module

#: Bases followed at most this deep (a base of a base of …).
MAX_DEPTH = 4


def _class_in(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _imported_from(tree: ast.Module, name: str, package: str) -> str | None:
    """The absolute module ``name`` is imported from at the top of ``tree`` (``from m import name``)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            if node.level == 0:
                return node.module
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
            return ".".join([*base, *([node.module] if node.module else [])])
    return None


def _assigned_in_init(klass: ast.ClassDef) -> dict[str, int]:
    """``self.X`` names the class's own ``__init__`` assigns -> the line of the first assignment."""
    init = next((n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    out: dict[str, int] = {}
    if init is None or not init.args.args:
        return out
    me = init.args.args[0].arg
    stack: list[ast.AST] = list(init.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                is_self = isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                if is_self and sub.value.id == me and isinstance(sub.ctx, ast.Store):
                    out.setdefault(sub.attr, sub.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _walk_bases(klass_name: str, path: Path, source: str, enter) -> None:
    """Visit ``klass_name`` (defined in ``source``, the file at ``path``) and then its bases, depth first as
    Python's method resolution does for single bases: ``enter(klass, file, own)`` gets each class found (``own``:
    the input's class itself) and returns whether to go on to that class's bases. Bases that cannot be found (an
    installed package's class, a name built at run time) are skipped."""
    root = first_party_folder(path)
    seen: set[tuple[str, str]] = set()

    def visit(name: str, file: Path, package: str, tree: ast.Module, depth: int, own: bool) -> None:
        # ``package``: the dotted package of ``file``, for its relative imports. A base's file is named by the
        # module it was resolved as: it may lie outside the input's first-party folder (a file of
        # ``models/tt_transformers`` for an input of ``models/demos/x/tt`` in a tree without ``__init__.py``)
        if depth > MAX_DEPTH or (str(file), name) in seen:
            return
        seen.add((str(file), name))
        klass = _class_in(tree, name)
        if klass is None:
            module = _imported_from(tree, name, package)
            resolved = resolve_module(module, root) if module else None
            if resolved is None or resolved.path is None:
                return
            try:
                other = ast.parse(resolved.path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                return
            base_package = (
                resolved.module if resolved.path.name == "__init__.py" else resolved.module.rpartition(".")[0]
            )
            visit(name, resolved.path, base_package, other, depth, own)
            return
        if not enter(klass, file, own):
            return
        for base in klass.bases:
            if isinstance(base, ast.Name):
                visit(base.id, file, package, tree, depth + 1, False)

    try:
        tree = ast.parse(source)
    except SyntaxError:  # pragma: no cover - the input parsed before this runs
        return
    visit(klass_name, path, dotted_module_of(path).rpartition(".")[0], tree, 0, True)


def base_attributes(klass_name: str, path: Path, source: str) -> dict[str, str]:
    """Attribute -> ``file:line`` where a base class of ``klass_name`` (defined in ``source``, the file at
    ``path``) sets it in its ``__init__``; the nearest base wins, as in Python's method resolution for a single
    base. Bases that cannot be found (an installed package's class, a name built at run time) add nothing."""
    out: dict[str, str] = {}

    def enter(klass: ast.ClassDef, file: Path, own: bool) -> bool:
        if own:
            return True
        for attr, line in _assigned_in_init(klass).items():
            out.setdefault(attr, f"{file.name}:{line}")
        init = next((n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        return init is None or calls_super_init(init)  # else the bases' __init__ does not run

    _walk_bases(klass_name, path, source, enter)
    return out


class BaseMethod(NamedTuple):
    """A method of a base class: the class's name, its file, the line of the ``def`` and the definition."""

    klass: str
    file: Path
    line: int
    definition: ast.FunctionDef | ast.AsyncFunctionDef


def base_method(klass_name: str, path: Path, source: str, method: str) -> BaseMethod | None:
    """The base class of ``klass_name`` whose ``method`` ``super().method(…)`` runs, the nearest base that
    defines it; None when no base the tool can find does."""
    found: list[BaseMethod] = []

    def enter(klass: ast.ClassDef, file: Path, own: bool) -> bool:
        if found:
            return False
        if not own:
            for node in klass.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == method:
                    found.append(BaseMethod(klass.name, file, node.lineno, node))
                    return False
        return True

    _walk_bases(klass_name, path, source, enter)
    return found[0] if found else None


def calls_super_init(init: ast.FunctionDef | None) -> bool:
    """Whether ``__init__`` calls ``super().__init__(…)`` as a statement of its own body, also under a test or in
    a loop (Qwen2.5-VL's ``if not TG: super().__init__(…); return``): ``from_model_args`` replays the body, that
    call included where TTTv1 makes it; nested functions and classes are not the body's."""
    if init is None:
        return False
    stack: list[ast.AST] = list(init.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if not isinstance(node, ast.Expr):
            stack.extend(
                n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.stmt, ast.excepthandler))
            )
            continue
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "__init__"
            and isinstance(call.func.value, ast.Call)
            and isinstance(call.func.value.func, ast.Name)
            and call.func.value.func.id == "super"
        ):
            return True
    return False


def inherited(inputs) -> dict[str, str]:
    """For the analysed class (``source.Inputs``): the attributes its bases' ``__init__`` set, when its own
    ``__init__`` runs them (``super().__init__(…)``); else nothing. Cached on ``inputs``."""
    if "inherited" not in inputs.cache:
        init = None
        try:
            tree = ast.parse(inputs.module.text)
        except SyntaxError:  # pragma: no cover - the input parsed before this runs
            tree = ast.Module(body=[], type_ignores=[])
        klass = _class_in(tree, inputs.class_name)
        if klass is not None:
            init = next(
                (n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
            )
        found = {}
        if calls_super_init(init):
            found = base_attributes(inputs.class_name, inputs.module.path, inputs.module.text)
        inputs.cache["inherited"] = found
    return inputs.cache["inherited"]


__all__ = ["BaseMethod", "base_attributes", "base_method", "calls_super_init", "inherited"]
