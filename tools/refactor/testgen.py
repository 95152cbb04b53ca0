"""Generated tests (``--tests-out``): per generated module, ``test_<name>_1d.py`` / ``_2d.py`` with

* an equivalence test: the TTTv1 module and the generated one built from the same constructor arguments, called
  on copies of the same inputs, outputs identical to the bit, over the recorded cases (``--cases STORE``) or the
  default matrix;
* a Hugging Face reference test where the module kind is known (the conftest's ``hf_reference`` fixture);
* a rejection test for the wrong topology.

The tests import only the library (``tttv2.testing.generated``) and the user's code: the constructor's and the
forward's arguments are pytest fixtures named after their parameters, which the user's ``conftest.py`` provides
(docs/refactor.md, "Generated tests"). Every test is parametrised by ``PARAMETERS``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: Rows of a decode case (one tile of users) and of a prefill case of the default matrix.
DECODE_ROWS = 32
PREFILL_ROWS = 128
MESHES = {"1d": ((1, 1), (1, 2), (1, 8)), "2d": ((8, 4),), "any": ((1, 1), (1, 2), (1, 8), (8, 4))}
HF_MESH = {"1d": (1, 2), "2d": (8, 4), "any": (1, 2)}
#: What every generated test is parametrised by (``mesh_device`` indirectly: the conftest's fixture gets the shape).
PARAMETERS = ("mesh_device", "mode", "seq_len", "model_name", "recorded")
SIGNATURE = ", ".join(PARAMETERS)
SIGNATURE_QUOTED = ", ".join(f'"{p}"' for p in PARAMETERS)


def _quoted(value: str | None) -> str:
    return "None" if value is None else f'"{value}"'


def _import_line(names: list[str]) -> str:
    """The library import, one name per line when it does not fit in 110 columns (as ruff format writes it)."""
    line = f"from tttv2.testing.generated import {', '.join(names)}"
    if len(line) <= 110:
        return line
    return "from tttv2.testing.generated import (\n" + "".join(f"    {n},\n" for n in names) + ")"


@dataclass(frozen=True)
class Case:
    mesh_shape: tuple[int, int]
    mode: str
    seq_len: int
    model: str | None = None
    inputs: tuple[
        tuple[str, object], ...
    ] = ()  # recorded input specs, (parameter, {"shape", "dtype"} or a list)

    @property
    def id(self) -> str:
        model = f"-{self.model}" if self.model else ""
        return f"{self.mesh_shape[0]}x{self.mesh_shape[1]}-{self.mode}-{self.seq_len}{model}"

    def param(self, id_: str | None = None) -> str:
        recorded = repr(dict(self.inputs)) if self.inputs else "None"
        return (
            f"pytest.param({self.mesh_shape!r}, {self.mode!r}, {self.seq_len}, {self.model!r}, {recorded}, "
            f'id="{id_ or self.id}")'
        ).replace("'", '"')


def default_cases(topology: str, modes: tuple[str, ...] = ("decode", "prefill")) -> list[Case]:
    """Every mesh of the topology in every mode (the conftest's default model), and one long prefill (256 rows:
    the long-prompt paths) on the first mesh."""
    out: list[Case] = []
    for shape in MESHES[topology]:
        for mode in modes:
            out.append(Case(shape, mode, DECODE_ROWS if mode == "decode" else PREFILL_ROWS))
    if "prefill" in modes:
        out.append(Case(MESHES[topology][0], "prefill", 2 * PREFILL_ROWS))
    return out


def render_test(
    *,
    hf_kind: str | None,
    class_name: str,
    other_class: str | None,
    topology: str,
    module_path: Path,
    test_path: Path,
    source_label: str,
    cases: list[Case],
    cases_origin: str,
    legacy: tuple[Path, str, str],
    modes: tuple[str, ...] = ("decode", "prefill"),
    cases_code: str | None = None,
    setter: str | None = None,
) -> str:
    """The text of one generated test file (without the tool's header). ``legacy``: the TTTv1 module the
    generated one came from (its path, dotted name and class), which the equivalence test runs; ``hf_kind``: the
    module kind the conftest's ``hf_reference`` fixture is asked to check (None: no such test); ``cases_code``:
    the ``CASES = [...]`` statement of recorded cases, as ``collect-cases emit`` writes it (``cases`` otherwise)."""
    relative = Path(os.path.relpath(module_path, test_path.parent)).as_posix()
    legacy_path, legacy_module, legacy_class = legacy
    legacy_relative = Path(os.path.relpath(legacy_path.resolve(), test_path.parent.resolve())).as_posix()
    stem = test_path.stem.removeprefix("test_")
    if cases_code is None:
        cases_code = "CASES = [\n" + "\n".join(f"    {c.param()}," for c in cases) + "\n]"
    imports = ["assert_matches_tttv1", "load_generated", "load_legacy"]
    # TTTv1 reads its config from one dict per mode: switched to the case's mode's dict by its own setter
    setter_arg = "" if setter is None else f', setter="{setter}"'
    hf = ""
    if hf_kind is not None:
        imports.append("build_pair")
        hf_mesh = HF_MESH[topology]
        hf_cases = "\n".join(
            f"        {Case(hf_mesh, mode, DECODE_ROWS if mode == 'decode' else PREFILL_ROWS).param()},"
            for mode in modes
        )
        hf = f'''

@pytest.mark.parametrize(
    PARAMETERS,
    [
{hf_cases}
    ],
    indirect=["mesh_device"],
)
def test_{stem}_vs_hf_reference(request, {SIGNATURE}, hf_reference):
    """{class_name} against the Hugging Face module of its kind (the conftest's `hf_reference`: PCC)."""
    _tttv1, module = build_pair(request, TTTV1_CLASS, [{class_name}])
    hf_reference(module, "{hf_kind}", mode)
'''
    reject = ""
    if topology != "any":
        imports.append("assert_refuses_mesh")
        wrong = (8, 4) if topology == "1d" else (1, 8)
        other = f", naming {other_class}" if other_class else ""
        reject = f'''

@pytest.mark.parametrize(
    PARAMETERS, [{Case(wrong, modes[0], DECODE_ROWS).param()}], indirect=["mesh_device"]
)
def test_{stem}_rejects_a_{"2d" if topology == "1d" else "1d"}_mesh(request, {SIGNATURE}):
    """{class_name} refuses TTTv1's arguments for a {wrong[0]}x{wrong[1]} mesh before any device work{other}."""
    assert_refuses_mesh(request, TTTV1_CLASS, {class_name}, {_quoted(other_class)})
'''
    return f'''"""Tests of {class_name} ({relative}), generated by tttv2-refactor from {source_label}: the TTTv1 module and
{class_name}, built from the same constructor arguments and called on copies of the same inputs, give identical
outputs.

The arguments are pytest fixtures named after the parameters of {legacy_class}.__init__ and of its forward, provided
by conftest.py (docs/refactor.md, "Generated tests"); every test is parametrised by PARAMETERS, `mesh_device`
indirectly (the fixture receives the mesh shape)."""

from __future__ import annotations

import pytest

{_import_line(sorted(imports))}

# the input module's own class
TTTV1_CLASS = load_legacy(__file__, "{legacy_relative}", "{legacy_module}", "{legacy_class}")
{class_name} = load_generated(__file__, "{relative}", "{class_name}")
PARAMETERS = ({SIGNATURE_QUOTED})

# {cases_origin}
{cases_code}


@pytest.fixture
def tttv1_class():
    """The TTTv1 class under test, for the conftest's fixtures that depend on it."""
    return TTTV1_CLASS


@pytest.mark.parametrize(PARAMETERS, CASES, indirect=["mesh_device"])
def test_{stem}_matches_tttv1(request, {SIGNATURE}):
    """Outputs identical to the bit (shape, dtype, layout, memory config and every device's values)."""
    assert_matches_tttv1(request, TTTV1_CLASS, [{class_name}], mode, recorded{setter_arg})
{hf}{reject}'''
