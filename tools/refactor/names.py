"""Every name a generated module reads resolves: a check on the finished text, before anything is written.

A module-level name is *defined* when the module assigns it (``x = …``, ``def``, ``class``, ``for``, ``with …
as``, ``except … as``, a walrus, an assignment under ``global`` in a function) or imports it. A read of a name
that the scopes around it (function, class, lambda, comprehension: Python's own scoping, as ``symtable``
computes it) do not bind, that the module does not define, and that is neither a builtin nor one of the names
every module has (``__name__``, ``__file__``, …) would raise ``NameError`` when that line runs: each one is a
gap at ``file:line`` of the generated module, never a clean exit.

Then :func:`import_errors` imports the modules (in this process when they import only the standard library
and the library, else in a fresh interpreter with the library's emulator as ``ttnn``, what ``from tttv2
import ttnn`` gives them anyway, also for a module the generated code imports that says ``import ttnn``), so
that an error raised at import time (a missing module, a name a decorator or class body reads) is a gap too.
:func:`unbound_locals` and :func:`call_mismatches` find the two other ways a name fails when its line runs: a
local read before anything assigns it, a call that does not bind to the definition it calls.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import os
import subprocess
import symtable
import sys
import tempfile
import traceback
import types
from pathlib import Path

from .errors import Gap
from .imports import import_root, resolve_module

#: Names every module has without defining them.
MODULE_NAMES = frozenset(
    {
        "__name__",
        "__file__",
        "__doc__",
        "__package__",
        "__spec__",
        "__loader__",
        "__builtins__",
        "__path__",
        "__cached__",
        "__annotations__",
        "__dict__",
    }
)
BUILTINS = frozenset(dir(builtins))

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def undefined_names(text: str, file_name: str, tree: ast.Module | None = None) -> list[Gap]:
    """The reads of ``text`` (a module's source, which compiles) that resolve to no definition, in line order.
    ``tree``: ``text`` already parsed (the checks of one module share one parse)."""
    tree = tree or ast.parse(text, filename=file_name)
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return []  # a star import defines names no static check can list; the import check covers the module
    table = symtable.symtable(text, file_name, "exec")
    defined = _module_definitions(table)
    unresolved: dict[int, set[str]] = {}  # id of the scope node -> names it reads that resolve to the module
    _collect(tree, table, defined, unresolved)
    lines: dict[str, set[int]] = {}  # name -> the lines that read it
    optimized_only = _after_assert_false(tree)
    for scope_node in [tree, *(n for n in ast.walk(tree) if isinstance(n, (*_SCOPES, *_COMPREHENSIONS)))]:
        names = unresolved.get(id(scope_node))
        if not names:
            continue
        for node in _own_nodes(scope_node):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
                if any(first <= node.lineno <= last for first, last in optimized_only):
                    continue
                lines.setdefault(node.id, set()).add(node.lineno)
    gaps = []
    for name, where in lines.items():
        first, *more = sorted(where)
        also = (
            f"; also read at line{'s' if len(more) > 1 else ''} {', '.join(map(str, more))}" if more else ""
        )
        reason = f"read by the generated code but neither defined nor imported in it (NameError when this line runs{also})"
        gaps.append(Gap(f"{file_name}:{first}", name, reason))
    return sorted(gaps, key=lambda g: (int(g.loc.rsplit(":", 1)[1]), g.what))


def _after_assert_false(tree: ast.Module) -> list[tuple[int, int]]:
    """The line ranges of statements after an ``assert False`` in the same block: TTTv1's code kept as TTTv1 wrote
    it, which runs only under ``python -O`` (the assert stripped). A name it reads that nothing defines is
    TTTv1's own (Llama-2-70B's attention: ``assert False, "Legacy ccl call removed …"`` then ``return
    tt_matmul_out_tensor``, whose assignment is commented out), not one the tool lost: not a gap."""
    ranges = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for index, statement in enumerate(block):
                test = getattr(statement, "test", None)
                if (
                    isinstance(statement, ast.Assert)
                    and isinstance(test, ast.Constant)
                    and test.value is False
                ):
                    ranges.extend((s.lineno, s.end_lineno) for s in block[index + 1 :])
                    break
    return ranges


def _module_definitions(table: symtable.SymbolTable) -> set[str]:
    """Names the module binds: its own assignments and imports, and assignments under ``global`` anywhere."""
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        stack.extend(child.get_children())
        for symbol in child.get_symbols():
            if symbol.is_declared_global() and (symbol.is_assigned() or symbol.is_imported()):
                defined.add(symbol.get_name())
    return defined


def _collect(
    tree: ast.Module, table: symtable.SymbolTable, defined: set[str], out: dict[int, set[str]]
) -> None:
    """Pair each scope node of ``tree`` with its symbol table and note the names it reads from the module scope
    that the module does not define."""
    pending = [(tree, table)]
    while pending:
        node, scope = pending.pop()
        missing = set()
        for symbol in scope.get_symbols():
            name = symbol.get_name()
            if not symbol.is_referenced() or name in defined or name in BUILTINS or name in MODULE_NAMES:
                continue
            if (
                scope.get_type() == "module"
                or symbol.is_global()
                or (scope.get_type() == "class" and not symbol.is_local() and not symbol.is_free())
            ):
                missing.add(name)
        if missing:
            out[id(node)] = missing
        children = list(scope.get_children())
        for inner in _inner_scopes(node):
            match = _match(inner, children)
            if match is not None:
                children.remove(match)
                pending.append((inner, match))


_TABLE_NAMES = {
    ast.Lambda: "lambda",
    ast.ListComp: "listcomp",
    ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp",
    ast.GeneratorExp: "genexpr",
}


def _match(node: ast.AST, tables: list[symtable.SymbolTable]) -> symtable.SymbolTable | None:
    """The symbol table of one scope node: same first line and name (``lambda``, ``listcomp``, … for the
    anonymous ones)."""
    name = getattr(node, "name", None) or _TABLE_NAMES[type(node)]
    for table in tables:
        if table.get_lineno() == node.lineno and table.get_name() == name:
            return table
    return None  # pragma: no cover - symtable lists every scope ast has


def _inner_scopes(node: ast.AST) -> list[ast.AST]:
    """The scopes nested directly in ``node``, in source order."""
    return [n for n in _own_nodes(node) if n is not node and isinstance(n, (*_SCOPES, *_COMPREHENSIONS))]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes evaluated in ``scope`` itself, nested scope nodes included (not their bodies: a nested def's
    decorators, defaults and annotations, a class's bases and a comprehension's first iterable run in the
    enclosing scope, the rest in their own)."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        roots: list[ast.AST] = [*_params(scope.args), *scope.body]
    elif isinstance(scope, ast.Lambda):
        roots = [*_params(scope.args), scope.body]
    elif isinstance(scope, _COMPREHENSIONS):
        roots = _comprehension_inner(scope)
    else:  # the module, a class
        roots = list(scope.body)
    out: list[ast.AST] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        out.append(node)
        inner = (
            _outer_parts(node)
            if isinstance(node, (*_SCOPES, *_COMPREHENSIONS))
            else ast.iter_child_nodes(node)
        )
        stack.extend(reversed(list(inner)))
    return out


def _params(args: ast.arguments) -> list[ast.AST]:
    """The parameter nodes (their names are bound in the function's scope, not read)."""
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]


