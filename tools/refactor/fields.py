"""Naming the hoisted expressions and rewriting code into its construction form.

Fields computed the same way in both modes share one name; otherwise each mode gets its own, prefixed
``decode_`` / ``prefill_``. "The same way" compares the expression together with the construction code it
depends on, so two ``down_dtype`` locals computed differently never merge.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from dataclasses import dataclass, field

import libcst as cst

from tttv2_tools.trace_dependencies.constants import TTNN_NON_OPS

from .cstutil import assigned_names, code, names_read, small_statement
from .hoist import PLACEHOLDER, Registry
from .naming import expression_name
from .track import TrackingTransformer
from .walk import hot_paths

_PLACEHOLDER_RE = re.compile(r"^__field_(\d+)__$")


@dataclass
class Field:
    name: str
    value: cst.BaseExpression  # construction form (``legacy`` instead of ``self``)
    params: tuple[str, ...]
    source: str  # TTTv1 text
    locs: list[str]
    modes: list[str]
    home: tuple[str, str]  # (mode, group) whose construction code computes it
    kind: str = "value"  # "value" | "callable" | "device"
    defined_at: str | None = None  # where TTTv1 defines the config value it reads
    # the paths that use it, each a conjunction of (construction-form test, polarity); the field is None on others
    guards: tuple[tuple[tuple[cst.BaseExpression, bool], ...], ...] = ()


@dataclass
class FieldTable:
    fields: list[Field] = field(default_factory=list)
    by_key: dict[int, str] = field(default_factory=dict)

    def names(self) -> set[str]:
        return {f.name for f in self.fields}


# ------------------------------------------------------------------------------------------ construction form
class ToConstruction(cst.CSTTransformer):
    """Code of a TTTv1 method rewritten to run inside ``from_model_args``: ``self`` is the namespace of
    TTTv1's attributes, ``self.__class__.__name__`` the TTTv1 class name, calls of construction methods call
    the nested functions of the same name, ``super().__init__()`` disappears, or, with ``base_init`` (a base
    class sets attributes the generated code reads: ``bases.py``), runs the base's ``__init__`` on the namespace
    as TTTv1 does: ``super(TtNorm, legacy).__init__(…)``."""

    def __init__(
        self,
        class_name: str,
        legacy: str = "legacy",
        methods: set[str] | None = None,
        lazy: bool = False,
        base_init: bool = False,
    ) -> None:
        super().__init__()
        self.base_init = base_init
        self.class_name = class_name
        self.legacy = legacy
        self.methods = methods or set()
        self.lazy = lazy

    hot: set[int] | None = None  # ids of the nodes worth entering (see walk.hot_paths); None: all

    def on_visit(self, node) -> bool:
        return (self.hot is None or id(node) in self.hot) and super().on_visit(node)

    def may_change(self, node) -> bool:
        """Whether a leave hook below may change ``node`` (a superset)."""
        kind = type(node)
        if kind is cst.Attribute:
            value = node.value
            return node.attr.value == "__name__" or (
                type(value) is cst.Name and value.value == self.legacy and node.attr.value in self.methods
            )
        if kind is cst.Name:
            return node.value == "self"
        return kind is cst.SimpleStatementLine or (self.lazy and kind is cst.Call)

    def leave_Call(self, original_node, updated_node):
        """With ``lazy``, TTTv1's uploads (``ttnn.as_tensor`` / ``ttnn.from_torch``) become LazyWeights."""
        from .cstutil import dotted

        path = dotted(updated_node.func) or ""
        if self.lazy and path in UPLOADS:
            return updated_node.with_changes(func=cst.Name("_lazy_weight"))
        last = path.rsplit(".", 1)[-1]
        if self.lazy and path.startswith("ttnn.") and last.islower() and last not in TTNN_NON_OPS:
            # a device op at construction (e.g. reshaping an uploaded bias) needs the tensor itself, not its LazyWeight
            args = [
                a.with_changes(value=cst.Call(func=cst.Name("_on_device"), args=[cst.Arg(a.value)]))
                if isinstance(a.value, (cst.Name, cst.Attribute)) and not _is_ttnn(a.value)
                else a
                for a in updated_node.args
            ]
            return updated_node.with_changes(args=args)
        return updated_node

    def leave_Attribute(self, original_node, updated_node):
        value = updated_node.value
        if updated_node.attr.value == "__name__":
            inner = value
            if (
                isinstance(inner, cst.Attribute)
                and inner.attr.value == "__class__"
                and isinstance(inner.value, cst.Name)
                and inner.value.value in ("self", self.legacy)
            ):
                return cst.SimpleString(f'"{self.class_name}"')
            if (
                isinstance(inner, cst.Call)
                and isinstance(inner.func, cst.Name)
                and inner.func.value == "type"
            ):
                return cst.SimpleString(f'"{self.class_name}"')
        if (
            isinstance(value, cst.Name)
            and value.value in ("self", self.legacy)
            and updated_node.attr.value in self.methods
        ):
            return cst.Name(updated_node.attr.value)
        return updated_node

    def leave_Name(self, original_node, updated_node):
        if updated_node.value == "self":
            return updated_node.with_changes(value=self.legacy)
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        small = small_statement(updated_node)
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if self.lazy and isinstance(func, cst.Attribute) and func.attr.value == "deallocate":
                # a weight built at construction is a LazyWeight, on no device yet: nothing to free
                return updated_node.with_changes(body=[cst.Pass()])
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "__init__"
                and isinstance(func.value, cst.Call)
                and isinstance(func.value.func, cst.Name)
                and func.value.func.value == "super"
            ):
                if not self.base_init:
                    return cst.RemoveFromParent()
                explicit = func.value.with_changes(
                    args=[cst.Arg(cst.Name(self.class_name)), cst.Arg(cst.Name(self.legacy))]
                )
                call = small.value.with_changes(func=func.with_changes(value=explicit))
                return updated_node.with_changes(body=[small.with_changes(value=call)])
        return updated_node


