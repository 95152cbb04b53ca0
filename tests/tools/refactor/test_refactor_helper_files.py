"""Constructs of tt-metal's T3000 demos that left static branches (issue 21, item 4), on the ``inputs/rmm`` package.

A program-config helper of another folder: Llama-2-70B's T3000
attention imports Falcon-40B's ``matmul_2d_config_from_tensor_shapes`` from ``falcon40b/tt/model_utils.py`` and
calls it with constants (``is_fp32_accumulate=True``, ``overwrite_subblock_h=1``), and it passes them on to
``matmul_2d_config``. trace-deps names a file outside the module's folder by its file name alone, so the refactor
did not find it among the files the analysis read: the helper was copied as written and its five tests on
those constants were static branches left (exit 1). Now the file is found, and each call site gets its copies,
specialised like any helper's.

A memory config of the dict tested with ``is_sharded()`` whose shard shape the arm then sets in place (Falcon-40B's
attention): the test is made at construction, since the store does not change what it asks."""

from __future__ import annotations

import os
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
from tttv2_tools.refactor import generate
from tttv2_tools.refactor.binding import attribute_stores, mutated_locals
from tttv2_tools.refactor.cleanup import remove_dead_code
from tttv2_tools.refactor.source import load_inputs

PACKAGE = "rmm"
ROOT = Path(__file__).resolve().parents[3]  # the repository: the outer run imports tests.tools…
MODULE = "t3k/fused_qkv"

inputs_importable = importable_inputs(PACKAGE)

pytest_plugins = ["pytester"]

_inputs = InputPackage(PACKAGE)
_generate = _inputs.generate


def _rows(rows: int):
    import numpy as np

    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def test_the_helper_file_of_another_folder_is_read_under_the_analysis_name():
    inputs = load_inputs(INPUTS / PACKAGE / f"{MODULE}.py", None, None)
    assert "matmul_utils.py" in inputs.analysis.files
    assert inputs.files["matmul_utils.py"].path == (INPUTS / PACKAGE / "common" / "matmul_utils.py").resolve()


def test_a_helper_of_another_folder_is_specialised_per_call_site():
    """No gap and no static branch left: ``fp32_acc`` / ``force_sub_*`` / ``transposed`` are decided in each
    call site's copy, the shape-dependent test stays; no module-level copy of the helper is left."""
    result = _generate(MODULE)
    assert_no_static_branch(result)
    code = result.modules[0].code
    forwards = code.split("def decode_forward")[1]
    assert "def mm2d_config" not in code  # methods only, one per call site
    assert "self._mm2d_config_for(a_shape=xs.shape" in forwards
    assert (
        "self._mm2d_config_for_3(a_shape=fused.shape" in forwards
    )  # _for_2: prefill_long's, past its assert
    for static in ("fp32_acc", "force_in0_w", "force_sub_w", "force_sub_h", "transposed"):
        assert static not in forwards, static
    assert forwards.count("if block_m * block_n >= 4:") == 3  # run time: the shape of the input (3 copies)
    qkv, out = forwards.split("def _mm2d_config(")[1], forwards.split("def _mm2d_config_3(")[1]
    assert "range(1, 4 + 1)" in qkv.split("def ")[0]  # fp32_acc=True: 4 destination tiles
    assert "range(1, 8 + 1)" in out.split("def ")[0]  # fp32_acc=False: 8
    assert "sub_w = 1" in qkv.split("def ")[0] and "sub_w = 1" not in out.split("def ")[0]


def test_code_after_assert_false_is_kept_as_python_dash_o_runs_it():
    """``prefill_long`` fails at once (``assert False, …``), but under ``python -O`` TTTv1's assert is stripped
    and the code after it runs: the generated method keeps the assert as an assert and the code after it (its
    helper call gets its own copy), so it behaves as TTTv1 with or without ``-O``."""
    code = _generate(MODULE).modules[0].code
    long_path = code.split("def prefill_long(self, xs, chunks):")[1].split("    def ")[0]
    assert long_path.strip().startswith(
        'assert False, "the chunked prefill waits for its collective to come back"'
    )
    assert "ttnn.reshape" in long_path and "self._mm2d_config_for_2(a_shape=xs.shape)" in long_path
    assert "AssertionError" not in code and code.count("def _mm2d_config") == 6
    func = cst.parse_statement("def f(x):\n    y = g(x)\n    assert False, 'gone'\n    return h(y)\n")
    kept = cst.Module(body=[remove_dead_code(func)]).code
    assert "return h(y)" in kept and "assert False" in kept
    func = cst.parse_statement("def f(x):\n    y = g(x)\n    raise ValueError('gone')\n    return h(y)\n")
    assert "return h(y)" not in cst.Module(body=[remove_dead_code(func)]).code  # after a raise: dead
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


