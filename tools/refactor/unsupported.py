"""TTTv1 constructs on the forward path whose meaning the codemod does not carry over, reported as gaps (it
would otherwise emit code that runs, silently different):

- a decorator on ``forward`` or on a method forward reaches (other than ``staticmethod`` / ``classmethod`` /
  properties): specialising and inlining work on the undecorated body;
- ``super().method(...)`` that the codemod cannot copy (in the generated class ``super()`` is ``TTModule``):
  no readable base defines it, the call does not bind to the base's method, it passes unpacked arguments, or
  the base's method itself calls ``super()``; any other is copied like the class's own methods (inline.py);
- a module global that a ``global`` statement changes: TTTv1 reads its current value on every call, the
  generated module would use the value it had when it was generated (or at construction).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import libcst as cst

from .bases import base_method
from .cstutil import names_written
from .errors import Gap
from .inline import not_copied
from .names import signature_of
from .source import Inputs, methods_of
from .walk import walk

_CARRIED_DECORATORS = {"staticmethod", "classmethod", "property", "cached_property"}


def unsupported_gaps(inputs: Inputs) -> list[Gap]:
    methods = methods_of(inputs.klass)
    entry = "forward" if "forward" in methods else "__call__"
    reached = _reached(methods, entry)
    globals_changed = _globals_changed(inputs.module.module)
    functions = inputs.module.functions()
    parsed = inputs.module
    gaps: list[Gap] = []
    for name in sorted(reached, key=lambda n: parsed.line_of(methods[n]) or 0):
        func = methods[name]
        for decorator in func.decorators:
            text = _decorator_text(decorator)
            if text.split(".")[-1].split("(")[0] not in _CARRIED_DECORATORS:
                gaps.append(
                    Gap(
                        parsed.loc(decorator),
                        f"@{text} on {inputs.class_name}.{name}",
                        "a decorated method: the generated code would run the undecorated body",
                    )
                )
        for node in walk(func.body):
            if _is_super_call(node):
                reason = _super_reason(inputs, node)
                if reason is not None:
                    gaps.append(Gap(parsed.loc(node), f"super().{node.func.attr.value}(...)", reason))
    # construction runs the base's __init__ as written: only a call that cannot bind is a gap
    if "__init__" in methods:
        for node in walk(methods["__init__"].body):
            if _is_super_call(node) and node.func.attr.value == "__init__":
                gaps.extend(_super_init_mismatch(inputs, node))
    readers = [methods[n] for n in reached] + _functions_called(reached, methods, functions)
    for name in sorted(globals_changed):
        for func in readers:
            read = _global_read(func, name)
            if read is not None:
                gaps.append(
                    Gap(
                        parsed.loc(read),
                        name,
                        f"a module global that `global {name}` changes in {globals_changed[name]}: TTTv1 reads "
                        "its current value on every call; the generated module would not",
                    )
                )
                break
    return gaps


def _super_reason(inputs: Inputs, call: cst.Call) -> str | None:
    """Why ``super().NAME(…)`` is a gap, naming the base method it runs (found as Python would, without running
    anything: ``bases.py``) or saying that no base the tool can read defines it; None when it is no gap: the
    base's method is copied into the generated class (``inline.inherited_method``)."""
    method = call.func.attr.value
    found = base_method(inputs.class_name, inputs.module.path, inputs.module.text, method)
    if found is None:
        return (
            f"no base class of {inputs.class_name} that the tool can read defines {method} (a base of an installed "
            "package, or none: AttributeError in TTTv1 too); in the generated class super() is TTModule"
        )
    named = f"the base class's {found.klass}.{method} ({_where(inputs, found.file)}:{found.line})"
    mismatch = _binding_error(call, found.definition)
    # TTTv1 itself raises here: a subclass written against another version of its base
    if mismatch is not None:
        return f"the call does not match {named} ({mismatch}): TypeError when TTTv1 runs it too"
    if any(a.star for a in call.args):
        return f"a call of {named} with unpacked arguments (*args / **kwargs): not copied into the generated class"
    if found.definition.args.vararg is not None or found.definition.args.kwarg is not None:
        return f"a call of {named}, which takes *args / **kwargs: not copied into the generated class"
    why = not_copied(inputs, method)
    if why is not None:
        return f"a call of {named}, not copied into the generated class: {why}"
    return None  # copied into the generated class and specialised like the class's own methods (inline.py)


def leftover_super_gaps(modules) -> list[Gap]:
    """A ``super().m(…)`` left in a generated module (a call the copy pass did not reach, e.g. past its depth
    limit): in the generated class ``super()`` is ``TTModule``, so it would run something else. ``from_model_args``'s
    ``super(Class, legacy).__init__(…)`` names its class and is TTTv1's own construction."""
    gaps: list[Gap] = []
    for generated in modules:
        for node in ast.walk(ast.parse(generated.code)):
            func = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "super"
                and not func.value.args
            ):
                gaps.append(
                    Gap(
                        f"{generated.file_name}:{node.lineno}",
                        f"super().{func.attr}(...)",
                        "left in the generated class, where super() is TTModule: not copied from the base",
                    )
                )
    return gaps


