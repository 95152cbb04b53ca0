"""Constructs met on tt-metal modules the toolkit had not been tried on (issue 21, helper ``realwide``), on the
``inputs/rwide`` package: each generated module is run against its TTTv1 class, bit for bit, on the emulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    InputPackage,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    replicated,
)
from tttv2 import ttnn

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rwide"

inputs_importable = importable_inputs(PACKAGE)

_inputs = InputPackage(PACKAGE)
_generate = _inputs.generate
_tttv1 = _inputs.tttv1


def _state_dict() -> dict:
    import torch

    torch.manual_seed(0)
    return {"scale.gain": torch.randn(64), "scale.bias": torch.randn(64)}


def _rows(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


# ------------------------------------------------------------------------------------------ static methods
def test_a_static_method_keeps_its_first_parameter():
    """``self.fold_halves(gain, bias)`` in ``__init__`` runs in ``from_model_args`` as a local function: its first
    parameter is data, not ``self`` (tt_transformers' ``RotaryEmbedding.permute_to_meta_format(cos, sin)``; the
    copy was ``def fold_halves(bias)`` reading ``gain`` unbound, and the tool exited 0 on it). The static method
    the forward calls through ``self`` with a config flag is copied per flag value like a helper function (it
    was a static branch left)."""
    result = _generate("folded_scale")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert "def fold_halves(gain: torch.Tensor, bias: torch.Tensor):" in code
    assert "if subtract" not in code.split("def forward")[1]


@pytest.mark.parametrize("subtract_bias", [False, True])
def test_the_folded_scale_matches_tttv1_bit_for_bit(subtract_bias, tmp_path):
    generated = generated_class(_generate("folded_scale"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh, subtract_bias=subtract_bias)
        old = _tttv1("folded_scale", "TtFoldedScale")(mesh, args, _state_dict())
        new = generated.from_model_args(mesh, args, _state_dict())
        for rows in (32, 64):
            expected = old.forward(replicated(_rows(rows), mesh))
            got = new.forward(replicated(_rows(rows), mesh))
            assert_identical(expected, got, f"{shape} {rows} rows")
        ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ sub-module calls
def test_a_sub_module_built_with_the_arguments_of_another_version_is_a_gap(tmp_path, capsys):
    """``TtPatchAttention(mesh_device, state_dict, state_dict_prefix=…)`` against an ``__init__(mesh_device,
    tt_ccl, state_dict, …)`` in another file of the package (tt-metal's image block and image attention of two
    eras): TTTv1 raises ``TypeError`` when it builds the block, and so would the generated ``from_model_args``.
    The run names the call and the definition and exits 1; before, it exited 0."""
    from tttv2_tools.refactor.cli import main

    code = main(
        [
            str(INPUTS / PACKAGE / "patch_block.py"),
            str(INPUTS / PACKAGE / "model_config.py"),
            "--out",
            str(tmp_path / "out"),
            "--partial",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert (
        "TtPatchAttention(...): the call does not match rwide.patch_attention.TtPatchAttention.__init__"
        in err
    )
    assert "missing a required argument: 'state_dict'" in err


def test_a_sub_module_whose_constructor_call_binds_is_no_gap():
    """Only the call that does not bind: not one of a module the package lacks, of a class with no
    ``__init__`` of its own (a base's), or of a name bound again."""
    from tttv2_tools.refactor.names import call_mismatches

    text = (
        "from rwide.patch_attention import TtPatchAttention\n"
        "from rwide.missing_module import Other\n"
        "from rwide.lightweightmodule import LightweightModule\n"
        "from rwide.patch_block import TtPatchBlock\n"
        "def build(mesh_device, ccl, sd, cfg):\n"
        "    a = TtPatchAttention(mesh_device, ccl, sd, 'p.', None, configuration=cfg)\n"
        "    b = TtPatchAttention(mesh_device, sd, state_dict_prefix='p.', dtype=None, configuration=cfg)\n"
        "    TtPatchBlock = None\n"
        "    return a, b, Other(1), LightweightModule(1, 2), TtPatchBlock\n"
    )
    gaps = call_mismatches(text, "x_1d.py", root=INPUTS)
    assert [(g.loc, g.what) for g in gaps] == [("x_1d.py:7", "TtPatchAttention(...)")]
    assert call_mismatches(text, "x_1d.py") == []  # without the root, imported classes are not read


# ------------------------------------------------------------------------------------------ files above the module
def test_hardware_queries_imported_from_above_the_module_folder_are_decided_at_construction():
    """``from rwide.utility_functions import is_grayskull, is_wormhole_b0`` in ``rwide/dense/``: the analysis
    names a file outside the inputs' common folder by its bare name, and the codemod looked for it next to the
    module, did not find it, and so knew neither function: the ``if is_grayskull(): cfg = … elif …`` chains of
    both helpers stayed in the forward with ``pass`` arms while their values became a field computed from an
    undefined name (Falcon-7B's ``falcon_mlp.py`` importing ``models.utility_functions``)."""
    result = _generate("dense/dense_gelu")
    assert_no_static_branch(result)
    code = result.modules[0].code
    forward = code.split("    def forward")[1]
    assert "is_grayskull" not in forward and "is_wormhole_b0" not in forward
    assert "from rwide.utility_functions import is_grayskull, is_wormhole_b0" in code


def test_an_assert_a_call_site_constant_makes_false_is_an_assert_false():
    """``assert fused_activation is None`` in the helper's copy for ``fused_activation="gelu"``: the test is the
    literal ``False``; it was bound as a choice on ``not False`` (``self._forward_not_false = … if not False
    else …``), it is now the ``assert False`` TTTv1 reaches there (an assert: stripped under ``python -O`` as TTTv1's is)."""
    code = _generate("dense/dense_gelu").modules[0].code
    up = code.split("    def _dense_up")[1].split("    def ")[0]
    assert "if rows > 1024:\n            assert False  # noqa: B011" in up  # an assert still (python -O)
    assert "not False" not in code and "_not_false" not in code


def test_the_dense_gelu_matches_tttv1_bit_for_bit(tmp_path):
    import torch

    generated = generated_class(_generate("dense/dense_gelu"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    torch.manual_seed(0)
    state_dict = {"mlp.up.weight": torch.randn(256, 64) / 8, "mlp.down.weight": torch.randn(64, 256) / 16}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        args = model_args(mesh)
        old = _tttv1("dense.dense_gelu", "TtDenseGelu")(mesh, args, state_dict)
        new = generated.from_model_args(mesh, args, state_dict)
        for rows in (32, 128):
            expected = old.forward(replicated(_rows(rows), mesh))
            got = new.forward(replicated(_rows(rows), mesh))
            assert_identical(expected, got, f"{shape} {rows} rows")
        with pytest.raises(AssertionError):
            old.forward(replicated(_rows(1056), mesh))  # past 1024 rows the fused activation is refused
        with pytest.raises(AssertionError):
            new.forward(replicated(_rows(1056), mesh))
        ttnn.close_mesh_device(mesh)


def test_the_analysis_says_where_each_file_it_names_is():
    """``Analysis.sources``: display name -> path, also for the file above the inputs' common folder that the
    analysis names by its bare name; not data (a loaded analysis equals the one saved, without it)."""
    from tttv2_tools.trace_dependencies import Analysis, analyze

    analysis = analyze(INPUTS / PACKAGE / "dense" / "dense_gelu.py", None)
    assert analysis.sources["utility_functions.py"] == (INPUTS / PACKAGE / "utility_functions.py").resolve()
    assert analysis.sources["dense_gelu.py"] == (INPUTS / PACKAGE / "dense" / "dense_gelu.py").resolve()
    loaded = Analysis.from_json(analysis.to_json())
    assert loaded.sources == {} and loaded == analysis


def test_constructors_the_call_check_does_not_read(tmp_path):
    """Left alone (no gap, whatever the arguments): a name imported from two modules, a class defined twice or
    under a decorator, an ``__init__`` under a decorator, a file that does not parse."""
    from tttv2_tools.refactor.names import call_mismatches

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "parts.py").write_text(
        "import functools\n"
        "class Twice:\n    def __init__(self, a):\n        pass\n"
        "class Twice:\n    def __init__(self, a):\n        pass\n"
        "@functools.total_ordering\nclass Decorated:\n    def __init__(self, a):\n        pass\n"
        "class DecoratedInit:\n    @functools.wraps(print)\n    def __init__(self, a):\n        pass\n"
        "class Plain:\n    def __init__(self, a):\n        pass\n"
    )
    (tmp_path / "proj" / "broken.py").write_text("class Plain(:\n")
    text = (
        "from proj.parts import Twice, Decorated, DecoratedInit, Plain\n"
        "from proj.broken import Plain as Broken\n"
        "def build():\n"
        "    from proj.other import Plain\n"
        "    return Twice(), Decorated(), DecoratedInit(), Plain(), Broken()\n"
    )
    assert call_mismatches(text, "x_1d.py", root=tmp_path) == []
    # the same classes, one import each: only the plain class is checked, and its call does not bind
    single = "from proj.parts import Twice, Decorated, DecoratedInit, Plain\nPlain()\nTwice()\n"
    assert [g.what for g in call_mismatches(single, "y_1d.py", root=tmp_path)] == ["Plain(...)"]


def test_the_call_check_parses_each_first_party_file_once_per_run(tmp_path):
    """``output_gaps`` hands one store of parsed files to the call check of every generated module: two modules
    that both build classes of one first-party file (at two call sites each) parse it once; a file changed since
    (another modification time) is parsed again and its new ``__init__`` is what the calls are checked
    against; a file that is gone or does not parse is not read (no gap)."""
    import os

    from tttv2_tools.refactor.names import _parsed, call_mismatches, output_gaps

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    parts = tmp_path / "proj" / "parts.py"
    parts.write_text("class Block:\n    def __init__(self, a):\n        pass\n")
    text = "from proj.parts import Block\n\nfirst = Block(1)\nsecond = Block(1, 2)\n"
    gaps = output_gaps({"a_1d.py": text, "b_1d.py": text}, tmp_path)
    calls = [(g.loc, g.what) for g in gaps if g.what != "import"]  # importing them raises the TypeError too
    assert calls == [("a_1d.py:4", "Block(...)"), ("b_1d.py:4", "Block(...)")]
    trees: dict = {}
    assert len(call_mismatches(text, "a_1d.py", root=tmp_path, trees=trees)) == 1
    assert len(call_mismatches(text, "b_1d.py", root=tmp_path, trees=trees)) == 1
    assert list(trees) == [(parts.resolve(), parts.stat().st_mtime_ns)]
    parts.write_text("class Block:\n    def __init__(self, a, b=None):\n        pass\n")
    os.utime(parts, ns=(parts.stat().st_atime_ns, parts.stat().st_mtime_ns + 1_000_000_000))
    assert call_mismatches(text, "a_1d.py", root=tmp_path, trees=trees) == []
    assert len(trees) == 2
    assert _parsed(tmp_path / "proj" / "gone.py", trees) is None and len(trees) == 2
    (tmp_path / "proj" / "broken.py").write_text("class Block(:\n")
    assert _parsed(tmp_path / "proj" / "broken.py", trees) is None
    assert _parsed(tmp_path / "proj" / "broken.py", trees) is None and len(trees) == 3


# ------------------------------------------------------------------------------------------ live-out of an arm
def test_a_local_a_later_loop_rebinds_is_not_returned_by_the_arm():
    """``output`` is assigned in the arms' loops and then only read as the target of ``for output in outputs``:
    the extracted arms returned it (live-out), so with no block the arm raised ``UnboundLocalError`` where TTTv1
    returns an empty list (the Galaxy ``LMHead``'s ``_decode_no_prefetcher_*`` returned ``output``)."""
    result = _generate("split_head")
    assert_no_static_branch(result)
    code = result.modules[0].code
    decode = code.split("    def decode_forward")[1].split("    def ")[0]
    assert "output = self._decode_no_prefetcher" not in decode
    assert "return output\n" not in code


@pytest.mark.parametrize(("use_prefetcher", "head_blocks"), [(False, 2), (True, 2), (False, 0)])
def test_the_split_head_matches_tttv1_bit_for_bit(use_prefetcher, head_blocks, tmp_path):
    import torch

    generated = generated_class(_generate("split_head"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    torch.manual_seed(0)
    state_dict = {f"head.{i}.weight": torch.randn(96, 64) / 8 for i in range(head_blocks)}
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    args = model_args(mesh, use_prefetcher=use_prefetcher, head_blocks=head_blocks)
    old = _tttv1("split_head", "TtSplitHead")(mesh, args, state_dict)
    new = generated.from_model_args(mesh, args, state_dict)
    for mode, rows in (("decode", 32), ("prefill", 128)):
        expected = old.forward(replicated(_rows(rows), mesh), mode)
        got = new.forward(replicated(_rows(rows), mesh), mode)
        assert len(got) == len(expected) == head_blocks
        for one, other in zip(expected, got):
            assert_identical(one, other, f"{mode} {use_prefetcher}")
            assert one.memory_config() == other.memory_config()
    ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ sub-module topology
def test_topology_code_of_a_sub_module_does_not_split_the_module():
    """The block's only galaxy test is in the feed-forward it builds: one module for every mesh, and no gap.
    Before, it was written twice, 1D and 2D, identical but for their names, with the gap "no galaxy test of the
    class can be written with the constructor's arguments alone" (tt-metal's cross-attention block)."""
    result = _generate("gated_block")
    assert_no_static_branch(result)
    assert [g.topology for g in result.modules] == ["1d"]
    # the feed-forward itself still has its 1D and 2D modules
    assert [g.topology for g in _generate("galaxy_ffn").modules] == ["1d", "2d"]


@pytest.mark.parametrize("shape", [(1, 2), (8, 4)])
def test_the_gated_block_matches_tttv1_on_every_mesh(shape, tmp_path):
    import torch

    generated = generated_class(_generate("gated_block"), "1d", tmp_path)
    model_args = _tttv1("model_config", "ModelArgs")
    torch.manual_seed(0)
    state_dict = {"block.ffn.w.weight": torch.randn(64, 64) / 8, "block.gate": torch.randn(1)}
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    args = model_args(mesh)
    old = _tttv1("gated_block", "TtGatedBlock")(mesh, args, state_dict)
    new = generated.from_model_args(mesh, args, state_dict)
    for mode, rows in (("decode", 32), ("prefill", 64)):
        expected = old.forward(replicated(_rows(rows), mesh), mode)
        got = new.forward(replicated(_rows(rows), mesh), mode)
        assert_identical(expected, got, f"{shape} {mode}")
    ttnn.close_mesh_device(mesh)


def test_a_sub_module_class_from_a_missing_module_is_a_gap():
    """``from rwide.missing_attention import TtMissingAttention``, built in ``__init__``: nothing provides the
    module, so the generated ``from_model_args`` would raise ``ModuleNotFoundError``; the tool said nothing (exit
    0). The classes of modules that exist are not gaps (``gated_block``)."""
    result = _generate("orphan_block")
    gaps = sorted(result.gaps, key=lambda g: g.loc)
    assert [(g.loc, g.what) for g in gaps] == [
        ("orphan_block.py:10", "padded_rows"),  # once: also needed at run time, which the helper check says
        ("orphan_block.py:9", "TtMissingAttention"),
    ]
    assert (
        "from_model_args imports it from rwide.missing_attention, which resolves to no file" in gaps[1].reason
    )
    assert _generate("gated_block").gaps == []
