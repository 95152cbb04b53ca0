"""``emit``: write a target's cases into one module-level ``NAME = [pytest.param(...), ...]`` list of a test file.

libcst replaces that one statement; every other byte of the file is kept. The statement carries a header
comment (``# collect-cases: target=... fields=...``) that pins the columns, so a later run with new recordings
keeps the same ``pytest.param`` shape. Entries the store does not produce (written or edited by hand) are kept
after the generated ones and reported; ``force`` drops them. Keyword arguments other than ``id`` on an entry
the store does produce (``marks=pytest.mark.slow``) are kept. A missing file is created as a small skeleton; a
list that an existing file lacks is added at its end. Without ``--fields`` the columns are those of the list's
header, else of its ``parametrize`` (written out, or a constant such as a generated test's ``PARAMETERS``), else,
for a new file, the generated tests' (``GENERATED_TEST_COLUMNS``), whose skeleton runs the class on each case.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from .cases import GENERATED_TEST_COLUMNS, Case, default_columns, select
from .errors import EmitError
from .minimal import minimal_rows
from .params import Row, make_ids, project, render_param, render_value, uses_ttnn

HEADER = "# collect-cases:"
_BOM = "\ufeff"
DEFAULT_LINE_LENGTH = 110

#: A new file's skeleton when the list has the generated tests' columns (the default): a test that runs the TTTv1
#: class on every case, each argument from the pytest fixture named after its parameter (docs/refactor.md,
#: "Generated tests"; ``tttv1.testing`` has them for tttv1's modules).
RUNNING_SKELETON = '''"""Cases recorded by collect-cases for {target}, and a test that runs {cls} on each.

``{name}`` is written by ``collect-cases emit`` (its header comment says from what): run emit again to
update it, ``emit --check`` to test that it is up to date. Hand-written entries are kept, and so are the
``marks=`` of generated ones. Its columns are those of the tests ``tttv2-refactor --tests-out`` writes, so the
list can be emitted into such a test as well.

The test builds {cls} and calls it on each case, every argument from the pytest fixture named after its
parameter (docs/refactor.md, "Generated tests"; {fixtures_note}). Extend it into a comparison with a reference.
"""

import importlib

import pytest

from tttv2.testing.generated import constructor_arguments, forward_arguments
{fixtures}
TTTV1_CLASS = importlib.import_module("{module}").{cls}

{name} = []


@pytest.fixture
def tttv1_class():
    """The class under test, for the fixtures that depend on it."""
    return TTTV1_CLASS


@pytest.mark.parametrize({argnames}, {name}, indirect=["mesh_device"])
def test_{test_name}(request, {params}):
    """{cls} runs on the recorded case: built, then called, from the fixtures."""
    module = TTTV1_CLASS(**constructor_arguments(request, TTTV1_CLASS))
    module(**forward_arguments(request, TTTV1_CLASS, mode, recorded, mesh_device))
'''
TTTV1_FIXTURES = "from tttv1.testing import *  # noqa: F403  (the fixtures of tttv1's parameters)\n"

#: A new file's skeleton for other columns (``--fields``): the test body is the user's to write.
SKELETON = '''"""Cases recorded by collect-cases for {target}.

