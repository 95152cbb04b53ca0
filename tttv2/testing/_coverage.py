"""Parameter coverage of the building blocks: which values each block class was tested with, compared with the
configurations collect-cases recorded from real TTTv1 runs.

One table (``COVERAGE``) says, per TTTv2 class, which TTTv1 target and topology its recorded cases come from and
which parameters are compared; ``params_of_call`` reads them from a module's resolved config and a forward call,
``params_of_case`` from a recorded case (``tttv2_tools.collect_cases.Case``: per-device shapes and dtypes),
turning per-device shapes back into model dimensions with the mesh. A value a case does not determine (KV heads
when every device holds one KV head: they may be replicated) is ``None`` ("unknown"), and matches any tested
value. ``CoverageRecorder`` records the forwards of every block class while it is active (``TestSuite`` uses it,
and ``tttv2-coverage`` around a whole pytest run); ``coverage_report`` compares and lists the untested values and
combinations.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "COVERAGE",
    "ClassCoverage",
    "CoverageRecord",
    "CoverageRecorder",
    "CoverageReport",
    "coverage_report",
    "params_of_call",
    "params_of_case",
]


def _dtype(value) -> str | None:
    name = getattr(value, "name", value)
    return None if name is None else str(name).lower()


def _first(value):
    """The first of a per-chunk / per-tensor tuple (LM head chunks, K and V caches), or the value itself."""
    return value[0] if isinstance(value, tuple) and value and isinstance(value[0], (tuple, str)) else value


@dataclass(frozen=True)
class _Spec:
    target: str  # the TTTv1 class whose recorded cases this block replaces
    topology: str
    params: tuple[str, ...]
    from_config: Callable[[Any], dict]
    from_case: Callable[[dict, tuple[int, int]], dict]


def _mesh(case_mesh) -> tuple[int, int]:
    """(rows, cols) of a recorded mesh shape; a 1-D shape is one row."""
    shape = tuple(int(d) for d in case_mesh)
    return shape if len(shape) == 2 else (1, math.prod(shape))


# --- TTTv2 side: from the resolved config -------------------------------------------------------------------


def _mlp_config(cfg) -> dict:
    return dict(
        dim=cfg.dim,
        hidden_dim=cfg.hidden_dim,
        w1_w3_dtype=_dtype(cfg.w1_w3_dtype),
        w2_dtype=_dtype(cfg.w2_dtype),
    )


def _attention_config(cfg) -> dict:
    return dict(
        dim=cfg.dim,
        n_heads=cfg.n_heads,
        n_kv_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        wqkv_dtype=_dtype(cfg.wqkv_dtype),
        wo_dtype=_dtype(cfg.wo_dtype),
        kv_cache_dtype=_dtype(cfg.kv_cache_dtype),
    )


def _norm_config(cfg) -> dict:
    return dict(dim=cfg.dim)


def _embedding_config(cfg) -> dict:
    return dict(dim=cfg.dim, vocab_size=cfg.vocab_size, weights_dtype=_dtype(cfg.weights_dtype))


def _lm_head_config(cfg) -> dict:
    return dict(dim=cfg.dim, padded_vocab_size=cfg.padded_vocab_size, weights_dtype=_dtype(cfg.weights_dtype))


# --- TTTv1 side: from a recorded case (per-device shapes) ------------------------------------------------------


def _mlp_case(flat: dict, mesh: tuple[int, int]) -> dict:
    rows, cols = mesh
    two_d = min(mesh) > 1
    w1 = flat.get("w1_shape")
    x = flat.get("x_shape")
    return dict(
        dim=None if x is None else x[-1] * (cols if two_d else 1),
        hidden_dim=None if w1 is None else w1[-1] * (rows if two_d else rows * cols),
        w1_w3_dtype=flat.get("w1_dtype"),
        w2_dtype=flat.get("w2_dtype"),
    )


def _attention_case(flat: dict, mesh: tuple[int, int]) -> dict:
    rows, cols = mesh
    two_d = min(mesh) > 1
    heads_over = rows if two_d else rows * cols  # devices (1D) or mesh rows (2D) the heads are split over
    x, wo, wqkv, cache = (flat.get(k) for k in ("x_shape", "wo_shape", "wqkv_shape", "layer_past_shape"))
    head_dim = None if cache is None else _first(cache)[-1]
    n_heads = n_kv_heads = None
    if head_dim and wo is not None:
        n_heads = wo[-2] * heads_over // head_dim
        if wqkv is not None:
            local_kv = (wqkv[-1] // head_dim - n_heads // heads_over) // 2
            # one KV head per device may be a replicated one: the count is then unknown
            n_kv_heads = local_kv * heads_over if local_kv > 1 or heads_over == 1 else None
    return dict(
        dim=None if x is None else x[-1] * (cols if two_d else 1),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        wqkv_dtype=flat.get("wqkv_dtype"),
        wo_dtype=flat.get("wo_dtype"),
        kv_cache_dtype=_first(flat.get("layer_past_dtype")),
    )


def _norm_case(flat: dict, mesh: tuple[int, int]) -> dict:
    x = flat.get("x_shape")
    return dict(dim=None if x is None else x[-1] * (mesh[1] if min(mesh) > 1 else 1))


def _embedding_case(flat: dict, mesh: tuple[int, int]) -> dict:
    rows, cols = mesh
    weights = flat.get("weights_shape")
    per = cols if min(mesh) > 1 else rows * cols
    return dict(
        dim=None if weights is None else weights[-1] * per,
        vocab_size=None if weights is None else weights[-2],
        weights_dtype=flat.get("weights_dtype"),
    )


def _lm_head_case(flat: dict, mesh: tuple[int, int]) -> dict:
    rows, cols = mesh
    two_d = min(mesh) > 1
    x, chunks = flat.get("x_shape"), flat.get("output_weights_shape")
    padded = None
    if chunks is not None:
        width = sum(chunk[-1] for chunk in chunks)
        padded = width * (rows if two_d else rows * cols)
    return dict(
        dim=None if x is None else x[-1] * (cols if two_d else 1),
        padded_vocab_size=padded,
        weights_dtype=_first(flat.get("output_weights_dtype")),
    )


_ACTIVATION = ("mesh_shape", "mode", "seq_len")
_MLP = (*_ACTIVATION, "dim", "hidden_dim", "w1_w3_dtype", "w2_dtype")
_ATTENTION = (
    *_ACTIVATION,
    "dim",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "wqkv_dtype",
    "wo_dtype",
    "kv_cache_dtype",
)
_NORM = (*_ACTIVATION, "dim")
_EMBEDDING = ("mesh_shape", "seq_len", "dim", "vocab_size", "weights_dtype")  # one lookup for both modes
_LM_HEAD = (*_ACTIVATION, "dim", "padded_vocab_size", "weights_dtype")

COVERAGE: dict[str, _Spec] = {
    "MLP1D": _Spec("tttv1.tt.mlp:MLP", "1d", _MLP, _mlp_config, _mlp_case),
    "MLP2D": _Spec("tttv1.tt.mlp:MLP", "2d", _MLP, _mlp_config, _mlp_case),
    "Attention1D": _Spec(
        "tttv1.tt.attention:Attention", "1d", _ATTENTION, _attention_config, _attention_case
    ),
    "Attention2D": _Spec(
        "tttv1.tt.attention:Attention", "2d", _ATTENTION, _attention_config, _attention_case
    ),
    "RMSNorm1D": _Spec("tttv1.tt.rmsnorm:RMSNorm", "1d", _NORM, _norm_config, _norm_case),
    "RMSNorm2D": _Spec("tttv1.tt.distributed_norm:DistributedNorm", "2d", _NORM, _norm_config, _norm_case),
    "Embedding1D": _Spec(
        "tttv1.tt.embedding:Embedding", "1d", _EMBEDDING, _embedding_config, _embedding_case
    ),
    "Embedding2D": _Spec(
        "tttv1.tt.embedding:Embedding", "2d", _EMBEDDING, _embedding_config, _embedding_case
    ),
    "LMHead1D": _Spec("tttv1.tt.lm_head:LMHead", "1d", _LM_HEAD, _lm_head_config, _lm_head_case),
    "LMHead2D": _Spec("tttv1.tt.lm_head:LMHead", "2d", _LM_HEAD, _lm_head_config, _lm_head_case),
}


def _shape(x) -> tuple[int, ...] | None:
    shape = getattr(x, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def params_of_call(module, mode: str, x) -> dict[str, Any]:
    """The compared parameters of one forward call of ``module`` (a block in ``COVERAGE``) on input ``x``."""
    name = type(module).__name__
    spec = COVERAGE[name]
    cfg = module.config
    shape = _shape(x)
    seq_len = None if shape is None else shape[-1] if name.startswith("Embedding") else shape[-2]
    values = dict(mesh_shape=tuple(int(d) for d in cfg.mesh_device.shape), mode=mode, seq_len=seq_len)
    values.update(spec.from_config(cfg))
    return {p: values[p] for p in spec.params}


def params_of_case(class_name: str, case) -> dict[str, Any]:
    """The compared parameters of a recorded TTTv1 case, for the TTTv2 class that replaces its target."""
    spec = COVERAGE[class_name]
    flat = case.flat
    mesh = _mesh(flat["mesh_shape"])
    x = flat.get("x_shape")
    values = dict(mesh_shape=tuple(flat["mesh_shape"]), mode=flat.get("mode"))
    values["seq_len"] = None if x is None else x[-1] if class_name.startswith("Embedding") else x[-2]
    values.update(spec.from_case(flat, mesh))
    return {p: values.get(p) for p in spec.params}


@dataclass(frozen=True)
class CoverageRecord:
    """One tested configuration of one block class."""

    module: str
    params: tuple[tuple[str, Any], ...]

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.params)


class CoverageRecorder:
    """Records a ``CoverageRecord`` for every decode / prefill forward of a ``COVERAGE`` block class while active
    (``with recorder:``): the classes' forwards are wrapped on entry and restored on exit."""

    def __init__(self) -> None:
        self.records: set[CoverageRecord] = set()
        self._saved: list[tuple[type, str, Any]] = []

    def record(self, module, mode: str, x) -> None:
        self.records.add(
            CoverageRecord(type(module).__name__, tuple(params_of_call(module, mode, x).items()))
        )

    def __enter__(self) -> CoverageRecorder:
        from tttv2 import modules

        for name in COVERAGE:
            cls = getattr(modules, name)
            for mode in ("decode", "prefill"):
                method = f"{mode}_forward"
                self._saved.append((cls, method, cls.__dict__.get(method)))  # None: inherited
                setattr(cls, method, self._wrapped(getattr(cls, method), mode))
        return self

    def _wrapped(self, original, mode: str):
        recorder = self

        @functools.wraps(original)
        def forward(module, x, *args, **kwargs):
            if type(module).__name__ in COVERAGE:  # a subclass of a block is another block
                recorder.record(module, mode, x)
            return original(module, x, *args, **kwargs)

        return forward

    def __exit__(self, *exc) -> None:
        for cls, method, original in reversed(self._saved):
            if original is None:
                delattr(cls, method)
            else:
                setattr(cls, method, original)
        self._saved.clear()


