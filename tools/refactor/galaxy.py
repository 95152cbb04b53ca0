"""The galaxy tests a generated module was specialised on, as expressions of TTTv1's constructor arguments, so
that ``from_model_args`` can check them before any device work.

The 2D module is TTTv1's code for "galaxy" (the analysis's fact), the 1D module its code for "not galaxy". The
mesh shape alone does not say which: a 2x4 mesh is 2-D but, for TTTv1's ``is_galaxy = num_devices == 32``, not a
galaxy. So each galaxy test of the class (``self.args.is_galaxy``, ``self.num_devices == 32``) is rewritten in
terms of the constructor's parameters (``args.is_galaxy``, ``configuration.num_devices == 32``), following
``self.X`` to the one value ``__init__`` gives it, and ``from_model_args`` raises when it disagrees."""

from __future__ import annotations

import builtins
from dataclasses import dataclass

import libcst as cst

from .cstutil import code, names_read, names_written
from .source import Inputs, methods_of
from .walk import walk

_DEPTH = 8
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class GalaxyTest:
    text: str  # an expression of the constructor's parameters
    loc: str  # where TTTv1 tests it (file:line)
    polarity: int  # +1: true on a galaxy; -1: true elsewhere


def galaxy_tests(inputs: Inputs) -> list[GalaxyTest]:
    """The distinct galaxy tests of the class that can be written with the constructor's parameters alone
    (found once per run: each generated module's topology check asks)."""
    if "galaxy_tests" not in inputs.cache:
        inputs.cache["galaxy_tests"] = tuple(_galaxy_tests(inputs))
    return list(inputs.cache["galaxy_tests"])


def _galaxy_tests(inputs: Inputs) -> list[GalaxyTest]:
    methods = methods_of(inputs.klass)
    init = methods.get("__init__")
    if init is None:
        return []
    params = {p.name.value for p in [*init.params.params, *init.params.kwonly_params][1:]}
    safe = params - names_written(init.body)  # a parameter __init__ rebinds is not the caller's argument
    values = _single_values(init, methods)
    out: dict[str, GalaxyTest] = {}
    inherited = _inherited_values(inputs, init, methods, safe)
    for site in inputs.analysis.fact_sites:
        if site.fact == "galaxy" and inherited is not None and site.file == inherited.file:
            test = _inherited_test(site, inherited, safe)
            if test is not None:
                out.setdefault(test.text, test)
            continue
        if site.fact != "galaxy" or site.file != inputs.module.name:
            continue
        owner, _, method = site.function.partition(".")
        if owner != inputs.class_name or method not in methods:
            continue  # a nested function or another class: its names are not the constructor's
        node = inputs.module.node_for_span(site.span)
        if not isinstance(node, cst.BaseExpression):
            continue
        # outside __init__ a bare name is the method's own (a parameter, a local), not the constructor's
        own = (safe if method == "__init__" else set()) | {"self"} | _BUILTINS
        if not names_read(node) <= own:
            continue
        expression = _resolve(node, values, safe, _DEPTH)
        if expression is None or not names_read(expression) <= safe | _BUILTINS:
            continue
        text = code(expression)
        out.setdefault(text, GalaxyTest(text, f"{site.file}:{site.span.start_line}", site.polarity))
    return list(out.values())


@dataclass(frozen=True)
class _Inherited:
    """The base class whose ``__init__`` the class's ``super().__init__(…)`` runs: its file, its name, the
    attributes that ``__init__`` gives one value (the class itself assigns none of them), and each of its
    parameters as an expression of the class's own constructor parameters."""

    file: str
    parsed: object
    klass: str
    methods: frozenset[str]
    values: dict
    params: dict


def _inherited_values(inputs: Inputs, init, methods, safe: set[str]) -> _Inherited | None:
    """How a galaxy test of a base class's method (``self.args.is_galaxy`` in the base's ``forward_prefill``,
    copied into the generated class by ``super().forward_prefill(…)``) reads in the class's constructor
    parameters: through the base's ``__init__`` (``self.args = args``) and the class's ``super().__init__(mesh,
    args, …)``, a plain statement of its ``__init__``. None when there is no such call or base."""
    from .bases import base_method
    from .inline import is_super_call

    call = None
    for statement in init.body.body if isinstance(init.body, cst.IndentedBlock) else []:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        if (
            isinstance(small, cst.Expr)
            and is_super_call(small.value)
            and small.value.func.attr.value == "__init__"
        ):
            call = small.value
    found = base_method(inputs.class_name, inputs.module.path, inputs.module.text, "__init__")
    if call is None or found is None or any(a.star for a in call.args):
        return None
    parsed = next((p for p in inputs.files.values() if p.path.resolve() == found.file.resolve()), None)
    klass = None if parsed is None else parsed.classes().get(found.klass)
    if klass is None:
        return None
    base_methods = methods_of(klass)
    base_init = base_methods["__init__"]
    params = [*base_init.params.params[1:], *base_init.params.kwonly_params]
    given: dict[str, cst.BaseExpression] = {}
    positional = [a.value for a in call.args if a.keyword is None]
    for param, value in zip(base_init.params.params[1:], positional):
        given[param.name.value] = value
    for arg in call.args:
        if arg.keyword is not None:
            given[arg.keyword.value] = arg.value
    for param in params:
        if param.name.value not in given and param.default is not None:
            given[param.name.value] = param.default
    # an argument of the class's own constructor parameters, not rebound before the call
    given = {k: v for k, v in given.items() if names_read(v) <= safe | _BUILTINS}
    own = {t for func in methods.values() for node in walk(func) for t in _self_targets(node)}
    values = {k: v for k, v in _single_values(base_init, base_methods).items() if k not in own}
    return _Inherited(parsed.name, parsed, found.klass, frozenset(base_methods), values, given)


