"""tttv2-refactor's command line: what it writes and refuses to write, --diff / --check, the header hash and
--force, --partial, idempotency, one-line errors with exit 2 for bad input."""

from __future__ import annotations

import json
import os
import shutil
import stat
import textwrap
from pathlib import Path

import pytest

from tttv2_tools.refactor.cli import main
from tttv2_tools.refactor.errors import UsageError
from tttv2_tools.refactor.files import content_hash, header_state, run_formatter, with_header

TTTV1 = Path(__file__).resolve().parents[3] / "tttv1" / "tt"

SMALL = """
import ttnn


class Norm:
    def __init__(self, mesh_device, args):
        self.args = args
        self.eps = args.eps

    def forward(self, x, mode):
        if mode == "decode" and self.args.is_galaxy:
            x = ttnn.to_memory_config(x, ttnn.L1_MEMORY_CONFIG)
        return ttnn.rms_norm(x, epsilon=self.eps)
"""

CONFIG = """
class ModelArgs:
    def __init__(self, mesh_device):
        self.is_galaxy = mesh_device.get_num_devices() == 32
        self.eps = 1e-5
        self.model_config = {}
"""


@pytest.fixture
def small(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "norm.py").write_text(textwrap.dedent(SMALL))
    (folder / "model_config.py").write_text(textwrap.dedent(CONFIG))
    return folder / "norm.py"


def run(*argv) -> int:
    return main([str(a) for a in argv])