``{name}`` is written by ``collect-cases emit`` (its header comment says from what): run emit again to
update it, ``emit --check`` to test that it is up to date. Hand-written entries are kept, and so are the
``marks=`` of generated ones.
"""

import pytest

from tttv2 import ttnn

{name} = []


@pytest.mark.parametrize({argnames}, {name})
def test_{test_name}({params}):
    """Replace this body: build the module for this case and compare it with its reference."""
    pytest.fail("skeleton written by collect-cases emit: write this test")
'''


@dataclass
class EmitResult:
    """What ``emit`` would write; ``changed`` tells whether the file differs."""

    path: Path
    old_text: str | None
    new_text: str
    columns: list[str]
    kept: int
    dropped: list[str] = field(default_factory=list)  # ids --minimal left out
    foreign: list[str] = field(default_factory=list)  # hand-written entries kept (or dropped with force)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text


@dataclass
class _Existing:
    values_key: str | None  # normalised positional arguments, None for entries that are not pytest.param
    extra_kwargs: list[str]
    code: str
    ident: str | None


def _normalised(codes: list[str]) -> str:
    return ast.dump(ast.parse("(" + ", ".join(codes) + ",)", mode="eval"))


def _is_header(line: cst.EmptyLine) -> bool:
    return line.comment is not None and line.comment.value.startswith(HEADER)


def _comment_lines(module: cst.Module, index: int, statement: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """The comment lines above a statement (libcst gives those above the first statement to the module)."""
    return [*(module.header if index == 0 else ()), *statement.leading_lines]


def _parse_header(module: cst.Module, index: int, statement: cst.SimpleStatementLine) -> dict[str, str]:
    for line in _comment_lines(module, index, statement):
        if _is_header(line):
            words = line.comment.value[len(HEADER) :].split()
            return dict(w.partition("=")[::2] for w in words)
    return {}


def _find(module: cst.Module, name: str) -> list[tuple[int, cst.SimpleStatementLine, cst.BaseExpression]]:
    found = []
    for index, statement in enumerate(module.body):
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        small = statement.body[0]
        if (
            isinstance(small, cst.Assign)
            and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
        ) or (
            isinstance(small, cst.AnnAssign)
            and isinstance(small.target, cst.Name)
            and small.target.value == name
        ):
            found.append((index, statement, small.value))
    return found


def _string_names(node) -> list[str] | None:
    if isinstance(node, cst.SimpleString):
        return [n.strip() for n in node.evaluated_value.split(",") if n.strip()]
    if isinstance(node, (cst.Tuple, cst.List)) and all(
        isinstance(e.value, cst.SimpleString) for e in node.elements
    ):
        return [e.value.evaluated_value for e in node.elements]
    return None


class _ParametrizeUses(cst.CSTVisitor):
    """Argnames of every ``parametrize(<names>, NAME)`` call; ``<names>`` written out, or a module-level constant
    (``PARAMETERS = ("mesh_device", ...)``, as in the tests tttv2-refactor generates)."""

    def __init__(self, name: str, module: cst.Module):
        self.name = name
        self.module = module
        self.argnames: list[list[str]] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "parametrize" and len(node.args) >= 2:
            values = node.args[1].value
            if isinstance(values, cst.Name) and values.value == self.name:
                names_node = node.args[0].value
                if isinstance(names_node, cst.Name):
                    bound = _find(self.module, names_node.value)
                    names_node = bound[0][2] if len(bound) == 1 else None
                names = _string_names(names_node) if names_node is not None else None
                if names is not None:
                    self.argnames.append(names)


def _existing_entries(module: cst.Module, value: cst.List) -> list[_Existing]:
    out = []
    for element in value.elements:
        node = element.value
        code = module.code_for_node(node)
        is_param = (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "param"
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value == "pytest"
        )
        if not is_param:
            out.append(_Existing(None, [], code, None))
            continue
        positional = [module.code_for_node(a.value) for a in node.args if a.keyword is None and not a.star]
        ident = None
        extra = []
        for a in node.args:
            if a.keyword is None or a.star:
                continue
            if a.keyword.value == "id" and isinstance(a.value, cst.SimpleString):
                ident = a.value.evaluated_value
            elif a.keyword.value != "id":
                extra.append(f"{a.keyword.value}={module.code_for_node(a.value)}")
        try:
            key = _normalised(positional)
        except SyntaxError:
            key = None
        out.append(_Existing(key, extra, code, ident))
    return out


def _read_exactly(path: Path) -> str:
    """The file's text with nothing translated: CRLF line ends stay (libcst then writes the new list with
    them too) and a UTF-8 byte order mark stays as its character, so every byte outside the list is kept."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EmitError(f"--into {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _module_bindings(module: cst.Module) -> dict[str, tuple[str, int]]:
    """Every name bound at module level other than by a plain ``NAME = ...`` / ``NAME: T = ...`` statement (which
    ``_find`` handles): ``class``, ``def``, ``import``, ``for`` / ``with`` targets, tuple unpacking, also inside
    module-level ``if`` / ``try`` / ``with`` blocks (``NAME += [...]`` extends a list; it binds nothing new).
    Name -> (what binds it, line)."""
    found: dict[str, tuple[str, int]] = {}

    def targets(node: ast.AST, kind: str, line: int) -> None:
        for name in ast.walk(node):
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):  # not `x` of `x[0] = ...`
                found.setdefault(name.id, (kind, line))

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, ("a class", node.lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.setdefault(node.name, ("a def", node.lineno))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    found.setdefault(bound, ("an import", node.lineno))
            elif isinstance(node, ast.Assign) and not all(isinstance(t, ast.Name) for t in node.targets):
                for target in node.targets:
                    targets(target, "an unpacking assignment", node.lineno)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target, "a for loop", node.lineno)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars, "a with statement", node.lineno)
            for block in ("body", "orelse", "finalbody"):
                if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                visit(handler.body)

    visit(ast.parse(module.code).body)
    return found


