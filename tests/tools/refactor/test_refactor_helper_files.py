"""A program-config helper of another folder (issue 21, item 4), on the ``inputs/rmm`` package: Llama-2-70B's T3000
attention imports Falcon-40B's ``matmul_2d_config_from_tensor_shapes`` from ``falcon40b/tt/model_utils.py`` and
calls it with constants (``is_fp32_accumulate=True``, ``overwrite_subblock_h=1``), and it passes them on to
``matmul_2d_config``. trace-deps names a file outside the module's folder by its file name alone, so the refactor
did not find it among the files the analysis read: the helper was copied as written and its five tests on
those constants were static branches left (exit 1). Now the file is found, and each call site gets its copies,
specialised like any helper's."""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst
import pytest

from tests.tools.refactor.conftest import (
    INPUTS,
    InputPackage,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    replicated,
)
from tttv2 import ttnn
from tttv2_tools.refactor.cleanup import remove_dead_code
from tttv2_tools.refactor.source import _read_path, load_inputs

PACKAGE = "rmm"
MODULE = "t3k/fused_qkv"

inputs_importable = importable_inputs(PACKAGE)

_inputs = InputPackage(PACKAGE)
_generate = _inputs.generate


def _rows(rows: int):
    import numpy as np

    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def test_the_helper_file_of_another_folder_is_read_under_the_analysis_name():
    inputs = load_inputs(INPUTS / PACKAGE / f"{MODULE}.py", None, None)
    assert "matmul_utils.py" in inputs.analysis.files
    assert inputs.files["matmul_utils.py"].path == (INPUTS / PACKAGE / "common" / "matmul_utils.py").resolve()


def test_a_display_name_matched_by_no_file_or_by_two_finds_nothing(tmp_path):
    one, two = tmp_path / "a" / "utils.py", tmp_path / "b" / "utils.py"
    assert _read_path([one], "utils.py") == one
    assert _read_path([one, two], "utils.py") is None  # ambiguous: left unread, as before
    assert _read_path([one], "other.py") is None
    assert _read_path([one], "a/utils.py") == one


def test_a_helper_of_another_folder_is_specialised_per_call_site():
    """No gap and no static branch left: ``fp32_acc`` / ``force_sub_*`` / ``transposed`` are decided in each
    call site's copy, the shape-dependent test stays; no module-level copy of the helper is left."""
    result = _generate(MODULE)
    assert_no_static_branch(result)
    code = result.modules[0].code
    forwards = code.split("def decode_forward")[1]
    assert "def mm2d_config" not in code  # methods only, one per call site
    assert "self._mm2d_config_for(a_shape=xs.shape" in forwards
    assert "self._mm2d_config_for_2(a_shape=fused.shape" in forwards
    for static in ("fp32_acc", "force_in0_w", "force_sub_w", "force_sub_h", "transposed"):
        assert static not in forwards, static
    assert forwards.count("if block_m * block_n >= 4:") == 2  # run time: the shape of the input
    qkv, out = forwards.split("def _mm2d_config(")[1], forwards.split("def _mm2d_config_2(")[1]
    assert "range(1, 4 + 1)" in qkv.split("def ")[0]  # fp32_acc=True: 4 destination tiles
    assert "range(1, 8 + 1)" in out.split("def ")[0]  # fp32_acc=False: 8
    assert "sub_w = 1" in qkv.split("def ")[0] and "sub_w = 1" not in out.split("def ")[0]


def test_code_after_assert_false_is_dead_and_its_helper_calls_make_no_copy():
    """``prefill_long`` fails at once (``assert False, …``): the helper call after it never runs, so it gets no
    copy (it was a third, unused one)."""
    code = _generate(MODULE).modules[0].code
    long_path = code.split("def prefill_long(self, xs, chunks):")[1].split("    def ")[0]
    assert long_path.strip().startswith(
        'raise AssertionError("the chunked prefill waits for its collective to come back")'
    )
    assert "ttnn.reshape" not in long_path
    assert "_mm2d_config_for_3" not in code and code.count("def _mm2d_config") == 4
    func = cst.parse_statement("def f(x):\n    y = g(x)\n    assert False, 'gone'\n    return h(y)\n")
    kept = cst.Module(body=[remove_dead_code(func)]).code
    assert "return h(y)" not in kept and "assert False" in kept
    func = cst.parse_statement("def f(x):\n    assert x, 'kept'\n    return h(x)\n")
    assert "return h(x)" in cst.Module(body=[remove_dead_code(func)]).code  # only a literal False


def test_the_fused_qkv_matches_tttv1_bit_for_bit(tmp_path):
    """On 1x1 and 1x2, one TTTv1 instance switched by ``set_model_config``: decode, prefill of 64 and 256 rows
    (the helper's configs), 128 rows (the config's), decode again; 1024 rows fail alike in both."""
    import torch

    generated = generated_class(_generate(MODULE), "1d", tmp_path)
    fused_qkv = _inputs.tttv1("t3k.fused_qkv", "TtFusedQKV")
    get_model_config = _inputs.tttv1("t3k.model_config", "get_model_config")
    torch.manual_seed(0)
    state_dict = {
        "layers.0.attention.wqkv": torch.randn(64, 96) / 8,
        "layers.0.attention.wo": torch.randn(96, 64) / 8,
    }
    configs = {mode: get_model_config(mode) for mode in ("decode", "prefill")}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        old = fused_qkv(mesh, state_dict, configs["decode"])
        new = generated.from_model_args(
            mesh, state_dict, configs["decode"], prefill_model_config=configs["prefill"]
        )
        for mode, rows in (
            ("decode", 32),
            ("prefill", 64),
            ("prefill", 256),
            ("prefill", 128),
            ("decode", 32),
        ):
            old.set_model_config(configs[mode])
            expected = old(replicated(_rows(rows), mesh))
            got = new(replicated(_rows(rows), mesh), mode)
            assert_identical(expected, got, f"{shape} {mode} {rows}")
            assert got.memory_config() == expected.memory_config()
        old.set_model_config(configs["prefill"])
        with pytest.raises(AssertionError, match="chunked prefill"):
            old(replicated(_rows(1024), mesh))
        with pytest.raises(AssertionError, match="chunked prefill"):
            new(replicated(_rows(1024), mesh), "prefill")
        ttnn.close_mesh_device(mesh)


def test_the_generated_tests_of_the_fused_qkv_pass_with_the_packages_conftest(tmp_path, capsys):
    """``--tests-out`` with ``rmm/tests/conftest.py``: the shadow verification runs every generated case
    (prefill 256 rows goes through the helper's copies) and all are equal, exit 0."""
    from tttv2_tools.refactor.cli import main

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((INPUTS / PACKAGE / "tests" / "conftest.py").read_text())
    sys.path.insert(0, str(INPUTS))
    try:
        argv = [
            str(INPUTS / PACKAGE / f"{MODULE}.py"),
            "--out",
            str(tmp_path / "out"),
            "--tests-out",
            str(tests),
        ]
        assert main(argv) == 0
    finally:
        sys.path.remove(str(INPUTS))
        for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
            del sys.modules[name]
    err = capsys.readouterr().err
    assert "shadow verification: 9 of 9 case(s) equal to TTTv1" in err, err
    assert "prefill-256" in (tests / "test_fused_qkv_1d.py").read_text()
    assert Path(tmp_path / "out" / "fused_qkv_1d.py").is_file()
