"""Pass 2 and the dependency graph: roles of names, dependencies of expressions, config definitions,
helpers followed from the module, topology/mode facts. Nodes are created on demand and expanded from a
worklist, so only what the module reaches is analysed."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from . import constants as C
from .errors import TraceError
from .index import ClassInfo, ModuleIndex
from .model import Skipped
from .scan import BranchSite, FuncInfo, Guards, _fields, loc_of
from .source import Project, SourceFile

ARGS = ("args",)
MC = ("mc",)
MESH = ("mesh",)
OS = ("os",)
ENVIRON = ("environ",)
GETENV = ("getenv",)
HFCFG = ("hfcfg",)
NOTHING = object()
ROLE_DEPTH = 24
_SKIP_CHILDREN = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unparse(node: ast.AST | None, limit: int = 100) -> str:
    if node is None:
        return ""
    try:
        return short(ast.unparse(node), limit)
    except Exception:  # pragma: no cover - ast.unparse handles all parsed nodes
        return type(node).__name__


@dataclass
class DefSite:
    """One definition found by composing ModelArgs.__init__ (and the methods it calls) in execution order."""

    name: str
    kind: str  # key | attr
    func: FuncInfo
    value: ast.expr | None
    source: ast.expr | None
    line: int
    col: int
    end_line: int
    guards: Guards
    order: int
    value_kind: str = "value"
    env: dict[str, object] = field(default_factory=dict)
    via: tuple[str, ...] = ()
    dynamic: str | None = None

    @property
    def loc(self) -> str:
        return f"{self.func.file.name}:{self.line}:{self.col}"

    @property
    def id(self) -> str:
        suffix = f":{self.name}" if self.value_kind == "comprehension" or self.env else ""
        return f"def:{self.loc}{suffix}"


@dataclass
class CallEdge:
    caller: str
    callee: str
    guards: Guards
    loc: str


class Engine:
    """Builds the dependency graph for one module + config."""

    def __init__(
        self,
        project: Project,
        module: SourceFile,
        config: SourceFile | None,
        class_name: str | None = None,
        entry: str | None = None,
        follow_helpers: bool = True,
        progress: Callable[[str], None] | None = None,
    ):
        self.project = project
        self.module = module
        self.config = config
        self.entry = entry
        self.follow_helpers = follow_helpers
        self.progress = progress or (lambda _msg: None)
        self.indexes: dict[str, ModuleIndex] = {}
        self._method_cache: dict[tuple[int, str], FuncInfo | None] = {}
        self._mro_cache: dict[int, list[ClassInfo]] = {}
        self._import_cache: dict[tuple[str, str], FuncInfo | None] = {}
        self._self_sites_cache: dict[tuple[int, str], list] = {}
        self._facts_cache: dict[str, list] = {}
        self._eval_cache: dict[tuple, object] = {}
        self._role_cache: dict[int, tuple] = {}
        self._fact_trees: dict[str, object] = {}
        self._call_cache: dict[int, tuple[ast.AST, frozenset[str]]] = {}
        self.mindex = self.index(module)
        self.cindex = self.index(config) if config is not None else None
        self.g = nx.DiGraph()
        self.pending: deque[str] = deque()
        self.payload: dict[str, object] = {}
        self.funcs: dict[str, FuncInfo] = {}
        self.branch_index: dict[str, tuple[BranchSite, FuncInfo]] = {}
        self.role_memo: dict[tuple[str, str], object] = {}
        self.role_active: set[tuple[str, str]] = set()
        self.entry_params: dict[tuple[str, str], str | None] = {}
        self.bound: set[tuple[int, str]] = set()
        self.skipped: list[Skipped] = []
        self._skip_seen: set[tuple[str, str, str]] = set()
        self.reads: list[dict] = []
        self._read_locs: set[tuple[str, str]] = set()
        self.ops: list[dict] = []
        self.scanned: dict[str, set[str]] = {}
        self.scan_via: dict[str, tuple[str, ...]] = {}
        self.call_edges: list[CallEdge] = []
        self.module_branches: dict[str, str] = {}  # branch id -> side
        self.entry_ids: list[str] = []
        self.branch_phase: dict[str, set[str]] = {}
        self.consumer, self.entry = self._find_consumer(class_name, entry)
        self.config_chain: list[ClassInfo] = self._find_config_class()
        self.config_class = self.config_chain[0] if self.config_chain else None
        self.key_defs: dict[str, list[DefSite]] = {}
        self.attr_defs: dict[str, list[DefSite]] = {}
        self.dynamic_defs: list[DefSite] = []
        self._composed = False
        self._order = 0
        self._callers: dict[str, list] | None = None
        self.param_consts: dict[tuple[str, str], set | None] = {}
        self._inline: tuple[FuncInfo, set[str]] | None = None
        self.param_roles: dict[tuple[str, str], tuple] = {}

    # ================================================================================ files & lookup
    def index(self, source: SourceFile) -> ModuleIndex:
        idx = self.indexes.get(source.name)
        if idx is None:
            idx = ModuleIndex(source)
            self.indexes[source.name] = idx
        return idx

    def register(self, info: FuncInfo) -> FuncInfo:
        if info.id not in self.funcs:
            self.funcs[info.id] = info
            for site in info.branches:
                self.branch_index.setdefault(site.id, (site, info))
        return info

    def method_info(self, cls: ClassInfo, name: str) -> FuncInfo | None:
        key = (id(cls), name)
        if key in self._method_cache:
            return self._method_cache[key]
        found = None
        for klass in self.mro(cls):
            info = self.index(klass.file).method(klass, name)
            if info is not None:
                found = self.register(info)
                break
        self._method_cache[key] = found
        return found

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        cached = self._mro_cache.get(id(cls))
        if cached is not None:
            return cached
        chain = self._mro(cls)
        self._mro_cache[id(cls)] = chain
        return chain

    def _mro(self, cls: ClassInfo) -> list[ClassInfo]:
        chain, queue, seen = [], [cls], set()
        while queue:
            klass = queue.pop(0)
            if klass.name in seen:
                continue
            seen.add(klass.name)
            chain.append(klass)
            idx = self.index(klass.file)
            for base in klass.bases:
                if base in idx.classes:
                    queue.append(idx.classes[base])
        return chain

    def nested_info(self, parent: FuncInfo, node: ast.AST) -> FuncInfo:
        return self.register(self.index(parent.file).nested(parent, node))

    def module_function(self, source: SourceFile, name: str) -> FuncInfo | None:
        info = self.index(source).function(name)
        return self.register(info) if info is not None else None

    def skip(self, loc: str, what: str, reason: str, severity: str = "info") -> None:
        key = (loc, what, reason)
        if key not in self._skip_seen:
            self._skip_seen.add(key)
            self.skipped.append(Skipped(loc, what, reason, severity))

    def cut(self, what: str, e: ast.AST, info: FuncInfo, limit: int) -> None:
        """A depth limit stopped the analysis of ``e``: say so (an explicit unknown and a warning), never guess."""
        loc = loc_of(info.file, e)
        reason = f"{what} nested deeper than {limit} levels: not followed"
        self.unknown(f"depth:{loc}", reason, loc)
        self.skip(loc, info.file.segment(e, 60), reason, "warning")

    def _find_consumer(self, class_name: str | None, entry: str | None) -> tuple[ClassInfo, str]:
        """The analysed class and its per-call entry: ``entry`` if given, else ``forward``, else ``__call__``."""
        classes = self.mindex.classes
        entries = (entry,) if entry else C.ENTRY_METHODS
        if class_name:
            if class_name not in classes:
                found = ", ".join(sorted(classes)) or "none"
                raise TraceError(f"no class {class_name!r} (classes: {found})", where=f"{self.module.name}:1")
            cls = classes[class_name]
            for name in entries:
                if self.method_info(cls, name) is not None:
                    return cls, name
            raise TraceError(
                f"class {class_name} has no {' or '.join(f'{e}()' for e in entries)} method",
                where=cls.loc(),
                hint="use --entry METHOD",
            )
        for name in entries:
            for cls in classes.values():
                if name in cls.methods:
                    return cls, name
            for cls in classes.values():
                if self.method_info(cls, name) is not None:
                    return cls, name
        listed = ", ".join(f"{c.name} (line {c.node.lineno})" for c in classes.values()) or "none"
        wanted = " or ".join(f"{e}()" for e in entries)
        raise TraceError(
            f"no class with a {wanted} method; nothing to trace (classes: {listed})",
            where=f"{self.module.name}:1",
            hint="pass --class NAME and/or --entry METHOD",
        )

    def _find_config_class(self) -> list[ClassInfo]:
        if self.cindex is None:
            return []
        classes = self.cindex.classes
        if "ModelArgs" in classes:
            return self.mro(classes["ModelArgs"])
        for cls in classes.values():
            for node in ast.walk(cls.node):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "model_config"
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    return self.mro(cls)
        return []

    def is_config_class(self, cls: object) -> bool:
        return isinstance(cls, ClassInfo) and any(cls is k for k in self.config_chain)

    # ================================================================================ graph helpers
    def node(self, nid: str, category: str, label: str, loc: str | None = None, payload=None, **attrs) -> str:
        if nid not in self.g:
            self.g.add_node(nid, category=category, label=label, loc=loc, **attrs)
            if payload is not None:
                self.payload[nid] = payload
                self.pending.append(nid)
        return nid

    def edge(self, u: str, v: str, kind: str, loc: str | None = None) -> None:
        if u != v and not self.g.has_edge(u, v):
            self.g.add_edge(u, v, kind=kind, loc=loc)

    def hw(self, name: str) -> str:
        return self.node(f"hw:{name}", "hardware", C.HW_LABELS.get(name, f"hardware: {name}"))

    def env(self, name: str, loc: str | None) -> str:
        return self.node(f"env:{name}", "env", f"env {name}", loc)

    def hf(self, name: str, loc: str | None) -> str:
        return self.node(f"hf:{name}", "model", f"HF config {name}", loc)

    def unknown(self, slug: str, reason: str, loc: str | None) -> str:
        return self.node(f"unknown:{slug}", "unknown", f"unknown: {reason}", loc, reason=reason)

    def extern(self, qualified: str, loc: str | None) -> str:
        return self.node(f"extern:{qualified}", "extern", f"{qualified}() (not analysed)", loc)

    def key_node(self, key: str, loc: str | None = None) -> str:
        return self.node(f"key:{key}", "key", f'model_config["{key}"]', None, payload=("key", key))

    def attr_node(self, name: str) -> str:
        return self.node(f"attr:{name}", "attr", f"args.{name}", None, payload=("attr", name))

    def method_node(self, name: str) -> str:
        return self.node(f"method:{name}", "method", f"args.{name}()", None, payload=("method", name))

    def func_node(self, info: FuncInfo) -> str:
        if info.parent is None and self.is_config_class(info.cls):
            return self.method_node(info.name)
        label = f"{info.qualname}()"
        return self.node(f"func:{info.id}", "function", label, info.loc(), payload=("func", info))

    def local_node(self, info: FuncInfo, name: str) -> str:
        sites = info.assigns[name]
        loc = f"{info.file.name}:{sites[0].line}:{sites[0].col}"
        return self.node(
            f"local:{info.id}:{name}",
            "local",
            f"{name} ({info.qualname})",
            loc,
            payload=("local", info, name),
        )

    def param_node(self, info: FuncInfo, name: str) -> str | None:
        mapped = self.entry_params.get((info.id, name), NOTHING)
        if mapped is not NOTHING:
            return mapped
        if info.parent is None and info.name == "__init__" and self.is_config_class(info.cls):
            return self.node(
                f"arg:{name}", "model_arg", f"{name} (ModelArgs constructor argument)", info.loc()
            )
        category = "param"
        label = f"{name} (param of {info.qualname})"
        if isinstance(info.node, ast.Lambda) and info.file is self.config:
            category = "input"
            label = f"{name} (lambda param, {info.qualname.rsplit('.', 1)[0]})"
        if name in C.MODE_NAMES:
            label = f"{name} (param of {info.qualname}; the mode)"
        nid = self.node(f"param:{info.id}:{name}", category, label, info.loc(), payload=("param", info, name))
        if name in info.defaults or name in (info.vararg, info.kwarg):
            self.g.nodes[nid]["bound"] = True
        if self.is_mode_param(info, name):
            self.g.nodes[nid]["mode_param"] = True
        return nid

    def self_attr_node(self, cls: ClassInfo, name: str) -> str | None:
        sites = self.self_sites(cls, name)
        if not sites:
            return None
        info, site = sites[0]
        loc = f"{info.file.name}:{site.line}:{site.col}"
        nid = f"self:{cls.file.name}:{cls.name}.{name}"
        return self.node(nid, "self_attr", f"self.{name} ({cls.name})", loc, payload=("self", cls, name))

    def self_sites(self, cls: ClassInfo, name: str) -> list:
        key = (id(cls), name)
        cached = self._self_sites_cache.get(key)
        if cached is not None:
            return cached
        out = self._self_sites(cls, name)
        self._self_sites_cache[key] = out
        return out

    def _self_sites(self, cls: ClassInfo, name: str) -> list:
        out = []
        for klass in self.mro(cls):
            for mname in klass.methods:
                info = self.method_info(klass, mname)
                if info is not None:
                    for site in info.self_assigns.get(name, ()):
                        out.append((info, site))
        return out

    def branch_node(self, bid: str) -> str:
        nid = f"branch:{bid}"
        if nid in self.g:
            return nid
        site, info = self.branch_index[bid]
        return self.node(
            f"branch:{bid}",
            "branch",
            f"{site.construct} {info.file.segment(site.test_node, 60)}",
            bid,
            payload=("branch", site, info),
        )

    def global_node(self, source: SourceFile, name: str) -> str:
        stmts = self.index(source).globals[name]
        loc = f"{source.name}:{stmts[0].lineno}:{stmts[0].col_offset}"
        return self.node(
            f"global:{source.name}:{name}",
            "global",
            f"{name} (module {source.name})",
            loc,
            payload=("global", source, name),
        )

    def guard_edges(self, target: str, guards: Guards, innermost_only: bool = True) -> None:
        real = [g for g in guards if g[0] in self.branch_index]
        chosen = real[-1:] if innermost_only else real
        for bid, _arm in chosen:
            self.edge(self.branch_node(bid), target, "controls")

    # ================================================================================ roles
    def lookup(self, name: str, info: FuncInfo):
        scope: FuncInfo | None = info
        while scope is not None:
            if name in scope.assigns:
                return ("local", scope)
            if name in scope.params or name in (scope.vararg, scope.kwarg):
                return ("param", scope)
            scope = scope.parent
        idx = self.index(info.file)
        if name in idx.functions:
            return ("function", idx)
        if name in idx.classes:
            return ("class", idx)
        if name in idx.globals:
            return ("global", idx)
        if name in info.file.imports:
            return ("import", idx)
        return ("builtin", None)

    def role(self, e: ast.AST, info: FuncInfo, depth: int = 0):
        if depth > ROLE_DEPTH:
            self.cut("name resolution", e, info, ROLE_DEPTH)
            return None
        kind = type(e)
        if kind is ast.Name:
            return self.role_name(e.id, info, depth)
        if kind is ast.Attribute:
            cached = self._role_cache.get(id(e))
            if cached is not None and cached[0] is e and cached[1] is info:
                return cached[2]
            result = self._role_attribute(e, info, depth)
            self._role_cache[id(e)] = (e, info, result)
            return result
        return self._role_other(e, info, depth)

    def _role_attribute(self, e: ast.Attribute, info: FuncInfo, depth: int):
        base = self.role(e.value, info, depth + 1)
        if base is None:
            return None
        kind = base[0]
        if kind == "args":
            if e.attr == "model_config":
                return MC
            if e.attr in C.MESH_NAMES:
                return MESH
            if e.attr == "hf_config":
                return HFCFG
            return None
        if kind == "self":
            return self.self_attr_role(base[1], e.attr, depth)
        if kind == "ttnn":
            return ("ttnn", f"{base[1]}.{e.attr}")
        if kind == "os" and e.attr == "environ":
            return ENVIRON
        if kind == "os" and e.attr == "getenv":
            return GETENV
        return None

    def _role_other(self, e: ast.AST, info: FuncInfo, depth: int):
        if isinstance(e, ast.Call):
            func = e.func
            if isinstance(func, ast.Attribute):
                base = self.role(func.value, info, depth + 1)
                if base == ARGS and func.attr == "get_model_config":
                    return MC
                if base == HFCFG and func.attr in ("get", "to_dict", "copy"):
                    return HFCFG
                if base == ENVIRON and func.attr == "copy":
                    return ENVIRON
            return None
        if isinstance(e, ast.IfExp):
            a = self.role(e.body, info, depth + 1)
            b = self.role(e.orelse, info, depth + 1)
            if a == b or (b is None and _is_none(e.orelse)):
                return a
            if a is None and _is_none(e.body):
                return b
            return None
        if isinstance(e, ast.BoolOp):
            for value in e.values:
                r = self.role(value, info, depth + 1)
                if r is not None:
                    return r
            return None
        if isinstance(e, ast.Subscript):
            return HFCFG if self.role(e.value, info, depth + 1) == HFCFG else None
        return None

    def role_name(self, name: str, info: FuncInfo, depth: int = 0):
        key = (info.id, name)
        if key in self.role_memo:
            return self.role_memo[key]
        if key in self.role_active:
            return None
        self.role_active.add(key)
        try:
            result = self._role_name(name, info, depth)
        finally:
            self.role_active.discard(key)
        self.role_memo[key] = result
        return result

    def _role_name(self, name: str, info: FuncInfo, depth: int):
        kind, owner = self.lookup(name, info)
        in_config = info.file is self.config
        if kind == "param":
            if name == owner.self_name and owner.self_name:
                if self.is_config_class(owner.cls):
                    return ARGS
                return ("self", owner.cls) if owner.cls is not None else None
            ann = owner.annotations.get(name)
            if ann is not None and unparse(ann).split(".")[-1].strip("'\"") == "ModelArgs":
                return ARGS
            bound = self.param_roles.get((owner.id, name))
            if bound is not None:
                return bound
            if name in C.ARGS_NAMES:
                return ARGS
            if name in C.MESH_NAMES:
                return MESH
            if name in C.MC_NAMES:
                return MC
            if in_config and "config" in name.lower():
                return HFCFG
            return None
        if kind == "local":
            roles = set()
            for site in owner.assigns[name]:
                if site.kind == "import":
                    continue
                if site.value is None:
                    return None
                if _is_none(site.value):
                    continue
                roles.add(self.role(site.value, owner, depth + 1))
            if len(roles) == 1:
                return roles.pop()
            return None
        if kind == "import":
            module, attr, _level = info.file.imports[name]
            parts = [p for p in module.split(".") if p] + ([attr] if attr else [])
            if "ttnn" in parts:
                return ("ttnn", ".".join(parts[parts.index("ttnn") :]))
            if parts == ["os"]:
                return OS
            if parts == ["os", "environ"]:
                return ENVIRON
            if parts == ["os", "getenv"]:
                return GETENV
            return None
        if kind == "global":
            roles = set()
            for stmt in owner.globals[name]:
                value = getattr(stmt, "value", None)
                if value is None:
                    return None
                roles.add(self.role(value, info, depth + 1))
            return roles.pop() if len(roles) == 1 else None
        if kind == "builtin" and in_config and "config" in name.lower() and name != "model_config":
            return None
        return None

    def self_attr_role(self, cls: ClassInfo, attr: str, depth: int):
        roles = set()
        for info, site in self.self_sites(cls, attr):
            if site.value is None:
                return None
            if _is_none(site.value):
                continue
            roles.add(self.role(site.value, info, depth + 1))
        if len(roles) == 1:
            return roles.pop()
        if not roles and attr in C.MC_NAMES:
            return MC
        return None

    # ================================================================================ dependencies
    def deps(self, e: ast.AST | None, info: FuncInfo) -> set[str]:
        out: set[str] = set()
        if e is not None:
            self._deps(e, info, out)
        return out

    def _deps(self, e: ast.AST, info: FuncInfo, out: set[str]) -> None:
        stack = [e]
        pop, push, extend = stack.pop, stack.append, stack.extend
        call_cache = self._call_cache if self._inline is None else {}
        while stack:
            e = pop()
            kind = type(e)
            if kind is ast.Constant or e is None:
                continue
            if kind is ast.Name:
                self._name_dep(e, info, out)
            elif kind is ast.Attribute:
                extend(self._attr_dep(e, info, out))
            elif kind is ast.Call:
                cached = call_cache.get(id(e))
                if cached is not None and cached[0] is e:
                    out.update(cached[1])
                else:
                    extend(self._call_dep(e, info, out))
            elif kind is ast.Subscript:
                extend(self._sub_dep(e, info, out))
            elif kind is ast.Lambda:
                out.add(self.func_node(self.nested_info(info, e)))
            elif kind is ast.Compare and self._compare_dep(e, info, out):
                continue
            elif kind is ast.IfExp:
                push(e.body)
                push(e.orelse)
                self._truth_dep(e.test, info, out, stack)
            elif kind is ast.BoolOp:
                for value in e.values:
                    self._truth_dep(value, info, out, stack)
            elif kind is ast.UnaryOp and type(e.op) is ast.Not:
                self._truth_dep(e.operand, info, out, stack)
            elif isinstance(e, _SKIP_CHILDREN):
                continue
            else:
                for field in _fields(kind):
                    value = getattr(e, field, None)
                    if type(value) is list:
                        extend(v for v in value if isinstance(v, ast.AST))
                    elif isinstance(value, ast.AST):
                        push(value)

    def _truth_dep(self, e: ast.AST, info: FuncInfo, out: set[str], stack: list) -> None:
        """``if mesh_device`` / ``mesh_device and ...`` test whether a device is present."""
        if isinstance(e, (ast.Name, ast.Attribute)) and self.role(e, info) == MESH:
            out.add(self.hw("device_present"))
        else:
            stack.append(e)

    def _name_dep(self, e: ast.Name, info: FuncInfo, out: set[str]) -> None:
        name = e.id
        role = self.role_name(name, info)
        if role == MESH:
            out.add(self.hw("mesh_device"))
            return
        if role is not None:
            return
        if self._inline is not None and self._inline_name(name, info, out):
            return
        kind, owner = self.lookup(name, info)
        if kind == "local":
            sites = owner.assigns[name]
            if all(s.kind == "def" for s in sites) and name in owner.nested:
                out.add(self.func_node(self.nested_info(owner, owner.nested[name])))
            else:
                out.add(self.local_node(owner, name))
        elif kind == "param":
            nid = self.param_node(owner, name)
            if nid:
                out.add(nid)
        elif kind == "global":
            out.add(self.global_node(info.file, name))
        elif kind == "function":
            fn = self.module_function(info.file, name)
            if fn is not None:
                out.add(self.func_node(fn))
        elif kind == "import":
            _module, attr, _level = info.file.imports[name]
            if attr in C.HW_FUNCS:
                return  # referenced, not called: nothing flows
            target = self.imported_function(info.file, name)
            if target is not None:
                out.add(self.func_node(target))

    def imported_function(self, source: SourceFile, name: str) -> FuncInfo | None:
        key = (source.name, name)
        if key not in self._import_cache:
            self._import_cache[key] = self._imported_function(source, name)
        return self._import_cache[key]

    def _imported_function(self, source: SourceFile, name: str) -> FuncInfo | None:
        module, attr, level = source.imports[name]
        if attr is None:
            return None
        path = self.project.resolve_module(module, level, source.path)
        if path is None:
            return None
        try:
            target = self.project.load(path)
        except TraceError as exc:
            self.skip(f"{source.name}:1:0", f"import {module}", f"{exc}", "warning")
            return None
        return self.module_function(target, attr)  # also the analysed module itself (import cycles)

    def _attr_dep(self, e: ast.Attribute, info: FuncInfo, out: set[str]) -> list:
        role = self.role(e.value, info)
        if role is None:
            if (
                isinstance(e.value, (ast.Name, ast.Attribute))
                and e.attr in C.MODE_VALUES
                and _endswith_mode(e.value)
            ):
                return []  # Mode.DECODE / Mode.PREFILL: constants
            return [e.value]
        kind = role[0]
        if kind == "args":
            if e.attr != "model_config":
                out.add(self.attr_node(e.attr))
            return []
        if kind == "mesh":
            out.add(self.hw(C.MESH_MEMBERS.get(e.attr, "mesh_device")))
            return []
        if kind == "os" and e.attr == "environ":
            out.add(
                self.env("*", loc_of(info.file, e))
            )  # the whole environment (copied, passed on, iterated)
            return []
        if kind == "self":
            nid = self.self_attr_node(role[1], e.attr)
            if nid is not None:
                out.add(nid)
            else:
                meth = self.method_info(role[1], e.attr)
                if meth is not None:
                    out.add(self.func_node(meth))
            return []
        return []

    def _sub_dep(self, e: ast.Subscript, info: FuncInfo, out: set[str]) -> list:
        role = self.role(e.value, info)
        key = const_str(e.slice)
        loc = loc_of(info.file, e)
        if role == MC:
            if key is not None:
                out.add(self.key_node(key))
                return []
            keys = self.loop_keys(e.slice, info)
            if keys:
                out.update(self.key_node(k) for k in keys)
                return []
            out.add(
                self.unknown(
                    f"dynkey:{loc}",
                    f"model_config[{info.file.segment(e.slice, 40)}]: key is not a constant",
                    loc,
                )
            )
            return [e.slice]
        if role == ENVIRON and key is not None:
            out.add(self.env(key, loc))
            return []
        if role == HFCFG and key is not None:
            out.add(self.hf(key, loc))
            return []
        return [e.value, e.slice]

    def _compare_dep(self, e: ast.Compare, info: FuncInfo, out: set[str]) -> bool:
        if len(e.ops) != 1:
            return False
        left, right, op = e.left, e.comparators[0], e.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and _is_none(right) and self.role(left, info) == MESH:
            out.add(self.hw("device_present"))
            return True
        if (
            isinstance(op, (ast.In, ast.NotIn))
            and const_str(left) is not None
            and self.role(right, info) == HFCFG
        ):
            out.add(self.hf(const_str(left), loc_of(info.file, e)))
            return True
        return False

    def _call_dep(self, e: ast.Call, info: FuncInfo, out: set[str]) -> list:
        func = e.func
        args = [a.value if isinstance(a, ast.Starred) else a for a in e.args]
        args += [k.value for k in e.keywords]
        loc = loc_of(info.file, e)
        if isinstance(func, ast.Attribute):
            role = self.role(func.value, info)
            name = func.attr
            kind = role[0] if role else None
            if kind == "args":
                if name == "get_model_config":
                    return []
                out.add(self.method_node(name))
                meth = self.config_method(name)
                if meth is not None:
                    self.bind(meth, e, info, skip_first=True)
                return args
            if kind == "mc":
                key = const_str(e.args[0]) if e.args else None
                if name in ("get", "pop", "setdefault") and key is not None:
                    out.add(self.key_node(key))
                    return args[1:]
                return args
            if kind == "environ" and name == "get":
                key = const_str(e.args[0]) if e.args else None
                if key is not None:
                    out.add(self.env(key, loc))
                    return args[1:]
                out.add(self.unknown(f"env:{loc}", "environment variable with a non-constant name", loc))
                return args
            if (kind == "os" and name == "getenv") or kind == "getenv":
                return self._getenv(e, info, loc, out)
            if kind == "hfcfg":
                key = const_str(e.args[0]) if e.args else None
                if name == "get" and key is not None:
                    out.add(self.hf(key, loc))
                    return args[1:]
                return args
            if kind == "mesh":
                out.add(self.hw(C.MESH_MEMBERS.get(name, "mesh_device")))
                return args
            if kind == "ttnn":
                last = name
                if last in C.HW_FUNCS:
                    out.add(self.hw(C.HW_FUNCS[last]))
                return args
            if kind == "self":
                for callee in self.self_callees(role[1], name):
                    out.add(self.func_node(callee))
                    self.bind(callee, e, info, skip_first=callee.self_name is not None)
                return args
            if name in C.HW_FUNCS and isinstance(func.value, (ast.Name, ast.Attribute)):
                out.add(self.hw(C.HW_FUNCS[name]))
                return args
            return [func.value, *args]
        if isinstance(func, ast.Name):
            name = func.id
            role = self.role_name(name, info)
            dynamic = self._dynamic_call(e, name, info, loc)
            if dynamic is not None:
                out.add(dynamic)
                return args
            if role == GETENV:
                return self._getenv(e, info, loc, out)
            if role is not None and role[0] == "ttnn":
                last = role[1].rsplit(".", 1)[-1]
                if last in C.HW_FUNCS:
                    out.add(self.hw(C.HW_FUNCS[last]))
                return args
            if name in ("getattr", "hasattr") and len(e.args) >= 2 and self.role(e.args[0], info) == ARGS:
                attr = const_str(e.args[1])
                if attr is not None:
                    if self.config_has(attr) or (name == "getattr" and len(e.args) < 3):
                        out.add(self.attr_node(attr))
                    # else: the attribute does not exist, hasattr is False and getattr gives the default
                    return args[2:]
                out.add(self.unknown(f"getattr:{loc}", "getattr on ModelArgs with a non-constant name", loc))
                return args
            kind, _owner = self.lookup(name, info)
            if kind in ("import", "builtin") and name in C.HW_FUNCS:
                out.add(self.hw(C.HW_FUNCS[name]))
                return args
            callees = self.name_callees(name, info)
            if callees is None:
                if kind == "import":
                    module, attr, _ = info.file.imports[name]
                    out.add(self.extern(f"{module}.{attr or name}".strip("."), loc))
                return args
            for callee in callees:
                out.add(self.func_node(callee))
                self.bind(callee, e, info, skip_first=False)
            return args
        if isinstance(func, ast.Subscript) and self.role(func.value, info) == MC:
            key = const_str(func.slice)
            if key is not None:
                for callee in self.key_callees(key):
                    self.bind(callee, e, info, skip_first=False)
        return [func, *args]

    def _dynamic_call(self, e: ast.Call, name: str, info: FuncInfo, loc: str) -> str | None:
        """``exec``/``eval``/``compile``/``__import__`` and ``getattr(module, <computed name>)``: code chosen at run
        time. Each is an explicit unknown at its file:line (so ``--strict`` fails), never silently nothing."""
        if name not in C.DYNAMIC_CODE and name != "getattr":
            return None
        if self.lookup(name, info)[0] != "builtin":
            return None
        if name in C.DYNAMIC_CODE:
            reason = f"{name}() runs code chosen at run time: not followed"
        else:
            if len(e.args) < 2 or const_str(e.args[1]) is not None:
                return None
            base = self.role(e.args[0], info)
            if base is None or base[0] not in ("ttnn", "os"):
                return None
            target = "ttnn" if base[0] == "ttnn" else "os"
            reason = f"getattr({target}, {info.file.segment(e.args[1], 40)}): member chosen at run time: not followed"
        self.skip(loc, info.file.segment(e, 60), reason, "warning")
        return self.unknown(f"dynamic:{loc}", reason, loc)

    def _getenv(self, e: ast.Call, info: FuncInfo, loc: str, out: set[str]) -> list:
        key = const_str(e.args[0]) if e.args else None
        rest = [a for a in e.args[1:]] + [k.value for k in e.keywords]
        if key is not None:
            out.add(self.env(key, loc))
        else:
            out.add(self.unknown(f"env:{loc}", "environment variable with a non-constant name", loc))
        return rest

    # ================================================================================ callees & binding
    def config_has(self, name: str) -> bool:
        """Whether ModelArgs defines ``name`` (attribute, class attribute, property or method)."""
        if self.config_class is None:
            return False
        return bool(self.attr_defs_for(name)) or self.config_method(name) is not None

    def config_method(self, name: str) -> FuncInfo | None:
        if self.config_class is None:
            return None
        return self.method_info(self.config_class, name)

    def self_callees(self, cls: ClassInfo, name: str) -> list[FuncInfo]:
        meth = self.method_info(cls, name)
        if meth is not None:
            return [meth]
        out = []
        for info, site in self.self_sites(cls, name):
            out.extend(self.value_callees(site.value, info))
        return out

    def value_callees(self, value: ast.AST | None, info: FuncInfo, depth: int = 0) -> list[FuncInfo]:
        """Functions a value may hold (lambdas, nested defs, functions), following simple aliases."""
        if value is None:
            return []
        if depth > 6:
            self.cut("callee resolution", value, info, 6)
            return []
        if isinstance(value, ast.Lambda):
            return [self.nested_info(info, value)]
        if isinstance(value, ast.Name):
            return self.name_callees(value.id, info, depth + 1) or []
        if isinstance(value, ast.IfExp):
            return self.value_callees(value.body, info, depth + 1) + self.value_callees(
                value.orelse, info, depth + 1
            )
        if isinstance(value, ast.Attribute):
            role = self.role(value.value, info)
            if role == ARGS:
                meth = self.config_method(value.attr)
                return [meth] if meth is not None else []
            if role is not None and role[0] == "self":
                return self.self_callees(role[1], value.attr)
        if isinstance(value, ast.Subscript) and self.role(value.value, info) == MC:
            key = const_str(value.slice)
            if key is not None:
                return self.key_callees(key)
        return []

    def name_callees(self, name: str, info: FuncInfo, depth: int = 0) -> list[FuncInfo] | None:
        kind, owner = self.lookup(name, info)
        if kind == "local":
            out = []
            for site in owner.assigns[name]:
                if site.kind == "def" and name in owner.nested:
                    out.append(self.nested_info(owner, owner.nested[name]))
                else:
                    out.extend(self.value_callees(site.value, owner, depth + 1))
            return _unique(out)
        if kind == "function":
            fn = self.module_function(info.file, name)
            return [fn] if fn is not None else []
        if kind == "import":
            fn = self.imported_function(info.file, name)
            return [fn] if fn is not None else None
        if kind == "param":
            return []
        return []

    def key_callees(self, key: str) -> list[FuncInfo]:
        self.compose()
        out = []
        for site in self.key_defs.get(key, ()):
            out.extend(self.value_callees(site.value, site.func))
        return _unique(out)

    def bind(self, callee: FuncInfo, call: ast.Call, caller: FuncInfo, skip_first: bool) -> None:
        memo = (id(call), callee.id)
        if memo in self.bound:
            return
        self.bound.add(memo)
        saved, self._inline = self._inline, None
        try:
            self._bind(callee, call, caller, skip_first)
        finally:
            self._inline = saved

    def _bind(self, callee: FuncInfo, call: ast.Call, caller: FuncInfo, skip_first: bool) -> None:
        params = list(callee.params)
        if skip_first and params and callee.self_name:
            params = params[1:]
        loc = loc_of(caller.file, call)
        pairs: list[tuple[str, ast.expr]] = []
        positional = list(call.args)
        starred = None
        for i, arg in enumerate(positional):
            if isinstance(arg, ast.Starred):
                starred = arg.value
                break
            if i < len(params):
                pairs.append((params[i], arg))
            elif callee.vararg:
                pairs.append((callee.vararg, arg))
        named = {k.arg: k.value for k in call.keywords if k.arg is not None}
        double = [k.value for k in call.keywords if k.arg is None]
        where = f"{callee.qualname}() ({callee.loc()})"
        if len(positional) > len(params) and not callee.vararg and starred is None:
            self.skip(
                loc,
                f"call {callee.qualname}()",
                f"{len(positional)} positional arguments, but {where} takes {len(params)}",
                "warning",
            )
        positional_names = {p for p, _ in pairs}
        for pname, value in named.items():
            if pname in callee.params:
                if pname in positional_names:
                    self.skip(
                        loc,
                        f"call {callee.qualname}()",
                        f"argument {pname!r} given by position and by keyword ({where})",
                        "warning",
                    )
                pairs.append((pname, value))
            elif callee.kwarg:
                pairs.append((callee.kwarg, value))
            else:
                self.skip(loc, f"call {callee.qualname}()", f"{where} has no parameter {pname!r}", "warning")
        bound_now = {p for p, _ in pairs}
        for pname in params:
            if pname not in bound_now:
                default = callee.defaults.get(pname)
                self._const_binding(callee, pname, default)
        for pname, value in pairs:
            self._const_binding(callee, pname, value)
        if starred is not None or double:
            bound_names = {p for p, _ in pairs}
            for pname in params:
                if pname not in bound_names:
                    for value in ([starred] if starred is not None else []) + double:
                        pairs.append((pname, value))
            self.skip(
                loc,
                f"call {callee.qualname}()",
                "*args/**kwargs at the call site: bound to every remaining parameter",
            )
        for pname, value in pairs:
            self._bind_role(callee, pname, value, caller)
        for pname, value in pairs:
            target = self.param_node(callee, pname)
            if target is None:
                continue
            self.g.nodes[target]["bound"] = True
            for dep in self.deps(value, caller):
                self.edge(dep, target, "bind", loc)

    def _bind_role(self, callee: FuncInfo, pname: str, value: ast.AST, caller: FuncInfo) -> None:
        """A parameter that receives model_config / ModelArgs / the mesh device / os.environ / an HF config at a
        call site stands for it inside the callee, whatever its name (``def helper(cfg): cfg["K"]``)."""
        key = (callee.id, pname)
        if key in self.param_roles or pname == callee.self_name:
            return
        role = self.role(value, caller)
        if role not in (MC, ARGS, MESH, ENVIRON, HFCFG):
            return
        self.param_roles[key] = role
        # roles computed before this binding may be stale: forget them (rare, cheap to recompute)
        self.role_memo.clear()
        self._role_cache.clear()

    # ================================================================================ config composition
    def compose(self) -> None:
        """Walk ModelArgs.__init__ in execution order, inlining the methods it calls, to collect every
        definition of every key and attribute with the guards it sits under."""
        if self._composed:
            return
        self._composed = True
        if self.config_class is None:
            return
        self.progress("composing ModelArgs definitions")
        cls = self.config_class
        for klass in reversed(self.config_chain):
            for name, stmt in klass.class_attrs.items():
                info = self._class_body_info(klass)
                value = getattr(stmt, "value", None)
                self._order += 1
                site = DefSite(
                    name,
                    "attr",
                    info,
                    value,
                    None,
                    stmt.lineno,
                    stmt.col_offset,
                    getattr(stmt, "end_lineno", stmt.lineno),
                    (),
                    self._order,
                    "class",
                )
                self.attr_defs.setdefault(name, []).append(site)
        visited: set[str] = set()
        init = self.method_info(cls, "__init__")
        if init is not None:
            self._walk(init, (), (), visited)
        called: set[str] = set()
        methods: list[FuncInfo] = []
        for klass in self.config_chain:
            for mname in klass.methods:
                info = self.method_info(klass, mname)
                if info is None or info in methods:
                    continue
                methods.append(info)
                for event in info.events:
                    if event.kind == "call":
                        called.add(event.payload.func.attr)
        for info in methods:
            if info.qualname in visited or info.name in called:
                continue
            pseudo = (f"call:{info.qualname}", "called")
            self._walk(info, (pseudo,), (f"{info.qualname}()",), visited)
        for info in methods:  # methods only reachable through cycles
            if info.qualname not in visited:
                pseudo = (f"call:{info.qualname}", "called")
                self._walk(info, (pseudo,), (f"{info.qualname}()",), visited)

    def _class_body_info(self, klass: ClassInfo) -> FuncInfo:
        key = f"{klass.file.name}:{klass.name}.<class>"
        if key not in self.funcs:
            info = FuncInfo(klass.file, klass.node, f"{klass.name}.<class>", klass, None)
            self.funcs[key] = info
        return self.funcs[key]

    def _walk(
        self, info: FuncInfo, prefix: Guards, via: tuple[str, ...], visited: set[str], stack=()
    ) -> None:
        visited.add(info.qualname)
        stack = (*stack, info.qualname)
        for event in sorted(info.events, key=lambda ev: ev.order):
            guards = (*prefix, *event.guards)
            if event.kind == "attr":
                name, site = event.payload
                self._order += 1
                end = site.line
                d = DefSite(
                    name,
                    "attr",
                    info,
                    site.value,
                    site.source,
                    site.line,
                    site.col,
                    end,
                    guards,
                    self._order,
                    _value_kind(site.value),
                    via=via,
                )
                self.attr_defs.setdefault(name, []).append(d)
                if name == "model_config" and isinstance(site.value, ast.Dict):
                    self._dict_defs(site.value, info, guards, via, site.line, site.col, "value")
            elif event.kind == "key":
                self._key_event(event.payload, info, guards, via)
            elif event.kind == "mutate":
                self._mutation(event.payload, info, guards, via)
            elif event.kind == "call":
                call = event.payload
                target = self.method_info(self.config_class, call.func.attr) if self.config_class else None
                if target is not None and target.qualname not in stack:
                    self._walk(
                        target,
                        guards,
                        (*via, f"{info.name}() line {call.lineno} -> {target.name}()"),
                        visited,
                        stack,
                    )

    def _key_event(self, sa, info: FuncInfo, guards: Guards, via) -> None:
        if self.role(sa.target.value, info) != MC:
            return
        stmt = sa.stmt
        end = getattr(stmt, "end_lineno", stmt.lineno)
        keys = self.key_names(sa.target.slice, info, sa.loops)
        line, col = sa.target.lineno, sa.target.col_offset
        if keys is None:
            self._order += 1
            d = DefSite(
                "?",
                "key",
                info,
                sa.value,
                None,
                line,
                col,
                end,
                guards,
                self._order,
                _value_kind(sa.value),
                via=via,
                dynamic=f"model_config[{info.file.segment(sa.target.slice, 60)}]",
            )
            self.dynamic_defs.append(d)
            return
        for key, env in keys:
            self._order += 1
            d = DefSite(
                key,
                "key",
                info,
                sa.value,
                None,
                line,
                col,
                end,
                guards,
                self._order,
                _value_kind(sa.value),
                env=env,
                via=via,
            )
            self.key_defs.setdefault(key, []).append(d)

    def _mutation(self, mut, info: FuncInfo, guards: Guards, via) -> None:
        if self.role(mut.base, info) != MC:
            return
        call = mut.call
        line, col, end = call.lineno, call.col_offset, getattr(call, "end_lineno", call.lineno)
        if mut.method == "setdefault" and call.args:
            key = const_str(call.args[0])
            value = call.args[1] if len(call.args) > 1 else None
            if key is not None:
                self._order += 1
                self.key_defs.setdefault(key, []).append(
                    DefSite(
                        key,
                        "key",
                        info,
                        value,
                        None,
                        line,
                        col,
                        end,
                        guards,
                        self._order,
                        _value_kind(value),
                        via=via,
                    )
                )
                return
        if mut.method != "update":
            return
        handled = True
        for arg in call.args:
            if isinstance(arg, ast.Dict):
                self._dict_defs(arg, info, guards, via, line, col, "value", end)
            elif isinstance(arg, ast.DictComp):
                handled = self._dictcomp_defs(arg, info, guards, via, line, col, end) and handled
            elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "dict":
                for kw in arg.keywords:
                    if kw.arg:
                        self._order += 1
                        self.key_defs.setdefault(kw.arg, []).append(
                            DefSite(
                                kw.arg,
                                "key",
                                info,
                                kw.value,
                                None,
                                kw.value.lineno,
                                kw.value.col_offset,
                                end,
                                guards,
                                self._order,
                                _value_kind(kw.value),
                                via=via,
                            )
                        )
            else:
                handled = False
        for kw in call.keywords:
            if kw.arg:
                self._order += 1
                self.key_defs.setdefault(kw.arg, []).append(
                    DefSite(
                        kw.arg,
                        "key",
                        info,
                        kw.value,
                        None,
                        kw.value.lineno,
                        kw.value.col_offset,
                        end,
                        guards,
                        self._order,
                        _value_kind(kw.value),
                        via=via,
                    )
                )
        if not handled:
            self._order += 1
            self.dynamic_defs.append(
                DefSite(
                    "?",
                    "key",
                    info,
                    None,
                    None,
                    line,
                    col,
                    end,
                    guards,
                    self._order,
                    "value",
                    via=via,
                    dynamic=f"model_config.update({info.file.segment(call.args[0] if call.args else None, 60)})",
                )
            )

    def _dict_defs(self, d: ast.Dict, info, guards, via, line, col, kind, end=None) -> None:
        for k, v in zip(d.keys, d.values):
            key = const_str(k)
            if key is None:
                continue
            self._order += 1
            self.key_defs.setdefault(key, []).append(
                DefSite(
                    key,
                    "key",
                    info,
                    v,
                    None,
                    k.lineno,
                    k.col_offset,
                    end or v.end_lineno or k.lineno,
                    guards,
                    self._order,
                    _value_kind(v),
                    via=via,
                )
            )

    def _dictcomp_defs(self, comp: ast.DictComp, info, guards, via, line, col, end) -> bool:
        if len(comp.generators) != 1 or not isinstance(comp.generators[0].target, ast.Name):
            return False
        gen = comp.generators[0]
        var = gen.target.id
        values = self.static_iter(gen.iter, info)
        if values is None:
            return False
        produced = False
        for item in values:
            env = {var: item}
            if not all(const_eval(test, env) is True for test in gen.ifs):
                continue
            key = const_eval(comp.key, env)
            if not isinstance(key, str):
                return False
            value = comp.value
            while isinstance(value, ast.IfExp):
                test = const_eval(value.test, env)
                if test is NOTHING:
                    break
                value = value.body if test else value.orelse
            self._order += 1
            self.key_defs.setdefault(key, []).append(
                DefSite(
                    key,
                    "key",
                    info,
                    value,
                    None,
                    comp.key.lineno,
                    comp.key.col_offset,
                    end,
                    guards,
                    self._order,
                    "comprehension",
                    env=env,
                    via=via,
                )
            )
            produced = True
        return produced or not values

    def key_names(self, slice_: ast.expr, info: FuncInfo, loops) -> list[tuple[str, dict]] | None:
        key = const_str(slice_)
        if key is not None:
            return [(key, {})]
        names = {n.id for n in ast.walk(slice_) if isinstance(n, ast.Name)}
        for target, iterable in reversed(loops):
            if isinstance(target, ast.Name) and target.id in names:
                values = self.static_iter(iterable, info)
                if values is None:
                    return None
                out = []
                for item in values:
                    env = {target.id: item}
                    value = const_eval(slice_, env)
                    if not isinstance(value, str):
                        return None
                    out.append((value, env))
                return out
        return None

    def loop_keys(self, slice_: ast.expr, info: FuncInfo) -> list[str] | None:
        """Keys of ``mc[k]`` / ``mc[f"{k}_X"]`` where ``k`` loops over a statically known iterable."""
        names = [n.id for n in ast.walk(slice_) if isinstance(n, ast.Name)]
        if len(set(names)) != 1:
            return None
        kind, owner = self.lookup(names[0], info)
        if kind != "local":
            return None
        sites = owner.assigns[names[0]]
        if len(sites) != 1 or sites[0].kind not in ("for", "comp") or sites[0].source is None:
            return None
        values = self.static_iter(sites[0].source, owner)
        if not values:
            return None
        out = []
        for item in values:
            key = const_eval(slice_, {names[0]: item})
            if not isinstance(key, str):
                return None
            out.append(key)
        return out

    def static_iter(self, e: ast.expr, info: FuncInfo, depth: int = 0):
        if depth > 6:
            self.cut("constant iterable", e, info, 6)
            return None
        value = const_eval(e, {})
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(e, ast.Attribute) and self.role(e.value, info) == ARGS:
            for klass in self.config_chain:
                stmt = klass.class_attrs.get(e.attr)
                if stmt is not None and getattr(stmt, "value", None) is not None:
                    return self.static_iter(stmt.value, info, depth + 1)
            return None
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind == "local":
                sites = owner.assigns[e.id]
                if len(sites) == 1 and sites[0].value is not None:
                    return self.static_iter(sites[0].value, owner, depth + 1)
            if kind == "global":
                stmts = owner.globals[e.id]
                if len(stmts) == 1 and getattr(stmts[0], "value", None) is not None:
                    return self.static_iter(stmts[0].value, info, depth + 1)
        return None

    # ================================================================================ expansion
    def expand_all(self) -> None:
        count = 0
        while self.pending:
            nid = self.pending.popleft()
            payload = self.payload.get(nid)
            if payload is None:
                continue
            count += 1
            if count % 2000 == 0:
                self.progress(f"expanding dependencies ({count} nodes)")
            try:
                self._expand(nid, payload)
            except RecursionError:
                self.skip(
                    self.g.nodes[nid].get("loc") or "?",
                    nid,
                    "expression nested too deeply to analyse",
                    "warning",
                )

    def _expand(self, nid: str, payload) -> None:
        kind = payload[0]
        if kind == "local":
            _, info, name = payload
            if name in info.params:
                initial = self.param_node(info, name)
                if initial is not None:
                    self.edge(initial, nid, "data", info.loc())
            for site in info.assigns[name]:
                loc = f"{info.file.name}:{site.line}"
                if site.kind == "def" and name in info.nested:
                    self.edge(self.func_node(self.nested_info(info, info.nested[name])), nid, "data", loc)
                elif site.kind == "import":
                    continue
                else:
                    value = site.value if site.value is not None else site.source
                    for dep in self.deps(value, info):
                        self.edge(dep, nid, "data", loc)
                self.guard_edges(nid, site.guards)
        elif kind == "param":
            _, info, name = payload
            if info.parent is None and self.is_config_class(info.cls) and not self.g.nodes[nid].get("bound"):
                for caller, call in self.config_callers(info.name):
                    self.bind(info, call, caller, skip_first=True)
            default = info.defaults.get(name)
            if default is not None:
                for dep in self.deps(default, info):
                    self.edge(dep, nid, "data", loc_of(info.file, default))
        elif kind == "global":
            _, source, name = payload
            info = self._module_info(source)
            for stmt in self.index(source).globals[name]:
                for dep in self.deps(getattr(stmt, "value", None), info):
                    self.edge(dep, nid, "data", f"{source.name}:{stmt.lineno}")
        elif kind == "func":
            info = payload[1]
            self._expand_function(nid, info)
        elif kind == "method":
            name = payload[1]
            info = self.config_method(name)
            if info is None:
                attr_defs = self.attr_defs_for(name)
                if attr_defs:
                    self.edge(self.attr_node(name), nid, "data")
                    return
                self.g.nodes[nid]["resolved"] = False
                reason = self._missing_reason("method", name)
                self.edge(self.unknown(f"method:{name}", reason, None), nid, "data")
                return
            self.g.nodes[nid]["loc"] = info.loc()
            self.g.nodes[nid]["resolved"] = True
            self._expand_function(nid, info)
        elif kind == "attr":
            self._expand_attr(nid, payload[1])
        elif kind == "key":
            self._expand_key(nid, payload[1])
        elif kind == "def":
            site: DefSite = payload[1]
            self._expand_def(nid, site)
        elif kind == "self":
            _, cls, name = payload
            for info, site in self.self_sites(cls, name):
                value = site.value if site.value is not None else site.source
                for dep in self.deps(value, info):
                    self.edge(dep, nid, "data", f"{info.file.name}:{site.line}")
                self.guard_edges(nid, site.guards)
        elif kind == "branch":
            _, site, info = payload
            for decider in site.deciders:
                found: set[str] = set()
                rest: list = []
                self._truth_dep(decider, info, found, rest)
                for expr in rest:
                    self._deps(expr, info, found)
                for dep in found:
                    self.edge(dep, nid, "data", site.id)
            for fact, _pol in self.facts_of(site, info):
                if fact == "galaxy":
                    self.edge(self.fact_node("galaxy"), nid, "data", site.id)
            real = [g for g in site.guards if g[0] in self.branch_index]
            if real:
                self.edge(self.branch_node(real[-1][0]), nid, "nest")

    def _const_binding(self, callee: FuncInfo, pname: str, value: ast.AST | None) -> None:
        key = (callee.id, pname)
        if isinstance(value, ast.Constant) and not isinstance(value.value, (bytes, complex)):
            values = self.param_consts.setdefault(key, set())
            if values is not None:
                values.add(value.value)
        else:
            self.param_consts[key] = None

    def param_constants(self, info: FuncInfo, name: str):
        """The constants a parameter receives at every call site seen, or None if any is not constant."""
        return self.param_consts.get((info.id, name))

    def config_callers(self, name: str) -> list[tuple[FuncInfo, ast.Call]]:
        """Calls ``self.<name>(...)`` made inside the config class (to bind the parameters of ``name``)."""
        if self._callers is None:
            self._callers = {}
            for klass in self.config_chain:
                for mname in klass.methods:
                    info = self.method_info(klass, mname)
                    for event in info.events if info is not None else ():
                        if event.kind == "call":
                            self._callers.setdefault(event.payload.func.attr, []).append(
                                (info, event.payload)
                            )
        return self._callers.get(name, [])

    def _module_info(self, source: SourceFile) -> FuncInfo:
        key = f"{source.name}:<module>"
        if key not in self.funcs:
            self.funcs[key] = FuncInfo(source, source.tree, "<module>", None, None)
        return self.funcs[key]

    def _expand_function(self, nid: str, info: FuncInfo) -> None:
        """A function *value* depends on its closure only (self attributes, enclosing locals, globals, keys, env,
        hardware, the functions it calls), never on its own parameters: those belong to each call site, which
        adds its arguments' dependencies to the call's result itself. Parameters still receive 'bind' edges from
        every call site, which classify the branches inside the function."""
        for dep in self.closure_deps(info):
            self.edge(dep, nid, "data", info.loc())

    def closure_deps(self, info: FuncInfo) -> set[str]:
        saved = self._inline
        self._inline = (info, set())
        out: set[str] = set()
        try:
            for value, guards in info.returns:
                if value is not None:
                    self._deps(value, info, out)
                self._inline_guards(guards, info, out)
        finally:
            self._inline = saved
        return out

    def _inline_guards(self, guards: Guards, owner: FuncInfo, out: set[str]) -> None:
        fn = self._inline[0] if self._inline else None
        for bid, _arm in guards:
            entry = self.branch_index.get(bid)
            if entry is None:
                continue
            site, where = entry
            if where is fn:
                for decider in site.deciders:
                    self._deps(decider, where, out)
            else:
                out.add(self.branch_node(bid))

    def _inline_name(self, name: str, info: FuncInfo, out: set[str]) -> bool:
        """While computing a function's closure: own parameters vanish, own locals are inlined."""
        fn, seen = self._inline
        kind, owner = self.lookup(name, info)
        if owner is not fn:
            return False
        if kind == "param":
            return True
        if kind != "local":
            return False
        if name in seen:
            return True
        seen.add(name)
        for site in owner.assigns[name]:
            if site.kind == "def" and name in owner.nested:
                out.add(self.func_node(self.nested_info(owner, owner.nested[name])))
                continue
            if site.kind == "import":
                continue
            value = site.value if site.value is not None else site.source
            if value is not None:
                self._deps(value, owner, out)
            self._inline_guards(site.guards, owner, out)
        return True

    def attr_defs_for(self, name: str) -> list[DefSite]:
        self.compose()
        return self.attr_defs.get(name, [])

    def _expand_attr(self, nid: str, name: str) -> None:
        defs = self.attr_defs_for(name)
        data = self.g.nodes[nid]
        if defs:
            data["resolved"] = True
            data["loc"] = defs[0].loc
            for site in defs:
                value = site.value if site.value is not None else site.source
                if site.value_kind == "class" and value is None:
                    continue
                for dep in self.deps(value, site.func):
                    self.edge(dep, nid, "data", site.loc)
                self.guard_edges(nid, site.guards, innermost_only=False)
            return
        meth = self.config_method(name)
        if meth is not None:
            data["resolved"] = True
            data["loc"] = meth.loc()
            data["method"] = True
            self._expand_function(nid, meth)
            return
        data["resolved"] = False
        self.edge(self.unknown(f"attr:{name}", self._missing_reason("attribute", name), None), nid, "data")

    def _missing_reason(self, what: str, name: str) -> str:
        if self.config is None:
            return f"no config module given: ModelArgs.{name} cannot be resolved"
        if self.config_class is None:
            return f"{self.config.name} has no ModelArgs class: {what} {name} cannot be resolved"
        return f"ModelArgs ({self.config.name}) defines no {what} {name!r}"

    def _expand_key(self, nid: str, key: str) -> None:
        self.compose()
        defs = self.key_defs.get(key, [])
        data = self.g.nodes[nid]
        if not defs:
            data["resolved"] = False
            if self.config is None:
                reason = "no config module given"
            elif self.config_class is None:
                reason = f"{self.config.name} has no ModelArgs class"
            else:
                reason = f"no definition of model_config[{key!r}] in {self.config.name}"
                if self.dynamic_defs:
                    locs = ", ".join(d.loc for d in self.dynamic_defs[:3])
                    reason += f"; it may come from a dynamic key ({locs})"
            self.edge(self.unknown(f"key:{key}", reason, None), nid, "data")
            return
        data["resolved"] = True
        data["loc"] = defs[0].loc
        for site in defs:
            did = self.node(
                site.id,
                "definition",
                f"{key} = {_short_value(site)}",
                site.loc,
                payload=("def", site),
                key=key,
            )
            self.edge(did, nid, "defines", site.loc)

    def _expand_def(self, nid: str, site: DefSite) -> None:
        value = site.value if site.value is not None else site.source
        for dep in self.deps(value, site.func):
            self.edge(dep, nid, "data", site.loc)
        self.guard_edges(nid, site.guards, innermost_only=False)

    # ================================================================================ facts
    def fact_node(self, name: str) -> str:
        labels = {"galaxy": "topology: galaxy (num_devices == 32, 2D mesh)"}
        nid = self.node(f"fact:{name}", "fact", labels.get(name, name))
        if name == "galaxy":
            self.edge(self.hw("num_devices"), nid, "data")
        return nid

    def galaxy_polarity(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> int | None:
        """+1 if ``e`` means "is galaxy", -1 if it means "is not galaxy", None otherwise."""
        if depth > 10:
            self.cut("topology test", e, info, 10)
            return None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            pol = self.galaxy_polarity(e.operand, info, depth + 1)
            return -pol if pol else None
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            op, other = e.ops[0], e.comparators[0]
            left = e.left
            if _is_const(other, C.GALAXY_DEVICES) and self.is_num_devices(left, info, depth + 1):
                return 1 if isinstance(op, ast.Eq) else -1 if isinstance(op, ast.NotEq) else None
            if _is_const(left, C.GALAXY_DEVICES) and self.is_num_devices(other, info, depth + 1):
                return 1 if isinstance(op, ast.Eq) else -1 if isinstance(op, ast.NotEq) else None
            return None
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role == ARGS and e.attr == "is_galaxy":
                return 1
            if role is not None and role[0] == "self":
                values = [(i, s.value) for i, s in self.self_sites(role[1], e.attr)]
                return self._alias_polarity(values, depth)
            return None
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind == "param":
                if e.id in C.GALAXY_NAMES:
                    return 1
                return None
            if kind == "local":
                return self._alias_polarity([(owner, s.value) for s in owner.assigns[e.id]], depth)
        return None

    def _alias_polarity(self, values, depth: int) -> int | None:
        pols = set()
        for owner, value in values:
            if value is None:
                return None
            pols.add(self.galaxy_polarity(value, owner, depth + 1))
        return pols.pop() if len(pols) == 1 else None

    def is_num_devices(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        if depth > 10:
            self.cut("device-count test", e, info, 10)
            return False
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "get_num_devices":
            return True
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role == ARGS and e.attr == "num_devices":
                return True
            if role is not None and role[0] == "self" and e.attr == "num_devices":
                return all(
                    self.is_num_devices(s.value, i, depth + 1)
                    for i, s in self.self_sites(role[1], e.attr)
                    if s.value is not None
                ) and bool(self.self_sites(role[1], e.attr))
            return False
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind == "local":
                sites = owner.assigns[e.id]
                return all(
                    s.value is not None and self.is_num_devices(s.value, owner, depth + 1) for s in sites
                )
            return kind == "param" and e.id == "num_devices"
        return False

    def mode_value(self, e: ast.AST) -> str | None:
        text = const_str(e)
        if text in ("decode", "prefill"):
            return text
        if isinstance(e, ast.Attribute) and e.attr in C.MODE_VALUES and _endswith_mode(e.value):
            return C.MODE_VALUES[e.attr]
        return None

    def is_mode_param(self, info: FuncInfo, name: str) -> bool:
        ann = info.annotations.get(name)
        return name in C.MODE_NAMES or (ann is not None and unparse(ann).endswith("Mode"))

    def is_mode(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        if depth > 8:
            self.cut("mode test", e, info, 8)
            return False
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind == "param":
                return self.is_mode_param(owner, e.id)
            if kind == "local":
                if e.id in owner.params and self.is_mode_param(owner, e.id):
                    return True  # e.g. ``mode = Mode(mode)`` normalising a string mode
                sites = owner.assigns[e.id]
                return bool(sites) and all(
                    s.value is not None and self.is_mode(s.value, owner, depth + 1) for s in sites
                )
            return False
        if isinstance(e, ast.Call) and len(e.args) == 1 and _endswith_mode(e.func):
            return self.is_mode(e.args[0], info, depth + 1)
        if isinstance(e, ast.Attribute) and e.attr in C.MODE_NAMES:
            role = self.role(e.value, info)
            return role is not None and role[0] == "self"
        return False

    def mesh_shape_expr(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        """``mesh_device.shape`` / ``list(mesh_device.shape)`` / a local alias of either / ``args.cluster_shape``."""
        if depth > 6:
            self.cut("mesh shape test", e, info, 6)
            return False
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Name)
            and e.func.id in ("list", "tuple")
            and e.args
        ):
            e = e.args[0]
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind == "local":
                sites = owner.assigns[e.id]
                return all(
                    s.value is not None and self.mesh_shape_expr(s.value, owner, depth + 1) for s in sites
                )
            return False
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if e.attr == "shape" and role == MESH:
                return True
            return e.attr == "cluster_shape" and role == ARGS
        return False

    def facts_of(self, site: BranchSite, info: FuncInfo) -> list[tuple[str, int]]:
        """Topology / mode / model-name facts named in a branch's deciders (with polarity)."""
        cached = self._facts_cache.get(site.id)
        if cached is not None:
            return cached
        out: list[tuple[str, int]] = []
        for decider in site.deciders:
            self._facts(decider, info, 1, out, 0)
        self._facts_cache[site.id] = out
        return out

    def _facts(self, e: ast.AST, info: FuncInfo, pol: int, out: list, depth: int) -> None:
        if depth > 30:
            self.cut("condition", e, info, 30)
            return
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            self._facts(e.operand, info, -pol, out, depth + 1)
            return
        if isinstance(e, ast.BoolOp):
            for value in e.values:
                self._facts(value, info, pol, out, depth + 1)
            return
        gp = self.galaxy_polarity(e, info)
        if gp:
            out.append(("galaxy", gp * pol))
            return
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            left, op, right = e.left, e.ops[0], e.comparators[0]
            for a, b in ((left, right), (right, left)):
                mv = self.mode_value(b)
                if mv and self.is_mode(a, info):
                    sign = (
                        1
                        if isinstance(op, (ast.Eq, ast.Is))
                        else -1
                        if isinstance(op, (ast.NotEq, ast.IsNot))
                        else 0
                    )
                    if sign:
                        out.append((f"mode:{mv}", sign * pol))
                    return
            if isinstance(op, (ast.In, ast.NotIn)) and self.is_mode(left, info):
                values = {self.mode_value(x) for x in getattr(right, "elts", [])}
                if len(values) == 1 and None not in values:
                    out.append((f"mode:{values.pop()}", pol if isinstance(op, ast.In) else -pol))
                return
            if (
                isinstance(op, (ast.In, ast.NotIn))
                and _is_const(left, 1)
                and self.mesh_shape_expr(right, info)
            ):
                out.append(("mesh_1d", pol if isinstance(op, ast.In) else -pol))
                return
            if isinstance(op, (ast.Eq, ast.NotEq)) and self.mesh_shape_expr(left, info):
                values = const_eval(right, {})
                if isinstance(values, (list, tuple)) and list(values) == [1, 1]:
                    out.append(("single_device", pol if isinstance(op, ast.Eq) else -pol))
                    return
            if self._is_model_name_check(e):
                out.append(("model-name", pol))
                return
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "all" and e.args:
            arg = e.args[0]
            if (
                isinstance(arg, (ast.ListComp, ast.GeneratorExp))
                and arg.generators
                and self.mesh_shape_expr(arg.generators[0].iter, info)
            ):
                out.append(("galaxy", pol))
                return
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Attribute)
            and e.func.attr in ("startswith", "endswith")
            and _mentions(e.func.value, C.MODEL_NAME_HINTS)
        ):
            out.append(("model-name", pol))

    def _is_model_name_check(self, e: ast.Compare) -> bool:
        parts = [e.left, *e.comparators]
        has_str = any(const_str(p) is not None or _is_str_seq(p) for p in parts)
        return has_str and any(_mentions(p, C.MODEL_NAME_HINTS) for p in parts)

    def eval_facts(self, e: ast.AST, info: FuncInfo, assume: dict[str, object]):
        """Three-valued evaluation of a condition under assumptions {"mode": ..., "galaxy": bool}."""
        return _eval_tree(self.fact_tree(e, info), assume)

    def _const_compare(self, e: ast.AST, info: FuncInfo):
        """``param == CONST`` where every call site passes constants: decided if they all agree."""
        if not (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Eq, ast.NotEq))):
            return None
        left, right = e.left, e.comparators[0]
        if isinstance(right, ast.Name) and isinstance(left, ast.Constant):
            left, right = right, left
        if not (isinstance(left, ast.Name) and isinstance(right, ast.Constant)):
            return None
        kind, owner = self.lookup(left.id, info)
        if kind != "param" or left.id in C.MODE_NAMES:
            return None
        values = self.param_constants(owner, left.id)
        if not values:
            return None
        results = {v == right.value for v in values}
        if len(results) != 1:
            return None
        result = results.pop()
        return result if isinstance(e.ops[0], ast.Eq) else not result

    def branch_value(self, bid: str, assume: dict[str, object]):
        """True / False / None: what a branch's test evaluates to under the assumptions (cached). The test is
        compiled once into a small tree of facts, which is then cheap to evaluate for every assumption."""
        key = (bid, assume.get("mode"), assume.get("galaxy"))
        if key in self._eval_cache:
            return self._eval_cache[key]
        tree = self._fact_trees.get(bid, NOTHING)
        if tree is NOTHING:
            entry = self.branch_index.get(bid)
            tree = None
            if entry is not None and entry[0].construct != "match":
                tree = self.fact_tree(entry[0].deciders[0], entry[1])
            self._fact_trees[bid] = tree
        value = _eval_tree(tree, assume)
        self._eval_cache[key] = value
        return value

    def fact_tree(self, e: ast.AST, info: FuncInfo, depth: int = 0):
        """The test as ("and"|"or", [trees]) / ("not", tree) / ("const", bool) / ("fact", name, polarity) / None."""
        if depth > 30:
            self.cut("condition", e, info, 30)
            return None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            inner = self.fact_tree(e.operand, info, depth + 1)
            return None if inner is None else ("not", inner)
        if isinstance(e, ast.BoolOp):
            return (
                "and" if isinstance(e.op, ast.And) else "or",
                [self.fact_tree(v, info, depth + 1) for v in e.values],
            )
        known = self._const_compare(e, info)
        if known is not None:
            return ("const", known)
        facts: list[tuple[str, int]] = []
        self._facts(e, info, 1, facts, 0)
        if len(facts) != 1:
            return None
        return ("fact", facts[0][0], facts[0][1])

    def guard_possible(self, guards: Guards, assume: dict[str, object]) -> bool:
        for bid, arm in guards:
            if arm not in ("then", "else"):
                continue
            value = self.branch_value(bid, assume)
            if value is None:
                continue
            if (arm == "then") != value:
                return False
        return True

    # ================================================================================ pass 2: module & helpers
    def run(self) -> None:
        cls = self.consumer
        init = self.method_info(cls, "__init__")
        entry = self.method_info(cls, self.entry)
        if init is not None:
            self._set_entry_params(init, construction=True)
        self._set_entry_params(entry, construction=False)
        self.entry_ids = [info.id for info in (init, entry) if info is not None]
        queue: deque[tuple[FuncInfo, str, tuple[str, ...]]] = deque()
        if init is not None:
            queue.append((init, "construction", ()))
        queue.append((entry, "forward", ()))
        self.progress(f"scanning {self.module.name}")
        while queue:
            info, phase, via = queue.popleft()
            phases = self.scanned.setdefault(info.id, set())
            if phase in phases:
                continue
            first = not phases
            phases.add(phase)
            self.scan_via.setdefault(info.id, via)
            try:
                callees = self._visit(info, phase, via, first)
            except RecursionError:
                self.skip(info.loc(), info.qualname, "expression nested too deeply to analyse", "warning")
                continue
            for callee, guards, loc in callees:
                self.call_edges.append(CallEdge(info.id, callee.id, guards, loc))
                if self.follow_helpers or callee.file is self.module:
                    queue.append((callee, phase, (*via, callee.qualname)))
            self.expand_all()
        self.expand_all()

    def _set_entry_params(self, info: FuncInfo, construction: bool) -> None:
        for name in [*info.params, *(n for n in (info.vararg, info.kwarg) if n)]:
            if name == info.self_name:
                continue
            key = (info.id, name)
            role = self.role_name(name, info)
            if role is not None:
                self.entry_params[key] = None
                continue
            if construction:
                if name in C.WEIGHT_NAMES:
                    self.entry_params[key] = self.node(
                        "weights:state_dict", "weights", "weights (state_dict contents)", info.loc()
                    )
                else:
                    cat = "module_arg"
                    label = f"{name} ({self.consumer.name} constructor argument)"
                    self.entry_params[key] = self.node(f"module:{name}", cat, label, info.loc())
            elif self.is_mode_param(info, name):
                self.entry_params[key] = self.node(
                    "input:mode", "mode", "mode (per-call: decode / prefill)", info.loc()
                )
            else:
                self.entry_params[key] = self.node(
                    f"input:{name}", "input", f"{name} ({self.entry}() input)", info.loc()
                )

    def _visit(self, info: FuncInfo, phase: str, via: tuple[str, ...], first: bool):
        """Record branches, config reads, ops and helper calls of one function; return its callees."""
        side = "module" if info.file is self.module else "helper"
        if info.file is self.config:
            side = "helper"
        for site in info.branches:
            self.branch_phase.setdefault(site.id, set()).add(phase)
            if site.id not in self.module_branches:
                self.module_branches[site.id] = side
            self.branch_node(site.id)
        call_funcs = {id(c.node.func): c.node for c in info.calls}
        record_reads = info.file is not self.config and first
        if record_reads:
            for site in info.exprs:
                self._read_from_expr(site, info, phase, call_funcs)
        if first:
            for site in info.binops:
                op = _BINOP_OPS.get(type(site.node.op))
                if op and (self.is_tensor(site.node.left, info) or self.is_tensor(site.node.right, info)):
                    deps = self.deps(site.node, info)
                    self._record_op(
                        op, f"{_BINOP_SYMBOLS[op]} (tensor operator)", site.node, site, info, phase, via, deps
                    )
        callees: list[tuple[FuncInfo, Guards, str]] = []
        for call in reversed(info.calls):  # inner calls first: outer calls reuse their dependencies
            node = call.node
            loc = loc_of(info.file, node)
            deps = self.deps(node, info)  # also binds parameters of every callee
            self._call_cache[id(node)] = (node, frozenset(deps))
            if record_reads:
                self._read_from_call(call, info, phase)
            op = self.op_name(node, info)
            if op is not None and first:
                name, spelled = op
                self._record_op(name, spelled, node, call, info, phase, via, deps)
            for callee in self.callees_of(node, info):
                callees.append((callee, call.guards, loc))
        return callees

    def callees_of(self, call: ast.Call, info: FuncInfo) -> list[FuncInfo]:
        func = call.func
        if isinstance(func, ast.Attribute):
            role = self.role(func.value, info)
            if role == ARGS:
                meth = self.config_method(func.attr)
                return [meth] if meth is not None else []
            if role is not None and role[0] == "self":
                return self.self_callees(role[1], func.attr)
            return []
        if isinstance(func, ast.Name):
            if self.role_name(func.id, info) is not None:
                return []
            return self.name_callees(func.id, info) or []
        if isinstance(func, ast.Subscript) and self.role(func.value, info) == MC:
            key = const_str(func.slice)
            return self.key_callees(key) if key is not None else []
        return []

    def op_name(self, call: ast.Call, info: FuncInfo) -> tuple[str, str] | None:
        func = call.func
        if isinstance(func, (ast.Attribute, ast.Name)):
            role = self.role(func, info)
            if role is not None and role[0] == "ttnn" and "." in role[1]:
                full = role[1]
                last = full.rsplit(".", 1)[-1]
                if last[:1].isupper() or last in C.TTNN_NON_OPS or last in C.HW_FUNCS:
                    return None
                return full, info.file.segment(func, 60)
            if isinstance(func, ast.Attribute) and func.attr in C.TENSOR_METHOD_OPS:
                base = self.role(func.value, info)
                if base is None:
                    return f"ttnn.Tensor.{func.attr}", info.file.segment(func, 60)
        return None

    def is_tensor(self, e: ast.AST, info: FuncInfo, depth: int = 0) -> bool:
        """Whether ``e`` holds a device tensor: a ttnn op result, a weight made with ttnn.as_tensor/from_torch,
        or a parameter annotated ``ttnn.Tensor``."""
        if depth > 6:
            self.cut("tensor test", e, info, 6)
            return False
        if isinstance(e, ast.Call):
            if self.op_name(e, info) is not None:
                return True
            role = self.role(e.func, info) if isinstance(e.func, (ast.Name, ast.Attribute)) else None
            return (
                role is not None
                and role[0] == "ttnn"
                and role[1].rsplit(".", 1)[-1] in ("as_tensor", "from_torch")
            )
        if isinstance(e, ast.Name):
            kind, owner = self.lookup(e.id, info)
            if kind == "local":
                return any(
                    s.value is not None and self.is_tensor(s.value, owner, depth + 1)
                    for s in owner.assigns[e.id]
                )
            if kind == "param":
                ann = owner.annotations.get(e.id)
                return ann is not None and unparse(ann).endswith("Tensor")
            return False
        if isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role is not None and role[0] == "self":
                return any(
                    s.value is not None and self.is_tensor(s.value, i, depth + 1)
                    for i, s in self.self_sites(role[1], e.attr)
                )
        if isinstance(e, ast.Subscript):
            return self.is_tensor(e.value, info, depth + 1)
        return False

    def _record_op(self, name, spelled, node, call, info, phase, via, deps) -> None:
        loc = loc_of(info.file, node)
        nid = self.node(f"op:{name}", "op", name)
        for dep in deps:
            if not dep.startswith("op:"):
                self.edge(dep, nid, "arg", loc)
        self.guard_edges(nid, call.guards)
        self.ops.append(
            {
                "op": name,
                "loc": loc,
                "function": info.qualname,
                "spelled": spelled,
                "phase": phase,
                "guards": call.guards,
                "via": via,
                "func": info.id,
            }
        )

    def _read(
        self,
        name,
        kind,
        via,
        node_ast,
        info,
        phase,
        site_guards,
        in_cond,
        default=None,
        called=None,
        note=None,
    ):
        loc = loc_of(info.file, node_ast)
        if (loc, name) in self._read_locs:
            return
        self._read_locs.add((loc, name))
        if kind == "key":
            nid = self.key_node(name)
        elif kind == "attr":
            nid = self.attr_node(name)
        else:
            nid = self.method_node(name)
        self.reads.append(
            {
                "name": name,
                "kind": kind,
                "via": via,
                "loc": loc,
                "function": info.qualname,
                "node": nid,
                "in_condition": in_cond,
                "default": default,
                "called_with": called,
                "guards": site_guards,
                "phase": phase,
                "note": note,
                "func": info.id,
            }
        )

    def _read_from_expr(self, site, info: FuncInfo, phase: str, call_funcs) -> None:
        e = site.node
        if isinstance(e, ast.Subscript):
            role = self.role(e.value, info)
            if role != MC:
                return
            key = const_str(e.slice)
            call = call_funcs.get(id(e))
            called = [info.file.segment(a, 40) for a in call.args] if call is not None else None
            if key is None:
                keys = self.loop_keys(e.slice, info)
                if keys:
                    for key in keys:
                        self._read(
                            key,
                            "key",
                            info.file.segment(e, 80),
                            e,
                            info,
                            phase,
                            site.guards,
                            site.in_condition,
                            called=called,
                            note=f"key from {info.file.segment(e.slice, 30)} over a constant iterable",
                        )
                    return
                loc = loc_of(info.file, e)
                self.unknown(
                    f"dynkey:{loc}",
                    f"model_config[{info.file.segment(e.slice, 40)}]: key is not a constant",
                    loc,
                )
                self.skip(
                    loc,
                    f"model_config[{info.file.segment(e.slice, 40)}]",
                    "key is not a constant string",
                    "warning",
                )
                return
            self._read(
                key,
                "key",
                info.file.segment(e, 80),
                e,
                info,
                phase,
                site.guards,
                site.in_condition,
                called=called,
            )
        elif isinstance(e, ast.Attribute):
            role = self.role(e.value, info)
            if role != ARGS or e.attr in ("model_config", "get_model_config"):
                return
            call = call_funcs.get(id(e))
            if call is not None:
                called = [info.file.segment(a, 40) for a in call.args] + [
                    f"{k.arg}={info.file.segment(k.value, 30)}" for k in call.keywords
                ]
                self._read(
                    e.attr,
                    "method",
                    info.file.segment(e, 80) + "()",
                    e,
                    info,
                    phase,
                    site.guards,
                    site.in_condition,
                    called=called,
                )
                return
            meth = self.config_method(e.attr)
            if meth is not None and not meth.is_property:
                self._read(
                    e.attr,
                    "method",
                    info.file.segment(e, 80),
                    e,
                    info,
                    phase,
                    site.guards,
                    site.in_condition,
                    note="callable passed as a value",
                )
                return
            self._read(
                e.attr, "attr", info.file.segment(e, 80), e, info, phase, site.guards, site.in_condition
            )

    def _read_from_call(self, call, info: FuncInfo, phase: str) -> None:
        node = call.node
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and self.role(func.value, info) == MC:
            key = const_str(node.args[0]) if node.args else None
            if key is not None:
                default = info.file.segment(node.args[1], 40) if len(node.args) > 1 else "None"
                self._read(
                    key,
                    "key",
                    info.file.segment(node, 80),
                    node,
                    info,
                    phase,
                    call.guards,
                    call.in_condition,
                    default=default,
                )
        elif (
            isinstance(func, ast.Name)
            and func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and self.role(node.args[0], info) == ARGS
        ):
            attr = const_str(node.args[1])
            if attr is not None:
                default = info.file.segment(node.args[2], 40) if len(node.args) > 2 else None
                self._read(
                    attr,
                    "attr",
                    info.file.segment(node, 80),
                    node,
                    info,
                    phase,
                    call.guards,
                    call.in_condition,
                    default=default,
                    note=f"{func.id}()",
                )


