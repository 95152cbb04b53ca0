"""Module state: an attribute of the analysed object that the per-call entry (or a function it calls) assigns
changes from one call to the next (``if not self.warm: ...; self.warm = True``), so a test on it is decided at run
time, whatever values it is assigned. Each such attribute gets a per-call root ``input:state:...`` naming the write,
which the classification and its proof then show. A module global that a function declares ``global`` and may
rebind (``def set_fast(v): global FAST; FAST = v``) is the same: its root is ``input:global:file:NAME``."""

from __future__ import annotations

import ast

from .ids import NodeKind, RoleKind, Scope, is_kind, node_id
from .scan import loc_of


def mark_module_state(engine) -> None:
    """Give every ``self.X`` node that a forward-phase function assigns the per-call root of that write, and every
    module global that a function rebinds (``global X``) a per-call root too."""
    g = engine.out.g
    for nid in [n for n in g.nodes if is_kind(n, NodeKind.GLOBAL)]:
        payload = engine.work.payload.get(nid)
        if payload is None:
            continue
        _, source, name = payload
        rebound = engine.index(source).rebound_globals().get(name)
        if rebound is not None:
            function, line = rebound
            where = f"{source.name}:{line}:0"
            _root(
                engine,
                nid,
                f"global:{source.name}:{name}",
                f"{name} (module state: {function}() rebinds the global)",
                where,
            )
    mutated: dict[tuple[str, str, str], tuple[str, str]] | None = None
    for nid in [n for n in g.nodes if is_kind(n, NodeKind.SELF)]:
        payload = engine.work.payload.get(nid)
        if payload is None:
            continue
        _, cls, name = payload
        write = None
        for info, site in engine.self_sites(cls, name):
            if "forward" in engine.out.scanned.get(info.id, ()):
                write = (f"{info.file.name}:{site.line}:{site.col}", f"{info.qualname} assigns it per call")
                break
        if write is None:
            if mutated is None:
                mutated = _mutated_attributes(engine)
            write = mutated.get((cls.file.name, cls.name, name))
        if write is not None:
            loc, how = write
            _root(
                engine,
                nid,
                f"state:{cls.file.name}:{cls.name}.{name}",
                f"self.{name} (module state: {how})",
                loc,
            )


def _root(engine, nid: str, what: str, label: str, loc: str) -> None:
    """The per-call root ``input:<what>`` of the state node ``nid``, located at the write."""
    root = engine.node(node_id(NodeKind.INPUT, what), "input", label, loc)
    engine.edge(root, nid, "data", loc)


# Methods that change a list / dict / set in place.
_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
    }
    | {"sort", "reverse"}
)


def _mutated_attributes(engine) -> dict[tuple[str, str, str], tuple[str, str]]:
    """``(file, class, attr) -> (loc, how)`` for each ``self`` attribute a forward-phase function changes in place:
    ``self.d[k] = v``, ``self.d[k] += v``, ``self.d.update(...)`` / ``.append(...)``, also through a local alias
    (``opts = self.d; opts[k] = v``). The object stays the same, so ``self.d = ...`` never shows it."""
    out: dict[tuple[str, str, str], tuple[str, str]] = {}
    for fid in sorted(engine.out.scanned):
        if "forward" not in engine.out.scanned[fid]:
            continue
        info = engine.out.funcs.get(fid)
        if info is None or info.file is engine.st.config:
            continue
        changed = [(s.target.value, s.target, "[...] =") for s in info.sub_assigns]
        for call in info.calls:
            func = call.node.func
            if type(func) is ast.Attribute and func.attr in _MUTATORS:
                changed.append((func.value, call.node, f".{func.attr}()"))
        for base, at, how in changed:
            for cls, attr in _self_attributes(engine, base, info):
                loc = loc_of(info.file, at)
                out.setdefault(
                    (cls.file.name, cls.name, attr), (loc, f"{info.qualname} changes it in place: {how}")
                )
    return out


def _self_attributes(engine, base: ast.expr, info) -> list:
    """The ``(class, attr)`` of ``self`` that ``base`` is (``self.d``, ``self.d[k]``) or aliases (a local once
    assigned ``self.d``)."""
    while type(base) is ast.Subscript:
        base = base.value
    values: list[tuple[ast.expr, object]] = []
    if type(base) is ast.Attribute:
        values.append((base, info))
    elif type(base) is ast.Name:
        kind, owner = engine.lookup(base.id, info)
        if kind is Scope.LOCAL:
            values.extend((site.value, owner) for site in owner.assigns[base.id] if site.value is not None)
    out = []
    for value, where in values:
        while type(value) is ast.Subscript:
            value = value.value
        if type(value) is ast.Attribute:
            role = engine.role(value.value, where)
            if role is not None and role.kind is RoleKind.SELF:
                out.append((role.cls, value.attr))
    return out
