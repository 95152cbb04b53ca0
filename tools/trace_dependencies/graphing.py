"""Turning the engine's typed records into an :class:`Analysis` (pure data): definitions with "last assignment
wins", branches with their classification, proof chains, spans and fact trees, reads, ops, the call graph, roots,
levels and the four paths. Nothing of the engine (no AST, no cache) is kept."""

from __future__ import annotations

import ast

from .decision import as_lists
from .engine import Engine
from .facts import DataView, Proofs, bits_to_kinds, classify_bits, compute_bits, root_bits
from .graph import Graph
from .ids import NodeKind, parse_node
from .model import Analysis
from .query import all_paths
from .records import CATEGORY_LEVEL, LEVELS, Branch, CallLink, ConfigRead, Definition, Guard, OpCall, Span
from .serial import node_attrs
from .sites import fact_sites
from .source import SourceFile


def guard_text(engine: Engine, bid: str, arm: str) -> Guard:
    entry = engine.out.branch_index.get(bid)
    if entry is None:
        return Guard(bid, arm, bid.replace("call:", "when ") + "() runs" if bid.startswith("call:") else bid)
    site, _info = entry
    return Guard(bid, arm, _info.file.segment(site.test_node, 90))


def guard_strings(engine: Engine, guards) -> list[str]:
    return [f"{bid}#{arm}" for bid, arm in guards]


#: Arms of one branch that can both hold: an arm and the guard after the other arm that left, or the guards after
#: both arms (the branch was not reached).
_COMPATIBLE = ({"else", "unless-then"}, {"then", "unless-else"}, {"unless-then", "unless-else"})


def exclusive(arm: str, other: str) -> bool:
    """Whether two guards on the same branch can never hold together."""
    return arm != other and {arm, other} not in _COMPATIBLE


def _shadowing(defs: list[Definition], raw) -> None:
    """Last assignment wins: a later definition that always runs when an earlier one ran replaces it. A
    ``setdefault()`` replaces nothing; it never takes effect when an earlier definition always ran before it (and
    no ``del`` of the key, a definition of kind "deleted", always ran in between)."""
    for i, (d_i, s_i) in enumerate(zip(defs, raw)):
        gi = set(s_i.guards)
        arms_i = dict(s_i.guards)
        extras: list[str] = []
        if s_i.only_if_absent:
            d_i.only_if_absent = True
            earlier = [
                (d, s)
                for d, s in zip(defs[:i], raw[:i])
                if not any(exclusive(dict(s.guards).get(b, a), a) for b, a in s_i.guards)
            ]
            removed = [
                k for k, (_d, s) in enumerate(earlier) if s.value_kind == "deleted" and set(s.guards) <= gi
            ]
            earlier = [
                (d, s) for d, s in earlier[removed[-1] + 1 if removed else 0 :] if s.value_kind != "deleted"
            ]
            always = [d.id for d, s in earlier if set(s.guards) <= gi]
            if always:
                d_i.shadowed_by.extend(always)
                continue
            extras = [
                " and ".join(g.describe() for g in d.guards if (g.branch, g.arm) not in gi)
                for d, _ in earlier
            ]
        for d_j, s_j in zip(defs[i + 1 :], raw[i + 1 :]):
            if s_j.order <= s_i.order or (s_j.only_if_absent and s_i.value_kind != "deleted"):
                continue  # a setdefault() overwrites nothing, except the absence a del left
            gj = set(s_j.guards)
            if any(bid in arms_i and exclusive(arms_i[bid], arm) for bid, arm in s_j.guards):
                continue  # mutually exclusive arms: the later one never overwrites this one
            if gj <= gi:
                d_i.shadowed_by.append(d_j.id)
            else:
                missing = [g for g in d_j.guards if (g.branch, g.arm) not in gi]
                extras.append(" and ".join(g.describe() for g in missing))
        if not d_i.shadowed_by and extras:
            d_i.live_when = " and ".join(f"not ({e})" for e in dict.fromkeys(extras))


