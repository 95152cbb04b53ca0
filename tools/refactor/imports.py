"""Where a name the generated code needs comes from, found as Python would find it, without running anything.

TTTv1 code imports helpers and constants from files the analysis never read (``num_to_corerange`` from
``model_config.py``, ``nearest_32`` from a utilities module, ``OpGroup`` / ``TensorGroup``, a collective from
another demo's ``*_ccl.py``, an installed package). :func:`resolve_module` looks a dotted module up the way the
import system would from the user's project: first under the first-party root (the folder above the input's top
package, where ``python -m pytest`` run from the repository finds it), then through
``importlib.util.find_spec`` for the top-level package (which finds a package without importing it), then
down its ``submodule_search_locations``. What it finds decides what the generated module does with the name
(:class:`tools.refactor.helpers.HelperCopier`):

* a function or a constant of a first-party file: copied, with what it needs (each copy says where it came from);
* a class of a first-party file (an ``Enum`` such as ``TensorGroup``): imported from that module, so that the
  values TTTv1's own objects hold (``args.decoders_optimizations``) are the same members the generated code
  compares with;
* anything of an installed package or the standard library: imported (a stable symbol of an importable module);
* a module that resolves to nothing: a gap.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Resolved:
    """Where a dotted module is: a first-party source file, or an installed (or built-in) module."""

    module: str
    path: Path | None  # the source file of a first-party module (a package: its __init__.py)
    installed: bool  # found outside the first-party root (site-packages, the standard library)


def _in_folder(folder: Path, parts: list[str]) -> Path | None:
    """``a.b.c`` under ``folder``: ``a/b/c.py`` or ``a/b/c/__init__.py`` (namespace folders allowed on the way)."""
    base = folder.joinpath(*parts)
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def import_root(start: Path, top: str) -> Path | None:
    """The nearest folder at or above ``start`` that holds the top-level package or module ``top``: where
    running from the repository finds it, also when its folders have no ``__init__.py`` (namespace packages,
    as in a checkout of tt-metal's ``models/``)."""
    folder = start.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / top).is_dir() or (candidate / f"{top}.py").is_file():
            return candidate
    return None


def resolve_module(module: str, root: Path) -> Resolved | None:
    """``module`` (absolute, dotted) as the import system would find it from the project at ``root`` (the
    input's first-party root, or a folder above it that holds the module's top-level package); None when
    nothing provides it."""
    parts = module.split(".")
    if not all(parts):
        return None
    root = import_root(root, parts[0]) or root
    local = _in_folder(root, parts)
    if local is not None:
        return Resolved(module, local.resolve(), installed=False)
    if (root / parts[0]).is_dir() or (root / f"{parts[0]}.py").is_file():
        return None  # the project's own package, without that submodule: Python would not look further
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: finding it imports nothing
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if len(parts) == 1:
        return Resolved(module, None, installed=True)
    for location in spec.submodule_search_locations or []:
        folder = Path(location).joinpath(*parts[1:-1])
        if _in_folder(Path(location), parts[1:]) is not None or _extension(folder, parts[-1]):
            return Resolved(module, None, installed=True)
    return None


def _extension(folder: Path, name: str) -> bool:
    """A compiled submodule (``_C.cpython-311-x86_64-linux-gnu.so``)."""
    try:
        return any(p.name.startswith(name + ".") and p.suffix in (".so", ".pyd") for p in folder.iterdir())
    except OSError:
        return False


__all__ = ["Resolved", "import_root", "resolve_module"]
