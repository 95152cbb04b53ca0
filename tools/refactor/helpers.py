"""What the generated module needs from outside the class.

* Run-time code (the forwards) needs helper functions such as ``tt_all_reduce``: they are copied into the new
  file, specialised for its topology like the class, with what they need in turn (constants, other helpers,
  standard-library imports), also from files the analysis did not read (found by :mod:`imports`). Only a
  class of the TTTv1 package (an enum whose members TTTv1's objects hold) and installed packages are imported
  at run time.
* Construction code (``from_model_args``) may use the TTTv1 package: the names it needs are imported there,
  lazily, from where the TTTv1 module imported them.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from tttv2_tools._cli import dotted_module

from .binding import helper_pure_call
from .cleanup import remove_dead_code
from .cstutil import code, names_read
from .errors import Gap
from .imports import Resolved, resolve_module
from .source import Inputs, ParsedFile
from .specialise import Decisions, fact_replacements, specialise
from .track import Provenance

#: Modules the generated code may import at run time (besides ttnn).
RUNTIME_MODULES = frozenset(sys.stdlib_module_names) | {"ttnn", "numpy"}


@dataclass
class ModuleNames:
    """The top-level names of one file: imports (local name -> statement) and definitions."""

    imports: dict[str, tuple[str, str | None]] = field(
        default_factory=dict
    )  # name -> (module, imported name)
    definitions: dict[str, cst.BaseStatement] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)


def module_names(parsed: ParsedFile) -> ModuleNames:
    out = ModuleNames()
    for index, statement in enumerate(parsed.module.body):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            out.definitions[statement.name.value] = statement
            out.order[statement.name.value] = index
            continue
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    module = _absolute(_dotted_module(small), parsed.path)
                    if module == "__future__":
                        continue
                    for alias in small.names:
                        local = _local(alias)
                        out.imports[local] = (module, code(alias.name))
                elif isinstance(small, cst.Import):
                    for alias in small.names:
                        local = _local(alias)
                        out.imports[local] = (code(alias.name), None)
                elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = small.targets if isinstance(small, cst.Assign) else [small]
                    for target in targets:
                        t = target.target
                        if isinstance(t, cst.Name):
                            out.definitions[t.value] = statement
                            out.order[t.value] = index
    return out


def _dotted_module(node: cst.ImportFrom) -> str:
    dots = "." * len(node.relative)
    return dots + (code(node.module) if node.module is not None else "")


def _absolute(module: str, path: Path) -> str:
    """``.utils`` imported by ``pkg/sub/blk.py`` -> ``pkg.sub.utils``: generated code lives elsewhere, where a
    relative import would find nothing (or another package's module). Left as written when the file is not in
    a package deep enough to resolve it."""
    level = len(module) - len(module.lstrip("."))
    if level == 0:
        return module
    package = dotted_module_of(path).split(".")[:-1]
    if level - 1 >= len(package):
        return module
    base = package[: len(package) - (level - 1)]
    rest = module[level:]
    return ".".join([*base, rest] if rest else base)


def _local(alias: cst.ImportAlias) -> str:
    if alias.asname is not None:
        return code(alias.asname.name)
    return code(alias.name).split(".", 1)[0]


def dotted_module_of(path: Path) -> str:
    """``tttv1/tt/mlp.py`` -> ``tttv1.tt.mlp`` (packages are folders with an ``__init__.py``): the toolkit's one
    rule, which collect-cases' targets use too (``tools/_cli.py``)."""
    return dotted_module(path)


def first_party_folder(path: Path) -> Path:
    """The folder above the input's top package (``/repo`` for ``/repo/models/tt/mlp.py``): where Python finds
    the project's own modules, as ``python -m pytest`` run from the repository would."""
    folder = path.resolve().parent
    while (folder / "__init__.py").is_file():
        folder = folder.parent
    return folder


def first_party_roots(path: Path) -> set[str]:
    """Top-level packages of the project the input belongs to (the folders next to its top package), which
    isort-style sorting puts in the first-party section."""
    top = dotted_module_of(path).split(".", 1)[0]
    folder = path.resolve().parent
    while (folder / "__init__.py").is_file():
        folder = folder.parent
    roots = {top}
    with contextlib.suppress(OSError):  # an unreadable folder adds no roots
        roots |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return roots


def _import_text(module: str, name: str | None, local: str) -> str:
    return code(import_statement(module, name, local)).strip()


def import_statement(module: str, name: str | None, local: str) -> cst.SimpleStatementLine:
    if name is None:
        text = f"import {module}" if module.split(".", 1)[0] == local else f"import {module} as {local}"
    else:
        text = f"from {module} import {name}" + ("" if name == local else f" as {local}")
    return cst.parse_statement(text)


class HelperCopier:
    """Copies module-level helpers (and what they need) from the analysed files, specialised by topology."""

    def __init__(self, inputs: Inputs, topology: str, gaps: list[Gap], helper_ops: dict[str, bool]) -> None:
        self.inputs = inputs
        self.topology = topology
        self.gaps = gaps
        self.names = {name: module_names(parsed) for name, parsed in inputs.files.items()}
        self.copied: dict[str, cst.BaseStatement] = {}  # local name -> statement
        self.order: list[str] = []
        self.imports: dict[str, tuple[str, str | None, str]] = {}  # local -> (module, name, local)
        self.sources: dict[str, str] = {}  # copied name -> file:line it came from
        self.helper_ops = helper_ops
        self.root = first_party_folder(inputs.module.path)
        self.extra: dict[
            str, ParsedFile
        ] = {}  # files read only to copy a helper (the analysis did not read them)

    def require(self, names: set[str], file: str, where: str) -> None:
        """Make every name in ``names`` (read by code of ``file``) available at run time."""
        table = self.names.get(file)
        if table is None:
            return
        for name in sorted(names):
            if name in self.copied or name in self.imports or name in ("self",):
                continue
            if name in table.definitions:
                self._copy(name, file)
            elif name in table.imports:
                module, imported = table.imports[name]
                self._import(name, module, imported, file, where)

    def _import(self, local: str, module: str, imported: str | None, file: str, where: str) -> None:
        root = module.lstrip(".").split(".", 1)[0]
        if not module.startswith(".") and root in RUNTIME_MODULES:
            self.imports[local] = (module, imported, local)
            return
        resolved = None if module.startswith(".") else resolve_module(module, self.root)
        if resolved is None:
            self.gaps.append(
                Gap(
                    self._import_loc(file, local, where),
                    local,
                    f"needed at run time and imported from {module}, which resolves to no file under "
                    f"{self.root} (or a folder above it) and to no installed package",
                )
            )
            return
        if resolved.installed or imported is None:
            # a stable symbol of an importable module (an installed package), or a module object
            self.imports[local] = (module, imported, local)
            kind = "an installed package" if resolved.installed else "a module of the project"
            self.sources[local] = f"imported: `{_import_text(module, imported, local)}` ({kind})"
            return
        target_file = self._file_of(resolved)
        table = self.names[target_file]
        statement = table.definitions.get(imported)
        if statement is None and imported in table.imports:  # re-exported: where that file has it from
            inner_module, inner_name = table.imports[imported]
            self._import(local, inner_module, inner_name, target_file, where)
            return
        if statement is None:
            self.gaps.append(
                Gap(
                    self._import_loc(file, local, where),
                    local,
                    f"needed at run time and imported from {module}, which does not define it",
                )
            )
            return
        if isinstance(statement, cst.ClassDef):
            # a class keeps its identity: the members TTTv1's own objects hold are the ones the code compares with
            self.imports[local] = (module, imported, local)
            self.sources[local] = (
                f"imported: `{_import_text(module, imported, local)}` (a class of {target_file}, kept as TTTv1's "
                "own so that its values stay the same objects)"
            )
            return
        self._copy(imported, target_file, local=local)

    def _import_loc(self, file: str, local: str, where: str) -> str:
        """``file:line`` of the import statement of ``file`` that binds ``local`` (else ``where``)."""
        parsed = self._parsed(file)
        for statement in parsed.module.body:
            for small in (
                getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ()
            ):
                names = small.names if isinstance(small, (cst.Import, cst.ImportFrom)) else ()
                if not isinstance(names, cst.ImportStar) and any(_local(a) == local for a in names):
                    return f"{file}:{parsed.line_of(statement) or 1}"
        return where  # pragma: no cover - module_names found the import in this file's top-level statements

    def _file_of(self, resolved: Resolved) -> str:
        """The display name of a resolved source file: the analysed file it is, else the file, read now (named
        after its module: ``models/tt_transformers/tt/model_config.py``)."""
        path = resolved.path
        for name, parsed in self.inputs.files.items():
            if parsed.path.resolve() == path:
                return name
        for name, parsed in self.extra.items():
            if parsed.path == path:
                return name
        name = "/".join(resolved.module.split(".")) + (
            "/__init__.py" if path.name == "__init__.py" else ".py"
        )
        parsed = ParsedFile.load(path, name)
        self.extra[name] = parsed
        self.names[name] = module_names(parsed)
        return name

    def _parsed(self, file: str) -> ParsedFile:
        return self.inputs.files.get(file) or self.extra[file]

    def _copy(self, name: str, file: str, local: str | None = None) -> None:
        statement = self.names[file].definitions[name]
        if isinstance(statement, cst.ClassDef):
            self.gaps.append(
                Gap(
                    f"{file}:{self._parsed(file).line_of(statement) or 1}",
                    name,
                    "a class needed at run time (classes are not copied)",
                )
            )
            return
        key = local or name
        self.copied[key] = statement  # placeholder to stop recursion
        parsed = self._parsed(file)
        if isinstance(statement, cst.FunctionDef):
            replacements = fact_replacements(parsed, self.inputs.analysis.fact_sites, self.topology, "decode")
            replacements = {
                k: v
                for k, v in replacements.items()
                if isinstance(v, cst.Name) and v.value in ("True", "False")
            }
            replacements = _without_mode_facts(parsed, self.inputs, replacements)
            statement = remove_dead_code(
                specialise(statement, replacements, Provenance(), Decisions()),
                helper_pure_call(self.helper_ops),
            )
            if local and local != name:
                statement = statement.with_changes(name=cst.Name(local))
        self.copied[key] = statement
        self.order.append(key)
        self.sources[key] = f"{file}:{parsed.line_of(self.names[file].definitions[name]) or 1}"
        self.require(names_read(statement), file, self.sources[key])

    def statements(self) -> list[cst.BaseStatement]:
        out = []
        for key in self.order:
            statement = self.copied[key]
            comment = cst.EmptyLine(comment=cst.Comment(f"# copied from {self.sources[key]}"))
            out.append(statement.with_changes(leading_lines=[cst.EmptyLine(), comment]))
        return out


def _without_mode_facts(parsed: ParsedFile, inputs: Inputs, replacements: dict) -> dict:
    keep = set()
    for site in inputs.analysis.fact_sites:
        if site.file != parsed.name or site.fact.startswith("mode"):
            continue
        node = parsed.node_for_span(site.span)
        if node is not None:
            keep.add(id(node))
    return {k: v for k, v in replacements.items() if k in keep}
