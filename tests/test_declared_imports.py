"""Every third-party module the project imports is declared in pyproject.toml, and the tools are only ever
imported as ``tttv2_tools``.

A fresh ``pip install -e ".[test]"`` must give everything the packages, tests, benchmarks and examples import:
a module that is only installed because something else pulled it in (or because someone installed it by hand)
breaks on the next machine. Imports are read with ``ast`` (nothing is imported), mapped to the distributions
that provide them with ``importlib.metadata.packages_distributions()``, and each must be provided by a
requirement in ``[project] dependencies`` or one of the extras.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("tttv2", "tools", "tttv1", "ttml", "import_hook", "tests", "benchmarks", "examples")
# inputs of the tools (TTTv1-style code they analyse), never run
NOT_RUN = ("tests/tools/fixtures",)
# our own top-level names; `ttnn` is the emulator or Tenstorrent's package (never a dependency)
OWN = {"tttv2", "tttv2_tools", "tttv1", "ttml", "tests", "ttnn", "_tttv2_ttnn_import"}
# the refactor tests' input packages, which those tests put on sys.path (tests/tools/refactor/inputs/README.md)
INPUTS = ROOT / "tests" / "tools" / "refactor" / "inputs"
OWN |= {p.name for p in INPUTS.iterdir() if (p / "__init__.py").is_file()}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_requirements(pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    """Normalized names of every requirement in [project] dependencies and optional-dependencies."""
    project = tomllib.loads(pyproject.read_text())["project"]
    specs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs.extend(extra)
    return {_normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1)) for spec in specs}


def python_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not any(rel.startswith(prefix + "/") for prefix in NOT_RUN):
                files.append(path)
    return files


def _handles_import_error(node: ast.AST) -> bool:
    return isinstance(node, ast.Try) and any(
        isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
        for h in node.handlers
    )


@functools.cache
def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level module, line, optional) of every absolute import in the file; optional: inside a ``try:``
    that handles ImportError, or in its handlers (the fallbacks)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    optional: set[int] = set()
    for node in ast.walk(tree):
        if _handles_import_error(node):
            for stmt in [*node.body, *node.handlers]:
                optional.update(range(stmt.lineno, stmt.end_lineno + 1))
        elif isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return [(module, line, line in optional) for module, line in found]


@functools.cache
def _local_names(folder: Path) -> frozenset[str]:
    """Modules a script in ``folder`` can import as siblings."""
    return frozenset(p.stem for p in folder.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())


def undeclared(declared: set[str]) -> list[str]:
    """One line per import of a third-party module that no declared requirement provides."""
    providers = packages_distributions()
    problems = []
    for path in python_files():
        local = _local_names(path.parent)
        for module, line, optional in imports(path):
            if (
                module in sys.stdlib_module_names
                or module in OWN
                or module in local
                or module == "__future__"
            ):
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            dists = {_normalize(d) for d in providers.get(module, ())}
            if dists & declared:
                continue
            if not dists:
                if optional and _normalize(module) in declared:
                    continue  # an optional import of a requirement this Python does not need (e.g. tomli)
                problems.append(f"{where}: `{module}` is imported but no installed distribution provides it")
            else:
                problems.append(
                    f"{where}: `{module}` comes from {', '.join(sorted(dists))}, which pyproject.toml does not "
                    "declare (add it to [project] dependencies or an extra)"
                )
    return problems


def test_every_third_party_import_is_declared():
    problems = undeclared(declared_requirements())
    assert not problems, "\n".join(problems)


def test_a_missing_declaration_is_reported():
    """The check itself: without hypothesmith in the test extra, the fuzz test's import is reported."""
    declared = declared_requirements()
    assert {"hypothesmith", "threadpoolctl", "numpy", "torch"} <= declared
    problems = undeclared(declared - {"hypothesmith"})
    assert problems and all("hypothesmith" in p for p in problems)
    assert any(p.startswith("tests/tools/test_trace_fuzz.py:") for p in problems)


_TOOLS_IMPORT = re.compile(
    r"^\s*(?:from\s+tools(?:\.\w+)*\s+import\b|import\s+tools\b)|python -m tools\.", re.M
)


def test_tools_are_imported_as_tttv2_tools_only(monkeypatch):
    """No code, test, doc or example reaches the tools through a top-level `tools` package, and that name does
    not import even with the project root on sys.path."""
    monkeypatch.syspath_prepend(str(ROOT))
    with pytest.raises(
        ImportError, match=r"the migration tools are imported as `tttv2_tools`.*not as `tools`"
    ):
        importlib.import_module("tools")
    assert "tools" not in sys.modules
    offenders = []
    for path in python_files():
        for module, line, _ in imports(path):
            if module == "tools":
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    for path in [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted(ROOT.glob("tools/**/*.md")),
    ]:
        for match in _TOOLS_IMPORT.finditer(path.read_text()):
            line = path.read_text().count("\n", 0, match.start()) + 1
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, "import the tools as tttv2_tools.<tool>: " + ", ".join(offenders)
    assert _TOOLS_IMPORT.search("from tools.trace_dependencies import analyze")
    assert not _TOOLS_IMPORT.search("from tttv2_tools.trace_dependencies import analyze")


def _extra_requirements(*extras: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in extras:
        specs.extend(project["optional-dependencies"][extra])
    return {_normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1)) for spec in specs}


def _module_level_imports(path: Path) -> list[tuple[str, int]]:
    """(top-level module, line) of the imports a module runs when it is imported (not those inside functions)."""
    found = []
    for node in ast.parse(path.read_text()).body:
        for inner in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else ():
            if isinstance(inner, ast.Import):
                found += [(alias.name.split(".")[0], inner.lineno) for alias in inner.names]
            elif isinstance(inner, ast.ImportFrom) and inner.level == 0 and inner.module:
                found.append((inner.module.split(".")[0], inner.lineno))
    return found


def test_the_tttv1_model_needs_only_the_torch_extra():
    """README: the TTTv1 model (its demo included) runs after `pip install -e ".[torch]"`: no tttv1/ module
    imports, when imported, what only the test extra brings (pytest once was, at the demo's module level).
    Imports inside functions are the optional paths the README names (a local checkpoint's tokenizer)."""
    allowed = _extra_requirements("torch")
    providers = packages_distributions()
    offenders = []
    for path in sorted((ROOT / "tttv1").rglob("*.py")):
        if path == ROOT / "tttv1" / "testing.py":
            continue  # the pytest fixtures of generated tests: only pytest imports it
        for module, line in _module_level_imports(path):
            if module in sys.stdlib_module_names or module in OWN or module == "__future__":
                continue
            if not {_normalize(d) for d in providers.get(module, ())} & allowed:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not offenders, "tttv1 imports beyond the torch extra: " + ", ".join(offenders)