UPLOADS = ("ttnn.as_tensor", "ttnn.from_torch")


def _is_ttnn(node: cst.BaseExpression) -> bool:
    from .cstutil import dotted

    path = dotted(node) or ""
    return path == "ttnn" or path.startswith("ttnn.")


def to_construction(
    node, class_name: str, methods: set[str] | None = None, lazy: bool = False, base_init: bool = False
):
    rewriter = ToConstruction(class_name, methods=methods, lazy=lazy, base_init=base_init)
    rewriter.hot = hot_paths(node, rewriter.may_change)  # the rest keeps its identity (and memoised text)
    return node.visit(rewriter)


# ------------------------------------------------------------------------------------------ naming
def _sanitize(name: str) -> str:
    name = re.sub(r"\W", "_", unicodedata.normalize("NFKC", name)).strip("_").lower() or "value"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "value_" + name
    return name


def _depends(value: cst.CSTNode, statements: list[cst.BaseStatement]) -> list[str]:
    """Texts of the construction statements ``value`` depends on, transitively (its fingerprint)."""
    needed = names_read(value)
    out: list[str] = []
    for statement in reversed(statements):
        small = small_statement(statement)
        names = assigned_names(small) if small is not None else None
        written = set(names or [])
        if isinstance(statement, cst.If):
            written = _written_in(statement)
        if written & needed:
            out.append(code(statement))
            needed |= names_read(statement)
    return out


def _written_in(statement: cst.CSTNode) -> set[str]:
    from .cstutil import names_written

    return names_written(statement)


def name_fields(
    registry: Registry,
    constructions: dict[tuple[str, str], list[cst.BaseStatement]],
    class_name: str,
    reserved: set[str],
    defined_at,
    split_by_mode: bool = False,
) -> FieldTable:
    table = FieldTable()
    groups: dict[str, list] = {}
    prints: dict[int, tuple] = {}
    conjunctions: dict[tuple, set[tuple]] = {}
    tests: dict[str, cst.BaseExpression] = {}
    converted = {key: [to_construction(s, class_name) for s in body] for key, body in constructions.items()}
    converted_tests: dict[int, tuple[cst.BaseExpression, cst.BaseExpression]] = {}
    for use in registry.uses:
        value = to_construction(use.value, class_name)
        statements = converted.get((use.mode, use.group), [])
        guards = _guards(use.guards, class_name, converted_tests) if not use.params else ()
        deps = _depends(cst.Tuple([cst.Element(value), *(cst.Element(t) for t, _ in guards)]), statements)
        # the same text computed by different functions' code is only the same value if nothing it reads is local
        fingerprint = (code(value), use.params, tuple(deps), use.group if deps else "")
        if split_by_mode:  # the config is one dict per mode: the same text is one value per mode
            fingerprint = (*fingerprint, use.mode)
        prints[use.key] = fingerprint
        conjunction = tuple((code(t), p) for t, p in guards)
        tests.update({code(t): t for t, _ in guards})
        conjunctions.setdefault(fingerprint, set()).add(conjunction)
        groups.setdefault(_sanitize(use.base), []).append(use)
    taken = set(reserved)
    for base, uses in _borrowed_names_yield(groups, prints, taken).items():
        distinct = list(dict.fromkeys(prints[u.key] for u in uses))
        prefix = _per_mode(uses, prints)
        counter: dict[str, int] = {}
        for fingerprint in distinct:
            owners = [u for u in uses if prints[u.key] == fingerprint]
            modes = sorted({u.mode for u in owners}, key=("decode", "prefill", "forward").index)
            name = f"{modes[0]}_{base}" if prefix else base
            if len(distinct) > 1 and not prefix:
                counter[name] = counter.get(name, 0) + 1
                if counter[name] > 1:
                    name = f"{name}_{counter[name]}"
            name = _unique(name, taken)
            first = owners[0]
            reduced = reduce_conjunctions(conjunctions[fingerprint])
            f = Field(
                name=name,
                value=to_construction(first.value, class_name),
                params=first.params,
                source=first.source,
                locs=sorted({u.loc for u in owners}, key=_loc_order),
                modes=modes,
                home=(first.mode, first.group),
                kind="callable" if first.params else "value",
                defined_at=defined_at(first.value),
                guards=tuple(tuple((tests[t], p) for t, p in c) for c in reduced),
            )
            table.fields.append(f)
            for owner in owners:
                table.by_key[owner.key] = name
    table.fields.sort(key=lambda f: min(u.key for u in registry.uses if table.by_key.get(u.key) == f.name))
    return table