@dataclass
class ClassCoverage:
    """One block class: tested and recorded values per parameter, and the recorded combinations no test ran."""

    module: str
    target: str
    topology: str
    params: tuple[str, ...]
    tested: list[dict[str, Any]]
    recorded: list[dict[str, Any]]
    untested_values: dict[str, list] = field(default_factory=dict)
    untested_combinations: list[dict[str, Any]] = field(default_factory=list)
    unknown: dict[str, int] = field(default_factory=dict)  # parameter → recorded cases that leave it unknown

    def values(self, param: str, which: str) -> list:
        rows = self.tested if which == "tested" else self.recorded
        return sorted({row[param] for row in rows if row[param] is not None}, key=repr)


def _covers(tested: dict, recorded: dict) -> bool:
    return all(value is None or tested.get(key) == value for key, value in recorded.items())


def _compare(name: str, tested: list[dict], recorded: list[dict]) -> ClassCoverage:
    spec = COVERAGE[name]
    entry = ClassCoverage(name, spec.target, spec.topology, spec.params, tested, recorded)
    for param in spec.params:
        seen = {row[param] for row in tested}
        missing = [value for value in entry.values(param, "recorded") if value not in seen]
        if missing:
            entry.untested_values[param] = missing
        unknown = sum(row[param] is None for row in recorded)
        if unknown:
            entry.unknown[param] = unknown
    unique = list({tuple(row.items()): row for row in recorded}.values())
    entry.untested_combinations = [row for row in unique if not any(_covers(t, row) for t in tested)]
    return entry