# ------------------------------------------------------------------------------------------ a config changed in place
def test_a_query_the_arm_leaves_unchanged_is_decided_at_construction():
    """Falcon-40B's attention: ``if kv_cache_memcfg.is_sharded():`` whose arm sets ``kv_cache_memcfg.shard_spec
    .shape`` on every call. The local is changed in place, so it stays a local of the forward, but the store
    is under ``shard_spec`` and ``is_sharded()`` asks the memory layout: the test is made at construction on
    the dict's value (it was a static branch left), the arm runs per call."""
    result = _generate("t3k/kv_slice")
    assert_no_static_branch(result)
    code = result.modules[0].code
    assert 'kv_slice_memcfg_is_sharded=legacy.model_config["KV_SLICE_MEMCFG"].is_sharded()' in code
    decode = code.split("def decode_forward")[1].split("def prefill_forward")[0]
    assert "if slice_memcfg.is_sharded()" not in decode
    assert "self._decode_slice_memcfg_is_sharded(rows, slice_memcfg)" in decode
    assert "slice_memcfg.shard_spec.shape = shard_shape" in decode  # the store, in the true arm


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # a store under the attribute the query asks: the answer may change between calls
            "            slice_memcfg.shard_spec.shape = shard_shape\n",
            "            slice_memcfg.shard_spec.shape = shard_shape\n"
            "            slice_memcfg.memory_layout = ttnn.TensorMemoryLayout.INTERLEAVED\n",
        ),
        (  # the local's value is the input's: nothing to ask at construction
            'slice_memcfg = self.model_config["KV_SLICE_MEMCFG"]',
            "slice_memcfg = x.memory_config()",
        ),
    ],
    ids=["stored-under-the-query", "run-time-value"],
)
def test_a_query_of_what_the_arm_changes_or_of_a_run_time_value_stays_in_the_forward(tmp_path, old, new):
    source = (INPUTS / PACKAGE / "t3k" / "kv_slice.py").read_text()
    assert old in source
    changed = tmp_path / "kv_slice.py"
    changed.write_text(source.replace(old, new))
    (tmp_path / "model_config.py").write_text((INPUTS / PACKAGE / "t3k" / "model_config.py").read_text())
    code = generate(changed).modules[0].code
    assert "if slice_memcfg.is_sharded():" in code.split("def decode_forward")[1]
    assert "kv_slice_memcfg_is_sharded" not in code


def test_attribute_stores_name_the_attribute_each_store_is_under():
    func = cst.parse_statement(
        "def f(a, b, c, d, e, g):\n"
        "    a.shard_spec.shape = 1\n"
        "    a.x[0] = 2\n"
        "    b.append(3)\n"
        "    c[0] = 4\n"
        "    d.y += 5\n"
        "    e.z = 6\n"
        "    e[1].w = 7\n"
    )
    stores = attribute_stores(func, mutated_locals(func))
    assert stores == {"a": frozenset({"shard_spec", "x"})}  # b: a mutator; c, e: an item; d: in place
    assert attribute_stores(func, {"a"}) == {"a": frozenset({"shard_spec", "x"})}
    assert attribute_stores(func, set()) == {}  # no local changed in place: nothing to name


@pytest.mark.parametrize("sharded", [True, False])
def test_the_kv_slice_matches_tttv1_bit_for_bit(sharded, tmp_path):
    """Each module with its own config dict (the store changes the dict's object: a twin that skipped it
    would keep the 64-row shard of the config, and its output's memory config would differ)."""
    import torch

    generated = generated_class(_generate("t3k/kv_slice"), "1d", tmp_path)
    kv_slice = _inputs.tttv1("t3k.kv_slice", "TtKVSlice")
    get_slice_config = _inputs.tttv1("t3k.model_config", "get_slice_config")
    torch.manual_seed(0)
    state_dict = {"layers.0.w": torch.randn(64, 64) / 8}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        old = kv_slice(mesh, state_dict, get_slice_config(sharded))
        new = generated.from_model_args(mesh, state_dict, get_slice_config(sharded))
        for mode, rows in (("decode", 32), ("prefill", 64), ("decode", 32)):
            expected = old.forward(replicated(_rows(rows), mesh), mode)
            got = new.forward(replicated(_rows(rows), mesh), mode)
            assert_identical(expected, got, f"{shape} {mode} {rows}")
            assert got.memory_config() == expected.memory_config()
        if sharded:
            assert new.config.kv_slice_memcfg.shard_spec.shape == [32, 64]
        ttnn.close_mesh_device(mesh)