def header_comment(
    target: str,
    columns: list[str],
    *,
    topology: str | None = None,
    mode: str | None = None,
    minimal: bool = False,
) -> str:
    """The comment emit writes above a list: what it lists (target, columns) and the filters it was emitted with."""
    words = [f"target={target}", f"fields={','.join(columns)}"]
    words += [f"{k}={v}" for k, v in (("topology", topology), ("mode", mode)) if v]
    if minimal:
        words.append("minimal")
    return f"{HEADER} {' '.join(words)}"


def _rows_and_ids(
    chosen: list[Case], columns: list[str], minimal: bool
) -> tuple[list[Row], list[str], list[str]]:
    """The rows to write (sorted; ``--minimal``'s subset), their ids, and the ids ``--minimal`` left out."""
    rows = project(chosen, columns)
    dropped_rows: list[Row] = []
    every_row = rows
    if minimal:
        rows, dropped_rows = minimal_rows(rows, columns)
    # ids come from the whole selection, so a case keeps its id with or without --minimal
    id_of = dict(zip(map(id, every_row), make_ids(every_row, columns)))
    return rows, [id_of[id(r)] for r in rows], [id_of[id(r)] for r in dropped_rows]


def _entries(
    rows: list[Row], ids: list[str], columns: list[str], line_length: int, kwargs=lambda values: []
) -> list[str]:
    """One ``pytest.param(...)`` entry per row (``kwargs(values_code)``: keyword arguments kept after ``id``)."""
    lines = []
    for row, ident in zip(rows, ids):
        values_code = [render_value(v, c) for c, v in zip(columns, row.values)]
        lines.append(render_param(values_code, [f'id="{ident}"', *kwargs(values_code)], "    ", line_length))
    return lines


