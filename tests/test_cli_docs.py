"""The command-line docs cannot drift from the commands (docs/cli.md).

1. Every option a command's ``--help`` shows is in that command's doc, and every option a doc's options table
   lists (a table row whose first cell starts with an option) exists in the command.
2. Every command line in README.md, docs/*.md and examples/**/README.md (inside a fenced block) that starts with
   one of our commands parses with that command's own parser (argparse only: nothing is read or run), in the
   spelling the docs teach (no deprecation warning); every option written after a command's name, in a fenced
   synopsis or an inline `span` of prose, exists in that command.
3. The cheap ones run as written, in a scratch folder: every documented ``trace-deps`` and ``tttv2-refactor``
   line on the built-in TTTv1 files, and the ``collect-cases list`` / ``emit`` / ``export`` lines on a store made
   from the checked-in catalogue CSV (``record``, ``verify`` and ``sweep`` run programs: parsed only).
4. Quoted output holds: the trace-deps API snippet, real-run and ``--why`` excerpts, the refactor report excerpt;
   every line of tttv1's MLP / attention / model_config a doc cites is a location trace-deps reports.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tttv2.distributed import run as run_cli
from tttv2.testing import _coverage_cli
from tttv2_tools.collect_cases import cli as collect_cli
from tttv2_tools.refactor import cli as refactor_cli
from tttv2_tools.trace_dependencies import cli as trace_cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").glob("**/README.md")),
]


class _Launcher:
    """tttv2-run as the checks see a command: its parser, and its parse (``-- COMMAND`` cut off first)."""

    parser = staticmethod(run_cli._parser)

    @staticmethod
    def parse_args(argv):
        try:
            return run_cli._parse(list(argv))
        except run_cli.RunError as exc:
            raise SystemExit(f"tttv2-run: error: {exc}") from None


# each command: its module (parser(), parse_args()), its doc, and the part of the doc that is about it
COMMANDS = {
    "trace-deps": (trace_cli, "docs/trace_deps.md", None),
    "tttv2-refactor": (refactor_cli, "docs/refactor.md", None),
    "collect-cases": (collect_cli, "docs/collect_cases.md", None),
    "tttv2-coverage": (_coverage_cli, "docs/library.md", "The same report over a whole test suite"),
    "tttv2-run": (_Launcher, "docs/distributed.md", "## The launcher"),
}
TABLED = ["trace-deps", "tttv2-refactor", "collect-cases", "tttv2-coverage"]  # tttv2-run's doc is a list
_OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_NOT_A_COMMAND = re.compile(r"[\[\]<>()…]|\.\.\.")  # a synopsis (`[--json]`, `A|B`, `...`) or printed output


def help_options(parser: argparse.ArgumentParser) -> set[str]:
    """The options ``--help`` shows, over every verb's parser (help itself aside)."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= help_options(sub)
        elif action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            found |= set(action.option_strings)
    return found


def all_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option the command accepts, hidden ones included (an old spelling kept working)."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= all_options(sub)
        else:
            found |= set(action.option_strings)
    return found


def doc_text(doc: str, section: str | None) -> str:
    """The doc, or its section about the command: from the fenced block that starts with ``section`` to the
    next heading."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    if section is None:
        return text
    start = text.index(section)
    body = start + len(section)
    following = re.search(r"^#", text[body:], re.M)
    return text[start : body + following.start()] if following else text[start:]


def table_options(text: str) -> set[str]:
    """The options a doc's options tables list: the first cell of rows that start with an option."""
    found = set()
    for line in text.splitlines():
        cells = line.split("|")
        if line.startswith("| `-") and len(cells) > 2:
            for span in _SPAN.findall(cells[1]):
                found |= {m for m in _OPTION.findall(span) if m.startswith("-")}
    return found


@pytest.mark.parametrize("tool", list(COMMANDS))
def test_every_option_in_help_is_documented_and_every_documented_option_exists(tool):
    module, doc, section = COMMANDS[tool]
    text = doc_text(doc, section)
    spans = " ".join(_SPAN.findall(text)) + " ".join(_FENCE.findall(text))
    written = set(_OPTION.findall(spans))
    undocumented = sorted(help_options(module.parser()) - written)
    assert not undocumented, f"{tool}: options in --help that {doc} does not mention: {undocumented}"
    if tool not in TABLED:
        return
    listed = table_options(text)
    assert listed, f"{doc} has no options table for {tool}"
    unknown = sorted(listed - all_options(module.parser()))
    assert not unknown, f"{tool}: {doc} lists options the command does not have: {unknown}"


