"""The import hook: runs a callback on a module right after it executes, for the target modules only.

A meta-path finder placed first asks the other finders for the module's spec and wraps its loader, so the
module is loaded exactly as without the hook; nothing else is intercepted and no ``sitecustomize`` / ``.pth``
file is installed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable


class _PatchingLoader(importlib.abc.Loader):
    """Delegates to the real loader, then hands the executed module to the callback."""

    def __init__(self, loader, callback: Callable):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._callback(module)

    def __getattr__(self, name):  # get_source, get_filename, ... as the real loader has them
        return getattr(self._loader, name)


class TargetFinder(importlib.abc.MetaPathFinder):
    """Watches for the named modules; every other import passes straight through (``None``)."""

    def __init__(self, callbacks: dict[str, Callable]):
        self._callbacks = dict(callbacks)
        self._busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        callback = self._callbacks.get(fullname)
        if callback is None or getattr(self._busy, "active", False):
            return None
        self._busy.active = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.active = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, callback)
        return spec

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
