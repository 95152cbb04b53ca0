"""Functions over the data of an analysis (fresh or loaded from JSON): what can run under a mode / topology
(``restrict``), the four paths, ``why`` paths, ``focus`` and branch decisions. Nothing here needs the engine."""

from __future__ import annotations

import copy
import json
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .decision import assumption, close, eval_tree, tree_facts
from .ids import NodeKind, is_kind, node_id
from .records import LEVELS, Branch, Hop

if TYPE_CHECKING:  # annotations only: model.py imports this module
    from .graph import Graph
    from .model import Analysis

PATHS = {
    "decode/galaxy": ("decode", True),
    "decode/non-galaxy": ("decode", False),
    "prefill/galaxy": ("prefill", True),
    "prefill/non-galaxy": ("prefill", False),
}
#: Constructs whose test value decides which arm runs (a match case: whether its body runs; boolean operators
#: are not decided).
DECIDABLE = ("if", "elif", "ifexp", "while", "assert", "comprehension-if", "match")
_CHAIN_SKIP = ("fact",)


# -- branch decisions -----------------------------------------------------------------------------------------
def decide(branch: Branch, topology: str | None = None, mode: str | None = None) -> bool | None:
    """What ``branch``'s test evaluates to on ``topology`` ("1d" | "2d") in ``mode`` ("decode" | "prefill"):
    True (the then-arm runs), False (the else-arm runs) or None (not decided by topology and mode alone). A test
    on the function's own parameters is open here; ``Analysis.decide`` closes it with every call site."""
    return eval_tree(branch.decision, assumption(topology, mode))


def arm(branch: Branch, topology: str | None = None, mode: str | None = None) -> str | None:
    """``"then"`` / ``"else"`` / None: the arm of ``branch`` that runs on ``topology`` in ``mode``."""
    value = decide(branch, topology, mode)
    return None if value is None else "then" if value else "else"


def deciding_facts(branch: Branch) -> list[tuple[str, bool]]:
    """The facts ``branch``'s test reads and, for each, the value that makes its part of the test true, e.g.
    ``[("galaxy", True), ("mode:prefill", True)]`` for ``if TG and mode == "prefill"``."""
    return tree_facts(branch.decision)


# -- what can run under an assumption -------------------------------------------------------------------------
#: How many call contexts (what the call sites pass) are kept per function before they are merged into "unknown".
MAX_CONTEXTS = 16
UNKNOWN_CONTEXT: dict[str, Any] = {}


class Decider:
    """Evaluates guards (``"branch#arm"`` strings) of one analysis under one assumption, in one call context
    (memoised per context)."""

    def __init__(self, analysis: Analysis, assume: dict[str, object]):
        self.assume = assume
        self.trees = {b.id: b.decision for b in analysis.branches}
        self.guards = {b.id: b.guards for b in analysis.branches}
        self.memo: dict[tuple[str, int], bool | None] = {}
        self.contexts: dict[int, dict[str, Any]] = {}  # keeps each binding alive while its id() is a memo key

    def value(self, bid: str, binding: dict[str, Any] | None = None) -> bool | None:
        binding = binding or UNKNOWN_CONTEXT
        key = (bid, id(binding))
        if key not in self.memo:
            self.contexts[id(binding)] = binding
            self.memo[key] = eval_tree(self.trees.get(bid), self.assume, binding)
        return self.memo[key]

    def possible(self, guards: list[str], binding: dict[str, Any] | None = None) -> bool:
        return all(self.holds(guard, binding) is not False for guard in guards)

    def holds(self, guard: str, binding: dict[str, Any] | None = None) -> bool | None:
        """True / False / None (undecided) for one guard. ``bid#unless-then`` (after an arm that always leaves,
        see scan.py) holds unless the branch was reached (its own guards) and took that arm."""
        bid, _, arm_ = guard.rpartition("#")
        if arm_ in ("then", "else"):
            value = self.value(bid, binding)
            return None if value is None else (arm_ == "then") == value
        if arm_ in ("unless-then", "unless-else"):
            taken = [self.holds(g, binding) for g in self.guards.get(bid, ())]
            taken.append(self.holds(f"{bid}#{arm_.removeprefix('unless-')}", binding))
            if all(t is True for t in taken):
                return False
            return True if any(t is False for t in taken) else None
        return None

    def possible_somewhere(self, guards: list[str], contexts: list[dict[str, Any]]) -> bool:
        return any(self.possible(guards, binding) for binding in contexts)


