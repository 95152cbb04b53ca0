"""trace-deps: static dependency tracing of TTTv1 modules (never imports or runs the analysed code).

Public API (shared with the refactor codemod)::

    from tttv2_tools.trace_dependencies import analyze
    a = analyze("tttv1/tt/mlp.py", "tttv1/tt/model_config.py")
    a.graph                      # networkx.DiGraph (built on first use), edges point from a dependency to its dependant
    a.dependencies               # the same graph without networkx (graph.Graph: nodes, edges, predecessors, ...)
    a.branch_at("mlp.py", 91)    # classification (static / mode / runtime / weights) + proof chain
    a.definitions["FF1_3_TG_PROGCFG"], a.paths["decode/galaxy"], a.why("DECODE_MLP_W2_PRG_CONFIG")
    decide(a.branch_at("mlp.py", 91), topology="2d", mode="decode")   # True / False / None
    Analysis.from_json(a.to_json()) == a                              # pure data: save, load, query again
    node_at(libcst_wrapper, 91, 11)                                   # the libcst node at a location
"""

from .api import analyze
from .errors import TraceError, UsageError
from .locate import node_at, node_for, parse_loc
from .model import (
    KIND_ORDER,
    LEVELS,
    MODE,
    RUNTIME,
    SCHEMA_VERSION,
    STATIC,
    UNKNOWN,
    WEIGHTS,
    Analysis,
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
from .query import arm, decide, deciding_facts, focus, restrict, why_paths
from .serial import SchemaError
from .sites import decide_fact

__all__ = [
    "KIND_ORDER",
    "LEVELS",
    "MODE",
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
    "FactSite",
    "Guard",
    "Hop",
    "OpCall",
    "SchemaError",
    "Skipped",
    "Span",
    "TraceError",
    "UsageError",
    "analyze",
    "arm",
    "decide",
    "decide_fact",
    "deciding_facts",
    "focus",
    "node_at",
    "node_for",
    "parse_loc",
    "restrict",
    "why_paths",
]