def _outer_parts(node: ast.AST) -> list[ast.AST]:
    """The parts of a nested scope node that its enclosing scope evaluates."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        return [
            *node.decorator_list,
            *args.defaults,
            *(d for d in args.kw_defaults if d is not None),
            *(a.annotation for a in _params(args) if a.annotation is not None),
            *([node.returns] if node.returns else []),
        ]
    if isinstance(node, ast.Lambda):
        return [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    return [node.generators[0].iter]  # a comprehension


def _comprehension_inner(node: ast.AST) -> list[ast.AST]:
    """What a comprehension evaluates in its own scope: targets, conditions, later iterables, the element."""
    parts: list[ast.AST] = []
    for index, generator in enumerate(node.generators):
        parts.append(generator.target)
        if index:
            parts.append(generator.iter)
        parts.extend(generator.ifs)
    if isinstance(node, ast.DictComp):
        parts += [node.key, node.value]
    else:
        parts.append(node.elt)
    return parts


# ---------------------------------------------------------------------------------------------- locals
def unbound_locals(text: str, file_name: str, tree: ast.Module | None = None) -> list[Gap]:
    """Locals of a function read before anything assigns them: in the order the function runs its code (a
    value before its targets, a loop's iterable before its body), the first use of the name is a read that
    no loop can reach again after an assignment. Such a read raises ``UnboundLocalError`` whenever it runs (a
    method extracted for a static branch that reads a local its caller did not pass). ``tree``: ``text``
    already parsed."""
    tree = tree or ast.parse(text, filename=file_name)
    gaps = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        events: list[tuple[str, bool, bool, int]] = []  # (name, is a read, inside a loop, line)
        for statement in func.body:
            _events(statement, False, events)
        declared = {
            n for node in _own_nodes(func) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names
        }
        params = {a.arg for a in _params(func.args)}
        local = {name for name, read, _, _ in events if not read} - params - declared
        first: dict[str, tuple[bool, bool, int]] = {}
        for name, read, in_loop, line in events:
            first.setdefault(name, (read, in_loop, line))
        for name in sorted(local):
            read, in_loop, line = first[name]
            if read and not in_loop:
                gaps.append(
                    Gap(
                        f"{file_name}:{line}",
                        name,
                        f"read in {func.name} before anything assigns it (UnboundLocalError when this line runs)",
                    )
                )
    return sorted(gaps, key=lambda g: (int(g.loc.rsplit(":", 1)[1]), g.what))


def _events(node: ast.AST, in_loop: bool, out: list) -> None:
    """The reads and bindings of names in ``node``, in the order they run (nested scopes: only what their
    enclosing scope evaluates, then the binding of their name)."""
    if isinstance(node, ast.Name):
        out.append((node.id, isinstance(node.ctx, ast.Load), in_loop, node.lineno))
        return
    if isinstance(node, (*_SCOPES, *_COMPREHENSIONS)):
        for part in _outer_parts(node):
            _events(part, in_loop, out)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, False, in_loop, node.lineno))
        return
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        if node.value is not None:
            _events(node.value, in_loop, out)
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            _events(target, in_loop, out)
        return
    if isinstance(node, ast.AugAssign):
        _events(node.value, in_loop, out)
        if isinstance(node.target, ast.Name):  # ``h += 1`` reads h first
            out.append((node.target.id, True, in_loop, node.lineno))
        _events(node.target, in_loop, out)
        return
    if isinstance(node, (ast.For, ast.AsyncFor)):
        _events(node.iter, in_loop, out)
        for part in [node.target, *node.body, *node.orelse]:
            _events(part, True, out)
        return
    if isinstance(node, ast.While):
        for part in [node.test, *node.body, *node.orelse]:
            _events(part, True, out)
        return
    if isinstance(node, ast.ExceptHandler):
        if node.type is not None:
            _events(node.type, in_loop, out)
        if node.name:
            out.append((node.name, False, in_loop, node.lineno))
        for part in node.body:
            _events(part, in_loop, out)
        return
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            out.append(((alias.asname or alias.name).split(".")[0], False, in_loop, node.lineno))
        return
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        out.append((node.name, False, in_loop, node.lineno))
    if isinstance(node, ast.MatchMapping) and node.rest:
        out.append((node.rest, False, in_loop, node.lineno))
    for child in ast.iter_child_nodes(node):
        _events(child, in_loop, out)


# ---------------------------------------------------------------------------------------------- call check
def call_mismatches(
    text: str,
    file_name: str,
    origins: dict[str, str] | None = None,
    root: Path | None = None,
    trees: dict | None = None,
    tree: ast.Module | None = None,
) -> list[Gap]:
    """Calls of the module's own functions (``helper(...)``) and of its classes' own methods
    (``self.method(...)`` inside that class) whose arguments do not bind to the definition's parameters: a
    ``TypeError`` when the call runs (a copy that lost a default the call relies on, a keyword it does not
    have, or, in a snapshot of files of different commits, a helper of another API). With ``root`` (the
    first-party root), also the constructions of classes imported from the project's own files
    (``from pkg.attention import Attention`` … ``Attention(mesh_device, state_dict, …)``): a sub-module built
    with the arguments of another version of its class. Calls with ``*args`` / ``**kwargs``, decorated
    definitions and names bound again anywhere are left alone. Each gap names the call, the definition (its
    line and parameters, and ``origins[name]``: where TTTv1 has it; for an imported class, its ``__init__``)
    and the argument that does not bind. ``trees``: the first-party files already parsed in this run (by path
    and modification time; filled as files are read), so that each is parsed once however many modules and
    calls read it. ``tree``: ``text`` already parsed."""
    tree = tree or ast.parse(text, filename=file_name)
    nodes = list(ast.walk(tree))  # walked once for every question below (same order as ast.walk)
    rebound = _rebound(nodes)
    origins = origins or {}
    definitions = {n.name: n for n in nodes if isinstance(n, ast.FunctionDef) and not n.decorator_list}
    functions = {
        n.name: signature_of(n.args, method=False)
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and not n.decorator_list and n.name not in rebound
    }
    constructors = {}  # an imported class -> where its __init__ is (named in the gap)
    if root is not None:
        for name, (module, init) in _imported_constructors(
            nodes, root, {} if trees is None else trees
        ).items():
            functions[name] = init
            constructors[name] = f"{module}.{name}.__init__"
    gaps = []
    for node in nodes:
        scopes = [(functions, None)]
        if isinstance(node, ast.ClassDef):
            methods = {
                m.name: signature_of(m.args, method=True)
                for m in node.body
                if isinstance(m, ast.FunctionDef) and not m.decorator_list and m.name not in rebound
            }
            scopes = [(methods, "self")]
        elif not isinstance(node, ast.Module):
            continue
        table, receiver = scopes[0]
        inside = (
            (c for part in node.body for c in ast.walk(part)) if isinstance(node, ast.ClassDef) else nodes
        )
        for call in (c for c in inside if isinstance(c, ast.Call)):
            name = _callee(call, receiver)
            if name is None or name not in table or table[name] is None:
                continue
            if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords
            ):
                continue
            try:
                table[name].bind(*call.args, **{k.arg: k.value for k in call.keywords})
            except TypeError as exc:
                shown = f"self.{name}" if receiver else name
                gaps.append(
                    Gap(
                        f"{file_name}:{call.lineno}",
                        f"{shown}(...)",
                        (
                            f"the call does not match {constructors[name]} ({exc}): TypeError when it runs"
                            if receiver is None and name in constructors
                            else f"the call does not match the definition ({exc}): TypeError when it runs; "
                            + _definition(definitions[name], file_name, origins.get(name))
                        ),
                    )
                )
    return sorted(set(gaps), key=lambda g: (int(g.loc.rsplit(":", 1)[1]), g.what))


def _definition(func: ast.FunctionDef, file_name: str, origin: str | None) -> str:
    """``defined at mlp_1d.py:311 as `_tt_all_reduce(self, input_tensor, tt_ccl, memory_config=None)`, the
    call-site copy of tt_all_reduce (ccl.py:136)``: what the call has to bind to."""
    params = ast.unparse(func.args)
    if len(params) > 240:
        params = params[:239] + "…"
    where = f"defined at {file_name}:{func.lineno} as `{func.name}({params})`"
    return f"{where}, {origin}" if origin else where


def _imported_constructors(
    nodes: list[ast.AST], root: Path, trees: dict
) -> dict[str, tuple[str, inspect.Signature]]:
    """Class name -> (its module, the parameters of its ``__init__`` without ``self``), for each class the module imports
    by name from a first-party file (at module level or in a function) that defines it with its own undecorated
    ``__init__``, when nothing else binds the name. ``nodes``: the module's nodes, as ``ast.walk`` gives them."""
    imported: dict[str, list[tuple[str, str]]] = {}
    others = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, []).append((node.module, alias.name))
        elif isinstance(node, ast.Import):
            others.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            others.add(node.id)
        elif isinstance(node, ast.arg):
            others.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            others.add(node.name)
    out = {}
    for name, sources in imported.items():
        if name in others or len(set(sources)) != 1:
            continue
        module, class_name = sources[0]
        init = _first_party_init(module, class_name, root, trees)
        if init is not None:
            out[name] = (module, init)
    return out


