"""Module state: an attribute of the analysed object that the per-call entry (or a function it calls) assigns
changes from one call to the next (``if not self.warm: ...; self.warm = True``), so a test on it is decided at run
time, whatever values it is assigned. Each such attribute gets a per-call root ``input:state:...`` naming the write,
which the classification and its proof then show. A module global that a function declares ``global`` and may
rebind (``def set_fast(v): global FAST; FAST = v``) is the same: its root is ``input:global:file:NAME``."""

from __future__ import annotations

from .ids import NodeKind, is_kind, node_id


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
            loc = f"{source.name}:{line}:0"
            root = engine.node(
                node_id(NodeKind.INPUT, f"global:{source.name}:{name}"),
                "input",
                f"{name} (module state: {function}() rebinds the global)",
                loc,
            )
            engine.edge(root, nid, "data", loc)
    for nid in [n for n in g.nodes if is_kind(n, NodeKind.SELF)]:
        payload = engine.work.payload.get(nid)
        if payload is None:
            continue
        _, cls, name = payload
        for info, site in engine.self_sites(cls, name):
            if "forward" not in engine.out.scanned.get(info.id, ()):
                continue
            loc = f"{info.file.name}:{site.line}:{site.col}"
            root = engine.node(
                node_id(NodeKind.INPUT, f"state:{cls.file.name}:{cls.name}.{name}"),
                "input",
                f"self.{name} (module state: {info.qualname} assigns it per call)",
                loc,
            )
            engine.edge(root, nid, "data", loc)
            break
