"""The emulator's layers (docs/emulator.md, "Layers"): lower modules reach higher ones only through
tttv2/ttnn/_upcalls.py, never by an import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tttv2 import ttnn
from tttv2.ttnn import _upcalls
from tttv2.ttnn.errors import ValidationError


def test_upcall_names_a_function_no_layer_provided():
    with pytest.raises(
        ValidationError, match=r"'no_such_op' is provided by a layer that has not been loaded"
    ):
        _upcalls.upcall("no_such_op")


def test_tensor_methods_reach_the_functions_the_upper_layers_provided():
    assert _upcalls.upcall("add") is ttnn.add
    assert _upcalls.upcall("to_torch") is ttnn.to_torch
    assert _upcalls.upcall("run_backward") is ttnn.autograd.engine.run_backward
    assert _upcalls.upcall("complete_sends") is ttnn.ops.sockets.complete_sends


def test_tttv2_distributed_loads_its_training_helper_on_first_use_and_names_a_missing_attribute():
    import tttv2.distributed as distributed
    from tttv2.distributed import _training

    assert distributed.all_reduce_gradients_ is _training.all_reduce_gradients_
    with pytest.raises(AttributeError, match=r"module 'tttv2.distributed' has no attribute 'no_such_name'"):
        distributed.no_such_name  # noqa: B018


# The layers, lowest first (docs/emulator.md, "Layers"). A module may import a module of its own layer or of a
# lower one, at module level or inside a function; never one of a higher layer (that needs _upcalls.provide).
# A name is a module or a package prefix; the longest matching name decides.
LAYERS = (
    (
        "foundation",
        "tttv2._native tttv2._tempfiles tttv2.distributed tttv2.distributed._mpi tttv2.distributed._mesh "
        "tttv2.distributed._rank tttv2.distributed.run tttv2.ttnn.errors tttv2.ttnn.types tttv2.ttnn._threads tttv2.ttnn._upcalls "
        "tttv2.ttnn._kernels tttv2.ttnn._kernels.reference tttv2.ttnn.memory tttv2.ttnn.device "
        "tttv2.ttnn.placement tttv2.ttnn.program_configs tttv2.ttnn.memory_tracker tttv2.ttnn.distributed_context",
    ),
    ("storage", "tttv2.ttnn.storage"),
    ("numerics", "tttv2.ttnn.numerics tttv2.ttnn._kernels.training tttv2.ttnn._kernels.training_reference"),
    ("remote shards", "tttv2.ttnn._remote"),
    ("tensor", "tttv2.ttnn.tensor"),
    ("autograd engine", "tttv2.ttnn.autograd.engine"),
    ("ops", "tttv2.ttnn.ops"),
    (
        "host transfers and backward rules",
        "tttv2.ttnn.distribution tttv2.ttnn.autograd tttv2.ttnn.autograd.rules",
    ),
    (
        "models and the ttnn namespace",
        "tttv2.ttnn tttv2.ttnn.nn tttv2.ttnn.optim tttv2.ttnn.namespaces tttv2.ttnn._compat",
    ),
    ("users of the emulator", "tttv2.distributed._training tttv2.testing tttv2.ttnn.demo"),
)
LAYER_OF = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names.split()}

# Imports inside functions, each with why it cannot be at module level. Everything else is imported at the top.
ALLOWED_LAZY = {
    ("tttv2/distributed/__init__.py", "tttv2.distributed._training"): (
        "tttv2.distributed is imported by ttnn's foundation (device, _remote); its training helper needs the whole "
        "of tttv2.ttnn, so it loads on first use of tttv2.distributed.all_reduce_gradients_"
    ),
}

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("tttv2/ttnn", "tttv2/distributed")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int | None:
    while module:
        if module in LAYER_OF:
            return LAYER_OF[module]
        module = module.rpartition(".")[0]
    return None


def _imports(path: Path):
    """(line, imported tttv2 module, inside a function?) for every import statement of ``path``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    known = {_module_name(p) for p in (ROOT / "tttv2").rglob("*.py")} | {"tttv2._native"}  # compiled kernels
    tree = ast.parse(path.read_text(), str(path))
    lazy = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for node in ast.walk(fn)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # ``from .ops import ccl`` imports the module tttv2.ttnn.ops.ccl
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target == "tttv2" or target.startswith("tttv2."):
                yield node.lineno, target, id(node) in lazy


def _sources():
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def test_every_module_of_the_emulator_has_a_layer():
    missing = sorted(
        {_module_name(p) for p in _sources() if _layer(_module_name(p)) is None}
        | {t for p in _sources() for _, t, _ in _imports(p) if _layer(t) is None}
    )
    assert not missing, f"give these modules a layer in LAYERS: {missing}"


def test_no_module_imports_a_higher_layer_at_any_level():
    upward = []
    for path in _sources():
        here = _layer(_module_name(path))
        for line, target, inside in _imports(path):
            allowed = inside and (str(path.relative_to(ROOT)), target) in ALLOWED_LAZY
            if _layer(target) > here and not allowed:
                upward.append(
                    f"{path.relative_to(ROOT)}:{line}: {LAYERS[here][0]} imports {target} "
                    f"({LAYERS[_layer(target)][0]})"
                )
    assert not upward, "imports up the layers (use tttv2/ttnn/_upcalls.py):\n" + "\n".join(upward)


@pytest.mark.parametrize("module", ["tttv2/ttnn/storage.py", "tttv2/ttnn/tensor.py"])
def test_storage_and_tensor_import_no_ops_autograd_or_distribution(module):
    above = ("tttv2.ttnn.ops", "tttv2.ttnn.autograd", "tttv2.ttnn.distribution", "tttv2.ttnn.nn")
    found = [t for _, t, _ in _imports(ROOT / module) if t.startswith(above)]
    assert found == []


def test_function_level_imports_are_only_the_allowed_ones():
    lazy = {
        (str(path.relative_to(ROOT)), target)
        for path in _sources()
        for _, target, inside in _imports(path)
        if inside
    }
    assert lazy == set(ALLOWED_LAZY), (
        f"new: {sorted(lazy - set(ALLOWED_LAZY))}; no longer there: {sorted(set(ALLOWED_LAZY) - lazy)}"
    )
    assert all(reason.strip() for reason in ALLOWED_LAZY.values())


def test_the_scan_sees_imports_up_and_inside_functions(tmp_path, monkeypatch):
    """The checks above can fail: a lazy upward import, as tensor.py had them, is found and placed."""
    probe = ROOT / "tttv2" / "ttnn" / "tensor.py"
    source = "def f():\n    from .ops.eltwise import add\n    from . import storage\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source)
    found = list(_imports(probe))
    assert found == [(2, "tttv2.ttnn.ops.eltwise", True), (3, "tttv2.ttnn.storage", True)]
    assert _layer("tttv2.ttnn.ops.eltwise") > _layer("tttv2.ttnn.tensor") > _layer("tttv2.ttnn.storage")
    assert _layer("tttv2.somewhere_else") is None
