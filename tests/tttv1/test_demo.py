"""The demo's own pytest sweep (a representative subset: every mesh, batch 1 and 32, three prompt lengths, every
catalogue model, paged and non-paged) runs here, plus the CLI once."""

from __future__ import annotations

import runpy
import sys

import pytest

from tttv1.demo.simple_text_demo import main, make_prompts, parse_mesh, test_demo_text  # noqa: F401 - collected here


def test_cli_prints_text_and_speed(capsys):
    assert main(["--mesh", "N300", "--max-new-tokens", "3", "--prompt", "hello", "--max-seq-len", "256"]) == 0
    out = capsys.readouterr().out
    assert "[user 0] output:" in out
    assert "tok/s/user" in out and "prefill:" in out


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
