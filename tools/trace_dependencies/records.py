"""The plain data an analysis is made of (no behaviour beyond small properties; no networkx)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = "2.0"

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
        if self.arm == "unless-then":
            return f"not left under ({self.text})"
        if self.arm == "unless-else":
            return f"not left under not ({self.text})"
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
    function_id: str = ""  # file:qualname of the reading function (the call graph's node)


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
    only_if_absent: bool = False  # setdefault(): defines the key only when no earlier definition ran

    @property
    def live(self) -> bool:
        return not self.shadowed_by


@dataclass
class Hop:
    node: str
    label: str
    loc: str | None


@dataclass
class Span:
    """Where a construct starts and ends: 1-based lines, 0-based CHARACTER columns (libcst's convention; ``ast``
    counts UTF-8 bytes), end exclusive."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int


@dataclass
class Branch:
    """A branching construct and what decides it. ``decision`` is its test compiled to facts (see
    :func:`decide`): ``["fact", name, polarity]``, ``["not", tree]``, ``["and"|"or", [trees]]``, ``["const", bool]``
    or None when the test depends on something other than topology / mode facts."""

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
    function_id: str = ""
    span: Span | None = None  # the statement / expression (an ``if`` with all its arms)
    test_span: Span | None = None  # the test expression
    decision: Any = None


@dataclass
class OpCall:
    op: str
    loc: str
    function: str
    spelled: str
    phase: str
    guards: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)  # helper call chain from the module, e.g. ["tt_all_reduce"]
    function_id: str = ""


@dataclass
class CallLink:
    """A call from one analysed function to another (ids ``file:qualname``), under the guards of the call site."""

    caller: str
    callee: str
    guards: list[str] = field(default_factory=list)
    loc: str = ""
    args: dict[str, Any] = field(default_factory=dict)  # parameter -> ["value", constant] or a fact tree


@dataclass
class FactSite:
    """A sub-expression that states a topology or mode fact, or is the mode itself (``fact == "mode"``).

    ``fact`` is ``galaxy`` / ``mesh_1d`` / ``single_device`` / ``mode:decode`` / ``mode:prefill`` with a
    ``polarity`` of +1 (the expression is true when the fact holds) or -1 (when it does not), or ``mode`` (the
    expression evaluates to the mode; ``mode_form`` says whether its function spells it as the ``Mode`` enum or
    as a string). Branch decisions cover whole tests; fact sites also cover the operands of compound tests and
    facts used as values (``sharded=(mode == Mode.DECODE)``), for a rewriter that specialises the code.
    """

    file: str
    span: Span  # the expression, character columns
    function: str
    phase: str  # "forward" | "construction"
    fact: str
    polarity: int
    mode_form: str = "str"  # "enum" | "str"

    @property
    def loc(self) -> str:
        return f"{self.file}:{self.span.start_line}:{self.span.start_col}"


@dataclass
class Skipped:
    loc: str
    what: str
    reason: str
    severity: str = "info"  # "info" | "warning"
