"""Every tttv1 module through tttv2-refactor: the generated modules compile, pass ruff, are regenerated
byte-identically, keep no static branch in their forwards (checked by trace-deps on the generated files), and
their generated tests pass: bit-exact against TTTv1 on 1x1, 1x2, 1x8 and 8x4, decode and prefill, and against
Hugging Face."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tttv2_tools.refactor.cli import main
from tttv2_tools.trace_dependencies import analyze

pytest_plugins = ["pytester"]

TTTV1 = Path(__file__).resolve().parents[3] / "tttv1" / "tt"
MODULES = ("mlp", "mlp_legacy", "rmsnorm", "distributed_norm", "embedding", "lm_head", "attention", "decoder")
#: Methods of a generated class that are not the computation: weight loading (once per module).
SCAFFOLDING = ("load_device_weights",)


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """All eight modules and their tests, generated once for the whole session."""
    root = tmp_path_factory.mktemp("refactored")
    for name in MODULES:
        code = main(
            [
                str(TTTV1 / f"{name}.py"),
                "--out",
                str(root / "modules"),
                "--tests-out",
                str(root / "tests"),
                "--quiet",
            ]
        )
        assert code == 0, name
    return root


def _files(root: Path, name: str) -> list[Path]:
    return sorted((root / "modules").glob(f"{name}_[12]d.py"))


@pytest.mark.parametrize("name", MODULES)
def test_generated_modules_compile_and_regenerate_identically(generated, name):
    files = _files(generated, name)
    assert files, name
    for path in files:
        compile(path.read_text(), str(path), "exec")
    # the same input gives byte-identical output: --check finds nothing to change
    argv = [
        str(TTTV1 / f"{name}.py"),
        "--out",
        str(generated / "modules"),
        "--tests-out",
        str(generated / "tests"),
    ]
    assert main([*argv, "--check", "--quiet"]) == 0


def test_generated_files_are_ruff_clean(generated):
    ruff = shutil.which("ruff")
    assert ruff is not None, "ruff is a test dependency"
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--output-format", "concise", str(generated)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", MODULES)
def test_no_static_branch_left_in_the_forwards(generated, name):
    """trace-deps on each generated file, from each entry: every branch it finds in the class's methods on the
    forward path is runtime (copied helper functions are listed apart: see docs/refactor.md, Limits)."""
    for path in _files(generated, name):
        source = path.read_text()
        class_name = next(
            line.split()[1].split("(")[0]
            for line in source.splitlines()
            if line.startswith("class ") and "(TTModule)" in line
        )
        entries = [e for e in ("decode_forward", "prefill_forward") if f"def {e}(" in source] or ["forward"]
        for entry in entries:
            analysis = analyze(path, class_name=class_name, entry=entry)
            static = [
                f"{b.loc} {b.function}: {b.test} ({b.classification})"
                for b in analysis.branches
                if b.phase == "forward"
                and b.function.startswith(class_name + ".")
                and b.function.split(".")[1] not in SCAFFOLDING
                and b.classification != "runtime"
            ]
            assert static == [], f"{path.name} from {entry}: {static}"
            runtime = [b for b in analysis.branches if b.function == f"{class_name}.{entry}"]
            assert all(b.classification == "runtime" for b in runtime)


@pytest.mark.parametrize("name", MODULES)
def test_generated_tests_pass(generated, name, pytester):
    """The generated tests, run as a user runs them: equivalence (bit-exact) on every mesh and mode, the Hugging
    Face reference, the topology rejection."""
    tests = sorted((generated / "tests").glob(f"test_{name}_[12]d.py"))
    assert tests
    result = pytester.runpytest_inprocess(*map(str, tests), "-q", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) >= 5
