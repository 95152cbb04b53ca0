"""Call-site specialisation: a helper with device ops (``tt_all_reduce``) or a method of the class called with
constant or construction-time arguments (``cluster_axis=0``, ``sharded=True``, ``dtype=self.args.ccl_dtype``) gets
a private copy for that call site, the arguments substituted for its parameters. The copy then goes through the
same passes as a forward: the branches its arguments decide fold away, the static ones left are bound at
construction, and the call site calls the copy with the run-time arguments only."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .bases import base_method
from .cstutil import PURE_BUILTINS, code, is_pure, is_staticmethod, summary
from .fstrings import compatible_fstring
from .helpers import ModuleNames
from .literals import decide_straight_literals, with_prelude
from .source import Inputs, ParsedFile, methods_of
from .track import Provenance, TrackingTransformer
from .walk import hot_paths, walk

#: How deep helpers calling helpers are followed.
MAX_DEPTH = 6


@dataclass
class Callee:
    file: ParsedFile
    func: cst.FunctionDef
    qualname: str  # "tt_all_reduce" or "Class.method"
    is_method: bool
    has_ops: bool = True  # a helper without device ops is copied only where it runs on run-time values
    inherited: bool = (
        False  # a base class's method (``super().m(…)``, or ``self.m`` the class does not define)
    )


def is_super_call(node: cst.CSTNode) -> bool:
    """``super().m(…)`` (the zero-argument form)."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and isinstance(node.func.value, cst.Call)
        and isinstance(node.func.value.func, cst.Name)
        and node.func.value.func.value == "super"
        and not node.func.value.args
    )


def inherited_method(inputs: Inputs, name: str) -> Callee | None:
    """The method ``name`` of a base class of the analysed class (the nearest that defines it, as Python's method
    resolution finds it: ``bases.py``) when its file is one the analysis read (trace-deps follows ``super()`` and
    the inherited ``self.m`` into the base): copied into the generated class like the class's own methods, and
    specialised with the facts of its own file. None when it cannot be copied (:func:`not_copied` says why)."""
    return _inherited(inputs, name)[0]


def not_copied(inputs: Inputs, name: str) -> str | None:
    """Why the base's method ``name`` is not copied (None: it is, or no base defines it)."""
    return _inherited(inputs, name)[1]


def _inherited(inputs: Inputs, name: str) -> tuple[Callee | None, str | None]:
    key = ("inherited", name)
    if key not in inputs.cache:
        inputs.cache[key] = _inherited_method(inputs, name)
    return inputs.cache[key]


def _inherited_method(inputs: Inputs, name: str) -> tuple[Callee | None, str | None]:
    found = base_method(inputs.class_name, inputs.module.path, inputs.module.text, name)
    if found is None:
        return None, None
    parsed = next((p for p in inputs.files.values() if p.path.resolve() == found.file.resolve()), None)
    klass = None if parsed is None else parsed.classes().get(found.klass)
    method = None if klass is None else methods_of(klass).get(name)
    if method is None:
        return None, "its file is not one the analysis read"
    if any(is_super_call(n) for n in walk(method.body)):
        return None, f"it calls super() itself (relative to {found.klass}, not copied)"
    decorators = [code(d.decorator) for d in method.decorators if code(d.decorator) != "staticmethod"]
    if decorators:
        # the copy would run the undecorated body (a classmethod's cls would be the generated class)
        return None, f"it is decorated (@{decorators[0]}): the copy would run the undecorated body"
    return Callee(parsed, method, f"{found.klass}.{name}", not is_staticmethod(method), inherited=True), None


@dataclass
class Copy:
    """One specialised copy: a new private method of the generated class."""

    name: str
    callee: Callee
    func: cst.FunctionDef  # with self, the kept parameters, the substituted body
    depth: int


