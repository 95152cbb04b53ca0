"""Turning the engine's graph into an :class:`Analysis`: classification with proof chains, roots, levels,
terminal ops per path, restricted views and --why paths."""

from __future__ import annotations

import ast
import copy
from collections import deque
from dataclasses import replace

import networkx as nx

from .engine import Engine
from .model import (
    CATEGORY_LEVEL,
    KIND_BIT,
    KIND_ORDER,
    LEVELS,
    MODE,
    ROOT_KIND,
    RUNTIME,
    STATIC,
    UNKNOWN,
    Analysis,
    Branch,
    ConfigRead,
    Definition,
    Guard,
    Hop,
    OpCall,
)
from .sites import fact_sites

_CHAIN_SKIP = ("fact",)
_BFS_LIMIT = 20000
PATHS = {
    "decode/galaxy": ("decode", True),
    "decode/non-galaxy": ("decode", False),
    "prefill/galaxy": ("prefill", True),
    "prefill/non-galaxy": ("prefill", False),
}


def _bits_to_kinds(bits: int) -> list[str]:
    return [k for k in (*KIND_ORDER, UNKNOWN) if bits & KIND_BIT[k]]


def classify_bits(bits: int) -> tuple[str, list[str]]:
    factors = _bits_to_kinds(bits)
    known = [k for k in factors if k != UNKNOWN]
    if known:
        return known[-1], factors
    if factors:
        return UNKNOWN, factors
    return STATIC, []


def root_bits(g: nx.DiGraph, node: str, indeg: int) -> int:
    data = g.nodes[node]
    category = data.get("category")
    if data.get("mode_param") and indeg == 0:
        return KIND_BIT[MODE]  # a mode parameter given constants ("decode") at its call sites
    if category in ROOT_KIND and indeg == 0:
        return KIND_BIT[ROOT_KIND[category]]
    if category == "param" and indeg == 0 and not data.get("bound"):
        label = data.get("label", "")
        return KIND_BIT[MODE] if label.startswith("mode ") else KIND_BIT[UNKNOWN]
    return 0


class DataView:
    """Predecessors of each node without 'nest' edges (a branch's kind comes from its own test, not from the
    branches around it). Built once from networkx's adjacency dicts."""

    def __init__(self, g: nx.DiGraph):
        self.preds: dict[str, list[str]] = {
            n: [p for p, d in g._pred[n].items() if d.get("kind") != "nest"] for n in g.nodes
        }

    def predecessors(self, node: str) -> list[str]:
        return self.preds[node]

    def in_degree(self, node: str) -> int:
        return len(self.preds[node])


def compute_bits(g: nx.DiGraph, h: DataView) -> dict[str, int]:
    """Root kinds reaching each node (bit set), and each node's depth, by Kahn's order plus a fixpoint for the
    rare cycles."""
    preds = h.preds
    succs: dict[str, list[str]] = {n: [] for n in preds}
    indeg = {}
    for n, ps in preds.items():
        indeg[n] = len(ps)
        for p in ps:
            succs[p].append(n)
    bits = {n: root_bits(g, n, len(ps)) for n, ps in preds.items()}
    depth = dict.fromkeys(preds, 0)
    order = [n for n in sorted(preds) if indeg[n] == 0]
    remaining = dict(indeg)
    i = 0
    while i < len(order):
        n = order[i]
        i += 1
        for s in succs[n]:
            remaining[s] -= 1
            if remaining[s] == 0:
                order.append(s)
    seen = set(order)
    order += [n for n in sorted(preds) if n not in seen]  # nodes on cycles
    changed = True
    while changed:
        changed = False
        for n in order:
            b, d = bits[n], depth[n]
            for p in preds[n]:
                b |= bits[p]
                if p in seen and depth[p] + 1 > d:
                    d = depth[p] + 1
            if b != bits[n] or d != depth[n]:
                bits[n], depth[n] = b, d
                changed = changed or n not in seen
    for n in preds:
        g.nodes[n]["depth"] = depth[n]
    return bits


def _pred_key(node: str) -> tuple[bool, str]:
    """Prefer informative roots in proofs: the device object / its presence come last."""
    return (node in ("hw:device_present", "hw:mesh_device"), node)


def hop(g: nx.DiGraph, node: str) -> Hop:
    data = g.nodes[node]
    return Hop(node, data.get("label", node), data.get("loc"))


