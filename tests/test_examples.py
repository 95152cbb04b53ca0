"""The training examples run end to end with small step counts (new API and the deprecated ttml spelling)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_linear_regression(capsys):
    result = load("linear_regression").main(["--steps", "40", "--log-every", "20"])
    assert result["losses"][-1] < 0.05 * result["losses"][0]
    assert result["weight_error"] < 0.2
    assert "max |W - W_true|" in capsys.readouterr().out


def test_nanogpt(capsys):
    args = "--steps 40 --n-layer 1 --n-embd 64 --n-head 2 --block-size 32 --batch-size 4 --warmup 5"
    args += " --generate 8 --log-every 20 --memory --checkpointing --prompt Love"
    result = load("nanogpt").main(args.split())
    losses = result["losses"]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    assert result["sample"].startswith("Love") and len(result["sample"]) == 4 + 8
    out = capsys.readouterr().out
    assert "greedy sample" in out and "Device memory by phase" in out and "validation loss" in out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ttml_linear_regression_warns():
    module = load("ttml_linear_regression")
    with pytest.warns(DeprecationWarning, match=r"ttml\.optimizers\.SGD.*ttnn\.optim\.SGD"):
        result = module.main(["--steps", "30"])
    assert result["losses"][-1] < 0.1 * result["losses"][0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ttml_nanogpt_warns():
    module = load("ttml_nanogpt")
    args = (
        "--steps 30 --n-layer 1 --n-embd 64 --n-head 2 --block-size 32 --batch-size 4 --generate 4 --lr 3e-3"
    )
    with pytest.warns(DeprecationWarning, match=r"create_nanogpt is deprecated; use ttnn\.nn\.GPT"):
        result = module.main(args.split())
    assert np.mean(result["losses"][-5:]) < np.mean(result["losses"][:5])
    assert result["sample"].startswith("Shall I compare thee")