def test_write_is_idempotent_and_check_finds_nothing(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(small, "--out", out, "--quiet") == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["norm_1d.py", "norm_2d.py"]
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run(small, "--out", out, "--quiet") == 0  # a second run changes nothing
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert run(small, "--out", out, "--check", "--quiet") == 0
    umask = os.umask(0)
    os.umask(umask)
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {0o666 & ~umask}  # as open() makes them
    for text in first.values():
        assert header_state(text.decode()) == "ours"
        compile(text, "generated", "exec")


def test_check_and_diff_write_nothing(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(small, "--out", out, "--check") == 1
    assert "would change" in capsys.readouterr().err
    assert not out.exists()
    assert run(small, "--out", out, "--diff") == 0
    diff = capsys.readouterr().out
    assert diff.startswith("--- /dev/null") and "+class Norm1D(TTModule):" in diff
    assert not out.exists()


def test_edited_and_foreign_files_need_force(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(small, "--out", out, "--quiet") == 0
    target = out / "norm_1d.py"
    target.write_text(target.read_text() + "# a human was here\n")
    assert header_state(target.read_text()) == "edited"
    # refusing to replace a user's file exits 2, as for a report (docs/cli.md: one exit code for a refusal)
    assert run(small, "--out", out) == 2
    err = capsys.readouterr().err
    assert err.startswith("tttv2-refactor: error: ") and "was edited since tttv2-refactor wrote it" in err
    assert target.read_text().endswith("# a human was here\n")  # untouched
    (out / "norm_2d.py").write_text("x = 1\n")
    assert run(small, "--out", out) == 2
    assert "not written by tttv2-refactor" in capsys.readouterr().err
    target.chmod(0o640)
    assert run(small, "--out", out, "--force", "--quiet") == 0
    assert header_state(target.read_text()) == "ours"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # a replaced file keeps its permissions


def test_header_hash():
    text = with_header("x = 1\n", "a.py (class A)")
    assert (
        text.splitlines()[0]
        == f"# tttv2-refactor: generated from a.py (class A); sha256={content_hash('x = 1' + chr(10))}"
    )
    assert header_state(text) == "ours"
    assert header_state(text.replace("x = 1", "x = 2")) == "edited"
    assert header_state("x = 1\n") == "foreign"


def test_bad_input_exits_2_with_one_line(small, tmp_path, capsys):
    out = tmp_path / "out"
    cases = [
        ([tmp_path / "missing.py", "--out", out], "no such file"),
        ([small, small.parent / "nope.py", "--out", out], "nope.py: no such file"),
        ([f"{small}:Nope", "--out", out], "MODULE:CLASS: no class 'Nope'"),
    ]
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    cases.append(([broken, "--out", out], "does not parse"))
    cases.append(([small, broken, "--out", out], "broken.py:1:7: does not parse"))  # as the CONFIG
    classless = tmp_path / "plain.py"
    classless.write_text("x = 1\n")
    cases.append(([classless, "--out", out], "no class"))
    no_forward = tmp_path / "noforward.py"
    no_forward.write_text("class A:\n    def run(self):\n        pass\n")
    cases.append(([no_forward, "--out", out], "forward() or __call__()"))
    as_file = tmp_path / "afile"
    as_file.write_text("")
    cases.append(([small, "--out", as_file], "is a file, not a folder"))
    clash = small.parent / "thing_1d.py"
    clash.write_text(small.read_text())
    cases.append(([clash, "--out", small.parent, "--name", "thing"], "onto the input file"))
    for argv, message in cases:
        assert run(*argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)
    assert not out.exists()


def test_report_markdown_and_json(small, tmp_path):
    out = tmp_path / "out"
    assert run(small, "--out", out, f"--report={tmp_path / 'r.md'}", "--quiet") == 0
    text = (tmp_path / "r.md").read_text()
    assert "# tttv2-refactor report: norm.py (class Norm)" in text and "| norm.py:" in text
    assert run(small, "--out", out, f"--json={tmp_path / 'r.json'}", "--quiet") == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["class_name"] == "Norm" and data["gaps"] == []
    fates = [f for b in data["branches"] for f in b["fates"]]
    assert {f["kind"] for f in fates} >= {"decided"}
    assert run(small, "--out", out, f"--report={small}", "--quiet") == 2  # never over an input


def test_untransformable_writes_nothing_unless_partial(tmp_path, capsys):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "odd.py").write_text(
        textwrap.dedent(
            """
            import ttnn


            class Odd:
                def __init__(self, mesh_device, args):
                    self.args = args

                def forward(self, x, mode):
                    y = ttnn.relu(x, config=self.args)  # the ModelArgs object itself at run time
                    return y
            """
        )
    )
    out = tmp_path / "out"
    assert run(folder / "odd.py", "--out", out) == 1
    err = capsys.readouterr().err
    assert "not transformed" in err and "nothing written" in err and not out.exists()
    assert run(folder / "odd.py", "--out", out, "--partial", "--quiet") == 1
    text = (out / "odd_1d.py").read_text()
    assert "# tttv2-refactor: NOT TRANSFORMED" in text


def test_tests_out_for_a_module_of_no_known_kind_writes_its_tests(small, tmp_path, capsys):
    """No recipe is needed: the equivalence and topology tests, no Hugging Face test (``norm.py`` / ``Norm`` is not
    a known kind), nothing imported from the tool."""
    assert run(small, "--out", tmp_path / "o", "--tests-out", tmp_path / "t") == 0
    assert "no test recipe" not in capsys.readouterr().err
    texts = [p.read_text() for p in sorted((tmp_path / "t").glob("test_norm_*.py"))]
    assert texts and all("_matches_tttv1(" in t and "hf_reference" not in t for t in texts)
    assert not any("tttv2_tools" in t for t in texts)


def test_formatter(small, tmp_path):
    out = tmp_path / "out"
    ruff = shutil.which("ruff")
    if ruff is None:  # pragma: no cover - ruff is a test dependency
        pytest.fail("ruff is a test dependency and must be installed")
    assert (
        run(small, "--out", out, "--formatter", f"{ruff} format --stdin-filename {{path}} -", "--quiet") == 0
    )
    assert (
        run(
            small,
            "--out",
            out,
            "--formatter",
            f"{ruff} format --stdin-filename {{path}} -",
            "--check",
            "--quiet",
        )
        == 0
    )
    assert run(small, "--out", out, "--formatter", "false", "--quiet") == 2


def test_reports_never_replace_a_user_file_without_force(small, tmp_path, capsys):
    for flag, name in (("--report", "notes.md"), ("--json", "notes.json")):
        out = tmp_path / f"out-{name}"
        notes = tmp_path / name
        notes.write_text("my notes\n")
        assert run(small, "--out", out, f"{flag}={notes}", "--quiet") == 2
        err = capsys.readouterr().err
        assert f"refusing to overwrite {notes}" in err and "--force" in err and len(err.splitlines()) == 1
        assert notes.read_text() == "my notes\n" and not out.exists()  # nothing of the run was written
        assert run(small, "--out", out, f"{flag}={notes}", "--force", "--quiet") == 0
        assert notes.read_text() != "my notes\n"


def test_rerunning_with_reports_replaces_them_without_force(small, tmp_path, capsys):
    out = tmp_path / "out"
    for flag, name in (("--report", "r.md"), ("--json", "r.json")):
        argv = [small, "--out", out, f"{flag}={tmp_path / name}", "--quiet"]
        assert run(*argv) == 0
        first = (tmp_path / name).read_text()
        assert run(*argv) == 0, capsys.readouterr().err
        assert (tmp_path / name).read_text() == first
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == "tttv2-refactor-report"
    # a Markdown report is not a JSON report: kinds are not interchangeable
    assert run(small, "--out", out, f"--json={tmp_path / 'r.md'}", "--quiet") == 2
    assert "is not a tttv2-refactor JSON report" in capsys.readouterr().err


def test_a_report_that_cannot_be_written_puts_the_generated_files_back(small, tmp_path, capsys, monkeypatch):
    """A report whose folder refuses the write (read-only, /sys, ...; the check cannot know): the modules were
    written, then exit 2 with them left in place. Now the run writes nothing, and says so once."""
    from tttv2_tools._output import OutputError
    from tttv2_tools.refactor import cli

    real = cli.write

    def refusing(outputs):
        if any(o.label == "--report" for o in outputs):
            raise OutputError(f"cannot write --report to {outputs[0].path}: Permission denied")
        return real(outputs)

    monkeypatch.setattr(cli, "write", refusing)
    out = tmp_path / "out"
    assert run(small, "--out", out, f"--report={tmp_path / 'r.md'}") == 2
    err = capsys.readouterr().err
    assert "Permission denied; nothing written (the generated files were put back)" in err
    assert "wrote" not in err and not out.exists() and not (tmp_path / "r.md").exists()
    monkeypatch.setattr(cli, "write", real)
    assert run(small, "--out", out, "--quiet") == 0  # an unchanged run writes nothing: a failing report is
    monkeypatch.setattr(cli, "write", refusing)  # then its one error, no "put back"
    assert run(small, "--out", out, f"--report={tmp_path / 'r.md'}") == 2
    err = capsys.readouterr().err
    assert err.endswith("Permission denied\n") and "put back" not in err and (out / "norm_1d.py").is_file()


def test_a_report_onto_a_generated_module_or_a_link_to_an_input_is_refused(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(small, "--out", out, f"--report={out / 'norm_1d.py'}", "--quiet") == 2
    assert "--report and a generated file would both write" in capsys.readouterr().err
    assert not out.exists()
    # a report named as the --out / --tests-out folder the run creates: refused before anything is written (the
    # modules were once written, then the report failed with "Is a directory", exit 2 after a partial run)
    for folder in (out, tmp_path / "tests"):
        argv = [small, "--out", out, "--tests-out", tmp_path / "tests", "--no-verify", "--quiet"]
        assert run(*argv, f"--json={folder}") == 2
        assert f"--json {folder}: is a folder the generated files go to" in capsys.readouterr().err
        assert not out.exists() and not (tmp_path / "tests").exists()
    os.link(small, tmp_path / "hard.md")
    assert run(small, "--out", out, f"--report={tmp_path / 'hard.md'}", "--force", "--quiet") == 2
    assert "onto the input file" in capsys.readouterr().err
    assert small.read_text() == textwrap.dedent(SMALL) and not out.exists()


def test_links_to_the_config_found_next_to_the_module_are_refused_even_with_force(small, tmp_path, capsys):
    """R11: the config the run found by itself (no CONFIG argument) is an input like the module, through a
    symlink (a report is judged by the file it points to) or a hard link (its inode); generated modules are
    checked against the same inputs."""
    config = small.parent / "model_config.py"
    before = config.read_text()
    (tmp_path / "rep.md").symlink_to(config)
    os.link(config, tmp_path / "hard.json")
    out = tmp_path / "out"
    out.mkdir()
    (out / "norm_1d.py").symlink_to(config)  # also a generated module that is a link to the config
    for argv, reason in (
        ([f"--report={tmp_path / 'rep.md'}"], "refusing to write an output onto the input file"),
        (
            [f"--json={tmp_path / 'hard.json'}", "--name", "other"],
            "refusing to write --json onto the input file",
        ),
    ):
        assert run(small, "--out", out, *argv, "--force", "--quiet") == 2
        err = capsys.readouterr().err
        assert reason in err and len(err.splitlines()) == 1, err
    assert config.read_text() == before and [p.name for p in out.iterdir()] == ["norm_1d.py"]


TWO_CLASSES = """
import ttnn


class First:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        return ttnn.add(x, 1.0)


class Second:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        return ttnn.mul(x, 2.0)
"""


def test_a_module_generated_for_another_class_is_not_replaced_without_force(small, tmp_path, capsys):
    """R10: ``two.py:Second`` with the default stem would write the same ``two_1d.py`` as ``First``."""
    module = small.parent / "two.py"
    module.write_text(TWO_CLASSES)
    out = tmp_path / "out"
    assert run(module, "--out", out, "--quiet") == 0
    first = (out / "two_1d.py").read_text()
    assert "class First1D" in first
    assert run(f"{module}:Second", "--out", out, "--quiet") == 2
    err = capsys.readouterr().err
    assert "(class First), not from" in err and "(class Second)" in err and "--name" in err, err
    assert len(err.splitlines()) == 1 and (out / "two_1d.py").read_text() == first


def test_formatter_gets_the_target_as_one_argument_and_must_return_the_module(small, tmp_path, capsys):
    """R13: ``{path}`` is replaced after splitting (a quote or a space in it stays one argument), and a
    formatter's output that does not parse or lost the class is a failing formatter (exit 2), not exit 3."""
    out = tmp_path / "it's a folder"
    assert run(small, "--out", out, "--formatter", "sh -c '[ $# -eq 1 ] && cat' sh {path}", "--quiet") == 0
    assert "class Norm1D" in (out / "norm_1d.py").read_text()
    module = "import ttnn\n\n\nclass Norm1D:\n    pass\n"
    assert run_formatter("cat", module, out / "norm_1d.py") == module
    for command, reason in (
        ("echo hello", "no longer defines Norm1D"),
        ("true", "no longer defines Norm1D"),
        ("echo 'class ('", "does not parse"),
    ):
        with pytest.raises(
            UsageError, match=rf"--formatter: .* did not return the module norm_1d.py: .*{reason}"
        ):
            run_formatter(command, module, out / "norm_1d.py")
    with pytest.raises(UsageError, match="cannot split"):
        run_formatter("ruff format --stdin-filename 'x -", module, out / "norm_1d.py")


def test_name_must_be_a_stem_and_outputs_name_one_place(small, tmp_path, capsys):
    """R26: ``--name`` cannot lead outside ``--out`` or be empty, a report path ending in ``/`` is a folder, an
    output option given twice is a usage error; the module given as its own CONFIG gets a loud note."""
    out = tmp_path / "out"
    for stem in ("../elsewhere", "a/b", "", "..", "my-norm"):  # R31: my-norm made an invalid test function
        assert run(small, "--out", out, "--name", stem) == 2
        assert "--name: expected a file stem" in capsys.readouterr().err
    assert run(small, "--out", out, f"--report={tmp_path / 'sub'}/") == 2
    assert "is a folder path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run(small, "--out", out, "--out", tmp_path / "other")
    assert "--out given twice" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    # without a config, trace-deps cannot follow self.eps (from args.eps): set by __init__ and by no forward, it
    # is still a field computed at construction (it used to stay a run-time read, a gap)
    assert run(small, small, "--out", out, f"--json={tmp_path / 'r.json'}", "--quiet") == 0
    err = capsys.readouterr().err
    assert err.startswith("tttv2-refactor: note: CONFIG") and "is MODULE itself" in err
    assert "not transformed" not in err and "epsilon=self.config.eps" in (out / "norm_1d.py").read_text()
    assert any("is MODULE itself" in note for note in json.loads((tmp_path / "r.json").read_text())["notes"])


def test_the_header_records_the_source_hash_and_older_headers_still_parse():
    from tttv2_tools.refactor.files import parse_header, source_hash

    text = with_header("x = 1\n", "../tt/a.py (class A)", source_hash(b"class A: pass\n"))
    header = parse_header(text)
    assert header == {
        "source": "../tt/a.py (class A)",
        "source_hash": source_hash(b"class A: pass\n"),
        "hash": content_hash("x = 1\n"),
    }
    assert header_state(text) == "ours" and header_state(text.replace("x = 1", "x = 2")) == "edited"
    older = with_header("x = 1\n", "../tt/a.py (class A)")
    assert parse_header(older)["source_hash"] is None and header_state(older) == "ours"
    assert parse_header("x = 1\n") is None


def test_reports_go_to_stdout_without_file_or_with_a_dash_and_the_old_spelling_still_works(
    small, tmp_path, capsys
):
    """docs/cli.md: --json[=FILE] / --report[=FILE]; no FILE or ``-`` is stdout (never a file named ``-``); a bare
    flag never takes MODULE; ``--json FILE`` (not a .py file) is the old spelling, kept with a warning."""
    out = tmp_path / "out"
    for argv in (["--json"], ["--json=-"], ["--json", "-"]):
        assert run(small, "--out", out, *argv, "--quiet") == 0, argv
        stdout = capsys.readouterr().out
        assert json.loads(stdout)["schema"] == "tttv2-refactor-report"
    assert not (tmp_path / "-").exists() and not Path("-").exists()
    assert run("--report", small, "--out", out, "--quiet") == 0  # the bare flag did not take MODULE
    assert capsys.readouterr().out.startswith("# tttv2-refactor report: norm.py")
    assert run(small, "--out", out, "--json", tmp_path / "old.json", "--quiet") == 0
    err = capsys.readouterr().err
    assert err.startswith("tttv2-refactor: warning: '--json ") and f"--json={tmp_path / 'old.json'}" in err
    assert json.loads((tmp_path / "old.json").read_text())["schema"] == "tttv2-refactor-report"
    assert run(small, "--out", out, "--diff", "--json") == 2  # two outputs on stdout
    assert "only one output can go to stdout" in capsys.readouterr().err


def test_the_old_spelling_rewrites_a_report_it_wrote_with_a_relative_name(
    small, tmp_path, monkeypatch, capsys
):
    """``--report r.md`` / ``--json r.json`` run twice from the report's folder: the second run rewrote the files
    too (an existing ``r.md`` once read as the dotted module ``r.md`` and ended in "unrecognized arguments")."""
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        for flag, name in (("--report", "r.md"), ("--json", "r.json")):
            assert run(small, "--out", "out", flag, name, "--quiet") == 0
            assert "the old spelling" in capsys.readouterr().err
    assert Path("r.md").read_text().startswith("# tttv2-refactor report: norm.py")
    assert json.loads(Path("r.json").read_text())["schema"] == "tttv2-refactor-report"


def test_version_quiet_and_debug(capsys):
    from tttv2_tools import _cli

    with pytest.raises(SystemExit) as exc:
        run("--version")
    line = capsys.readouterr().out
    assert (
        exc.value.code == 0
        and line == f"tttv2-refactor {_cli.package_version()} (report schema tttv2-refactor-report)\n"
    )