@dataclass
class CoverageReport:
    """Per block class: what was tested, what real runs recorded, and the gaps (see ``ClassCoverage``)."""

    classes: list[ClassCoverage]
    store: str

    @property
    def gaps(self) -> int:
        return sum(len(c.untested_combinations) for c in self.classes)

    def entry(self, module: str) -> ClassCoverage:
        for entry in self.classes:
            if entry.module == module:
                return entry
        raise KeyError(
            f"CoverageReport: no entry for {module!r}; have {', '.join(c.module for c in self.classes)}"
        )

    def to_dict(self) -> dict:
        return {
            "store": self.store,
            "classes": [
                {
                    "module": c.module,
                    "target": c.target,
                    "topology": c.topology,
                    "tested": len(c.tested),
                    "recorded": len(c.recorded),
                    "untested_values": {k: [repr(v) for v in vs] for k, vs in c.untested_values.items()},
                    "untested_combinations": [
                        {k: repr(v) for k, v in row.items()} for row in c.untested_combinations
                    ],
                    "unknown": c.unknown,
                }
                for c in self.classes
            ],
        }

    def tables(self) -> list:
        """Rich tables: one summary row per class, then per class the untested values and combinations."""
        from rich.table import Table

        summary = Table(title=f"Building-block parameter coverage against {self.store}")
        for column in ("block", "TTTv1 target", "tested configs", "recorded cases", "untested combinations"):
            summary.add_column(column, overflow="fold")  # wrap, never cut a name
        for c in self.classes:
            summary.add_row(
                c.module,
                f"{c.target} ({c.topology})",
                str(len(c.tested)),
                str(len(c.recorded)),
                str(len(c.untested_combinations)),
            )
        tables = [summary]
        for c in self.classes:
            if not (c.untested_values or c.untested_combinations):
                continue
            values = Table(title=f"{c.module}: parameters")
            for column in ("parameter", "tested", "recorded", "untested", "unknown in"):
                values.add_column(column, overflow="fold")
            for param in c.params:
                values.add_row(
                    param,
                    ", ".join(map(str, c.values(param, "tested"))),
                    ", ".join(map(str, c.values(param, "recorded"))),
                    ", ".join(map(str, c.untested_values.get(param, []))),
                    str(c.unknown.get(param, "")),
                )
            tables.append(values)
            if c.untested_combinations:
                combos = Table(title=f"{c.module}: recorded combinations no test ran")
                for param in c.params:
                    combos.add_column(param, overflow="fold")
                for row in c.untested_combinations:
                    combos.add_row(*("?" if row[p] is None else str(row[p]) for p in c.params))
                tables.append(combos)
        return tables

    def print(self, console=None) -> None:
        from rich.console import Console

        if console is None:
            from tttv2_tools._cli import table_width  # one width in a pipe for every tool (docs/cli.md)

            console = Console(width=table_width(None))
        for table in self.tables():
            console.print(table)


