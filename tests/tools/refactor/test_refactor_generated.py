"""Every tttv1 module through tttv2-refactor: the generated modules compile, pass ruff, keep no static branch in
their forwards (checked by trace-deps on the generated files), and their generated tests pass: bit-exact against
TTTv1 on 1x1, 1x2, 1x8 and 8x4, decode and prefill, and against Hugging Face.

The MLP and attention modules are the committed worked example (``examples/refactored/``): they are regenerated
with ``--check`` (drift fails the test) and the checked files are the ones tested, so every module is generated
once per session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tttv2_tools.refactor.cli import main
from tttv2_tools.trace_dependencies import analyze

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
TTTV1 = ROOT / "tttv1" / "tt"
EXAMPLES = ROOT / "examples" / "refactored"
#: The committed example was written with this formatter (docs/refactor.md says how to regenerate it).
FORMATTER = "ruff format --stdin-filename {path} -"
COMMITTED = ("mlp", "attention")
MODULES = ("mlp", "mlp_legacy", "rmsnorm", "distributed_norm", "embedding", "lm_head", "attention", "decoder")
#: Methods of a generated class that are not the computation: weight loading (once per module).
SCAFFOLDING = ("load_device_weights",)


def _argv(name: str, out: Path, tests_out: Path, *more) -> list[str]:
    return [
        str(TTTV1 / f"{name}.py"),
        "--out",
        str(out),
        "--tests-out",
        str(tests_out),
        "--quiet",
        "--no-verify",  # these tests run the generated tests themselves (test_refactor_proof.py: the tool's run)
        *map(str, more),
    ]


@pytest.fixture(scope="session")
def checked_examples(tmp_path_factory):
    """``--check`` on the committed example (and its report, regenerated next to it): {name: exit code}."""
    reports = tmp_path_factory.mktemp("reports")
    codes = {}
    for name in COMMITTED:
        argv = _argv(name, EXAMPLES, EXAMPLES / "tests", "--check", "--formatter", FORMATTER)
        codes[name] = main([*argv, f"--report={reports / f'{name}_report.md'}"])
    return codes, reports


@pytest.fixture(scope="session")
def generated(tmp_path_factory, checked_examples):
    """Where each module's generated files are: the committed example, or a folder written once per session."""
    root = tmp_path_factory.mktemp("refactored")
    where = {name: EXAMPLES for name in COMMITTED}
    for name in MODULES:
        if name not in where:
            assert main(_argv(name, root, root / "tests")) == 0, name
            where[name] = root
    (root / "tests" / "conftest.py").write_text((EXAMPLES / "tests" / "conftest.py").read_text())
    return where


def _modules(where: Path, name: str) -> list[Path]:
    return sorted(where.glob(f"{name}_[12]d.py"))


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_example_does_not_drift(checked_examples, name):
    """Regenerating examples/refactored/ changes nothing: modules, tests, report."""
    codes, reports = checked_examples
    assert codes[name] == 0, f"tttv2-refactor --check: examples/refactored/ {name} would change"
    committed = (EXAMPLES / f"{name}_report.md").read_text()
    assert (reports / f"{name}_report.md").read_text() == committed, f"{name}_report.md would change"


def test_generated_files_compile_and_are_ruff_clean(generated):
    paths = [p for name in MODULES for p in _modules(generated[name], name)]
    assert len(paths) == 14  # embedding and rmsnorm serve every mesh: one module each
    for path in paths:
        compile(path.read_text(), str(path), "exec")
    ruff = shutil.which("ruff")
    assert ruff is not None, "ruff is a test dependency"
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--output-format", "concise", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _static_branches(path: Path) -> list[str]:
    source = path.read_text()
    class_name = next(
        line.split()[1].split("(")[0]
        for line in source.splitlines()
        if line.startswith("class ") and "(TTModule)" in line
    )
    entries = [e for e in ("decode_forward", "prefill_forward") if f"def {e}(" in source] or ["forward"]
    out = []
    for entry in entries:
        analysis = analyze(path, class_name=class_name, entry=entry)
        forward = [
            b
            for b in analysis.branches
            if b.phase == "forward"
            and b.function.startswith(class_name + ".")
            and b.function.split(".")[1] not in SCAFFOLDING
        ]
        out += [
            f"{b.loc} {b.function}: {b.test} ({b.classification})"
            for b in forward
            if b.classification != "runtime"
            and b.test != "False"  # ``assert False``: TTTv1's refusal, no choice
        ]
    return out


@pytest.mark.parametrize("name", MODULES)
def test_no_static_branch_left_in_the_forwards(generated, name):
    """trace-deps on each generated file, from each entry: every branch in the class's methods on the forward
    path (decode_forward / prefill_forward and the private methods they call) is runtime."""
    for path in _modules(generated[name], name):
        assert _static_branches(path) == [], path.name


def test_the_static_branch_check_can_fail(tmp_path):
    """The check above finds a static branch when one is left (a hand-made module)."""
    module = tmp_path / "left_1d.py"
    module.write_text(
        "import ttnn\n\n\nclass TTModule:\n    pass\n\n\nclass Left1D(TTModule):\n"
        "    def __init__(self, config):\n        self.config = config\n\n"
        "    def decode_forward(self, x):\n        if self.config.dim == 8192:\n"
        "            x = ttnn.relu(x)\n        if x.shape[-2] > 32:\n            x = ttnn.relu(x)\n        return x\n"
    )
    found = _static_branches(module)
    assert len(found) == 1 and "self.config.dim == 8192" in found[0]


@pytest.mark.parametrize("name", MODULES)
def test_generated_tests_pass(generated, name, pytester, nested_run_imports):
    """The generated tests, run as a user runs them: equivalence (bit-exact) on every mesh and mode, the Hugging
    Face reference, the topology rejection."""
    where = generated[name]
    tests = sorted((where / "tests").glob(f"test_{name}_[12]d.py"))
    assert tests
    result = pytester.runpytest_inprocess(*map(str, tests), "-q", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) >= 5
