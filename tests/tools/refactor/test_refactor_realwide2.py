"""Constructs met on the fourth pass over tt-metal modules (issue 21, helper ``realwide2``): Qwen2.5-VL's vision
modules, tt_transformers' cross attention and positional embedding, Mistral-Small-24B's vision attention and block."""

from __future__ import annotations

from pathlib import Path

from tests.tools.refactor.conftest import generate


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# A checkout of tt-metal's ``models/`` has no ``__init__.py``: a demo's module (``models/demos/qv/tt``) subclasses
# a class of ``models/tt_transformers/tt``, whose file imports its own base relatively (a package's ``__init__.py``, itself importing its base relatively;
# Qwen2.5-VL's
# ``VisionAttention(Attention)``, whose ``__init__`` only edits its keyword arguments before ``super().__init__``).
_NAMESPACE_TREE = {
    "models/tt_transformers/tt/grand/__init__.py": (
        "from .root import Root\n\n\nclass Grand(Root):\n    def __init__(self, mesh_device):\n"
        "        super().__init__()\n        self.mesh_device = mesh_device\n"
    ),
    "models/tt_transformers/tt/grand/root.py": "class Root:\n    def __init__(self):\n        self.tile = 32\n",
    "models/tt_transformers/tt/attn_base.py": (
        "from .grand import Grand\n\n\nclass AttnBase(Grand):\n"
        "    def __init__(self, mesh_device, scale=1.0, causal=True):\n"
        "        super().__init__(mesh_device)\n        self.scale = scale\n        self.causal = causal\n\n"
        "    def forward_prefill(self, x, mask=None):\n        return x\n"
    ),
    "models/demos/qv/tt/vattn.py": (
        "import ttnn\nfrom models.tt_transformers.tt.attn_base import AttnBase\n\n\n"
        "class VisionAttn(AttnBase):\n    def __init__(self, *args, **kwargs):\n"
        '        kwargs["causal"] = False\n        super().__init__(*args, **kwargs)\n\n'
        "    def forward(self, x):\n        return ttnn.mul(super().forward_prefill(x), self.scale)\n"
    ),
}


def test_a_base_in_another_folder_of_a_namespace_tree_is_read_not_a_crash(tmp_path):
    """The base's file lies outside the input's first-party folder (no ``__init__.py`` anywhere): its package is
    the module it was resolved as (a package's ``__init__.py``: the package itself), so the relative imports of
    its own bases resolve too. It was an internal error
    (``ValueError: … is not in the subpath of …``, exit 3) on Qwen2.5-VL's ``vision_attention.py``."""
    from tttv2_tools.refactor.bases import base_attributes

    root = _tree(tmp_path, _NAMESPACE_TREE)
    child = root / "models/demos/qv/tt/vattn.py"
    assert base_attributes("VisionAttn", child, child.read_text()) == {
        "scale": "attn_base.py:7",
        "causal": "attn_base.py:8",
        "mesh_device": "__init__.py:7",
        "tile": "root.py:3",
    }
    result = generate(child)
    assert [(g.loc, g.what) for g in result.gaps] == [("vattn.py:11", "super().forward_prefill(...)")]
