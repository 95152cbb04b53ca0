"""Moving what is static out of a specialised method.

* Static statements (assignments of static values to static locals, static assertions, and static ``if``
  statements made only of those) move to construction, in order, with the ``if`` structure that guards them.
* A static ``if`` whose arms still do device work selects *code*: each arm becomes a method and the choice is
  bound once at construction (``self._decode_x = self._decode_x_true if … else self._decode_x_false``).
* In what is left, every maximal static expression that depends on construction (a config read, a ``self``
  attribute, a static local) becomes a config field; a config read that takes run-time values (``seq_len``, a
  tensor) becomes a callable field of those values.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import libcst as cst

from tttv2_tools.trace_dependencies.constants import ARGS_NAMES, MC_NAMES

from .binding import Scope, self_attributes
from .cstutil import (
    assigned_names,
    block_statements,
    code,
    const_bool,
    dotted,
    is_atom,
    names_bound,
    names_read,
    names_written,
    one_line,
    slug,
    small_statement,
    summary,
)
from .errors import Gap
from .inline import replace_names
from .literals import decide_straight_literals, fold_literal_tests
from .naming import context_name
from .reiterable import yields_iterator
from .track import Provenance, StatementTransformer, TrackingTransformer, is_expression, replace_node
from .walk import hot_paths, visit_read_only, walk

PLACEHOLDER = "__field_{}__"


# ================================================================================================ fields
@dataclass
class FieldUse:
    """One hoisted expression, before its final name is chosen."""

    key: int  # placeholder number
    base: str  # preferred name
    value: cst.BaseExpression  # the expression, still written with ``self``
    params: tuple[str, ...]  # names the field is called with (callable fields)
    mode: str
    source: str  # the TTTv1 text it replaces
    loc: str  # file:line of the TTTv1 text
    guards: tuple[tuple[cst.BaseExpression, bool], ...] = ()  # static tests under which the code runs
    group: str = ""  # the function whose static code computes it (its fields function in from_model_args)
    borrowed: bool = False  # ``base`` is the local / keyword the value is given to, not spelled from it


@dataclass
class Registry:
    """Every hoisted expression of one generated class."""

    uses: list[FieldUse] = field(default_factory=list)

    def add(self, base, value, params, mode, source, loc, guards=(), group="", borrowed=False) -> int:
        key = len(self.uses)
        self.uses.append(
            FieldUse(key, base, value, tuple(params), mode, source, loc, tuple(guards), group, borrowed)
        )
        return key


def placeholder(key: int) -> cst.Attribute:
    return cst.Attribute(
        value=cst.Attribute(value=cst.Name("self"), attr=cst.Name("config")),
        attr=cst.Name(PLACEHOLDER.format(key)),
    )


def field_base_name(node: cst.BaseExpression, holders: set[str]) -> str | None:
    """A name for a field holding exactly ``node``, when ``node`` is a name, attribute or config read."""
    if isinstance(node, cst.Name):
        return node.value
    path = dotted(node)
    if path is not None:
        parts = path.split(".")
        if parts[0] == "self":
            parts = parts[1:]
        if parts and parts[0] in holders | ARGS_NAMES:
            parts = parts[1:]
        return "_".join(parts) if parts else None
    if isinstance(node, cst.Subscript):
        key = _string_key(node)
        if key is not None:
            owner = field_base_name(node.value, holders) if not _is_holder(node.value, holders) else None
            return f"{owner}_{key}".lower() if owner else key.lower()
    if isinstance(node, cst.Call):
        path = dotted(node.func)
        if path is not None:
            last = path.rsplit(".", 1)[-1]
            root = path.split(".")
            if len(root) >= 2 and (root[0] in ARGS_NAMES or (root[0] == "self" and root[1] in holders)):
                return last.removeprefix("get_")
        if isinstance(node.func, cst.Subscript):
            key = _string_key(node.func)
            if key is not None:
                return key.lower()
    return None


def _is_holder(node: cst.BaseExpression, holders: set[str]) -> bool:
    """``self.model_config`` / ``model_config`` / ``self.args``: the objects whose reads are config reads."""
    parts = (dotted(node) or "").split(".")
    if parts[0] == "self":
        return len(parts) == 2 and parts[1] in holders
    return len(parts) == 1 and (parts[0] in MC_NAMES or parts[0] in ARGS_NAMES)


def _string_key(node: cst.Subscript) -> str | None:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if isinstance(text, str) and text.isidentifier():
                return text
    return None


# ================================================================================================ split
def is_static_statement(statement: cst.BaseStatement, scope: Scope) -> bool:
    small = small_statement(statement)
    if small is None:
        return False
    if isinstance(small, cst.Assert):
        return scope.is_static(small.test, device_static=True) and (
            small.msg is None or scope.is_static(small.msg, device_static=True)
        )
    names = assigned_names(small)
    if not names or isinstance(small, cst.AugAssign):
        return False
    value = getattr(small, "value", None)
    if value is None:
        return False
    return all(scope.static_name(n) for n in names) and scope.is_static(value)


def split_static(
    statements: list[cst.BaseStatement], scope: Scope, prov: Provenance | None = None
) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """(dynamic statements, static statements), both in source order; a static ``if`` is split arm by arm."""
    dynamic: list[cst.BaseStatement] = []
    static: list[cst.BaseStatement] = []
    for statement in statements:
        refusal = _decided_refusal(statement, prov)
        if refusal is not None:
            dynamic.append(refusal)  # TTTv1 refuses when this path runs, not when the module is built
            continue
        if is_static_statement(statement, scope):
            static.append(statement)
            continue
        if isinstance(statement, cst.If) and scope.is_static(statement.test, device_static=True):
            dyn_then, st_then = split_static(block_statements(statement.body), scope, prov)
            dyn_else, st_else = split_static(_orelse_statements(statement.orelse), scope, prov)
            for arms, out in (((st_then, st_else), static), ((dyn_then, dyn_else), dynamic)):
                if arms[0] or arms[1]:
                    rebuilt = _rebuild_if(statement, *arms)
                    if prov is not None:
                        prov.note(rebuilt, statement)
                    out.append(rebuilt)
            continue
        dynamic.append(statement)
    return dynamic, static


def _decided_refusal(statement: cst.BaseStatement, prov: Provenance | None) -> cst.BaseStatement | None:
    """``assert False, msg`` (an assert the topology / mode decided to fail): kept at run time, as an ``assert``,
    where TTTv1 fails. An assert, not a raise: under ``python -O`` TTTv1's assert is stripped and the code after it
    runs, and so does the generated code's."""
    small = small_statement(statement)
    if not isinstance(small, cst.Assert) or const_bool(small.test) is not False or len(statement.body) != 1:
        return None
    return statement  # dynamic: TTTv1 fails when this path runs, not when the module is built


