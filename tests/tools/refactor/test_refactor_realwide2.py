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
    assert result.gaps == []  # the base's forward_prefill is copied (branch superbase; it was a gap)
    assert "super()" not in result.modules[0].code.split("def load_device_weights")[1]


def test_a_super_call_gap_names_the_base_method_it_runs(tmp_path):
    """``super().forward_prefill(x)`` that binds is copied (``test_refactor_superbase.py``); one the tool cannot
    copy is a gap that says which method it runs and where, found through the imports as Python would
    (Qwen2.5-VL's vision attention: ``Attention`` of ``tt_transformers/tt/attention.py``; its distributed norm:
    ``DistributedNorm.forward``); a method no readable base defines is said so (an installed base, or an
    ``AttributeError`` in TTTv1 too)."""
    root = _tree(tmp_path, _NAMESPACE_TREE)
    child = root / "models/demos/qv/tt/vattn.py"
    assert generate(child).gaps == []
    text = child.read_text()
    child.write_text(text.replace("super().forward_prefill(x)", "super().forward_cached(x)"))
    (gap,) = generate(child).gaps
    assert gap.what == "super().forward_cached(...)"
    assert "no base class of VisionAttn that the tool can read defines forward_cached" in gap.reason
    # a subclass written against another version of its base: TTTv1 raises, and the gap says so (Qwen2.5-VL's
    # ``super().forward_prefill(…, mask=tt_mask)`` on an ``Attention.forward_prefill`` without ``mask``)
    child.write_text(
        text.replace("super().forward_prefill(x)", "super().forward_prefill(x, mask=None, kv=1)")
    )
    (gap,) = generate(child).gaps
    assert gap.reason == (
        "the call does not match the base class's AttnBase.forward_prefill (tt_transformers/tt/attn_base.py:10) "
        "(got an unexpected keyword argument 'kv'): TypeError when TTTv1 runs it too"
    )
    child.write_text(text.replace("super().forward_prefill(x)", "super().forward_prefill(*[x, None])"))
    (gap,) = generate(child).gaps  # arguments unpacked: not decided without running them
    assert gap.reason == (
        "a call of the base class's AttnBase.forward_prefill (tt_transformers/tt/attn_base.py:10) with unpacked "
        "arguments (*args / **kwargs): not copied into the generated class"
    )
    # the base's method runs super() itself: relative to the base, so not copied
    child.write_text(text)
    base = root / "models/tt_transformers/tt/attn_base.py"
    before = base.read_text()
    base.write_text(
        before.replace("def forward_prefill(self, x, mask=None):", "def forward_prefill(self, x, **opts):")
    )
    (gap,) = generate(child).gaps  # the copy binds parameters by name: a catch-all is not copied
    assert gap.reason == (
        "a call of the base class's AttnBase.forward_prefill (tt_transformers/tt/attn_base.py:10), which takes "
        "*args / **kwargs: not copied into the generated class"
    )
    base.write_text(before)
    base.write_text(
        base.read_text().replace("        return x\n", "        return super().forward_prefill(x)\n")
    )
    (gap,) = generate(child).gaps
    assert gap.what == "super().forward_prefill(...)"
    assert gap.reason == (
        "a call of the base class's AttnBase.forward_prefill (tt_transformers/tt/attn_base.py:10), not copied into "
        "the generated class: it calls super() itself (relative to AttnBase, not copied)"
    )
    base.write_text(
        before.replace("    def forward_prefill", "    @functools.cache\n    def forward_prefill")
    )
    (gap,) = generate(child).gaps
    assert gap.reason.endswith(
        "not copied into the generated class: it is decorated (@functools.cache): the copy would run the "
        "undecorated body"
    )


def test_base_method_takes_the_nearest_base_that_defines_it(tmp_path):
    """Depth first, the first base that defines the method wins and the bases after it are not read; the class's
    own method does not count (``super()`` skips it)."""
    from tttv2_tools.refactor.bases import base_method

    source = tmp_path / "two.py"
    source.write_text(
        "class A:\n    def run(self):\n        pass\n\n\nclass B:\n    def run(self):\n        pass\n\n\n"
        "class Two(A, B):\n    def run(self):\n        return super().run()\n"
    )
    assert base_method("Two", source, source.read_text(), "run")[:3] == ("A", source, 2)
    assert base_method("A", source, source.read_text(), "run") is None