def command_lines(text: str) -> tuple[list[list[str]], int]:
    """The command lines of the four commands in fenced blocks (``\\`` continuations joined, a ``$ `` prompt,
    a ``# comment`` and anything after ``|`` or ``&&`` dropped), as argv lists; and how many lines were skipped
    as a synopsis or printed output."""
    found, skipped = [], 0
    for block in _FENCE.findall(text):
        lines = block.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i].removeprefix("$ ").rstrip()  # a command starts its line; indented text is output
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            i += 1
            if line.split(" ", 1)[0] not in COMMANDS:
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
            lexer.whitespace_split = True
            words = []
            for word in lexer:
                if word in ("|", "&&", ";", "||"):
                    break
                words.append(word)
            if len(words) > 1 and (words[1].endswith(":") or words[1][0].isdigit()):
                skipped += 1  # printed output: `collect-cases record: 8 calls; ...`, `trace-deps 0.2.0 (...)`
                continue
            unquoted = line.split("#", 1)[0]
            if _NOT_A_COMMAND.search(re.sub(r"\"[^\"]*\"|'[^']*'", "", unquoted)):
                skipped += 1
                continue
            found.append(words)
    return found, skipped


def test_command_lines_are_found_and_synopses_skipped():
    text = (
        "```\n$ trace-deps mlp.py --json=out.json   # a comment\n"
        "tttv2-refactor a.py --out o \\\n    --report=r.md\n"
        "trace-deps --focus x --dot | dot -Tsvg\n"
        "collect-cases list --store S [--json]\n"
        "collect-cases record: 8 calls\n"
        "            collect-cases sweep\n"
        "pytest -q\n```\n"
        "`trace-deps --json` in prose is not a command line\n"
    )
    found, skipped = command_lines(text)
    assert found == [
        ["trace-deps", "mlp.py", "--json=out.json"],
        ["tttv2-refactor", "a.py", "--out", "o", "--report=r.md"],
        ["trace-deps", "--focus", "x", "--dot"],
    ]
    assert skipped == 2


def test_every_documented_command_line_parses(capsys):
    parsed = 0
    for path in DOCS:
        lines, _ = command_lines(path.read_text(encoding="utf-8"))
        for words in lines:
            module = COMMANDS[words[0]][0]
            try:
                module.parse_args(words[1:])
            except SystemExit:
                pytest.fail(
                    f"{path.relative_to(ROOT)}: {shlex.join(words)!r} does not parse: {capsys.readouterr().err}"
                )
            err = capsys.readouterr().err
            assert "warning" not in err, (
                f"{path.relative_to(ROOT)}: {shlex.join(words)!r} uses an old spelling: {err}"
            )
            parsed += 1
    assert parsed >= 15  # 18 when written: the README's and every doc's examples, not a vacuous pass


def test_a_wrong_command_line_in_a_doc_would_be_caught(capsys):
    """The check above can fail: a line with an unknown option or a missing required one does not parse."""
    for words in (["trace-deps", "--no-such-option"], ["collect-cases", "emit", "--store", "s"]):
        with pytest.raises(SystemExit):
            COMMANDS[words[0]][0].parse_args(words[1:])
    capsys.readouterr()


def test_the_trace_deps_python_api_snippet_runs_and_its_comments_hold(monkeypatch):
    """docs/trace_deps.md's "Python API" block runs as written on the built-in model: the branch it names exists
    (``branch_at`` returns None for a line with no branch, so a moved line would pass silently otherwise), and
    ``keys_read()`` is the list its comment shows."""
    import ast

    text = (ROOT / "docs" / "trace_deps.md").read_text(encoding="utf-8")
    block = re.search(r"Python API:\n\n```python\n(.*?)```", text, re.S)[1]
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(block, "docs/trace_deps.md", "exec"), scope)
    assert scope["b"] is not None and scope["b"].loc.startswith("mlp.py:269:")
    shown = re.search(r"a\.keys_read\(\)\s+# (\[.*\])", block)[1]
    assert scope["a"].keys_read() == ast.literal_eval(shown)
    assert scope["loaded"] == scope["a"]


