"""Shared by the refactor tests that run generated tests in-process (``pytester.runpytest_inprocess``).

pytester restores ``sys.modules`` after each nested run, so whatever a nested run imported first is dropped and
imported again by the next one; torch does not survive being imported twice in one process (it crashes). The
nested runs' heavy imports are therefore made once here, in the outer session, before any nested run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

# nested pytest runs keep the installed packages and the library (torch crashes when imported twice)
from tests.tools.refactor.nested_runs import _nested_runs_keep_installed_modules  # noqa: F401
from tttv2 import ttnn
from tttv2.testing.equivalence import assert_equivalent_outputs
from tttv2.testing.generated import load_generated
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.zencheck import static_branches

__all__ = [
    "INPUTS",
    "InputPackage",
    "assert_identical",
    "assert_no_static_branch",
    "generated_class",
    "importable_inputs",
    "input_rows",
    "load_generated",
    "replicated",
]

#: The TTTv1-style input packages of the refactor tests (rsem, rzen, rfx, ...).
INPUTS = Path(__file__).parent / "inputs"


def importable_inputs(*packages: str):
    """A module-scoped autouse fixture for a test file: ``inputs/`` on ``sys.path`` while the file runs (a generated
    ``from_model_args`` imports the TTTv1 package, as TTTv1's callers do), and ``packages`` forgotten afterwards so
    the next file imports its own. Use: ``inputs_importable = importable_inputs("rzen")``."""

    @pytest.fixture(scope="module", autouse=True)
    def inputs_importable():
        sys.path.insert(0, str(INPUTS))
        yield
        sys.path.remove(str(INPUTS))
        for name in [n for n in sys.modules if n.split(".")[0] in packages]:
            del sys.modules[name]

    return inputs_importable


class InputPackage:
    """One TTTv1-style input package of ``inputs/`` as a test file reads it: ``generate`` made once per module and
    class for the file (the tests only read the result), and the package's TTTv1 classes by name (imported while
    ``importable_inputs`` has ``inputs/`` on ``sys.path``)."""

    def __init__(self, package: str):
        self.package = package
        self._results: dict = {}

    def generate(self, module: str, class_name: str | None = None):
        key = (module, class_name)
        if key not in self._results:
            self._results[key] = generate(INPUTS / self.package / f"{module}.py", class_name=class_name)
        return self._results[key]

    def tttv1(self, module: str, name: str):
        return getattr(importlib.import_module(f"{self.package}.{module}"), name)


def assert_no_static_branch(result) -> None:
    """No gap, and no generated module keeps a static branch (an ``if`` on configuration in ``forward``)."""
    assert result.gaps == [], [g.describe() for g in result.gaps]
    for generated in result.modules:
        assert static_branches(generated.code, generated.file_name, generated.class_name) == []


TTTV1_MODULES = ("ccl", "common", "model_config", "rope", "mlp", "mlp_legacy", "rmsnorm", "distributed_norm")
TTTV1_MODULES += ("embedding", "lm_head", "attention", "decoder", "model")


@pytest.fixture(scope="session")
def nested_run_imports():
    """Import what the generated tests import (torch, transformers and its model families, tttv1)."""
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import tttv1.testing  # noqa: F401  (the fixtures of the generated tests' conftest)
    from tttv2.testing.references import _CLASS_PREFIX

    for family in _CLASS_PREFIX:
        importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    for name in TTTV1_MODULES:
        importlib.import_module(f"tttv1.tt.{name}")


def replicated(x: np.ndarray, mesh):
    """``x`` as a bfloat16 tile tensor in DRAM, the same on every device: the input of the emulator checks."""
    return ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )


def input_rows(rows: int) -> np.ndarray:
    """A (1, 1, rows, 64) float32 input, the same for a given number of rows."""
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def assert_identical(expected, got, what: str = "output") -> None:
    """Outputs identical to the bit (the library's check, as the generated tests make it)."""
    assert_equivalent_outputs(expected, got, what=what)


def generated_class(result, topology: str, folder):
    """The generated class of ``topology`` from a ``generate`` result, written to ``folder`` and loaded."""
    generated = next(g for g in result.modules if g.topology == topology)
    (folder / generated.file_name).write_text(generated.code)
    return load_generated(str(folder / "test.py"), generated.file_name, generated.class_name)