_BINOP_OPS = {
    ast.Add: "ttnn.add",
    ast.Sub: "ttnn.subtract",
    ast.Mult: "ttnn.multiply",
    ast.Div: "ttnn.divide",
    ast.MatMult: "ttnn.matmul",
}
_BINOP_SYMBOLS = {
    "ttnn.add": "+",
    "ttnn.subtract": "-",
    "ttnn.multiply": "*",
    "ttnn.divide": "/",
    "ttnn.matmul": "@",
}


def _eval_tree(tree, assume: dict[str, object]):
    """Three-valued evaluation of a fact tree under {"mode": ..., "galaxy": ...}."""
    if tree is None:
        return None
    kind = tree[0]
    if kind == "const":
        return tree[1]
    if kind == "not":
        value = _eval_tree(tree[1], assume)
        return None if value is None else not value
    if kind in ("and", "or"):
        values = [_eval_tree(t, assume) for t in tree[1]]
        if kind == "and":
            if any(v is False for v in values):
                return False
            return True if all(v is True for v in values) else None
        if any(v is True for v in values):
            return True
        return False if all(v is False for v in values) else None
    fact, pol = tree[1], tree[2]
    galaxy = assume.get("galaxy")
    value = None
    if fact == "galaxy" and galaxy is not None:
        value = bool(galaxy)
    elif fact.startswith("mode:") and assume.get("mode"):
        value = fact[5:] == assume["mode"]
    elif fact == "mesh_1d" and galaxy is not None:
        value = not galaxy
    elif fact == "single_device" and galaxy:
        value = False
    if value is None:
        return None
    return value if pol > 0 else not value