def render_list(
    cases: list[Case],
    target: str,
    name: str,
    *,
    topology: str | None = None,
    mode: str | None = None,
    columns: tuple[str, ...] = GENERATED_TEST_COLUMNS,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> str:
    """``NAME = [...]`` with its header comment, byte for byte what ``emit`` writes for ``cases`` (already
    selected: ``topology`` / ``mode`` only go into the header) into a file without that list: tttv2-refactor
    ``--cases`` writes its ``CASES`` with it, so ``emit --check`` right after it passes."""
    rows, ids, _ = _rows_and_ids(cases, list(columns), False)
    header = header_comment(target, list(columns), topology=topology, mode=mode)
    body = "\n".join(_entries(rows, ids, list(columns), line_length))
    return f"{header}\n{name} = [\n{body}\n]"


def emit(
    cases: list[Case],
    target: str,
    into: str | os.PathLike,
    name: str,
    *,
    topology: str | None = None,
    mode: str | None = None,
    minimal: bool = False,
    columns: list[str] | None = None,
    force: bool = False,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> EmitResult:
    """Compute the new text of ``into`` with ``name`` listing ``cases`` of ``target`` (nothing is written)."""
    path = Path(into)
    if not name.isidentifier():
        raise EmitError(f"--name: expected a Python identifier, got {name!r}")
    chosen = select([c for c in cases if c.target == target], topology, mode)
    if not chosen:
        filters = ", ".join(f"{k} {v}" for k, v in (("topology", topology), ("mode", mode)) if v)
        raise EmitError(
            f"--target {target}: no recorded cases{' with ' + filters if filters else ''} in the store"
        )

    if path.is_dir():
        raise EmitError(f"--into {path}: is a directory, expected a test file")
    if path.exists() and not path.is_file():  # a FIFO would make the read wait forever
        raise EmitError(f"--into {path}: is not a regular file, expected a test file")
    if not path.exists() and not path.parent.is_dir():
        raise EmitError(f"--into {path}: folder {path.parent} does not exist")
    old_text = _read_exactly(path) if path.exists() else None
    source = old_text
    try:
        module = cst.parse_module(source) if source is not None else None
    except cst.ParserSyntaxError as exc:
        raise EmitError(
            f"--into {path}: refusing to emit into a file that does not parse: {exc.message}"
        ) from None

    header: dict[str, str] = {}
    bindings: dict[str, tuple[str, int]] = {}
    argnames: list[list[str]] = []
    if module is not None:
        found = _find(module, name)
        if len(found) > 1:
            raise EmitError(
                f"--name {name}: assigned {len(found)} times at module level in {path}; expected once"
            )
        bindings = _module_bindings(module)
        other = bindings.get(name)
        if other is not None:
            kind, line = other
            raise EmitError(
                f"--name {name}: in {path} it is bound by {kind} (line {line}), not a list; refusing to shadow it"
            )
        if found:
            index, statement, value = found[0]
            if not isinstance(value, cst.List):
                raise EmitError(
                    f"--name {name}: in {path} it is a {type(value).__name__}, not a list; refusing to replace it"
                )
            header = _parse_header(module, index, statement)
            if header.get("target") not in (None, target):
                raise EmitError(
                    f"--name {name}: the list in {path} holds cases of {header['target']}, not of {target}"
                )
        uses = _ParametrizeUses(name, module)
        module.visit(uses)
        argnames = uses.argnames

    available = default_columns(chosen)
    all_columns = {c for case in chosen for c in case.flat}
    if columns is None:
        pinned = header.get("fields")
        if pinned:
            columns = pinned.split(",")
        elif argnames:
            columns = argnames[0]
        elif module is None:  # a new file: the generated tests' columns, and a skeleton test that runs
            columns = list(GENERATED_TEST_COLUMNS)
        else:
            columns = available
    # a generated test's model_name / mode may be unknown: its entry then says None, as tttv2-refactor's does
    unknown = [c for c in columns if c not in all_columns and c not in GENERATED_TEST_COLUMNS]
    if unknown:
        raise EmitError(
            f"--fields: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not recorded for {target}; "
            f"recorded columns: {', '.join(sorted(all_columns))}"
        )
    for names in argnames:
        if names != list(columns):
            raise EmitError(
                f"{path}: a parametrize({', '.join(names)!r}, {name}) does not take the emitted fields "
                f"({', '.join(columns)}); update its argument names, or pass --fields {','.join(names)}"
            )

    rows, ids, dropped_ids = _rows_and_ids(chosen, list(columns), minimal)

    if module is None:
        params = ", ".join(columns)
        argnames_code = f'"{params}"'
        test_name = name.lower().removesuffix("_cases") or "cases"
        if list(columns) == list(GENERATED_TEST_COLUMNS):
            dotted, _, cls = target.partition(":")
            tttv1 = dotted.split(".", 1)[0] == "tttv1"
            text = RUNNING_SKELETON.format(
                target=target,
                name=name,
                argnames=argnames_code,
                test_name=test_name,
                params=params,
                module=dotted,
                cls=cls,
                fixtures="\n" + TTTV1_FIXTURES if tttv1 else "",
                fixtures_note="here those of tttv1.testing" if tttv1 else "conftest.py provides them",
            )
        else:
            text = SKELETON.format(
                target=target, name=name, argnames=argnames_code, test_name=test_name, params=params
            )
        module = cst.parse_module(text)
    elif "pytest" not in bindings and not _find(module, "pytest"):
        raise EmitError(
            f"--into {path}: the list is made of pytest.param(...) entries but the file binds no name 'pytest' at "
            "module level; add `import pytest` first"
        )
    elif uses_ttnn(rows, list(columns)) and "ttnn" not in bindings and not _find(module, "ttnn"):
        raise EmitError(
            f"--into {path}: the cases name dtypes as ttnn.<dtype> but the file binds no name 'ttnn' at module "
            "level; add `from tttv2 import ttnn` (or `import ttnn`) first"
        )

    if not _find(module, name):
        # a new list in an existing file goes at its end (a parametrize that uses it must come after it)
        blank = [cst.EmptyLine(), cst.EmptyLine()] if module.body else []
        added = cst.parse_statement(f"{name} = []\n").with_changes(leading_lines=blank)
        module = module.with_changes(body=[*module.body, added])
    index, statement, value = _find(module, name)[0]
    existing = _existing_entries(module, value) if isinstance(value, cst.List) else []
    by_key = {e.values_key: e for e in existing if e.values_key is not None}

    matched = set()

    def kept_kwargs(values_code: list[str]) -> list[str]:
        previous = by_key.get(_normalised(values_code))
        if previous is None:
            return []
        matched.add(id(previous))
        return previous.extra_kwargs

    lines = _entries(rows, ids, list(columns), line_length, kept_kwargs)
    # entries of other store cases (left out by the filters or --minimal) go; only what the store lacks stays
    in_store = {
        _normalised([render_value(v, c) for c, v in zip(columns, r.values)])
        for r in project([c for c in cases if c.target == target], list(columns))
    }
    foreign = [e for e in existing if id(e) not in matched and e.values_key not in in_store]
    result_foreign = [e.ident or e.code.splitlines()[0] for e in foreign]
    warnings = []
    if foreign and not force:
        warnings.append(
            f"{name} in {path}: kept {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} that the store does "
            f"not produce (hand-written, or no longer recorded): {', '.join(result_foreign)}; --drop-unrecorded drops them"
        )
        lines.extend(f"    {e.code}," for e in foreign)
        clashing = sorted({e.ident for e in foreign if e.ident} & set(ids))
        if clashing:
            warnings.append(f"{name} in {path}: ids used twice (generated and kept): {', '.join(clashing)}")

    header_line = cst.EmptyLine(
        comment=cst.Comment(
            header_comment(target, list(columns), topology=topology, mode=mode, minimal=minimal)
        )
    )
    list_code = "[\n" + "\n".join(lines) + "\n]"
    new_value = cst.parse_expression(list_code)
    leading = [line for line in statement.leading_lines if not _is_header(line)]
    small = statement.body[0].with_changes(value=new_value)
    new_statement = statement.with_changes(body=[small], leading_lines=[*leading, header_line])
    body = list(module.body)
    body[index] = new_statement
    module_header = [line for line in module.header if not _is_header(line)] if index == 0 else module.header
    new_text = module.with_changes(body=body, header=module_header).code
    if old_text is not None and old_text.startswith(_BOM):  # libcst drops the byte order mark: put it back
        new_text = _BOM + new_text
    return EmitResult(
        path, old_text, new_text, list(columns), len(rows), dropped_ids, result_foreign, warnings
    )
