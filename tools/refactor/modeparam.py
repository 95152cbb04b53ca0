"""A parameter named ``mode`` that is not the module's mode.

trace-deps takes a parameter named ``mode`` / ``llm_mode`` to carry the module's mode (decode or prefill), and
the codemod splits and decides the module on it. A module whose mode travels in another parameter
(``forward(self, x, phase, mode="exact")``) would then be specialised on the wrong one: ``mode == "fast"``
decided False, its code dropped, with nothing said. What gives it away is checked here, and each finding is a
gap (not transformed, exit 1):

* a mode-named parameter compared with (or matched against, or defaulting to) a string that is not a mode;
* in the entry method, another parameter compared with ``"decode"`` / ``"prefill"`` next to a mode-named one;
* a nested function or lambda whose own mode-named parameter it compares and which may be given something else
  than the caller's mode (a default, or a string passed where it is called): trace-deps reads a mode-named
  parameter as the module's mode wherever it is, so the nested one would be decided as the caller's mode;
* one method comparing the mode with a string (``"decode"``) and with an enum member (``Mode.DECODE``): the
  codemod takes both for the same fact, while in Python a plain ``Enum`` member never equals its value, so
  TTTv1 runs only one of the two for a given caller.
"""

from __future__ import annotations

import libcst as cst

from tttv2_tools.trace_dependencies.constants import MODE_NAMES, MODE_VALUES

from .errors import Gap
from .source import Inputs, methods_of
from .walk import walk

_REASON = (
    "a parameter named mode / llm_mode is taken to be the module's mode (decode / prefill), and the module is "
    "split and its branches decided on it"
)


def _strings(node: cst.CSTNode) -> list[str] | None:
    """The string constants ``node`` stands for (a string, or a tuple / list / set of them), else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return [value] if isinstance(value, str) else None
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        out: list[str] = []
        for element in node.elements:
            inner = _strings(element.value)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _decides_on(body: cst.CSTNode, name: str) -> bool:
    """``body`` compares or matches the bare name ``name`` with string constants or ``X.DECODE``-style members."""
    for node in walk(body):
        if isinstance(node, cst.Comparison):
            operands = [node.left, *(c.comparator for c in node.comparisons)]
            if any(isinstance(o, cst.Name) and o.value == name for o in operands):
                return True
        elif (
            isinstance(node, cst.Match) and isinstance(node.subject, cst.Name) and node.subject.value == name
        ):
            return True
    return False


def _compared(func: cst.FunctionDef) -> list[tuple[str, cst.CSTNode, list[str]]]:
    """(parameter name, node, the strings it is compared with) for every comparison of a bare name with string
    constants, and every ``match name:`` case of a string, in ``func``."""
    out = []
    for node in walk(func.body):
        if isinstance(node, cst.Comparison):
            operands = [node.left, *(c.comparator for c in node.comparisons)]
            names = [o.value for o in operands if isinstance(o, cst.Name)]
            strings = [s for o in operands for s in (_strings(o) or [])]
            if len(names) == 1 and strings:
                out.append((names[0], node, strings))
        elif isinstance(node, cst.Match) and isinstance(node.subject, cst.Name):
            strings = [
                value
                for case in node.cases
                if isinstance(case.pattern, cst.MatchValue)
                for value in (_strings(case.pattern.value) or [])
            ]
            if strings:
                out.append((node.subject.value, node, strings))
    return out


def _nested_mode_params(func: cst.FunctionDef) -> list[tuple[cst.CSTNode, str]]:
    """(node, name) of each nested function or lambda in ``func`` whose own mode-named parameter its body
    compares, and which may be given something other than the caller's mode: the parameter has a default, or a
    call of the function's name in ``func`` passes a string constant. (``def norm_reshard(x, norm, mode)`` called
    with the module's ``mode`` is what TTTv1 does, and is specialised correctly.)"""
    names: dict[cst.CSTNode, str] = {}
    calls_with_string: set[str] = set()
    for node in walk(func.body):
        if isinstance(node, cst.FunctionDef):
            names[node] = node.name.value
        elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Lambda):
            target = node.targets[0].target
            if isinstance(target, cst.Name):
                names[node.value] = target.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and any(isinstance(arg.value, (cst.SimpleString, cst.ConcatenatedString)) for arg in node.args)
        ):
            calls_with_string.add(node.func.value)
    out = []
    for node in walk(func.body):
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            params = node.params
            for param in (*params.params, *params.kwonly_params, *params.posonly_params):
                if param.name.value not in MODE_NAMES or not _decides_on(node.body, param.name.value):
                    continue
                if param.default is not None or names.get(node) in calls_with_string:
                    out.append((node, param.name.value))
    return out