def test_the_refactor_report_excerpt_in_the_docs_is_the_report():
    """docs/refactor.md quotes a row of examples/refactored/mlp_report.md (one line per ``<br>``): every quoted line,
    line numbers included (``mlp_1d.py:415``), is in the report as generated."""
    text = (ROOT / "docs" / "refactor.md").read_text(encoding="utf-8")
    excerpt = re.search(
        r"The report \(`examples/refactored/mlp_report.md`\) says[^\n]*\n\n```\n(.*?)```", text, re.S
    )[1]
    report = (
        (ROOT / "examples" / "refactored" / "mlp_report.md").read_text(encoding="utf-8").replace("<br>", "\n")
    )
    report_lines = {line.strip().removesuffix("|").strip() for line in report.splitlines()}
    quoted = [line.strip().removesuffix("|").strip() for line in excerpt.splitlines() if line.strip()]
    assert quoted and all(line in report_lines or any(line in r for r in report_lines) for line in quoted), [
        line for line in quoted if not any(line in r for r in report_lines)
    ]


# --- every option written after a command's name exists --------------------------------------------------------

_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")


def written_commands(text: str) -> list[str]:
    """Every place a doc writes one of our commands with words after it: inline spans of prose, and every line
    of a fenced block (synopses and ``$ `` prompts included), each cut where the command's own words end (at
    `` -- `` the recorded program begins; at ``|``, ``&&`` or ``;`` the shell's next command)."""
    found = []
    pieces = _SPAN.findall(_FENCE.sub("", text))
    for block in _FENCE.findall(text):
        pieces += [line.strip().removeprefix("$ ") for line in block.split("\n")]
    for piece in pieces:
        if piece.split(" ", 1)[0] in COMMANDS:
            piece = re.split(r" -- | --$|\||&&|;", _QUOTED.sub("", piece))[0]
            found.append(piece)
    return found


def written_options(piece: str) -> set[str]:
    """The options a written command uses; ``--FORMAT`` and other upper-case placeholders are not options."""
    return {
        o for o in _OPTION.findall(piece.split(" ", 1)[1] if " " in piece else "") if not o[2:3].isupper()
    }


def test_written_commands_and_their_options_are_found():
    text = (
        "Run `trace-deps --json=out.json --no-such` or `collect-cases record -- python x.py --mesh T3K`; "
        '`tttv2-refactor --formatter "ruff format -"`, `--FORMAT=FILE` alone, `pytest --collect-cases=S`.\n'
        "```\ntttv2-refactor MODULE [--report[=FILE]] | tee log --tee-only\n```\n"
    )
    pieces = written_commands(text)
    assert [written_options(p) for p in pieces] == [
        {"--json", "--no-such"},
        set(),
        {"--formatter"},
        {"--report"},
    ]


def test_every_option_written_after_a_command_exists(capsys):
    """In prose (`collect-cases emit --drop-unrecorded`) and synopses alike: a renamed or removed option fails."""
    unknown, checked = [], 0
    for path in DOCS:
        for piece in written_commands(path.read_text(encoding="utf-8")):
            tool = piece.split(" ", 1)[0]
            known = all_options(COMMANDS[tool][0].parser()) | {"-h", "--help"}
            for option in written_options(piece) - known:
                unknown.append(f"{path.relative_to(ROOT)}: {option} in {piece!r}")
            checked += 1
    assert not unknown, unknown
    assert checked >= 100  # every doc's spans and synopses, not a vacuous pass


# --- the cheap documented commands run as written ----------------------------------------------------------------

SLOW_VERBS = (
    "record",
    "verify",
    "sweep",
)  # they run a program (the demo, a sweep): parsed above, not run here
CATALOGUE = ROOT / "tests" / "tools" / "collect_cases" / "data" / "tttv1_catalogue_cases.csv"


def runnable_lines() -> list[tuple[Path, list[str]]]:
    lines = []
    for path in DOCS:
        found, _ = command_lines(path.read_text(encoding="utf-8"))
        for words in found:
            if words[0] in ("trace-deps", "tttv2-refactor") or (
                words[0] == "collect-cases" and words[1] not in SLOW_VERBS
            ):
                lines.append((path, words))
    return lines


