"""Three-valued evaluation of branch tests under topology / mode assumptions (shared by the engine, which compiles
the tests into fact trees, and by the functions over a finished or loaded ``Analysis``)."""

from __future__ import annotations

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


def eval_tree(tree: Any, assume: dict[str, object]) -> bool | None:
    """True / False / None (undecided) for a fact tree under {"mode": ..., "galaxy": ...}."""
    if tree is None:
        return None
    kind = tree[0]
    if kind == "const":
        return tree[1]
    if kind == "not":
        value = eval_tree(tree[1], assume)
        return None if value is None else not value
    if kind in ("and", "or"):
        values = [eval_tree(t, assume) for t in tree[1]]
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


def tree_facts(tree: Any) -> list[tuple[str, bool]]:
    """The facts a tree tests, each with the value that makes that leaf true (``("galaxy", False)`` for
    ``not args.is_galaxy``), in source order."""
    out: list[tuple[str, bool]] = []

    def walk(node: Any, positive: bool) -> None:
        if node is None or node[0] == "const":
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
    if isinstance(tree, (tuple, list)):
        return [as_lists(x) for x in tree]
    return tree