def _first_party_init(module: str, class_name: str, root: Path, trees: dict) -> inspect.Signature | None:
    """The ``__init__`` parameters of ``class_name`` as the first-party file of ``module`` defines it."""
    resolved = resolve_module(module, root)
    if resolved is None or resolved.path is None:
        return None
    tree = _parsed(resolved.path, trees)
    if tree is None:
        return None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    if len(classes) != 1 or classes[0].decorator_list:
        return None
    inits = [m for m in classes[0].body if isinstance(m, ast.FunctionDef) and m.name == "__init__"]
    if len(inits) != 1 or inits[0].decorator_list:
        return None  # no __init__ of its own (a base class's), or one a decorator may change
    return signature_of(inits[0].args, method=True)


def _parsed(path: Path, trees: dict) -> ast.Module | None:
    """``path`` parsed, or None when it cannot be read or parsed; memoised in ``trees`` by path and modification
    time (a file changed since is read again)."""
    try:
        key = (path, path.stat().st_mtime_ns)
    except OSError:
        return None
    if key not in trees:
        try:
            trees[key] = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            trees[key] = None
    return trees[key]


def _callee(call: ast.Call, receiver: str | None) -> str | None:
    func = call.func
    if receiver is None:
        return func.id if isinstance(func, ast.Name) else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == receiver:
        return func.attr
    return None


