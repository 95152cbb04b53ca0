"""Graph nodes and edges: one constructor per node kind (each node id is stable and typed by its prefix, see
ids.py); nodes with a payload are queued for expansion (expand.py)."""

from __future__ import annotations

import ast

from . import constants as C
from .astutil import (
    NOTHING,
)
from .ids import (
    NodeKind,
)
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
        if u != v and not self.out.g.has_edge(u, v):
            self.out.g.add_edge(u, v, kind=kind, loc=loc)

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
        return self.node(f"key:{key}", "key", f'model_config["{key}"]', None, payload=(NodeKind.KEY, key))

    def attr_node(self, name: str) -> str:
        return self.node(f"attr:{name}", "attr", f"args.{name}", None, payload=(NodeKind.ATTR, name))

    def method_node(self, name: str) -> str:
        return self.node(f"method:{name}", "method", f"args.{name}()", None, payload=(NodeKind.METHOD, name))

    def func_node(self, info: FuncInfo) -> str:
        if info.parent is None and self.is_config_class(info.cls):
            return self.method_node(info.name)
        label = f"{info.qualname}()"
        return self.node(f"func:{info.id}", "function", label, info.loc(), payload=(NodeKind.FUNC, info))

    def local_node(self, info: FuncInfo, name: str) -> str:
        sites = info.assigns[name]
        loc = f"{info.file.name}:{sites[0].line}:{sites[0].col}"
        return self.node(
            f"local:{info.id}:{name}",
            "local",
            f"{name} ({info.qualname})",
            loc,
            payload=(NodeKind.LOCAL, info, name),
        )

    def param_node(self, info: FuncInfo, name: str) -> str | None:
        mapped = self.out.entry_params.get((info.id, name), NOTHING)
        if mapped is not NOTHING:
            return mapped
        if info.parent is None and info.name == "__init__" and self.is_config_class(info.cls):
            return self.node(
                f"arg:{name}", "model_arg", f"{name} (ModelArgs constructor argument)", info.loc()
            )
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

    def self_attr_node(self, cls: ClassInfo, name: str) -> str | None:
        sites = self.self_sites(cls, name)
        if not sites:
            return None
        info, site = sites[0]
        loc = f"{info.file.name}:{site.line}:{site.col}"
        nid = f"self:{cls.file.name}:{cls.name}.{name}"
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
        nid = f"branch:{bid}"
        if nid in self.out.g:
            return nid
        site, info = self.out.branch_index[bid]
        return self.node(
            f"branch:{bid}",
            "branch",
            f"{site.construct} {info.file.segment(site.test_node, 60)}",
            bid,
            payload=(NodeKind.BRANCH, site, info),
        )

    def global_node(self, source: SourceFile, name: str) -> str:
        stmts = self.index(source).globals[name]
        loc = source.loc(stmts[0])
        return self.node(
            f"global:{source.name}:{name}",
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
        nid = self.node(f"fact:{name}", "fact", labels.get(name, name))
        if name == "galaxy":
            self.edge(self.hw("num_devices"), nid, "data")
        return nid
