"""collect-cases: record the configurations TTTv1 modules see while demos run, and write them into tests.

Public API (the refactor codemod's ``--cases STORE`` reads the store through it)::

    from tttv2_tools.collect_cases import load_cases
    cases = load_cases("cases.sqlite", "tttv1.tt.mlp:MLP", topology="1d", mode="decode")
    cases[0].flat["mesh_shape"], cases[0].flat["x_shape"], cases[0].flat["w1_dtype"], cases[0].hits

``load_cases`` returns a ``list[Case]`` (see ``Case``); the CLI is ``collect-cases`` (``record``, ``list``,
``export``, ``import``, ``emit``, ``sweep``) and the pytest plugin takes ``--collect-cases=STORE``.
"""

from __future__ import annotations

import os

from .cases import MODES, TOPOLOGIES, Case, select, topology_of
from .errors import CollectCasesError, EmitError, StoreError, TargetError
from .fields import DEFAULT_RULES, FieldRule, UserField
from .store import SCHEMA_VERSION, CaseStore
from .targets import TTTV1_TARGETS, Target, parse_target

__all__ = [
    "DEFAULT_RULES",
    "MODES",
    "SCHEMA_VERSION",
    "TOPOLOGIES",
    "TTTV1_TARGETS",
    "Case",
    "CaseStore",
    "CollectCasesError",
    "EmitError",
    "FieldRule",
    "StoreError",
    "Target",
    "TargetError",
    "UserField",
    "load_cases",
    "topology_of",
]

_MODE_ORDER = {m: i for i, m in enumerate(MODES)}


def _order(case: Case):
    from .fields import canonical_json

    return (
        case.mesh_shape or (),
        _MODE_ORDER.get(case.mode, len(MODES)),
        case.flat.get("model_name") or "",
        canonical_json(case.fields),
    )


def load_cases(
    store: str | os.PathLike,
    target: str | Target,
    topology: str | None = None,
    mode: str | None = None,
) -> list[Case]:
    """The distinct cases of ``target`` in ``store`` on ``topology`` (``"1d"``: 1×N meshes, ``"2d"``: Galaxy) in
    ``mode`` (``"decode"`` / ``"prefill"``); ``None`` keeps all. Sorted by mesh, mode, model, then fields.

    Raises ``StoreError`` for a missing or foreign store, ``TargetError`` for a malformed target name and
    ``ValueError`` for an unknown topology or mode. An empty list means nothing was recorded for it.
    """
    if topology not in (None, *TOPOLOGIES):
        raise ValueError(f"load_cases: topology must be one of {TOPOLOGIES} or None, got {topology!r}")
    if mode not in (None, *MODES):
        raise ValueError(f"load_cases: mode must be one of {MODES} or None, got {mode!r}")
    name = target.name if isinstance(target, Target) else parse_target(target).name
    with CaseStore(store) as opened:
        cases = opened.cases(name)
    return sorted(select(cases, topology, mode), key=_order)
