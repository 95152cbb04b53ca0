"""Fuzzing: generated Python programs never crash trace-deps (a result or a clean TraceError, nothing else)."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import hypothesmith
from hypothesis import HealthCheck, given, settings

from tttv2_tools.trace_dependencies import Analysis, TraceError, analyze
from tttv2_tools.trace_dependencies.cli import main
from tttv2_tools.trace_dependencies.export import WRITERS

CONSUMER = """
class M:
    def __init__(self, args, model_config, mesh_device, state_dict):
        self.args = args
        self.mc = model_config
        self.TG = args.num_devices == 32

    def forward(self, x, mode):
        a = self.mc["K"] if mode == "decode" else self.mc.get("L", None)
        b = self.args.get_model_config()["M"](x.shape[-2])
        c = self.args.dim if self.TG else self.args.get_x(mode, x)
{body}
        return a, b, c
"""

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _try(module: Path, config: Path | None) -> None:
    try:
        result = analyze(module, config, auto_config=False)
    except TraceError as exc:
        assert str(exc)  # a clear message
        return
    for writer in WRITERS.values():
        assert writer(result)
    view = result.restrict(mode="decode", topology="2d")
    assert Analysis.from_json(result.to_json()) == result  # pure data on every generated program
    assert Analysis.from_json(view.to_json()) == view


@SETTINGS
@given(hypothesmith.from_grammar())
def test_generated_programs_never_crash(source):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        module = tmp / "generated.py"
        module.write_text(source, encoding="utf-8")
        _try(module, None)  # as the analysed module (usually: no class with forward)
        consumer = tmp / "consumer.py"
        consumer.write_text(CONSUMER.format(body="        pass"), encoding="utf-8")
        _try(consumer, module)  # as the model_config
        wrapped = tmp / "wrapped.py"
        wrapped.write_text(
            CONSUMER.format(body=textwrap.indent(source, " " * 8) or "        pass"), encoding="utf-8"
        )
        _try(wrapped, None)  # as the body of forward()
        assert main([str(wrapped), "--quiet"]) in (0, 2)
