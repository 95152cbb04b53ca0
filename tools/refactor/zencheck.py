"""The Zen check: ``trace-deps`` on each generated module, from its ``forward`` (which dispatches to
``decode_forward`` and ``prefill_forward``), over every function the forwards reach in that file (the class's
methods, the methods bound in ``_bind`` and the module-level helpers copied next to the class). A branch left
there that is not runtime is a choice known at construction that the codemod did not make: a gap naming the
generated ``file:line``, so the run exits 1.

The generated code is analysed from a private temporary folder (``analyze`` reads files), nothing else is
written. Functions that are not the computation are left out: ``forward`` (the mode dispatcher itself) and
``load_device_weights`` (run once, its own test is whether the weights were loaded)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tttv2_tools.trace_dependencies import analyze
from tttv2_tools.trace_dependencies.errors import TraceError

from .errors import Gap

#: Methods of a generated class that are not on the computation path.
SCAFFOLDING = frozenset({"forward", "load_device_weights"})


def _bound_arms(code: str, class_name: str) -> list[str]:
    """The methods ``_bind`` assigns (``self._x = self._x_true if … else self._x_false``): the forwards call
    them through the attribute, which trace-deps does not follow, so each is analysed as an entry of its own."""
    import libcst as cst

    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:  # pragma: no cover - generated code is compiled before this check
        return []
    arms: list[str] = []
    for node in module.body:
        if not (isinstance(node, cst.ClassDef) and node.name.value == class_name):
            continue
        for item in node.body.body:
            if isinstance(item, cst.FunctionDef) and item.name.value == "_bind":
                for sub in _attributes(item):
                    if sub not in arms:
                        arms.append(sub)
    return arms


def _attributes(func) -> list[str]:
    import libcst as cst
    import libcst.matchers as m

    found = m.findall(func.body, m.IfExp())
    names: list[str] = []
    for ifexp in found:
        for arm in (ifexp.body, ifexp.orelse):
            if (
                isinstance(arm, cst.Attribute)
                and isinstance(arm.value, cst.Name)
                and arm.value.value == "self"
            ):
                names.append(arm.attr.value)
    return names


def _loop_variables(code: str) -> dict[str, set[str]]:
    """{function name: names its ``for`` loops and comprehensions bind} over the module's functions."""
    import libcst as cst
    import libcst.matchers as m

    out: dict[str, set[str]] = {}
    for func in m.findall(cst.parse_module(code), m.FunctionDef()):
        names: set[str] = set()
        for loop in m.findall(func, m.For() | m.CompFor()):
            names |= {n.value for n in m.findall(loop.target, m.Name())}
        out.setdefault(func.name.value, set()).update(names)
    return out


def _reads_loop_variable(test: str, names: set[str]) -> bool:
    """Whether the test (trace-deps' text of it) reads a loop variable: static per iteration, not per module
    (a choice no field or bound method can make once; the loop runs each value in turn)."""
    import libcst as cst
    import libcst.matchers as m

    if not names:
        return False
    try:
        expression = cst.parse_expression(test)
    except cst.ParserSyntaxError:  # pragma: no cover - trace-deps' text of a test is an expression
        return False
    return any(n.value in names for n in m.findall(expression, m.Name()))


def static_branches(code: str, file_name: str, class_name: str) -> list[tuple[str, str, str, str]]:
    """(generated file:line, function, test, classification) of every non-runtime branch on the forward path
    of ``class_name`` in ``code`` (the text of the generated module ``file_name``)."""
    with tempfile.TemporaryDirectory(prefix="tttv2-zen-") as folder:
        path = Path(folder) / file_name
        path.write_text(code)
        found: dict[str, tuple[str, str, str, str]] = {}
        methods = [m for m in _bound_arms(code, class_name) if f"def {m}(" in code]
        loops = _loop_variables(code)
        for entry in ("forward", *methods):
            try:
                analysis = analyze(
                    path, class_name=class_name, entry=entry, follow_helpers=False, auto_config=False
                )
            except TraceError as exc:
                key = f"{file_name}:1"
                found.setdefault(key, (key, entry, f"not analysed: {exc}", "unknown"))
                continue
            for branch in analysis.branches:
                if branch.phase != "forward" or branch.classification == "runtime":
                    continue
                if _reads_loop_variable(branch.test, loops.get(branch.function.rpartition(".")[2], set())):
                    continue  # ``for i, s in enumerate((1.5, 0.5)): if i == 0``: one value per iteration
                if not branch.loc.startswith(file_name + ":"):
                    continue  # a helper of another file (imported, not copied): not this output's code
                owner, _, method = branch.function.partition(".")
                if owner == class_name and method in SCAFFOLDING:
                    continue
                line = ":".join(branch.loc.split(":")[:2])
                found.setdefault(branch.loc, (line, branch.function, branch.test, branch.classification))
    return list(found.values())


def static_branch_gaps(modules) -> list[Gap]:
    """One gap per static branch left in the forward path of each generated module (``api.Generated``)."""
    gaps: list[Gap] = []
    for generated in modules:
        for loc, function, test, classification in static_branches(
            generated.code, generated.file_name, generated.class_name
        ):
            gaps.append(
                Gap(
                    loc,
                    f"static branch left in {function}: `{test}`",
                    f"trace-deps classifies it {classification}, not runtime: a choice known at construction "
                    "should be made there (a field or a bound method), and tttv2-refactor did not make it",
                )
            )
    return gaps


__all__ = ["SCAFFOLDING", "static_branch_gaps", "static_branches"]
