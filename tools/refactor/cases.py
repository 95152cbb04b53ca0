"""``--cases STORE``: the equivalence tests run on the configurations TTTv1 really saw, read from a collect-cases
store through its public ``load_cases``. Each recorded case becomes (mesh, mode, rows, model): the rows are the
recorded input's sequence length (its second-to-last dimension, the last for token ids), the model the
recorded catalogue model."""

from __future__ import annotations

from pathlib import Path

from tttv2_tools.collect_cases import CollectCasesError, load_cases

from .errors import UsageError
from .helpers import dotted_module_of
from .testgen import Case
from .testkit import DECODE_ROWS, DEFAULT_MODELS


def cases_from_store(
    store: Path, module: Path, class_name: str, modes: tuple[str, ...]
) -> tuple[dict[str, list[Case]], str]:
    """Per topology ("1d" / "2d"), the distinct recorded cases of ``module``'s ``class_name`` in ``modes``
    (a module without modes has the single mode "forward"), and a line saying where they came from.

    A topology with nothing recorded is absent: its tests keep the default matrix (the generated file says so)."""
    if not store.is_file():
        raise UsageError(f"--cases: {store} is not a file (expected a collect-cases store)")
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


def _case(case, modes: tuple[str, ...]) -> Case | None:
    """One recorded case in the generated tests' terms, or None when it is of another mode than the module has
    (or lacks the mesh)."""
    flat = case.flat
    mesh = flat.get("mesh_shape")
    if not mesh or len(mesh) != 2:
        return None
    mode = flat.get("mode") or "forward"
    if mode not in modes:
        return None
    shape = flat.get("x_shape") or ()
    if flat.get("x_dtype") == "uint32" and shape:
        rows = int(shape[-1])  # token ids: one per position
    elif len(shape) >= 2:
        rows = int(shape[-2])
    else:
        rows = DECODE_ROWS
    model = flat.get("model_name") or DEFAULT_MODELS[0]
    return Case((int(mesh[0]), int(mesh[1])), mode, rows, model)


__all__ = ["cases_from_store"]
