"""The orchestrator: builds the dependency graph for one module + config from the engine's parts.

Each part is one responsibility over the shared :class:`~.state.State` (see the code map in docs/trace_deps.md):
lookup.py (files, classes, names), nodes.py (graph nodes), roles.py (what names stand for), deps.py (expression
dependencies), binding.py (callees, argument binding, function values), compose.py (config definitions),
expand.py (the worklist), facts.py (topology/mode facts, three-valued evaluation), visit.py (reads, ops and
callees of each visited function). This file wires them together and runs pass 2 from the entry points.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable
from pathlib import Path

from . import constants as C
from .binding import Binding, RolesChanged
from .compose import Composition
from .deps import Dependencies
from .errors import TraceError
from .expand import Expansion
from .facts import Facts
from .index import ClassInfo
from .lookup import Lookup
from .mainclass import main_class
from .module_state import mark_module_state
from .nodes import Nodes
from .roles import Roles
from .scan import FuncInfo
from .source import Project, SourceFile
from .state import Caches, CallEdge, Results, State, Worklist
from .visit import Visitor


class Engine(Lookup, Nodes, Roles, Dependencies, Binding, Composition, Expansion, Facts, Visitor):
    """Builds the dependency graph for one module + config (``run()``); ``graphing.build`` turns it into an
    ``Analysis``."""

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
        self.st = State(project, module, config, entry, follow_helpers, progress or (lambda _msg: None))
        self.cache, self.work, self.out = self.st.cache, self.st.work, self.st.out
        self.st.mindex = self.index(module)
        self.st.cindex = self.index(config) if config is not None else None
        self.st.consumer, self.st.entry = self._find_consumer(class_name, entry)
        self.st.config_chain = self._find_config_class()
        self.st.config_class = self.st.config_chain[0] if self.st.config_chain else None

    def _find_consumer(self, class_name: str | None, entry: str | None) -> tuple[ClassInfo, str]:
        """The analysed class and its per-call entry: ``entry`` if given, else ``forward``, else ``__call__``. Without
        ``class_name``, the module's main class (mainclass.py), else the first class with an entry; the choice
        among several is explained in ``st.class_choice``."""
        classes = self.st.mindex.classes
        entries = (entry,) if entry else C.ENTRY_METHODS
        if class_name:
            if class_name not in classes:
                found = ", ".join(sorted(classes)) or "none"
                raise TraceError(
                    f"no class {class_name!r} (classes: {found})", where=f"{self.st.module.name}:1"
                )
            cls = classes[class_name]
            for name in entries:
                if self.method_info(cls, name) is not None:
                    return cls, name
            self._refuse_assigned_entry(cls, entries)
            raise TraceError(
                f"class {class_name} has no {' or '.join(f'{e}()' for e in entries)} method",
                where=cls.loc(),
                hint="use --entry METHOD",
            )
        main, why = main_class(self.st.module.tree, entries)
        if main is not None:
            cls = classes[main]
            name = next(e for e in entries if e in cls.methods)
            self.st.class_choice = f"class {main} chosen: {why}"
            return cls, name
        for name in entries:
            for cls in classes.values():
                if name in cls.methods:
                    if why:
                        self.st.class_choice = f"class {cls.name} chosen: {why}"
                    return cls, name
            for cls in classes.values():
                if self.method_info(cls, name) is not None:
                    return cls, name
        listed = ", ".join(f"{c.name} (line {c.node.lineno})" for c in classes.values()) or "none"
        wanted = " or ".join(f"{e}()" for e in entries)
        for cls in classes.values():
            self._refuse_assigned_entry(cls, entries)
        raise TraceError(
            f"no class with a {wanted} method; nothing to trace (classes: {listed})",
            where=f"{self.st.module.name}:1",
            hint="name the class as MODULE:CLASS and/or pass --entry METHOD",
        )

    def _refuse_assigned_entry(self, cls: ClassInfo, entries: tuple[str, ...]) -> None:
        """A clear error for ``forward = _fwd`` / ``forward = lambda self, x, mode: ...`` in the class body (an entry
        bound by assignment, which is not followed), rather than "no forward()"."""
        for name in entries:
            stmt = cls.class_attrs.get(name)
            if stmt is not None:
                raise TraceError(
                    f"class {cls.name}: {name} is assigned ({cls.file.segment(stmt, 60)}), not defined with def: "
                    "not supported",
                    where=cls.file.loc(stmt),
                    hint=f"define {name} with def, or name another class as MODULE:CLASS and/or pass --entry METHOD",
                )

    def _find_config_class(self) -> list[ClassInfo]:
        if self.st.cindex is None:
            return []
        classes = self.st.cindex.classes
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

    def run(self) -> None:
        """Pass 2 until the parameter roles are stable. Functions are visited and graph nodes expanded once, and
        their results cached (visit.py's call_deps), so a parameter that gains a role (binding.py) after the
        analysis used it without one leaves stale results that depend on the order of discovery: such a run stops
        there and is redone with every role bound so far known from the start. Each redo knows one more role, so
        this ends."""
        while True:
            try:
                self._run_once()
                return
            except RolesChanged:
                pass
            learned = dict(self.out.param_roles)
            cache = Caches()
            for name in _ROLE_FREE_CACHES:  # what only reads the source: keep it
                setattr(cache, name, getattr(self.cache, name))
            self.st.cache, self.st.work, self.st.out = cache, Worklist(), Results()
            self.cache, self.work, self.out = self.st.cache, self.st.work, self.st.out
            self.out.param_roles.update(learned)

    def _run_once(self) -> None:
        cls = self.st.consumer
        init = self.method_info(cls, "__init__")
        entry = self.method_info(cls, self.st.entry)
        if init is not None:
            self._set_entry_params(init, construction=True)
        self._set_entry_params(entry, construction=False)
        self.out.entry_ids = [info.id for info in (init, entry) if info is not None]
        queue: deque[tuple[FuncInfo, str, tuple[str, ...]]] = deque()
        if init is not None:
            queue.append((init, "construction", ()))
        queue.append((entry, "forward", ()))
        self.st.progress(f"scanning {self.st.module.name}")
        while queue:
            info, phase, via = queue.popleft()
            phases = self.out.scanned.setdefault(info.id, set())
            if phase in phases:
                continue
            first = not phases
            phases.add(phase)
            self.out.scan_via.setdefault(info.id, via)
            try:
                callees = self._visit(info, phase, via, first)
            except RecursionError:
                self.skip(info.loc(), info.qualname, "expression nested too deeply to analyse", "warning")
                continue
            for callee, guards, loc, call in callees:
                args = self.arg_trees(callee, call, info) if callee.params else {}
                self.out.call_edges.append(CallEdge(info.id, callee.id, guards, loc, args))
                if self.st.follow_helpers or callee.file is self.st.module:
                    queue.append((callee, phase, (*via, callee.qualname)))
            self.expand_all()
        self.resolve_deferred_reads()
        self.expand_all()
        mark_module_state(self)

    def _set_entry_params(self, info: FuncInfo, construction: bool) -> None:
        for name in [*info.params, *(n for n in (info.vararg, info.kwarg) if n)]:
            if name == info.self_name:
                continue
            key = (info.id, name)
            role = self.role_name(name, info)
            if role is not None:
                self.out.entry_params[key] = None
                continue
            if construction:
                if name in C.WEIGHT_NAMES:
                    self.out.entry_params[key] = self.node(
                        "weights:state_dict", "weights", "weights (state_dict contents)", info.loc()
                    )
                else:
                    cat = "module_arg"
                    label = f"{name} ({self.st.consumer.name} constructor argument)"
                    self.out.entry_params[key] = self.node(f"module:{name}", cat, label, info.loc())
            elif self.is_mode_param(info, name):
                self.out.entry_params[key] = self.node(
                    "input:mode", "mode", "mode (per-call: decode / prefill)", info.loc()
                )
            else:
                self.out.entry_params[key] = self.node(
                    f"input:{name}", "input", f"{name} ({self.st.entry}() input)", info.loc()
                )


# Caches (state.py) computed from the source alone, never from a role nor registering anything in Results: still
# valid when a run is redone
_ROLE_FREE_CACHES = ("mro", "constants", "expr_loops", "reaching", "local_mutations", "filled_names")


def resolve_default_config(module_path: Path) -> Path | None:
    """The ``model_config.py`` next to the module, if there is one."""
    candidate = module_path.parent / "model_config.py"
    return candidate if candidate.is_file() else None
