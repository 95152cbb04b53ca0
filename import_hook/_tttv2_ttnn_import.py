"""``import ttnn`` in every interpreter of an environment where tttv2 is installed.

Installed as a top-level module with ``tttv2_ttnn_import.pth``, which calls :func:`install` when the
interpreter starts. Nothing of tttv2 (or numpy) is imported until ``ttnn`` itself is.

PYTEST_DONT_REWRITE: the .pth imports this module before pytest starts, and pytest marks every top-level module
of a distribution that provides a plugin (tttv2's ``tttv2_ttnn``) for assertion rewriting; without this marker
every pytest run in an environment with tttv2 installed printed a ``PytestAssertRewriteWarning`` about it.

Who provides ``ttnn`` (``TTTV2_BACKEND``, read at each import of ``ttnn``, spaces and case ignored):

* unset: Tenstorrent's real ``ttnn`` wherever it is importable (any ``sys.path`` entry, any other finder),
  else the emulator ``tttv2.ttnn``. The deciding finder sits at the *end* of ``sys.meta_path``, so it is only
  asked after every other finder has found nothing;
* ``emulator``: the emulator, even where the real package is installed;
* ``ttnn``: only the real package (``import ttnn`` fails with a clear message where it is missing).

A namespace package named ``ttnn`` (a folder without ``__init__.py``, e.g. an empty ``ttnn/`` in the
working directory) is not Tenstorrent's ttnn, which is a regular package: Python would import it as an
empty module without ``open_mesh_device``. The front finder asks the other finders first and, when all they
find is such a folder, answers with the emulator (unset) or a clear error (``ttnn``).

When ``ttnn`` is the emulator, its submodules (``ttnn.experimental``, ``ttnn.transformer``, ``ttnn.device``,
``ttnn._ttnn.tensor``, …) are the emulator's own module objects: a second finder at the *front* of
``sys.meta_path`` answers for them, before the path finder could load ``tttv2/ttnn/*.py`` a second time under
a ``ttnn.`` name. Either way ``sys.modules["ttnn"] is sys.modules["tttv2.ttnn"]``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["TtnnFinder", "install"]

EMULATOR = "tttv2.ttnn"
ENV_VAR = "TTTV2_BACKEND"
_BACKENDS = ("emulator", "ttnn")


def backend() -> str | None:
    """``"emulator"``, ``"ttnn"`` or None (unset: the real package if importable, else the emulator)."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if not raw:
        return None
    if raw not in _BACKENDS:
        raise ImportError(f"{ENV_VAR} must be 'emulator' or 'ttnn', got {raw!r}")
    return raw


def _is_emulator(module: object) -> bool:
    return getattr(module, "IS_TTTV2_EMULATOR", False) is True


class _AliasLoader:
    """Loads ``ttnn[.x]`` as the already existing module ``tttv2.ttnn[.x]`` (the same object, not a copy).

    The import system creates a placeholder module; ``exec_module`` puts the target in its place in
    ``sys.modules``, which the import system then returns (the documented way for a module to replace itself).
    """

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        import importlib

        sys.modules[module.__name__] = importlib.import_module(self.target)


class TtnnFinder:
    """Meta-path finder for ``ttnn`` and its submodules; see the module docstring. ``at_end`` tells the copy
    that decides for the top-level ``ttnn`` (at the end of the meta path) from the one at the front."""

    def __init__(self, at_end: bool) -> None:
        self.at_end = at_end

    def __repr__(self) -> str:
        return f"TtnnFinder(at_end={self.at_end})"

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname == "ttnn":
            return self._find_top_level()
        if not fullname.startswith("ttnn.") or self.at_end:
            return None
        if not _is_emulator(sys.modules.get("ttnn")):
            return None  # the real package's submodules are its own business
        return self._alias(fullname, EMULATOR + fullname[len("ttnn") :])

    def _find_top_level(self):
        chosen = backend()
        if chosen != "emulator" and not self.at_end:
            folders = _namespace_only("ttnn")
            if folders and chosen == "ttnn":
                raise ModuleNotFoundError(
                    f"No module named 'ttnn': {ENV_VAR}=ttnn asks for Tenstorrent's real ttnn package, but "
                    f"'ttnn' is only a namespace package (a folder without __init__.py: {', '.join(folders)}); "
                    f"unset {ENV_VAR} to use the emulator (tttv2.ttnn)",
                    name="ttnn",
                )
            if folders:
                return self._alias("ttnn", EMULATOR)
        if chosen == "ttnn":
            if self.at_end:  # every other finder had its chance
                raise ModuleNotFoundError(
                    f"No module named 'ttnn': {ENV_VAR}=ttnn asks for Tenstorrent's real ttnn package, which is "
                    f"not importable here; unset {ENV_VAR} to use the emulator (tttv2.ttnn)",
                    name="ttnn",
                )
            return None
        if chosen == "emulator" or self.at_end:
            return self._alias("ttnn", EMULATOR)
        return None

    @staticmethod
    def _alias(fullname: str, target: str):
        import importlib.machinery
        import importlib.util

        if target not in sys.modules and importlib.util.find_spec(target) is None:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(target), is_package=True)
        return spec


def _namespace_only(name: str) -> list[str]:
    """The folders of ``name`` when what the other finders would import is a namespace package (no code, so
    not Tenstorrent's ttnn); empty when they find a real module or nothing."""
    for finder in sys.meta_path:
        if type(finder).__name__ == "TtnnFinder" or not hasattr(finder, "find_spec"):  # any copy of this hook
            continue
        spec = finder.find_spec(name, None)
        if spec is None:
            continue
        if spec.origin is None and spec.submodule_search_locations is not None:  # a namespace package
            return list(spec.submodule_search_locations)
        return []
    return []


#: scikit-build-core's module that serves an editable install (``pip install -e .``), imported by its own .pth before
#: this one: a top-level module of tttv2's distribution too, so pytest warned about it in every run of the generated
#: tests (issue 23); it is generated, so its docstring gets the marker here.
EDITABLE_REDIRECT = "_editable_skbc_tttv2"


def _quiet_pytest_about_the_editable_redirect() -> None:
    module = sys.modules.get(EDITABLE_REDIRECT)
    if module is not None and "PYTEST_DONT_REWRITE" not in (module.__doc__ or ""):
        module.__doc__ = (module.__doc__ or "") + "\n\nPYTEST_DONT_REWRITE (set by _tttv2_ttnn_import)"


def install() -> None:
    """Register the two finders (once per interpreter), and mark the editable install's redirect module for pytest."""
    _quiet_pytest_about_the_editable_redirect()
    if any(isinstance(f, TtnnFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, TtnnFinder(at_end=False))
    sys.meta_path.append(TtnnFinder(at_end=True))
