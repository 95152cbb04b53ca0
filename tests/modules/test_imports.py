"""The building blocks depend on ttnn, numpy and the standard library only: no torch, no transformers, and
``tttv1`` only inside ``from_model_args`` (imported lazily there)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tttv2.modules as modules

ROOT = Path(modules.__file__).resolve().parent
ALLOWED_THIRD_PARTY = {"numpy", "ttnn"}
ALLOWED_TTTV2 = ("tttv2.ttnn", "tttv2.modules")


def _problem(module: str, names: list[str], function: str | None) -> str | None:
    root = module.split(".")[0]
    if root in sys.stdlib_module_names or root == "__future__" or root in ALLOWED_THIRD_PARTY:
        return None
    if root == "tttv2":
        targets = [module] if module != "tttv2" else [f"tttv2.{n}" for n in names]
        bad = [t for t in targets if not t.startswith(ALLOWED_TTTV2)]
        return f"imports {', '.join(bad)}" if bad else None
    if root == "tttv1":
        return None if function == "from_model_args" else f"imports {module} outside from_model_args"
    return f"imports {module}"


def import_problems(source: str, filename: str = "<module>") -> list[str]:
    """Every forbidden import of ``source`` as 'file:line: what'."""
    problems: list[str] = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                found = [_problem(alias.name, [], function) for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                found = [
                    None
                    if child.level
                    else _problem(child.module or "", [a.name for a in child.names], function)
                ]
            else:
                found = []
            problems.extend(f"{filename}:{child.lineno}: {p}" for p in found if p)
            visit(child, inner)

    visit(ast.parse(source), None)
    return problems


def test_modules_import_only_ttnn_numpy_and_the_standard_library():
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) >= 15
    problems = [p for f in files for p in import_problems(f.read_text(), str(f.relative_to(ROOT)))]
    assert not problems, "\n".join(problems)


def test_the_scan_finds_forbidden_imports():
    source = """
import torch
from transformers import LlamaConfig
import tttv1.tt.common
from tttv2 import testing
from tttv2.testing.references import hf_mlp
import numpy as np, os
from tttv2 import ttnn
from . import _grids

class M:
    @classmethod
    def from_model_args(cls):
        from tttv1.tt.common import Mode
        def inner():
            import tttv1
    def decode_forward(self):
        import tttv1
"""
    problems = import_problems(source, "m.py")
    assert problems == [
        "m.py:2: imports torch",
        "m.py:3: imports transformers",
        "m.py:4: imports tttv1.tt.common outside from_model_args",
        "m.py:5: imports tttv2.testing",
        "m.py:6: imports tttv2.testing.references",
        "m.py:16: imports tttv1 outside from_model_args",
        "m.py:18: imports tttv1 outside from_model_args",
    ]
