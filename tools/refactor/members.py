"""What the generated module reads of TTTv1's class body, checked after rendering.

``from_model_args`` rebuilds the attributes TTTv1's ``__init__`` sets on a plain namespace (``legacy``), and the
generated class has only its own methods, its config and what ``_bind`` / ``load_device_weights`` set. A read of
anything else would fail at construction or at run time although the run said "everything was transformed".
So every such read is either made exact here or reported as a gap:

- a class constant (``DECODE_GAIN = 2.0`` in TTTv1's class body) is carried into the generated class, and
  ``legacy.DECODE_GAIN`` reads it there (``cls.DECODE_GAIN``);
- a ``@property`` whose body is one ``return EXPR`` is evaluated at construction as ``EXPR`` on ``legacy``;
- a method used as a value (``fn = self._a``, ``{"decode": self._dec}``), any other property, and an attribute
  neither TTTv1's ``__init__`` nor the generated class sets are reported.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field

import libcst as cst

from .bases import inherited
from .cstutil import block_statements, is_atom, names_read, small_statement
from .errors import Gap
from .source import Inputs
from .walk import run_memo, walk

LEGACY = "legacy"
_LITERAL_NAMES = {"True", "False", "None"}


@dataclass
class Members:
    """TTTv1's class body: constants (name -> value), properties and other methods (name -> def)."""

    constants: dict[str, cst.BaseExpression] = field(default_factory=dict)
    properties: dict[str, cst.FunctionDef] = field(default_factory=dict)
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)


def members_of(klass: cst.ClassDef) -> Members:
    out = Members()
    for statement in block_statements(klass.body):
        if isinstance(statement, cst.FunctionDef):
            names = {_decorator_name(d) for d in statement.decorators}
            if names & {"property", "cached_property"}:
                out.properties[statement.name.value] = statement
            elif not any(name.endswith(("setter", "deleter")) for name in names):
                out.methods[statement.name.value] = statement
            continue
        small = small_statement(statement)
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                out.constants[target.value] = small.value
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
            out.constants[small.target.value] = small.value
    return out


def _decorator_name(decorator: cst.Decorator) -> str:
    node = decorator.decorator
    if isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return node.value if isinstance(node, cst.Name) else ""


def _single_return(func: cst.FunctionDef) -> cst.BaseExpression | None:
    body = [s for s in block_statements(func.body) if not _is_docstring(s)]
    if len(body) != 1:
        return None
    small = small_statement(body[0])
    return small.value if isinstance(small, cst.Return) and small.value is not None else None


def _is_docstring(statement: cst.BaseStatement) -> bool:
    small = small_statement(statement)
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))


@dataclass(frozen=True)
class _AttributeUses:
    """What one walk of a tree finds about ``OWNER.X`` attributes: the reads, the names written, and the owners
    also set by name (``setattr(OWNER, …)``, a read of ``OWNER.__dict__``)."""

    #: owner -> the OWNER.X nodes that are not assignment targets, in walk order
    reads: dict[str, list[cst.Attribute]]
    written: dict[str, set[str]]  # owner -> X of every OWNER.X assigned
    dynamic: frozenset[str]  # owners set by name


#: tree id -> (tree, its attribute uses): the run-time check asks three questions of each statement, and the
#: construction rounds ask two of each version of ``from_model_args``; one walk answers them (until the run ends)
_USES: dict = run_memo()


def _attribute_uses(tree: cst.CSTNode) -> _AttributeUses:
    hit = _USES.get(id(tree))
    if hit is not None and hit[0] is tree:
        return hit[1]
    # ids of the nodes that are assignment targets (``legacy.x = …``, ``for self.i in …``)
    targets: set[int] = set()

    def mark(target: cst.CSTNode) -> None:
        kind = type(target)
        if kind is cst.Tuple or kind is cst.List:
            for element in target.elements:
                mark(element.value)
        elif kind is cst.StarredElement:
            mark(target.value)
        else:
            targets.add(id(target))

    attributes: list[cst.Attribute] = []
    setattr_owners: set[str] = set()
    for node in walk(tree):
        kind = type(node)
        if kind is cst.Attribute:
            if type(node.value) is cst.Name:
                attributes.append(node)
        elif kind is cst.AssignTarget or kind is cst.AnnAssign or kind is cst.For:
            mark(node.target)
        elif kind is cst.AsName:
            mark(node.name)
        elif kind is cst.Call and type(node.func) is cst.Name and node.func.value == "setattr" and node.args:
            first = node.args[0].value
            if type(first) is cst.Name:
                setattr_owners.add(first.value)
    reads: dict[str, list[cst.Attribute]] = {}
    written: dict[str, set[str]] = {}
    for node in attributes:  # after the walk: a target is known whatever the order its nodes were met in
        owner = node.value.value
        if id(node) in targets:
            written.setdefault(owner, set()).add(node.attr.value)
        else:
            reads.setdefault(owner, []).append(node)
            if node.attr.value == "__dict__":
                setattr_owners.add(owner)
    uses = _AttributeUses(reads, written, frozenset(setattr_owners))
    if len(_USES) > _USES_LIMIT:
        _USES.clear()
    _USES[id(tree)] = (tree, uses)
    return uses


