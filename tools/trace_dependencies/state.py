"""The one state object every part of the engine shares, split by lifetime: the inputs and options
(:class:`State`), memo tables that only save work (:class:`Caches`), the expansion worklist (:class:`Worklist`)
and what the analysis found (:class:`Results`). Plus the typed records the engine hands to ``graphing.build``."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .graph import Graph
from .index import ClassInfo, ModuleIndex
from .records import Skipped
from .scan import BranchSite, FuncInfo, Guards
from .source import Project, SourceFile


@dataclass
class DefSite:
    """One definition found by composing the config (ModelArgs.__init__ and the methods it calls, or the config
    functions), in execution order."""

    name: str
    kind: str  # key | attr
    func: FuncInfo
    value: ast.expr | None
    source: ast.expr | None
    line: int
    col: int  # character column
    end_line: int
    guards: Guards
    order: int
    value_kind: str = "value"
    env: dict[str, object] = field(default_factory=dict)
    via: tuple[str, ...] = ()
    dynamic: str | None = None
    only_if_absent: bool = (
        False  # model_config.setdefault(KEY, value): never overwrites an earlier definition
    )

    @property
    def loc(self) -> str:
        return f"{self.func.file.name}:{self.line}:{self.col}"

    @property
    def id(self) -> str:
        suffix = f":{self.name}" if self.value_kind == "comprehension" or self.env else ""
        return f"def:{self.loc}{suffix}"


@dataclass
class CallEdge:
    """A call from one analysed function to another, under the guards of the call site."""

    caller: str
    callee: str
    guards: Guards
    loc: str
    args: dict[str, object] = field(
        default_factory=dict
    )  # parameter -> what the call passes (decision.close)


@dataclass
class ReadRecord:
    """One config read as the engine records it (``graphing.build`` turns it into a public ``ConfigRead``)."""

    name: str
    kind: str  # key | attr | method
    via: str
    loc: str
    function: str
    node: str
    in_condition: bool
    guards: Guards
    phase: str
    func: str  # FuncInfo.id of the reading function
    default: str | None = None
    called_with: list[str] | None = None
    note: str | None = None


@dataclass
class OpRecord:
    """One terminal ttnn op call as the engine records it."""

    op: str
    loc: str
    function: str
    spelled: str
    phase: str
    guards: Guards
    via: tuple[str, ...]
    func: str  # FuncInfo.id of the calling function


@dataclass
class Caches:
    """Memo tables: dropping any of them changes no result, only the time it takes."""

    methods: dict[tuple[int, str], FuncInfo | None] = field(default_factory=dict)
    mro: dict[int, list[ClassInfo]] = field(default_factory=dict)
    imports: dict[tuple[str, str], FuncInfo | None] = field(default_factory=dict)
    self_sites: dict[tuple[int, str], list] = field(default_factory=dict)
    facts: dict[str, list] = field(default_factory=dict)
    attr_roles: dict[int, tuple] = field(default_factory=dict)
    name_roles: dict[tuple[str, str], object] = field(default_factory=dict)
    roles_active: set[tuple[str, str]] = field(default_factory=set)
    fact_trees: dict[str, object] = field(default_factory=dict)
    call_deps: dict[int, tuple[ast.AST, frozenset[str]]] = field(default_factory=dict)
    config_callers: dict[str, list] | None = None
    builders: dict[str, FuncInfo] | None = None
    entry_builders: list[FuncInfo] | None = None
    constants: dict[str, dict[str, object]] = field(default_factory=dict)
    expr_loops: dict[str, dict[int, tuple]] = field(default_factory=dict)
    reaching: dict[str, dict[int, tuple]] = field(default_factory=dict)  # FuncInfo.id -> flow.reaching()
    # FuncInfo.id -> local name -> the values put into it in place (``pieces.append(piece)``)
    local_mutations: dict[str, dict[str, list[ast.expr]]] = field(default_factory=dict)


@dataclass
class Worklist:
    """Graph nodes waiting to be expanded, and the closure being computed (lambda handling, see binding.py)."""

    pending: deque[str] = field(default_factory=deque)
    payload: dict[str, object] = field(default_factory=dict)
    inline: tuple[FuncInfo, set[str]] | None = None


@dataclass
class Results:
    """What the analysis found: the graph and the records ``graphing.build`` turns into an ``Analysis``."""

    g: Graph = field(default_factory=Graph)
    funcs: dict[str, FuncInfo] = field(default_factory=dict)
    branch_index: dict[str, tuple[BranchSite, FuncInfo]] = field(default_factory=dict)
    entry_params: dict[tuple[str, str], str | None] = field(default_factory=dict)
    bound: set[tuple[int, str]] = field(default_factory=set)
    skipped: list[Skipped] = field(default_factory=list)
    skip_seen: set[tuple[str, str, str]] = field(default_factory=set)
    reads: list[ReadRecord] = field(default_factory=list)
    read_locs: set[tuple[str, str]] = field(default_factory=set)
    ops: list[OpRecord] = field(default_factory=list)
    scanned: dict[str, set[str]] = field(default_factory=dict)
    scan_via: dict[str, tuple[str, ...]] = field(default_factory=dict)
    call_edges: list[CallEdge] = field(default_factory=list)
    module_branches: dict[str, str] = field(default_factory=dict)  # branch id -> side
    entry_ids: list[str] = field(default_factory=list)
    branch_phase: dict[str, set[str]] = field(default_factory=dict)
    key_defs: dict[str, list[DefSite]] = field(default_factory=dict)
    attr_defs: dict[str, list[DefSite]] = field(default_factory=dict)
    dynamic_defs: list[DefSite] = field(default_factory=list)
    composed: bool = False
    order: int = 0
    param_consts: dict[tuple[str, str], set | None] = field(default_factory=dict)
    param_roles: dict[tuple[str, str], object] = field(default_factory=dict)
    deferred_reads: list[tuple] = field(default_factory=list)  # (ExprSite, FuncInfo, phase, called)
    param_key_uses: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)


@dataclass
class State:
    """The inputs and options of one analysis plus the three groups above."""

    project: Project
    module: SourceFile
    config: SourceFile | None
    entry: str | None
    follow_helpers: bool
    progress: Callable[[str], None]
    indexes: dict[str, ModuleIndex] = field(default_factory=dict)
    mindex: ModuleIndex | None = None
    cindex: ModuleIndex | None = None
    consumer: ClassInfo | None = None
    config_chain: list[ClassInfo] = field(default_factory=list)
    config_class: ClassInfo | None = None
    cache: Caches = field(default_factory=Caches)
    work: Worklist = field(default_factory=Worklist)
    out: Results = field(default_factory=Results)


class Part:
    """Base of the engine's parts (lookup, nodes, roles, ...): they share one :class:`State` and its groups."""

    st: State
    cache: Caches
    work: Worklist
    out: Results
