"""``analyze()``: the one entry point shared by the CLI and the refactor codemod."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path

from tttv2_tools._cli import missing_file

from .engine import Engine, resolve_default_config
from .errors import TraceError, UsageError
from .graphing import build
from .model import Analysis
from .records import Skipped
from .source import Project, common_base

#: Set by the ``trace-deps`` command (``cli.console``) to a list in a reference cycle: each analysis' engine is
#: appended to it instead of being freed when ``analyze()`` returns. That process exits right after its one run, and
#: freeing the engine's objects one by one (ASTs, indexes, caches) took ~10 ms of a ~200 ms run; the operating
#: system takes the memory back at exit at once. ``None`` (the default, every library caller): nothing is kept.
retained: list | None = None


def analyze(
    module_path: str | Path,
    config_path: str | Path | None = None,
    *,
    class_name: str | None = None,
    entry: str | None = None,
    follow_helpers: bool = True,
    auto_config: bool = True,
    base: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Analysis:
    """Statically analyse ``module_path`` (a TTTv1 module) against ``config_path`` (its model_config.py).

    Nothing is imported or executed. With ``config_path=None`` and ``auto_config`` the file
    ``model_config.py`` next to the module is used if it exists. Raises :class:`TraceError` (with
    ``file:line``) for input that cannot be analysed at all: a missing file, a file that does not parse,
    a module without a class that has ``entry`` (default: ``forward``, else ``__call__``). Everything else that cannot be
    understood ends up in ``Analysis.skipped`` and as explicit ``unknown:`` nodes.
    """
    # The analysis allocates many small, short-lived objects and frees them all at the end: the cyclic garbage
    # collector only slows it down (by up to 2x), so it is paused for the duration and restored afterwards.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze(
            module_path, config_path, class_name, entry, follow_helpers, auto_config, base, progress
        )
    finally:
        if enabled:
            gc.enable()


def _analyze(
    module_path, config_path, class_name, entry, follow_helpers, auto_config, base, progress
) -> Analysis:
    started = time.perf_counter()
    module_path = Path(module_path)
    if not module_path.is_file():
        raise UsageError(missing_file(module_path, "MODULE"))
    notes: list[Skipped] = []
    if config_path is not None:
        config_path = Path(config_path)
        if not config_path.is_file():
            raise UsageError(missing_file(config_path, "CONFIG"))
    elif auto_config:
        config_path = resolve_default_config(module_path)
        if config_path is None:
            notes.append(
                Skipped(
                    f"{module_path.name}:1:0",
                    "model_config.py",
                    "no config module given and none next to the module: keys and ModelArgs members stay unresolved",
                    "warning",
                )
            )
    paths = [module_path] + ([config_path] if config_path else [])
    project = Project(Path(base).resolve() if base else common_base(paths))
    module = project.load(module_path)
    config = None
    if config_path is not None:
        config = project.load(config_path)
        if config is module:
            config = None
    engine = Engine(
        project,
        module,
        config,
        class_name=class_name,
        entry=entry,
        follow_helpers=follow_helpers,
        progress=progress,
    )
    if config is not None and engine.st.config_class is None and not engine.config_builders():
        notes.append(
            Skipped(
                f"{config.name}:1:0",
                "ModelArgs",
                "no ModelArgs class (or class using self.model_config) and no function returning a config dict found",
                "warning",
            )
        )
    try:
        engine.run()
    except RecursionError as exc:  # pragma: no cover - every recursive step is depth-limited
        raise TraceError("input nested too deeply to analyse", where=module.name) from exc
    for path, exc in project.failed.items():
        notes.append(
            Skipped(
                exc.where or project.display(path),
                project.display(path),
                f"not analysed: {exc.message}",
                "warning",
            )
        )
    engine.out.skipped.extend(notes)
    elapsed = time.perf_counter() - started
    analysis = build(engine, seconds=round(elapsed, 4))
    analysis.__dict__["_input_paths"] = [*project.files, *project.failed]  # see Analysis.input_paths
    if retained is not None:
        retained.append(engine)
    return analysis


__all__ = ["TraceError", "UsageError", "analyze"]