@dataclass
class Inliner:
    inputs: Inputs
    names: dict[str, ModuleNames]  # file -> its module-level names
    helper_ops: dict[str, bool]
    methods: dict[str, cst.FunctionDef]  # TTTv1 methods of the class
    taken: set[str]
    skip_methods: frozenset[str]
    #: (file, qualname, binding, specialised body) -> name
    copies: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    prov: Provenance | None = None  # copies map back to the helper's own lines (for the report)

    # -- resolution ------------------------------------------------------------------------------
    def resolve(self, call: cst.Call, file: str) -> Callee | None:
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            name = func.attr.value
            method = self.methods.get(name)
            if method is None and name not in self.skip_methods:
                return inherited_method(self.inputs, name)  # a method of a base class, in another file
            if method is None or name in self.skip_methods:
                return None
            # a @staticmethod takes no instance: it binds and is copied like a function of the module
            return Callee(
                self.inputs.module, method, f"{self.inputs.class_name}.{name}", not is_staticmethod(method)
            )
        if is_super_call(call):
            return inherited_method(self.inputs, func.attr.value)
        if not isinstance(func, cst.Name):
            return None
        return self._function(func.value, file, 0)

    def _function(self, name: str, file: str, depth: int) -> Callee | None:
        table = self.names.get(file)
        if table is None or depth > 3:
            return None
        statement = table.definitions.get(name)
        if isinstance(statement, cst.FunctionDef):
            return Callee(self.inputs.files[file], statement, name, False, self.helper_ops.get(name, False))
        if name in table.imports:
            module, imported = table.imports[name]
            if imported is None:
                return None
            tail = module.lstrip(".").rsplit(".", 1)[-1] + ".py"
            for other in self.names:
                if other == tail or other.endswith("/" + tail):
                    return self._function(imported, other, depth + 1)
        return None

    # -- binding ----------------------------------------------------------------------------------
    def bind(self, call: cst.Call, callee: Callee) -> dict[str, cst.BaseExpression | None] | None:
        """Parameter -> argument expression (None: the parameter's default), or None when the call passes
        starred arguments (not specialised)."""
        params = list(callee.func.params.params)
        if callee.is_method:
            params = params[1:]
        kwonly = list(callee.func.params.kwonly_params)
        if isinstance(callee.func.params.star_arg, cst.Param) or isinstance(
            callee.func.params.star_kwarg, cst.Param
        ):
            return None
        out: dict[str, cst.BaseExpression | None] = {p.name.value: None for p in [*params, *kwonly]}
        args = self._expand_star_kwargs(call.args)
        if args is None:
            return None
        positional = [a for a in args if a.keyword is None]
        if any(a.star for a in args):
            return None
        if len(positional) > len(params):
            return None
        for param, arg in zip(params, positional):
            out[param.name.value] = arg.value
        for arg in args:
            if arg.keyword is not None:
                if arg.keyword.value not in out:
                    return None
                out[arg.keyword.value] = arg.value
        return out

    def _expand_star_kwargs(self, args):
        """``f(x, **common)`` where ``common`` is a ``dict(k=v, ...)`` the caller builds: its items as keyword
        arguments (after the caller's static locals were forwarded, ``common`` is that dict expression)."""
        out = []
        for arg in args:
            if arg.star == "**":
                value = arg.value
                if (
                    isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Name)
                    and value.func.value == "dict"
                ):
                    if any(a.keyword is None for a in value.args):
                        return None
                    out.extend(cst.Arg(a.value, keyword=a.keyword) for a in value.args)
                    continue
                return None
            out.append(arg)
        return out

    def substitutable(
        self,
        value: cst.BaseExpression,
        caller_file: str,
        callee: Callee,
        caller_locals: set[str],
        pure_call=None,
    ) -> bool:
        """A constant, or an expression of ``self`` and module-level names both files agree on, with no call
        that could have an effect: it can be evaluated in the copy instead of at the call site."""
        if _literal(value):
            return True
        info = summary(value)
        if info.effects or not is_pure(value, pure_call):
            return False
        caller_names = self.names.get(caller_file)
        callee_names = self.names.get(callee.file.name)
        for name in info.reads:
            if name == "self":
                if not callee.is_method and callee.file is not self.inputs.module:
                    continue  # the copy is a method: self is there
                continue
            if name in caller_locals:
                return False
            if caller_file == callee.file.name:
                continue  # the same module: every module-level name means the same thing
            if caller_names is None or callee_names is None:
                return False
            if (
                name in PURE_BUILTINS
                and name not in caller_names.definitions
                and name not in callee_names.definitions
            ):
                continue
            if not _same_binding(name, caller_names, callee_names):
                return False
        return True

    def default_ok(self, value: cst.BaseExpression, callee: Callee) -> bool:
        """A parameter's default: substituted when it is a constant or a module-level name of the callee."""
        if _literal(value):
            return True
        info = summary(value)
        table = self.names.get(callee.file.name)
        return (
            not info.calls
            and table is not None
            and all(n in table.imports or n in table.definitions for n in info.reads)
        )

    # -- the copy ------------------------------------------------------------------------------------
    def forward_static_locals(
        self, value: cst.BaseExpression, caller_scope, depth: int = 0
    ) -> cst.BaseExpression:
        """``gathered_mem`` (a static local of the caller, assigned once) -> the expression it was assigned,
        so that the copy can receive it: static and free of side effects, it computes the same value there."""
        if depth > 3:
            return value
        reads = summary(value).reads
        replace: dict[str, cst.BaseExpression] = {}
        for name in reads:
            values = caller_scope.assignments.get(name)
            if values and len(values) > 1 and name in caller_scope.straight:
                values = [caller_scope.straight[name]]  # the last of several straight assignments
            if not values or len(values) != 1 or values[0] is None:
                continue
            if name in caller_scope.mutated or not caller_scope.static_name(name):
                continue
            replace[name] = self.forward_static_locals(values[0], caller_scope, depth + 1)
        if not replace:
            return value
        return replace_names(value, replace)

    def specialise_call(
        self,
        call: cst.Call,
        callee: Callee,
        body: cst.FunctionDef,
        binding: dict,
        caller_file: str,
        caller_locals: set[str],
        pure_call=None,
    ) -> tuple[cst.Call, cst.FunctionDef | None, str, bool] | None:
        """(the new call, the copy (None when it was made before), its name, whether the copy is new) — None
        when nothing is gained."""
        assigned = summary(body.body).writes
        substitute: dict[str, cst.BaseExpression] = {}
        kept: list[str] = []
        params = list(body.params.params[1:] if callee.is_method else body.params.params) + list(
            body.params.kwonly_params
        )
        defaults = {p.name.value: p.default for p in params}
        prelude: dict[str, cst.BaseExpression] = {}  # reassigned in the body, given a literal: a first local
        for param in params:
            name = param.name.value
            value = binding.get(name)
            if name in assigned:
                given = value if value is not None else defaults.get(name)
                if (
                    given is not None
                    and _prelude_value(given, literal_or_chain=value is None)
                    and (
                        value is None
                        or self.substitutable(value, caller_file, callee, caller_locals, pure_call)
                    )
                ):
                    prelude[name] = given
                else:
                    kept.append(name)
                continue
            if value is None:
                default = defaults.get(name)
                if default is not None and self.default_ok(default, callee):
                    substitute[name] = default
                else:
                    kept.append(name)
                continue
            if self.substitutable(value, caller_file, callee, caller_locals, pure_call):
                substitute[name] = value
            else:
                kept.append(name)
        if not substitute and not prelude and not callee.inherited:  # a base's method is always copied
            return None
        key = (  # the specialised body too: a method specialised for another mode is another copy
            callee.file.name,
            callee.qualname,
            "|".join(f"{k}={code(v)}" for k, v in sorted({**substitute, **prelude}.items())),
            code(body),
        )
        name = self.copies.get(key)
        new = name is None
        if new:
            base = "_" + callee.qualname.rsplit(".", 1)[-1].lstrip("_")
            name, n = base, 2
            while name in self.taken:
                name, n = f"{base}_{n}", n + 1
            self.taken.add(name)
            self.copies[key] = name
        # an existing copy is not made again (the caller uses the copy only when it is new)
        copy = _substituted(body, substitute, kept, name, callee.is_method, self.prov) if new else None
        if copy is not None and prelude:
            # decided now, so that what the copy passes on to a helper of its own is straight code
            # (``num_links = None`` then ``if num_links is None: num_links = …``: the last value reaches the call)
            trusted = frozenset(k for k, v in prelude.items() if not _prelude_value(v, literal_or_chain=True))
            copy = decide_straight_literals(with_prelude(copy, prelude), self.prov, trusted)
        passed = [
            cst.Arg(
                binding[k] if binding.get(k) is not None else cst.Name(k),
                keyword=cst.Name(k),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
            for k in kept
            if binding.get(k) is not None
        ]
        new_call = cst.Call(func=cst.Attribute(value=cst.Name("self"), attr=cst.Name(name)), args=passed)
        return new_call, copy, name, new


def replace_names(node: cst.BaseExpression, replace: dict[str, cst.BaseExpression]) -> cst.BaseExpression:
    class _T(cst.CSTTransformer):
        def __init__(self) -> None:
            super().__init__()
            self.skip: set[int] = set()

        def visit_Attribute(self, n: cst.Attribute) -> None:
            self.skip.add(id(n.attr))

        def visit_Arg(self, n: cst.Arg) -> None:
            if n.keyword is not None:
                self.skip.add(id(n.keyword))

        def leave_FormattedString(self, original_node, updated_node):
            return compatible_fstring(updated_node)

        def leave_Name(self, original_node, updated_node):
            if id(original_node) in self.skip or updated_node.value not in replace:
                return updated_node
            value = replace[updated_node.value]
            if isinstance(
                value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.SimpleString)
            ):
                return value
            return (
                value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                if not value.lpar
                else value
            )

    return node.visit(_T())


