"""trace-deps never destroys its input, fails cleanly on I/O errors and never misses code paths silently
(issue 9: the argument-order data loss, --strict blind spots, BOM / PEP 263 files, markup in key names)."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from tttv2_tools.trace_dependencies import analyze
from tttv2_tools.trace_dependencies.cli import main
from tttv2_tools.trace_dependencies.report import render, render_why

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture
def g2(tmp_path):
    """A private copy of the G2 fixture folder (the tests try to make the tool overwrite its files)."""
    folder = tmp_path / "g2"
    shutil.copytree(FIX / "g2", folder)
    return folder


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# -- one unambiguous CLI: an output flag never takes the next argument ---------------------------------------
def test_json_flag_before_the_module_analyses_the_module(g2, capsys):
    before = snapshot(g2)
    code, out, err = run(capsys, "--json", g2 / "mlp.py", g2 / "model_config.py")
    assert code == 0, err
    data = json.loads(out)
    assert (
        data["module"] == "mlp.py" and data["config"] == "model_config.py" and data["module_class"] == "MLP"
    )
    assert snapshot(g2) == before


@pytest.mark.parametrize("victim", ["mlp.py", "model_config.py", "ccl.py"])
def test_refuses_to_write_onto_any_input(g2, capsys, victim):
    before = snapshot(g2)
    for fmt in ("json", "html"):
        code, out, err = run(capsys, g2 / "mlp.py", g2 / "model_config.py", f"--{fmt}={g2 / victim}")
        assert code == 2 and out == ""
        assert "refusing to" in err and victim in err and err.count("\n") == 1
    assert snapshot(g2) == before


def test_old_spelling_with_a_separate_file_is_a_usage_error(g2, capsys, tmp_path):
    code, _, err = run(capsys, g2 / "mlp.py", "--html", tmp_path / "out.html")
    # the hint names the flag that was typed (--html=FILE, not --json=FILE)
    assert code == 2 and f"--html={tmp_path / 'out.html'}" in err and "not a Python file" in err
    code, _, err = run(capsys, "--svg", tmp_path / "out.svg")  # the word became MODULE
    assert code == 2 and f"e.g. --svg={tmp_path / 'out.svg'}" in err and "MODULE" in err
    assert err.startswith("trace-deps: error: ") and err.count("\n") == 1
    code, _, err = run(capsys, g2 / "mlp.py", g2 / "model_config.py", "--json", tmp_path / "out.json")
    assert code == 2 and "too many positional arguments" in err and f"--json={tmp_path / 'out.json'}" in err
    assert not (tmp_path / "out.html").exists() and not (tmp_path / "out.json").exists()


def test_abbreviated_output_flag_is_not_accepted(g2, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--js", str(g2 / "mlp.py"), str(g2 / "model_config.py")])
    assert exc.value.code == 2
    capsys.readouterr()


def test_two_outputs_to_one_file_are_refused(g2, capsys, tmp_path):
    target = tmp_path / "out.txt"
    code, _, err = run(capsys, g2 / "mlp.py", f"--dot={target}", f"--mermaid={target}")
    assert code == 2 and "dot output and mermaid output would both write" in err and not target.exists()


def test_second_stdout_writer_is_refused(g2, capsys):
    code, out, err = run(capsys, g2 / "mlp.py", "--dot", "--why", "FF1_3_TG_PROGCFG")
    assert code == 2 and out == "" and "only one output can go to stdout, got --dot --why" in err


def test_json_with_why_is_valid_json(g2, capsys):
    code, out, err = run(capsys, g2 / "mlp.py", "--json", "--why", "FF1_3_TG_PROGCFG")
    assert code == 0, err
    data = json.loads(out)
    why = data["why"]
    assert why["name"] == "FF1_3_TG_PROGCFG" and why["targets"] == ["key:FF1_3_TG_PROGCFG"]
    assert why["paths"] and all(path[-1]["node"] == "key:FF1_3_TG_PROGCFG" for path in why["paths"])
    assert data["keys_read"]  # still the whole analysis
    code, out, err = run(capsys, g2 / "mlp.py", "--json", "--why", "no-such-thing")
    # an unknown name is a usage error before any output, as without --json (one line on stderr, no JSON)
    assert (
        code == 2
        and out == ""
        and err.startswith("trace-deps: error: --why")
        and "nothing by that name" in err
    )


# -- I/O errors: exit 2 with one line ---------------------------------------------------------------------
def test_output_onto_a_folder_exits_2(g2, capsys, tmp_path):
    code, _, err = run(capsys, g2 / "mlp.py", f"--json={tmp_path}")
    assert code == 2 and "is a folder" in err and err.count("\n") == 1


def test_disk_full_exits_2_and_keeps_the_old_file(g2, capsys, tmp_path, monkeypatch):
    code, _, err = run(capsys, g2 / "mlp.py", "--json=/dev/full")  # a real ENOSPC
    assert code == 2 and "No space left on device" in err and err.count("\n") == 1
    target = tmp_path / "out.json"
    old = '{"schema": "trace-deps"}'  # an earlier output: may be replaced
    target.write_text(old)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    code, _, err = run(capsys, g2 / "mlp.py", f"--json={target}")
    assert code == 2 and f"cannot write json output to {target}: No space left on device" in err
    assert target.read_text() == old and sorted(p.name for p in tmp_path.iterdir()) == ["g2", "out.json"]


def _folder_that_refuses_new_files(tmp_path: Path) -> Path | None:
    """A real folder where creating a file fails with EACCES: a read-only folder (not for root), else sysfs."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    for folder in (locked, Path("/sys")):
        try:
            os.close(os.open(folder / ".probe", os.O_CREAT | os.O_WRONLY, 0o600))
            os.unlink(folder / ".probe")
        except PermissionError:
            return folder
        except OSError:
            continue
    return None


