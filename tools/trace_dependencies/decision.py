"""Three-valued evaluation of branch tests under topology / mode assumptions (shared by the engine, which compiles
the tests into fact trees, and by the functions over a finished or loaded ``Analysis``)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: about 5 ms of every trace-deps start-up
if TYPE_CHECKING:
    from typing import Any


TOPOLOGIES = ("1d", "2d")
MODES = ("decode", "prefill")


def assumption(topology: str | None = None, mode: str | None = None) -> dict[str, object]:
    """``{"mode": ..., "galaxy": ...}`` from the user-facing names (topology "1d" | "2d", mode "decode" | "prefill")."""
    if topology not in (None, *TOPOLOGIES):
        raise ValueError(f"topology: expected one of {', '.join(TOPOLOGIES)} or None, got {topology!r}")
    if mode not in (None, *MODES):
        raise ValueError(f"mode: expected one of {', '.join(MODES)} or None, got {mode!r}")
    return {"mode": mode, "galaxy": None if topology is None else topology == "2d"}


def eval_tree(tree: Any, assume: dict[str, object], binding: dict[str, Any] | None = None) -> bool | None:
    """True / False / None (undecided) for a fact tree under {"mode": ..., "galaxy": ...}; ``binding`` closes the
    tests on the function's parameters with what one call site passes (see :func:`close`)."""
    if tree is None:
        return None
    kind = tree[0]
    if kind == "const":
        return tree[1]
    if kind == "value":
        return bool(tree[1])
    if kind == "not":
        value = eval_tree(tree[1], assume, binding)
        return None if value is None else not value
    if kind in ("and", "or"):
        values = [eval_tree(t, assume, binding) for t in tree[1]]
        if kind == "and":
            if any(v is False for v in values):
                return False
            return True if all(v is True for v in values) else None
        if any(v is True for v in values):
            return True
        return False if all(v is False for v in values) else None
    if kind in ("param", "param_eq"):
        closed = close(tree, binding or {})
        return None if closed is None or closed[0] in ("param", "param_eq") else eval_tree(closed, assume)
    fact, pol = tree[1], tree[2]
    galaxy = assume.get("galaxy")
    value = None
    if fact == "galaxy" and galaxy is not None:
        value = bool(galaxy)
    elif fact.startswith("mode:") and assume.get("mode"):
        value = fact.removeprefix("mode:") == assume["mode"]
    elif fact == "mesh_1d" and galaxy is not None:
        value = not galaxy
    elif fact == "single_device" and galaxy:
        value = False
    if value is None:
        return None
    return value if pol > 0 else not value


def close(tree: Any, binding: dict[str, Any]) -> Any:
    """``tree`` with its parameter tests replaced by what ``binding`` (parameter -> tree) says; a parameter the
    binding does not know makes its test unknown (None)."""
    if tree is None:
        return None
    kind = tree[0]
    if kind == "param":
        bound = binding.get(tree[1])
        if bound is None:
            return None
        return bound if tree[2] > 0 else ["not", bound]
    if kind == "param_eq":
        bound = binding.get(tree[1])
        if bound is None or bound[0] != "value":
            return None
        equal = bound[1] == tree[2]
        return ["const", equal if tree[3] > 0 else not equal]
    if kind == "not":
        inner = close(tree[1], binding)
        return None if inner is None else ["not", inner]
    if kind in ("and", "or"):
        return [kind, [close(t, binding) for t in tree[1]]]
    return tree


def tree_facts(tree: Any) -> list[tuple[str, bool]]:
    """The facts a tree tests, each with the value that makes that leaf true (``("galaxy", False)`` for
    ``not args.is_galaxy``), in source order."""
    out: list[tuple[str, bool]] = []

    def walk(node: Any, positive: bool) -> None:
        if node is None or node[0] in ("const", "value", "param", "param_eq"):
            return
        if node[0] == "not":
            walk(node[1], not positive)
        elif node[0] in ("and", "or"):
            for child in node[1]:
                walk(child, positive)
        else:
            out.append((node[1], (node[2] > 0) == positive))

    walk(tree, True)
    return out


def as_lists(tree: Any) -> Any:
    """A fact tree with tuples turned into lists (its JSON form, so a loaded analysis compares equal)."""
    if isinstance(tree, dict):
        return {k: as_lists(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return [as_lists(x) for x in tree]
    return tree