def _definition(engine: Engine, site, g: Graph) -> Definition:
    guards = [guard_text(engine, bid, arm) for bid, arm in site.guards]
    params: list[str] = []
    value_kind = site.value_kind
    if isinstance(site.value, ast.Lambda):
        params = [a.arg for a in site.value.args.args]
    elif isinstance(site.value, ast.Name) and site.value.id in site.func.nested:
        params = [a.arg for a in site.func.nested[site.value.id].args.args]
        value_kind = "function"
    nid = site.id
    deps = sorted(g.predecessors(nid)) if nid in g else []
    facts = []
    for bid, arm in site.guards:
        entry = engine.out.branch_index.get(bid)
        if entry is not None and arm in ("then", "else"):
            for fact, pol in engine.facts_of(*entry):
                pol = pol if arm == "then" else -pol
                facts.append(fact if pol > 0 else f"not {fact}")
    segment = site.func.file.segment
    value = segment(site.value, 160) if site.value is not None else (segment(site.source, 160) or "…")
    if value_kind == "deleted":
        value = f'del model_config["{site.name}"]'
    if site.env:
        value += "   # " + ", ".join(f"{k}={v!r}" for k, v in site.env.items())
    return Definition(
        id=nid,
        name=site.name,
        kind=site.kind,
        loc=site.loc,
        end_line=site.end_line,
        function=site.func.qualname,
        value=value,
        value_kind=value_kind,
        params=params,
        guards=guards,
        order=site.order,
        deps=deps,
        facts=sorted(set(facts)),
    )


def span_of(file: SourceFile, node: ast.AST) -> Span | None:
    """The node's start and end as lines and CHARACTER columns."""
    line, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if line is None or end is None:
        return None
    return Span(line, file.char_col(line, node.col_offset), end, file.char_col(end, node.end_col_offset))


