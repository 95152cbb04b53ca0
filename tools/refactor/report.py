"""The report: for every branch of the TTTv1 class, where it went on each (topology, mode) — decided, bound at
construction, a config field, construction code, or kept as a run-time branch — with ``file:line`` on both sides;
every config read and the field it became; every helper and where it came from; everything not transformed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import libcst as cst

from tttv2_tools._output import json_schema, marked, marker

from .cstutil import one_line, summary
from .lines import method_lines, start_lines
from .plan import construction_methods
from .source import methods_of
from .track import BRANCH_NODES
from .walk import walk

PRIORITY = ("decided", "bound", "field", "construction", "runtime", "removed")
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
    kind: str  # decided | bound | field | construction | runtime | removed | unknown
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
            "code does not run there, and the reason), **unknown** (the tool did not follow it there: look at the "
            "generated code)."
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
            out += ["", "## Helpers", "", "| module | helper | copied from, or imported |", "|---|---|---|"]
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
    entries: list[tuple[cst.CSTNode | None, BranchEntry]] = []
    by_origin: dict[int, list[BranchEntry]] = {}
    matches: list[cst.Match] | None = None
    for branch in analysis.branches:
        if branch.side != "module" or not (
            branch.function == inputs.class_name or branch.function.startswith(prefix)
        ):
            continue
        node = parsed.node_for_span(branch.span) if branch.span is not None else None
        if branch.construct == "match" and branch.span is not None:  # a case: its match statement
            matches = _matches(parsed.module) if matches is None else matches
            node = _enclosing_match(parsed, matches, branch.span.start_line)
        entry = BranchEntry(branch.loc, branch.construct, branch.test, branch.classification, branch.function)
        if node is not None:
            by_origin.setdefault(id(node), []).append(entry)
        entries.append((node, entry))
    for generated in result.modules:
        file_name = file_names.get(generated.topology, generated.file_name)
        _collect(generated, by_origin, file_name, (texts or {}).get(file_name))
    modes = [m for g in result.modules for m in g.plan.modes]
    missing = [(node, e) for node, e in entries if len(e.fates) < len(modes)]
    decided = [
        (node, e) for node, e in entries if node is not None and any(f.kind == "decided" for f in e.fates)
    ]
    if missing or decided:
        unrecorded = _Unrecorded(result)
        for node, entry in missing:
            seen = {(f.topology, f.mode) for f in entry.fates}
            for generated in result.modules:
                for mode in generated.plan.modes:
                    if (generated.topology, mode) not in seen:
                        entry.fates.append(unrecorded.fate(generated.topology, mode, node, entry.function))
        for node, entry in decided:  # decided, but inside an arm an outer test dropped: its code is not there
            for fate in entry.fates:
                if fate.kind == "decided":
                    proof = unrecorded.removal(fate.topology, fate.mode, node, entry.function)
                    if proof is not None:
                        fate.kind, fate.detail, fate.new_loc = "removed", f"does not run: {proof}", None
    for _, entry in entries:
        entry.fates.sort(key=lambda f: (f.topology, modes.index(f.mode) if f.mode in modes else 9))
    return [e for _, e in entries]


def _matches(module: cst.Module) -> list[cst.Match]:
    return [n for n in walk(module) if type(n) is cst.Match]


def _enclosing_match(parsed, matches: list[cst.Match], line: int) -> cst.Match | None:
    """The innermost ``match`` statement whose cases include the one on ``line``."""
    best = None
    for node in matches:
        where = parsed.range_of(node)
        if where is not None and where[0] < line <= where[2] and (best is None or where[0] > best[0]):
            best = (where[0], node)
    return None if best is None else best[1]


class _Unrecorded:
    """The fate of a branch no pass recorded on one (topology, mode): **removed** only with a proof (it lies in
    an arm the topology / mode facts dropped there, or in a method that mode never calls), else **unknown**."""

    def __init__(self, result) -> None:
        inputs = result.inputs
        self.parsed = inputs.module
        self.class_name = inputs.class_name
        self.construction = {"__init__", *construction_methods(inputs)}
        # (phase: "construction" or a mode, topology) -> id(original node) -> (node, value, kept operand)
        self.decided: dict[tuple[str, str], dict[int, tuple[cst.CSTNode, bool, tuple[str, bool] | None]]] = {}
        self.reached: dict[tuple[str, str], set[str]] = {}  # methods a generated mode runs (or names)
        for generated in result.modules:
            plan = generated.plan
            for (phase, topology), decisions in plan.decisions.items():
                table = self.decided.setdefault((phase, topology), {})
                for key, (node, value) in decisions.values.items():
                    if key not in decisions.conflicts:
                        origin = plan.prov.origin(node)
                        table[id(origin)] = (origin, value, decisions.kept.get(key))
            entry = "forward" if "forward" in methods_of(inputs.klass) else "__call__"
            for mode, mode_plan in plan.modes.items():
                names = {entry, mode_plan.entry_origin}
                names |= {m.origin.rsplit(".", 1)[-1] for m in plan.methods if m.mode == mode}
                trees = [m.func for m in plan.methods if m.mode == mode]
                trees += [s for group in mode_plan.construction.values() for s in group]
                trees += [u.value for u in plan.registry.uses if u.mode == mode]
                trees += [b.test for b in plan.bindings if b.mode == mode]
                for tree in trees:
                    names |= set(summary(tree).self_attrs)
                self.reached[(generated.topology, mode)] = names

    def fate(self, topology: str, mode: str, node: cst.CSTNode | None, function: str) -> Fate:
        method = function.split(".")[1] if "." in function else ""
        reached = method in self.reached[(topology, mode)]
        if method and method not in self.construction and not reached:
            return Fate(
                topology, mode, "removed", f"does not run: {self.class_name}.{method} is not called in {mode}"
            )
        proof = self.removal(topology, mode, node, function) if node is not None else None
        if proof is not None:
            return Fate(topology, mode, "removed", f"does not run: {proof}")
        return Fate(
            topology,
            mode,
            "unknown",
            "not followed: the tool lost track of this branch (check the generated code)",
        )

    def removal(self, topology: str, mode: str, node: cst.CSTNode, function: str) -> str | None:
        """Why ``node`` is not in the output of (topology, mode): the decided arms that drop it where its code
        runs (at construction, in the mode's methods, or both), or None."""
        method = function.split(".")[1] if "." in function else ""
        phases = ["construction"] if method in self.construction else []
        if method in self.reached[(topology, mode)] or not phases:
            phases.append(mode)
        proofs = [self._dropped_arm(node, self.decided.get((phase, topology), {})) for phase in phases]
        return "; ".join(dict.fromkeys(proofs)) if all(proofs) else None

    def _dropped_arm(self, node: cst.CSTNode, decided) -> str | None:
        """How an enclosing decided branch drops ``node``: "in the else arm of `TG` (file:line), decided True"
        (found by position: the dropped part's range holds the node's)."""
        where = self.parsed.range_of(node)
        if where is None:
            return None
        for parent, value, kept in decided.values():
            dropped = None
            if isinstance(parent, (cst.If, cst.IfExp)):
                dropped, arm = (parent.orelse, "else arm") if value else (parent.body, "then arm")
            elif isinstance(parent, cst.BooleanOperation) and kept is not None:
                arm = f"{'right' if kept[0] == 'left' else 'left'} operand"
                dropped = parent.right if kept[0] == "left" else parent.left
            outer = None if dropped is None else self.parsed.range_of(dropped)
            if outer is not None and outer[:2] <= where[:2] and where[2:] <= outer[2:]:
                test = parent.test if isinstance(parent, (cst.If, cst.IfExp)) else parent
                return f"in the {arm} of `{one_line(test, 60)}` ({self.parsed.loc(parent)}), decided {value}"
        return None


def _record(entry: BranchEntry, fate: Fate) -> None:
    """Add ``fate`` to ``entry``, or let it replace the one of the same (topology, mode) it outranks."""
    for existing in entry.fates:
        if existing.topology == fate.topology and existing.mode == fate.mode:
            if (
                PRIORITY.index(fate.kind) < PRIORITY.index(existing.kind)
                if existing.kind in PRIORITY
                else True
            ):
                existing.kind, existing.detail, existing.new_loc = fate.kind, fate.detail, fate.new_loc
            return
    entry.fates.append(fate)


def _collect(generated, by_origin: dict[int, list[BranchEntry]], file_name: str, final: str | None) -> None:
    plan = generated.plan
    prov = plan.prov
    topology = generated.topology

    def record(node, mode, kind, detail, new_loc=None):
        for entry in by_origin.get(id(prov.origin(node)), ()):
            _record(entry, Fate(topology, mode, kind, detail, new_loc))

    modes = list(plan.modes)
    # the written text has the same statements in the same order as the rendered module (a formatter changes
    # layout only), so methods by name and branches by their index in a method locate the new lines
    method_lines, final_lines = _new_lines(generated.rendered.module, final, file_name)
    # decided by the topology / mode facts
    for (mode, _topology), decisions in plan.decisions.items():
        targets = modes if mode == "construction" else [mode]
        for key, (original, value) in decisions.values.items():
            detail = _decided(original, value, decisions.kept.get(key))
            if key in decisions.conflicts:
                detail = "decided differently at different call sites of its method"
            for m in targets:
                record(original, m, "decided", detail)
    # bound at construction (a branch inside the test of a bound choice goes with it)
    for binding in plan.bindings:
        loc = method_lines.get(binding.when_true)
        detail = f"self.{binding.attr} -> {binding.when_true} / {binding.when_false}"
        record(binding.origin, binding.mode, "bound", detail, loc)
        for node in _branch_nodes(binding.test):
            record(node, binding.mode, "bound", f"in the test of {detail}", loc)
    # fields
    names = generated.rendered.fields.by_key
    for use in plan.registry.uses:
        for node in _branch_nodes(use.value):
            record(node, use.mode, "field", names.get(use.key, "?"))
    # construction code of each mode and of __init__
    fma = method_lines.get("from_model_args")
    functions = generated.rendered.construction_functions
    for mode, mode_plan in plan.modes.items():
        for group, statements in mode_plan.construction.items():
            where = _construction_place(functions, mode, group)
            for node in (n for statement in statements for n in _branch_nodes(statement)):
                if where is None:
                    record(node, mode, "removed", "does not run: static code no config field reads")
                else:
                    record(node, mode, "construction", f"{where} in from_model_args", fma)
    for statement in [*plan.init_body, *plan.init_methods]:
        for node in _branch_nodes(statement):
            for mode in modes:
                record(node, mode, "construction", "from_model_args (TTTv1 __init__)", fma)
    # left out (dead code, an argument the copy does not read): only where nothing above says otherwise
    for (phase, _), (node, reason) in prov.dropped.items():
        for m in modes if phase == "construction" else [phase]:
            record(node, m, "removed", f"does not run: {reason}")
    # an assert the topology / mode decided to fail: ``assert False`` where TTTv1's test is False
    # (hoist._decided_refusal, hoist.static_asserts_as_ifs)
    for method in generated.rendered.methods:
        for node in walk(method.func):
            origin = prov.origin(node) if _decided_assert(node) else None
            if isinstance(origin, cst.Assert):
                detail = f"test is False: fails (assert False) in {method.name}"
                for part in (origin, origin.test):
                    record(part, method.mode, "decided", detail, method_lines.get(method.name))
    # kept at run time
    for method in generated.rendered.methods:
        for index, node in enumerate(_branch_nodes(method.func)):
            if _decided_assert(node) and isinstance(prov.origin(node), cst.Assert):
                continue  # an assert the topology / mode decided (above)
            record(node, method.mode, "runtime", f"in {method.name}", final_lines.get((method.name, index)))


def _construction_place(functions: dict, mode: str, group: str) -> str | None:
    """The function of from_model_args that runs a mode's construction code: its own, or the other mode's
    when every field it computes is shared (same code, so emitted once); None when no field needs it."""
    name = functions.get((mode, group))
    if name is None:
        name = next((n for (m, g), n in functions.items() if g == group and m != mode), None)
    return None if name is None else f"{name}()"


def _decided(original: cst.CSTNode, value: bool, kept: tuple[str, bool] | None) -> str:
    """What a decided branch became: the arm kept, the value of its test, or (an ``and`` / ``or`` with one
    constant operand) the operand that replaced it."""
    if isinstance(original, cst.If):
        return f"{'then' if value else 'else'} arm kept"
    if isinstance(original, cst.Match):
        return "the case that matches kept" if value else "no case matches"
    if kept is not None and not kept[1]:
        other = "left" if kept[0] == "right" else "right"
        return f"the {kept[0]} operand replaces it (the {other} one is {value})"
    return f"test is {value}"


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
    unknown = sorted({b.loc for b in report.branches for f in b.fates if f.kind == "unknown"})
    if unknown:
        report.notes.append(
            f"{len(unknown)} branch(es) not followed on some topology / mode (**unknown** above): "
            + ", ".join(unknown)
        )
    return report


def _decided_assert(node: cst.CSTNode) -> bool:
    """``assert False``: TTTv1's own, or one a topology / mode made of TTTv1's assert (its origin)."""
    return type(node) is cst.Assert and isinstance(node.test, cst.Name) and node.test.value == "False"
