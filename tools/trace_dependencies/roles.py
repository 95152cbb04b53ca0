"""Roles: what a name or expression stands for (ModelArgs, model_config, the mesh device, os.environ, ttnn, an
instance of an analysed class, ...), through aliases, attributes and parameters."""

from __future__ import annotations

import ast

from . import constants as C
from .astutil import (
    is_none,
    unparse,
)
from .ids import (
    ARGS,
    ENVIRON,
    GETENV,
    HFCFG,
    MC,
    MESH,
    OS,
    RoleKind,
    Scope,
    self_role,
    ttnn_role,
)
from .index import ClassInfo
from .scan import FuncInfo
from .state import Part


class Roles(Part):
    """Resolving the role (ids.Role) of names and expressions."""

    def role(self, e: ast.AST, info: FuncInfo, depth: int = 0):
        if depth > C.ROLE_DEPTH:
            self.cut("name resolution", e, info, C.ROLE_DEPTH)
            return None
        kind = type(e)
        if kind is ast.Name:
            return self.role_name(e.id, info, depth)
        if kind is ast.Attribute:
            cached = self.cache.attr_roles.get(id(e))
            if cached is not None and cached[0] is e and cached[1] is info:
                return cached[2]
            result = self._role_attribute(e, info, depth)
            self.cache.attr_roles[id(e)] = (e, info, result)
            return result
        return self._role_other(e, info, depth)

    def _role_attribute(self, e: ast.Attribute, info: FuncInfo, depth: int):
        base = self.role(e.value, info, depth + 1)
        if base is None:
            return None
        kind = base.kind
        if kind is RoleKind.ARGS:
            if e.attr == "model_config":
                return MC
            if e.attr in C.MESH_NAMES:
                return MESH
            if e.attr == "hf_config":
                return HFCFG
            return None
        if kind is RoleKind.SELF:
            return self.self_attr_role(base.cls, e.attr, depth)
        if kind is RoleKind.TTNN:
            return ttnn_role(f"{base.path}.{e.attr}")
        if kind is RoleKind.OS and e.attr == "environ":
            return ENVIRON
        if kind is RoleKind.OS and e.attr == "getenv":
            return GETENV
        return None

    def _role_other(self, e: ast.AST, info: FuncInfo, depth: int):
        if isinstance(e, ast.Call):
            func = e.func
            if (
                isinstance(func, ast.Name)
                and info.file is self.st.config
                and func.id in self.config_builders()
                and self.lookup(func.id, info)[0] is Scope.FUNCTION
            ):
                return MC  # model_config = get_decode_model_config(...)
            if isinstance(func, ast.Attribute):
                base = self.role(func.value, info, depth + 1)
                if base is ARGS and func.attr == "get_model_config":
                    return MC
                if base is HFCFG and func.attr in ("get", "to_dict", "copy"):
                    return HFCFG
                if base is ENVIRON and func.attr == "copy":
                    return ENVIRON
            return None
        if isinstance(e, ast.IfExp):
            a = self.role(e.body, info, depth + 1)
            b = self.role(e.orelse, info, depth + 1)
            if a == b or (b is None and is_none(e.orelse)):
                return a
            if a is None and is_none(e.body):
                return b
            return None
        if isinstance(e, ast.BoolOp):
            for value in e.values:
                r = self.role(value, info, depth + 1)
                if r is not None:
                    return r
            return None
        if isinstance(e, ast.Subscript):
            return HFCFG if self.role(e.value, info, depth + 1) is HFCFG else None
        return None

    def role_name(self, name: str, info: FuncInfo, depth: int = 0):
        key = (info.id, name)
        if key in self.cache.name_roles:
            return self.cache.name_roles[key]
        if key in self.cache.roles_active:
            return None
        self.cache.roles_active.add(key)
        try:
            result = self._role_name(name, info, depth)
        finally:
            self.cache.roles_active.discard(key)
        self.cache.name_roles[key] = result
        return result

    def _role_name(self, name: str, info: FuncInfo, depth: int):
        kind, owner = self.lookup(name, info)
        in_config = info.file is self.st.config
        if kind is Scope.PARAM:
            if name == owner.self_name and owner.self_name:
                if self.is_config_class(owner.cls):
                    return ARGS
                return self_role(self.self_class(owner.cls)) if owner.cls is not None else None
            ann = owner.annotations.get(name)
            if ann is not None and unparse(ann).split(".")[-1].strip("'\"") == "ModelArgs":
                return ARGS
            bound = self.out.param_roles.get((owner.id, name))
            if bound is not None:
                return bound
            named = _role_by_name(name, in_config)
            self.out.role_misses[(owner.id, name)] = named
            return named
        if kind is Scope.LOCAL:
            if name in self.builder_dict_names(owner):
                return MC  # the dict a config function fills and returns
            roles = set()
            for site in owner.assigns[name]:
                if site.kind == "import":
                    continue
                if site.value is None:
                    return None
                if is_none(site.value):
                    continue
                roles.add(self.role(site.value, owner, depth + 1))
            if len(roles) == 1:
                return roles.pop()
            return None
        if kind is Scope.IMPORT:
            module, attr, _level = info.file.imports[name]
            parts = [p for p in module.split(".") if p] + ([attr] if attr else [])
            if "ttnn" in parts:
                return ttnn_role(".".join(parts[parts.index("ttnn") :]))
            if parts == ["os"]:
                return OS
            if parts == ["os", "environ"]:
                return ENVIRON
            if parts == ["os", "getenv"]:
                return GETENV
            return None
        if kind is Scope.GLOBAL:
            roles = set()
            for stmt in owner.globals[name]:
                value = getattr(stmt, "value", None)
                if value is None:
                    return None
                roles.add(self.role(value, info, depth + 1))
            return roles.pop() if len(roles) == 1 else None
        if kind is Scope.BUILTIN and in_config and "config" in name.lower() and name != "model_config":
            return None
        return None

    def self_class(self, cls: ClassInfo) -> ClassInfo:
        """The class ``self`` is an instance of in a method defined by ``cls``: the analysed class when ``cls`` is
        one of its bases (``--class Child`` running ``_Base.forward``: ``self._post`` is Child's override and
        ``self.args`` comes from Child's ``__init__``), else ``cls``."""
        consumer = self.st.consumer
        if cls is consumer or not any(k is cls for k in self.mro(consumer)):
            return cls
        return consumer

    def self_attr_role(self, cls: ClassInfo, attr: str, depth: int):
        roles = set()
        for info, site in self.self_sites(cls, attr):
            if site.value is None:
                return None
            if is_none(site.value):
                continue
            roles.add(self.role(site.value, info, depth + 1))
        if len(roles) == 1:
            return roles.pop()
        if not roles and attr in C.MC_NAMES:
            return MC
        return None


def _role_by_name(name: str, in_config: bool):
    """The role a parameter no call site has given one takes from its name alone."""
    if name in C.ARGS_NAMES:
        return ARGS
    if name in C.MESH_NAMES:
        return MESH
    if name in C.MC_NAMES:
        return MC
    if in_config and "config" in name.lower() and not name.startswith("model_config"):
        return HFCFG
    return None
