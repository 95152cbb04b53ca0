"""The default analysed class of a module: its main class (shared by trace-deps and tttv2-refactor).

Rule (docs/trace_deps.md, "Which class is analysed"): among the module's top-level classes that define an entry
method (``forward`` / ``__call__``) themselves, the main class is the one that no other class of the file uses, a
use being any mention of its name (a construction ``Foo(...)``, an annotation, an ``isinstance``) inside another
class's body or decorators; naming it as a base is not a use (``ScaledEmbedding(Embedding)`` is a variant of
``Embedding``, not its user). When exactly one class qualifies it is chosen; otherwise (none, or several unrelated
classes) the caller keeps its old rule, the first class in file order with an entry.
"""

from __future__ import annotations

import ast


def main_class(tree: ast.Module, entries: tuple[str, ...]) -> tuple[str | None, str]:
    """``(name, why)``: the main class of ``tree`` among the classes defining one of ``entries``, or ``None`` when
    the rule does not single one out. ``why`` completes "class X chosen: ..." (empty when at most one class has an
    entry: there was no choice to explain)."""
    classes = [s for s in tree.body if isinstance(s, ast.ClassDef)]
    with_entry = [c.name for c in classes if _defines(c, entries)]
    if len(with_entry) < 2:
        return None, ""
    # each class with an entry -> the classes of the file using it, in file order
    used: dict[str, dict[str, None]] = {name: {} for name in with_entry}
    for cls in classes:
        # a subclass is a variant of its base, not a user of it: the bases and keywords of its header are skipped
        for part in [*cls.decorator_list, *cls.body]:
            for node in ast.walk(part):
                if isinstance(node, ast.Name) and node.id in used and node.id != cls.name:
                    used[node.id].setdefault(cls.name)
    unused = [name for name in with_entry if not used[name]]
    listed = ", ".join(with_entry)
    if len(unused) == 1:
        others = "; ".join(f"{name} is used by {', '.join(users)}" for name, users in used.items() if users)
        why = f"the one class with an entry ({listed}) that no other class of the file uses ({others})"
        return unused[0], why
    if not unused:
        return (
            None,
            f"the first class with an entry: each class with an entry ({listed}) is used by another one",
        )
    return None, (
        f"the first class with an entry: {len(unused)} classes with an entry ({', '.join(unused)}) are used by no "
        "other class of the file, not exactly one"
    )


def _defines(cls: ast.ClassDef, entries: tuple[str, ...]) -> bool:
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in entries for s in cls.body)