def _failing_assert(msg: cst.BaseExpression | None) -> cst.Assert:
    """``assert False, msg``: TTTv1's refusal with TTTv1's semantics (stripped under ``python -O``)."""
    return cst.Assert(test=cst.Name("False"), msg=msg)


def _orelse_statements(orelse) -> list[cst.BaseStatement]:
    if orelse is None:
        return []
    if isinstance(orelse, cst.Else):
        return block_statements(orelse.body)
    return [orelse.with_changes(leading_lines=[])]  # elif: an if inside the else


def _rebuild_if(statement: cst.If, then: list, orelse: list) -> cst.If:
    body = statement.body
    if not isinstance(body, cst.IndentedBlock):
        body = cst.IndentedBlock(body=[])
    new_orelse = None
    if orelse:
        if len(orelse) == 1 and isinstance(orelse[0], cst.If) and not orelse[0].leading_lines:
            new_orelse = orelse[0]  # keep an elif an elif
        else:
            new_orelse = cst.Else(body=cst.IndentedBlock(body=orelse))
    if not then:
        # ``if c: <nothing> else: X`` -> ``if not (c): X``
        test = cst.UnaryOperation(operator=cst.Not(), expression=_parenthesize(statement.test))
        return statement.with_changes(test=test, body=body.with_changes(body=orelse), orelse=None)
    return statement.with_changes(body=body.with_changes(body=then), orelse=new_orelse)


def _parenthesize(node: cst.BaseExpression) -> cst.BaseExpression:
    if is_atom(node) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# ================================================================================================ constants
def propagate_literals(
    func: cst.FunctionDef, scope: Scope, prov: Provenance | None = None
) -> cst.FunctionDef:
    """A local assigned one literal once (``sharded = True``) is replaced by the literal where it is read."""
    func = _fold_method_dispatch(func, scope, prov)
    func = decide_straight_literals(func, prov)  # ``num_links = None`` then ``if num_links is None:``
    literals: dict[str, cst.BaseExpression] = {}
    methods: set[str] = set()
    for name, values in scope.assignments.items():
        if len(values) != 1 or values[0] is None or name in scope.params:
            continue
        if _is_literal(values[0]):
            literals[name] = values[0]
        elif _method_reference(values[0], scope):
            # ``fn = self._non_tg`` (what a decided ``self._a if TG else self._b`` leaves): ``fn(x)`` is then the
            # method call ``self._non_tg(x)``, which is copied and specialised like any other
            literals[name] = values[0]
            methods.add(name)
    if not literals:
        return func
    for name in _read_before_assigned_or_deleted(func, set(literals)):
        del literals[name]
    if not literals:
        return func
    targets: set[int] = set()

    class _Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            for name in _target_name_nodes(node.target):
                targets.add(id(name))

        def visit_Attribute(self, node: cst.Attribute) -> None:
            targets.add(id(node.attr))

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None:
                targets.add(id(node.keyword))

    visit_read_only(func, _Targets())

    class _T(TrackingTransformer):
        def leave_Name(self, original_node, updated_node):
            if id(original_node) in targets:
                return updated_node
            literal = literals.get(updated_node.value)
            return literal if literal is not None else updated_node

        def leave_SimpleStatementLine(self, original_node, updated_node):
            small = small_statement(updated_node)
            names = assigned_names(small) if isinstance(small, cst.Assign) else None
            if names and all(n in literals for n in names):
                return cst.RemoveFromParent()
            return updated_node

    # a test the literals made constant (``if False:``, ``"a" == "a"``) is decided now, not bound
    return fold_literal_tests(func.visit(_T(prov)), prov)


