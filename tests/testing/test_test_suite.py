"""TestSuite: the seed snippet runs as written; every block kind of a model is checked against Hugging Face on a
1-D and a 2-D mesh; failures are all listed in one AssertionError; the builder rejects bad values."""

from __future__ import annotations

import functools
import io

import numpy as np
import pytest
from rich.console import Console

from tttv2.models.llama3 import Llama3Model
from tttv2.testing import TestSuite
from tttv2.testing.references import hf_causal_lm


@functools.cache
def _hf():
    config, hf_model = hf_causal_lm("llama", seed=2, num_hidden_layers=1)
    return config.to_dict(), hf_model


def _model(pool, mesh_shape):
    config, hf_model = _hf()
    return Llama3Model.from_huggingface(
        config, pool(mesh_shape), hf_model.state_dict(), hw_mode="accuracy", max_seq_len=256
    )


def _quiet():
    return Console(file=io.StringIO(), width=200)


def test_seed_snippet_runs_as_written(ttnn_mesh_pool):
    model = _model(ttnn_mesh_pool, (1, 2))
    _, hf_model = _hf()
    with TestSuite(model, reference=hf_model) as suite:
        suite.test(model.layers[0].attention).tolerance(pcc=0.99).expect(memory_mb=64)
        suite.test(model.layers[0].ffn, name="layer0_ffn")
    assert [(r.name, r.mode) for r in suite.results] == [
        ("layer0_attention", "prefill"),
        ("layer0_attention", "decode"),
        ("layer0_ffn", "prefill"),
        ("layer0_ffn", "decode"),
    ]
    for result in suite.results:
        assert result.passed and result.pcc >= 0.99 and result.max_error < 0.5
        assert 0 < result.memory_mb < 64 and result.wall_ms > 0
    attention_prefill = suite.results[0]
    # the attention's weights and KV cache alone: wqkv 256x384 + wo 256x256 (bfloat8_b), over 2 devices
    assert attention_prefill.memory_mb > (256 * 384 + 256 * 256) * 1.0625 / 2 / 2**20


@pytest.mark.parametrize("mesh_shape", [(1, 8), (8, 4)], ids=["1x8", "8x4"])
def test_every_block_kind_against_hugging_face(mesh_shape, ttnn_mesh_pool):
    model = _model(ttnn_mesh_pool, mesh_shape)
    console = _quiet()
    with TestSuite(model, reference=_hf()[1], console=console) as suite:
        suite.test(model.embedding).modes("prefill")
        suite.test(model.layers[0].attention_norm).modes("decode")
        suite.test(model.layers[0].ffn_norm).seq_len(64).modes("prefill")
        suite.test(model.layers[0].attention).modes("decode")  # prefills a prompt first
        suite.test(model.norm, name="final_norm").modes("prefill")
        suite.test(model.lm_head).modes("decode")
    assert [r.name for r in suite.results] == [
        "embedding",
        "layer0_attention_norm",
        "layer0_ffn_norm",
        "layer0_attention",
        "final_norm",
        "lm_head",
    ]
    assert all(r.passed for r in suite.results)
    assert suite.results[2].seq_len == 64
    text = console.file.getvalue()
    assert "layer0_attention" in text and "memory (MiB)" in text and "pass" in text


def test_failures_are_all_listed(ttnn_mesh_pool):
    model = _model(ttnn_mesh_pool, (1, 1))
    stranger = _model(ttnn_mesh_pool, (1, 1))
    console = _quiet()
    with pytest.raises(AssertionError) as raised, TestSuite(model, _hf()[1], console=console) as suite:
        suite.test(model.layers[0].ffn, reference=lambda x: np.zeros_like(x)).modes("prefill")
        suite.test(model.layers[0].ffn_norm, name="tight").tolerance(1e-6).expect(memory_mb=1e-6).modes(
            "decode"
        )
        suite.test(stranger.norm).modes("prefill")  # not a block of this model: no reference to map it to
        suite.test(model.norm).modes("decode")  # passes
    message = str(raised.value)
    assert message.startswith("TestSuite: 3 of 4 checks failed:")
    assert "layer0_ffn [prefill]: PCC 0.000000 < 0.99" in message
    assert "tight [decode]: max error" in message and "> 1e-06" in message and "MiB > 1e-06 MiB" in message
    assert "RMSNorm1D_2 [prefill]: ValueError: RMSNorm1D is not in the model" in message
    assert "give it a reference callable" in message and "norm [decode]" not in message
    assert "FAIL" in console.file.getvalue() and [r.passed for r in suite.results] == [
        False,
        False,
        False,
        True,
    ]


def test_reference_callables_and_rejections(ttnn_mesh_pool):
    model = _model(ttnn_mesh_pool, (1, 1))
    _, hf_model = _hf()
    layer = hf_model.model.layers[0]

    def mlp(x):
        import torch

        with torch.no_grad():
            return layer.mlp(torch.as_tensor(x)).numpy()

    suite = TestSuite(model, console=_quiet())
    suite.test(model.layers[0].ffn).reference(mlp).modes("decode")
    assert [r.passed for r in suite.run()] == [True]
    assert suite.run() == []  # nothing pending
    with pytest.raises(
        TypeError, match=r"module must be an MLP, attention, RMSNorm, embedding or LM head block"
    ):
        suite.test(model.rope)
    with pytest.raises(ValueError, match=r"a test named 'layer0_ffn' is already registered"):
        suite.test(model.layers[0].ffn)
    test = suite.test(model.layers[0].attention)
    for call, message in (
        (lambda: test.tolerance(pcc=1.5), r"pcc must be at most 1"),
        (lambda: test.tolerance(-1.0), r"max_error must be a positive number"),
        (lambda: test.expect(memory_mb=0), r"memory_mb must be a positive number"),
        (lambda: test.modes("train"), r"expected 'prefill' and/or 'decode'"),
        (lambda: test.seq_len(100), r"expected a positive int \(a multiple of 128\), got 100"),
    ):
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(TypeError, match=r"expected a callable, got int"):
        test.reference(3)
    with pytest.raises(ValueError, match=r"construct the suite with track_coverage=True"):
        suite.coverage_report(against=[])
    with pytest.raises(ZeroDivisionError), TestSuite(model) as never_run:
        never_run.test(model.norm)
        raise ZeroDivisionError  # an error inside the block propagates; the tests do not run
    assert never_run.results == []


def test_a_suite_without_reference_needs_callables(ttnn_mesh_pool):
    model = _model(ttnn_mesh_pool, (1, 1))
    suite = TestSuite(model, console=_quiet())
    suite.test(model.norm).modes("decode")
    with pytest.raises(
        AssertionError, match=r"norm \[decode\]: ValueError: no reference: pass reference= to TestSuite"
    ):
        suite.run()