# ------------------------------------------------------------------------------------------ a call of another commit
def test_a_call_of_a_helper_of_another_commit_names_the_call_the_definition_and_the_argument(tmp_path):
    """``skew_ffn.py`` passes ``out_memory_config=`` to the older ``scaled_output``, which does not take it (the
    snapshot's ``mlp.py`` → ``tt_all_reduce(rs_memory_config=…)``): the gap names the call, the definition with
    its parameters and where it was copied from, and the keyword; the static branches left in the unspecialised
    copy say why it was not specialised. ``ffn.py``, the same module with the helper's newer commit, has none."""
    from tttv2_tools.refactor.run import plan_run

    sys.path.insert(0, str(INPUTS))
    try:
        skew = plan_run(INPUTS / PACKAGE / "t3k" / "skew_ffn.py", None, out=tmp_path / "skew")
        coherent = plan_run(INPUTS / PACKAGE / "t3k" / "ffn.py", None, out=tmp_path / "ffn")
    finally:
        sys.path.remove(str(INPUTS))
    assert coherent.gaps == []
    calls = [g for g in skew.gaps if "does not match the definition" in g.reason]
    assert len(calls) == 2 and {g.what for g in calls} == {"scaled_output(...)"}
    written = next(p.text for p in skew.planned if p.path.name == "skew_ffn_1d.py")
    defined = written.split("\ndef scaled_output(")[0].count("\n") + 2
    assert calls[0].reason == (
        "the call does not match the definition (got an unexpected keyword argument 'out_memory_config'): "
        f"TypeError when it runs; defined at skew_ffn_1d.py:{defined} as "
        "`scaled_output(x, scale=None, memory_config=None, sharded=False)`, copied from scaling.py:7"
    )
    static = [g for g in skew.gaps if g.what.startswith("static branch left in scaled_output: ")]
    assert len(static) == 2
    for gap in static:
        assert gap.reason.endswith(
            f"scaled_output was copied as written, not specialised per call site, because its calls at "
            f"{calls[0].loc}, {calls[1].loc} do not match its definition"
        )


def test_a_call_site_copy_is_named_after_the_helper_it_copies():
    from tttv2_tools.refactor.names import call_mismatches
    from tttv2_tools.refactor.run import definition_origins, explain_unspecialised

    result = _generate(MODULE)
    origins = definition_origins(result.modules[0], result.inputs)
    line = (INPUTS / PACKAGE / "common" / "matmul_utils.py").read_text().split("\ndef mm2d_config_for(")[0]
    assert origins["_mm2d_config_for"] == (
        f"the call-site copy of mm2d_config_for (matmul_utils.py:{line.count(chr(10)) + 2})"
    )
    assert origins["TILE"] == "copied from matmul_utils.py:9"
    text = (
        "class A:\n    def f(self):\n        return self._g(1, 2)\n\n    def _g(self, a):\n        return a\n"
    )
    (gap,) = call_mismatches(text, "a_1d.py", {"_g": "the call-site copy of g (g.py:3)"})
    assert (
        gap.reason.endswith("defined at a_1d.py:5 as `_g(self, a)`, the call-site copy of g (g.py:3)")
        and "too many positional arguments" in gap.reason
    )
    assert explain_unspecialised([gap]) == [gap]  # a method's call: no helper copied as written to explain


# ------------------------------------------------------------------------------------------ two runs in one process
OUTER = """
pytest_plugins = ["pytester"]


def test_twice(pytester):
    for _ in range(2):
        result = pytester.runpytest_inprocess({tests!r}, "-q", "-p", "no:cacheprovider")
        assert result.parseoutcomes() == {{"passed": 9}}, result.stdout.str()[-2000:]
"""


