"""The JSON form of an analysis (schema in docs/trace_deps.md) and loading it back: ``from_json_dict(
to_json_dict(a)) == a``. Everything is emitted sorted, so the same input gives byte-identical JSON."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from json.encoder import encode_basestring
from operator import itemgetter

from .graph import Graph
from .records import (
    SCHEMA_VERSION,
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

if TYPE_CHECKING:  # annotations only: model.py imports this module
    from typing import Any

    from .model import Analysis

#: Node attributes every node has in the JSON (None when unset) and those it has only when set.
NODE_FIELDS = ("category", "level", "label", "loc", "kinds", "depth")
OPTIONAL_FIELDS = ("root", "resolved", "reason")
#: The schema versions ``from_json_dict`` reads.
READABLE = (SCHEMA_VERSION,)


class SchemaError(ValueError):
    """The JSON is not a trace-deps analysis of a schema version this code reads."""


def node_attrs(data: dict[str, Any]) -> dict[str, Any]:
    """The public attributes of a graph node, in their JSON form."""
    out = {}
    get = data.get
    for key in NODE_FIELDS:  # a plain loop: this runs for every node of every analysis and every JSON text
        value = get(key)
        out[key] = list(value) if isinstance(value, (list, tuple)) else value
    for key in OPTIONAL_FIELDS:
        if key in data:
            out[key] = data[key]
    return out


def to_json_dict(analysis: Analysis) -> dict[str, Any]:
    """The JSON form as plain dicts and lists (records converted by :func:`plain`)."""
    with _collector_paused():
        return _document(analysis, plain, _definition, _edge_dicts)


def to_json(analysis: Analysis) -> str:
    """``dumps(to_json_dict(analysis))``, the same bytes, without building the records' dicts first: json's C
    encoder asks :func:`_record_fields` for each record's fields (its ``__dict__``, what :func:`plain` copies)."""
    with _collector_paused():
        return dumps(_document(analysis, _same, _live, _edges_text))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The JSON form is thousands of new dicts, lists and strings, none in a cycle: the collections of the cyclic
    garbage collector they set off find nothing to free, and the first one after ``analyze()`` (which pauses the
    collector) walks everything the analysis allocated. In a fresh ``trace-deps --json`` process they took 10-20 %
    of the JSON output's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _same(value: Any) -> Any:
    return value


def _live(d: Definition) -> dict[str, Any]:
    """A definition's fields (its records still records) and whether it is live, as :func:`_definition` says."""
    return {**d.__dict__, "live": d.live}


def _document(
    analysis: Analysis,
    record: Callable[[Any], Any],
    definition: Callable[[Any], Any],
    edges: Callable[[Graph], Any],
) -> dict[str, Any]:
    g = analysis.dependencies
    nodes = [{"id": nid, **node_attrs(g.nodes[nid])} for nid in sorted(g.nodes)]
    unknowns = [
        {"id": n["id"], "reason": n.get("reason"), "loc": n.get("loc")}
        for n in nodes
        if n["category"] == "unknown"
    ]
    return {
        "schema": "trace-deps",
        "schema_version": SCHEMA_VERSION,
        "module": analysis.module,
        "config": analysis.config,
        "module_class": analysis.module_class,
        "class_choice": analysis.class_choice,
        "config_class": analysis.config_class,
        "entry": analysis.entry,
        "files": analysis.files,
        "assumptions": analysis.assumptions,
        "stats": dict(analysis.stats),
        "keys_read": analysis.keys_read(),
        "reads": [record(r) for r in analysis.reads],
        "definitions": {k: [definition(d) for d in v] for k, v in analysis.definitions.items()},
        "attr_definitions": {k: [definition(d) for d in v] for k, v in analysis.attr_definitions.items()},
        "branches": [record(b) for b in analysis.branches],
        "ops": [record(o) for o in analysis.ops],
        "calls": [record(c) for c in analysis.calls],
        "entries": analysis.entries,
        "paths": analysis.paths,
        "construction_ops": analysis.construction_ops,
        "roots": analysis.roots,
        "levels": analysis.levels,
        "unknowns": unknowns,
        "skipped": [record(s) for s in analysis.skipped],
        "fact_sites": [record(f) for f in analysis.fact_sites],
        "nodes": nodes,
        "edges": edges(g),
    }


_edge_key = itemgetter(0, 1)  # (source, target): one edge per pair


def _edge_dicts(g: Graph) -> list[dict[str, Any]]:
    """The edges of the JSON form, sorted by (source, target)."""
    return [
        {"source": u, "target": v, "kind": d.get("kind"), "loc": d.get("loc")}
        for u, v, d in sorted(g.edges(data=True), key=_edge_key)
    ]


class _Encoded(str):
    """A value already in its JSON text (:func:`dumps` writes it as it is)."""