class Proofs:
    """For each kind, a shortest path from the nearest root of that kind to every node (one multi-source BFS per
    kind over the data edges), so a branch's proof of classification is a walk up the parent pointers."""

    def __init__(self, g: nx.DiGraph, h: DataView, own: dict[str, int]):
        self.g = g
        succ: dict[str, list[str]] = {n: [] for n in h.preds}
        for n, preds in h.preds.items():
            for p in preds:
                succ[p].append(n)
        skip = {n for n in g.nodes if g.nodes[n].get("category") in _CHAIN_SKIP}
        self.parents: dict[str, dict[str, str | None]] = {}
        for kind in (*KIND_ORDER, UNKNOWN):
            bit = KIND_BIT[kind]
            roots = sorted((n for n, b in own.items() if b & bit and n not in skip), key=_pred_key)
            parents: dict[str, str | None] = dict.fromkeys(roots)
            queue = deque(roots)
            while queue:
                n = queue.popleft()
                for s in succ[n]:
                    if s not in parents and s not in skip:
                        parents[s] = n
                        queue.append(s)
            self.parents[kind] = parents

    def chain(self, node: str, kind: str) -> list[Hop] | None:
        parents = self.parents[kind]
        if node not in parents:
            return None
        path = []
        while node is not None:
            path.append(hop(self.g, node))
            node = parents[node]
        path.reverse()
        return path

    def chains(self, node: str, kinds: list[str]) -> dict[str, list[Hop]]:
        out = {}
        for kind in kinds:
            path = self.chain(node, kind)
            if path:
                out[kind] = path
        return out


def guard_text(engine: Engine, bid: str, arm: str) -> Guard:
    entry = engine.branch_index.get(bid)
    if entry is None:
        return Guard(bid, arm, bid.replace("call:", "when ") + "() runs" if bid.startswith("call:") else bid)
    site, _info = entry
    return Guard(bid, arm, _info.file.segment(site.test_node, 90))


def guard_strings(engine: Engine, guards) -> list[str]:
    return [f"{bid}#{arm}" for bid, arm in guards]


def _shadowing(defs: list[Definition], raw) -> None:
    """Last assignment wins: a later definition that always runs when an earlier one ran replaces it."""
    for i, (d_i, s_i) in enumerate(zip(defs, raw)):
        gi = set(s_i.guards)
        arms_i = dict(s_i.guards)
        extras: list[str] = []
        for d_j, s_j in zip(defs[i + 1 :], raw[i + 1 :]):
            if s_j.order <= s_i.order:
                continue
            gj = set(s_j.guards)
            if any(bid in arms_i and arms_i[bid] != arm for bid, arm in s_j.guards):
                continue  # mutually exclusive arms: the later one never overwrites this one
            if gj <= gi:
                d_i.shadowed_by.append(d_j.id)
            else:
                missing = [g for g in d_j.guards if (g.branch, g.arm) not in gi]
                extras.append(" and ".join(g.describe() for g in missing))
        if not d_i.shadowed_by and extras:
            d_i.live_when = " and ".join(f"not ({e})" for e in dict.fromkeys(extras))


def _definition(engine: Engine, site, g: nx.DiGraph) -> Definition:
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
        entry = engine.branch_index.get(bid)
        if entry is not None and arm in ("then", "else"):
            for fact, pol in engine.facts_of(*entry):
                pol = pol if arm == "then" else -pol
                facts.append(fact if pol > 0 else f"not {fact}")
    segment = site.func.file.segment
    value = segment(site.value, 160) if site.value is not None else (segment(site.source, 160) or "…")
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