def _rebound(nodes: list[ast.AST]) -> set[str]:
    """Names stored anywhere other than by their ``def``: a local, a parameter, an attribute (``self.x = …``).
    ``nodes``: the module's nodes, as ``ast.walk`` gives them."""
    out = set()
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            out.add(node.attr)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
    defs = [n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    out.update(name for name in defs if defs.count(name) > 1)
    return out


def signature_of(args: ast.arguments, method: bool) -> inspect.Signature | None:
    """The parameters of a definition as an ``inspect.Signature`` (defaults are placeholders), without ``self``
    for a method; None when a method has no first parameter."""
    kind = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    if method:
        if not positional:
            return None
        positional = positional[1:]
    n_pos_only = max(len(args.posonlyargs) - (1 if method else 0), 0)
    first_default = len([*args.posonlyargs, *args.args]) - len(args.defaults)
    offset = 1 if method else 0
    params = []
    for index, arg in enumerate(positional):
        has_default = index + offset >= first_default
        params.append(
            kind(
                arg.arg,
                kind.POSITIONAL_ONLY if index < n_pos_only else kind.POSITIONAL_OR_KEYWORD,
                default=None if has_default else kind.empty,
            )
        )
    if args.vararg:
        params.append(kind(args.vararg.arg, kind.VAR_POSITIONAL))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(kind(arg.arg, kind.KEYWORD_ONLY, default=kind.empty if default is None else None))
    if args.kwarg:
        params.append(kind(args.kwarg.arg, kind.VAR_KEYWORD))
    return inspect.Signature(params)


# ---------------------------------------------------------------------------------------------- import check

_IMPORTER = r"""
import importlib.util, json, sys, traceback
import tttv2.ttnn as _emulator
sys.modules.setdefault("ttnn", _emulator)
sys.path.extend(json.loads(sys.argv[2]))  # after the standard library and site-packages: a project file never shadows them
results = {}
for name, path in json.loads(sys.argv[1]):
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # anything raised while importing is the finding
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
        line = frames[-1].lineno if frames else 1
        results[name] = [line, f"{type(exc).__name__}: {exc}".splitlines()[0][:300]]
print(json.dumps(results))
"""


#: Top-level packages whose import changes nothing a run depends on: the standard library and the library
#: itself (already imported by the tool). A module that imports only these is run in this process.
_SAFE_TOPS = frozenset(sys.stdlib_module_names) | {"tttv2", "ttnn"}


def _self_contained(tree: ast.Module) -> bool:
    """Whether every import in ``tree`` (anywhere) is of the standard library or the library."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] not in _SAFE_TOPS:
                return False
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] not in _SAFE_TOPS for a in node.names):
            return False
    return True


def _run_here(file_name: str, text: str) -> Gap | None:
    """Run a self-contained module's top level in a namespace of its own (no ``sys.modules`` entry)."""
    label = f"<tttv2-refactor import check: {file_name}>"
    module = types.ModuleType(f"_tttv2_refactor_check_{abs(hash(file_name))}")
    module.__file__ = label
    sys.modules[module.__name__] = module  # dataclasses look their class's module up while the body runs
    try:
        exec(compile(text, label, "exec"), module.__dict__)  # the module the codemod generated
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # anything raised while importing is the finding
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == label]
        line = frames[-1].lineno if frames else 1
        message = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return Gap(f"{file_name}:{line}", "import", f"importing the generated module raises {message}")
    finally:
        sys.modules.pop(module.__name__, None)
    return None


