"""What the tests ``tttv2-refactor --tests-out`` writes run, with no knowledge of the module's kind.

A generated test names the TTTv1 class and the generated class; everything else comes from **pytest fixtures
named after the parameters** of the TTTv1 constructor (``mesh_device``, ``args``, ``state_dict``, ``tt_ccl``, …)
and of its forward (``x``, ``current_pos``, …), which the user's ``conftest.py`` provides once for the whole
repository (docs/refactor.md, "Generated tests", has the convention). A parameter with a default and no fixture
of its name keeps its default; one with neither is a one-line test failure naming the fixture to write.

- ``load_generated`` / ``load_legacy``: the generated class and the TTTv1 class from their files (paths relative to
  the test file), so the test runs the input's own code, not a module that happens to share its name;
- ``constructor_arguments`` / ``forward_arguments``: the fixture values of a constructor's / forward's parameters;
  ``recorded_input``: a tensor of a recorded case's shape and dtype (collect-cases);
- ``assert_matches_tttv1``: the TTTv1 module and its twin (``equivalence.build_twin``) built from the same
  arguments, called on copies of the same inputs, outputs identical to the bit (``equivalence``);
- ``assert_refuses_mesh``: the generated class refuses TTTv1's own arguments on a mesh of the other topology.

Only ``tttv2.testing`` and the user's code are imported: the tests run wherever the generated modules run.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import os
import sys
import typing
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tttv2.testing.equivalence import assert_equivalent_outputs, build_twin, clone_inputs

__all__ = [
    "MODE_PARAMETERS",
    "assert_matches_tttv1",
    "assert_refuses_mesh",
    "build_pair",
    "constructor_arguments",
    "forward_arguments",
    "load_generated",
    "load_legacy",
    "recorded_input",
]

#: Names of a forward's mode parameter (the case's mode is passed there; trace-deps reads the same names).
MODE_PARAMETERS = ("mode", "llm_mode")


# --- loading ---------------------------------------------------------------------------------------------------
def load_generated(test_file: str, relative: str, class_name: str):
    """The class ``class_name`` of the generated module at ``relative`` (a path from the test file's folder)."""
    path = (Path(test_file).parent / relative).resolve()
    if not path.is_file():
        raise ImportError(f"load_generated: the generated module {path} does not exist")
    module = _exec_file(path, f"_tttv2_refactor_generated_{path.stem}_{abs(hash(str(path)))}")
    if not isinstance(getattr(module, class_name, None), type):
        raise ImportError(f"load_generated: {path} has no class {class_name}")
    return getattr(module, class_name)


def load_legacy(test_file: str, relative: str, dotted: str, class_name: str):
    """The class ``class_name`` of the TTTv1 module the tests were generated from (``relative``: its path from
    the test file's folder): imported by its dotted name when that name resolves to this very file, else loaded
    from the file under a private name in the same package (imported first, so that its relative imports and any
    import hook it installs work). Either way it is the input's own code."""
    path = (Path(test_file).parent / relative).resolve()
    if not path.is_file():
        raise ImportError(
            f"load_legacy: the TTTv1 module {path} (the input of tttv2-refactor) does not exist"
        )
    module = _imported_as(dotted, path)
    if module is None:
        package = dotted.rpartition(".")[0]
        if package:
            try:
                importlib.import_module(package)
            except ImportError:
                package = ""  # not importable here: load the file on its own
        private = f"_tttv2_refactor_tttv1_{path.stem}_{abs(hash(str(path)))}"
        module = _exec_file(path, f"{package}.{private}" if package else private)
    if not isinstance(getattr(module, class_name, None), type):
        raise ImportError(f"load_legacy: {path} has no class {class_name}")
    return getattr(module, class_name)


def _imported_as(dotted: str, path: Path):
    """The module ``dotted`` when importing it gives the file ``path``, else None."""
    try:
        spec = importlib.util.find_spec(dotted)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if not origin or not os.path.isfile(origin) or not os.path.samefile(origin, path):
        return None
    return importlib.import_module(dotted)


def _exec_file(path: Path, name: str):
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


# --- arguments from fixtures -----------------------------------------------------------------------------------
def _fail(message: str):
    import pytest

    pytest.fail(message, pytrace=False)


def _lookup_error() -> type:
    """pytest's missing-fixture error (``pytest.FixtureLookupError``; before pytest exported it, its own module's)."""
    import pytest

    return (
        getattr(pytest, "FixtureLookupError", None)
        or importlib.import_module("_pytest.fixtures").FixtureLookupError
    )


def _fixture(request, name: str):
    """``(True, value)`` of the fixture ``name``, or ``(False, None)`` when no fixture has that name (a fixture
    that exists but needs a missing one is the user's error and propagates)."""
    try:
        return True, request.getfixturevalue(name)
    except _lookup_error() as exc:
        if exc.argname != name:
            raise
        return False, None


def _parameters(function) -> list[inspect.Parameter]:
    params = list(inspect.signature(function).parameters.values())
    return [p for p in params[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def constructor_arguments(request, cls: type) -> dict:
    """``{parameter: value}`` for ``cls.__init__``: each parameter's fixture; a parameter with a default and no
    fixture of its name is left out (the default applies); one with neither fails the test, naming it."""
    out = {}
    for param in _parameters(cls.__init__):
        found, value = _fixture(request, param.name)
        if found:
            out[param.name] = value
        elif param.default is param.empty:
            _fail(
                f"{cls.__name__}.__init__ needs `{param.name}`: no fixture of that name "
                "(provide it in conftest.py; docs/refactor.md, 'Generated tests')"
            )
    return out


def _required_fixture(request, cls: type, name: str):
    found, value = _fixture(request, name)
    if not found:
        _fail(
            f"{cls.__name__} reads its config from one dict per mode: the test needs `{name}` (that mode's dict; "
            "provide it in conftest.py; docs/refactor.md, 'Generated tests')"
        )
    return value


def _entry(cls: type):
    return cls.forward if "forward" in dir(cls) else cls.__call__


def _mode_value(cls: type, param: inspect.Parameter, mode: str):
    """The case's mode as the forward takes it: a member of the Enum its default or annotation names
    (``mode=Mode.DECODE``, ``mode: Mode``), else the string."""
    kind = type(param.default) if isinstance(param.default, enum.Enum) else None
    if kind is None:
        try:
            hint = typing.get_type_hints(_entry(cls)).get(param.name)
        except Exception:  # an annotation that does not resolve here: take the string
            hint = None
        kind = hint if isinstance(hint, type) and issubclass(hint, enum.Enum) else None
    if kind is None:
        return mode
    for member in kind:
        if member.value == mode or member.name.lower() == mode:
            return member
    return mode


def forward_arguments(request, cls: type, mode: str, recorded: dict | None = None, mesh_device=None) -> dict:
    """``{parameter: value}`` for one call of ``cls``'s forward in ``mode``: the mode parameter gets the mode;
    every other parameter its fixture, else (given ``recorded``, the input specs of a recorded case) a tensor of
    the recorded shape and dtype (``recorded_input``), else its default; a parameter with none of these fails the
    test, naming it. A fixture's tensor must have the recorded shape when the case recorded one."""
    recorded = recorded or {}
    out = {}
    for index, param in enumerate(_parameters(_entry(cls))):
        if param.name in MODE_PARAMETERS:
            out[param.name] = _mode_value(cls, param, mode)
            continue
        found, value = _fixture(request, param.name)
        spec = recorded.get(param.name)
        if found:
            if spec is not None:
                _check_recorded(cls, param.name, value, spec)
            out[param.name] = value
        elif spec is not None:
            if mesh_device is None:
                mesh_device = request.getfixturevalue("mesh_device")
            out[param.name] = recorded_input(spec, mesh_device, seed=index)
        elif param.default is param.empty:
            _fail(
                f"{cls.__name__}.{_entry(cls).__name__} needs `{param.name}`: no fixture of that name and no "
                "recorded input (provide it in conftest.py; docs/refactor.md, 'Generated tests')"
            )
    return out


def _check_recorded(cls: type, name: str, value, spec) -> None:
    specs = spec if isinstance(spec, list) else [spec]
    values = value if isinstance(value, (list, tuple)) else [value]
    for one, want in zip(values, specs):
        shape = list(getattr(one, "shape", ()))
        if isinstance(want, dict) and shape != list(want.get("shape", shape)):
            _fail(
                f"{cls.__name__}: the fixture `{name}` gives shape {shape}, the recorded case has "
                f"{list(want['shape'])}"
            )


def recorded_input(spec, mesh_device, seed: int = 0):
    """A tensor (or a list of them, for a list of specs) of a recorded input ``{"shape": [...], "dtype": name}``
    (collect-cases records the shape each device sees and the dtype): replicated on ``mesh_device``, in DRAM,
    tile layout for float dtypes and row-major for integer ones (unless the spec records a ``"layout"``); values
    seeded normal floats, or integers in [0, 32) (token ids, positions) for integer dtypes."""
    from tttv2 import ttnn

    if isinstance(spec, list):
        return [recorded_input(s, mesh_device, seed + i) for i, s in enumerate(spec)]
    shape = tuple(int(d) for d in spec["shape"])
    dtype = getattr(ttnn, str(spec.get("dtype") or "bfloat16"))
    rng = np.random.default_rng(seed)
    integer = str(spec.get("dtype", "")).startswith(("uint", "int"))
    values = (
        rng.integers(0, 32, size=shape).astype(np.int32)
        if integer
        else rng.standard_normal(shape).astype(np.float32)
    )
    layout = spec.get("layout") or ("row_major" if integer else "tile")
    return ttnn.from_numpy(
        values,
        dtype=dtype,
        layout=ttnn.ROW_MAJOR_LAYOUT if layout.lower().startswith("row") else ttnn.TILE_LAYOUT,
        device=mesh_device,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
    )


# --- the checks ------------------------------------------------------------------------------------------------
_PAIRS: dict[tuple, tuple] = {}


def build_pair(request, tttv1_class: type, classes: Sequence[type]):
    """(TTTv1 module, twin): both built from the constructor's fixtures, the twin by ``equivalence.build_twin``
    (the first of ``classes`` that accepts the arguments). Kept while the same argument objects come back (the
    fixtures of one mesh and model), so that every mode of a case reuses them, as a model does."""
    return _pair(tttv1_class, classes, constructor_arguments(request, tttv1_class))


def _pair(
    tttv1_class: type,
    classes: Sequence[type],
    kwargs: dict,
    legacy_only: bool = False,
    extra: dict | None = None,
):
    """The cached pair (``legacy_only``: the TTTv1 module alone, its twin built on the next call, with ``extra``
    keywords besides TTTv1's arguments)."""
    extra = extra or {}
    key = (tttv1_class, tuple(classes), tuple((k, id(v)) for k, v in [*kwargs.items(), *extra.items()]))
    entry = _PAIRS.get(key)
    if entry is None:
        if len(_PAIRS) >= 4:
            _PAIRS.clear()
        entry = _PAIRS[key] = [
            tttv1_class(**kwargs),
            None,
            {**kwargs, **extra},
        ]  # the arguments stay alive: ids not reused
    if legacy_only:
        return entry[0]
    if entry[1] is None:
        entry[1] = build_twin(classes, kwargs={**kwargs, **extra})[0]
    return entry[0], entry[1]


def assert_matches_tttv1(
    request,
    tttv1_class: type,
    classes: Sequence[type],
    mode: str,
    recorded: dict | None = None,
    *,
    atol: float = 0.0,
    rtol: float = 0.0,
    setter: str | None = None,
) -> None:
    """The TTTv1 module and the first of ``classes`` that accepts its arguments, built from the constructor's
    fixtures, called on identical copies of the forward's arguments: the outputs are identical to the bit (shape,
    dtype, layout, memory config, every device's values), or to ``atol`` / ``rtol``; the failure names the first
    difference (``equivalence.first_difference``).

    ``setter``: TTTv1 reads its config from one dict per mode and switches dicts with this method
    (``set_model_config``; the mode read from the dict, Llama-2-70B T3000 style, or passed to a forward that
    takes it, Falcon-40B style). The fixtures ``decode_model_config`` / ``prefill_model_config`` give each
    mode's dict: TTTv1 is switched to the case's mode's dict before the call, the twin is built with both
    (``from_model_args``' keywords of those names) and is called with ``mode=`` when TTTv1's forward takes no
    mode of its own."""
    kwargs = constructor_arguments(request, tttv1_class)
    call = forward_arguments(request, tttv1_class, mode, recorded)
    name = tttv1_class.__name__
    extra, twin_call = {}, call
    if setter is not None:
        extra = {
            f"{m}_model_config": _required_fixture(request, tttv1_class, f"{m}_model_config")
            for m in ("decode", "prefill")
        }
        if not set(call) & set(MODE_PARAMETERS):
            twin_call = {**call, "mode": mode}
    try:
        legacy = _pair(tttv1_class, classes, kwargs, legacy_only=True, extra=extra)
        if setter is not None:
            getattr(legacy, setter)(extra[f"{mode}_model_config"])
        expected = legacy(**clone_inputs(call))
    except Exception as exc:  # the case is outside what TTTv1 itself runs: nothing to compare with
        raise AssertionError(
            f"TTTv1 {name} itself raised on this case ({type(exc).__name__}: {exc}); the fixtures or the case "
            "give it arguments it does not support"
        ) from exc
    try:
        twin = _pair(tttv1_class, classes, kwargs, extra=extra)[1]
        got = twin(**clone_inputs(twin_call))
    except Exception as exc:
        raise AssertionError(
            f"the generated module raised where TTTv1 {name} did not ({type(exc).__name__}: {exc})"
        ) from exc
    assert_equivalent_outputs(expected, got, atol=atol, rtol=rtol, what=f"{name} {mode}")


def assert_refuses_mesh(request, tttv1_class: type, generated: type, other: str | None) -> None:
    """``generated.from_model_args`` on TTTv1's own arguments for a mesh of the other topology raises the
    topology refusal (a ``ValueError``) naming ``other`` (the class for that mesh)."""
    from tttv2.modules._topology import TopologyError

    kwargs = constructor_arguments(request, tttv1_class)
    try:
        generated.from_model_args(**kwargs)
    except TopologyError as exc:
        if other and other not in str(exc):
            raise AssertionError(
                f"{generated.__name__} refused the mesh without naming {other}: {exc}"
            ) from exc
        return
    raise AssertionError(f"{generated.__name__} accepted a mesh of the other topology")