def build(engine: Engine, stats: dict) -> Analysis:
    g = engine.g
    h = DataView(g)
    bits = compute_bits(g, h)
    own = {n: root_bits(g, n, h.in_degree(n)) for n in g.nodes}
    for node, b in bits.items():
        g.nodes[node]["kinds"] = _bits_to_kinds(b)
        g.nodes[node]["level"] = CATEGORY_LEVEL.get(g.nodes[node]["category"], "derived")
        if own[node]:
            g.nodes[node]["root"] = True

    # -- reads ------------------------------------------------------------------------------------
    reads = []
    for r in engine.reads:
        data = g.nodes[r["node"]]
        reads.append(
            ConfigRead(
                name=r["name"],
                kind=r["kind"],
                via=r["via"],
                loc=r["loc"],
                function=r["function"],
                node=r["node"],
                resolved=bool(data.get("resolved", False)),
                in_condition=r["in_condition"],
                default=r["default"],
                called_with=r["called_with"],
                guards=guard_strings(engine, r["guards"]),
                phase=r["phase"],
                note=r["note"],
            )
        )
    reads.sort(key=lambda r: (*_loc_key(r.loc), r.name))

    # -- definitions ------------------------------------------------------------------------------
    definitions: dict[str, list[Definition]] = {}
    for node, data in g.nodes(data=True):
        if data["category"] == "key":
            key = node[4:]
            raw = sorted(engine.key_defs.get(key, []), key=lambda s: s.order)
            defs = [_definition(engine, s, g) for s in raw]
            _shadowing(defs, raw)
            definitions[key] = defs
    attr_definitions: dict[str, list[Definition]] = {}
    for node, data in g.nodes(data=True):
        if data["category"] == "attr":
            name = node[5:]
            raw = sorted(engine.attr_defs.get(name, []), key=lambda s: s.order)
            defs = [_definition(engine, s, g) for s in raw]
            for d in defs:
                d.id = f"attrdef:{d.loc}:{name}"
            _shadowing(defs, raw)
            attr_definitions[name] = defs

    # -- branches ---------------------------------------------------------------------------------
    branches: list[Branch] = []
    proofs = Proofs(g, h, own)
    for node, data in g.nodes(data=True):
        if data["category"] != "branch":
            continue
        bid = node[len("branch:") :]
        site, info = engine.branch_index[bid]
        side = engine.module_branches.get(bid, "config")
        phases = engine.branch_phase.get(bid, set())
        phase = "forward" if "forward" in phases else "construction" if phases else "config"
        classification, factors = classify_bits(bits[node])
        facts = engine.facts_of(site, info)
        topo, mode, other = [], [], []
        for fact, pol in facts:
            text = fact if pol > 0 else f"not {fact}"
            if fact.startswith("mode:"):
                mode.append(text.replace("mode:", ""))
            elif fact in ("galaxy", "mesh_1d", "single_device"):
                topo.append(text)
            else:
                other.append(text)
        stmt_node = site.node
        construct = site.construct
        branches.append(
            Branch(
                id=bid,
                loc=bid.removesuffix(":boolop"),
                stmt_loc=f"{info.file.name}:{getattr(stmt_node, 'lineno', 1)}:{getattr(stmt_node, 'col_offset', 0)}",
                construct=construct,
                test=info.file.segment(site.test_node if construct != "match" else site.deciders[0], 120),
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
            )
        )
    branches.sort(key=lambda b: (_side_rank(b.side), *_loc_key(b.loc), b.construct == "boolop"))

    # -- ops and paths ----------------------------------------------------------------------------
    ops = [
        OpCall(
            op=o["op"],
            loc=o["loc"],
            function=o["function"],
            spelled=o["spelled"],
            phase=o["phase"],
            guards=guard_strings(engine, o["guards"]),
            via=list(o["via"]),
        )
        for o in engine.ops
    ]
    order = sorted(range(len(ops)), key=lambda i: _loc_key(ops[i].loc))
    ops = [ops[i] for i in order]
    raw_ops = [engine.ops[i] for i in order]
    views = _Views(engine, raw_ops, reads, branches, definitions)
    paths = {}
    for name, (mode, galaxy) in PATHS.items():
        keep = views.ops((mode, galaxy))
        paths[name] = sorted({ops[i].op for i in keep if ops[i].phase == "forward"})
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

    files = sorted(engine.project.files[p].name for p in engine.project.files)
    stats = dict(stats)
    stats.update(
        files=len(files),
        lines=sum(s.lines for s in engine.project.files.values()),
        nodes=g.number_of_nodes(),
        edges=g.number_of_edges(),
        keys_read=len({r.name for r in reads if r.kind == "key"}),
        branches_module=sum(1 for b in branches if b.side == "module"),
        branches_helper=sum(1 for b in branches if b.side == "helper"),
        unknown=sum(1 for n in g.nodes if g.nodes[n]["category"] == "unknown"),
    )
    analysis = Analysis(
        module=engine.module.name,
        config=engine.config.name if engine.config else None,
        module_class=engine.consumer.name,
        config_class=engine.config_class.name if engine.config_class else None,
        files=files,
        graph=g,
        reads=reads,
        definitions=dict(sorted(definitions.items())),
        attr_definitions=dict(sorted(attr_definitions.items())),
        branches=branches,
        ops=ops,
        paths=paths,
        construction_ops=construction_ops,
        roots=roots,
        levels=levels,
        skipped=sorted(engine.skipped, key=lambda s: (_loc_key(s.loc), s.what)),
        stats=stats,
        fact_sites=fact_sites(engine),
    )
    analysis._views = views  # type: ignore[attr-defined]
    return analysis