def import_errors(
    modules: dict[str, str],
    roots: list[Path],
    timeout: float = 120.0,
    parsed: dict[str, ast.Module] | None = None,
) -> list[Gap]:
    """Import each generated module (file name -> source text): one that imports only the standard library and
    the library runs here, in a namespace of its own; the others in a fresh interpreter that sees ``roots``
    (the project's roots, for what the generated code imports from it), so that importing the user's code
    changes nothing in this process. Whatever raises is a gap at the line of the generated module it came
    from. ``parsed``: file name -> its text already parsed."""
    parsed = parsed or {}
    here = {
        name: text
        for name, text in modules.items()
        if _self_contained(parsed[name] if name in parsed else ast.parse(text, filename=name))
    }
    gaps = [gap for name, text in sorted(here.items()) if (gap := _run_here(name, text)) is not None]
    elsewhere = {name: text for name, text in modules.items() if name not in here}
    return sorted(gaps + _import_in_subprocess(elsewhere, roots, timeout), key=lambda g: g.loc)


def _import_in_subprocess(modules: dict[str, str], roots: list[Path], timeout: float) -> list[Gap]:
    if not modules:
        return []
    with tempfile.TemporaryDirectory(prefix="tttv2-refactor-import-") as folder:
        entries = []
        for index, (file_name, text) in enumerate(sorted(modules.items())):
            path = Path(folder) / f"_tttv2_refactor_check_{index}.py"
            path.write_text(text, encoding="utf-8")
            entries.append((f"_tttv2_refactor_check_{index}", str(path), file_name))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _IMPORTER,
                    json.dumps([[n, p] for n, p, _ in entries]),
                    json.dumps([str(r) for r in roots]),
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=folder,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return [
                Gap(file_name, "import", f"importing the generated module took longer than {timeout:.0f} s")
                for _, _, file_name in entries
            ]
    try:
        results = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    except json.JSONDecodeError:
        results = None
    if results is None:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return [
            Gap(file_name, "import", f"the import check did not run: {reason}") for _, _, file_name in entries
        ]
    gaps = []
    for name, _path, file_name in entries:
        if name in results:
            line, message = results[name]
            gaps.append(
                Gap(f"{file_name}:{line}", "import", f"importing the generated module raises {message}")
            )
    return gaps


