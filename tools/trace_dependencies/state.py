"""The one state object every part of the engine shares, split by lifetime: the inputs and options
(:class:`State`), memo tables that only save work (:class:`Caches`), the expansion worklist (:class:`Worklist`)
and what the analysis found (:class:`Results`). Plus the typed records the engine hands to ``graphing.build``."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable

from .graph import Graph
from .index import ClassInfo, ModuleIndex
from .records import Skipped
from .scan import BranchSite, ByValue, FuncInfo, Guards
from .source import Project, SourceFile


# Engine-internal records: plain classes with slots, compared by value as the dataclasses they were (scan.ByValue).
class DefSite(ByValue):
    """One definition found by composing the config (ModelArgs.__init__ and the methods it calls, or the config
    functions), in execution order."""

    __slots__ = _compared = (
        "name",
        "kind",
        "func",
        "value",
        "source",
        "line",
        "col",
        "end_line",
        "guards",
        "order",
        "value_kind",
        "env",
        "via",
        "dynamic",
        "only_if_absent",
    )

    def __init__(
        self,
        name: str,
        kind: str,  # key | attr
        func: FuncInfo,
        value: ast.expr | None,
        source: ast.expr | None,
        line: int,
        col: int,  # character column
        end_line: int,
        guards: Guards,
        order: int,
        value_kind: str = "value",
        env: dict[str, object] | None = None,
        via: tuple[str, ...] = (),
        dynamic: str | None = None,
        only_if_absent: bool = False,  # model_config.setdefault(KEY, value): never overwrites an earlier definition
    ) -> None:
        self.name = name
        self.kind = kind
        self.func = func
        self.value = value
        self.source = source
        self.line = line
        self.col = col
        self.end_line = end_line
        self.guards = guards
        self.order = order
        self.value_kind = value_kind
        self.env = {} if env is None else env
        self.via = via
        self.dynamic = dynamic
        self.only_if_absent = only_if_absent

    @property
    def loc(self) -> str:
        return f"{self.func.file.name}:{self.line}:{self.col}"

    @property
    def id(self) -> str:
        suffix = f":{self.name}" if self.value_kind == "comprehension" or self.env else ""
        return f"def:{self.loc}{suffix}"


class CallEdge(ByValue):
    """A call from one analysed function to another, under the guards of the call site."""

    __slots__ = _compared = ("caller", "callee", "guards", "loc", "args")

    def __init__(
        self,
        caller: str,
        callee: str,
        guards: Guards,
        loc: str,
        args: dict[str, object] | None = None,  # parameter -> what the call passes (decision.close)
    ) -> None:
        self.caller = caller
        self.callee = callee
        self.guards = guards
        self.loc = loc
        self.args = {} if args is None else args


class ReadRecord(ByValue):
    """One config read as the engine records it (``graphing.build`` turns it into a public ``ConfigRead``)."""

    __slots__ = _compared = (
        "name",
        "kind",
        "via",
        "loc",
        "function",
        "node",
        "in_condition",
        "guards",
        "phase",
        "func",
        "default",
        "called_with",
        "note",
    )

    def __init__(
        self,
        name: str,
        kind: str,  # key | attr | method
        via: str,
        loc: str,
        function: str,
        node: str,
        in_condition: bool,
        guards: Guards,
        phase: str,
        func: str,  # FuncInfo.id of the reading function
        default: str | None = None,
        called_with: list[str] | None = None,
        note: str | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.via = via
        self.loc = loc
        self.function = function
        self.node = node
        self.in_condition = in_condition
        self.guards = guards
        self.phase = phase
        self.func = func
        self.default = default
        self.called_with = called_with
        self.note = note


class OpRecord(ByValue):
    """One terminal ttnn op call as the engine records it."""

    __slots__ = _compared = ("op", "loc", "function", "spelled", "phase", "guards", "via", "func")

    def __init__(
        self,
        op: str,
        loc: str,
        function: str,
        spelled: str,
        phase: str,
        guards: Guards,
        via: tuple[str, ...],
        func: str,  # FuncInfo.id of the calling function
    ) -> None:
        self.op = op
        self.loc = loc
        self.function = function
        self.spelled = spelled
        self.phase = phase
        self.guards = guards
        self.via = via
        self.func = func


# The groups of state are plain classes, not dataclasses: nothing compares or prints them, and a generated
# __init__ over this many fields is compiled at every start-up.
class Caches:
    """Memo tables: dropping any of them changes no result, only the time it takes."""

    def __init__(self) -> None:
        self.methods: dict[tuple[int, str], FuncInfo | None] = {}
        self.mro: dict[int, list[ClassInfo]] = {}
        self.imports: dict[tuple[str, str], FuncInfo | None] = {}
        self.self_sites: dict[tuple[int, str], list] = {}
        self.facts: dict[str, list] = {}
        self.attr_roles: dict[int, tuple] = {}
        self.name_roles: dict[tuple[str, str], object] = {}
        self.roles_active: set[tuple[str, str]] = set()
        self.fact_trees: dict[str, object] = {}
        self.call_deps: dict[int, tuple[ast.AST, frozenset[str]]] = {}
        # deps.py: what one call adds by itself and the sub-expressions it leaves to the walk, per call node; valid
        # while the roles are (role_epoch counts the times binding.py forgot the roles)
        self.call_parts: dict[int, tuple[ast.AST, FuncInfo, int, frozenset[str], list]] = {}
        self.role_epoch = 0
        self.config_callers: dict[str, list] | None = None
        self.builders: dict[str, FuncInfo] | None = None
        self.entry_builders: list[FuncInfo] | None = None
        self.constants: dict[str, dict[str, object]] = {}
        self.expr_loops: dict[str, dict[int, tuple]] = {}
        self.reaching: dict[str, dict[int, tuple]] = {}  # FuncInfo.id -> flow.reaching()
        # FuncInfo.id -> local name -> the values put into it in place (``pieces.append(piece)``)
        self.local_mutations: dict[str, dict[str, list[ast.expr]]] = {}
        # FuncInfo.id -> the locals that may be filled in place (pass 1's calls and subscript assignments)
        self.filled_names: dict[str, frozenset[str]] = {}
        self.param_nodes: dict[tuple[str, str], str] = {}  # (FuncInfo.id, parameter) -> its node (nodes.py)


class Worklist:
    """Graph nodes waiting to be expanded, and the closure being computed (lambda handling, see binding.py)."""

    def __init__(self) -> None:
        self.pending: deque[str] = deque()
        self.payload: dict[str, object] = {}
        self.inline: tuple[FuncInfo, set[str]] | None = None


class Results:
    """What the analysis found: the graph and the records ``graphing.build`` turns into an ``Analysis``."""

    def __init__(self) -> None:
        self.g: Graph = Graph()
        self.funcs: dict[str, FuncInfo] = {}
        self.branch_index: dict[str, tuple[BranchSite, FuncInfo]] = {}
        self.entry_params: dict[tuple[str, str], str | None] = {}
        self.bound: set[tuple[int, str]] = set()
        self.skipped: list[Skipped] = []
        self.skip_seen: set[tuple[str, str, str]] = set()
        self.reads: list[ReadRecord] = []
        self.read_locs: set[tuple[str, str]] = set()
        self.ops: list[OpRecord] = []
        self.scanned: dict[str, set[str]] = {}
        self.scan_via: dict[str, tuple[str, ...]] = {}
        self.call_edges: list[CallEdge] = []
        self.module_branches: dict[str, str] = {}  # branch id -> side
        self.entry_ids: list[str] = []
        self.branch_phase: dict[str, set[str]] = {}
        self.key_defs: dict[str, list[DefSite]] = {}
        self.attr_defs: dict[str, list[DefSite]] = {}
        self.dynamic_defs: list[DefSite] = []
        self.composed: bool = False
        self.order: int = 0
        self.param_consts: dict[tuple[str, str], set | None] = {}
        self.param_roles: dict[tuple[str, str], object] = {}
        self.deferred_reads: list[tuple] = []  # (ExprSite, FuncInfo, phase, called)
        self.param_key_uses: dict[tuple[str, str], tuple[str, int]] = {}
        # the role (None or one from the name) of each parameter looked up before any call site gave it one; a call
        # site giving another one later makes the run stale (binding.RolesChanged, engine.run redoes it)
        self.role_misses: dict[tuple[str, str], object] = {}


class State:
    """The inputs and options of one analysis plus the three groups above."""

    def __init__(
        self,
        project: Project,
        module: SourceFile,
        config: SourceFile | None,
        entry: str | None,
        follow_helpers: bool,
        progress: Callable[[str], None],
    ) -> None:
        self.project = project
        self.module = module
        self.config = config
        self.entry = entry
        self.follow_helpers = follow_helpers
        self.progress = progress
        self.indexes: dict[str, ModuleIndex] = {}
        self.mindex: ModuleIndex | None = None
        self.cindex: ModuleIndex | None = None
        self.consumer: ClassInfo | None = None
        self.class_choice: str | None = None  # why the analysed class was chosen among several (engine.py)
        self.config_chain: list[ClassInfo] = []
        self.config_class: ClassInfo | None = None
        self.cache: Caches = Caches()
        self.work: Worklist = Worklist()
        self.out: Results = Results()


class Part:
    """Base of the engine's parts (lookup, nodes, roles, ...): they share one :class:`State` and its groups."""

    st: State
    cache: Caches
    work: Worklist
    out: Results