def test_permission_denied_exits_2_not_internal_error(g2, capsys, tmp_path, monkeypatch):
    folder = _folder_that_refuses_new_files(tmp_path)
    if folder is None:  # root on a machine without sysfs: make the temporary file creation refuse instead

        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path))

        import tttv2_tools._output as output

        monkeypatch.setattr(output, "temp_name", refuse)
        folder = tmp_path
    target = folder / "out.json"
    code, out, err = run(capsys, g2 / "mlp.py", f"--json={target}")
    assert code == 2 and out == "" and err.count("\n") == 1, err  # exit 3 "internal error" before
    assert f"cannot write json output to {target}: Permission denied" in err


def test_io_error_while_printing_the_report_exits_2(g2, capsys, monkeypatch):
    import tttv2_tools.trace_dependencies.report as report

    def closed(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(report, "render", closed)
    code, _, err = run(capsys, g2 / "mlp.py")
    assert code == 2 and err == f"trace-deps: error: I/O error: {os.strerror(errno.EIO)}\n"


def test_output_file_gets_the_umask_mode(g2, capsys, tmp_path):
    old = os.umask(0o022)
    try:
        code, _, _ = run(capsys, g2 / "mlp.py", f"--json={tmp_path / 'out.json'}", "--quiet")
    finally:
        os.umask(old)
    assert code == 0 and (tmp_path / "out.json").stat().st_mode & 0o777 == 0o644


def test_unreadable_input_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path)
    assert code == 2 and "no such file" in err and err.count("\n") == 1


@pytest.mark.parametrize("value", ["-5", "0", "abc"])
def test_width_is_validated(capsys, value):
    with pytest.raises(SystemExit) as exc:
        main([str(FIX / "g2" / "mlp.py"), "--width", value])
    assert exc.value.code == 2
    assert "--width: expected an integer >= 20" in capsys.readouterr().err


# -- files Python reads are read ------------------------------------------------------------------------------
MODULE = """class MLP:
    def forward(self, x, mode):
        # {comment}
        if mode == "decode":
            return self.model_config["K"]
        return x
"""


def test_bom_and_pep263_files_are_read_as_python_reads_them(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text(MODULE.format(comment="ascii"), encoding="utf-8")
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + MODULE.format(comment="café").encode("utf-8"))
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n" + MODULE.format(comment="café")).encode("latin-1"))
    want = analyze(plain, auto_config=False)
    for path, shift in ((bom, 0), (latin, 1)):
        a = analyze(path, auto_config=False)
        assert a.keys_read() == want.keys_read() == ["K"]
        (b,) = [b for b in a.branches if b.construct == "if"]
        assert b.loc == f"{path.name}:{4 + shift}:11"  # the BOM does not shift columns


