"""docs/guarantees.md cannot drift from the tests: every numbered promise names at least one test, and every
test it names (``file.py``, ``file.py::test`` or ``::test`` for the file named just before) exists in tests/."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DOC = ROOT / "docs" / "guarantees.md"

_ITEM = re.compile(r"^(\d+)\. ", re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_REF = re.compile(r"^(?:tests/)?(?P<file>(?:\w+/)*\w+\.py)?(?:::(?P<name>\w+)(?:\[[^\]]*\])?)?$")


@cache
def _names(path: Path) -> frozenset[str]:
    """Functions and classes defined in a test file, at any depth (tests in classes count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, kinds))


def promises(text: str) -> dict[int, str]:
    """Numbered promises (a list item and its indented continuation lines), by number."""
    starts = list(_ITEM.finditer(text))
    items = {}
    for match, following in zip(starts, [*starts[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = text[match.end() : end]
        # the item runs up to the first unindented line
        items[int(match.group(1))] = re.split(r"\n(?=\S)", body, maxsplit=1)[0]
    return items


def named_tests(body: str) -> list[tuple[str | None, str | None]]:
    """The (file, test name or None) pairs a promise names; ``::name`` belongs to the file named before it."""
    refs, current = [], None
    for span in _SPAN.findall(body):
        match = _REF.match(span)
        if not match or not (match["file"] or match["name"]):
            continue
        file = match["file"]
        if file and "/" not in file and not file.startswith("test_"):
            continue  # a file name in prose (`mlp.py`), not a test
        current = file or current
        refs.append((current, match["name"]))
    return refs


def problems(text: str, tests: Path = TESTS) -> list[str]:
    found = []
    items = promises(text)
    for number, body in items.items():
        refs = named_tests(body)
        if not refs:
            found.append(f"promise {number} names no test")
        for file, name in refs:
            path = tests / (file or "")
            if file is None:
                found.append(f"promise {number}: ::{name} follows no file")
            elif not path.is_file():
                found.append(f"promise {number}: no file tests/{file}")
            elif name is not None and name not in _names(path):
                found.append(f"promise {number}: no {name} in tests/{file}")
    if list(items) != list(range(1, len(items) + 1)):
        found.append(f"promises are not numbered 1..{len(items)}: {list(items)}")
    return found


def test_every_promise_names_tests_that_exist():
    text = DOC.read_text(encoding="utf-8")
    assert len(promises(text)) >= 38
    assert problems(text) == []


def test_the_check_catches_drift():
    doc = (
        "1. **Kept.** `ttnn/test_bad_input.py::test_complex_torch_tensors_are_refused`,\n"
        "   `::test_renamed_away`, `ttnn/test_gone.py`\n"
        "2. Nothing named here, only `mlp.py`.\n"
        "4. `::test_orphan` and `tools/test_trace_reliability.py::test_width_is_validated[-5]`\n\n"
        "## Next\n`ttnn/test_tensor.py::not_a_promise_so_not_checked`\n"
    )
    assert problems(doc) == [
        "promise 1: no test_renamed_away in tests/ttnn/test_bad_input.py",
        "promise 1: no file tests/ttnn/test_gone.py",
        "promise 2 names no test",
        "promise 4: ::test_orphan follows no file",
        "promises are not numbered 1..3: [1, 2, 4]",
    ]
