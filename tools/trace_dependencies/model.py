"""The result of an analysis: plain dataclasses plus the networkx graph (the API the codemod uses)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx

SCHEMA_VERSION = "1.0"

STATIC, WEIGHTS, MODE, RUNTIME, UNKNOWN = "static", "weights", "mode", "runtime", "unknown"
#: Classification order: a branch is classified by the most dynamic factor it depends on.
KIND_ORDER = (STATIC, WEIGHTS, MODE, RUNTIME)
KIND_BIT = {STATIC: 1, WEIGHTS: 2, MODE: 4, RUNTIME: 8, UNKNOWN: 16}

#: Hierarchy levels, from the roots to the terminal ops.
LEVELS = ("hardware", "model_args", "derived", "config_keys", "per_call_inputs", "branches", "terminal_ops")

#: Node category -> hierarchy level.
CATEGORY_LEVEL = {
    "hardware": "hardware",
    "env": "hardware",
    "model": "model_args",
    "model_arg": "model_args",
    "module_arg": "model_args",
    "weights": "model_args",
    "attr": "derived",
    "method": "derived",
    "local": "derived",
    "param": "derived",
    "function": "derived",
    "self_attr": "derived",
    "global": "derived",
    "fact": "derived",
    "extern": "derived",
    "unknown": "derived",
    "key": "config_keys",
    "definition": "config_keys",
    "input": "per_call_inputs",
    "mode": "per_call_inputs",
    "branch": "branches",
    "op": "terminal_ops",
}

#: Categories that are root parameters when nothing flows into them, and the kind they contribute.
ROOT_KIND = {
    "hardware": STATIC,
    "env": STATIC,
    "model": STATIC,
    "model_arg": STATIC,
    "module_arg": STATIC,
    "weights": WEIGHTS,
    "input": RUNTIME,
    "mode": MODE,
    "unknown": UNKNOWN,
}


@dataclass
class Guard:
    """One condition a definition or read sits under: the branch, which arm, and its source text."""

    branch: str
    arm: str
    text: str

    def describe(self) -> str:
        if self.arm in ("then", "case", "called"):
            return self.text
        if self.arm == "rhs":
            return f"short-circuit({self.text})"
        return f"not ({self.text})"


@dataclass
class ConfigRead:
    """One place the module reaches configuration: a dict key, a ModelArgs attribute or method."""

    name: str
    kind: str  # "key" | "attr" | "method"
    via: str  # how it was reached, e.g. 'model_config["K"]', 'self.args.get_model_config()["K"]'
    loc: str  # file:line:col
    function: str
    node: str
    resolved: bool
    in_condition: bool = False
    default: str | None = None
    called_with: list[str] | None = None
    guards: list[str] = field(default_factory=list)
    phase: str = "forward"  # "forward" (per call) or "construction" (__init__)
    note: str | None = None


@dataclass
class Definition:
    """One definition of a config key (or ModelArgs attribute), with its guards and whether it survives."""

    id: str
    name: str
    kind: str  # "key" | "attr"
    loc: str
    end_line: int
    function: str
    value: str
    value_kind: str  # "value" | "lambda" | "function" | "comprehension" | "property" | "class" | "method"
    params: list[str] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    order: int = 0
    shadowed_by: list[str] = field(default_factory=list)
    live_when: str | None = None
    deps: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return not self.shadowed_by


@dataclass
class Hop:
    node: str
    label: str
    loc: str | None


@dataclass
class Branch:
    """A branching construct and what decides it."""

    id: str
    loc: str  # file:line:col of the test expression (the address the codemod uses)
    stmt_loc: str  # file:line:col of the statement / expression node
    construct: str  # if | elif | ifexp | boolop | assert | match | while | comprehension-if
    test: str
    function: str
    side: str  # "module" | "helper" | "config"
    phase: str  # "forward" | "construction" | "config"
    classification: str = STATIC
    factors: list[str] = field(default_factory=list)
    topology: list[str] = field(default_factory=list)  # e.g. ["galaxy"], ["not galaxy"], ["mesh_1d"]
    mode: list[str] = field(default_factory=list)  # e.g. ["decode"], ["not prefill"]
    facts: list[str] = field(default_factory=list)  # e.g. ["model-name", "env"]
    chain: dict[str, list[Hop]] = field(default_factory=dict)
    parent: str | None = None
    guards: list[str] = field(default_factory=list)


@dataclass
class OpCall:
    op: str
    loc: str
    function: str
    spelled: str
    phase: str
    guards: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)  # helper call chain from the module, e.g. ["tt_all_reduce"]


@dataclass
class FactSite:
    """A sub-expression that states a topology or mode fact, or is the mode itself (``fact == "mode"``).

    ``fact`` is ``galaxy`` / ``mesh_1d`` / ``single_device`` / ``mode:decode`` / ``mode:prefill`` with a
    ``polarity`` of +1 (the expression is true when the fact holds) or -1 (when it does not), or ``mode`` (the
    expression evaluates to the mode; ``mode_form`` says whether the function spells it as the ``Mode`` enum
    or as a string). Positions are the expression's start and end (line, column as in ``loc``).
    """

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    function: str
    phase: str  # "forward" | "construction"
    fact: str
    polarity: int
    mode_form: str = "str"  # "enum" | "str"

    @property
    def loc(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass
class Skipped:
    loc: str
    what: str
    reason: str
    severity: str = "info"  # "info" | "warning"


@dataclass
class Analysis:
    """Everything trace-deps found. ``graph`` edges point from a dependency to what depends on it."""

    module: str
    config: str | None
    module_class: str | None
    config_class: str | None
    files: list[str]
    graph: nx.DiGraph
    reads: list[ConfigRead]
    definitions: dict[str, list[Definition]]
    attr_definitions: dict[str, list[Definition]]
    branches: list[Branch]
    ops: list[OpCall]
    paths: dict[str, list[str]]
    construction_ops: list[str]
    roots: dict[str, list[str]]
    levels: dict[str, list[str]]
    skipped: list[Skipped]
    stats: dict[str, Any]
    assumptions: dict[str, str] = field(default_factory=dict)
    fact_sites: list[FactSite] = field(default_factory=list)

    # -- lookups the codemod uses -------------------------------------------------------------------
    def branch_at(self, file: str, line: int, col: int | None = None) -> Branch | None:
        """The branch whose test (or statement) starts at ``file:line[:col]`` (file may be a path tail)."""
        best = None
        for branch in self.branches:
            for where in (branch.loc, branch.stmt_loc):
                bfile, bline, bcol = where.rsplit(":", 2)
                if not (bfile == file or bfile.endswith("/" + file) or file.endswith("/" + bfile)):
                    continue
                if int(bline) != line:
                    continue
                if col is None or int(bcol) == col:
                    if col is not None:
                        return branch
                    best = best or branch
        return best

    def branches_by_loc(self) -> dict[str, Branch]:
        return {b.loc: b for b in self.branches}

    def keys_read(self) -> list[str]:
        return sorted({r.name for r in self.reads if r.kind == "key"})

    def node(self, node_id: str) -> dict[str, Any]:
        return dict(self.graph.nodes[node_id])

    def why(self, name: str, limit: int = 12) -> list[list[Hop]]:
        from .graphing import why_paths

        return why_paths(self, name, limit=limit)

    def restrict(self, mode: str | None = None, topology: str | None = None) -> Analysis:
        from .graphing import restrict

        return restrict(self, mode=mode, topology=topology)

    def to_dict(self) -> dict[str, Any]:
        from .export import to_json_dict

        return to_json_dict(self)


def as_plain(obj: Any) -> Any:
    """Dataclass -> dict recursively (for JSON)."""
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    return obj