# -- user text is never rich markup -------------------------------------------------------------------------
def test_markup_in_key_names_is_printed_literally(tmp_path, capsys):
    module = tmp_path / "mlp.py"
    module.write_text(
        'class MLP:\n    def forward(self, x, mode):\n        return self.model_config[":key: [red]K[/red]"]\n'
    )
    code, out, _ = run(capsys, module, "--width", "200")
    assert code == 0 and ":key: [red]K[/red]" in out and "\N{KEY}" not in out
    buffer = io.StringIO()
    render(analyze(module, auto_config=False), Console(file=buffer, width=200))  # a caller's default console
    assert ":key: [red]K[/red]" in buffer.getvalue() and "\N{KEY}" not in buffer.getvalue()
    buffer = io.StringIO()
    render_why(analyze(module, auto_config=False), ":key: [red]K[/red]", Console(file=buffer, width=200))
    assert "why :key: [red]K[/red]" in buffer.getvalue()


# -- nothing is missed silently ------------------------------------------------------------------------------
DYNAMIC = """import ttnn


class MLP:
    def forward(self, x, mode, name):
        exec("x = 1")
        y = eval(name)
        z = getattr(ttnn, name)(x)
        w = getattr(ttnn, "linear")(x, x)
        return y, z, w
"""


def test_dynamic_constructs_are_explicit_unknowns(tmp_path, capsys):
    module = tmp_path / "mlp.py"
    module.write_text(DYNAMIC)
    a = analyze(module, auto_config=False)
    assert {u for u in a.unknowns() if u.startswith("unknown:dynamic:")} == {
        "unknown:dynamic:mlp.py:6:8",
        "unknown:dynamic:mlp.py:7:12",
        "unknown:dynamic:mlp.py:8:12",
    }
    warnings = {s.loc: s.reason for s in a.skipped if s.severity == "warning"}
    assert "exec() runs code chosen at run time" in warnings["mlp.py:6:8"]
    assert "getattr(ttnn, name)" in warnings["mlp.py:8:12"]
    assert "mlp.py:7:12" in warnings
    code, _, err = run(capsys, module, "--strict", "--quiet")
    assert code == 1 and "--strict" in err


def test_config_dict_under_any_parameter_name(tmp_path):
    (tmp_path / "helpers.py").write_text(
        "import ttnn\n\n\ndef project(cfg, x):\n    return ttnn.linear(x, memory_config=cfg['W_MEMCFG'])\n"
    )
    (tmp_path / "mlp.py").write_text(
        "from .helpers import project\n\n\nclass MLP:\n"
        "    def __init__(self, args, model_config):\n        self.model_config = model_config\n\n"
        "    def forward(self, x, mode):\n        return project(self.model_config, x)\n"
    )
    (tmp_path / "model_config.py").write_text(
        "class ModelArgs:\n    def __init__(self, mesh_device):\n        self.model_config = {}\n"
        "        self.model_config['W_MEMCFG'] = mesh_device.get_num_devices()\n"
    )
    a = analyze(tmp_path / "mlp.py")
    (read,) = [r for r in a.reads if r.name == "W_MEMCFG"]
    assert read.loc == "helpers.py:5:40" and read.resolved
    assert [d.loc for d in a.definitions["W_MEMCFG"]] == ["model_config.py:4:8"]


def test_import_cycle_back_into_the_module_keeps_its_ops(tmp_path):
    (tmp_path / "helpers.py").write_text("from mlp import scale\n\n\ndef run(x):\n    return scale(x)\n")
    (tmp_path / "mlp.py").write_text(
        "import ttnn\nfrom helpers import run\n\n\ndef scale(x):\n    return ttnn.softmax(x)\n\n\n"
        "class MLP:\n    def forward(self, x, mode):\n        return run(x)\n"
    )
    a = analyze(tmp_path / "mlp.py", auto_config=False)
    (op,) = [o for o in a.ops if o.op == "ttnn.softmax"]
    assert op.loc == "mlp.py:6:11" and op.via == ["run", "scale"]
    assert all("ttnn.softmax" in ops for ops in a.paths.values())


def test_depth_limits_report_what_they_cut(tmp_path, capsys):
    chain = ".copy()" * 40
    module = tmp_path / "mlp.py"
    module.write_text(
        "import os\n\n\nclass MLP:\n    def forward(self, x, mode):\n"
        f"        v = os.environ{chain}.get('A')\n        if v:\n            return x\n        return x\n"
    )
    a = analyze(module, auto_config=False)
    cut = [u for u in a.unknowns() if u.startswith("unknown:depth:mlp.py:6:")]
    assert cut and any("nested deeper than 24 levels" in s.reason for s in a.skipped)
    (branch,) = a.branches
    assert "unknown" not in branch.factors or branch.classification  # classified, not silently constant
    code, out, _ = run(capsys, module, "--why", "mlp.py:7", "--width", "200")
    assert code == 0 and "a constant" not in out and "env *" in out
    code, _, _ = run(capsys, module, "--strict", "--quiet")
    assert code == 1