def _per_mode(uses: list, prints: dict[int, tuple]) -> bool:
    """Whether the values wanting one name are one per mode (``decode_scale`` / ``prefill_scale``)."""
    distinct = set(prints[u.key] for u in uses)
    per_mode: dict[str, set] = {}
    for use in uses:
        per_mode.setdefault(use.mode, set()).add(prints[use.key])
    return len(distinct) > 1 and all(len(v) == 1 for v in per_mode.values()) and len(per_mode) > 1


def _borrowed_names_yield(groups: dict[str, list], prints: dict[int, tuple], reserved: set[str]) -> dict:
    """The collision rule. A name wanted by several values, or a reserved one, stays with the value that is
    that name (a config read, an attribute) or, when all of them borrowed it from their context (the local
    or keyword they are given to), with the first in use order; the others that borrowed it take the name of
    their own expression (``big = … if u == "a" …`` next to ``model_config["BIG"]``: ``u_is_a``). Values
    still sharing a name are told apart by mode (``decode_`` / ``prefill_``) or by ``_2``, ``_3`` in use
    order."""
    out: dict[str, list] = {}
    moved: list[tuple[str, object]] = []
    for base, uses in groups.items():
        distinct = list(dict.fromkeys(prints[u.key] for u in uses))
        borrowed = {fp for fp in distinct if all(u.borrowed for u in uses if prints[u.key] == fp)}
        if base in reserved:
            keeper = None
        elif _per_mode(uses, prints):
            keeper, borrowed = distinct[0], set()  # told apart by mode: decode_ / prefill_
        elif len(distinct) > 1:
            keeper = next((fp for fp in distinct if fp not in borrowed), distinct[0])
        else:
            keeper = distinct[0]
        for use in uses:
            fingerprint = prints[use.key]
            if fingerprint != keeper and fingerprint in borrowed:
                own = _sanitize(expression_name(use.value))
                if own != base:
                    moved.append((own, use))
                    continue
            out.setdefault(base, []).append(use)
    for own, use in moved:
        out.setdefault(own, []).append(use)
    return out


def reduce_conjunctions(conjunctions: set[tuple]) -> list[tuple]:
    """The paths a field is used on, as conjunctions of (test, polarity), simplified: ``A and B`` with
    ``A and not B`` is ``A``; any unconditional use makes the field unconditional (an empty list)."""
    current = set(conjunctions)
    changed = True
    while changed:
        if () in current:
            return []
        changed = False
        items = sorted(current)
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                merged = _merge(a, b)
                if merged is not None:
                    current -= {a, b}
                    current.add(merged)
                    changed = True
                    break
            if changed:
                break
    return sorted(current)


def _merge(a: tuple, b: tuple) -> tuple | None:
    if len(a) != len(b):
        return None
    differing = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(differing) != 1:
        return None
    i = differing[0]
    if a[i][0] != b[i][0]:
        return None
    return a[:i] + a[i + 1 :]


def _guards(guards, class_name: str, converted: dict) -> tuple[tuple[cst.BaseExpression, bool], ...]:
    """The guard tests as construction code; ``converted`` keeps each test's conversion (many fields share
    their guards)."""
    out = []
    for test, polarity in guards:
        hit = converted.get(id(test))
        if hit is None or hit[0] is not test:
            hit = converted[id(test)] = (test, to_construction(test, class_name))
        out.append((hit[1], polarity))
    return tuple(out)


def _loc_order(loc: str) -> tuple:
    file, _, line = loc.rpartition(":")
    return (file, int(line) if line.isdigit() else 0)


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


class RenamePlaceholders(TrackingTransformer):
    def __init__(self, table: FieldTable, prov=None) -> None:
        super().__init__(prov)
        self.table = table

    def leave_Attribute(self, original_node, updated_node):
        match = _PLACEHOLDER_RE.match(updated_node.attr.value)
        if match:
            return updated_node.with_changes(attr=cst.Name(self.table.by_key[int(match.group(1))]))
        return updated_node


def rename(node, table: FieldTable, prov=None):
    renamer = RenamePlaceholders(table, prov)
    renamer.hot = hot_paths(
        node, lambda n: type(n) is cst.Attribute and _PLACEHOLDER_RE.match(n.attr.value) is not None
    )
    return node.visit(renamer)


__all__ = ["PLACEHOLDER", "Field", "FieldTable", "name_fields", "rename", "to_construction"]