def _context_key(binding: dict[str, Any] | None) -> str:
    return json.dumps(binding or {}, sort_keys=True, default=str)


def reach(analysis: Analysis, decider: Decider) -> dict[str, list[dict[str, Any]]]:
    """The functions reachable from the entry points through calls whose guards can hold, each with its call
    contexts: what the call sites on the way pass to its parameters (one level of call-site sensitivity per call,
    chained along the path; at most MAX_CONTEXTS per function, then one unknown context)."""
    adjacency: dict[str, list] = {}
    for link in analysis.calls:
        adjacency.setdefault(link.caller, []).append(link)
    contexts: dict[str, dict[str, dict[str, Any]]] = {fid: {"{}": {}} for fid in analysis.entries}
    queue = deque((fid, {}) for fid in analysis.entries)
    while queue:
        fid, binding = queue.popleft()
        for link in adjacency.get(fid, ()):
            if not decider.possible(link.guards, binding):
                continue
            bound = {p: t for p, t in ((p, close(t, binding)) for p, t in link.args.items()) if t is not None}
            known = contexts.setdefault(link.callee, {})
            if len(known) >= MAX_CONTEXTS:
                bound = UNKNOWN_CONTEXT
            key = _context_key(bound)
            if key not in known:
                known[key] = bound
                queue.append((link.callee, bound))
    return {fid: list(found.values()) for fid, found in contexts.items()}


def path_ops(analysis: Analysis, mode: str, galaxy: bool) -> list[str]:
    """The terminal ops ``forward`` can reach in ``mode`` on galaxy (True) or not (False)."""
    decider = Decider(analysis, {"mode": mode, "galaxy": galaxy})
    funcs = reach(analysis, decider)
    return sorted(
        {
            o.op
            for o in analysis.ops
            if o.phase == "forward"
            and o.function_id in funcs
            and decider.possible_somewhere(o.guards, funcs[o.function_id])
        }
    )


def all_paths(analysis: Analysis) -> dict[str, list[str]]:
    return {name: path_ops(analysis, mode, galaxy) for name, (mode, galaxy) in PATHS.items()}


def decide_in(analysis: Analysis, branch: Branch, topology: str | None = None, mode: str | None = None):
    """What ``branch``'s test evaluates to on ``topology`` in ``mode`` in every call context that reaches it:
    True / False when all agree, None otherwise (or when it cannot run there)."""
    decider = Decider(analysis, assumption(topology, mode))
    contexts = reach(analysis, decider).get(branch.function_id) or [{}]
    values = {eval_tree(branch.decision, decider.assume, binding) for binding in contexts}
    return values.pop() if len(values) == 1 else None


