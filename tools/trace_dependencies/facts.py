"""Facts and branch classification: topology (galaxy, 1D mesh, single device), mode and model-name facts named by
a branch's test, compiled into small fact trees (evaluated by decision.py), and the classification of every
branch by the root kinds that reach its test, with proof chains."""

from __future__ import annotations

import ast

from . import constants as C
from .astutil import (
    NOTHING,
    const_eval,
    const_str,
    endswith_mode,
    is_const,
    is_str_seq,
    mentions,
    unparse,
)
from .decision import tree_facts
from .graph import Graph
from .ids import (
    ARGS,
    MESH,
    RoleKind,
    Scope,
)
from .query import hop, pred_key
from .records import KIND_BIT, KIND_ORDER, MODE, ROOT_KIND, STATIC, UNKNOWN, Hop
from .scan import BranchSite, FuncInfo
from .state import Part


class Facts(Part):
    """Topology / mode facts of branch tests and their three-valued evaluation."""

    def galaxy_polarity(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> int | None:
        """+1 if ``e`` means "is galaxy", -1 if it means "is not galaxy", None otherwise."""
        if depth > 10:
            self.cut("topology test", e, info, 10)
            return None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            pol = self.galaxy_polarity(e.operand, info, depth + 1)
            return -pol if pol else None
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            op, other = e.ops[0], e.comparators[0]
            left = e.left
            if is_const(other, C.GALAXY_DEVICES) and self.is_num_devices(left, info, depth + 1):
                return 1 if isinstance(op, ast.Eq) else -1 if isinstance(op, ast.NotEq) else None
            if is_const(left, C.GALAXY_DEVICES) and self.is_num_devices(other, info, depth + 1):
                return 1 if isinstance(op, ast.Eq) else -1 if isinstance(op, ast.NotEq) else None
            return None
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role is ARGS and e.attr == "is_galaxy":
                return 1
            if role is not None and role.kind is RoleKind.SELF:
                values = [(i, s.value) for i, s in self.self_sites(role.cls, e.attr)]
                return self._alias_polarity(values, depth)
            return None
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.PARAM:
                return 1 if self.is_galaxy_flag_param(owner, e.id) else None
            if kind is Scope.LOCAL:
                return self._alias_polarity(
                    [(owner, s.value) for s in self.local_sites(e, info, owner)], depth
                )
        return None

    def is_galaxy_flag_param(self, owner: FuncInfo, name: str) -> bool:
        """A parameter named ``TG`` / ``galaxy`` / ``is_galaxy`` is the galaxy fact only in the analysed class's
        ``__init__`` (the nearest in its MRO), whose callers pass ``TG=args.is_galaxy`` (the codemod's
        ``from_model_args`` checks it against the mesh). Any other function's parameter of that name is a plain
        parameter, closed per call site: one call may pass ``not is_galaxy`` or leave the default."""
        if name not in C.GALAXY_NAMES or owner.parent is not None or owner.name != "__init__":
            return False
        return owner is self.method_info(self.st.consumer, "__init__")

    def _alias_polarity(self, values, depth: int) -> int | None:
        pols = set()
        for owner, value in values:
            if value is None:
                return None
            pols.add(self.galaxy_polarity(value, owner, depth + 1))
        return pols.pop() if len(pols) == 1 else None

    def is_num_devices(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        if depth > 10:
            self.cut("device-count test", e, info, 10)
            return False
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "get_num_devices":
            return True
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role is ARGS and e.attr == "num_devices":
                return True
            if role is not None and role.kind is RoleKind.SELF and e.attr == "num_devices":
                return all(
                    self.is_num_devices(s.value, i, depth + 1)
                    for i, s in self.self_sites(role.cls, e.attr)
                    if s.value is not None
                ) and bool(self.self_sites(role.cls, e.attr))
            return False
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.LOCAL:
                sites = self.local_sites(e, info, owner)
                return all(
                    s.value is not None and self.is_num_devices(s.value, owner, depth + 1) for s in sites
                )
            return kind is Scope.PARAM and e.id == "num_devices"
        return False

    def mode_value(self, e: ast.AST) -> str | None:
        text = const_str(e)
        if text in ("decode", "prefill"):
            return text
        if isinstance(e, ast.Attribute) and e.attr in C.MODE_VALUES and endswith_mode(e.value):
            return C.MODE_VALUES[e.attr]
        return None

    def is_mode_param(self, info: FuncInfo, name: str) -> bool:
        ann = info.annotations.get(name)
        return name in C.MODE_NAMES or (ann is not None and unparse(ann).endswith("Mode"))

    def is_mode(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        if depth > 8:
            self.cut("mode test", e, info, 8)
            return False
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.PARAM:
                return self.is_mode_param(owner, e.id)
            if kind is Scope.LOCAL:
                if e.id in owner.params and self.is_mode_param(owner, e.id):
                    # the mode parameter reassigned: still the mode where only the parameter and normalisations
                    # (``mode = Mode(mode)``) reach this use; after ``if ...: mode = "decode"`` it is not
                    return all(
                        s.value is not None and self.is_mode(s.value, owner, depth + 1)
                        for s in self.local_sites(e, info, owner)
                    )
                sites = self.local_sites(e, info, owner)
                return bool(sites) and all(
                    s.value is not None and self.is_mode(s.value, owner, depth + 1) for s in sites
                )
            return False
        if isinstance(e, ast.Call) and len(e.args) == 1 and endswith_mode(e.func):
            return self.is_mode(e.args[0], info, depth + 1)
        if isinstance(e, ast.Attribute) and e.attr in C.MODE_NAMES:
            role = self.role(e.value, info)
            return role is not None and role.kind is RoleKind.SELF
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and e.slice.value == C.MODE_KEY:
            # Llama-2-70B's ``self.model_config["LLM_MODE"]``: the dict of one mode carries that mode (the caller
            # switches dicts with set_model_config), so it is the mode as a parameter would be
            role = self.role(e.value, info)
            return role is not None and role.kind is RoleKind.MC
        return False

    def mesh_shape_expr(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        """``mesh_device.shape`` / ``list(mesh_device.shape)`` / a local alias of either / ``args.cluster_shape``."""
        if depth > 6:
            self.cut("mesh shape test", e, info, 6)
            return False
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Name)
            and e.func.id in ("list", "tuple")
            and e.args
        ):
            e = e.args[0]
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.LOCAL:
                sites = self.local_sites(e, info, owner)
                return all(
                    s.value is not None and self.mesh_shape_expr(s.value, owner, depth + 1) for s in sites
                )
            return False
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if e.attr == "shape" and role is MESH:
                return True
            return e.attr == "cluster_shape" and role is ARGS
        return False

    def facts_of(self, site: BranchSite, info: FuncInfo) -> list[tuple[str, int]]:
        """Topology / mode / model-name facts named in a branch's deciders (with polarity)."""
        cached = self.cache.facts.get(site.id)
        if cached is not None:
            return cached
        out: list[tuple[str, int]] = []
        if site.construct == "match":  # its decision's facts: its pattern, the earlier ones not matching
            tree = self.branch_tree(site.id)
            out = [(fact, 1 if value else -1) for fact, value in tree_facts(tree)] if tree is not None else []
            self.cache.facts[site.id] = out
            return out
        for decider in site.deciders:
            self._facts(decider, info, 1, out, 0)
        self.cache.facts[site.id] = out
        return out

    def _facts(self, e: ast.AST, info: FuncInfo, pol: int, out: list, depth: int) -> None:
        if depth > 30:
            self.cut("condition", e, info, 30)
            return
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            self._facts(e.operand, info, -pol, out, depth + 1)
            return
        if isinstance(e, ast.BoolOp):
            for value in e.values:
                self._facts(value, info, pol, out, depth + 1)
            return
        alias = self._alias_value(e, info)
        if alias is not None:  # flag = mode == "decode"; if flag: ...
            self._facts(alias[1], alias[0], pol, out, depth + 1)
            return
        gp = self.galaxy_polarity(e, info)
        if gp:
            out.append(("galaxy", gp * pol))
            return
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            left, op, right = e.left, e.ops[0], e.comparators[0]
            for a, b in ((left, right), (right, left)):
                mv = self.mode_value(b)
                if mv and self.is_mode(a, info):
                    sign = (
                        1
                        if isinstance(op, (ast.Eq, ast.Is))
                        else -1
                        if isinstance(op, (ast.NotEq, ast.IsNot))
                        else 0
                    )
                    if sign:
                        out.append((f"mode:{mv}", sign * pol))
                    return
            if isinstance(op, (ast.In, ast.NotIn)) and self.is_mode(left, info):
                values = {self.mode_value(x) for x in getattr(right, "elts", [])}
                if len(values) == 1 and None not in values:
                    out.append((f"mode:{values.pop()}", pol if isinstance(op, ast.In) else -pol))
                return
            if (
                isinstance(op, (ast.In, ast.NotIn))
                and is_const(left, 1)
                and self.mesh_shape_expr(right, info)
            ):
                out.append(("mesh_1d", pol if isinstance(op, ast.In) else -pol))
                return
            if isinstance(op, (ast.Eq, ast.NotEq)) and self.mesh_shape_expr(left, info):
                values = const_eval(right, {})
                if isinstance(values, (list, tuple)) and list(values) == [1, 1]:
                    out.append(("single_device", pol if isinstance(op, ast.Eq) else -pol))
                    return
            if self._is_model_name_check(e):
                out.append(("model-name", pol))
                return
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "all" and e.args:
            arg = e.args[0]
            if (
                isinstance(arg, (ast.ListComp, ast.GeneratorExp))
                and arg.generators
                and self.mesh_shape_expr(arg.generators[0].iter, info)
            ):
                out.append(("galaxy", pol))
                return
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Attribute)
            and e.func.attr in ("startswith", "endswith")
            and mentions(e.func.value, C.MODEL_NAME_HINTS)
        ):
            out.append(("model-name", pol))

    def _alias_value(self, e: ast.AST, info: FuncInfo) -> tuple[FuncInfo, ast.expr] | None:
        """``(owner, value)`` when ``e`` is a local (not a parameter) that only one plain assignment reaches."""
        if not isinstance(e, ast.Name):
            return None
        kind, owner = self.lookup(e.id, info)
        if kind is not Scope.LOCAL or e.id in owner.params:
            return None
        sites = self.local_sites(e, info, owner)
        if len(sites) != 1 or sites[0].value is None or sites[0].kind not in ("assign", "walrus"):
            return None
        return owner, sites[0].value

    def exact_fact(self, e: ast.AST, info: FuncInfo) -> tuple[str, int] | None:
        """``(fact, polarity)`` when the *value* of ``e`` is the boolean fact itself or its negation (a test, a
        ``not``, or a local whose one assignment is such a value), else None. An and/or chain is never one, even
        when it names a single fact: ``mem = TG and CFG or DRAM`` yields CFG or DRAM, and ``TG and x > 3`` is
        not the galaxy fact (a rewriter that replaced either by True/False would change the result)."""
        tree = self._name_fact_tree(e, info) if type(e) is ast.Name else self.fact_tree(e, info)
        polarity = 1
        while tree is not None and tree[0] == "not":
            polarity, tree = -polarity, tree[1]
        if tree is None or tree[0] != "fact":
            return None
        return tree[1], tree[2] * polarity

    def _name_fact_tree(self, e: ast.Name, info: FuncInfo):
        """``fact_tree`` of a name as far as :meth:`exact_fact` needs it: a local's one value, else the galaxy fact
        the name means. The steps ``fact_tree`` takes after those cannot make a name a fact (no second alias
        lookup, no compare or call forms; an open parameter test is never one), so the answer is the same."""
        alias = self._alias_value(e, info)
        if alias is not None:
            return self.fact_tree(alias[1], alias[0], 1)
        polarity = self.galaxy_polarity(e, info)
        return ("fact", "galaxy", polarity) if polarity else None

    def _is_model_name_check(self, e: ast.Compare) -> bool:
        parts = [e.left, *e.comparators]
        has_str = any(const_str(p) is not None or is_str_seq(p) for p in parts)
        return has_str and any(mentions(p, C.MODEL_NAME_HINTS) for p in parts)

    def _param_test(self, e: ast.AST, info: FuncInfo):
        """A test on one of ``info``'s own parameters, left open for each call site to close (per-call-site
        precision, see query.reach): ``flag`` -> ("param", "flag", 1); ``kind == "gelu"`` -> ("param_eq", "kind",
        "gelu", 1). None for anything else (the mode parameter is the mode fact, not an open parameter)."""
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind is Scope.PARAM and owner is info and not self.is_mode_param(info, e.id):
                if self.is_galaxy_flag_param(info, e.id):
                    return None  # the analysed class's constructor argument TG / is_galaxy is the galaxy fact
                return ("param", e.id, 1)
            return None
        if not (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Eq, ast.NotEq))):
            return None
        left, right = e.left, e.comparators[0]
        if isinstance(right, ast.Name) and isinstance(left, ast.Constant):
            left, right = right, left
        if not (isinstance(left, ast.Name) and isinstance(right, ast.Constant)):
            return None
        if not isinstance(right.value, (str, int, float, bool, type(None))):
            return None
        kind, owner = self.lookup(left.id, info)
        if kind is not Scope.PARAM or owner is not info or self.is_mode_param(info, left.id):
            return None
        return ("param_eq", left.id, right.value, 1 if isinstance(e.ops[0], ast.Eq) else -1)

    def arg_trees(self, callee: FuncInfo, call: ast.Call, caller: FuncInfo) -> dict[str, object]:
        """For each parameter of ``callee`` this call passes something decidable: ("value", constant) or the fact
        tree of the argument in the caller (which may itself be open on the caller's parameters)."""
        params = list(callee.params)
        if callee.self_name and params and params[0] == callee.self_name:
            base = self.base_method_call(call, caller) if type(call.func) is ast.Attribute else None
            if base is None or base[1]:  # Base.m(self, ...) passes self itself
                params = params[1:]
        pairs: dict[str, ast.expr] = {}
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred) or i >= len(params):
                break
            pairs[params[i]] = arg
        for kw in call.keywords:
            if kw.arg in callee.params:
                pairs[kw.arg] = kw.value
        for name in params:
            if name not in pairs and name in callee.defaults:
                pairs[name] = callee.defaults[name]
        out: dict[str, object] = {}
        for name, arg in pairs.items():
            if isinstance(arg, ast.Constant) and isinstance(arg.value, (str, int, float, bool, type(None))):
                out[name] = ("value", arg.value)
                continue
            if callee.defaults.get(name) is arg or self.role(arg, caller) is not None:
                continue  # a default that is not a constant; ModelArgs / model_config / the mesh passed on
            tree = self.fact_tree(arg, caller)
            if tree is not None:
                out[name] = tree
        return out

    def branch_tree(self, bid: str):
        """A branch's test compiled into a small tree of facts (cached), which is then cheap to evaluate under any
        assumption (decision.eval_tree). A match case is "no earlier case matched, and this one does"."""
        tree = self.cache.fact_trees.get(bid, NOTHING)
        if tree is NOTHING:
            entry = self.out.branch_index.get(bid)
            tree = None
            if entry is not None and entry[0].construct == "match":
                tree = self._case_tree(entry[0], entry[1])
            elif entry is not None:
                tree = self.fact_tree(entry[0].deciders[0], entry[1])
            self.cache.fact_trees[bid] = tree
        return tree

    def _case_tree(self, site: BranchSite, info: FuncInfo):
        """The decision of one case of ``match mode:`` (None for a subject that is not the mode)."""
        match = site.match
        if match is None or not self.is_mode(match.subject, info):
            return None
        earlier = []
        for case in match.cases:
            tree = self._pattern_tree(case.pattern)
            if case.guard is not None:
                tree = ("and", [tree, self.fact_tree(case.guard, info)])
            if case.pattern is site.node:
                return ("and", [*earlier, tree]) if earlier else tree
            earlier.append(None if tree is None else ("not", tree))
        return None

    def _pattern_tree(self, pattern: ast.pattern):
        """Whether a case pattern matches the mode: ``"decode"`` / ``Mode.DECODE`` are its facts, ``|`` an or,
        ``_`` (or a capture) always; anything else is not decided (None)."""
        if isinstance(pattern, ast.MatchValue):
            value = self.mode_value(pattern.value)
            return ("fact", f"mode:{value}", 1) if value else None
        if isinstance(pattern, ast.MatchOr):
            return ("or", [self._pattern_tree(p) for p in pattern.patterns])
        if isinstance(pattern, ast.MatchAs):
            return ("const", True) if pattern.pattern is None else self._pattern_tree(pattern.pattern)
        return None

    def fact_tree(self, e: ast.AST, info: FuncInfo, depth: int = 0):
        """The test as ("and"|"or", [trees]) / ("not", tree) / ("fact", name, polarity) / an open test on a
        parameter (("param", name, polarity), ("param_eq", name, value, polarity)) / None."""
        if depth > 30:
            self.cut("condition", e, info, 30)
            return None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            inner = self.fact_tree(e.operand, info, depth + 1)
            return None if inner is None else ("not", inner)
        if isinstance(e, ast.BoolOp):
            return (
                "and" if isinstance(e.op, ast.And) else "or",
                [self.fact_tree(v, info, depth + 1) for v in e.values],
            )
        alias = self._alias_value(e, info)
        if alias is not None:
            return self.fact_tree(alias[1], alias[0], depth + 1)
        facts: list[tuple[str, int]] = []
        self._facts(e, info, 1, facts, 0)
        if len(facts) == 1:
            return ("fact", facts[0][0], facts[0][1])
        return self._param_test(e, info) if not facts else None


