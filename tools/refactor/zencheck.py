"""The Zen check: ``trace-deps`` on each generated module, from its ``forward`` (which dispatches to
``decode_forward`` and ``prefill_forward``), over every function the forwards reach in that file (the class's
methods, the methods bound in ``_bind`` and the module-level helpers copied next to the class). A branch left
there that is not runtime is a choice known at construction that the codemod did not make: a gap naming the
generated ``file:line``, so the run exits 1.

The generated code is analysed once, from a private temporary folder (``analyze`` reads files), with one
method added at the end of the class that calls ``forward`` and each bound arm; nothing else is written. Functions that are not the computation are left out: ``forward`` (the mode dispatcher itself) and
``load_device_weights`` (run once, its own test is whether the weights were loaded)."""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from tttv2_tools.trace_dependencies import analyze
from tttv2_tools.trace_dependencies.errors import TraceError

from .errors import Gap
from .inputdevice import note

#: Methods of a generated class that are not on the computation path.
SCAFFOLDING = frozenset({"forward", "load_device_weights", "_tttv2_zen_entry"})


ENTRY = "_tttv2_zen_entry"


def _with_entry(code: str, class_name: str, tree: ast.Module) -> tuple[str, int, int] | None:
    """``code`` with one more method at the end of ``class_name``: it calls ``forward`` and every method that
    ``_bind`` binds (``self._x = self._x_true if … else self._x_false``: the forwards call them through the
    attribute, which trace-deps does not follow), each with parameters of its own names, run-time inputs. One
    analysis from it covers the whole forward path. Also returns the last line of the class and the number of
    lines added (to map the analysis's lines back). None: no such class or no ``forward``. (``ast``, not
    LibCST: only names and lines are needed, and this runs on every output; ``tree`` is ``code`` parsed.)"""
    klass = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if klass is None:
        return None
    methods = {n.name: n for n in klass.body if isinstance(n, ast.FunctionDef)}
    if "forward" not in methods:
        return None
    called = ["forward"]
    for node in ast.walk(methods["_bind"]) if "_bind" in methods else ():
        if isinstance(node, ast.IfExp):
            for arm in (node.body, node.orelse):
                bound = isinstance(arm, ast.Attribute) and isinstance(arm.value, ast.Name)
                if bound and arm.value.id == "self" and arm.attr in methods and arm.attr not in called:
                    called.append(arm.attr)
    names: list[str] = []
    calls: list[str] = []
    for name in called:
        arguments = methods[name].args
        own = [a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]][1:]
        names += [p for p in own if p not in names]
        calls.append(f"        self.{name}({', '.join(f'{p}={p}' for p in own)})")
    lines = [f"    def {ENTRY}(self{''.join(', ' + n for n in names)}):", *calls]
    source = _lines(code)
    last = klass.end_lineno or len(source)
    text = "\n".join([*source[:last], "", *lines, *source[last:]]) + "\n"
    return text, last, len(lines) + 1


def _lines(code: str) -> list[str]:
    """The lines of ``code`` as Python numbers them (``str.splitlines`` also splits at a form feed, which Python
    reads as white space: a line ``x\f;`` would become two)."""
    lines = code.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _loop_variables(tree: ast.Module) -> dict[str, set[str]]:
    """{function name: names that take one value per iteration} over the module's functions: what its ``for``
    loops and comprehensions bind, and a local every assignment of which reads such a name and no parameter of
    the function (tt_transformers' ``activation_dtype = opts.get_tensor_dtype(decoder_id=i, …)`` inside
    ``for i, layer in enumerate(self.layers)``: a per-layer value, known at construction for each layer but
    not once for the module). ``x = layer(x)`` reads a parameter: not one of them. ``tree``: the module parsed."""
    out: dict[str, set[str]] = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = out.setdefault(func.name, set())
            arguments = func.args
            params = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
            params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
            params.discard("self")  # the module: what it holds is known at construction
            values: dict[str, list[set[str]]] = {}
            for node in ast.walk(func):
                if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
                elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    value = node.value if node.value is not None else ast.Constant(None)
                    read = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                    for target in targets:
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name):
                                own = {name.id} if isinstance(node, ast.AugAssign) else set()
                                values.setdefault(name.id, []).append(read | own)
            names -= params
            changed = True
            while changed:
                changed = False
                for name, reads in values.items():
                    if name in names or name in params:
                        continue
                    if all(r & names and not r & params for r in reads):
                        names.add(name)
                        changed = True
    return out


def _reads_loop_variable(test: str, names: set[str]) -> bool:
    """Whether the test (trace-deps' text of it) reads a loop variable: static per iteration, not per module
    (a choice no field or bound method can make once; the loop runs each value in turn)."""
    if not names:
        return False
    try:
        expression = ast.parse(test, mode="eval")
    except SyntaxError:  # pragma: no cover - trace-deps' text of a test is an expression
        return False
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expression))


def _in_assert(asserts: list[tuple[int, int]], line: int) -> bool:
    """Whether ``line`` (of the analysed text) lies in an ``assert`` statement (its test's ``and`` / ``or`` too)."""
    return any(first <= line <= last for first, last in asserts)


def static_branches(code: str, file_name: str, class_name: str) -> list[tuple[str, str, str, str]]:
    """(generated file:line, function, test, classification) of every non-runtime branch on the forward path
    of ``class_name`` in ``code`` (the text of the generated module ``file_name``): one trace-deps analysis."""
    tree = ast.parse(code)  # once for the three questions below
    made = _with_entry(code, class_name, tree)
    if made is None:
        return []
    text, last, added = made
    loops = _loop_variables(tree)
    # the lines of the asserts in the analysed text: the added method has none, and the lines after the class
    # moved down by what was added
    asserts = [
        tuple(line + added if line > last else line for line in (n.lineno, n.end_lineno))
        for n in ast.walk(tree)
        if isinstance(n, ast.Assert)
    ]
    found: dict[str, tuple[str, str, str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="tttv2-zen-") as folder:
        path = Path(folder) / file_name
        path.write_text(text)
        try:
            analysis = analyze(
                path, class_name=class_name, entry=ENTRY, follow_helpers=False, auto_config=False
            )
        except TraceError as exc:  # pragma: no cover - the generated module parses and has the class
            return [(f"{file_name}:1", class_name, f"not analysed: {exc}", "unknown")]
    for branch in analysis.branches:
        if branch.phase != "forward" or branch.classification == "runtime":
            continue
        if not branch.loc.startswith(file_name + ":"):
            continue  # a helper of another file (imported, not copied): not this output's code
        owner, _, method = branch.function.partition(".")
        if owner == class_name and method in SCAFFOLDING:
            continue
        if _reads_loop_variable(branch.test, loops.get(branch.function.rpartition(".")[2], set())):
            continue  # ``for i, s in enumerate((1.5, 0.5)): if i == 0``: one value per iteration
        line = int(branch.loc.split(":")[1])
        if branch.test == "False" and _in_assert(asserts, line):
            continue  # ``assert False``: a refusal kept as TTTv1's assert (python -O strips both), not a choice
        if "." not in branch.function and _in_assert(asserts, line):
            continue  # a precondition of a module-level helper copied as TTTv1 wrote it: a check, not a choice
        line = line - added if line > last else line
        found.setdefault(
            branch.loc, (f"{file_name}:{line}", branch.function, branch.test, branch.classification)
        )
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
                    "should be made there (a field or a bound method), and tttv2-refactor did not make it"
                    + note(generated.code),
                )
            )
    return gaps


__all__ = ["SCAFFOLDING", "static_branch_gaps", "static_branches"]
