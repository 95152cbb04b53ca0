"""One run of the codemod: generate the modules and their tests, lay out every output file with its header,
build the report. Nothing here writes; :mod:`cli` decides what to do with the planned files."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .api import Result, generate
from .cases import cases_from_store, cases_list
from .cstutil import clear_memos
from .errors import Gap, UsageError
from .files import Planned, run_formatter, source_hash, with_header
from .helpers import dotted_module_of, first_party_folder
from .markers import mark_gaps
from .names import output_gaps
from .plan import mode_setter
from .report import Report, build_report
from .source import methods_of
from .testgen import default_cases, render_test
from .testkit import hf_kind_of


@dataclass
class Run:
    result: Result
    planned: list[Planned] = field(default_factory=list)
    report: Report | None = None

    @property
    def gaps(self) -> list[Gap]:
        return self.result.gaps


MISMATCH = "the call does not match the definition"


UNDEFINED = "read by the generated code but neither defined nor imported"
IMPORT_CAUSES = ("which does not define it", "resolves to no file")


def _fold_into_cause(gaps: list[Gap], gap: Gap) -> bool:
    """A name the generated code reads undefined because TTTv1 imports it from a module that lacks it (tt-metal's
    ``from models.tt_transformers.tt.common import Mode``, of a ``common.py`` without ``Mode``) is one defect: the
    import's gap gains where the generated code reads the name, instead of a second, vaguer gap. True when folded."""
    if not gap.reason.startswith(UNDEFINED):
        return False
    for index, cause in enumerate(gaps):
        if cause.what == gap.what and any(c in cause.reason for c in IMPORT_CAUSES):
            gaps[index] = Gap(
                cause.loc, cause.what, f"{cause.reason}; the generated code reads it at {gap.loc}"
            )
            return True
    return False


def explain_unspecialised(gaps: list[Gap]) -> list[Gap]:
    """A static branch left in a helper that some call of it does not bind to says so: that call is why the
    helper was copied as written instead of specialised per call site (tt-metal's ``mlp.py`` passing
    ``rs_memory_config=`` to the ``tt_all_reduce`` of a ``ccl.py`` of another commit: its branches on the
    arguments stay)."""
    calls: dict[tuple[str, str], list[str]] = {}  # (generated file, helper) -> the mismatched calls
    for gap in gaps:
        if gap.reason.startswith(MISMATCH) and gap.what.endswith("(...)"):
            file = gap.loc.rsplit(":", 1)[0]
            calls.setdefault((file, gap.what[: -len("(...)")]), []).append(gap.loc)
    if not calls:
        return gaps
    out = []
    for gap in gaps:
        file = gap.loc.rsplit(":", 1)[0]
        for (where, helper), locs in calls.items():
            if where == file and gap.what.startswith(f"static branch left in {helper}: "):
                shown = ", ".join(locs[:3]) + (f" and {len(locs) - 3} more" if len(locs) > 3 else "")
                gap = Gap(
                    gap.loc,
                    gap.what,
                    f"{gap.reason}; {helper} was copied as written, not specialised per call site, because "
                    f"its call{'s' if len(locs) > 1 else ''} at {shown} do{'' if len(locs) > 1 else 'es'} "
                    "not match its definition",
                )
                break
        out.append(gap)
    return out


def definition_origins(generated, inputs) -> dict[str, str]:
    """Function or method of a generated module -> where TTTv1 has it, for the messages of the call check:
    ``copied from ccl.py:136`` (a helper copied as a function), ``the call-site copy of tt_all_reduce
    (ccl.py:136)`` (a method made from one call of a helper or of a TTTv1 method)."""
    out = {
        name: f"copied from {where}"
        for name, where in generated.rendered.helpers.items()
        if not where.startswith("imported")
    }
    for method in generated.rendered.methods:
        if method.kind != "helper" or method.name in out:
            continue
        parsed = inputs.files.get(method.file) or inputs.module
        line = _line_of_definition(parsed, method.origin)
        where = f"{parsed.name}:{line}" if line else parsed.name
        out[method.name] = f"the call-site copy of {method.origin} ({where})"
    return out


def _line_of_definition(parsed, qualname: str) -> int | None:
    """The line of ``name`` or ``Class.name`` in a parsed file (None when it has no such definition)."""
    owner, _, name = qualname.rpartition(".")
    if owner:
        klass = parsed.classes().get(owner)
        func = methods_of(klass).get(name) if klass is not None else None
    else:
        func = parsed.functions().get(name)
    return parsed.line_of(func) if func is not None else None