def _side_rank(side: str) -> int:
    return {"module": 0, "helper": 1, "config": 2}.get(side, 3)


def _loc_key(loc: str) -> tuple:
    try:
        file, line, col = loc.rsplit(":", 2)
        return (file, int(line), int(col))
    except ValueError:
        return (loc, 0, 0)


class _Views:
    """Which reads / branches / ops / definitions are possible under a (mode, galaxy) assumption; computed on
    first use (the four path views are always needed, the others only for --mode / --topology)."""

    def __init__(self, engine: Engine, raw_ops, reads, branches, definitions):
        self.args = (engine, raw_ops, reads, branches, definitions)
        self.cache: dict = {}

    def __getitem__(self, key):
        if key not in self.cache:
            self.cache[key] = _view(*self.args, *key)
        return self.cache[key]

    def ops(self, key) -> set[int]:
        """Only the ops possible under ``key`` (enough for the four paths; the full view is built lazily)."""
        if key in self.cache:
            return self.cache[key]["ops"]
        engine, raw_ops = self.args[0], self.args[1]
        assume = {"mode": key[0], "galaxy": key[1]}
        reach = _reach(engine, assume)
        return {
            i
            for i, o in enumerate(raw_ops)
            if o["func"] in reach and engine.guard_possible(o["guards"], assume)
        }


def _reach(engine: Engine, assume: dict) -> set[str]:
    adjacency: dict[str, list] = {}
    for edge in engine.call_edges:
        adjacency.setdefault(edge.caller, []).append(edge)
    reach = set(engine.entry_ids)
    queue = deque(engine.entry_ids)
    while queue:
        fid = queue.popleft()
        for edge in adjacency.get(fid, ()):
            if edge.callee not in reach and engine.guard_possible(edge.guards, assume):
                reach.add(edge.callee)
                queue.append(edge.callee)
    return reach


def _view(engine: Engine, raw_ops, reads, branches, definitions, mode, galaxy) -> dict:
    assume = {"mode": mode, "galaxy": galaxy}
    reach = _reach(engine, assume)
    keep_ops = {
        i for i, o in enumerate(raw_ops) if o["func"] in reach and engine.guard_possible(o["guards"], assume)
    }
    raw_reads = {(r["loc"], r["name"]): r for r in engine.reads}
    keep_reads = set()
    for i, r in enumerate(reads):
        raw = raw_reads[(r.loc, r.name)]
        if raw["func"] in reach and engine.guard_possible(raw["guards"], assume):
            keep_reads.add(i)
    keep_branches, decided = set(), {}
    for b in branches:
        site, info = engine.branch_index[b.id]
        if b.side != "config" and info.id not in reach:
            continue
        if not engine.guard_possible(site.guards, assume):
            continue
        keep_branches.add(b.id)
        if site.construct in ("if", "elif", "ifexp", "while", "assert", "comprehension-if"):
            value = engine.branch_value(b.id, assume)
            if value is not None:
                decided[b.id] = value
    keep_defs = set()
    for key, defs in definitions.items():
        for d, site in zip(defs, sorted(engine.key_defs.get(key, []), key=lambda s: s.order)):
            if engine.guard_possible(site.guards, assume):
                keep_defs.add(d.id)
    return {
        "ops": keep_ops,
        "reads": keep_reads,
        "branches": keep_branches,
        "decided": decided,
        "defs": keep_defs,
        "funcs": reach,
    }


