"""docs/library.md's worked example (Mistral from a config.json to generated text) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "library.md"


def test_worked_example_runs_as_written(capsys):
    text = DOC.read_text()
    block = re.search(
        r"<!-- worked-example:begin -->\n```python\n(.*?)```\n<!-- worked-example:end -->", text, re.S
    )
    assert block, "the worked example is missing from docs/library.md"
    exec(compile(block.group(1), str(DOC), "exec"), {"__name__": "worked_example"})
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "2 8 2 32 64"  # layers, heads, KV heads, head dim, sliding window
    assert sum("pass" in line for line in lines) == 4  # two blocks, prefill and decode each
    assert lines[-1].startswith("'What is the capital of France?") and len(lines[-1]) > len(
        "'What is the capital of France?'"
    )