def _label(module_path: Path, target_dir: Path, class_name: str) -> str:
    relative = Path(os.path.relpath(module_path.resolve(), target_dir.resolve())).as_posix()
    return f"{relative} (class {class_name})"


def plan_run(
    module: Path,
    config: Path | None,
    *,
    out: Path,
    tests_out: Path | None = None,
    class_name: str | None = None,
    name: str | None = None,
    formatter: str | None = None,
    cases_store: Path | None = None,
    partial: bool = False,
    topology: str | None = None,
) -> Run:
    try:
        return _plan_run(
            module, config, out, tests_out, class_name, name, formatter, cases_store, partial, topology
        )
    finally:
        clear_memos()  # the memos of a run end with it


def _plan_run(
    module, config, out, tests_out, class_name, name, formatter, cases_store, partial, topology
) -> Run:
    result = generate(module, config, class_name=class_name, name=name, topology=topology)
    run = Run(result)
    inputs = result.inputs
    hf_kind = hf_kind_of(module, inputs.class_name)
    digest = source_hash(module.read_bytes())
    file_names: dict[str, str] = {}
    tests: list[str] = []

    def finish(generated, code: str) -> str:
        if formatter:
            code = run_formatter(formatter, code, out / generated.file_name)
        return with_header(code, _label(module, out, inputs.class_name), digest)

    texts = {g.file_name: finish(g, g.code) for g in result.modules}
    origins = {g.file_name: definition_origins(g, inputs) for g in result.modules}
    for gap in output_gaps(texts, first_party_folder(module), origins):
        if gap not in result.gaps and not _fold_into_cause(result.gaps, gap):
            result.gaps.append(gap)
    result.gaps[:] = explain_unspecialised(result.gaps)
    for generated in result.modules:
        path = out / generated.file_name
        file_names[generated.topology] = generated.file_name
        text = texts[generated.file_name]
        if partial and result.gaps:
            text = finish(generated, mark_gaps(generated, result.gaps, inputs))
        run.planned.append(Planned(path, text))
    if tests_out is not None:
        topologies = [g.topology for g in result.modules]
        for generated in result.modules:
            other = next((g.class_name for g in result.modules if g is not generated), None)
            modes = tuple(generated.plan.modes)
            label = generated.topology if len(topologies) > 1 or generated.topology == "2d" else "any"
            topology_cases, cases_origin, cases_code = _cases(
                cases_store, module, inputs.class_name, modes, label
            )
            topology_cases = topology_cases or default_cases(label, modes=modes)
            test_path = tests_out / f"test_{generated.file_name}"
            code = render_test(
                hf_kind=hf_kind,
                class_name=generated.class_name,
                other_class=other,
                topology=label,
                module_path=out / generated.file_name,
                test_path=test_path,
                source_label=_label(module, tests_out, inputs.class_name),
                cases=topology_cases,
                cases_origin=cases_origin,
                legacy=(module, dotted_module_of(module), inputs.class_name),
                modes=modes,
                cases_code=cases_code,
                setter=mode_setter(inputs),
            )
            if formatter:
                code = run_formatter(formatter, code, test_path)
            text = with_header(code, _label(module, tests_out, inputs.class_name), digest)
            run.planned.append(Planned(test_path, text))
            tests.append(test_path.name)
    written = {p.path.name: p.text for p in run.planned if p.path.parent == out}
    run.report = build_report(result, list(written), tests, file_names, written)
    return run


def _cases(store: Path | None, module: Path, class_name: str, modes: tuple[str, ...], topology: str):
    """The recorded cases of one generated module (both topologies' for a module that serves every mesh), the
    comment that says where its cases come from, and their ``CASES`` list as ``collect-cases emit`` writes it;
    no cases: the default matrix (and no list)."""
    matrix = "the default matrix: every mesh of the topology, every mode, the conftest's default model"
    if store is None:
        return [], matrix, None
    recorded, origin = cases_from_store(store, module, class_name, modes)
    cases = [c for t in ("1d", "2d") if topology in (t, "any") for c in recorded.get(t, [])]
    if not cases:
        return [], f"{origin}: none for this topology, so {matrix}", None
    return cases, origin, cases_list(store, module, class_name, modes, topology)


def check_python(planned: list[Planned]) -> None:
    """Every generated file compiles (an internal error otherwise: the codemod produced bad code)."""
    for item in planned:
        try:
            compile(item.text, str(item.path), "exec")
        except SyntaxError as exc:  # pragma: no cover - a bug in the codemod, reported as exit 3
            raise RuntimeError(f"generated {item.path.name} does not compile: {exc}") from exc


__all__ = ["Run", "UsageError", "check_python", "plan_run"]
