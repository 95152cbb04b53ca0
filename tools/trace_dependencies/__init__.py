"""trace-deps: static dependency tracing of TTTv1 modules (never imports or runs the analysed code).

Public API (shared with the refactor codemod)::

    from tttv2_tools.trace_dependencies import analyze
    a = analyze("tttv1/tt/mlp.py", "tttv1/tt/model_config.py")
    a.graph                      # networkx.DiGraph, edges point from a dependency to its dependant
    a.branch_at("mlp.py", 91)    # classification (static / mode / runtime / weights) + proof chain
    a.definitions["FF1_3_TG_PROGCFG"], a.paths["decode/galaxy"], a.why("DECODE_MLP_W2_PRG_CONFIG")
"""

from .api import analyze
from .errors import TraceError, UsageError
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
    ConfigRead,
    Definition,
    FactSite,
    Guard,
    Hop,
    OpCall,
    Skipped,
)
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
    "ConfigRead",
    "Definition",
    "FactSite",
    "Guard",
    "Hop",
    "OpCall",
    "Skipped",
    "TraceError",
    "UsageError",
    "analyze",
    "decide_fact",
]