# ---------------------------------------------------------------------------------------------- classification
# A branch is classified by the root kinds (static < weights < mode < runtime) that reach its test through the
# data edges, with one shortest proof chain per kind.
_CHAIN_SKIP = ("fact",)


def bits_to_kinds(bits: int) -> list[str]:
    return [k for k in (*KIND_ORDER, UNKNOWN) if bits & KIND_BIT[k]]


def classify_bits(bits: int) -> tuple[str, list[str]]:
    factors = bits_to_kinds(bits)
    known = [k for k in factors if k != UNKNOWN]
    if known:
        return known[-1], factors
    if factors:
        return UNKNOWN, factors
    return STATIC, []


def root_bits(g: Graph, node: str, indeg: int) -> int:
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

    def __init__(self, g: Graph):
        self.preds: dict[str, list[str]] = {
            n: [p for p, d in g._pred[n].items() if d.get("kind") != "nest"] for n in g.nodes
        }

    def predecessors(self, node: str) -> list[str]:
        return self.preds[node]

    def in_degree(self, node: str) -> int:
        return len(self.preds[node])


def compute_bits(g: Graph, h: DataView) -> dict[str, int]:
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
    cyclic = [n for n in sorted(preds) if n not in seen]  # nodes on cycles and those after them
    # One pass in Kahn's order settles every acyclic node (all its predecessors come before it); only the nodes
    # on or after cycles need more passes, until nothing changes.
    todo = order + cyclic
    while True:
        changed = False
        for n in todo:
            b, d = bits[n], depth[n]
            for p in preds[n]:
                b |= bits[p]
                if p in seen and depth[p] + 1 > d:
                    d = depth[p] + 1
            if b != bits[n] or d != depth[n]:
                bits[n], depth[n] = b, d
                changed = changed or n not in seen
        if not changed:
            break
        todo = cyclic
    for n in preds:
        g.nodes[n]["depth"] = depth[n]
    return bits


class Proofs:
    """For each kind, a shortest path from the nearest root of that kind to every node (one multi-source BFS per
    kind over the data edges), so a branch's proof of classification is a walk up the parent pointers.

    The BFS goes level by level, each level in ``pred_key`` order, so a node's parent is the smallest of its
    predecessors one level up: the chains depend on the graph only, not on the order the engine built it in."""

    def __init__(self, g: Graph, h: DataView, own: dict[str, int]):
        self.g = g
        succ: dict[str, list[str]] = {n: [] for n in h.preds}
        for n, preds in h.preds.items():
            for p in preds:
                succ[p].append(n)
        skip = {n for n in g.nodes if g.nodes[n].get("category") in _CHAIN_SKIP}
        self.parents: dict[str, dict[str, str | None]] = {}
        for kind in (*KIND_ORDER, UNKNOWN):
            bit = KIND_BIT[kind]
            level = sorted((n for n, b in own.items() if b & bit and n not in skip), key=pred_key)
            parents: dict[str, str | None] = dict.fromkeys(level)
            while level:
                below = []
                for n in level:
                    for s in succ[n]:
                        if s not in parents and s not in skip:
                            parents[s] = n
                            below.append(s)
                below.sort(key=pred_key)
                level = below
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
