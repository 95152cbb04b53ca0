"""The report: for every branch of the TTTv1 class, where it went on each (topology, mode) — decided, bound at
construction, a config field, construction code, or kept as a run-time branch — with ``file:line`` on both sides;
every config read and the field it became; every helper and where it came from; everything not transformed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import libcst as cst

from tttv2_tools._output import json_schema, marked, marker

from .cstutil import one_line
from .lines import method_lines, start_lines
from .track import BRANCH_NODES
from .walk import walk

PRIORITY = ("decided", "bound", "field", "construction", "runtime")
TOOL = "tttv2-refactor"
#: the ``"schema"`` key of the JSON report; with the Markdown report's marker line it tells a later run that an
#: existing report file is one it wrote (and may be replaced without ``--force``)
JSON_SCHEMA = "tttv2-refactor-report"
MARKDOWN_COMMENT = ("<!--", "-->")
KINDS = {
    "markdown": marked(TOOL, "report", *MARKDOWN_COMMENT),
    "json": json_schema(TOOL, "JSON report", JSON_SCHEMA),
}


@dataclass
class Fate:
    topology: str
    mode: str
    kind: str  # decided | bound | field | construction | runtime | removed
    detail: str
    new_loc: str | None = None


@dataclass
class BranchEntry:
    loc: str
    construct: str
    test: str
    classification: str
    function: str
    fates: list[Fate] = field(default_factory=list)


@dataclass
class FieldEntry:
    name: str
    module: str
    source: str
    locs: list[str]
    defined_at: str | None
    modes: list[str]
    callable_of: list[str]


@dataclass
class Report:
    module: str
    class_name: str
    outputs: list[str]
    branches: list[BranchEntry] = field(default_factory=list)
    fields: list[FieldEntry] = field(default_factory=list)
    helpers: list[dict] = field(default_factory=list)
    bound: list[dict] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"schema": JSON_SCHEMA, **asdict(self)}, indent=2, ensure_ascii=False) + "\n"

    def to_markdown(self) -> str:
        out = [
            f"# tttv2-refactor report: {self.module} (class {self.class_name})",
            marker(TOOL, "report", *MARKDOWN_COMMENT),
            "",
        ]
        out.append("Outputs: " + ", ".join(f"`{o}`" for o in self.outputs))
        if self.tests:
            out.append("Tests: " + ", ".join(f"`{t}`" for t in self.tests))
        out.append("")
        status = (
            "everything was transformed" if not self.gaps else f"{len(self.gaps)} spot(s) NOT transformed"
        )
        out += [f"Status: {status}.", ""]
        if self.gaps:
            out += ["## Not transformed", "", "| where | what | why |", "|---|---|---|"]
            out += [f"| {g['loc']} | `{_cell(g['what'])}` | {_cell(g['reason'])} |" for g in self.gaps]
            out.append("")
        out += ["## Branches", ""]
        out.append(
            "Each branch of the TTTv1 class, per topology and mode: **decided** (the topology / mode facts choose "
            "one arm, the other is gone), **bound** (a static code choice, made once at construction), **field** (a "
            "static value choice, computed at construction into a config field), **construction** (static code "
            "moved into `from_model_args`), **runtime** (kept: it depends on call-time values), **removed** (its "
            "code does not run there)."
        )
        out.append("")
        out += ["| TTTv1 | construct | test | class | where it went |", "|---|---|---|---|---|"]
        for b in self.branches:
            fates = "<br>".join(
                f"{f.topology}/{f.mode}: **{f.kind}** {_cell(f.detail)}"
                + (f" ({f.new_loc})" if f.new_loc else "")
                for f in b.fates
            )
            out.append(f"| {b.loc} | {b.construct} | `{_cell(b.test)}` | {b.classification} | {fates} |")
        out += [
            "",
            "## Config fields",
            "",
            "| module | field | TTTv1 expression | read at | defined at |",
            "|---|---|---|---|---|",
        ]
        for f in self.fields:
            source = f.source if not f.callable_of else f"{f.source} (callable of {', '.join(f.callable_of)})"
            out.append(
                f"| {f.module} | `{f.name}` | `{_cell(source)}` | {', '.join(f.locs)} | {f.defined_at or ''} |"
            )
        if self.bound:
            out += [
                "",
                "## Bound methods",
                "",
                "| module | attribute | when true | when false | TTTv1 test |",
                "|---|---|---|---|---|",
            ]
            for b in self.bound:
                out.append(
                    f"| {b['module']} | `{b['attr']}` | `{b['true']}` | `{b['false']}` | `{_cell(b['test'])}` ({b['loc']}) |"
                )
        if self.helpers:
            out += ["", "## Helpers", "", "| module | helper | copied from |", "|---|---|---|"]
            for h in self.helpers:
                out.append(f"| {h['module']} | `{h['name']}` | {h['source']} |")
        if self.notes:
            out += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# ------------------------------------------------------------------------------------------ fates
_BRANCH_TYPES = frozenset(BRANCH_NODES)  # concrete node classes: a type lookup is an exact isinstance


def _branch_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    return [n for n in walk(node) if type(n) in _BRANCH_TYPES]


def _new_lines(
    rendered: cst.Module, text: str | None, file_name: str
) -> tuple[dict[str, str], dict[tuple[str, int], str]]:
    """Method name -> file:line, and (method name, index of the branch node in the method) -> file:line, in the
    text as written (read with ``ast`` when it can be), else in the rendered module."""
    found = method_lines(text) if text is not None else None
    if found is not None:
        methods, branches = found
        return (
            {name: f"{file_name}:{line}" for name, line in methods.items()},
            {key: f"{file_name}:{line}" for key, line in branches.items()},
        )
    module = cst.parse_module(text) if text is not None else rendered
    lines = start_lines(module)
    methods: dict[str, str] = {}
    branches: dict[tuple[str, int], str] = {}
    for statement in module.body:
        if not isinstance(statement, cst.ClassDef):
            continue
        for item in statement.body.body:
            if isinstance(item, cst.FunctionDef):
                methods[item.name.value] = f"{file_name}:{lines[id(item)]}"
                for index, node in enumerate(_branch_nodes(item)):
                    branches[(item.name.value, index)] = f"{file_name}:{lines[id(node)]}"
    return methods, branches


def branch_fates(
    result, file_names: dict[str, str], texts: dict[str, str] | None = None
) -> list[BranchEntry]:
    """The fate of every module branch of the analysed class on every (topology, mode) the run produced.
    ``texts`` (file name -> the text as written: header, formatter) gives the line numbers on the new side;
    without it they are those of the rendered module."""
    inputs = result.inputs
    parsed = inputs.module
    analysis = inputs.analysis
    prefix = inputs.class_name + "."
    entries: list[tuple[int, BranchEntry]] = []
    by_origin: dict[int, BranchEntry] = {}
    for branch in analysis.branches:
        if branch.side != "module" or not (
            branch.function == inputs.class_name or branch.function.startswith(prefix)
        ):
            continue
        node = parsed.node_for_span(branch.span) if branch.span is not None else None
        entry = BranchEntry(branch.loc, branch.construct, branch.test, branch.classification, branch.function)
        if node is not None:
            by_origin[id(node)] = entry
            entries.append((id(node), entry))
        else:
            entries.append((0, entry))
    for generated in result.modules:
        file_name = file_names.get(generated.topology, generated.file_name)
        _collect(generated, by_origin, file_name, (texts or {}).get(file_name))
    modes = [m for g in result.modules for m in g.plan.modes]
    for _, entry in entries:
        seen = {(f.topology, f.mode) for f in entry.fates}
        for generated in result.modules:
            for mode in generated.plan.modes:
                if (generated.topology, mode) not in seen:
                    phase_modes = "construction" if entry.function.endswith("__init__") else mode
                    entry.fates.append(
                        Fate(
                            generated.topology,
                            mode,
                            "removed",
                            f"does not run ({phase_modes} code on {generated.topology})",
                        )
                    )
        entry.fates.sort(key=lambda f: (f.topology, modes.index(f.mode) if f.mode in modes else 9))
    return [e for _, e in entries]


def _collect(generated, by_origin: dict[int, BranchEntry], file_name: str, final: str | None) -> None:
    plan = generated.plan
    prov = plan.prov
    topology = generated.topology

    def record(node, mode, kind, detail, new_loc=None):
        entry = by_origin.get(id(prov.origin(node)))
        if entry is None:
            return
        for existing in entry.fates:
            if existing.topology == topology and existing.mode == mode:
                if (
                    PRIORITY.index(kind) < PRIORITY.index(existing.kind)
                    if existing.kind in PRIORITY
                    else True
                ):
                    existing.kind, existing.detail, existing.new_loc = kind, detail, new_loc
                return
        entry.fates.append(Fate(topology, mode, kind, detail, new_loc))

    modes = list(plan.modes)
    # the written text has the same statements in the same order as the rendered module (a formatter changes
    # layout only), so methods by name and branches by their index in a method locate the new lines
    method_lines, final_lines = _new_lines(generated.rendered.module, final, file_name)
    # decided by the topology / mode facts
    for (mode, _topology), decisions in plan.decisions.items():
        targets = modes if mode == "construction" else [mode]
        for original, value in decisions.values.values():
            arm = "then" if value else "else"
            for m in targets:
                record(
                    original,
                    m,
                    "decided",
                    f"{arm} arm kept" if isinstance(original, cst.If) else f"test is {value}",
                )
    # bound at construction
    for binding in plan.bindings:
        loc = method_lines.get(binding.when_true)
        record(
            binding.origin,
            binding.mode,
            "bound",
            f"self.{binding.attr} -> {binding.when_true} / {binding.when_false}",
            loc,
        )
    # fields
    names = generated.rendered.fields.by_key
    for use in plan.registry.uses:
        for node in _branch_nodes(use.value):
            record(node, use.mode, "field", names.get(use.key, "?"))
    # construction code of each mode and of __init__
    fma = method_lines.get("from_model_args")
    for mode, mode_plan in plan.modes.items():
        for statement in (s for group in mode_plan.construction.values() for s in group):
            for node in _branch_nodes(statement):
                record(node, mode, "construction", f"_{mode}_fields() in from_model_args", fma)
    for statement in plan.init_body:
        for node in _branch_nodes(statement):
            for mode in modes:
                record(node, mode, "construction", "from_model_args (TTTv1 __init__)", fma)
    # kept at run time
    for method in generated.rendered.methods:
        for index, node in enumerate(_branch_nodes(method.func)):
            record(node, method.mode, "runtime", f"in {method.name}", final_lines.get((method.name, index)))


def build_report(
    result,
    outputs: list[str],
    tests: list[str],
    file_names: dict[str, str],
    texts: dict[str, str] | None = None,
) -> Report:
    inputs = result.inputs
    report = Report(
        module=inputs.module.name,
        class_name=inputs.class_name,
        outputs=outputs,
        tests=tests,
        branches=branch_fates(result, file_names, texts),
    )
    for generated in result.modules:
        module = file_names.get(generated.topology, generated.file_name)
        for f in generated.rendered.fields.fields:
            report.fields.append(
                FieldEntry(f.name, module, f.source, f.locs, f.defined_at, f.modes, list(f.params))
            )
        for name, source in generated.rendered.helpers.items():
            report.helpers.append({"module": module, "name": name, "source": source})
        for binding in generated.plan.bindings:
            test = binding.origin.test if isinstance(binding.origin, cst.If) else binding.origin
            report.bound.append(
                {
                    "module": module,
                    "attr": binding.attr,
                    "true": binding.when_true,
                    "false": binding.when_false,
                    "test": one_line(test, 90),
                    "loc": inputs.loc(generated.plan.prov.origin(binding.origin), binding.file),
                }
            )
    report.gaps = [{"loc": g.loc, "what": g.what, "reason": g.reason} for g in result.gaps]
    report.notes = list(result.notes)
    return report