# -- existing files: only trace-deps' own outputs are replaced without --force -------------------------------
FILE_FORMATS = ("json", "dot", "graphml", "mermaid", "html", "svg")


def test_existing_user_files_are_refused_without_force(g2, capsys, tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n')
    for fmt in FILE_FORMATS:
        code, out, err = run(capsys, g2 / "mlp.py", g2 / "model_config.py", f"--{fmt}={notes}")
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert f"refusing to overwrite {notes}" in err and "--force" in err
    assert notes.read_text() == '{"mine": true}\n'
    fresh = tmp_path / "fresh.dot"  # a refusal of one output writes none of the others
    code, _, _ = run(capsys, g2 / "mlp.py", f"--dot={fresh}", f"--json={notes}")
    assert code == 2 and not fresh.exists()
    code, _, err = run(capsys, g2 / "mlp.py", f"--json={notes}", "--force", "--quiet")
    assert code == 0 and json.loads(notes.read_text())["schema"] == "trace-deps", err


def test_rerunning_the_same_command_replaces_its_own_outputs(g2, capsys, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    argv = [g2 / "mlp.py", "--quiet", *(f"--{fmt}={folder / ('out.' + fmt)}" for fmt in FILE_FORMATS)]
    assert run(capsys, *argv)[0] == 0
    first = snapshot(folder)
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    assert snapshot(folder) == first
    # one format's output is not another's: an SVG is not replaced by the DOT output
    code, _, err = run(capsys, g2 / "mlp.py", f"--dot={folder / 'out.svg'}")
    assert code == 2 and "is not a trace-deps dot output" in err


def test_links_to_inputs_are_refused_even_with_force(g2, capsys, tmp_path):
    before = snapshot(g2)
    (tmp_path / "sym.json").symlink_to(g2 / "mlp.py")
    os.link(g2 / "model_config.py", tmp_path / "hard.json")
    for name in ("sym.json", "hard.json"):
        code, _, err = run(
            capsys, g2 / "mlp.py", g2 / "model_config.py", f"--json={tmp_path / name}", "--force"
        )
        assert code == 2 and "refusing to write json output onto the input file" in err
    assert snapshot(g2) == before


def test_links_to_the_found_config_and_helper_files_are_refused_even_with_force(g2, capsys, tmp_path):
    """R12: the config found next to the module and the helper files the analysis read are inputs too, and a
    symlink is judged by the file it points to (a ``.json`` name onto ``ccl.py`` is still a Python file)."""
    before = snapshot(g2)
    (tmp_path / "config.json").symlink_to(g2 / "model_config.py")
    (tmp_path / "helper.json").symlink_to(g2 / "ccl.py")
    os.link(g2 / "model_config.py", tmp_path / "hard-config.json")
    os.link(g2 / "ccl.py", tmp_path / "hard-helper.json")
    for name, reason in (
        ("config.json", "refusing to overwrite the Python file"),
        ("helper.json", "refusing to overwrite the Python file"),
        ("hard-config.json", "refusing to write json output onto the input file"),
        ("hard-helper.json", "refusing to write json output onto the input file"),
    ):
        code, out, err = run(capsys, g2 / "mlp.py", f"--json={tmp_path / name}", "--force")
        assert code == 2 and out == "" and reason in err and name in err and err.count("\n") == 1, (name, err)
    assert snapshot(g2) == before


def test_dev_null_is_written_in_place(g2, capsys):
    code, _, err = run(capsys, g2 / "mlp.py", "--json=/dev/null", "--quiet")
    assert code == 0 and err == "" and Path("/dev/null").is_char_device()


def test_a_folder_path_or_a_repeated_output_flag_is_a_usage_error(g2, capsys, tmp_path):
    """R26: ``--json=sub/`` names a folder (not a file ``sub``), and a second ``--json=`` would silently drop the
    first."""
    code, out, err = run(capsys, g2 / "mlp.py", f"--json={tmp_path / 'sub'}/")
    assert (
        code == 2
        and out == ""
        and err == f"trace-deps: error: --json: {tmp_path / 'sub'}/ is a folder path; expected a file\n"
    )
    with pytest.raises(SystemExit) as exc:
        main([str(g2 / "mlp.py"), f"--json={tmp_path / 'a.json'}", f"--json={tmp_path / 'b.json'}"])
    assert exc.value.code == 2 and "--json given twice" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g2"]
