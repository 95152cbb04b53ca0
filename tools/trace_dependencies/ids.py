"""Typed roles of names and typed graph node ids (instead of tuples and strings sliced by position).

Graph nodes keep their stable string ids (``key:FF1_3_TG_PROGCFG``, ``def:model_config.py:33:8``: the JSON and the
goldens use them); :func:`node_id` builds one from a :class:`NodeKind` and :func:`parse_node` splits one back.
"""

from __future__ import annotations

from enum import Enum


class RoleKind(Enum):
    """What a name or expression stands for, as far as the analysis cares."""

    ARGS = "args"  # the ModelArgs object
    MC = "mc"  # the model_config dict
    MESH = "mesh"  # the mesh device
    OS = "os"  # the os module
    ENVIRON = "environ"  # os.environ (or a copy)
    GETENV = "getenv"  # os.getenv
    HFCFG = "hfcfg"  # a Hugging Face config dict
    SELF = "self"  # an instance of an analysed class (``cls`` says which)
    TTNN = "ttnn"  # ttnn or a member of it (``path`` is the dotted name, e.g. "ttnn.experimental")


_SINGLE: dict[RoleKind, Role] = {}  # the constants below, by kind (Role.__new__)


class Role:
    """What a name stands for (the model args, the config dict, the mesh, os, ...), with its class or path.
    Immutable and compared by value; a plain class rather than a frozen dataclass, whose generated methods are
    compiled at every start-up (its ``==``, hash and repr are the ones the dataclass had)."""

    __slots__ = ("cls", "kind", "path")

    def __new__(klass, kind: RoleKind, cls: object | None = None, path: str = "") -> Role:
        # a role without class or path is the one constant of its kind (ARGS, MC, MESH, ...): the engine compares
        # with those by identity (``role is MESH``), thousands of times a run, instead of calling __eq__
        if cls is None and not path:
            single = _SINGLE.get(kind)
            if single is not None:
                return single
        return object.__new__(klass)

    def __init__(self, kind: RoleKind, cls: object | None = None, path: str = "") -> None:
        _set = object.__setattr__
        _set(self, "kind", kind)
        _set(self, "cls", cls)  # ClassInfo for SELF
        _set(self, "path", path)  # dotted name for TTNN

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of an immutable Role")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of an immutable Role")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Role:
            return NotImplemented
        return (self.kind, self.cls, self.path) == (other.kind, other.cls, other.path)

    def __hash__(self) -> int:
        return hash((self.kind, self.cls, self.path))

    def __repr__(self) -> str:
        return f"Role(kind={self.kind!r}, cls={self.cls!r}, path={self.path!r})"

    def __reduce__(self):
        # copy, deepcopy and pickle rebuild through __new__, as the frozen dataclass did: a constant comes back as
        # itself (``role is MESH`` still holds)
        return (Role, (self.kind, self.cls, self.path))

    @property
    def last(self) -> str:
        """The last component of a TTNN path (``ttnn.experimental.all_gather_async`` -> ``all_gather_async``)."""
        return self.path.rsplit(".", 1)[-1]


ARGS = Role(RoleKind.ARGS)
MC = Role(RoleKind.MC)
MESH = Role(RoleKind.MESH)
OS = Role(RoleKind.OS)
ENVIRON = Role(RoleKind.ENVIRON)
GETENV = Role(RoleKind.GETENV)
HFCFG = Role(RoleKind.HFCFG)
_SINGLE.update((role.kind, role) for role in (ARGS, MC, MESH, OS, ENVIRON, GETENV, HFCFG))
#: Roles a parameter takes over from the argument a call site passes (``def helper(cfg): cfg["K"]``).
PASSED_ON = frozenset({ARGS, MC, MESH, ENVIRON, HFCFG})


def self_role(cls: object) -> Role:
    return Role(RoleKind.SELF, cls=cls)


def ttnn_role(path: str) -> Role:
    return Role(RoleKind.TTNN, path=path)


class Scope(Enum):
    """Where a name is bound, seen from a function (see ``Lookup.lookup``)."""

    LOCAL = "local"
    PARAM = "param"
    FUNCTION = "function"
    CLASS = "class"
    GLOBAL = "global"
    IMPORT = "import"
    BUILTIN = "builtin"


class NodeKind(Enum):
    """The prefix of a graph node id, i.e. what the node stands for."""

    HW = "hw"
    ENV = "env"
    HF = "hf"
    ARG = "arg"
    MODULE_ARG = "module"
    WEIGHTS = "weights"
    INPUT = "input"
    ATTR = "attr"
    METHOD = "method"
    KEY = "key"
    DEF = "def"
    ATTR_DEF = "attrdef"
    LOCAL = "local"
    PARAM = "param"
    SELF = "self"
    FUNC = "func"
    GLOBAL = "global"
    BRANCH = "branch"
    OP = "op"
    FACT = "fact"
    EXTERN = "extern"
    UNKNOWN = "unknown"


_BY_PREFIX = {kind.value: kind for kind in NodeKind}


class NodeRef:
    """A parsed node id: its kind and the rest (the key, the attribute, the location, ...). Immutable, compared by
    value (a plain class, as :class:`Role`)."""

    __slots__ = ("kind", "rest")

    def __init__(self, kind: NodeKind, rest: str) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "rest", rest)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of an immutable NodeRef")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of an immutable NodeRef")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not NodeRef:
            return NotImplemented
        return (self.kind, self.rest) == (other.kind, other.rest)

    def __hash__(self) -> int:
        return hash((self.kind, self.rest))

    def __repr__(self) -> str:
        return f"NodeRef(kind={self.kind!r}, rest={self.rest!r})"

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.rest}"

    def __reduce__(self):  # copy, deepcopy and pickle (slots and a refusing __setattr__ defeat the default)
        return (NodeRef, (self.kind, self.rest))


def node_id(kind: NodeKind, rest: str) -> str:
    # ``_value_`` (the member's plain attribute), not ``.value`` (a property: slow on the engine's hot paths)
    return f"{kind._value_}:{rest}"


def parse_node(nid: str) -> NodeRef | None:
    """``"key:K"`` -> ``NodeRef(NodeKind.KEY, "K")``; None for a string that is no node id."""
    prefix, sep, rest = nid.partition(":")
    kind = _BY_PREFIX.get(prefix)
    return NodeRef(kind, rest) if sep and kind is not None else None


def is_kind(nid: str, kind: NodeKind) -> bool:
    return nid.startswith(f"{kind._value_}:")


__all__ = [
    "ARGS",
    "ENVIRON",
    "GETENV",
    "HFCFG",
    "MC",
    "MESH",
    "OS",
    "PASSED_ON",
    "NodeKind",
    "NodeRef",
    "Role",
    "RoleKind",
    "Scope",
    "is_kind",
    "node_id",
    "parse_node",
    "self_role",
    "ttnn_role",
]