def _read_before_assigned_or_deleted(func: cst.FunctionDef, names: set[str]) -> set[str]:
    """Names among ``names`` that the function reads before their assignment (in execution order of straight
    code: an assignment's value before its targets), deletes, or declares global / nonlocal: replacing them
    by the literal would change what the code does."""
    assigned: set[str] = set()
    out: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is func

        def visit_Assign(self, node: cst.Assign) -> bool:
            visit_read_only(node.value, self)
            for target in node.targets:
                # a plain name target is bound here, not read (its sub-expressions, ``d[k] = …``, are reads)
                assigned.update(n.value for n in _target_name_nodes(target.target))
                visit_read_only(target, self)
                assigned.update(n.value for n in _target_name_nodes(target.target))
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if node.value in names and node.value not in assigned:
                out.add(node.value)

        def visit_Del(self, node: cst.Del) -> None:
            out.update(n.value for n in _target_name_nodes(node.target) if n.value in names)

        def visit_Global(self, node: cst.Global) -> None:
            out.update(n.name.value for n in node.names if n.name.value in names)

        def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
            out.update(n.name.value for n in node.names if n.name.value in names)

    visit_read_only(func.body, _V())
    return out


def _target_name_nodes(target: cst.CSTNode) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_name_nodes(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_name_nodes(target.value)
    return []


def _fold_method_dispatch(func: cst.FunctionDef, scope: Scope, prov: Provenance | None) -> cst.FunctionDef:
    """``{"decode": self._dec, "prefill": self._pre}["decode"]`` (a dispatch on the mode, put in as a constant)
    -> ``self._dec``, and ``self.impl`` -> ``self._forward_1d`` when ``__init__`` stores that method there
    (``Scope.method_aliases``): method calls the inliner copies and specialises."""

    def pick(node: cst.Subscript) -> cst.BaseExpression | None:
        table = node.value
        if not isinstance(table, cst.Dict) or len(node.slice) != 1:
            return None
        index = node.slice[0].slice
        if not isinstance(index, cst.Index) or not isinstance(index.value, cst.SimpleString):
            return None
        found = None
        for element in table.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return None
            if not _method_reference(element.value, scope):
                return None
            if element.key.evaluated_value == index.value.evaluated_value:
                found = element.value
        return found

    aliases = scope.method_aliases

    def alias(node: cst.CSTNode) -> bool:
        return (
            type(node) is cst.Attribute
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
            and node.attr.value in aliases
        )

    if not any(alias(n) or (type(n) is cst.Subscript and pick(n) is not None) for n in walk(func)):
        return func

    class _T(TrackingTransformer):
        def leave_Attribute(self, original_node, updated_node):
            if alias(updated_node):
                return updated_node.with_changes(attr=cst.Name(aliases[updated_node.attr.value]))
            return updated_node

        def leave_Subscript(self, original_node, updated_node):
            chosen = pick(updated_node)
            return chosen if chosen is not None else updated_node

    return func.visit(_T(prov))


def _method_reference(node: cst.BaseExpression, scope: Scope) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
        and node.attr.value in scope.methods
    )


def _is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    return False