def _scratch(folder: Path, words: list[str]) -> None:
    """What a line reads, in ``folder``: copies of ``tttv1``, of the repository files and
    folders it names (a module with its folder, so its model_config.py comes along; a test file ``emit`` updates),
    a store imported from the catalogue CSV, and the folders its outputs go to."""
    if not (
        folder / "tttv1"
    ).exists():  # a copy (380 kB), so that no documented line can write into the repository
        shutil.copytree(ROOT / "tttv1", folder / "tttv1", ignore=shutil.ignore_patterns("__pycache__"))
    for word in words[1:]:
        value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
        if value.startswith(("-", "tttv1/", "tttv1.", "/")):
            continue
        value = (
            value.split(":", 1)[0]
            if value.endswith(tuple(f":{c}" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
            else value
        )
        source, copy = ROOT / value, folder / value
        if value.endswith(".sqlite"):
            if not copy.exists():
                assert collect_cli.main(["-q", "import", "--store", str(copy), "--csv", str(CATALOGUE)]) == 0
        elif source.is_file() and not copy.exists():
            if source.suffix == ".py" and value.startswith("tests/tools/fixtures"):
                shutil.copytree(source.parent, copy.parent, dirs_exist_ok=True)
            else:
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy)
        elif "/" in value.rstrip("/"):
            Path(folder, value.rstrip("/")).parent.mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize(
    ("doc", "words"),
    [pytest.param(p, w, id=f"{p.relative_to(ROOT)}:{shlex.join(w)[:60]}") for p, w in runnable_lines()],
)
def test_a_documented_command_runs_as_written(doc, words, tmp_path, monkeypatch, capsys):
    """Exit 0 (``emit --check``: 0 or 1, the list may be out of date with this store), never a usage error or a
    bug: a renamed option, a moved file or a changed default fails here."""
    monkeypatch.chdir(tmp_path)
    _scratch(tmp_path, words)
    code = COMMANDS[words[0]][0].main(words[1:])
    err = capsys.readouterr().err
    allowed = (0, 1) if "--check" in words else (0,)
    assert code in allowed, f"{doc.relative_to(ROOT)}: {shlex.join(words)!r} exited {code}: {err}"


def test_the_lines_that_run_cover_every_command_that_can(capsys):
    tools = {words[0] for _, words in runnable_lines()}
    verbs = {words[1] for _, words in runnable_lines() if words[0] == "collect-cases"}
    assert tools == {"trace-deps", "tttv2-refactor", "collect-cases"} and {"list", "emit", "export"} <= verbs


def test_the_trace_deps_real_run_excerpt_is_the_output(capsys, monkeypatch):
    """docs/trace_deps.md's "A real run" block: every line is a line of ``trace-deps --width 112`` on the built-in
    model, the summary first and the counts as they are (it quoted 2384 lines and cut names at 48 characters)."""
    text = (ROOT / "docs" / "trace_deps.md").read_text(encoding="utf-8")
    excerpt = re.search(r"`trace-deps --width 112` on `tttv1/tt/mlp.py`[^\n]*\n\n```\n(.*?)```", text, re.S)[
        1
    ]
    monkeypatch.chdir(ROOT)
    assert trace_cli.main(["--width", "112"]) == 0
    out = {line.rstrip() for line in capsys.readouterr().out.splitlines()}
    missing = [line for line in excerpt.splitlines() if line.rstrip() not in out]
    assert not missing, missing
    assert excerpt.startswith("Summary: class MLP")


def test_the_trace_deps_why_excerpt_is_the_output(capsys, monkeypatch):
    """docs/trace_deps.md's ``--why mlp.py:216`` block is the start of what the command prints (it quoted
    ``model_config.py:1003`` after the line moved to 1005)."""
    text = (ROOT / "docs" / "trace_deps.md").read_text(encoding="utf-8")
    excerpt = re.search(r"`trace-deps --why mlp.py:216` prints[^\n]*\n\n```\n(.*?)```", text, re.S)[1]
    monkeypatch.chdir(ROOT)
    assert trace_cli.main(["--why", "mlp.py:216"]) == 0
    out = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    quoted = [line.rstrip() for line in excerpt.splitlines()]
    assert out[: len(quoted)] == quoted


_CITED = re.compile(r"(?<![\w/])((?:mlp|model_config|attention)\.py):(\d+)(?::(\d+))?")


def test_every_tttv1_line_the_docs_cite_is_one_trace_deps_reports():
    """A ``mlp.py:216`` / ``model_config.py:1254`` / ``attention.py:N`` the docs cite (a branch, a read, a
    definition of the built-in TTTv1 files) is a location trace-deps reports for tttv1's MLP or attention: a line
    that moved fails here (``defined at model_config.py:1180`` outlived its method's move to 1254). Line 1 is
    the place of whole-file errors (``mlp.py:1: no class with a forward() …``), not a citation."""
    from tttv2_tools.trace_dependencies import analyze

    config = ROOT / "tttv1" / "tt" / "model_config.py"
    reported = set()
    for module in ("mlp.py", "attention.py"):
        data = json.loads(analyze(ROOT / "tttv1" / "tt" / module, config).to_json())
        stack = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, str) and (m := _CITED.search(item)):
                reported.add((m[1], int(m[2])))
    cited, stale = 0, []
    for path in DOCS:
        for m in _CITED.finditer(path.read_text(encoding="utf-8")):
            if int(m[2]) == 1:
                continue
            cited += 1
            if (m[1], int(m[2])) not in reported:
                stale.append(f"{path.relative_to(ROOT)}: {m[0]}")
    assert not stale, stale
    assert cited >= 30