def const_eval(e: ast.AST | None, env: dict[str, object]):
    """Evaluate the small constant subset used for generated keys; NOTHING when not evaluable."""
    if e is None:
        return NOTHING
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Name):
        return env.get(e.id, NOTHING)
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        items = [const_eval(x, env) for x in e.elts]
        if any(x is NOTHING for x in items):
            return NOTHING
        return tuple(items) if isinstance(e, ast.Tuple) else list(items)
    if isinstance(e, ast.JoinedStr):
        parts = []
        for value in e.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif (
                isinstance(value, ast.FormattedValue) and value.format_spec is None and value.conversion == -1
            ):
                inner = const_eval(value.value, env)
                if inner is NOTHING:
                    return NOTHING
                parts.append(str(inner))
            else:
                return NOTHING
        return "".join(parts)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        a, b = const_eval(e.left, env), const_eval(e.right, env)
        if isinstance(a, str) and isinstance(b, str):
            return a + b
        return NOTHING
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        v = const_eval(e.operand, env)
        return NOTHING if v is NOTHING else not v
    if isinstance(e, ast.BoolOp):
        vals = [const_eval(v, env) for v in e.values]
        if any(v is NOTHING for v in vals):
            return NOTHING
        return all(vals) if isinstance(e.op, ast.And) else any(vals)
    if isinstance(e, ast.Compare) and len(e.ops) == 1:
        a, b = const_eval(e.left, env), const_eval(e.comparators[0], env)
        if a is NOTHING or b is NOTHING:
            return NOTHING
        op = e.ops[0]
        try:
            if isinstance(op, ast.In):
                return a in b
            if isinstance(op, ast.NotIn):
                return a not in b
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
        except TypeError:
            return NOTHING
        return NOTHING
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.keywords:
        base = const_eval(e.func.value, env)
        args = [const_eval(a, env) for a in e.args]
        if isinstance(base, str) and not any(a is NOTHING for a in args):
            if (
                e.func.attr in ("startswith", "endswith")
                and len(args) == 1
                and isinstance(args[0], (str, tuple))
            ):
                return getattr(base, e.func.attr)(args[0])
            if e.func.attr in ("lower", "upper", "strip") and not args:
                return getattr(base, e.func.attr)()
    return NOTHING