def test_the_generated_tests_run_twice_in_one_pytest_process(tmp_path, pytester, monkeypatch):
    """Two in-process runs of the generated tests in one pytest process (pytester): both pass. pytester drops
    what a nested run imported first, and torch imported a second time crashed the process (exit 139) after a
    ``SystemError`` in the second run; ``nested_runs`` keeps installed packages and the library across nested
    runs. The outer run is a subprocess, so that a crash is this test's failure, not the suite's."""
    from tttv2_tools.refactor.cli import main

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((INPUTS / PACKAGE / "tests" / "conftest.py").read_text())
    argv = [str(INPUTS / PACKAGE / f"{MODULE}.py"), "--out", str(tmp_path / "out"), "--tests-out", str(tests)]
    sys.path.insert(0, str(INPUTS))
    try:
        assert main([*argv, "--no-verify", "--quiet"]) == 0
    finally:
        sys.path.remove(str(INPUTS))
        for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
            del sys.modules[name]
    pytester.makepyfile(test_outer=OUTER.format(tests=str(tests)))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), str(INPUTS), os.environ.get("PYTHONPATH", "")])
    )
    result = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "-p", "tests.tools.refactor.nested_runs"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]


def test_nested_runs_keep_installed_modules_and_the_library_only():
    import numpy

    from tests.tools.refactor import nested_runs

    assert nested_runs.kept_across_nested_runs("numpy") and numpy  # site-packages
    assert nested_runs.kept_across_nested_runs("json")  # the standard library
    assert nested_runs.kept_across_nested_runs("tttv2.ttnn") and nested_runs.kept_across_nested_runs("zope.x")
    assert not nested_runs.kept_across_nested_runs(__name__)  # a test module
    assert not nested_runs.kept_across_nested_runs("sys")  # built in: never dropped anyway
    assert not nested_runs.kept_across_nested_runs("no_such_module_here")


def test_the_messages_of_many_mismatched_calls_and_of_long_signatures_stay_one_line():
    from tttv2_tools.refactor.errors import Gap
    from tttv2_tools.refactor.names import call_mismatches
    from tttv2_tools.refactor.run import MISMATCH, explain_unspecialised

    params = ", ".join(f"p{i}=None" for i in range(60))
    (gap,) = call_mismatches(f"def h({params}):\n    return 1\n\n\nh(q=1)\n", "h_1d.py")
    assert "\n" not in gap.reason and gap.reason.endswith("…)`")
    static = Gap("m_1d.py:3", "static branch left in h: `s`", "why")
    one = explain_unspecialised([static, Gap("m_1d.py:9", "h(...)", MISMATCH)])
    assert one[0].reason.endswith("because its call at m_1d.py:9 does not match its definition")
    many = [static, *(Gap(f"m_1d.py:{n}", "h(...)", MISMATCH) for n in range(10, 15))]
    assert explain_unspecialised(many)[0].reason.endswith(
        "its calls at m_1d.py:10, m_1d.py:11, m_1d.py:12 and 2 more do not match its definition"
    )
    other_file = Gap("n_1d.py:3", "static branch left in h: `s`", "why")
    assert explain_unspecialised([other_file, many[1]])[0] is other_file


# ------------------------------------------------------------------------------ a weight handed straight to a call
def test_a_lazy_weight_handed_to_another_call_is_the_device_tensor():
    """``ttnn.to_device(ttnn.as_tensor(…), mesh)``: the twin's ``from_model_args`` gives ``to_device`` the device
    tensor (``_on_device``), as TTTv1's ``as_tensor`` did; it used to hand it the LazyWeight, and construction
    failed ("ttnn.to_device: expected a ttnn.Tensor, got LazyWeight": Llama-2-70B's KV cache). A LazyWeight stored
    as it is stays lazy, and one already under ``_on_device`` is not wrapped twice."""
    from tttv2_tools.refactor.emit import materialise_reads

    source = (
        "legacy.caches = [ttnn.to_device(_lazy_weight(lp, device=mesh), mesh) for lp in past]\n"
        "legacy.w = _lazy_weight(w, device=mesh)\n"
        "legacy.b = _on_device(_lazy_weight(b, device=mesh))\n"
        "legacy.n = len(_lazy_weight(n, device=mesh).shape)\n"
    )
    code = cst.Module(body=materialise_reads(list(cst.parse_module(source).body))).code
    assert "ttnn.to_device(_on_device(_lazy_weight(lp, device=mesh)), mesh)" in code
    assert "legacy.w = _lazy_weight(w, device=mesh)\n" in code
    assert "legacy.b = _on_device(_lazy_weight(b, device=mesh))\n" in code
    # an attribute read of the call is not a call argument: left as it is (no local holds it either)
    assert "legacy.n = len(_lazy_weight(n, device=mesh).shape)\n" in code
    plain = "legacy.w = _lazy_weight(w, device=mesh)\nx = f(y)\n"
    assert cst.Module(body=materialise_reads(list(cst.parse_module(plain).body))).code == plain


