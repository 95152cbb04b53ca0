"""The tttv1 demo rejects arguments that cannot work with argparse-style errors (usage, exit status 2)."""

from __future__ import annotations

import pytest

from tttv1.demo.simple_text_demo import DemoArgumentError, main, positive_int, run_demo


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-new-tokens", "-1"], "argument --max-new-tokens: expected an integer >= 1, got '-1'"),
        (["--max-new-tokens", "0"], "argument --max-new-tokens: expected an integer >= 1, got '0'"),
        (["--max-seq-len", "x"], "argument --max-seq-len: expected an integer >= 1, got 'x'"),
        (["--prompt-len", "0"], "argument --prompt-len: expected an integer >= 1, got '0'"),
        (["--page-block-size", "-32"], "argument --page-block-size: expected an integer >= 1, got '-32'"),
        # a 300-byte prompt is 301 tokens: 301 + 4 new tokens do not fit 256 positions
        (
            ["--max-seq-len", "256", "--max-new-tokens", "4", "--prompt", "a" * 300],
            "argument --max-seq-len: the prompt of user 0 is 301 tokens long: with --max-new-tokens 4 it needs "
            "--max-seq-len 512 or more (prefill pads the prompt to 512 positions), got 256",
        ),
        (
            ["--max-seq-len", "64", "--max-new-tokens", "2", "--prompt", "hi"],
            "argument --max-seq-len: the prompt of user 0 is 3 tokens long: with --max-new-tokens 2 it needs "
            "--max-seq-len 128 or more (prefill pads the prompt to 128 positions), got 64",
        ),
        (
            ["--max-seq-len", "128", "--max-new-tokens", "100", "--prompt", "a" * 40],
            "argument --max-seq-len: the prompt of user 0 is 41 tokens long: with --max-new-tokens 100 it needs "
            "--max-seq-len 141 or more, got 128",
        ),
    ],
)
def test_bad_arguments_exit_2_with_a_usage_error(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and f"error: {message}" in err, err


def test_run_demo_checks_its_arguments():
    with pytest.raises(DemoArgumentError, match="expected 2 prompts"):
        run_demo(None, batch_size=2, prompts=["one"])
    with pytest.raises(DemoArgumentError, match="expected an integer >= 1, got -1"):
        run_demo(None, max_new_tokens=-1, verbose=False)
    assert positive_int("3") == 3