def _edges_text(g: Graph) -> _Encoded:
    """:func:`_edge_dicts` as JSON text, the same bytes the encoder gives for it, written with one format per edge
    instead of a dict per edge for the encoder to walk (the largest field: thousands of edges, a third of the
    text). Node ids, kinds and locations are strings or None; any other value goes through the encoder."""
    quote = encode_basestring  # json's C function for a str with ensure_ascii=False, as _ENCODER uses
    encode = _ENCODER.encode

    def text(value: Any) -> str:
        if type(value) is str:
            return quote(value)
        return "null" if value is None else encode(value)

    parts = [
        f'{{"source": {text(u)}, "target": {text(v)}, "kind": {text(d.get("kind"))}, "loc": {text(d.get("loc"))}}}'
        for u, v, d in sorted(g.edges(data=True), key=_edge_key)
    ]
    if not parts:
        return _Encoded("[]")
    parts[0] = "[" + parts[0]  # the brackets on the first and last edge: the text is joined (copied) once
    parts[-1] += "]"
    return _Encoded(", ".join(parts))


def plain(value: Any) -> Any:
    """Dataclasses (records.py) -> dicts, recursively, without ``dataclasses.asdict``'s deep copies. Strings,
    numbers and None (most values) are returned without a recursive call: this runs on every field of every
    record of a large analysis."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if hasattr(kind, "__dataclass_fields__"):
        return {k: v if type(v) in _SCALARS else plain(v) for k, v in value.__dict__.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _SCALARS else plain(v) for v in value]
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else plain(v) for k, v in value.items()}
    return value


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _record_fields(value: Any) -> dict[str, Any]:
    """json's ``default``: a record's fields, the dict :func:`plain` copies; anything else is refused, as json
    refuses it."""
    if hasattr(type(value), "__dataclass_fields__"):
        return value.__dict__
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: json's C encoder (``indent=`` would use the pure-Python one, several times slower on large analyses); records
#: are trees, so the circular-reference check is skipped.
_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, default=_record_fields)


def dumps(data: dict[str, Any]) -> str:
    """The JSON text: one top-level field a line, each value compact. Deterministic for deterministic input. Joined
    once from its pieces: each field's text (up to hundreds of kB) is not copied into a line first, nor the whole
    text into a second string for the braces (each copy of a megabyte is memory the process touches anew)."""
    encode = _ENCODER.encode
    pieces = ["{\n"]
    append = pieces.append
    for k, v in data.items():
        append(f"  {json.dumps(k)}: ")
        append(v if type(v) is _Encoded else encode(v))
        append(",\n")
    if len(pieces) > 1:
        pieces[-1] = "\n}\n"  # the last field's separator
    else:
        append("\n}\n")
    return "".join(pieces)


def _definition(d: Definition) -> dict[str, Any]:
    out = plain(d)
    out["live"] = d.live
    return out


def from_json_dict(data: dict[str, Any], cls: type[Analysis]) -> Analysis:
    """Rebuild an analysis (of class ``cls``) from :func:`to_json_dict`'s output (raises :class:`SchemaError`)."""

    if not isinstance(data, dict) or data.get("schema") != "trace-deps":
        raise SchemaError('not a trace-deps analysis (no "schema": "trace-deps")')
    version = data.get("schema_version")
    if version not in READABLE:
        raise SchemaError(f"schema_version: expected one of {', '.join(READABLE)}, got {version!r}")
    try:
        g = Graph()
        for node in data["nodes"]:
            attrs = {k: v for k, v in node.items() if k != "id"}
            g.add_node(node["id"], **attrs)
        for edge in data["edges"]:
            g.add_edge(edge["source"], edge["target"], kind=edge["kind"], loc=edge["loc"])
        return cls(
            module=data["module"],
            config=data["config"],
            module_class=data["module_class"],
            config_class=data["config_class"],
            files=list(data["files"]),
            dependencies=g,
            reads=[ConfigRead(**r) for r in data["reads"]],
            definitions={k: [_load_definition(d) for d in v] for k, v in data["definitions"].items()},
            attr_definitions={
                k: [_load_definition(d) for d in v] for k, v in data["attr_definitions"].items()
            },
            branches=[_load_branch(b) for b in data["branches"]],
            ops=[OpCall(**o) for o in data["ops"]],
            paths={k: list(v) for k, v in data["paths"].items()},
            construction_ops=list(data["construction_ops"]),
            roots={k: list(v) for k, v in data["roots"].items()},
            levels={k: list(v) for k, v in data["levels"].items()},
            skipped=[Skipped(**s) for s in data["skipped"]],
            stats=dict(data["stats"]),
            assumptions=dict(data["assumptions"]),
            calls=[CallLink(**c) for c in data["calls"]],
            entries=list(data["entries"]),
            entry=data["entry"],
            class_choice=data.get("class_choice"),
            fact_sites=[_load_fact_site(f) for f in data.get("fact_sites", [])],
        )
    except (KeyError, TypeError) as exc:
        raise SchemaError(f"malformed trace-deps JSON: {type(exc).__name__}: {exc}") from exc


def _load_definition(d: dict[str, Any]) -> Definition:
    fields = {k: v for k, v in d.items() if k != "live"}
    fields["guards"] = [Guard(**g) for g in d["guards"]]
    return Definition(**fields)


def _load_branch(b: dict[str, Any]) -> Branch:
    fields = dict(b)
    fields["chain"] = {kind: [Hop(**h) for h in hops] for kind, hops in b["chain"].items()}
    for key in ("span", "test_span"):
        if fields.get(key) is not None:
            fields[key] = Span(**fields[key])
    return Branch(**fields)


def _load_fact_site(f: dict[str, Any]) -> FactSite:
    return FactSite(**{**f, "span": Span(**f["span"])})
