"""No if-else on static conditions in any decode_forward / prefill_forward: trace-deps analyses each module file
(``class_name=``, ``entry=``) and every branch it reports in the forward phase — in the module, in the helpers it
calls and in the methods bound at construction — must be classified ``runtime``."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import tttv2.modules as modules
from tttv2_tools.trace_dependencies import analyze

ROOT = Path(modules.__file__).resolve().parent


def _module_classes() -> dict[str, Path]:
    """Every public module class (anything in ``tttv2.modules.__all__`` with a decode_forward) and its file."""
    found = {}
    for name in modules.__all__:
        obj = getattr(modules, name)
        if isinstance(obj, type) and hasattr(obj, "decode_forward"):
            found[name] = Path(inspect.getsourcefile(obj))
    return found


MODULES = _module_classes()


def forward_branches(path: Path, class_name: str, entry: str):
    analysis = analyze(path, None, class_name=class_name, entry=entry)
    return analysis, [b for b in analysis.branches if b.phase == "forward"]


@pytest.mark.parametrize("entry", ["decode_forward", "prefill_forward"])
@pytest.mark.parametrize("class_name", sorted(MODULES))
def test_forward_branches_are_runtime(class_name, entry):
    analysis, branches = forward_branches(MODULES[class_name], class_name, entry)
    assert analysis.module_class == class_name
    assert analysis.ops, (
        f"{class_name}.{entry}: trace-deps found no ttnn op (did it analyse the right entry?)"
    )
    static = [
        f"{b.loc}: {b.construct} {b.test} is {b.classification}"
        for b in branches
        if b.classification != "runtime"
    ]
    assert not static, f"{class_name}.{entry} branches on static conditions:\n" + "\n".join(static)


def test_the_check_catches_a_static_branch(tmp_path):
    """The same check on a module that branches on its config inside decode_forward fails."""
    source = MODULES["Embedding1D"].read_text()
    broken = source.replace(
        "        return self._lookup(x)\n\n    def prefill_forward",
        "        if self.config.embed_scale != 1.0:\n            return self._scaled(self._lookup(x))\n"
        "        return self._lookup(x)\n\n    def prefill_forward",
    )
    assert broken != source
    (tmp_path / "embedding_1d.py").write_text(broken)
    _, branches = forward_branches(tmp_path / "embedding_1d.py", "Embedding1D", "decode_forward")
    assert [b.classification for b in branches if "embed_scale" in b.test] == ["static"]


def test_every_module_class_is_checked():
    expected = {"MLP1D", "MLP2D", "RMSNorm1D", "RMSNorm2D", "Embedding1D", "LMHead1D", "RotarySetup1D"}
    assert expected <= set(MODULES)
    assert all(path.is_relative_to(ROOT) for path in MODULES.values())
