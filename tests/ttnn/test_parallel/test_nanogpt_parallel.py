"""``examples/nanogpt.py --parallel …`` runs every strategy end to end (a few steps of a tiny model)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_examples import load

TINY = (
    "--steps 3 --n-layer 2 --block-size 32 --batch-size 4 --warmup 1 --generate 4 --log-every 1 --prompt Love"
)


@pytest.mark.parametrize(
    "parallel",
    ["ddp --mesh 1x2", "tp --mesh 1x2", "pp --mesh 1x4 --stages 2 --micro-batches 2", "ddp+tp --mesh 2x2"],
)
def test_nanogpt_runs_in_parallel(capsys, parallel):
    result = load("nanogpt").main(f"{TINY} --dropout 0 --parallel {parallel}".split())
    assert len(result["losses"]) == 3 and np.isfinite(result["losses"]).all()
    assert result["sample"].startswith("Love") and len(result["sample"]) == 8
    out = capsys.readouterr().out
    assert f"parallel: {parallel.split()[0]}" in out and "validation loss" in out


def test_nanogpt_parallel_options_are_checked(capsys):
    with pytest.raises(SystemExit):
        load("nanogpt").main(["--parallel", "ddp", "--mesh", "eight"])
    assert "--mesh: expected RxC" in capsys.readouterr().err