def test_a_name_imported_from_a_module_that_lacks_it_is_one_gap(tmp_path):
    """tt-metal's cross attention imports ``Mode`` from a ``common.py`` of another commit, which has no ``Mode``:
    one defect, reported once, at the import, saying where the generated code reads the name (it was two gaps:
    that one, and a vaguer "read by the generated code but neither defined nor imported" at the generated line)."""
    import json
    import re

    from tttv2_tools.refactor.cli import main

    root = _tree(
        tmp_path,
        {
            "models/tt/common.py": "def pad(x):\n    return x\n",
            "models/tt/xattn.py": (
                "import ttnn\nfrom models.tt.common import Mode\n\n\nclass XAttn:\n"
                "    def __init__(self, mesh_device, norm):\n        self.norm = norm\n\n"
                "    def forward(self, x, mode):\n        return self.norm(ttnn.add(x, x), mode=Mode.DECODE)\n"
            ),
        },
    )
    report = tmp_path / "r.json"
    code = main(
        [str(root / "models/tt/xattn.py"), "--out", str(tmp_path / "out"), f"--json={report}", "--quiet"]
    )
    gaps = json.loads(report.read_text())["gaps"]
    assert code == 1
    assert [(g["loc"], g["what"]) for g in gaps] == [("xattn.py:2", "Mode")]
    assert gaps[0]["reason"].startswith(
        "needed at run time and imported from models.tt.common, which does not"
    )
    assert re.search(r"; the generated code reads it at xattn_1d\.py:\d+$", gaps[0]["reason"])


# Qwen2.5-VL's ``QwenVLDistributedNorm(DistributedNorm)`` / ``VisionAttention(Attention)``: the base is in
# ``models/tt_transformers/tt``, imported by the demo's file; its forward runs the base's through ``super()``.
_BASE_IN_ANOTHER_FILE = {
    "models/demos/qv/tt/model_config.py": (
        "class ModelArgs:\n    def __init__(self, mesh_device):\n        self.norm_eps = 1e-5\n"
        '        self.model_config = {}\n        self.model_config["DECODE_NORM_MEMCFG"] = None\n\n'
        "    def get_model_config(self):\n        return self.model_config\n"
    ),
    "models/tt_transformers/tt/norm_base.py": (
        "import ttnn\n\n\nclass NormBase:\n    def __init__(self, args):\n        self.args = args\n"
        '        self.eps = args.norm_eps\n\n    def forward(self, x, mode):\n        if mode == "decode":\n'
        '            x = ttnn.to_memory_config(x, self.args.get_model_config()["DECODE_NORM_MEMCFG"])\n'
        "        return ttnn.rms_norm(x, epsilon=self.eps)\n"
    ),
    "models/demos/qv/tt/qnorm.py": (
        "import ttnn\nfrom models.tt_transformers.tt.norm_base import NormBase\nfrom models.gone import Traced\n\n\n"
        "class QNorm(NormBase, Traced):\n"
        "    def __init__(self, args, TG=False):\n        super().__init__(args)\n        self.TG = TG\n\n"
        "    def forward(self, x, mode):\n        if self.TG:\n            return ttnn.neg(x)\n"
        "        return super().forward(x, mode)\n"
    ),
}


def test_trace_deps_follows_super_into_a_base_of_another_file(tmp_path):
    """trace-deps reads the base's methods when the base is imported from another file of the project (it said
    "no analysed base class defines forward(): not followed", and reported 0 config keys and 0 ModelArgs members
    for Qwen2.5-VL's vision attention, whose whole forward is its base's)."""
    from tttv2_tools.trace_dependencies import analyze

    root = _tree(tmp_path, _BASE_IN_ANOTHER_FILE)
    analysis = analyze(root / "models/demos/qv/tt/qnorm.py", root / "models/demos/qv/tt/model_config.py")
    assert analysis.unknowns() == [] and analysis.skipped == []
    assert "DECODE_NORM_MEMCFG" in analysis.keys_read()
    assert analysis.paths["decode/non-galaxy"] == ["ttnn.rms_norm", "ttnn.to_memory_config"]
    callees = {(c.caller.rsplit(":", 1)[1], c.callee.rsplit(":", 1)[1]) for c in analysis.calls}
    assert {("QNorm.forward", "NormBase.forward"), ("QNorm.__init__", "NormBase.__init__")} <= callees


