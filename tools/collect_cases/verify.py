"""Shadow verification (``collect-cases verify``): each TTTv1 target runs as usual, and its generated twin runs
beside it on copies of the same inputs; every output is compared.

Two halves:

- in ``collect-cases verify`` (the parent): ``check_generated`` reads each ``--generated`` file's header (written
  by ``tttv2-refactor``: source file, class, the source's hash and the file's own hash) and refuses a file that is
  missing, edited or stale, and derives its target (``module:Class``) from the source path as Python would;
- in the command's process (the child, started by the bootstrap like ``record``): a ``Shadow`` that the
  :class:`~tttv2_tools.collect_cases.recorder.Recorder` hands every construction and call of a target. After a
  target's ``__init__`` it builds the twin with ``build_twin`` from the same arguments; on a call it copies the
  inputs (``clone_inputs``), runs TTTv1, runs the twin on the copies and compares (``first_difference``). The
  program always gets TTTv1's result; anything the twin or the comparison raises is a failed case, never the
  program's exception. While a twin is built or runs, targets are neither recorded nor shadowed (a generated
  decoder builds and calls TTTv1 submodules itself).

Results go into the store's ``verifications`` table: one row per run × case × generated file.
"""

from __future__ import annotations

import contextlib
import copy
import copyreg
import enum
import importlib.util
import inspect
import os
import re
import sys
import threading
import traceback
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CollectCasesError, TargetError
from .fields import layer_of
from .store import Verification
from .targets import import_target, parse_target

_LABEL_RE = re.compile(r"^(?P<path>.+) \(class (?P<cls>[A-Za-z_][\w.]*)\)$")
_MAX_MESSAGE = 400


# --- the parent: which generated files, for which targets --------------------------------------------------------
@dataclass(frozen=True)
class GeneratedFile:
    """A ``--generated`` file that passed the checks: the twin of ``target``, generated from ``source``."""

    path: str  # as given
    source: Path  # the TTTv1 file it was generated from (resolved)
    target: str  # module:Class