def _is_none(e: ast.AST | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is None


def _is_const(e: ast.AST, value) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is type(value) and e.value == value


def _is_str_seq(e: ast.AST) -> bool:
    return (
        isinstance(e, (ast.List, ast.Tuple, ast.Set))
        and bool(e.elts)
        and all(const_str(x) is not None for x in e.elts)
    )


def _endswith_mode(e: ast.AST) -> bool:
    if isinstance(e, ast.Name):
        return e.id.lower().endswith("mode")
    if isinstance(e, ast.Attribute):
        return e.attr.lower().endswith("mode")
    return False


def _mentions(e: ast.AST, hints) -> bool:
    for node in ast.walk(e):
        name = (
            node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        )
        if name and any(h.lower() in name.lower() for h in hints):
            return True
    return False


def _value_kind(value: ast.AST | None) -> str:
    if isinstance(value, ast.Lambda):
        return "lambda"
    if isinstance(value, (ast.DictComp, ast.ListComp)):
        return "comprehension"
    return "value"


def _short_value(site: DefSite) -> str:
    if site.value is None:
        return "…"
    if isinstance(site.value, ast.Lambda):
        params = ", ".join(a.arg for a in site.value.args.args)
        return f"lambda {params}: …"
    return site.func.file.segment(site.value, 50)


def _unique(items: list[FuncInfo]) -> list[FuncInfo]:
    seen, out = set(), []
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            out.append(item)
    return out


def resolve_default_config(module_path: Path) -> Path | None:
    candidate = module_path.parent / "model_config.py"
    return candidate if candidate.is_file() else None