_ANY_CITED = re.compile(r"(?<![\w/.-])([\w/.-]+\.py):(\d+)")


def test_every_fixture_line_the_docs_cite_starts_a_statement():
    """A line of a test fixture the docs cite (``ring_mlp.py:10``, the assert a note names) starts a statement of
    that file, and a test asserts that a tool reports it (``FILE:LINE`` in a test's text: when the fixture moves,
    that test fails, and once it is updated the doc's stale line fails here). A fixture is the one file under tests/ whose path ends with
    the cited name; tttv1's mlp.py / model_config.py / attention.py are the test above's, generated files
    (``mlp_1d.py:408``), tt-metal's (``ccl.py:197``) and names several fixtures share are not checked."""
    fixtures: dict[str, list[Path]] = {}
    for path in (ROOT / "tests").rglob("*.py"):
        fixtures.setdefault(path.name, []).append(path)
    tests = [p for p in (ROOT / "tests").rglob("test_*.py") if p.resolve() != Path(__file__).resolve()]
    cited, stale = [], []
    for doc in DOCS:
        for m in _ANY_CITED.finditer(doc.read_text(encoding="utf-8")):
            if _CITED.fullmatch(m[0]):
                continue
            found = [
                p
                for p in fixtures.get(Path(m[1]).name, [])
                if f"/{p.relative_to(ROOT).as_posix()}".endswith(f"/{m[1]}")
            ]
            if len(found) != 1:
                continue
            cited.append(m[0])
            pinned = any(f"{found[0].name}:{m[2]}" in t.read_text(encoding="utf-8") for t in tests)
            if not pinned:
                stale.append(f"{doc.relative_to(ROOT)}: {m[0]} (no test asserts a tool reports that line)")
            starts = {
                n.lineno
                for n in ast.walk(ast.parse(found[0].read_text(encoding="utf-8")))
                if isinstance(n, ast.stmt)
            }
            if int(m[2]) not in starts:
                stale.append(
                    f"{doc.relative_to(ROOT)}: {m[0]} (line {m[2]} of {found[0].relative_to(ROOT)} starts no statement)"
                )
    assert not stale, stale
    assert "ring_mlp.py:10" in cited


def test_the_verify_examples_sample_header_is_todays(tmp_path, monkeypatch):
    """examples/verify/README.md quotes the first line of a generated MLP, "copied from real runs": its source and
    sha256 hashes are those tttv2-refactor writes today (the sha256 covers the generated text below the header, so
    it changes with the codemod's output; it had drifted once)."""
    text = (ROOT / "examples" / "verify" / "README.md").read_text(encoding="utf-8")
    quoted = re.search(
        r"^# tttv2-refactor: generated from ../tttv1/tt/mlp.py \(class MLP\); (source=\S+; sha256=\S+)$",
        text,
        re.M,
    )
    assert quoted, "examples/verify/README.md no longer quotes the generated MLP's header"
    monkeypatch.chdir(ROOT)
    assert refactor_cli.main(["tttv1/tt/mlp.py", "--out", str(tmp_path), "--quiet"]) == 0
    header = (tmp_path / "mlp_1d.py").read_text(encoding="utf-8").splitlines()[0]
    assert header.endswith(quoted[1]), (header, quoted[1])