def _enum_compared(func: cst.FunctionDef, mode_params: set[str]) -> cst.CSTNode | None:
    """The first comparison of a mode-named parameter with an attribute spelled ``X.DECODE`` / ``X.PREFILL``."""
    for node in walk(func.body):
        if isinstance(node, cst.Comparison):
            operands = [node.left, *(c.comparator for c in node.comparisons)]
            if any(isinstance(o, cst.Name) and o.value in mode_params for o in operands) and any(
                isinstance(o, cst.Attribute) and o.attr.value in ("DECODE", "PREFILL") for o in operands
            ):
                return node
    return None


def mode_parameter_gaps(inputs: Inputs) -> list[Gap]:
    klass = inputs.class_name
    methods = methods_of(inputs.klass)
    entry = "forward" if "forward" in methods else "__call__"
    gaps: list[Gap] = []
    for name, func in methods.items():
        params = [*func.params.params, *func.params.kwonly_params]
        mode_params = {p.name.value for p in params if p.name.value in MODE_NAMES}
        for node, param_name in _nested_mode_params(func):
            gaps.append(
                Gap(
                    inputs.loc(node),
                    f"{klass}.{name}: a nested function or lambda with its own parameter {param_name}",
                    f"it would be decided as the caller's mode, not by what it is given: {_REASON}",
                )
            )
        if not mode_params:
            continue
        enum_test = _enum_compared(func, mode_params)
        string_tests = [node for param, node, strings in _compared(func) if param in mode_params]
        if enum_test is not None and any(set(strings) & set(MODE_VALUES) for *_, strings in _compared(func)):
            gaps.append(
                Gap(
                    inputs.loc(string_tests[0] if string_tests else enum_test),
                    f"{klass}.{name}: the mode compared with a string and with an enum member",
                    "the codemod takes both spellings for one fact, but a plain Enum member never equals its "
                    "string, so TTTv1 runs only one of the two arms for a given caller",
                )
            )
        for param in params:
            default = _strings(param.default) if param.default is not None else None
            if param.name.value in mode_params and default and default[0] not in MODE_VALUES:
                gaps.append(
                    Gap(
                        inputs.loc(param.name),
                        f"{klass}.{name}({param.name.value}={default[0]!r})",
                        f"its default is not a mode: {_REASON}",
                    )
                )
        for param, node, strings in _compared(func):
            others = [s for s in strings if s not in MODE_VALUES]
            if param in mode_params and others:
                gaps.append(
                    Gap(
                        inputs.loc(node),
                        f"{klass}.{name}: {param} against {others[0]!r}",
                        f"{param} is compared with a string that is not a mode: {_REASON}",
                    )
                )
            elif (
                name == entry
                and param not in mode_params
                and param in {p.name.value for p in params}
                and len(others) < len(strings)
            ):
                gaps.append(
                    Gap(
                        inputs.loc(node),
                        f"{klass}.{name}: {param} against a mode",
                        f"{param} is compared with a mode, next to {', '.join(sorted(mode_params))}: {_REASON}",
                    )
                )
    return gaps


__all__ = ["mode_parameter_gaps"]