def build(engine: Engine, seconds: float = 0.0) -> Analysis:
    out = engine.out
    g = out.g
    h = DataView(g)
    bits = compute_bits(g, h)
    own = {n: root_bits(g, n, h.in_degree(n)) for n in g.nodes}
    for node, b in bits.items():
        g.nodes[node]["kinds"] = bits_to_kinds(b)
        g.nodes[node]["level"] = CATEGORY_LEVEL.get(g.nodes[node]["category"], "derived")
        if own[node]:
            g.nodes[node]["root"] = True

    # -- reads ------------------------------------------------------------------------------------
    reads = [
        ConfigRead(
            name=r.name,
            kind=r.kind,
            via=r.via,
            loc=r.loc,
            function=r.function,
            node=r.node,
            resolved=bool(g.nodes[r.node].get("resolved", False)),
            in_condition=r.in_condition,
            default=r.default,
            called_with=r.called_with,
            guards=guard_strings(engine, r.guards),
            phase=r.phase,
            note=r.note,
            function_id=r.func,
        )
        for r in out.reads
    ]
    reads.sort(key=lambda r: (*_loc_key(r.loc), r.name))

    # -- definitions ------------------------------------------------------------------------------
    definitions: dict[str, list[Definition]] = {}
    attr_definitions: dict[str, list[Definition]] = {}
    for node, data in g.nodes(data=True):
        ref = parse_node(node)
        if data["category"] == "key":
            raw = sorted(out.key_defs.get(ref.rest, []), key=lambda s: s.order)
            defs = [_definition(engine, s, g) for s in raw]
            _shadowing(defs, raw)
            definitions[ref.rest] = defs
        elif data["category"] == "attr":
            raw = sorted(out.attr_defs.get(ref.rest, []), key=lambda s: s.order)
            defs = [_definition(engine, s, g) for s in raw]
            for d in defs:
                d.id = f"{NodeKind.ATTR_DEF.value}:{d.loc}:{ref.rest}"
            _shadowing(defs, raw)
            attr_definitions[ref.rest] = defs

    # -- branches ---------------------------------------------------------------------------------
    branches: list[Branch] = []
    proofs = Proofs(g, h, own)
    for node, data in g.nodes(data=True):
        if data["category"] != "branch":
            continue
        bid = parse_node(node).rest
        site, info = out.branch_index[bid]
        side = out.module_branches.get(bid, "config")
        phases = out.branch_phase.get(bid, set())
        phase = "forward" if "forward" in phases else "construction" if phases else "config"
        classification, factors = classify_bits(bits[node])
        topo, mode, other = [], [], []
        for fact, pol in engine.facts_of(site, info):
            text = fact if pol > 0 else f"not {fact}"
            if fact.startswith("mode:"):
                mode.append(text.replace("mode:", ""))
            elif fact in ("galaxy", "mesh_1d", "single_device"):
                topo.append(text)
            else:
                other.append(text)
        stmt = site.node
        test = site.test_node if site.construct != "match" else site.deciders[0]
        branches.append(
            Branch(
                id=bid,
                loc=bid.removesuffix(":boolop"),
                stmt_loc=info.file.loc(stmt),
                construct=site.construct,
                test=info.file.segment(test, 120),
                function=info.qualname,
                side=side,
                phase=phase,
                classification=classification,
                factors=factors,
                topology=sorted(set(topo)),
                mode=sorted(set(mode)),
                facts=sorted(set(other)),
                chain=proofs.chains(node, factors) if side != "config" else {},
                parent=site.parent,
                guards=guard_strings(engine, site.guards),
                function_id=info.id,
                span=span_of(info.file, stmt),
                test_span=span_of(info.file, test),
                decision=as_lists(engine.branch_tree(bid)),
            )
        )
    branches.sort(key=lambda b: (_side_rank(b.side), *_loc_key(b.loc), b.construct == "boolop"))

    # -- ops and the call graph ---------------------------------------------------------------------
    ops = [
        OpCall(
            op=o.op,
            loc=o.loc,
            function=o.function,
            spelled=o.spelled,
            phase=o.phase,
            guards=guard_strings(engine, o.guards),
            via=list(o.via),
            function_id=o.func,
        )
        for o in out.ops
    ]
    ops.sort(key=lambda o: _loc_key(o.loc))
    unique = {}
    for c in out.call_edges:
        link = CallLink(c.caller, c.callee, guard_strings(engine, c.guards), c.loc, as_lists(c.args))
        unique.setdefault((c.caller, c.callee, tuple(link.guards), c.loc), link)
    calls = [unique[k] for k in sorted(unique, key=lambda c: (c[0], c[1], _loc_key(c[3]), c[2]))]
    construction_ops = sorted({o.op for o in ops if o.phase == "construction"})

    # -- roots and levels -------------------------------------------------------------------------
    roots: dict[str, list[str]] = {}
    for node in g.nodes:
        if own[node]:
            category = "mode" if g.nodes[node].get("mode_param") else g.nodes[node]["category"]
            roots.setdefault(category, []).append(node)
    roots = {k: sorted(v) for k, v in sorted(roots.items())}
    levels: dict[str, list[str]] = {level: [] for level in LEVELS}
    for node, data in g.nodes(data=True):
        levels[data["level"]].append(node)
    levels = {k: sorted(v) for k, v in levels.items()}

    files = sorted(s.name for s in engine.st.project.files.values())
    stats = dict(
        files=len(files),
        lines=sum(s.lines for s in engine.st.project.files.values()),
        nodes=g.number_of_nodes(),
        edges=g.number_of_edges(),
        keys_read=len({r.name for r in reads if r.kind == "key"}),
        branches_module=sum(1 for b in branches if b.side == "module"),
        branches_helper=sum(1 for b in branches if b.side == "helper"),
        unknown=sum(1 for n in g.nodes if g.nodes[n]["category"] == "unknown"),
    )
    analysis = Analysis(
        module=engine.st.module.name,
        config=engine.st.config.name if engine.st.config else None,
        module_class=engine.st.consumer.name,
        class_choice=engine.st.class_choice,
        config_class=engine.st.config_class.name if engine.st.config_class else None,
        files=files,
        dependencies=_public_graph(g),
        reads=reads,
        definitions=dict(sorted(definitions.items())),
        attr_definitions=dict(sorted(attr_definitions.items())),
        branches=branches,
        ops=ops,
        paths={},
        construction_ops=construction_ops,
        roots=roots,
        levels=levels,
        skipped=sorted(out.skipped, key=lambda s: (_loc_key(s.loc), s.what)),
        stats=stats,
        calls=calls,
        entries=list(out.entry_ids),
        entry=engine.st.entry,
        seconds=seconds,
        sources={s.name: s.path for s in engine.st.project.files.values()},
        fact_sites=fact_sites(engine),
    )
    analysis.paths = all_paths(analysis)
    return analysis


def _public_graph(g: Graph) -> Graph:
    """The graph with only the attributes an analysis publishes (the engine's bookkeeping is dropped, in place:
    the engine is done with it), so a saved and loaded analysis has the same graph. Edges carry only
    ``kind`` and ``loc`` already."""
    for node, data in list(g.nodes.items()):
        g.set_node_attrs(node, node_attrs(data))
    return g


def _side_rank(side: str) -> int:
    return {"module": 0, "helper": 1, "config": 2}.get(side, 3)


def _loc_key(loc: str) -> tuple:
    try:
        file, line, col = loc.rsplit(":", 2)
        return (file, int(line), int(col))
    except ValueError:
        return (loc, 0, 0)


__all__ = ["build", "span_of"]
