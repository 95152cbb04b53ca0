"""The result of an analysis: :class:`Analysis`, pure data (plain dataclasses from records.py plus a networkx graph)
that can be saved with ``to_json()`` and loaded with ``Analysis.from_json()``; every query works on a loaded one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

from . import query, serial
from .records import (
    CATEGORY_LEVEL,
    KIND_BIT,
    KIND_ORDER,
    LEVELS,
    MODE,
    ROOT_KIND,
    RUNTIME,
    SCHEMA_VERSION,
    STATIC,
    UNKNOWN,
    WEIGHTS,
    Branch,
    CallLink,
    ConfigRead,
    Definition,
    FactSite,
    Guard,
    Hop,
    OpCall,
    Skipped,
    Span,
)

TYPE_CHECKING = False  # typing is not imported at run time: about 5 ms of every trace-deps start-up

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    import networkx as nx

    from .graph import Graph


@dataclass(eq=False)
class Analysis:
    """Everything trace-deps found. ``dependencies`` (and ``graph``, the same as networkx) edges point from a
    dependency to what depends on it.

    Two analyses are equal when all their data is (the graph by its nodes, edges and their attributes);
    ``seconds`` (how long the analysis took) and ``sources`` (where each file of ``files`` is on this machine) are
    not data and are not compared or saved."""

    module: str
    config: str | None
    module_class: str | None
    config_class: str | None
    files: list[str]
    dependencies: Graph  # the dependency graph (graph.py); ``graph`` is the same as a networkx.DiGraph
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
    calls: list[CallLink] = field(default_factory=list)  # the call graph between analysed functions
    entries: list[str] = field(default_factory=list)  # ids of the entry functions (__init__, forward)
    entry: str | None = None  # the per-call entry method analysed ("forward" or "__call__")
    class_choice: str | None = None  # why module_class was chosen among several classes with an entry
    fact_sites: list[FactSite] = field(default_factory=list)  # facts inside expressions (for the codemod)
    seconds: float = 0.0
    # display name -> the file it names: a file outside the inputs' common folder is shown by its bare name
    sources: dict[str, Path] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Analysis):
            return NotImplemented
        for f in fields(self):
            if f.name in ("seconds", "sources"):
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name == "dependencies":
                a, b = _graph_data(a), _graph_data(b)
            if a != b:
                return False
        return True

    @property
    def graph(self) -> nx.DiGraph:
        """The dependency graph as a ``networkx.DiGraph`` (edges point from a dependency to its dependant), built
        on first use (networkx is imported only then). It is a copy: change ``dependencies`` to change the
        analysis."""
        cached = self.__dict__.get("_networkx")
        if cached is None or cached[0] is not self.dependencies:
            cached = (self.dependencies, self.dependencies.to_networkx())
            self.__dict__["_networkx"] = cached
        return cached[1]

    @property
    def input_paths(self) -> list[Path]:
        """The real paths of every file the analysis read (module, config, helper files): what a tool must never
        write onto. Not data (paths of this machine): empty for a loaded analysis."""
        return list(self.__dict__.get("_input_paths", ()))

    __hash__ = None  # mutable data

    # -- saving and loading ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON form (schema in docs/trace_deps.md)."""
        return serial.to_json_dict(self)

    def to_json(self) -> str:
        """The JSON text of :meth:`to_dict` (one top-level field a line)."""
        return serial.to_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Analysis:
        return serial.from_json_dict(data, cls)

    @classmethod
    def from_json(cls, text: str | bytes) -> Analysis:
        """Load what :meth:`to_json` wrote; raises ``SchemaError`` (a ``ValueError``) for anything else."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise serial.SchemaError(f"not JSON: {exc}") from exc
        return serial.from_json_dict(data, cls)

    # -- lookups the codemod uses -------------------------------------------------------------------------------
    def branch_at(self, file: str, line: int, col: int | None = None) -> Branch | None:
        """The branch whose test (or statement) starts at ``file:line[:col]`` (file may be a path tail; col is a
        character column)."""
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

    def unknowns(self) -> list[str]:
        """Ids of the explicit ``unknown:`` nodes (what could not be understood)."""
        return sorted(n for n, d in self.dependencies.nodes(data=True) if d.get("category") == "unknown")

    def keys_read(self) -> list[str]:
        return sorted({r.name for r in self.reads if r.kind == "key"})

    def node(self, node_id: str) -> dict[str, Any]:
        return dict(self.dependencies.nodes[node_id])

    def why(self, name: str, limit: int = 12) -> list[list[Hop]]:
        return query.why_paths(self, name, limit=limit)

    def restrict(self, mode: str | None = None, topology: str | None = None) -> Analysis:
        return query.restrict(self, mode=mode, topology=topology)

    def focus(self, name: str) -> Analysis:
        return query.focus(self, name)

    def decide(
        self, branch: Branch | str, topology: str | None = None, mode: str | None = None
    ) -> bool | None:
        """True / False / None: ``branch`` (a Branch, its id or ``file:line[:col]``) on ``topology`` in ``mode``,
        in every call context that reaches it (a helper's test on its parameters is closed with what each call
        site passes; None when the contexts disagree)."""
        return query.decide_in(self, self._branch(branch), topology=topology, mode=mode)

    def _branch(self, branch: Branch | str) -> Branch:
        if isinstance(branch, Branch):
            return branch
        for b in self.branches:
            if b.id == branch:
                return b
        file, _, rest = branch.partition(":")
        parts = rest.split(":")
        try:
            found = self.branch_at(file, int(parts[0]), int(parts[1]) if len(parts) > 1 else None)
        except ValueError:
            found = None
        if found is None:
            raise KeyError(f"branch: no branch at {branch!r}")
        return found


def _graph_data(g: Graph) -> tuple:
    nodes = sorted((n, sorted(d.items())) for n, d in g.nodes(data=True))
    edges = sorted((u, v, sorted(d.items())) for u, v, d in g.edges(data=True))
    return nodes, edges


__all__ = [
    "CATEGORY_LEVEL",
    "KIND_BIT",
    "KIND_ORDER",
    "LEVELS",
    "MODE",
    "ROOT_KIND",
    "RUNTIME",
    "SCHEMA_VERSION",
    "STATIC",
    "UNKNOWN",
    "WEIGHTS",
    "Analysis",
    "Branch",
    "CallLink",
    "ConfigRead",
    "Definition",
    "Guard",
    "Hop",
    "OpCall",
    "Skipped",
    "Span",
]