def _literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_literal(e.value) for e in node.elements)
    return False


def _prelude_value(node: cst.BaseExpression, literal_or_chain: bool = False) -> bool:
    """A value a reassigned parameter can start from as a local of the copy: a plain literal, an attribute
    chain of ``self`` (``self.num_reduce_scatter_links``) that the call site passes, or (not with
    ``literal_or_chain``) another expression of ``self`` alone, such as the call an outer copy passes on
    (``self.tt_ccl.get_num_links(1)``; the caller checks that it is pure: ``substitutable``)."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return False
    if _literal(node):
        return True
    if not literal_or_chain and type(node) is cst.Call:
        return set(summary(node).reads) <= {"self"}
    while type(node) is cst.Attribute:
        node = node.value
    return type(node) is cst.Name and node.value == "self"


def _same_binding(name: str, a: ModuleNames, b: ModuleNames) -> bool:
    if name in a.imports and name in b.imports:
        return a.imports[name] == b.imports[name]
    return False


_SCOPES_AND_FSTRINGS = frozenset({cst.FunctionDef, cst.Lambda, cst.FormattedString})


def _substituted(
    func: cst.FunctionDef,
    substitute: dict[str, cst.BaseExpression],
    kept: list[str],
    name: str,
    is_method: bool,
    prov: Provenance | None = None,
) -> cst.FunctionDef:
    """The callee with ``substitute`` put in for its parameters (not where an inner function, lambda or
    comprehension rebinds the name), the kept parameters only, renamed, and a method."""

    # a substituted argument keeps the origin of the call site's expression, not the parameter's name
    origins = {k: prov.origin(v) for k, v in substitute.items()} if prov is not None else {}

    class _T(TrackingTransformer):
        def __init__(self) -> None:
            super().__init__(prov)
            self.shadow: list[set[str]] = []
            self.skip: set[int] = set()

        def on_leave(self, original_node, updated_node):
            result = super().on_leave(original_node, updated_node)
            if (
                prov is not None
                and type(original_node) is cst.Name
                and result is not updated_node
                and original_node.value in origins
            ):
                prov.set_origin(result, origins[original_node.value])
            return result

        def _bound(self, node) -> set[str]:
            return set(summary(node.params).writes) if hasattr(node, "params") else set()

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.shadow.append({p.name.value for p in [*node.params.params, *node.params.kwonly_params]})
            self.skip.add(id(node.name))

        def leave_FunctionDef(self, original_node, updated_node):
            self.shadow.pop()
            return updated_node

        def visit_Lambda(self, node: cst.Lambda) -> None:
            self.shadow.append({p.name.value for p in node.params.params})

        def leave_Lambda(self, original_node, updated_node):
            self.shadow.pop()
            return updated_node

        def visit_Attribute(self, node: cst.Attribute) -> None:
            self.skip.add(id(node.attr))

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None:
                self.skip.add(id(node.keyword))

        def visit_Param(self, node: cst.Param) -> None:
            self.skip.add(id(node.name))

        def leave_Name(self, original_node, updated_node):
            if id(original_node) in self.skip or updated_node.value not in substitute:
                return updated_node
            if any(updated_node.value in s for s in self.shadow[1:]):
                return updated_node
            value = substitute[updated_node.value]
            if not isinstance(
                value,
                (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.SimpleString, cst.Call, cst.Subscript),
            ):
                value = (
                    value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                    if not value.lpar
                    else value
                )
            return value

    transformer = _T()
    # only names that may be substituted change; functions and lambdas are entered for their scopes, f-strings
    # for the quotes of what lands in them
    transformer.hot = hot_paths(
        func,
        lambda node: (
            (type(node) is cst.Name and node.value in substitute) or type(node) in _SCOPES_AND_FSTRINGS
        ),
    )
    body = func.visit(transformer)
    params = list(body.params.params)
    self_param = params[0] if is_method else cst.Param(cst.Name("self"))
    rest = params[1:] if is_method else params
    # the parameters the copy still receives keep their defaults (a call that omits ``num_links=None`` still
    # matches) and their kind (keyword-only stays keyword-only, after its defaulted positional neighbours)
    keep = [p for p in rest if p.name.value in kept]
    keep_kwonly = [p for p in body.params.kwonly_params if p.name.value in kept]
    new_params = cst.Parameters(
        params=_last_without_comma([self_param, *keep]),
        star_arg=cst.ParamStar() if keep_kwonly else cst.MaybeSentinel.DEFAULT,
        kwonly_params=_last_without_comma(keep_kwonly),
    )
    return body.with_changes(name=cst.Name(name), params=new_params, decorators=[])


def _last_without_comma(params: list[cst.Param]) -> list[cst.Param]:
    if params:
        params[-1] = params[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return params


__all__ = ["MAX_DEPTH", "Callee", "Copy", "Inliner"]
