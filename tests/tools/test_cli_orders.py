"""No argument order destroys a file (docs/cli.md): the commands run on words drawn from a bag of positionals,
options and their values, in random orders (a flag separated from its value, a value before its flag, an input
after a bare output flag, ...), in a folder of the user's own files. Whatever each run answers, every file that was
there before keeps its bytes, except what a command exists to change (``emit``'s list in its ``--into`` file, whose
hand-written part stays); with ``--force``, still never an input (the module, its config, the store)."""

from __future__ import annotations

import contextlib
import io
import random
import shutil
from pathlib import Path

import pytest

from tttv2_tools.collect_cases import cli as collect_cli
from tttv2_tools.collect_cases.store import CaseStore
from tttv2_tools.refactor import cli as refactor_cli
from tttv2_tools.trace_dependencies import cli as trace_cli

FIX = Path(__file__).parent / "fixtures" / "g2"
USER_FILES = {
    "notes.json": '{"mine": true}\n',
    "page.html": "<p>my page</p>\n",
    "r.json": '{"my": "report"}\n',
    "r.md": "# my notes\n",
    "c.csv": "a,b\n1,2\n",
    "out.json": "[1, 2]\n",
    "test_x.py": "import pytest\n\n# hand-written, kept\nCASES = []\n",
}
INPUTS = ("mlp.py", "model_config.py", "s.sqlite")
T = "mlp:MLP"

# per command: the words every run has (positionals, required options, each with its value), and the optional
# ones; a run takes some optional ones, shuffles them all, and sometimes tears a value from its flag
GRAMMARS = {
    "trace-deps": (
        [["mlp.py"]],
        [
            ["model_config.py"], ["--json", "notes.json"], ["--json=new.json"], ["--html", "page.html"],
            ["--dot=new.dot"], ["--mermaid=r.md"], ["--svg", "model_config.py"], ["-q"], ["--report"],
            ["--width", "60"], ["--force"], ["mlp.py:MLP"],
        ],
    ),
    "tttv2-refactor": (
        [["mlp.py"], ["--out", "out"]],
        [
            ["model_config.py"], ["--json", "r.json"], ["--json=new.json"], ["--report", "r.md"],
            ["--report=notes.json"], ["--tests-out", "tests"], ["--name", "model_config"], ["--check"],
            ["--diff"], ["-q"], ["--force"], ["--out", "."],
        ],
    ),
    "collect-cases emit": (
        [["--store", "s.sqlite"], ["--target", T], ["--into", "test_x.py"], ["--name", "CASES"]],
        [["--check"], ["--diff"], ["--fields", "mesh_shape,mode"], ["--into=s.sqlite"], ["-q"], ["--force"]],
    ),
    "collect-cases list": (
        [["--store", "s.sqlite"]],
        [["--json", "notes.json"], ["--json=new.json"], ["--json=out.json"], ["--json", "s.sqlite"], ["-q"],
         ["--force"], ["--target", T]],
    ),
    "collect-cases export": (
        [["--store", "s.sqlite"], ["--csv", "new.csv"]],
        [["--csv", "c.csv"], ["--csv", "s.sqlite"], ["--csv=-"], ["-q"], ["--force"], ["--target", T], ["c.csv"]],
    ),
}  # fmt: skip
MAINS = {"trace-deps": trace_cli.main, "tttv2-refactor": refactor_cli.main, "collect-cases": collect_cli.main}
RUNS = {"trace-deps": 30, "tttv2-refactor": 20, "collect-cases emit": 25, "collect-cases list": 15,
        "collect-cases export": 15}  # fmt: skip


def _argv(rng: random.Random, grammar) -> list[str]:
    required, optional = grammar
    items = [list(i) for i in required] + [list(i) for i in optional if rng.random() < 0.25]
    rng.shuffle(items)
    words = [w for item in items for w in item]
    for item in items:  # a torn pair: the value goes elsewhere (before its flag, after another flag, ...)
        if len(item) == 2 and rng.random() < 0.15:
            words.remove(item[1])
            words.insert(rng.randrange(len(words) + 1), item[1])
    return words


def _folder(root: Path) -> dict[str, bytes]:
    root.mkdir()
    for name in ("mlp.py", "model_config.py"):
        shutil.copy2(FIX / name, root / name)
    for name, text in USER_FILES.items():
        (root / name).write_text(text)
    with CaseStore(root / "s.sqlite", create=True) as store:
        from tttv2_tools.collect_cases import Case

        store.add_cases([Case(T, {"mesh_shape": [1, 2], "mode": "decode", "model_name": "m"})], "test")
    return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}


def runs(tool: str):
    """The argument lists of ``tool`` (a command, or a collect-cases verb), the same on every machine."""
    rng = random.Random(f"orders-{tool}")
    command, _, verb = tool.partition(" ")
    for _ in range(RUNS[tool]):
        words = _argv(rng, GRAMMARS[tool])
        yield MAINS[command], ([verb] if verb else []) + words


@pytest.mark.parametrize("tool", list(GRAMMARS))
def test_no_argument_order_destroys_a_file(tool, tmp_path, monkeypatch):
    codes = []
    for i, (main, words) in enumerate(runs(tool)):
        root = tmp_path / f"run{i}"
        before = _folder(root)
        monkeypatch.chdir(root)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                code = main(list(words))
            except SystemExit as exc:
                code = exc.code
        assert code in (0, 1, 2), (words, code, err.getvalue())  # never an internal error
        codes.append(code)
        for name, data in before.items():
            now = (root / name).read_bytes()
            if now == data:
                continue
            if name == "test_x.py" and words[0] == "emit":
                assert b"# hand-written, kept\n" in now and b"import pytest\n" in now, (words, now)
                continue
            assert "--force" in words and name not in INPUTS, (words, name, err.getvalue())
    ran = sum(code in (0, 1) for code in codes)  # 1: ran, and something needs a look (a gap, --check)
    assert ran >= 3 and codes.count(2) >= 3, codes  # runs that write, and refusals: both exercised