def _inherited_test(site, inherited: _Inherited, safe: set[str]) -> GalaxyTest | None:
    """A galaxy test of the base's method as an expression of the class's constructor parameters, or None."""
    from .inline import replace_names

    owner, _, method = site.function.partition(".")
    if owner != inherited.klass or method not in inherited.methods or method == "__init__":
        return None
    node = inherited.parsed.node_for_span(site.span)
    if not isinstance(node, cst.BaseExpression) or not names_read(node) <= {"self"} | _BUILTINS:
        return None
    expression = _resolve(node, inherited.values, set(inherited.params), _DEPTH)
    if expression is None or not names_read(expression) <= set(inherited.params) | _BUILTINS:
        return None
    text = code(replace_names(expression, inherited.params))
    return GalaxyTest(text, f"{site.file}:{site.span.start_line}", site.polarity)


def has_galaxy_sites(inputs: Inputs) -> bool:
    return any(s.fact == "galaxy" for s in inputs.analysis.fact_sites)


def _single_values(
    init: cst.FunctionDef, methods: dict[str, cst.FunctionDef]
) -> dict[str, cst.BaseExpression]:
    """``self.X`` -> its value, for the attributes the class assigns exactly once, by a plain statement of
    ``__init__``'s own body (not under a test or a loop)."""
    counts: dict[str, int] = {}
    for func in methods.values():
        for node in walk(func):
            for target in _self_targets(node):
                counts[target] = counts.get(target, 0) + 1
    values: dict[str, cst.BaseExpression] = {}
    body = init.body.body if isinstance(init.body, cst.IndentedBlock) else []
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        small = statement.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            attrs = _self_targets(small)
            if (
                len(attrs) == 1
                and isinstance(small.targets[0].target, cst.Attribute)
                and counts[attrs[0]] == 1
            ):
                values[attrs[0]] = small.value
    return values


def _self_targets(node: cst.CSTNode) -> list[str]:
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in t.target.elements)
            else:
                targets.append(t.target)
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        targets.append(node.target)
    return [
        t.attr.value
        for t in targets
        if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"
    ]


def _resolve(node: cst.BaseExpression, values, safe: set[str], depth: int) -> cst.BaseExpression | None:
    """``node`` with every ``self.X`` replaced by X's value (recursively); None when some ``self`` is left."""
    if depth <= 0:
        return None

    class _Substitute(cst.CSTTransformer):
        failed = False

        def leave_Attribute(self, original_node, updated_node):
            value = updated_node.value
            if not (isinstance(value, cst.Name) and value.value == "self"):
                return updated_node
            replacement = values.get(updated_node.attr.value)
            inner = None if replacement is None else _resolve(replacement, values, safe, depth - 1)
            if inner is None:
                self.failed = True
                return updated_node
            if isinstance(inner, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or inner.lpar:
                return inner
            return inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    transformer = _Substitute()
    out = node.visit(transformer)
    if transformer.failed or "self" in names_read(out):
        return None
    return out.with_changes(lpar=[], rpar=[]) if isinstance(out, cst.BaseExpression) else None


__all__ = ["GalaxyTest", "galaxy_tests", "has_galaxy_sites"]


def galaxy_assert(inputs: Inputs) -> str | None:
    """Where TTTv1's constructor says the module runs only on a galaxy (``file:line``), or ``None``: a statement
    ``assert TEST`` of ``__init__``'s own body (not under a test or a loop) whose ``TEST``, or one operand of an
    ``and`` that is ``TEST``, is a galaxy fact of the analysis that holds on a galaxy (``args.is_galaxy``,
    ``self.num_devices == 32``, ...). Such a module becomes a 2D module only (docs/refactor.md)."""
    init = methods_of(inputs.klass)["__init__"]  # load_inputs refuses a class without one
    on_galaxy = set()
    for site in inputs.analysis.fact_sites:
        if (
            site.fact == "galaxy"
            and site.polarity == 1
            and site.file == inputs.module.name
            and site.function == f"{inputs.class_name}.__init__"
        ):
            on_galaxy.add(id(inputs.module.node_for_span(site.span)))
    lines = init.body.body if isinstance(init.body, cst.IndentedBlock) else [init.body]  # or `def f(): a; b`
    for line in lines:
        if not isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            continue
        for statement in line.body:
            if isinstance(statement, cst.Assert) and any(
                id(t) in on_galaxy for t in _conjuncts(statement.test)
            ):
                return f"{inputs.module.name}:{inputs.module.line_of(statement)}"
    return None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a and (b and c)`` -> ``[a, b, c]``; any other test -> ``[test]``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and not test.lpar:
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]
