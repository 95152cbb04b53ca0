"""The passes that enter only the subtrees they can change (``walk.hot_paths``: hoisting, call-site copies,
construction code, field values, specialisation, dead code...) give exactly what full LibCST passes give."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import tttv2_tools.refactor as refactor_package
from tttv2_tools.refactor.run import plan_run

ROOT = Path(__file__).resolve().parents[3]


def _outputs(module: Path, out: Path) -> dict[str, str]:
    run = plan_run(module, None, out=out)  # the generated tests do not depend on these passes
    texts = {item.path.name: item.text for item in run.planned}
    texts["report.md"] = run.report.to_markdown()
    texts["report.json"] = run.report.to_json()
    return texts


def test_hot_paths_change_nothing_but_the_work(tmp_path, monkeypatch):
    module = ROOT / "tttv1" / "tt" / "rmsnorm.py"  # a helper copy, fields, bound choices, construction code
    entered_only = _outputs(module, tmp_path)
    users = []
    for info in pkgutil.iter_modules(refactor_package.__path__):
        loaded = importlib.import_module(f"{refactor_package.__name__}.{info.name}")
        if hasattr(loaded, "hot_paths"):
            users.append(info.name)
            monkeypatch.setattr(loaded, "hot_paths", lambda *args, **kwargs: None)  # None: enter everything
    assert {"hoist", "inline", "fields", "emit", "specialise", "plan"} <= set(users)
    full = _outputs(module, tmp_path)
    assert full.keys() == entered_only.keys()
    for name, text in full.items():
        assert entered_only[name] == text, name


def test_kept_walks_change_nothing_but_the_work(tmp_path, monkeypatch):
    """A walk read back from the run's memo (``walk.walk``) gives what a fresh walk gives: the same outputs."""
    from tttv2_tools.refactor import walk as walk_module

    module = ROOT / "tttv1" / "tt" / "lm_head.py"  # helper copies from ccl.py, fields, bound choices
    kept = _outputs(module, tmp_path)

    def fresh(node, enter=None):  # never kept, never read back
        return walk_module._walk(node, enter or (lambda _: True))

    for info in pkgutil.iter_modules(refactor_package.__path__):
        loaded = importlib.import_module(f"{refactor_package.__name__}.{info.name}")
        if getattr(loaded, "walk", None) is walk_module.walk:
            monkeypatch.setattr(loaded, "walk", fresh)
    assert fresh is importlib.import_module(f"{refactor_package.__name__}.members").walk
    full = _outputs(module, tmp_path)
    assert full == kept


def test_generated_code_is_rendered_once_per_module_object(tmp_path):
    import libcst as cst

    run = plan_run(ROOT / "tttv1" / "tt" / "embedding.py", None, out=tmp_path)
    generated = run.result.modules[0]
    first = generated.code
    assert generated.code is first and first == generated.rendered.module.code
    generated.rendered.module = generated.rendered.module.with_changes(
        body=[*generated.rendered.module.body, cst.parse_statement("X = 1\n")]
    )
    assert generated.code == first + "X = 1\n"
