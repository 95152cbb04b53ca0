"""Recording the real tttv1 demo on T3K (1×8) and TG (8×4): the distinct decode and prefill cases of MLP and
Attention, with the right meshes, shapes and dtypes (tiny settings: one decode step, a 40-token prompt)."""

from __future__ import annotations

import pytest

from tttv2_tools.collect_cases import load_cases
from tttv2_tools.collect_cases.emit import emit
from tttv2_tools.collect_cases.recorder import Recorder
from tttv2_tools.collect_cases.targets import parse_target

MLP = "tttv1.tt.mlp:MLP"
ATTENTION = "tttv1.tt.attention:Attention"
MODEL = "Llama-3.2-1B-tiny"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from tttv1.demo.simple_text_demo import make_prompts, run_demo
    from tttv2 import ttnn

    store = tmp_path_factory.mktemp("tttv1") / "cases.sqlite"
    recorder = Recorder(store, [parse_target(MLP), parse_target(ATTENTION)], command="tttv1 demo T3K + TG")
    recorder.install()
    try:
        recorder.import_targets()
        for mesh_shape in ((1, 8), (8, 4)):
            mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
            try:
                run_demo(mesh, MODEL, prompts=make_prompts(1, None, 40), max_new_tokens=2, max_seq_len=256,
                         verbose=False)  # fmt: skip
            finally:
                ttnn.close_mesh_device(mesh)
    finally:
        recorder.close()
    return store


def test_mlp_cases_of_the_t3k_and_tg_demos(recorded):
    from tttv1.catalogue import config_dict

    dim = config_dict(MODEL)["hidden_size"]
    cases = load_cases(recorded, MLP)
    got = [(c.mesh_shape, c.mode, c.flat["x_shape"], c.flat["num_devices"], c.layers) for c in cases]
    # T3K: the residual is replicated, each device sees all of dim; TG: dim is split over the 4 mesh columns.
    # Prefill pads the 40-token prompt to 128 rows; decode runs 32 (padded) user rows.
    assert got == [
        ((1, 8), "decode", (1, 1, 32, dim), 8, (0, 1)),
        ((1, 8), "prefill", (1, 1, 128, dim), 8, (0, 1)),
        ((8, 4), "decode", (1, 1, 32, dim // 4), 32, (0, 1)),
        ((8, 4), "prefill", (1, 1, 128, dim // 4), 32, (0, 1)),
    ]
    for case in cases:
        f = case.flat
        assert f["model_name"] == MODEL and f["arch"] == "wormhole_b0" and f["x_dtype"] == "bfloat16"
        # the performance preset: BFP4 gate/up, BFP8 down
        assert (f["w1_dtype"], f["w3_dtype"], f["w2_dtype"]) == ("bfloat4_b", "bfloat4_b", "bfloat8_b")
        assert case.hits == 2  # one call per layer, two layers


def test_attention_cases_of_the_t3k_and_tg_demos(recorded):
    cases = load_cases(recorded, ATTENTION)
    assert [(c.mesh_shape, c.mode) for c in cases] == [
        ((1, 8), "decode"), ((1, 8), "prefill"), ((8, 4), "decode"), ((8, 4), "prefill")
    ]  # fmt: skip
    for case in cases:
        f = case.flat
        assert f["model_name"] == MODEL and case.layers == (0, 1)  # read from the constructor's arguments
        assert f["wqkv_dtype"] == "bfloat8_b" and f["wo_dtype"] == "bfloat8_b"
        assert len(f["rot_mats_shape"]) == 2 and f["x_dtype"] == "bfloat16"
        if case.mode == "decode":
            assert f["x_shape"][-2] == 32 and "current_pos_shape" in f
        else:
            assert f["x_shape"][-2] == 128 and "current_pos_shape" not in f  # prefill passes current_pos=None


def test_emitted_lists_of_the_recorded_demo(recorded, tmp_path):
    from tttv2_tools.collect_cases.store import CaseStore

    with CaseStore(recorded) as store:
        cases = store.cases(MLP)
    one_d = emit(cases, MLP, tmp_path / "test_mlp_1d.py", "MLP_1D_CASES", topology="1d").new_text
    assert (
        'id="1x8-decode-32-Llama-3.2-1B-tiny"' in one_d and 'id="1x8-prefill-128-Llama-3.2-1B-tiny"' in one_d
    )
    assert "(8, 4)" not in one_d
    two_d = emit(
        cases, MLP, tmp_path / "test_mlp_2d.py", "MLP_2D_CASES", topology="2d", mode="decode"
    ).new_text
    assert two_d.count("pytest.param(") == 1 and 'id="8x4-decode-32-Llama-3.2-1B-tiny"' in two_d