# ================================================================================================ hoisting
class Hoister(TrackingTransformer):
    """Replaces maximal static expressions that depend on construction by config-field placeholders."""

    def __init__(
        self,
        scope: Scope,
        registry: Registry,
        mode: str,
        loc_of,
        gaps: list[Gap],
        *,
        leaves_only: bool = False,
        prov: Provenance | None = None,
        guards: tuple = (),
        group: str = "",
    ) -> None:
        super().__init__(prov)
        self.guards = guards
        self.group = group
        self.scope = scope
        self.registry = registry
        self.mode = mode
        self.loc_of = loc_of
        self.gaps = gaps
        self.leaves_only = leaves_only
        self.marked: dict[int, cst.BaseExpression] = {}
        self.stack: list[cst.CSTNode] = []
        self.no_hoist: set[int] = set()
        self.root: cst.CSTNode | None = None

    # -- decisions -------------------------------------------------------------------------------
    def _depends_on_construction(self, node: cst.CSTNode) -> bool:
        for attr in self_attributes(node):
            if attr not in self.scope.facts.device:
                return True
        if any(self.scope.is_local(n) and self.scope.static_name(n) for n in summary(node).reads):
            return True
        return bool(self.scope.stored_attrs) and bool(self.scope.queried_values(node))

    def _holder_call(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, cst.Call):
            return False
        parts = (dotted(node.func) or "").split(".")
        if len(parts) >= 2 and parts[0] == "self" and parts[1] in self.scope.facts.holders:
            return True
        return parts[0] in ARGS_NAMES or parts[0] in MC_NAMES

    def _try_hoist(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        if not is_expression(node) or id(node) in self.no_hoist:
            return None
        if isinstance(node, cst.Name) and node.value == "self":
            return None
        if _method_reference(node, self.scope) and self.scope.bound_method(node.attr.value):
            return None  # a bound method used as a value stays ``self._m``: the generated class has its copy
        if _is_holder(node, self.scope.facts.holders):
            return (
                None  # the ModelArgs / model_config object itself never becomes a field (reported as a gap)
            )
        if isinstance(node, (cst.Lambda, cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp)):
            return None
        if yields_iterator(node):
            return None  # an iterator is made per call, as TTTv1 makes it; its parts may be fields
        if not self._depends_on_construction(node) and not _is_choice(node):
            return None
        if self.scope.is_static(node, device_static=self.leaves_only):
            if self.leaves_only and not _leaf(node):
                return None
            values = self.scope.queried_values(node) if self.scope.stored_attrs else {}
            # a query on a local the forward changes in place: made on the local's value at construction
            return self._field(replace_names(node, values) if values else node, ())
        if self._holder_call(node):
            params = self._dynamic_names(node)
            if params is not None and self.scope.is_static_given(node, params):
                return self._field(node, params)
        return None

    def _dynamic_names(self, node: cst.CSTNode) -> tuple[str, ...] | None:
        out: list[str] = []
        for value in summary(node).reads:
            if value == "self" or value in out:
                continue
            if value in self.scope.params or (
                self.scope.is_local(value) and not self.scope.static_name(value)
            ):
                out.append(value)
        return tuple(out)

    def _in_try(self) -> bool:
        """Whether the node being visited sits in a ``try`` with ``except`` handlers (its body, a handler or its
        ``else``: code that runs, or not, depending on an exception)."""
        stack = self.stack
        return any(
            isinstance(parent, (cst.Try, cst.TryStar))
            and parent.handlers
            and stack[i + 1] is not parent.finalbody
            for i, parent in enumerate(stack[:-1])
        )

    def _field(self, node: cst.BaseExpression, params: tuple[str, ...]) -> cst.BaseExpression:
        if self._in_try():
            self.gaps.append(
                Gap(
                    self.loc_of(node),
                    one_line(node, 80),
                    "read inside try/except: as a field it is computed at construction, outside the handler, "
                    "where an exception TTTv1 handles at run time (a missing key) would not be caught",
                )
            )
        base, borrowed = field_base_name(node, self.scope.facts.holders), False
        if base is None:
            base, borrowed = context_name(node, self.stack)
        key = self.registry.add(
            base,
            node,
            params,
            self.mode,
            one_line(node, 160),
            self.loc_of(node),
            (*self.guards, *self._presence_guards(node)),
            self.group,
            borrowed,
        )
        replacement: cst.BaseExpression = placeholder(key)
        if params:
            replacement = cst.Call(func=replacement, args=[cst.Arg(cst.Name(p)) for p in params])
        return replacement

    def _presence_guards(self, node: cst.BaseExpression) -> tuple:
        """``("K" in self.model_config, True)`` for each key ``node`` reads that is not defined on every
        configuration, when TTTv1 reads it only under a run-time test: the field is then computed only when the
        key is there (TTTv1 never reads it otherwise), instead of failing at construction."""
        keys = self.scope.facts.guarded_keys
        if not keys or not self._under_runtime_test(node):
            return ()
        out = []
        for sub in walk(node):
            if type(sub) is cst.Subscript and _is_holder(sub.value, self.scope.facts.holders):
                key = _string_key(sub)
                if key in keys:
                    test = cst.Comparison(
                        left=cst.SimpleString(f'"{key}"'),
                        comparisons=[cst.ComparisonTarget(cst.In(), sub.value)],
                    )
                    out.append((test, True))
        return tuple(out)

    def _under_runtime_test(self, node: cst.CSTNode) -> bool:
        """Whether the node being visited runs only when a test that is not static holds (an arm of an ``if``,
        ``while`` or conditional expression, or the right side of ``and`` / ``or``)."""
        chain = [*self.stack, node]
        for parent, child in itertools.pairwise(chain):
            if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
                test = parent.test
            elif isinstance(parent, cst.BooleanOperation):
                test = parent.left
            else:
                continue
            if child is test:
                continue
            if not self.scope.is_static(test, device_static=True):
                return True
        return False

    # -- traversal ---------------------------------------------------------------------------------
    def hoist(self, tree: cst.CSTNode) -> cst.CSTNode:
        """``tree`` with its hoistable expressions replaced, entering only the subtrees that hold one of
        the nodes a hoisted expression needs (:meth:`_may_need`); the others keep their identity."""
        self.hot = hot_paths(tree, self._may_need)
        return tree.visit(self)

    def _may_need(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` may make an expression around it hoistable: a choice, a ``self.X`` that is not a
        device attribute, or a name of a local. An expression without any of them neither depends on
        construction (its reads are its names, its ``self`` attributes its ``self.X``) nor is a choice, so
        :meth:`_try_hoist` leaves it and everything in it alone. (Whether a local is static is not asked
        here: its answer is memoised and may depend on the order of the questions.)"""
        kind = type(node)
        if kind is cst.Name:
            return self.scope.is_local(node.value)
        if kind is cst.Attribute:
            value = node.value
            return (
                type(value) is cst.Name
                and value.value == "self"
                and node.attr.value not in self.scope.facts.device
            )
        return kind is cst.IfExp or kind is cst.BooleanOperation

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.hot is not None and id(node) not in self.hot:
            return False  # nothing in it can be hoisted
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            self._shadowed_by_params(node)
        if isinstance(node, cst.Attribute):
            self.no_hoist.add(id(node.attr))
        if isinstance(node, cst.Arg) and node.keyword is not None:
            self.no_hoist.add(id(node.keyword))
        if isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
            self.no_hoist.add(id(node.name))
        if isinstance(node, cst.AssignTarget):
            self._no_hoist_targets(node.target)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            func = node.func
            stored = (
                isinstance(func.value, cst.Name)
                and func.value.value == "self"
                and func.attr.value not in self.scope.methods
            )
            if not stored:  # hoist the receiver, never a bound method (a callable attribute is a value)
                self.no_hoist.add(id(func))
        if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            self._no_hoist_targets(node.target)
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and self._fresh_and_mutated(node):
            # ``tiles = [n]`` then ``tiles.append(…)``: TTTv1 builds a new object per call; one shared field
            # would grow with every call. Its parts may still be fields.
            self.no_hoist.add(id(node.value))
        replacement = self._try_hoist(node)
        if replacement is not None:
            self.marked[id(node)] = replacement
            return False
        self.stack.append(node)
        return True

    def _shadowed_by_params(self, func: cst.FunctionDef | cst.Lambda) -> None:
        """Inside a nested function or lambda, its own parameters shadow the locals of the same name: nothing
        that reads them there is the outer (static) local."""
        if self.root is None and isinstance(func, cst.FunctionDef):
            self.root = func  # the method being hoisted: its parameters are per-call inputs anyway
            return
        params = func.params
        names = {p.name.value for p in [*params.params, *params.posonly_params, *params.kwonly_params]}
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                names.add(star.name.value)
        if not names:
            return
        for sub in walk(func.body):
            if is_expression(sub) and not names.isdisjoint(summary(sub).reads):
                self.no_hoist.add(id(sub))

    def _fresh_and_mutated(self, node: cst.Assign | cst.AnnAssign) -> bool:
        """An assignment of a new object (not a read of an existing one) to a local changed in place."""
        if node.value is None or isinstance(node.value, (cst.Name, cst.Attribute, cst.Subscript)):
            return False
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        return any(isinstance(t, cst.Name) and t.value in self.scope.mutated for t in targets)

    def _no_hoist_targets(self, target: cst.CSTNode) -> None:
        class _V(cst.CSTVisitor):
            def __init__(self, out: set[int]) -> None:
                super().__init__()
                self.out = out

            def on_visit(self, n: cst.CSTNode) -> bool:
                self.out.add(id(n))
                return True

        visit_read_only(target, _V(self.no_hoist))

    def on_leave(self, original_node, updated_node):
        replacement = self.marked.get(id(original_node))
        if replacement is not None:
            return replacement
        if self.stack and self.stack[-1] is original_node:
            self.stack.pop()
        return super().on_leave(original_node, updated_node)


def _is_choice(node: cst.BaseExpression) -> bool:
    """A conditional expression or boolean operator: a branch, hoisted when static even if it reads nothing of
    construction (``x if ttnn.DRAM_MEMORY_CONFIG is None else y``)."""
    return isinstance(node, (cst.IfExp, cst.BooleanOperation))


def _leaf(node: cst.BaseExpression) -> bool:
    """Binding tests hoist only names, attributes and config reads, so they stay readable."""
    return isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))


# ================================================================================================ binding
@dataclass
class Binding:
    """A code choice bound at construction."""

    attr: str  # the bound attribute, e.g. _decode_dim_eq_8192
    test: cst.BaseExpression  # static test, written with ``self`` (hoisted later)
    when_true: str
    when_false: str
    origin: cst.CSTNode  # the original if statement
    mode: str
    file: str = ""  # the analysed file of the code (its module-level names resolve there)


@dataclass
class Extracted:
    """A method made from one arm of a static branch."""

    name: str
    func: cst.FunctionDef


def static_asserts_as_ifs(func: cst.FunctionDef, scope: Scope, prov: Provenance | None) -> cst.FunctionDef:
    """``assert <static test>, msg`` left in run-time code (it sits under a run-time ``if``) becomes
    ``if not (<test>): assert False, msg``: a static choice the binder can make at construction, still an assert
    (under ``python -O`` neither TTTv1 nor the generated code checks it)."""

    class _T(StatementTransformer):
        def on_leave(self, original_node, updated_node):
            result = super().on_leave(original_node, updated_node)
            small = small_statement(updated_node)
            if prov is not None and isinstance(result, cst.If) and isinstance(small, cst.Assert):
                # the assert itself is the branch the report follows, not its line
                prov.set_origin(result, prov.origin(small))
            return result

        def leave_SimpleStatementLine(self, original_node, updated_node):
            small = small_statement(updated_node)
            if not isinstance(small, cst.Assert) or len(updated_node.body) != 1:
                return updated_node
            if not scope.is_static(small.test, device_static=True):
                return updated_node
            if const_bool(small.test) is False:
                # a test a call site's constant made literal (``assert fused_activation is None`` given "gelu"):
                # it always fails, there is no choice to bind; ``assert False`` as is, the same for a literal
                # the source wrote
                if isinstance(small.test, cst.Name):
                    return updated_node
                failing = small.with_changes(test=cst.Name("False"))
                if prov is not None:
                    prov.set_origin(failing, prov.origin(small))
                return updated_node.with_changes(body=[failing])
            raise_ = cst.SimpleStatementLine([_failing_assert(small.msg)])
            if isinstance(small.test, cst.UnaryOperation) and isinstance(small.test.operator, cst.Not):
                test = small.test.expression  # not (not x) -> x
            else:
                test = cst.UnaryOperation(operator=cst.Not(), expression=_parenthesize(small.test))
            new = cst.If(
                test=test, body=cst.IndentedBlock(body=[raise_]), leading_lines=updated_node.leading_lines
            )
            return new

    def lone_assert(node: cst.CSTNode) -> bool:
        return (
            type(node) is cst.SimpleStatementLine and len(node.body) == 1 and type(node.body[0]) is cst.Assert
        )

    transformer = _T(prov)
    transformer.hot = hot_paths(func, lone_assert, _statements_only)
    return func.visit(transformer)


def _statements_only(node: cst.CSTNode) -> bool:
    return not is_expression(node)


def _and_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an ``and`` chain in the order they run (``a and b and c`` is ``(a and b) and c`` in the
    tree); an operand in parentheses is kept whole."""
    if type(test) is cst.BooleanOperation and isinstance(test.operator, cst.And) and not test.lpar:
        return [*_and_operands(test.left), test.right]
    return [test]


def _and_of(operands: list[cst.BaseExpression]) -> cst.BaseExpression:
    out = operands[0]
    for operand in operands[1:]:
        out = cst.BooleanOperation(left=out, operator=cst.And(), right=operand)
    return out


def split_mixed_tests(func: cst.FunctionDef, scope: Scope, prov: Provenance | None) -> cst.FunctionDef:
    """``if S and R: A else: B`` with a static ``S`` (the longest static prefix of the ``and`` chain) and a
    run-time rest ``R`` -> ``if S: (if R: A else: B) else: B``: the short-circuit on ``S`` is a static choice,
    which the binder then makes at construction. The same code runs in the same order (``R`` only when ``S``
    holds); ``B`` (an ``else`` or ``elif`` chain) is written once per arm. Parentheses around the whole test (a
    test over several lines) are dropped."""

    class _T(StatementTransformer):
        def leave_If(self, original_node, updated_node):
            test = updated_node.test
            if type(test) is not cst.BooleanOperation or not isinstance(test.operator, cst.And):
                return updated_node
            operands = _and_operands(test.with_changes(lpar=(), rpar=()))
            static = 0
            while static < len(operands) and scope.is_static(operands[static], device_static=True):
                static += 1
            if static == 0 or static == len(operands):
                return updated_node
            left, right = _and_of(operands[:static]), _and_of(operands[static:])
            inner = cst.If(test=right, body=updated_node.body, orelse=updated_node.orelse)
            outer = updated_node.with_changes(test=left, body=cst.IndentedBlock(body=[inner]))
            if prov is not None:
                prov.note(outer, original_node)
            return outer

    def and_test(node: cst.CSTNode) -> bool:
        return type(node) is cst.If and type(node.test) is cst.BooleanOperation

    transformer = _T(prov)
    transformer.hot = hot_paths(func, and_test, _statements_only)
    return func.visit(transformer)


def normalise_early_returns(
    statements: list[cst.BaseStatement], prov: Provenance | None = None
) -> list[cst.BaseStatement]:
    """``if c: …; return x`` followed by more statements -> ``if c: …; return x else: <the rest>``."""
    out: list[cst.BaseStatement] = []
    for index, statement in enumerate(statements):
        if (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and _ends_with_return(block_statements(statement.body))
            and index + 1 < len(statements)
        ):
            rest = normalise_early_returns(statements[index + 1 :], prov)
            rebuilt = statement.with_changes(orelse=cst.Else(body=cst.IndentedBlock(body=rest)))
            if prov is not None:
                prov.note(rebuilt, statement)
            out.append(rebuilt)
            return out
        out.append(statement)
    return out


def _ends_with_return(statements: list[cst.BaseStatement]) -> bool:
    if not statements:
        return False
    last = statements[-1]
    if isinstance(small_statement(last) or last, cst.Return):
        return True
    if isinstance(last, cst.If) and last.orelse is not None:
        return _ends_with_return(block_statements(last.body)) and _ends_with_return(
            _orelse_statements(last.orelse)
        )
    return False


class _Flow(cst.CSTVisitor):
    """Statements in source order with the names each reads and writes (headers of compound statements
    count as statements of their own)."""

    def __init__(self) -> None:
        self.order: list[tuple[cst.CSTNode, set[str], set[str]]] = []
        self.spans: dict[int, tuple[int, int]] = {}
        self.loops: dict[int, tuple[int, int]] = {}
        self.loops_by_node: list[tuple[cst.CSTNode, tuple[int, int]]] = []
        self._open: list[tuple[cst.CSTNode, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            self.order.append((node, names_read(node), names_written(node)))
            return False
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and self.order:
            self.order.append((node, names_read(node), {node.name.value}))
            return False
        if isinstance(node, cst.BaseCompoundStatement):
            header = _header_parts(node)
            reads = set().union(*(names_read(h) for h in header)) if header else set()
            writes = set().union(*(names_written(h) for h in header)) if header else set()
            if isinstance(node, cst.For):
                writes |= names_bound(node.target)
            self._open.append((node, len(self.order)))
            self.order.append((node, reads, writes))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self._open and self._open[-1][0] is original_node:
            _, start = self._open.pop()
            self.spans[id(original_node)] = (start, len(self.order) - 1)
            if isinstance(original_node, (cst.For, cst.While)):
                self.loops[id(original_node)] = (start, len(self.order) - 1)
                self.loops_by_node.append((original_node, (start, len(self.order) - 1)))


def _header_parts(node: cst.BaseCompoundStatement) -> list[cst.CSTNode]:
    if isinstance(node, (cst.If, cst.While)):
        return [node.test]
    if isinstance(node, cst.For):
        return [node.iter]
    if isinstance(node, cst.With):
        return list(node.items)
    return []


def _has_jump(statements: list[cst.BaseStatement]) -> str | None:
    for statement in statements:
        for node in walk(statement, _outside_defs):
            jump = _JUMPS.get(type(node))
            if jump is not None:
                return jump
    return None


_JUMPS = {cst.Break: "break", cst.Continue: "continue", cst.Yield: "yield", cst.Global: "global"}
_JUMPS[cst.Nonlocal] = "nonlocal"


def _outside_defs(node: cst.CSTNode) -> bool:
    """Walk into everything but nested functions and lambdas (their jumps and returns are their own)."""
    return type(node) not in (cst.FunctionDef, cst.Lambda)


def _returns_inside(statements: list[cst.BaseStatement]) -> bool:
    return any(type(node) is cst.Return for s in statements for node in walk(s, _outside_defs))


class BranchBinder:
    """Turns the static ``if`` statements of a dynamic method into bound methods."""

    def __init__(self, scope: Scope, mode: str, prov: Provenance, gaps: list[Gap], loc_of, names: set[str]):
        self.scope = scope
        self.mode = mode
        self.prov = prov
        self.gaps = gaps
        self.loc_of = loc_of
        self.names = names  # method and attribute names already taken in the class
        self.bindings: list[Binding] = []
        self.extracted: list[Extracted] = []
        self.skipped: list[cst.If] = []
        self.guards_of: dict[str, tuple[tuple[cst.BaseExpression, bool], ...]] = {}
        self._current: tuple = ()

    def _unique(self, base: str) -> str:
        name, n = base, 2
        while name in self.names or f"{name}_true" in self.names:
            name, n = f"{base}_{n}", n + 1
        self.names.update({name, f"{name}_true", f"{name}_false"})
        return name

    def run(self, func: cst.FunctionDef) -> cst.FunctionDef:
        self._current = self.guards_of.get(func.name.value, ())
        body = normalise_early_returns(block_statements(func.body), self.prov)
        func = func.with_changes(body=func.body.with_changes(body=body))
        while True:
            target = self._first_static_if(func)
            if target is None:
                return func
            func = self._extract(func, target)

    def _first_static_if(self, func: cst.FunctionDef) -> cst.If | None:
        scope = self.scope
        skipped = {id(n) for n in self.skipped}

        def enter(node: cst.CSTNode) -> bool:
            return not is_expression(node) and (type(node) is not cst.FunctionDef or node is func)

        for node in walk(func, enter):
            if (
                type(node) is cst.If
                and id(node) not in skipped
                and scope.is_static(node.test, device_static=True)
            ):
                return node
        return None

    def _extract(self, func: cst.FunctionDef, target: cst.If) -> cst.FunctionDef:
        origin = self.prov.origin(target)
        then = block_statements(target.body)
        orelse = _orelse_statements(target.orelse)
        jump = _has_jump(then + orelse)
        if jump is not None:
            return self._give_up(func, target, f"a static branch whose arms contain '{jump}'")
        flow = _Flow()
        visit_read_only(func, flow)
        start, end = flow.spans[id(target)]
        returns_then = _ends_with_return(then)
        returns_else = _ends_with_return(orelse)
        if _returns_inside(then + orelse) and not (returns_then and returns_else):
            return self._give_up(func, target, "a static branch that returns from only one of its paths")
        inside_loop = [span for span in flow.loops.values() if span[0] < start and span[1] >= end]
        # the method's own parameters too: a method extracted earlier receives the forward's locals its arms
        # read, and a static ``if`` nested in it passes them on
        params_of = func.params
        before: set[str] = set(self.scope.params) | {
            p.name.value for p in [*params_of.params, *params_of.kwonly_params] if p.name.value != "self"
        }
        after: set[str] = set()
        # a read in the body of a later ``for`` of its own target sees that loop's binding, never the arm's
        rebound: dict[int, set[str]] = {}
        for node, (lo, hi) in ((n, s) for n, s in flow.loops_by_node if s[0] > end):
            if isinstance(node, cst.For):
                targets = names_bound(node.target) - flow.order[lo][1]
                for index in range(lo + 1, hi + 1):
                    rebound.setdefault(index, set()).update(targets)
        for index, (_, reads, writes) in enumerate(flow.order):
            if index < start:
                before |= writes
            elif index > end:
                after |= reads - rebound.get(index, set())
        for lo, hi in inside_loop:
            for index in range(lo, hi + 1):
                after |= flow.order[index][1]
                before |= flow.order[index][2]
        arm_reads = set().union(*(names_read(s) for s in then + orelse)) if then or orelse else set()
        arm_writes = set().union(*(names_written(s) for s in then + orelse)) if then or orelse else set()
        dynamic = {n for n in arm_reads if n in before and not self._static(n)}
        live_out = sorted(n for n in arm_writes if n in after and not self._static(n))
        for name in live_out:
            if name in before:
                dynamic.add(name)
        params = sorted(dynamic)
        attr = self._unique(f"_{self.mode}_{slug(code(target.test))}")
        returns = returns_then and returns_else
        true_name, false_name = f"{attr}_true", f"{attr}_false"
        self._add_method(true_name, then, params, live_out, returns, before, target)
        self._add_method(false_name, orelse, params, live_out, returns, before, target)
        self.guards_of[true_name] = (*self._current, (target.test, True))
        self.guards_of[false_name] = (*self._current, (target.test, False))
        self.bindings.append(
            Binding(attr, target.test, true_name, false_name, origin, self.mode, self.scope.file)
        )
        call = cst.Call(
            func=cst.Attribute(value=cst.Name("self"), attr=cst.Name(attr)),
            args=[cst.Arg(cst.Name(p)) for p in params],
        )
        if returns:
            replacement: cst.BaseStatement = cst.SimpleStatementLine([cst.Return(call)])
        elif not live_out:
            replacement = cst.SimpleStatementLine([cst.Expr(call)])
        else:
            targets = (
                cst.Name(live_out[0])
                if len(live_out) == 1
                else cst.Tuple([cst.Element(cst.Name(n)) for n in live_out], lpar=[], rpar=[])
            )
            replacement = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(targets)], call)])
        replacement = replacement.with_changes(leading_lines=target.leading_lines)
        self.prov.note(replacement, target)
        return replace_node(func, target, replacement, self.prov)

    def _static(self, name: str) -> bool:
        return self.scope.is_local(name) and self.scope.static_name(name)

    def _add_method(self, name, statements, params, live_out, returns, before, target) -> None:
        body = list(statements)
        if not returns and live_out:
            values = [
                cst.Name(n) if (n in before or _assigns(statements, n)) else cst.Name("None")
                for n in live_out
            ]
            value = (
                values[0]
                if len(values) == 1
                else cst.Tuple([cst.Element(v) for v in values], lpar=[], rpar=[])
            )
            body.append(cst.SimpleStatementLine([cst.Return(value)]))
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        doc = f'"""{self.mode.capitalize()} path when `{one_line(target.test, 70)}` is {name.endswith("_true")}."""'
        func = cst.FunctionDef(
            name=cst.Name(name),
            params=cst.Parameters(
                params=[cst.Param(cst.Name("self"))] + [cst.Param(cst.Name(p)) for p in params]
            ),
            body=cst.IndentedBlock(body=[cst.SimpleStatementLine([cst.Expr(cst.SimpleString(doc))]), *body]),
        )
        self.extracted.append(Extracted(name, func))

    def _give_up(self, func: cst.FunctionDef, target: cst.If, reason: str) -> cst.FunctionDef:
        if _reads_llm_mode(target.test):
            reason = (
                f"{reason}; the test reads the mode from the config dict, which is taken as the mode only as "
                '`model_config["LLM_MODE"]` read from the dict `__init__` keeps as `self.model_config` (not a '
                "copy or another name), in a class whose method `set_model_config` (or another name) switches that "
                "dict between modes, as Llama-2-70B T3000's does: without such a setter the module runs in its "
                "construction dict's mode only"
            )
        self.gaps.append(Gap(self.loc_of(target), one_line(target.test, 80), reason))
        self.skipped.append(target)  # reported; --partial marks it; never picked again
        return func


def _reads_llm_mode(test: cst.BaseExpression) -> bool:
    """Whether ``test`` reads ``…["LLM_MODE"]`` (the mode a Llama-2-70B / Falcon-40B config dict carries)."""
    return any(
        type(node) is cst.SubscriptElement
        and type(node.slice) is cst.Index
        and type(node.slice.value) is cst.SimpleString
        and node.slice.value.evaluated_value == "LLM_MODE"
        for node in walk(test)
    )


def _assigns(statements: list[cst.BaseStatement], name: str) -> bool:
    return any(name in names_written(s) for s in statements)
