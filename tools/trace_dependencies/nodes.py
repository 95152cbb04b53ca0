"""Graph nodes and edges: one constructor per node kind (each node id is stable and typed by its prefix, see
ids.py); nodes with a payload are queued for expansion (expand.py)."""

from __future__ import annotations

import ast

from . import constants as C
from .astutil import (
    NOTHING,
)
from .flow import PARAM
from .ids import NodeKind, node_id
from .index import ClassInfo
from .scan import FuncInfo, Guards
from .source import SourceFile
from .state import Part


class Nodes(Part):
    """Creating graph nodes (queued for expansion when they have a payload) and edges."""

    def node(self, nid: str, category: str, label: str, loc: str | None = None, payload=None, **attrs) -> str:
        if nid not in self.out.g:
            self.out.g.add_node(nid, category=category, label=label, loc=loc, **attrs)
            if payload is not None:
                self.work.payload[nid] = payload
                self.work.pending.append(nid)
        return nid

    def edge(self, u: str, v: str, kind: str, loc: str | None = None) -> None:
        if u != v:
            self.out.g.add_edge_once(u, v, kind, loc)

    def hw(self, name: str) -> str:
        return self.node(node_id(NodeKind.HW, name), "hardware", C.HW_LABELS.get(name, f"hardware: {name}"))

    def env(self, name: str, loc: str | None) -> str:
        return self.node(f"env:{name}", "env", f"env {name}", loc)

    def hf(self, name: str, loc: str | None) -> str:
        return self.node(f"hf:{name}", "model", f"HF config {name}", loc)

    def unknown(self, slug: str, reason: str, loc: str | None) -> str:
        return self.node(f"unknown:{slug}", "unknown", f"unknown: {reason}", loc, reason=reason)

    def extern(self, qualified: str, loc: str | None) -> str:
        return self.node(f"extern:{qualified}", "extern", f"{qualified}() (not analysed)", loc)

    def key_node(self, key: str, loc: str | None = None) -> str:
        return self.node(
            node_id(NodeKind.KEY, key), "key", f'model_config["{key}"]', None, payload=(NodeKind.KEY, key)
        )

    def attr_node(self, name: str) -> str:
        return self.node(
            node_id(NodeKind.ATTR, name), "attr", f"args.{name}", None, payload=(NodeKind.ATTR, name)
        )

    def method_node(self, name: str) -> str:
        return self.node(
            node_id(NodeKind.METHOD, name), "method", f"args.{name}()", None, payload=(NodeKind.METHOD, name)
        )

    def func_node(self, info: FuncInfo) -> str:
        if info.parent is None and self.is_config_class(info.cls):
            return self.method_node(info.name)
        label = f"{info.qualname}()"
        return self.node(f"func:{info.id}", "function", label, info.loc(), payload=(NodeKind.FUNC, info))

    def local_node(self, info: FuncInfo, name: str) -> str:
        sites = info.assigns[name]
        loc = f"{info.file.name}:{sites[0].line}:{sites[0].col}"
        return self.node(
            node_id(NodeKind.LOCAL, f"{info.id}:{name}"),
            "local",
            f"{name} ({info.qualname})",
            loc,
            payload=(NodeKind.LOCAL, info, name),
        )

    def local_uses(self, e: ast.AST, info: FuncInfo, owner: FuncInfo) -> list[str]:
        """The nodes a use of a local depends on: one node per assignment that reaches it (flow-sensitive), the
        parameter for its value on entry; the local's single node when every assignment reaches it anyway."""
        name = e.id if isinstance(e, ast.Name) else e.target.id
        sites = owner.assigns[name]
        if len(sites) == 1 and name not in owner.params:
            return [self.local_node(owner, name)]  # one assignment: nothing to tell apart
        reach = self.reaching_sites(e, info, owner)
        if reach is None:
            return [self.local_node(owner, name)]
        out = []
        for site in reach:
            if site is PARAM:
                nid = self.param_node(owner, name)
                if nid is not None:
                    out.append(nid)
            else:
                out.append(self.local_version_node(owner, name, site))
        return out

    def local_version_node(self, info: FuncInfo, name: str, site) -> str:
        """One assignment of a local (``local:...:x@12:8``): what a use reached only by it depends on."""
        return self.node(
            node_id(NodeKind.LOCAL, f"{info.id}:{name}@{site.line}:{site.col}"),
            "local",
            f"{name} ({info.qualname}, line {site.line})",
            f"{info.file.name}:{site.line}:{site.col}",
            payload=(NodeKind.LOCAL, info, name, site),
        )

    def param_node(self, info: FuncInfo, name: str) -> str | None:
        key = (info.id, name)
        mapped = self.out.entry_params.get(key, NOTHING)
        if mapped is not NOTHING:
            return mapped
        made = self.cache.param_nodes.get(key)
        if made is not None:  # made already in this run (the same inputs give the same node)
            return made
        nid = self._make_param_node(info, name)
        self.cache.param_nodes[key] = nid
        return nid

    def _make_param_node(self, info: FuncInfo, name: str) -> str:
        if info.parent is None and info.name == "__init__" and self.is_config_class(info.cls):
            return self.node(
                f"arg:{name}", "model_arg", f"{name} (ModelArgs constructor argument)", info.loc()
            )
        if info.file is self.st.config and info in self.entry_builders():
            return self.config_function_root(info, name)
        category = "param"
        label = f"{name} (param of {info.qualname})"
        if isinstance(info.node, ast.Lambda) and info.file is self.st.config:
            category = "input"
            label = f"{name} (lambda param, {info.qualname.rsplit('.', 1)[0]})"
        if name in C.MODE_NAMES:
            label = f"{name} (param of {info.qualname}; the mode)"
        nid = self.node(
            f"param:{info.id}:{name}", category, label, info.loc(), payload=(NodeKind.PARAM, info, name)
        )
        if name in info.defaults or name in (info.vararg, info.kwarg):
            self.out.g.nodes[nid]["bound"] = True
        if self.is_mode_param(info, name):
            self.out.g.nodes[nid]["mode_param"] = True
        return nid

    def config_function_root(self, info: FuncInfo, name: str) -> str:
        """A parameter of a config function nothing else calls (``get_model_config(model_config_str, llm_mode,
        input_shape, num_devices)``) is a root: the device count is hardware, ``llm_mode`` the mode, shapes are
        per-call inputs, anything else is a config argument (static, like a ModelArgs constructor argument)."""
        if name in C.DEVICE_COUNT_NAMES:
            return self.hw("num_devices")
        if self.is_mode_param(info, name):
            return self.node("input:mode", "mode", "mode (per-call: decode / prefill)", info.loc())
        if name in C.SHAPE_NAMES:
            return self.node(f"input:{name}", "input", f"{name} (per-call input shape)", info.loc())
        return self.node(f"arg:{name}", "model_arg", f"{name} ({info.name}() argument)", info.loc())

    def self_attr_node(self, cls: ClassInfo, name: str) -> str | None:
        sites = self.self_sites(cls, name)
        if not sites:
            return None
        info, site = sites[0]
        loc = f"{info.file.name}:{site.line}:{site.col}"
        nid = node_id(NodeKind.SELF, f"{cls.file.name}:{cls.name}.{name}")
        return self.node(
            nid, "self_attr", f"self.{name} ({cls.name})", loc, payload=(NodeKind.SELF, cls, name)
        )

    def self_sites(self, cls: ClassInfo, name: str) -> list:
        key = (id(cls), name)
        cached = self.cache.self_sites.get(key)
        if cached is not None:
            return cached
        out = self._self_sites(cls, name)
        self.cache.self_sites[key] = out
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
        nid = node_id(NodeKind.BRANCH, bid)
        if nid in self.out.g:
            return nid
        site, info = self.out.branch_index[bid]
        return self.node(
            nid,
            "branch",
            f"{site.construct} {info.file.segment(site.test_node, 60)}",
            bid,
            payload=(NodeKind.BRANCH, site, info),
        )

    def global_node(self, source: SourceFile, name: str) -> str:
        stmts = self.index(source).globals[name]
        loc = source.loc(stmts[0])
        return self.node(
            node_id(NodeKind.GLOBAL, f"{source.name}:{name}"),
            "global",
            f"{name} (module {source.name})",
            loc,
            payload=(NodeKind.GLOBAL, source, name),
        )

    def guard_edges(self, target: str, guards: Guards, innermost_only: bool = True) -> None:
        real = [g for g in guards if g[0] in self.out.branch_index]
        chosen = real[-1:] if innermost_only else real
        for bid, _arm in chosen:
            self.edge(self.branch_node(bid), target, "controls")

    def fact_node(self, name: str) -> str:
        labels = {"galaxy": "topology: galaxy (num_devices == 32, 2D mesh)"}
        nid = self.node(node_id(NodeKind.FACT, name), "fact", labels.get(name, name))
        if name == "galaxy":
            self.edge(self.hw("num_devices"), nid, "data")
        return nid