def restrict(analysis: Analysis, mode: str | None = None, topology: str | None = None) -> Analysis:
    """A view of the analysis that keeps only what can run for ``mode`` and/or ``topology`` (1d | 2d); decided
    branches get a ``decided:true|false`` fact."""
    assume = assumption(topology, mode)
    galaxy = assume["galaxy"]
    if mode is None and galaxy is None:
        return analysis
    decider = Decider(analysis, assume)
    funcs = reach(analysis, decider)
    reads = [
        r
        for r in analysis.reads
        if r.function_id in funcs and decider.possible_somewhere(r.guards, funcs[r.function_id])
    ]
    ops = [
        o
        for o in analysis.ops
        if o.function_id in funcs and decider.possible_somewhere(o.guards, funcs[o.function_id])
    ]
    branches = []
    for b in analysis.branches:
        contexts = funcs.get(b.function_id, [{}] if b.side == "config" else None)
        if contexts is None or not decider.possible_somewhere(b.guards, contexts):
            continue
        nb = copy.copy(b)
        value = None
        if b.construct in DECIDABLE:
            values = {decider.value(b.id, binding) for binding in contexts}
            value = values.pop() if len(values) == 1 else None
        if value is not None:
            nb.facts = [*b.facts, f"decided:{str(value).lower()}"]
        branches.append(nb)
    keys = {r.name for r in reads if r.kind == "key"}
    definitions = {}
    for key, defs in analysis.definitions.items():
        kept = [d for d in defs if decider.possible([f"{g.branch}#{g.arm}" for g in d.guards])]
        if key in keys or kept:
            definitions[key] = kept
    g = analysis.dependencies.copy()
    dropped = {f"branch:{b.id}" for b in analysis.branches} - {f"branch:{b.id}" for b in branches}
    dropped |= {d.id for defs in analysis.definitions.values() for d in defs} - {
        d.id for defs in definitions.values() for d in defs
    }
    kept_ops = {node_id(NodeKind.OP, o.op) for o in ops}
    dropped |= {n for n in g.nodes if is_kind(n, NodeKind.OP) and n not in kept_ops}
    g.remove_nodes_from(dropped)
    sinks = {f"branch:{b.id}" for b in branches} | kept_ops | {r.node for r in reads}
    keep = {s for s in sinks if s in g}
    for s in list(keep):
        keep |= g.ancestors(s)
    g = g.subgraph(sorted(keep)).copy()
    levels = {level: sorted(n for n in nodes if n in g) for level, nodes in analysis.levels.items()}
    roots = {cat: [n for n in nodes if n in g] for cat, nodes in analysis.roots.items()}
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
    return replace(
        analysis,
        stats=stats,
        dependencies=g,
        reads=reads,
        ops=ops,
        branches=branches,
        definitions=definitions,
        levels=levels,
        roots={k: v for k, v in roots.items() if v},
        paths=paths,
        assumptions=assumptions,
    )


def _path_matches(name: str, mode: str | None, galaxy: bool | None) -> bool:
    pmode, pgal = PATHS[name]
    return (mode is None or pmode == mode) and (galaxy is None or pgal == galaxy)


# -- names, why, focus ----------------------------------------------------------------------------------------
def resolve_name(analysis: Analysis, name: str) -> list[str]:
    """Graph nodes that ``name`` refers to: a node id, key, attribute, op or branch location."""
    g = analysis.dependencies
    if name in g:
        return [name]
    candidates = []
    for prefix in ("key:", "attr:", "method:", "op:", "op:ttnn.", "env:", "hw:", "input:", "module:", "hf:"):
        if prefix + name in g:
            candidates.append(prefix + name)
    if name.startswith("args."):
        member = name.removeprefix("args.").removesuffix("()")
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


def pred_key(node: str) -> tuple[bool, str]:
    """Prefer informative roots in proofs: the device object / its presence come last."""
    return (node in ("hw:device_present", "hw:mesh_device"), node)


def hop(g: Graph, node: str) -> Hop:
    data = g.nodes[node]
    return Hop(node, data.get("label", node), data.get("loc"))


def why_paths(analysis: Analysis, name: str, limit: int = 12) -> list[list[Hop]]:
    """For each root parameter that reaches ``name``, one shortest path root -> ... -> name."""
    g = analysis.dependencies
    out: list[list[Hop]] = []
    for target in resolve_name(analysis, name):
        parents = {target: None}
        queue = deque([target])
        roots = []
        while queue:
            node = queue.popleft()
            if g.nodes[node].get("root"):
                roots.append(node)
            for pred in sorted(g.predecessors(node), key=pred_key):
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


def focus(analysis: Analysis, name: str) -> Analysis:
    """The analysis with its graph cut down to ``name`` and everything it depends on."""
    targets = resolve_name(analysis, name)
    g = analysis.dependencies
    keep: set[str] = set(targets)
    for t in targets:
        keep |= g.ancestors(t)
    return replace(analysis, dependencies=g.subgraph(sorted(keep)))


__all__ = [
    "PATHS",
    "all_paths",
    "arm",
    "decide",
    "deciding_facts",
    "focus",
    "path_ops",
    "resolve_name",
    "restrict",
    "why_paths",
]