def restrict(analysis: Analysis, mode: str | None = None, topology: str | None = None) -> Analysis:
    """A view of the analysis that keeps only what can run for ``mode`` and/or ``topology`` (1d | 2d)."""
    galaxy = None if topology is None else topology == "2d"
    if mode is None and galaxy is None:
        return analysis
    views = analysis._views  # type: ignore[attr-defined]
    view = views[(mode, galaxy)]
    reads = [r for i, r in enumerate(analysis.reads) if i in view["reads"]]
    ops = [o for i, o in enumerate(analysis.ops) if i in view["ops"]]
    branches = []
    for b in analysis.branches:
        if b.id in view["branches"]:
            nb = copy.copy(b)
            if b.id in view["decided"]:
                nb.facts = [*b.facts, f"decided:{str(view['decided'][b.id]).lower()}"]
            branches.append(nb)
    keys = {r.name for r in reads if r.kind == "key"}
    definitions = {}
    for key, defs in analysis.definitions.items():
        kept = [d for d in defs if d.id in view["defs"]]
        if key in keys or kept:
            definitions[key] = kept
    g = analysis.graph.copy()
    dropped = {f"branch:{b.id}" for b in analysis.branches} - {f"branch:{b.id}" for b in branches}
    dropped |= {d.id for defs in analysis.definitions.values() for d in defs} - {
        d.id for defs in definitions.values() for d in defs
    }
    kept_ops = {f"op:{o.op}" for o in ops}
    dropped |= {n for n in g.nodes if n.startswith("op:") and n not in kept_ops}
    g.remove_nodes_from(dropped)
    sinks = {f"branch:{b.id}" for b in branches} | kept_ops | {r.node for r in reads}
    sinks = {s for s in sinks if s in g}
    keep = set(sinks)
    for s in sinks:
        keep |= nx.ancestors(g, s)
    g = g.subgraph(sorted(keep)).copy()
    levels = {level: sorted(n for n in nodes if n in g) for level, nodes in analysis.levels.items()}
    roots = {cat: [n for n in nodes if n in g] for cat, nodes in analysis.roots.items()}
    roots = {k: v for k, v in roots.items() if v}
    assumptions = {}
    if mode:
        assumptions["mode"] = mode
    if topology:
        assumptions["topology"] = topology
    paths = {name: ops_ for name, ops_ in analysis.paths.items() if _path_matches(name, mode, galaxy)}
    stats = dict(
        analysis.stats,
        nodes=g.number_of_nodes(),
        edges=g.number_of_edges(),
        keys_read=len(keys),
        branches_module=sum(1 for b in branches if b.side == "module"),
        branches_helper=sum(1 for b in branches if b.side == "helper"),
        unknown=sum(1 for n in g.nodes if g.nodes[n]["category"] == "unknown"),
    )
    result = replace(
        analysis,
        stats=stats,
        graph=g,
        reads=reads,
        ops=ops,
        branches=branches,
        definitions=definitions,
        levels=levels,
        roots=roots,
        paths=paths,
        assumptions=assumptions,
    )
    result._views = views  # type: ignore[attr-defined]
    return result


def _path_matches(name: str, mode: str | None, galaxy: bool | None) -> bool:
    pmode, pgal = PATHS[name]
    return (mode is None or pmode == mode) and (galaxy is None or pgal == galaxy)


def resolve_name(analysis: Analysis, name: str) -> list[str]:
    """Graph nodes that ``name`` refers to: a node id, key, attribute, op or branch location."""
    g = analysis.graph
    if name in g:
        return [name]
    candidates = []
    for prefix in ("key:", "attr:", "method:", "op:", "op:ttnn.", "env:", "hw:", "input:", "module:", "hf:"):
        if prefix + name in g:
            candidates.append(prefix + name)
    if name.startswith("args."):
        member = name[5:].removesuffix("()")
        candidates += [n for n in (f"attr:{member}", f"method:{member}") if n in g]
    if not candidates and ":" in name:
        parts = name.rsplit(":", 2)
        try:
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                branch = analysis.branch_at(parts[0], int(parts[1]), int(parts[2]))
            else:
                file, line = name.rsplit(":", 1)
                branch = analysis.branch_at(file, int(line))
        except ValueError:
            branch = None
        if branch is not None:
            candidates.append(f"branch:{branch.id}")
    if not candidates:
        lowered = name.lower()
        for node, data in g.nodes(data=True):
            if data.get("category") in ("op", "key", "attr") and node.lower().endswith(lowered):
                candidates.append(node)
    return sorted(set(candidates))


def why_paths(analysis: Analysis, name: str, limit: int = 12) -> list[list[Hop]]:
    """For each root parameter that reaches ``name``, one shortest path root -> ... -> name."""
    g = analysis.graph
    targets = resolve_name(analysis, name)
    out: list[list[Hop]] = []
    for target in targets:
        parents = {target: None}
        queue = deque([target])
        roots = []
        while queue:
            node = queue.popleft()
            if g.nodes[node].get("root"):
                roots.append(node)
            for pred in sorted(g.predecessors(node), key=_pred_key):
                if pred not in parents and g.nodes[pred].get("category") not in _CHAIN_SKIP:
                    parents[pred] = node
                    queue.append(pred)
        for root in sorted(roots, key=lambda r: (LEVELS.index(g.nodes[r]["level"]), r))[:limit]:
            path, node = [], root
            while node is not None:
                path.append(hop(g, node))
                node = parents[node]
            out.append(path)
    return out


__all__ = ["PATHS", "RUNTIME", "build", "classify_bits", "resolve_name", "restrict", "why_paths"]