def check_generated(paths: list[str], target: str | None = None) -> list[GeneratedFile]:
    """Each file's header read and checked; a ``CollectCasesError`` (one line naming the file) for the first file
    that is missing, has no header, was edited, or whose source is gone or changed since it was generated."""
    from tttv2_tools.refactor.files import content_hash, parse_header, source_hash
    from tttv2_tools.refactor.helpers import dotted_module_of

    if target is not None:
        target = parse_target(target).name
    out = []
    for given in paths:
        path = Path(given)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CollectCasesError(f"--generated {given}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CollectCasesError(f"--generated {given}: cannot read it: {exc}") from None
        header = parse_header(text)
        if header is None:
            raise CollectCasesError(
                f"--generated {given}: not written by tttv2-refactor (its first line is not a "
                "'# tttv2-refactor: generated from ...' header)"
            )
        if content_hash(text.partition("\n")[2]) != header["hash"]:
            raise CollectCasesError(
                f"--generated {given}: edited since tttv2-refactor wrote it (its content no longer matches the "
                "header's sha256); generate it again"
            )
        label = _LABEL_RE.match(header["source"])
        if label is None:
            raise CollectCasesError(
                f"--generated {given}: its header names no source class ({header['source']!r})"
            )
        source = (path.parent / label["path"]).resolve()
        if header["source_hash"] is None:
            raise CollectCasesError(
                f"--generated {given}: its header has no source hash (written by an older tttv2-refactor), so "
                f"whether {label['path']} changed since cannot be told; generate it again"
            )
        try:
            data = source.read_bytes()
        except OSError:
            raise CollectCasesError(
                f"--generated {given}: stale: its source {source} (from the header) does not exist"
            ) from None
        if source_hash(data) != header["source_hash"]:
            raise CollectCasesError(
                f"--generated {given}: stale: its source {source} changed since it was generated; generate it again"
            )
        out.append(
            GeneratedFile(given, source, target or f"{_module_of(source, dotted_module_of)}:{label['cls']}")
        )
    return out


def _module_of(source: Path, dotted_module_of) -> str:
    """The module name of a TTTv1 file: its package path (folders with an ``__init__.py``, the toolkit's rule);
    for a file in a namespace package (PEP 420: folders without one, as tt-metal's ``models/…`` folders), the
    name Python gives it from the deepest folder of ``sys.path`` (or the current folder) above its own folder:
    ``/repo/models/demos/x/tt/mlp.py`` with ``/repo`` on ``PYTHONPATH`` -> ``models.demos.x.tt.mlp``."""
    dotted = dotted_module_of(source)
    if "." in dotted:
        return dotted
    best: tuple[str, ...] | None = None
    for entry in (os.getcwd(), *sys.path):
        try:
            parts = source.with_suffix("").relative_to(Path(entry or os.getcwd()).resolve()).parts
        except (OSError, ValueError):  # not above the file (or unreadable)
            continue
        if (
            len(parts) >= 2
            and all(part.isidentifier() for part in parts)
            and (best is None or len(parts) < len(best))
        ):
            best = parts
    return ".".join(best) if best else dotted


def parse_layers(text: str | None) -> list[int] | None:
    """``"0,3"`` → ``[0, 3]``; None keeps every layer."""
    if text is None:
        return None
    try:
        layers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        layers = []
    if not layers or any(n < 0 for n in layers):
        raise CollectCasesError(f"--layers: expected layer numbers like 0,3, got {text!r}")
    return layers


# --- the child: twins beside the targets ------------------------------------------------------------------------
def describe_exception(exc: BaseException, what: str, files: tuple[str, ...] = ()) -> str:
    """``what raised Type: message (at file:line in function)``: the innermost frame in one of ``files`` (the
    generated modules), else the innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    resolved = {str(Path(f).resolve()) for f in files}
    frame = next((f for f in reversed(frames) if str(Path(f.filename).resolve()) in resolved), None)
    if frame is None and frames:
        frame = frames[-1]
    message = str(exc).replace("\n", " ")
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + "..."
    where = f" (at {Path(frame.filename).name}:{frame.lineno} in {frame.name})" if frame else ""
    return f"{what} raised {type(exc).__name__}: {message}{where}"


@dataclass
class _TwinFile:
    path: str  # resolved
    shown: str  # as the user gave it (what summaries and the store say)
    module_name: str
    classes: list[type] | None = None
    error: str | None = None


@dataclass
class _State:
    """One shadowed TTTv1 instance: its twin (or why there is none) and whether the twin is still in step."""

    twin: object = None
    twin_class: str = ""
    generated: str = ""  # as shown
    generated_path: str = ""  # resolved: where its frames are
    error: str | None = None
    retired: bool = False  # a call ran without the twin: its state (KV cache) is no longer TTTv1's
    # a twin built per mode (from_model_args takes decode_model_config / prefill_model_config): built once the
    # program has run TTTv1 on each mode's dict, then the calls made before are replayed on it (_Pending)
    pending: _Pending | None = None
    per_mode: bool = (
        False  # such a twin: called with mode= (the dict's LLM_MODE) when TTTv1's entry takes none
    )
    dicts: dict | None = None  # a per-mode twin's dicts, by mode, as it was built with them
    arguments: tuple | None = None  # a per-mode twin's untouched copies of the constructor's (args, kwargs)
    rebuilt: str | None = None  # why the twin was last rebuilt (TTTv1 switched to another dict of one mode)
    # the user's objects among the constructor's arguments and the twin's copies of them, with what each original
    # held after TTTv1's last construction or call: what the program sets on one between calls is handed over
    handovers: list = field(default_factory=list)


@dataclass
class _Handover:
    """A user object of TTTv1's constructor arguments (a CCL helper), the twin's copy of it, and its attributes as
    TTTv1's ``__init__`` or last call left them (``seen``: name -> value). An attribute the program binds on the
    original between two calls (tt-metal's Galaxy model sets ``tt_ccl.tt_lm_head_buffer_l1`` before each decode
    call of its LM head, which the call then deallocates) is an input of the next call: the twin's copy gets a
    clone of it (``clone_inputs``) before TTTv1 runs."""

    # the user's object: a weak reference where it takes one (it may refer to the TTTv1 instance)
    held: object
    copy: object
    seen: dict

    @property
    def original(self):
        return self.held() if isinstance(self.held, weakref.ref) else self.held


def _held(value):
    """A weak reference to ``value`` where it takes one, else ``value``: a state kept per TTTv1 instance (a
    ``WeakKeyDictionary`` value) must not keep that instance alive through an argument that refers to it."""
    try:
        return weakref.ref(value)
    except TypeError:
        return value


@dataclass
class _Pending:
    """The constructor's arguments, each mode's dict as TTTv1 held it when called in that mode, and the calls
    made before both were seen: (result, entry, copies of the inputs, a copy of TTTv1's output, mode)."""

    args: tuple
    kwargs: dict
    dicts: dict
    calls: list


@dataclass
class _Result:
    target: str
    fields_json: str
    generated: str
    twin_class: str
    checked: int = 0
    passed: int = 0
    first_failure: str | None = None


@dataclass
class _Counts:
    instances: int = 0  # constructed instances of the target class
    twins: int = 0  # twins built
    build_failed: int = 0
    not_shadowed: int = 0  # subclasses, or layers outside --layers
    unchecked_calls: int = 0  # calls that ran TTTv1 only (sampled out, or the twin was retired)
    one_mode_only: int = 0  # calls of a per-mode twin's instance that never ran in the other mode's dict
    shared_arguments: int = (
        0  # objects in constructor arguments that could not be copied: the twin got TTTv1's
    )
    shared_first: str = ""  # the first of them: its type and why
    rebuilt: int = 0  # per-mode twins rebuilt: TTTv1's setter switched it to another dict of one mode

    def as_dict(self) -> dict:
        return dict(vars(self))


class Shadow:
    """The recorder's shadow in the command's process (see the module docstring). ``config`` is what
    ``collect-cases verify`` passes: run id, command, generated files per target, tolerances, layers, sample."""

    def __init__(self, config: dict):
        c = self.config = config
        self._local = threading.local()
        self._lock = threading.RLock()
        self.news = False  # a result the store should have at once (a first check or a first failure)
        self.run = c["run"]
        self.command = c.get("command", "")
        self.atol = float(c.get("atol", 0.0))
        self.rtol = float(c.get("rtol", 0.0))
        self.layers = set(c["layers"]) if c.get("layers") is not None else None
        self.sample = c.get("sample")
        self.files: dict[str, list[_TwinFile]] = {}
        for i, (path, target, *shown) in enumerate(c["generated"]):
            name = f"_collect_cases_twin_{i}_" + re.sub(r"\W", "_", Path(path).stem)
            self.files.setdefault(target, []).append(_TwinFile(path, shown[0] if shown else path, name))
        self.sources = dict(c.get("sources", {}))  # target -> the source file the twins were generated from
        self.counts = {t: _Counts() for t in self.files}
        self._results: dict[tuple[str, str, str], _Result] = {}
        self._dirty: dict[tuple[str, str, str], _Result] = {}
        self._states: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._strong_states: dict[int, tuple[object, _State]] = {}  # instances that take no weak reference

    # --- before the command runs ------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Check that each target is the class its twins were generated from (a ``TargetError`` otherwise), then
        load the generated modules; a module that does not load fails every instance of its target."""
        for target, source in self.sources.items():
            cls = import_target(parse_target(target))
            try:
                found = inspect.getsourcefile(cls)
            except TypeError:
                found = None
            if found is None or Path(found).resolve() != Path(source).resolve():
                raise TargetError(
                    f"--generated: {target} is imported from {found}, not from {source}, the file its twin was "
                    "generated from"
                )
        with self.suspend():
            for twin_files in self.files.values():
                for tf in twin_files:
                    self._load(tf)

    def _load(self, tf: _TwinFile) -> None:
        try:
            spec = importlib.util.spec_from_file_location(tf.module_name, tf.path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[tf.module_name] = module  # dataclasses read their module's globals from sys.modules
            spec.loader.exec_module(module)
        except Exception as exc:  # the twin's module is broken: a failed case, not a crash
            sys.modules.pop(tf.module_name, None)
            tf.error = describe_exception(exc, f"loading {tf.shown}", (tf.path,))
            return
        tf.classes = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and obj.__module__ == tf.module_name and hasattr(obj, "from_model_args")
        ]
        if not tf.classes:
            tf.error = f"{tf.shown} defines no class with from_model_args"

    # --- the flag -----------------------------------------------------------------------------------------------
    def suspended(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    @contextlib.contextmanager
    def suspend(self):
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    # --- instances --------------------------------------------------------------------------------------------
    def _state(self, instance) -> _State | None:
        try:
            return self._states.get(instance)
        except TypeError:
            held = self._strong_states.get(id(instance))
            return held[1] if held is not None and held[0] is instance else None

    def _remember(self, instance, state: _State) -> None:
        try:
            self._states[instance] = state
        except TypeError:
            self._strong_states[id(instance)] = (instance, state)

    def arguments(self, target: str, cls: type, instance, args: tuple, kwargs: dict):
        """Before ``cls.__init__`` runs on ``instance``: the twin's own copies of its arguments
        (``own_arguments``), or None for an instance that is not shadowed (not a target, a subclass)."""
        if target not in self.counts or type(instance) is not cls:
            return None
        with self.suspend():
            copier = _ArgumentCopier()
            owned_args, owned_kwargs = copier.own((tuple(args), dict(kwargs)))
        uncopied = copier.uncopied
        counts = self.counts[target]
        counts.shared_arguments += len(uncopied)
        if uncopied and not counts.shared_first:
            counts.shared_first = uncopied[0]
        return owned_args, owned_kwargs, uncopied, copier.pairs

    def constructed(
        self, target: str, cls: type, instance, args: tuple, kwargs: dict, init, owned=None
    ) -> None:
        """After ``cls.__init__`` built ``instance``: build its twin from its own copies of the same arguments
        (``owned``, from ``arguments`` before TTTv1's ``__init__`` ran; else the arguments themselves)."""
        pairs = []
        if owned is not None:
            args, kwargs = owned[0], owned[1]
            pairs = owned[3] if len(owned) > 3 else []
        counts = self.counts.get(target)
        if counts is None:
            return
        if type(instance) is not cls:  # a subclass: its twin would be another class's
            counts.not_shadowed += 1
            return
        counts.instances += 1
        if self.layers is not None and layer_of(instance, init) not in self.layers:
            counts.not_shadowed += 1
            return
        files = self.files[target]
        state = _State(generated=", ".join(tf.shown for tf in files))
        broken = [tf.error for tf in files if tf.error is not None]
        if broken:
            state.error = broken[0]
        else:
            from tttv2.testing.equivalence import build_twin

            by_class = {c: tf for tf in files for c in tf.classes}
            if any(_per_mode(c) for c in by_class):  # built once both modes' dicts are seen (call)
                state.pending, state.per_mode = _Pending(args, kwargs, {}, []), True  # counted when built
                self._remember(instance, state)
                return
            with self.suspend():
                try:
                    state.twin, twin_cls = build_twin(list(by_class), args, kwargs)
                except Exception as exc:  # the twin's failure, reported as a failed case
                    state.error = describe_exception(exc, "building the twin", tuple(tf.path for tf in files))
                else:
                    state.twin_class = twin_cls.__name__
                    state.generated = by_class[twin_cls].shown
                    state.generated_path = by_class[twin_cls].path
                    state.handovers = [_Handover(_held(o), c, dict(vars(o))) for o, c in pairs]
        if state.error is None:
            counts.twins += 1
        else:
            counts.build_failed += 1
        self._remember(instance, state)

    # --- calls ------------------------------------------------------------------------------------------------
    def call(self, target: str, instance, observed, original, args: tuple, kwargs: dict):
        """Run one call of a target: TTTv1's result is returned, the twin's is compared with it."""
        state = self._state(instance)
        if state is None or observed is None or state.retired:
            if state is not None:
                self.counts[target].unchecked_calls += 1
            return original(instance, *args, **kwargs)
        _, fields_json, _ = observed
        result = self._result(target, fields_json, state)
        if state.error is not None:  # a twin that did not build: a failure each call, never sampled away
            output = original(instance, *args, **kwargs)
            self._done(result, state.error)
            return output
        if state.pending is not None:
            return self._pending_call(target, state, result, instance, original, args, kwargs)
        if self.sample is not None and result.checked >= self.sample:
            state.retired, state.twin = True, None  # skipped a call: out of step from now on
            self.counts[target].unchecked_calls += 1
            return original(instance, *args, **kwargs)
        copies, failure = None, None
        with self.suspend():
            try:
                from tttv2.testing.equivalence import clone_inputs

                copies = clone_inputs((list(args), dict(kwargs)))
            except Exception as exc:
                failure = describe_exception(exc, "copying the inputs")
            if failure is None:
                failure = _hand_over(state.handovers)
        try:
            output = original(instance, *args, **kwargs)
        except BaseException:
            state.retired, state.twin = (
                True,
                None,
            )  # TTTv1 raised (the program sees it): the twin is out of step
            raise
        for handover in state.handovers:  # what TTTv1's call bound is its own: the twin's call does the same
            user_object = handover.original
            if user_object is not None:
                handover.seen = dict(vars(user_object))
        if failure is None and state.per_mode:
            mode = _dict_mode(instance)
            failure = self._follow(target, state, instance.model_config, mode, _setter(instance))
            copies = _with_mode(original, copies, mode)
        if failure is None:
            failure = self._compare(state, original.__name__, copies, output)
        if failure is not None:
            state.retired, state.twin = True, None
        self._done(result, failure)
        return output

    def _pending_call(
        self, target: str, state: _State, result, instance, original, args: tuple, kwargs: dict
    ):
        """A call of an instance whose twin is built per mode: the mode is the ``LLM_MODE`` of the dict TTTv1
        holds now (as its setter left it). The inputs and TTTv1's output are copied and kept; once TTTv1 has run
        with both modes' dicts, the twin is built with them (``decode_model_config`` / ``prefill_model_config``)
        and every kept call is replayed on it in order, so its state (a KV cache) follows TTTv1's."""
        from tttv2.testing.equivalence import clone_inputs

        pending = state.pending
        mode = _dict_mode(instance)
        if mode is None:
            output = original(instance, *args, **kwargs)
            state.pending, state.retired = None, True
            self._done(
                result,
                "the twin reads one config dict per mode, but TTTv1's model_config has no LLM_MODE of 'decode' "
                "or 'prefill', so which mode's dict this call ran with is not known",
            )
            return output
        pending.dicts.setdefault(mode, instance.model_config)  # the first dict of each mode builds the twin
        config = instance.model_config
        with self.suspend():
            copies = clone_inputs((list(args), dict(kwargs)))
        output = original(instance, *args, **kwargs)  # TTTv1 raising: the program sees it, as without verify
        with self.suspend():
            pending.calls.append(
                (result, original, copies, clone_inputs(output), mode, config, _setter(instance))
            )
        self.counts[target].one_mode_only += 1
        if len(pending.dicts) == 2:
            self._build_and_replay(target, state)
        return output

    def _build_and_replay(self, target: str, state: _State) -> None:

        pending, state.pending = state.pending, None
        self.counts[target].one_mode_only -= len(pending.calls)
        state.arguments, state.dicts = (pending.args, pending.kwargs), dict(pending.dicts)
        state.error = self._build_per_mode(target, state)
        if state.error is None:
            self.counts[target].twins += 1
        else:
            self.counts[target].build_failed += 1
        for result, original, copies, output, mode, config, setter in pending.calls:
            if state.error is not None:
                self._done(result, state.error)
                continue
            if state.retired:
                self.counts[target].unchecked_calls += 1
                continue
            if not result.twin_class:
                result.twin_class = state.twin_class
            failure = self._follow(target, state, config, mode, setter) or self._compare(
                state, original.__name__, _with_mode(original, copies, mode), output
            )
            if failure is not None:
                state.retired, state.twin = True, None
            self._done(result, failure)

    def _build_per_mode(self, target: str, state: _State) -> str | None:
        """(Re)build a per-mode twin with ``state.dicts``, from fresh copies of the constructor's arguments (the
        kept ones stay untouched, so a rebuild sees them as TTTv1's ``__init__`` did); the failure, or None."""
        from tttv2.testing.equivalence import build_twin

        files = self.files[target]
        by_class = {c: tf for tf in files for c in tf.classes}
        extra = {f"{m}_model_config": state.dicts[m] for m in ("decode", "prefill")}
        state.twin = None  # a rebuild drops the old twin (and its device memory) first
        with self.suspend():
            try:
                args, kwargs, _ = own_arguments(*state.arguments)
                state.twin, twin_cls = build_twin(list(by_class), args, {**kwargs, **extra})
            except Exception as exc:
                return describe_exception(exc, "building the twin", tuple(tf.path for tf in files))
        state.twin_class = twin_cls.__name__
        state.generated = by_class[twin_cls].shown
        state.generated_path = by_class[twin_cls].path
        return None

    def _follow(self, target: str, state: _State, config, mode: str | None, setter: str) -> str | None:
        """Before a per-mode twin's call: when TTTv1's setter switched it to another dict of that mode than the
        twin was built with (Falcon-40B's prefill dict is one per sequence length), the twin follows: it is rebuilt
        with that dict (``_build_per_mode``). The failure if the rebuild raises, else None."""
        switched = _switched(config, state.dicts, mode, setter)
        if switched is None:
            return None
        state.dicts = {**state.dicts, mode: config}
        self.counts[target].rebuilt += 1
        state.rebuilt = switched
        failure = self._build_per_mode(target, state)
        return None if failure is None else f"{switched}; rebuilding the twin with it: {failure}"

    def _compare(self, state: _State, entry: str, copies, output) -> str | None:
        from tttv2.testing.equivalence import first_difference

        with self.suspend():
            # the same method; a TTTv1 class called through __call__ may have a twin with forward only
            method = state.twin if entry == "__call__" and callable(state.twin) else state.twin.forward
            try:
                got = method(*copies[0], **copies[1])
            except Exception as exc:
                return describe_exception(exc, f"the twin's {entry}", (state.generated_path,))
            try:
                difference = first_difference(output, got, atol=self.atol, rtol=self.rtol)
            except Exception as exc:
                return describe_exception(exc, "comparing the outputs")
        if difference is None:
            return None
        if state.rebuilt is not None:  # a rebuilt twin's own state (a KV cache it keeps) started empty
            return f"{difference} (the twin was rebuilt after {state.rebuilt}: state it keeps itself started empty)"
        return str(difference)

    def _result(self, target: str, fields_json: str, state: _State) -> _Result:
        key = (target, fields_json, state.generated)
        with self._lock:
            result = self._results.get(key)
            if result is None:
                result = self._results[key] = _Result(target, fields_json, state.generated, state.twin_class)
            elif (
                not result.twin_class and state.twin_class
            ):  # first seen by an instance whose twin did not build
                result.twin_class = state.twin_class
            return result

    def _done(self, result: _Result, failure: str | None) -> None:
        with self._lock:
            result.checked += 1
            if failure is None:
                result.passed += 1
            elif result.first_failure is None:
                result.first_failure = failure
                self.news = True
            if result.checked == 1:
                self.news = True
            self._dirty[(result.target, result.fields_json, result.generated)] = result

    # --- the store ----------------------------------------------------------------------------------------------
    def flush(self, store) -> None:
        """Write the results changed since the last flush (called by the recorder's flush)."""
        with self._lock:
            rows = [
                Verification(
                    self.run,
                    r.target,
                    r.fields_json,
                    r.generated,
                    r.twin_class,
                    r.checked,
                    r.passed,
                    r.first_failure,
                    self.command,
                )
                for r in self._dirty.values()
            ]
            self._dirty.clear()
            self.news = False
        if rows:
            store.put_verifications(rows)

    def status(self) -> dict:
        """The counts per target, for the status file."""
        return {t: c.as_dict() for t, c in self.counts.items()}


def _per_mode(cls: type) -> bool:
    """A generated class whose ``from_model_args`` takes each mode's config dict (a TTTv1 module switched between
    dicts by its setter, ``set_model_config``)."""
    try:
        params = inspect.signature(cls.from_model_args).parameters
    except (TypeError, ValueError):
        return False
    return "decode_model_config" in params and "prefill_model_config" in params


def _dict_mode(instance) -> str | None:
    """The mode of the config dict a TTTv1 instance holds now (its ``model_config["LLM_MODE"]``), or None."""
    config = getattr(instance, "model_config", None)
    mode = config.get("LLM_MODE") if isinstance(config, dict) else None
    return mode if mode in ("decode", "prefill") else None


def _setter(instance) -> str:
    return "set_model_config" if hasattr(instance, "set_model_config") else "its setter"


def _switched(config: dict, dicts: dict, mode: str, setter: str) -> str | None:
    """Why a per-mode twin cannot check a call TTTv1 ran with ``config``: its setter (``setter``) switched it to
    another dict of that mode than the twin was built with
    (Falcon-40B's prefill dict is one per sequence length). The twin's fields were computed from one dict per
    mode, so the call is a failed case naming the setter and the keys that differ; None when the dicts are equal."""
    built = dicts.get(mode)
    if built is None or config is built:  # no LLM_MODE: the call fails on its own (_with_mode)
        return None
    try:
        if config == built:
            return None
        keys = sorted(
            k for k in set(config) | set(built) if k not in config or k not in built or config[k] != built[k]
        )
    except Exception:  # a value whose comparison raises: the dicts cannot be told equal
        keys = []
    shown = ", ".join(map(str, keys[:4])) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
    return f"{setter} switched TTTv1 to another {mode} dict" + (
        f" (keys that differ: {shown})" if shown else ""
    )


_GONE = object()


def _hand_over(handovers: list) -> str | None:
    """Before a call: each attribute the program bound (or removed) on an original since TTTv1's last construction
    or call is bound (or removed) on the twin's copy, cloned (``clone_inputs``: a device tensor the call may
    deallocate becomes the twin's own). The failure, or None."""
    from tttv2.testing.equivalence import clone_inputs

    for handover in handovers:
        original = handover.original
        if original is None:  # gone: the program holds it no more, so it stages nothing on it
            continue
        now = vars(original)
        try:
            for name, value in now.items():
                if handover.seen.get(name, _GONE) is not value:
                    setattr(handover.copy, name, clone_inputs(value))
            for name in handover.seen.keys() - now.keys():
                if hasattr(handover.copy, name):
                    delattr(handover.copy, name)
        except Exception as exc:
            return describe_exception(
                exc, f"handing the twin what the program set on its {type(original).__name__}"
            )
    return None


def _with_mode(original, copies, mode: str | None):
    """A per-mode twin's call: ``mode=`` added when TTTv1's entry takes no mode of its own (the Llama-2-70B
    style, whose mode is its dict's ``LLM_MODE``; a Falcon-40B style entry passes ``llm_mode`` itself)."""
    if mode is None or set(inspect.signature(original).parameters) & {"mode", "llm_mode"}:
        return copies
    return copies[0], {**copies[1], "mode": mode}


# --- the twin's own constructor arguments ------------------------------------------------------------------------
# Objects of these packages are shared with the twin, never copied: devices, ttnn / torch / numpy tensors, memory
# and program configs, tokenizers. They are what TTTv1 and the twin must share (one device) or data neither changes
# (weights), and copying them would cost the model's memory again.
_SHARED_PACKAGES = frozenset({"ttnn", "tttv2", "torch", "numpy", "transformers", "tokenizers", "safetensors"})
_ATOMIC = (type(None), bool, int, float, complex, str, bytes, range, slice, enum.Enum, type, BaseException)


def _shared(value) -> bool:
    if isinstance(value, _ATOMIC):
        return True
    if inspect.isroutine(value) or inspect.ismodule(value) or inspect.isclass(value):
        return True
    return type(value).__module__.partition(".")[0] in _SHARED_PACKAGES


class _ArgumentCopier:
    """Copies of a constructor's arguments for the twin (``own``): lists, tuples, dicts, sets and the user's own
    objects (a prefetcher setup, a CCL helper, a model-args object) are copied all the way down, keeping shared
    references shared (one memo); what ``_shared`` names is handed over as is. An object that cannot be copied
    (it holds a lock, a file, a generator) is handed over as is too, and named in ``uncopied``."""

    def __init__(self):
        self.memo: dict = {}
        self.uncopied: list[str] = []
        # (the user's object, its copy), for the objects with a __dict__: the hand-over's pairs
        self.pairs: list[tuple[object, object]] = []

    def own(self, value, memo=None):
        memo = self.memo if memo is None else memo
        key = id(value)
        if key in memo:
            return memo[key]
        if _shared(value):
            return value
        kind = type(value)
        if kind in (list, dict, set):
            made = kind()
            memo[key] = made
            if kind is list:
                made.extend(self.own(v, memo) for v in value)
            elif kind is dict:
                made.update((self.own(k, memo), self.own(v, memo)) for k, v in value.items())
            else:
                made.update(self.own(v, memo) for v in value)
            return made
        if kind is tuple:
            made = tuple(self.own(v, memo) for v in value)
            return memo.setdefault(key, made)
        try:
            if getattr(value, "__deepcopy__", None) is not None:  # the class says how it is copied
                made = copy.deepcopy(value, memo)
            else:
                reductor = copyreg.dispatch_table.get(kind)
                reduced = reductor(value) if reductor is not None else value.__reduce_ex__(4)
                if isinstance(reduced, str):  # a global, pickled by name: itself
                    return value
                made = copy._reconstruct(value, memo, *reduced, deepcopy=self.own)
        except Exception as exc:  # not copyable: the twin gets TTTv1's own object, and the report says so
            self.uncopied.append(f"{kind.__name__} ({type(exc).__name__}: {exc})"[:_MAX_MESSAGE])
            memo[key] = value
            return value
        memo[key] = made
        if made is not value and hasattr(value, "__dict__") and hasattr(made, "__dict__"):
            self.pairs.append((value, made))
        return made


def own_arguments(args: tuple, kwargs: dict) -> tuple[tuple, dict, list[str]]:
    """``(args, kwargs, uncopied)``: the twin's own copies of a TTTv1 constructor's arguments, taken before TTTv1's
    ``__init__`` runs, so neither constructor sees what the other did to a stateful argument (a prefetcher setup
    that each module registers its weights in). Devices, tensors and configs stay shared (``_shared``)."""
    copier = _ArgumentCopier()
    owned_args, owned_kwargs = copier.own((tuple(args), dict(kwargs)))
    return owned_args, owned_kwargs, copier.uncopied