def test_a_super_init_that_cannot_bind_is_a_gap(tmp_path):
    """Construction runs the base's ``__init__`` as written, so only a call that cannot bind is reported: TTTv1
    itself cannot be built (Qwen2.5-VL's ``QwenVLDistributedNorm`` passes seven arguments to the five of a
    ``DistributedNorm.__init__`` of another commit, under ``if not TG:``). Arguments unpacked from ``*args`` /
    ``**kwargs`` are not decided (the vision attention's)."""
    root = _tree(tmp_path, _NAMESPACE_TREE)
    child = root / "models/demos/qv/tt/vattn.py"
    text = child.read_text().replace("super().forward_prefill(x)", "x")
    child.write_text(text)
    assert generate(child).gaps == []  # super().__init__(*args, **kwargs): not decided
    child.write_text(
        text.replace(
            "super().__init__(*args, **kwargs)",
            "if kwargs:\n            super().__init__(args[0], 1.0, False, 2)",
        )
    )
    gap = next(g for g in generate(child).gaps if g.what == "super().__init__(...)")
    assert gap.loc == "vattn.py:9"
    assert gap.reason == (
        "the call does not match the base class's AttnBase.__init__ (tt_transformers/tt/attn_base.py:5) "
        "(too many positional arguments): TypeError when TTTv1 is built too"
    )


def test_a_topology_check_without_a_mesh_parameter_names_init_and_its_parameters(tmp_path):
    """A module with galaxy code whose ``__init__`` takes no mesh, galaxy flag or ModelArgs (Qwen2.5-VL's
    ``VisionAttention.__init__(self, *args, **kwargs)``, handing everything to its base): the gap is at the
    ``def __init__`` line and lists what it takes (it was at line 1, naming nothing)."""
    source = tmp_path / "wrapped.py"
    body = (
        "        self.mesh_device = kwargs['mesh_device']\n        self.gain = kwargs['gain']\n\n"
        "    def forward(self, x):\n        if self.mesh_device.get_num_devices() == 32:\n"
        "            return ttnn.neg(x)\n        return ttnn.mul(x, self.gain)\n"
    )
    source.write_text(
        "import ttnn\n\n\nclass Wrapped:\n    # built by a factory\n    def __init__(self, *args, **kwargs):\n"
        + body
    )
    (gap,) = generate(source).gaps
    assert (gap.loc, gap.what) == ("wrapped.py:6", "Wrapped.__init__")
    assert gap.reason.endswith("to check the topology with (its parameters: *args, **kwargs)")
    source.write_text(
        "import ttnn\n\n\nclass Wrapped:\n    def __init__(self, gain, *, kwargs):\n"
        + body.replace("['gain']", "")
    )
    (gap,) = generate(source).gaps
    assert gap.loc == "wrapped.py:5" and gap.reason.endswith("(its parameters: gain)")


def test_a_super_init_under_a_test_runs_the_bases_init_where_tttv1_does(tmp_path):
    """``if not TG: super().__init__(…)`` (Qwen2.5-VL's norm): the base's ``__init__`` runs under the same test in
    ``from_model_args``, on an uninitialised TTTv1 instance, and the attributes it sets are fields like any other
    (only a top-level call counted before: ``self.scale`` was a gap, "__init__ does not set it")."""
    root = _tree(tmp_path, _NAMESPACE_TREE)
    child = root / "models/demos/qv/tt/vattn.py"
    text = child.read_text().replace("super().forward_prefill(x)", "x")
    child.write_text(
        text.replace(
            "super().__init__(*args, **kwargs)",
            "if kwargs:\n            super().__init__(args[0], 1.0, False)",
        )
    )
    result = generate(child)
    assert result.gaps == []
    code = result.modules[0].code
    assert "legacy = VisionAttn.__new__(VisionAttn)" in code
    assert "        if kwargs:\n            super(VisionAttn, legacy).__init__(args[0], 1.0, False)\n" in code
    assert "scale=legacy.scale" in code
