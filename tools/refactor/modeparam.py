"""A parameter named ``mode`` that is not the module's mode.

trace-deps takes a parameter named ``mode`` / ``llm_mode`` to carry the module's mode (decode or prefill), and
the codemod splits and decides the module on it. A module whose mode travels in another parameter
(``forward(self, x, phase, mode="exact")``) would then be specialised on the wrong one: ``mode == "fast"``
decided False, its code dropped, with nothing said. What gives it away is checked here, and each finding is a
gap (not transformed, exit 1):

* a mode-named parameter compared with (or matched against, or defaulting to) a string that is not a mode;
* in the entry method, another parameter compared with ``"decode"`` / ``"prefill"`` next to a mode-named one.
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


def mode_parameter_gaps(inputs: Inputs) -> list[Gap]:
    klass = inputs.class_name
    methods = methods_of(inputs.klass)
    entry = "forward" if "forward" in methods else "__call__"
    gaps: list[Gap] = []
    for name, func in methods.items():
        params = [*func.params.params, *func.params.kwonly_params]
        mode_params = {p.name.value for p in params if p.name.value in MODE_NAMES}
        if not mode_params:
            continue
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
