"""The recorder: wraps the targets' entry method, turns each call into a case and keeps the store up to date.

Deduplication happens here, in the recording process: a case seen before costs one dict look-up and a counter;
a new case is written through at once (a recorder killed later keeps it); hit counts and layers are written
in one transaction at most every ``flush_seconds`` and when the recorder closes.

With a ``shadow`` (``collect-cases verify``: :class:`tttv2_tools.collect_cases.verify.Shadow`), the same wrappers
also hand each construction and each call to it: it builds a twin after the target's ``__init__`` and runs the
call itself (TTTv1 first, then the twin on copies). While the shadow is busy with a twin (``shadow.suspended()``),
calls of targets are neither recorded nor shadowed: they are the twin's own use of TTTv1 modules.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import threading
import time
import weakref
from collections.abc import Iterable

from .errors import TargetError
from .fields import INIT_NAMES, CaseExtractor, UserField, canonical_json
from .hook import TargetFinder
from .store import CaseStore, Observation
from .targets import Target, entry_method, resolve_in


class Recorder:
    """Records calls of ``targets`` into the store at ``store_path`` (created if missing)."""

    def __init__(
        self,
        store_path,
        targets: Iterable[Target],
        user_fields: Iterable[UserField] = (),
        command: str = "",
        flush_seconds: float = 2.0,
        shadow=None,
    ):
        self.targets = tuple(targets)
        self.user_fields = tuple(user_fields)
        self.command = command
        self.flush_seconds = flush_seconds
        self.shadow = shadow
        self.store = CaseStore(store_path, create=True)
        self.calls = 0
        self.new_cases = 0
        self._seen: dict[tuple[str, str], Observation] = {}
        self._dirty: dict[tuple[str, str], Observation] = {}
        self._last_flush = time.monotonic()
        self._lock = threading.RLock()
        self._local = threading.local()
        self._init_args: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._patched: list[tuple[type, str, bool, object]] = []
        self._patched_classes: set[type] = set()
        self._finder: TargetFinder | None = None

    # --- installing -----------------------------------------------------------------------------------------
    def install(self) -> None:
        """Patch the targets whose module is already imported; patch the others when they are imported."""
        pending = {}
        for target in self.targets:
            module = sys.modules.get(target.module)
            if module is not None:
                self._patch_module(module, target)
            else:
                pending.setdefault(target.module, []).append(target)
        if pending:

            def on_import(module, targets_by_module=pending):
                for target in targets_by_module[module.__name__]:
                    self._patch_module(module, target)

            self._finder = TargetFinder({name: on_import for name in pending})
            self._finder.install()

    def import_targets(self) -> None:
        """Import every target now (through the hook), so that a bad target fails before any work starts."""
        for target in self.targets:
            try:
                module = importlib.import_module(target.module)
            except TargetError:
                raise
            except Exception as exc:  # whatever stops the import is the target's problem, said as such
                raise TargetError(
                    f"--target {target}: module {target.module!r} does not import: {type(exc).__name__}: {exc}"
                ) from exc
            if resolve_in(module, target) not in self._patched_classes:
                self._patch_module(module, target)

    def _patch_module(self, module, target: Target) -> None:
        cls = resolve_in(module, target)
        if cls in self._patched_classes:
            return
        entry = entry_method(cls)
        original = getattr(cls, entry)
        if not inspect.isfunction(original):
            raise TargetError(
                f"--target {target}: {entry} must be a plain method, got {type(original).__name__}"
            )
        extractor = CaseExtractor(cls, entry, self.user_fields)
        self._set(cls, entry, self._recorded(target.name, extractor, original))
        init = cls.__init__
        if inspect.isfunction(init):
            self._set(cls, "__init__", self._capturing_init(init, target.name, cls))
        self._patched_classes.add(cls)

    def _set(self, cls: type, name: str, value) -> None:
        self._patched.append((cls, name, name in vars(cls), vars(cls).get(name)))
        setattr(cls, name, value)

    def _recorded(self, target: str, extractor: CaseExtractor, original):
        recorder = self

        @functools.wraps(original)
        def recorded(instance, *args, **kwargs):
            shadow = recorder.shadow
            if shadow is not None and shadow.suspended():
                return original(instance, *args, **kwargs)
            stack = recorder._stack()
            observed = recorder._observe(target, extractor, instance, args, kwargs, stack)
            stack.append(observed[0] if observed is not None else None)
            try:
                if shadow is None:
                    return original(instance, *args, **kwargs)
                return shadow.call(target, instance, observed, original, args, kwargs)
            finally:
                stack.pop()
                if shadow is not None and shadow.news:
                    recorder.flush()

        recorded.__collect_cases_original__ = original
        return recorded

    def _capturing_init(self, original, target: str, cls: type):
        signature = inspect.signature(original)
        init_args = self._init_args
        recorder = self

        @functools.wraps(original)
        def init(instance, *args, **kwargs):
            try:
                bound = signature.bind_partial(instance, *args, **kwargs).arguments
                init_args[instance] = {n: bound[n] for n in INIT_NAMES if n in bound}
            except TypeError:  # unbindable (the real __init__ will say why) or not weak-referenceable
                pass
            shadow = recorder.shadow
            owned = None
            if shadow is not None and not shadow.suspended():  # the twin's copies, before TTTv1 changes them
                owned = shadow.arguments(target, cls, instance, args, kwargs)
            result = original(instance, *args, **kwargs)
            if shadow is not None and not shadow.suspended():
                shadow.constructed(target, cls, instance, args, kwargs, recorder._init_of(instance), owned)
            return result

        return init

    def uninstall(self) -> None:
        """Put every patched method back and remove the import hook."""
        for cls, name, had_own, original in reversed(self._patched):
            if had_own:
                setattr(cls, name, original)
            else:
                delattr(cls, name)
        self._patched.clear()
        self._patched_classes.clear()
        if self._finder is not None:
            self._finder.remove()
            self._finder = None

    # --- recording ------------------------------------------------------------------------------------------
    def _stack(self) -> list:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _init_of(self, instance):
        """The constructor arguments the field rules read, as captured; None when unknown."""
        try:
            return self._init_args.get(instance)
        except TypeError:  # not weak-referenceable
            return None

    def _observe(self, target, extractor, instance, args, kwargs, stack):
        init = self._init_of(instance)
        result = extractor.extract(instance, args, kwargs, init, stack[-1] if stack else None)
        if result is None:
            return None
        fields, layer = result
        fields_json = canonical_json(fields)
        with self._lock:
            self.calls += 1
            ob = self._seen.get((target, fields_json))
            new = ob is None
            if new:
                ob = self._seen[(target, fields_json)] = Observation(
                    target, fields_json, 0, set(), self.command
                )
            ob.hits += 1
            if layer is not None and layer not in ob.layers:
                ob.layers.add(layer)
                new = True  # a new layer is news too: write it through
            self._dirty[(target, fields_json)] = ob
            if new or time.monotonic() - self._last_flush > self.flush_seconds:
                self.flush()
        return fields, fields_json, layer

    def flush(self) -> None:
        """Write the hits and layers gathered since the last flush (one transaction)."""
        with self._lock:
            if self._dirty:
                self.new_cases += self.store.add(self._dirty.values())
                for ob in self._dirty.values():
                    ob.hits = 0
                self._dirty.clear()
            if self.shadow is not None:
                self.shadow.flush(self.store)
            self._last_flush = time.monotonic()

    @property
    def distinct_cases(self) -> int:
        return len(self._seen)

    def close(self) -> None:
        """Flush, unpatch and close the store (safe to call twice)."""
        if self.store is None:
            return
        try:
            self.flush()
        finally:
            self.uninstall()
            self.store.close()
            self.store = None
