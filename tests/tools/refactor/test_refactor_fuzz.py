"""Fuzzing: generated Python programs, as the body of a TTTv1-shaped module's forward, never crash
tttv2-refactor. Each run ends in 0 (written), 1 (something not transformed, reported) or 2 (bad input, one
line): never 3 (internal error) or a traceback, and whatever it writes compiles."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings

from tttv2_tools.refactor.cli import main

MODULE = """
import ttnn


class Block:
    def __init__(self, mesh_device, args, model_config):
        self.args = args
        self.model_config = model_config
        self.TG = args.is_galaxy

    def forward(self, x, mode):
        y = ttnn.linear(x, x, memory_config=self.model_config["OUT"] if mode == "decode" else None)
        if self.TG:
            y = ttnn.to_memory_config(y, ttnn.L1_MEMORY_CONFIG)
{body}
        return y
"""

CONFIG = """
class ModelArgs:
    def __init__(self, mesh_device):
        self.is_galaxy = mesh_device.get_num_devices() == 32
        self.model_config = {"OUT": None}
"""


@settings(
    max_examples=12, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(hypothesmith.from_grammar())
def test_generated_programs_never_crash_the_codemod(source):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "model_config.py").write_text(CONFIG, encoding="utf-8")
        module = folder / "block.py"
        module.write_text(
            MODULE.format(body=textwrap.indent(source, " " * 8) or "        pass"), encoding="utf-8"
        )
        out = folder / "out"
        code = main([str(module), "--out", str(out), "--quiet", "--partial"])
        assert code in (0, 1, 2)
        for path in out.glob("*.py") if out.is_dir() else ():
            compile(path.read_text(encoding="utf-8"), str(path), "exec")


@pytest.mark.parametrize(
    "source",
    [
        "",
        "pass",
        "x = y = None\ndel x",
        "for i in range(2):\n    y = y + i",
        "globalA\x0c;\n",  # a form feed: white space to Python, a line end to str.splitlines (was exit 3)
    ],
)
def test_fixed_programs(source):
    """A few bodies the generator often produces, run every time (the fuzz examples vary)."""
    test_generated_programs_never_crash_the_codemod.hypothesis.inner_test(source)