def test_the_kv_store_builds_and_matches_tttv1_bit_for_bit(tmp_path):
    """``inputs/rmm/t3k/kv_store.py`` (the T3000 KV-cache upload, ``ttnn.experimental.typecast`` into
    ``fill_cache``): no gap, and on 1x1 and 1x2 the twin built from the same arguments returns the same caches,
    bit for bit, over two calls (users 0 and 1)."""
    import numpy as np

    from tttv2.ttnn.numerics import quantize

    result = _generate("t3k/kv_store")
    assert_no_static_branch(result)
    generated = generated_class(result, "1d", tmp_path)
    kv_store = _inputs.tttv1("t3k.kv_store", "TtKVStore")
    config = {"MAX_BATCH_SIZE": 2, "MAX_CONTEXT_LEN": 64}
    rng = np.random.default_rng(7)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        # one cache folder per module and mesh: the cache file's name does not say how it was sharded
        old = kv_store(mesh, config, tmp_path / f"old{shape}")
        new = generated.from_model_args(mesh, config, tmp_path / f"new{shape}")
        for user in (0, 1):
            heads = 2 // shape[1]
            k, v = (rng.standard_normal((1, 2, 32, 32)).astype(np.float32) for _ in range(2))

            def upload(x, mesh=mesh):
                return ttnn.from_numpy(
                    x,
                    dtype=ttnn.bfloat16,
                    layout=ttnn.TILE_LAYOUT,
                    device=mesh,
                    mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1),
                )

            expected = old(upload(k), upload(v), user)
            got = new(upload(k), upload(v), user)
            assert_identical(expected, got, f"{shape} user {user}")
            assert list(got[0].shape) == [2, heads, 64, 32] and got[0].dtype is ttnn.bfloat16
            filled = ttnn.to_numpy(ttnn.get_device_tensors(got[0])[0])[user, :, :32]
            np.testing.assert_array_equal(
                filled, quantize(quantize(k[0, :heads], ttnn.bfloat16), ttnn.bfloat8_b)
            )
        ttnn.close_mesh_device(mesh)


def test_a_module_built_from_its_weight_cache_builds_its_twin_from_the_same_cache(tmp_path):
    """``inputs/rmm/t3k/cached_ffn.py`` (Llama-2-70B T3000's MLP: ``read_cache=True`` leaves the host weights None
    and ``ttnn.as_tensor`` reads its cache files; prefill ends in tt_lib's ``operations.primary.matmul``). The
    twin's construction used to raise ("LazyWeight: source must be an array …, got NoneType"); now, on 1x1 and
    1x2, TTTv1 and the twin built from the same arguments read the same cache files and agree bit for bit in
    decode and, after ``set_model_config``, in prefill; with no cache file both raise the same error."""
    import numpy as np
    import torch

    from tttv2.ttnn import ValidationError

    result = _generate("t3k/cached_ffn")
    assert_no_static_branch(result)
    generated = generated_class(result, "1d", tmp_path)
    ffn = _inputs.tttv1("t3k.cached_ffn", "TtCachedFFN")
    decode = {"LLM_MODE": "decode", "MAX_MM_SEQ_LEN": 1024, "OUT_MEMCFG": ttnn.L1_MEMORY_CONFIG}
    prefill = {"LLM_MODE": "prefill", "MAX_MM_SEQ_LEN": 64, "OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG}
    g = torch.Generator().manual_seed(3)
    state = {
        f"layers.0.feed_forward.{w}.weight": torch.randn(*s, generator=g) / 8
        for w, s in (("w1", (96, 64)), ("w2", (64, 96)))
    }
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        cache = tmp_path / f"cache{shape}"
        cache.mkdir()
        ffn(mesh, state, "layers", 0, 64, decode, cache_path=cache)  # the first run writes the cache
        args = (mesh, {}, "layers", 0, 64, decode)
        old = ffn(*args, cache_path=cache, read_cache=True)
        new = generated.from_model_args(
            *args, cache_path=cache, read_cache=True, prefill_model_config=prefill
        )
        for rows, mode in ((32, "decode"), (128, "prefill")):
            if mode == "prefill":
                old.set_model_config(prefill)
            x = np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)
            inputs = [replicated(x, mesh) for _ in range(2)]
            assert_identical(old(inputs[0]), new.forward(inputs[1], mode), f"{shape} {mode}")
        for build in (ffn, generated.from_model_args):
            with pytest.raises(ValidationError, match=r"tensor is None and the cache file .*w1.weight"):
                build(*args, cache_path=tmp_path / "empty", read_cache=True)
        ttnn.close_mesh_device(mesh)