def _roots(trees: dict[str, ast.Module], root: Path | None) -> list[Path]:
    """The folders the import check puts on the path: the first-party root, and for each top-level package
    the modules import absolutely, the nearest folder above the root that holds it (a namespace package)."""
    if root is None:
        return []
    tops = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                tops.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                tops.update(alias.name.split(".")[0] for alias in node.names)
    found = {import_root(root, top) for top in sorted(tops)}
    return [root, *sorted(f for f in found if f is not None and f != root)]


def output_gaps(
    texts: dict[str, str], root: Path | None, origins: dict[str, dict[str, str]] | None = None
) -> list[Gap]:
    """The gaps of the generated modules as they would be written (file name -> text): names that resolve to
    nothing, then what importing them raises (an import error already reported as an undefined name of that
    line is not repeated). ``origins``: file name -> {function or method -> where TTTv1 has it}, for the call
    check's messages."""
    origins = origins or {}
    parsed = {
        name: ast.parse(text, filename=name) for name, text in sorted(texts.items())
    }  # once for all checks
    gaps = [gap for name, text in sorted(texts.items()) for gap in undefined_names(text, name, parsed[name])]
    reported = {(g.loc, g.what) for g in gaps}
    gaps += [gap for name, text in sorted(texts.items()) for gap in unbound_locals(text, name, parsed[name])]
    trees: dict = {}  # the first-party files the call check reads, each parsed once for all the modules
    gaps += [
        gap
        for name, text in sorted(texts.items())
        for gap in call_mismatches(text, name, origins.get(name), root, trees, parsed[name])
    ]
    for gap in import_errors(texts, _roots(parsed, root), parsed=parsed):
        if not any(
            loc == gap.loc and f"name '{what}' is not defined" in gap.reason for loc, what in reported
        ):
            gaps.append(gap)
    return gaps


__all__ = [
    "BUILTINS",
    "MODULE_NAMES",
    "call_mismatches",
    "import_errors",
    "output_gaps",
    "signature_of",
    "unbound_locals",
    "undefined_names",
]
