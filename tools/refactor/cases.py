"""``--cases STORE``: the equivalence tests run on the configurations TTTv1 really saw, read from a collect-cases
store through its public ``load_cases``. Each recorded case becomes (mesh, mode, rows, model, inputs): the rows are
the first recorded tensor argument's sequence length (its second-to-last dimension, the last for token ids), the
model the recorded model name, the inputs every recorded tensor argument's shape and dtype by parameter name (the
generated test builds those it has no fixture for, and checks the shape of those it has). ``case_notes`` names
what cannot be taken as recorded."""

from __future__ import annotations

from pathlib import Path

from tttv2_tools._cli import missing_file
from tttv2_tools.collect_cases import CollectCasesError, load_cases
from tttv2_tools.collect_cases.cases import MODES, first_input, generated_test_values, select
from tttv2_tools.collect_cases.emit import render_list

from .errors import UsageError
from .helpers import dotted_module_of
from .testgen import DECODE_ROWS, Case


def cases_from_store(
    store: Path, module: Path, class_name: str, modes: tuple[str, ...]
) -> tuple[dict[str, list[Case]], str]:
    """Per topology ("1d" / "2d"), the distinct recorded cases of ``module``'s ``class_name`` in ``modes``
    (a module without modes has the single mode "forward"), and a line saying where they came from.

    A topology with nothing recorded is absent: its tests keep the default matrix (the generated file says so)."""
    if not store.exists():
        raise UsageError(missing_file(store, "--cases"))
    if not store.is_file():
        raise UsageError(f"--cases {store}: is not a file (expected a collect-cases store)")
    target = f"{dotted_module_of(module)}:{class_name}"
    try:
        recorded = load_cases(store, target)
    except (CollectCasesError, ValueError) as exc:
        raise UsageError(f"--cases: {exc}") from None
    out: dict[str, list[Case]] = {}
    for case in recorded:
        converted = _case(case, modes)
        if converted is None or case.topology is None:
            continue
        cases = out.setdefault(case.topology, [])
        if converted not in cases:
            cases.append(converted)
    origin = f"the cases of {target} recorded in {store.name} (collect-cases)"
    return out, origin


def cases_list(store: Path, module: Path, class_name: str, modes: tuple[str, ...], topology: str) -> str:
    """The generated test's ``CASES = [...]`` for ``topology`` ("1d", "2d" or "any": both), byte for byte what
    ``collect-cases emit --into TEST --name CASES [--topology T] [--mode M]`` writes (one implementation:
    ``render_list``), so ``emit --check`` passes right after ``--cases``. Its header names the topology, and the
    module's one mode when the store has cases of others (which ``_case`` leaves out, as ``emit --mode`` does)."""
    target = f"{dotted_module_of(module)}:{class_name}"
    recorded = load_cases(store, target)  # cases_from_store has refused a bad store already
    wanted = ("1d", "2d") if topology == "any" else (topology,)
    chosen = [c for c in recorded if c.topology in wanted and _case(c, modes) is not None]
    emit_topology = None if topology == "any" else topology
    mode = None
    if len(chosen) < len(select(recorded, emit_topology)) and len(modes) == 1 and modes[0] in MODES:
        mode = modes[0]
    return render_list(chosen, target, "CASES", topology=emit_topology, mode=mode)


def case_notes(store: Path, module: Path, class_name: str, modes: tuple[str, ...]) -> list[str]:
    """What the generated tests cannot take from the recorded cases as they are, said at generation time: for a
    module of the built-in ``tttv1`` package, a model its catalogue does not have (the test would fail building
    ``ModelArgs``); a case with no model name or no recorded tensor input (its test uses a default, named here)."""
    target = f"{dotted_module_of(module)}:{class_name}"
    try:
        recorded = load_cases(store, target)
    except (CollectCasesError, ValueError):  # already refused by cases_from_store
        return []
    catalogue = None
    if target.startswith("tttv1."):
        from tttv1.catalogue import catalogue_names

        catalogue = set(catalogue_names())
    unknown, unnamed, no_input = set(), 0, 0
    for case in recorded:
        if _case(case, modes) is None:
            continue
        model = case.flat.get("model_name")
        if not model:
            unnamed += 1
        elif catalogue is not None and model not in catalogue:
            unknown.add(model)
        if first_input(case.fields) is None:
            no_input += 1
    notes = []
    if unknown:
        notes.append(
            f"--cases: recorded cases of {target} name models that are not in the tttv1 catalogue "
            f"({', '.join(sorted(unknown))}): their generated tests fail building ModelArgs"
        )
    if unnamed:
        notes.append(
            f"--cases: {unnamed} recorded case(s) of {target} have no model name: their tests get "
            "model_name=None (the conftest's default model)"
        )
    if no_input:
        notes.append(
            f"--cases: {no_input} recorded case(s) of {target} have no recorded tensor input: their tests use "
            f"{DECODE_ROWS} rows"
        )
    return notes


def _case(case, modes: tuple[str, ...]) -> Case | None:
    """One recorded case in the generated tests' terms (collect-cases' ``generated_test_values``: the same values
    ``emit`` writes into a generated test), or None when it is of another mode than the module has (or lacks the
    mesh). A case with no model name or no tensor input gets a default (``case_notes`` says so)."""
    values = generated_test_values(case.fields)
    if "mesh_device" not in values:
        return None
    mode = case.mode  # "forward" for a case recorded without one (collect-cases' NO_MODE)
    if mode not in modes:
        return None
    inputs = tuple((name, spec) for name, spec in case.fields.get("inputs", ()) if spec)
    return Case(values["mesh_device"], mode, values["seq_len"], case.flat.get("model_name") or None, inputs)


__all__ = ["case_notes", "cases_from_store", "cases_list"]