_USES_LIMIT = 100_000


def _attribute_reads(tree: cst.CSTNode, owner: str) -> list[cst.Attribute]:
    """The ``owner.X`` nodes of ``tree`` that are read (not assigned), in LibCST's visit order."""
    return list(_attribute_uses(tree).reads.get(owner, ()))


def _attributes_written(tree: cst.CSTNode, owner: str) -> set[str] | None:
    """Names assigned as ``owner.X``; None when ``owner`` is also set by name (``setattr``, ``__dict__``)."""
    uses = _attribute_uses(tree)
    if owner in uses.dynamic:
        return None
    return set(uses.written.get(owner, ()))


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.BaseExpression]) -> None:
        super().__init__()
        self.replacements = replacements

    def leave_Attribute(self, original_node, updated_node):
        return self.replacements.get(id(original_node), updated_node)


class _SelfToLegacy(cst.CSTTransformer):
    def leave_Name(self, original_node, updated_node):
        return updated_node.with_changes(value=LEGACY) if updated_node.value == "self" else updated_node


class MemberCheck:
    """Makes the generated class's reads of TTTv1's class body exact, or reports them (see the module doc)."""

    def __init__(self, inputs: Inputs, gaps: list[Gap]) -> None:
        self.inputs = inputs
        self.gaps = gaps
        self.members = members_of(inputs.klass)
        self.carried: set[str] = set()

    def apply(self, module: cst.Module) -> cst.Module:
        klass = _generated_class(module)
        if klass is None:  # pragma: no cover - every rendered module has its class
            return module
        body = list(klass.body.body)
        for index, statement in enumerate(body):
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "from_model_args":
                body[index] = self._construction(statement)
                self._defaults(statement, module)
        self._run_time(body)
        body = self._carry_constants(body)
        new_class = klass.with_changes(body=klass.body.with_changes(body=body))
        return module.with_changes(body=[new_class if s is klass else s for s in module.body])

    # -- construction: legacy.X --------------------------------------------------------------------
    def _construction(self, func: cst.FunctionDef) -> cst.FunctionDef:
        if any(isinstance(small_statement(s), cst.Raise) for s in block_statements(func.body)):
            return func  # TTTv1 refuses this topology in __init__: nothing after the raise runs
        for _ in range(8):  # a property may read another property or a constant: a few rounds
            assigned = _attributes_written(func, LEGACY)
            if assigned is None:
                return func
            replacements: dict[int, cst.BaseExpression] = {}
            for read in _attribute_reads(func, LEGACY):
                name = read.attr.value
                if name in assigned:
                    continue
                new = self._construction_value(name, read)
                if new is not None:
                    replacements[id(read)] = new
            if not replacements:
                return func
            func = func.visit(_Replace(replacements))
        return func  # pragma: no cover - properties that read each other in a cycle

    def _construction_value(self, name: str, read: cst.Attribute) -> cst.BaseExpression | None:
        if name in self.members.constants:
            self.carried.add(name)
            return read.with_changes(value=cst.Name("cls"))
        if name in self.members.properties:
            value = _single_return(self.members.properties[name])
            if value is not None:
                value = value.visit(_SelfToLegacy())
                if not is_atom(value) and not value.lpar:
                    value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                return value
            self._gap(name, "a @property with more than one statement: not evaluated at construction")
            return None
        if name in self.members.methods:
            self._gap(
                name,
                "a method used as a value (stored, passed or put in a dict, not called): the generated module "
                "has no bound method to put there",
            )
            return None
        if name in inherited(self.inputs):
            return None  # a base class's __init__ sets it, and from_model_args runs that as TTTv1 does
        self._gap(
            name,
            f"{self.inputs.class_name}.__init__ does not set it (set by a base class or dynamically?): "
            "not computed at construction",
        )
        return None

    def _defaults(self, func: cst.FunctionDef, module: cst.Module) -> None:
        """TTTv1's constructor defaults (``eps=EPS``) are evaluated where the generated class is defined: a class
        constant is carried; any other name the generated module does not define is reported."""
        defined = _module_level_names(module) | set(dir(builtins))
        params = [*func.params.params, *func.params.kwonly_params]
        for param in params:
            if param.default is None:
                continue
            for name in sorted(names_read(param.default) - defined):
                if name in self.members.constants:
                    self.carried.add(name)
                else:
                    gap = Gap(
                        f"{self.inputs.module.name}:{self.inputs.module.line_of(self.inputs.klass) or 1}",
                        f"{param.name.value}={cst.Module([]).code_for_node(param.default)}",
                        f"a constructor default that reads {name}, which the generated module does not define",
                    )
                    if gap not in self.gaps:
                        self.gaps.append(gap)

    # -- run time: self.X / cls.X in the generated methods -------------------------------------------
    def _run_time(self, body: list[cst.BaseStatement]) -> None:
        defined = {s.name.value for s in body if isinstance(s, cst.FunctionDef)}
        for statement in body:
            small = small_statement(statement)
            if isinstance(small, cst.Assign):
                defined |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
        written = set()
        for statement in body:
            written |= _attributes_written(statement, "self") or set()
        defined |= written | _base_attributes()
        for statement in body:
            if not isinstance(statement, cst.FunctionDef) or statement.name.value == "from_model_args":
                continue
            for owner in ("self", "cls"):
                for read in _attribute_reads(statement, owner):
                    name = read.attr.value
                    if name in defined:
                        continue
                    if name in self.members.constants:
                        self.carried.add(name)
                    elif name in self.members.properties:
                        self._gap(name, "a @property read at run time: the generated class does not have it")
                    elif name in self.members.methods:
                        self._gap(name, "a method used at run time that the generated class does not have")
                    else:
                        self._gap(
                            name,
                            "read at run time, but neither TTTv1's class body nor the generated class "
                            "sets it on the generated module",
                        )
                    defined.add(name)

    def _carry_constants(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """The class constants the generated code reads, in TTTv1's order (with the constants they read)."""
        if not self.carried:
            return body
        needed = set(self.carried)
        changed = True
        while changed:
            changed = False
            for name in list(needed):
                for read in names_read(self.members.constants[name]) - needed:
                    if read in self.members.constants:
                        needed.add(read)
                        changed = True
        statements = []
        for name, value in self.members.constants.items():
            if name not in needed:
                continue
            foreign = names_read(value) - set(self.members.constants) - _LITERAL_NAMES
            if foreign:
                self._gap(
                    name,
                    f"a class constant computed from {', '.join(sorted(foreign))}: not carried into the "
                    "generated class",
                )
                continue
            line = cst.SimpleStatementLine(
                [cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=value)]
            )
            statements.append(line)
        if statements:
            statements[0] = statements[0].with_changes(
                leading_lines=[
                    cst.EmptyLine(
                        comment=cst.Comment(f"# class constants of TTTv1's {self.inputs.class_name}")
                    )
                ]
            )
        at = next((i + 1 for i, s in enumerate(body) if "CONFIG_CLASS" in (_assigned_name(s) or "")), 0)
        return [*body[:at], *statements, *body[at:]]

    def _gap(self, name: str, reason: str) -> None:
        gap = Gap(self._loc(name), f"self.{name}", reason)
        if not any(g.what == gap.what for g in self.gaps):  # one line per attribute (the planner's, if any)
            self.gaps.append(gap)

    def _loc(self, name: str) -> str:
        """The first line of TTTv1's class that reads ``self.NAME`` (or ``cls.NAME``)."""
        parsed = self.inputs.module
        start = parsed.line_of(self.inputs.klass) or 1
        pattern = re.compile(rf"\b(self|cls)\.{re.escape(name)}\b(?!\s*=[^=])")
        lines = parsed.text.splitlines()
        for number in range(start, len(lines) + 1):
            if pattern.search(lines[number - 1]):
                return f"{parsed.name}:{number}"
        return f"{parsed.name}:{start}"


def _assigned_name(statement: cst.BaseStatement) -> str | None:
    small = small_statement(statement)
    if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    return None


def _module_level_names(module: cst.Module) -> set[str]:
    out: set[str] = set()
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            out.add(statement.name.value)
        for node in walk(statement) if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(node, cst.ImportAlias):
                alias = node.asname.name if node.asname is not None else node.name
                out.add(cst.Module([]).code_for_node(alias).split(".")[0])
            elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                out.add(node.target.value)
    return out


def _generated_class(module: cst.Module) -> cst.ClassDef | None:
    for statement in module.body:
        if isinstance(statement, cst.ClassDef) and any(
            isinstance(b.value, cst.Name) and b.value.value == "TTModule" for b in statement.bases
        ):
            return statement
    return None


def _base_attributes() -> set[str]:
    """What every generated class has from ``TTModule`` (methods, and what ``_setup`` sets)."""
    from tttv2.modules._module import TTModule

    return set(dir(TTModule)) | {"config", "hw_config"}


__all__ = ["MemberCheck", "Members", "members_of"]