def coverage_report(
    records: Iterable[CoverageRecord], against, *, modules: Iterable[str] | None = None
) -> CoverageReport:
    """Compare tested ``records`` with the cases of a collect-cases store (a path) or with a list of cases. Every
    tested class is reported, and with ``modules`` those classes too (a class no test ran then shows all its
    recorded cases as gaps)."""
    records = list(records)
    names = {r.module for r in records} | set(modules or ())
    unknown = sorted(names - set(COVERAGE))
    if unknown:
        raise ValueError(
            f"coverage_report: no coverage mapping for {', '.join(unknown)}; known: {', '.join(COVERAGE)}"
        )
    label, cases_of = _cases_source(against)
    classes = []
    for name in sorted(names):
        spec = COVERAGE[name]
        tested = list({r.params: r.values for r in records if r.module == name}.values())
        recorded = [params_of_case(name, case) for case in cases_of(spec.target, spec.topology)]
        classes.append(_compare(name, tested, recorded))
    return CoverageReport(classes, label)


def _cases_source(against):
    if isinstance(against, (str, os.PathLike)):
        from tttv2_tools.collect_cases import load_cases

        path = os.fspath(against)
        return path, functools.partial(load_cases, path)
    cases = list(against)

    def select(target, topology):
        return [c for c in cases if c.target == target and c.topology == topology]

    return f"{len(cases)} given cases", select
