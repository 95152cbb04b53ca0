"""The demo's own pytest sweep (a representative subset: every mesh, batch 1 and 32, three prompt lengths, every
catalogue model, paged and non-paged) runs here, plus the CLI once."""

from __future__ import annotations

import runpy
import sys

import pytest
import ttnn

from tttv1 import catalogue
from tttv1.demo.simple_text_demo import DEFAULT_PROMPTS, main, make_prompts, parse_mesh, run_demo


def test_cli_prints_text_and_speed(capsys):
    assert main(["--mesh", "N300", "--max-new-tokens", "3", "--prompt", "hello", "--max-seq-len", "256"]) == 0
    out = capsys.readouterr().out
    assert "[user 0] output:" in out
    assert "tok/s/user" in out and "prefill:" in out
    # the demo explains itself: random weights make noise, and users beyond the first four are counted
    assert "Weights: seeded random (seed 0), so the generated text is noise" in out
    assert "more users not shown" not in out
    argv = [
        "--mesh",
        "N150",
        "--batch",
        "8",
        "--max-new-tokens",
        "2",
        "--prompt",
        "hi",
        "--max-seq-len",
        "128",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("] output:") == 4 and "[users 4-7] 4 more users not shown" in out


def test_mesh_and_prompt_helpers():
    assert parse_mesh("TG") == (8, 4) and parse_mesh("1x8") == (1, 8) and parse_mesh("t3k") == (1, 8)
    prompts = make_prompts(3, "abc", 20)
    assert len(prompts) == 3 and all(len(p) == 19 for p in prompts)


def test_module_entry_point_help(monkeypatch, capsys):
    """``python -m tttv1.demo.simple_text_demo --help``, run the way ``-m`` runs it (runpy, as ``__main__``) in
    this interpreter, which has torch imported already: a new interpreter would spend seconds importing it."""
    monkeypatch.setattr(sys, "argv", ["simple_text_demo", "--help"])
    monkeypatch.delitem(
        sys.modules, "tttv1.demo.simple_text_demo"
    )  # as in a new interpreter: not imported yet
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("tttv1.demo.simple_text_demo", run_name="__main__", alter_sys=True)
    assert exited.value.code == 0 and "--max-new-tokens" in capsys.readouterr().out


# a representative subset of the TTTv1 demo sweep (every mesh, batch 1 and 32, three prompt
# lengths, every catalogue model, paged and non-paged; batch 32 on 8×4 runs in tests/tttv1/test_model.py against
# Hugging Face); the CLI runs any other combination ----------------------------------------------------------------


@pytest.mark.parametrize(
    "mesh_shape, model_name, batch_size, prompt_len, paged_attention, max_new_tokens",
    [
        pytest.param((1, 1), "Llama-3.2-1B-tiny", 1, 128, False, 8, id="N150-llama1b-batch1-len128"),
        pytest.param((1, 2), "Qwen2.5-7B-tiny", 32, 24, True, 4, id="N300-qwen7b-batch32-paged"),
        pytest.param((1, 8), "Mistral-7B-tiny", 1, 300, True, 6, id="T3K-mistral7b-batch1-len300-paged"),
        pytest.param((8, 4), "Llama-3.1-8B-tiny", 1, 128, False, 4, id="TG-llama8b-batch1-len128"),
        pytest.param((1, 1), "Phi-3-mini-tiny", 1, 40, False, 6, id="N150-phi3-batch1-len40"),
        pytest.param((8, 4), "Llama-3.1-70B-tiny", 1, 40, True, 3, id="TG-llama70b-batch1-len40-paged"),
    ],
)
def test_demo_text(mesh_shape, model_name, batch_size, prompt_len, paged_attention, max_new_tokens):
    mesh_device = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    try:
        result = run_demo(
            mesh_device,
            model_name=model_name,
            batch_size=batch_size,
            prompts=make_prompts(batch_size, None, prompt_len),
            max_new_tokens=max_new_tokens,
            max_seq_len=512,
            paged_attention=paged_attention,
            verbose=False,
        )
    finally:
        ttnn.close_mesh_device(mesh_device)
    assert len(result.tokens) == batch_size
    assert all(len(t) == max_new_tokens for t in result.tokens)
    vocab = catalogue.config_dict(model_name)["vocab_size"]
    assert all(0 <= tok < vocab for user in result.tokens for tok in user)
    assert result.prefill_tokens_per_second > 0 and result.decode_tokens_per_second > 0
    # users with the same prompt must generate the same tokens (users are independent)
    if batch_size > len(DEFAULT_PROMPTS):
        assert result.tokens[0] == result.tokens[len(DEFAULT_PROMPTS)]
