"""Function-built TTTv1 configs (T3000-era style, reference patterns §8): dicts returned by config functions,
``model_config["KEY"] = ...`` and ``update()`` in any of them, f-string keys over ``OP_KEYS``-like tuples, decode /
prefill builders chosen by ``llm_mode``, and ``__call__`` modules found without ``--entry`` (issue 10, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tttv2_tools.trace_dependencies import MODE, STATIC, analyze, decide
from tttv2_tools.trace_dependencies.cli import main

FIX = Path(__file__).parent / "fixtures"
MODULES = [FIX / "fn_t3k" / "mlp.py", FIX / "fn_t3k" / "attention.py", FIX / "fn_flat" / "decoder.py"]


@pytest.fixture(scope="module")
def analyses():
    return {m.parent.name + "/" + m.stem: analyze(m) for m in MODULES}


def test_call_modules_are_found_without_entry_flag(analyses, capsys):
    assert {a.entry for a in analyses.values()} == {"__call__"}
    assert main([str(MODULES[0]), "--strict", "--quiet"]) == 0  # everything understood, nothing to pass
    capsys.readouterr()


def test_definitions_found_for_at_least_95_percent_of_the_keys(analyses):
    read = found = 0
    for a in analyses.values():
        keys = a.keys_read()
        read += len(keys)
        found += sum(1 for k in keys if a.definitions.get(k))
        assert all(r.resolved for r in a.reads if r.kind == "key")
    assert read >= 35 and found / read >= 0.95


def test_decode_and_prefill_builders_are_guarded_by_llm_mode(analyses):
    a = analyses["fn_t3k/mlp"]
    decode, prefill = a.definitions["DENSE_H_TO_4H_MM_PROGCFG"]
    assert decode.loc == "model_config.py:69:4" and decode.facts == ["mode:decode"]
    assert prefill.loc == "model_config.py:95:8" and prefill.facts == ["not mode:decode"]
    assert decode.function == "get_decode_model_config" and prefill.function == "get_prefill_model_config"
    assert decode.live and prefill.live  # different arms of one branch never overwrite each other
    dispatch = a.branch_at("model_config.py", 29)  # if llm_mode == "decode":
    assert dispatch.classification == MODE and dispatch.mode == ["decode"]
    assert decide(dispatch, mode="prefill") is False
    prefill_view = a.restrict(mode="prefill")
    assert [d.loc for d in prefill_view.definitions["DENSE_H_TO_4H_MM_PROGCFG"]] == ["model_config.py:95:8"]
    assert "DENSE_H_TO_4H_MM_PROGCFG_SMALL_SEQ" in prefill_view.keys_read()
    assert "DENSE_H_TO_4H_MM_OUTPUT_DTYPE" not in prefill_view.keys_read()  # fwd_decode only


def test_generated_keys_over_op_key_tuples_respect_their_filters(analyses):
    a = analyses["fn_t3k/mlp"]
    (d, p) = a.definitions["DENSE_4H_TO_H_MM_OUTPUT_MEMCFG"]
    assert d.loc == "model_config.py:52:25" and "key='DENSE_4H_TO_H_MM_OUTPUT'" in d.value
    assert p.loc == "model_config.py:85:25" and p.value.startswith("DRAM_MEMCFG")
    weights = a.definitions["DENSE_H_TO_4H_MM_WEIGHTS_DTYPE"]
    assert [w.loc for w in weights] == [
        "model_config.py:56:8",
        "model_config.py:89:8",
    ]  # key + "_DTYPE" in a loop
    attention = analyses["fn_t3k/attention"]
    assert "SOFTMAX_PROGCFG" in attention.keys_read()
    assert not attention.definitions.get("SOFTMAX_OUTPUT_MEMCFG")  # filtered out by `key not in NO_MEMCFG`
    assert "ROTARY_EMBEDDING_OUTPUT_MEMCFG" in attention.definitions


def test_read_keys_from_loops_and_call_site_constants(analyses):
    mlp = analyses["fn_t3k/mlp"]
    looped = {r.name for r in mlp.reads if r.loc.startswith("mlp.py:55:")}
    assert looped == {
        "DENSE_H_TO_4H_MM_PROGCFG",
        "DENSE_4H_TO_H_MM_PROGCFG",
    }  # for name, weight in ((..., w), ...)
    attention = analyses["fn_t3k/attention"]
    projected = sorted(r.name for r in attention.reads if r.function == "TtAttention._project")
    assert projected == [
        "FUSED_QKV_MM_OUTPUT_DTYPE",
        "FUSED_QKV_MM_OUTPUT_MEMCFG",
        "FUSED_QKV_MM_PROGCFG",
        "SELFOUT_MM_OUTPUT_DTYPE",
        "SELFOUT_MM_OUTPUT_MEMCFG",
        "SELFOUT_MM_PROGCFG",
    ]
    assert attention.unknowns() == [] and mlp.unknowns() == []
    decoder = analyses["fn_flat/decoder"]
    assert "ATTN_NORM_PROGCFG" in decoder.keys_read()  # NORM_PREFIX + "_NORM_PROGCFG", a module constant


def test_config_function_arguments_are_roots(analyses):
    a = analyses["fn_t3k/mlp"]
    assert a.roots["model_arg"] == ["arg:model_config_str"]
    assert "hw:num_devices" in a.roots["hardware"] and "input:input_shape" in a.roots["input"]
    assert a.roots["mode"] == ["input:mode"]  # llm_mode of the config and of __call__ is one mode
    links = a.branch_at("model_config.py", 59)  # if num_devices == 8:
    assert links.classification == STATIC and links.factors == [STATIC]
    assert [path[0].node for path in a.why("model_config.py:59")] == ["hw:num_devices"]
    flat = analyses["fn_flat/decoder"]
    assert flat.roots["model_arg"] == ["arg:llama_version", "arg:max_batch_size"]
    assert "input:seq_len" in flat.roots["input"]


def test_setdefault_never_overwrites_an_earlier_definition(analyses):
    a = analyses["fn_flat/decoder"]
    batched, default = a.definitions["BATCHED_DECODE"]
    assert batched.live and batched.shadowed_by == []
    assert default.only_if_absent and default.live_when == "not (max_batch_size > 16)"
    scores = a.definitions["DECODE_SCORES_MEMCFG"]
    assert [d.live_when for d in scores] == ["not (max_batch_size > 16)", None]


def test_report_names_builder_parameters_by_their_function(capsys):
    """A config function's parameter is shown as ``get_model_config(model_config_str=)``, not as a ModelArgs
    constructor argument that does not exist (review F15)."""
    assert main([str(MODULES[0]), "--width", "400"]) == 0
    out = capsys.readouterr().out
    assert "get_model_config(model_config_str=)" in out and "ModelArgs(model_config_str=)" not in out


def test_helper_files_of_other_folders_with_one_file_name_are_both_analysed(tmp_path):
    """Two demos' ``utils.py`` outside the module's folder (and the module's own ``utils.py``): each keeps a name
    of its own, so each one's config reads are found (one shared name merged them and lost KEY_B)."""
    for folder in ("demo_a/tt", "demo_b", "demo_c"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "demo_a/__init__.py").write_text("")
    for folder, key in (("demo_b", "KEY_B"), ("demo_c", "KEY_C"), ("demo_a/tt", "KEY_A")):
        (tmp_path / folder / "utils.py").write_text(
            f'def read(model_config):\n    return model_config["{key}"]\n'
        )
    module = tmp_path / "demo_a/tt/mlp.py"
    module.write_text(
        "from demo_b.utils import read as read_b\n"
        "from demo_c.utils import read as read_c\n"
        "from .utils import read as read_a\n\n\n"
        "class MLP:\n"
        "    def __init__(self, model_config):\n"
        "        self.model_config = model_config\n\n"
        "    def forward(self, x):\n"
        "        return read_a(self.model_config), read_b(self.model_config), read_c(self.model_config), x\n"
    )
    analysis = analyze(module)
    assert sorted(analysis.files) == ["demo_b/utils.py", "demo_c/utils.py", "mlp.py", "utils.py"]
    assert sorted(analysis.keys_read()) == ["KEY_A", "KEY_B", "KEY_C"]