def _super_init_mismatch(inputs: Inputs, call: cst.Call) -> list[Gap]:
    """``super().__init__(…)`` whose arguments do not bind to the base's ``__init__``: TTTv1 cannot be built
    (Qwen2.5-VL's norm passes seven arguments to a ``DistributedNorm.__init__`` of another commit that takes five),
    and ``from_model_args``, which runs the same call, raises the same ``TypeError``."""
    found = base_method(inputs.class_name, inputs.module.path, inputs.module.text, "__init__")
    mismatch = None if found is None else _binding_error(call, found.definition)
    if mismatch is None:
        return []
    return [
        Gap(
            inputs.module.loc(call),
            "super().__init__(...)",
            f"the call does not match the base class's {found.klass}.__init__ ({_where(inputs, found.file)}:"
            f"{found.line}) ({mismatch}): TypeError when TTTv1 is built too",
        )
    ]


def _where(inputs: Inputs, file: Path) -> str:
    """A base's file as the gaps name it: the input's name, or its path from the folder both share."""
    own = inputs.module.path.resolve()
    if file.resolve() == own:
        return inputs.module.name
    common = Path(os.path.commonpath([own.parent, file.resolve().parent]))
    return file.resolve().relative_to(common).as_posix()


def _binding_error(call: cst.Call, definition: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """Why ``call``'s arguments do not bind to the method ``definition`` (its ``self`` aside); None when they do,
    or when the call passes ``*args`` / ``**kwargs`` (not decidable without running it)."""
    signature = signature_of(definition.args, method=True)
    if signature is None or any(a.star for a in call.args):
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    try:
        signature.bind(*positional, **keywords)
    except TypeError as exc:
        return str(exc)
    return None


def _reached(methods: dict[str, cst.FunctionDef], entry: str) -> set[str]:
    """Methods ``entry`` reaches through ``self.NAME`` / ``cls.NAME`` (called or not)."""
    seen = {entry}
    queue = [entry]
    while queue:
        for node in walk(methods[queue.pop()].body):
            if (
                isinstance(node, cst.Attribute)
                and isinstance(node.value, cst.Name)
                and node.value.value in ("self", "cls")
                and node.attr.value in methods
                and node.attr.value not in seen
                and node.attr.value != "__init__"
            ):
                seen.add(node.attr.value)
                queue.append(node.attr.value)
    return seen


def _functions_called(reached, methods, functions: dict[str, cst.FunctionDef]) -> list[cst.FunctionDef]:
    """Module functions the reached methods call by name, and the ones those call."""
    out: dict[str, cst.FunctionDef] = {}
    queue = [methods[n] for n in reached]
    while queue:
        for node in walk(queue.pop().body):
            if isinstance(node, cst.Name) and node.value in functions and node.value not in out:
                out[node.value] = functions[node.value]
                queue.append(functions[node.value])
    return list(out.values())


def _globals_changed(module: cst.Module) -> dict[str, str]:
    """Module-level names a function declares ``global`` and assigns -> that function."""
    out: dict[str, str] = {}
    for node in walk(module):
        if isinstance(node, cst.FunctionDef):
            declared = {
                item.name.value
                for inner in walk(node.body)
                if isinstance(inner, cst.Global)
                for item in inner.names
            }
            for name in sorted(declared & _bound(node.body)):
                out.setdefault(name, f"{node.name.value}()")
    return out


def _bound(body: cst.CSTNode) -> set[str]:
    """Names a function body binds: assignment, ``for`` and ``with`` targets, imports, ``del``."""
    out = names_written(body)
    for node in walk(body):
        if isinstance(node, cst.ImportAlias):
            alias = node.asname.name if node.asname is not None else node.name
            out.add(cst.Module([]).code_for_node(alias).split(".")[0])
        elif isinstance(node, cst.Del):
            out |= {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
    return out


def _global_read(func: cst.FunctionDef, name: str) -> cst.Name | None:
    """The first use of the bare name ``name`` in ``func`` (not an attribute ``x.name``)."""
    attrs = {id(n.attr) for n in walk(func.body) if isinstance(n, cst.Attribute)}
    return next(
        (n for n in walk(func.body) if isinstance(n, cst.Name) and n.value == name and id(n) not in attrs),
        None,
    )


def _decorator_text(decorator: cst.Decorator) -> str:
    return cst.Module([]).code_for_node(decorator.decorator)


def _is_super_call(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and isinstance(node.func.value, cst.Call)
        and isinstance(node.func.value.func, cst.Name)
        and node.func.value.func.value == "super"
    )


__all__ = ["leftover_super_gaps", "unsupported_gaps"]
