"""``emit``: the pytest.param list it writes, what it keeps, what it refuses, --minimal, --check / --diff."""

from __future__ import annotations

import ast
import random
import subprocess
import sys
from pathlib import Path

import libcst.native  # noqa: F401 - see below
import pytest

from tttv2_tools._output import write_text
from tttv2_tools.collect_cases import Case, EmitError
from tttv2_tools.collect_cases.cli import main
from tttv2_tools.collect_cases.emit import emit
from tttv2_tools.collect_cases.minimal import minimal_rows
from tttv2_tools.collect_cases.params import make_ids, project
from tttv2_tools.collect_cases.store import CaseStore

# pytester's in-process run forgets the modules first imported inside it; libcst's native parser (a PyO3 module)
# cannot be imported twice in one process, so it is imported above, before any in-process run
pytest_plugins = ["pytester"]

T = "tttv1.tt.mlp:MLP"


def mlp_case(mesh, mode, seq, model="Llama-3.1-8B-tiny", up="bfloat4_b", hits=1, dim=256):
    fields = {
        "mesh_shape": list(mesh),
        "num_devices": mesh[0] * mesh[1],
        "arch": "wormhole_b0",
        "mode": mode,
        "model_name": model,
        "inputs": [["x", {"shape": [1, 1, seq, dim], "dtype": "bfloat16"}]],
        "weights": {
            "w1": {"shape": [dim, 4 * dim], "dtype": up},
            "w2": {"shape": [4 * dim, dim], "dtype": "bfloat8_b"},
        },
    }
    return Case(T, fields, hits=hits, layers=(0, 1))


CASES = [
    mlp_case((1, 8), "decode", 32),
    mlp_case((1, 8), "prefill", 128),
    mlp_case((1, 1), "prefill", 128, model="Llama-3.2-1B-tiny", up="bfloat8_b"),
    mlp_case((8, 4), "decode", 32, dim=64),
    mlp_case((1, 8), "prefill", 128, up="bfloat8_b"),  # same base id as the second: told apart by w1_dtype
]

HAND_WRITTEN = '''"""My MLP tests."""

import pytest  # comment kept

from tttv2 import ttnn

X = 1   # odd   spacing kept


def helper():
    return [1,2]


# my own note about the cases
MLP_CASES = [
    pytest.param(1, id="old"),
]
'''


RECORDED_COLUMNS = ["mesh_shape", "mode", "model_name", "x_shape", "x_dtype", "w1_dtype", "w2_dtype"]


def test_creates_a_documented_skeleton_that_pytest_collects_under_readable_ids(tmp_path, pytester):
    """With --fields of the recorded vocabulary, the skeleton's test body is the user's to write."""
    target = tmp_path / "test_mlp_1d.py"
    result = emit(CASES, T, target, "MLP_1D_CASES", columns=RECORDED_COLUMNS)
    assert result.old_text is None and result.changed
    text = result.new_text
    assert text.startswith('"""Cases recorded by collect-cases for tttv1.tt.mlp:MLP.')
    assert "from tttv2 import ttnn" in text
    assert "# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_shape,mode,model_name,x_shape,x_dtype,w1_dtype,w2_dtype" in text  # fmt: skip
    # too long for one line of 110: one argument per line, as ruff format would lay it out
    assert '    pytest.param(\n        (1, 8),\n        "decode",\n        "Llama-3.1-8B-tiny",\n' in text
    assert '        ttnn.bfloat4_b,\n        ttnn.bfloat8_b,\n        id="1x8-decode-32-Llama-3.1-8B-tiny",\n    ),' in text  # fmt: skip
    wide = emit(CASES, T, target, "MLP_1D_CASES", columns=RECORDED_COLUMNS, line_length=200).new_text
    assert '    pytest.param((1, 8), "decode", "Llama-3.1-8B-tiny", (1, 1, 32, 256), ttnn.bfloat16, ttnn.bfloat4_b,' in wide  # fmt: skip
    pytester.makepyfile(test_mlp_1d=text)
    collected = pytester.runpytest_inprocess(
        "--collect-only", "-q", "-p", "no:hypothesispytest", "-p", "no:cacheprovider"
    )
    ids = [line.split("[", 1)[1].rstrip("]") for line in collected.outlines if "::test_mlp_1d[" in line]
    assert ids == [
        "1x1-prefill-128-Llama-3.2-1B-tiny",
        "1x8-decode-32-Llama-3.1-8B-tiny",
        "1x8-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
        "1x8-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
        "8x4-decode-32-Llama-3.1-8B-tiny",
    ]


def test_output_is_sorted_stable_and_idempotent(tmp_path):
    target = tmp_path / "test_x.py"
    first = emit(CASES, T, target, "CASES").new_text
    shuffled = list(CASES)
    random.Random(3).shuffle(shuffled)
    assert emit(shuffled, T, target, "CASES").new_text == first
    target.write_text(first)
    again = emit(shuffled, T, target, "CASES")
    assert not again.changed and again.new_text == first


def test_only_the_list_changes_the_rest_of_the_file_is_byte_identical(tmp_path):
    target = tmp_path / "test_mine.py"
    target.write_text(HAND_WRITTEN)
    result = emit(CASES[:2], T, target, "MLP_CASES", force=True)
    head, _ = HAND_WRITTEN.split("MLP_CASES = [")
    assert result.new_text.startswith(head)  # everything before the statement, its comment included
    assert "# collect-cases: target=" in result.new_text.split("MLP_CASES = [")[0].splitlines()[-1]
    assert result.new_text.endswith("]\n") and 'id="old"' not in result.new_text
    assert result.foreign == ["old"] and result.warnings == []


def test_hand_written_entries_and_marks_are_kept_with_a_warning(tmp_path):
    target = tmp_path / "test_mine.py"
    target.write_text(emit(CASES[:2], T, target, "CASES", line_length=200).new_text)
    text = target.read_text().replace(
        'id="1x8-decode-32-Llama-3.1-8B-tiny"', 'id="x", marks=pytest.mark.slow'
    ).replace("CASES = [\n", 'CASES = [\n    pytest.param((2, 2), "decode", "mine", (1,), ttnn.bfloat16, None, None, id="mine"),\n    (1, 2),\n')  # fmt: skip
    target.write_text(text)
    result = emit(CASES[:2], T, target, "CASES", line_length=200)
    assert 'id="1x8-decode-32-Llama-3.1-8B-tiny", marks=pytest.mark.slow' in result.new_text
    assert 'id="mine"' in result.new_text and "    (1, 2),\n" in result.new_text
    assert result.foreign == ["mine", "(1, 2)"]
    assert "kept 2 entries that the store does not produce" in result.warnings[0]
    target.write_text(result.new_text)
    assert not emit(CASES[:2], T, target, "CASES", line_length=200).changed  # kept entries are stable too
    forced = emit(CASES[:2], T, target, "CASES", force=True, line_length=200)
    assert 'id="mine"' not in forced.new_text and "marks=pytest.mark.slow" in forced.new_text


def test_pinned_fields_filters_and_fields_option(tmp_path):
    target = tmp_path / "test_x.py"
    target.write_text(emit(CASES, T, target, "CASES", columns=["mesh_shape", "mode"], topology="1d").new_text)
    text = target.read_text()
    assert "fields=mesh_shape,mode topology=1d" in text and "(8, 4)" not in text
    assert text.count("pytest.param(") == 3  # 1x1 prefill, 1x8 decode, 1x8 prefill: projected and merged
    # without --fields the header's fields are kept
    again = emit(CASES, T, target, "CASES", topology="1d")
    assert not again.changed
    decode = emit(CASES, T, target, "CASES", mode="decode")
    assert decode.new_text.count("pytest.param(") == 2 and "mode=decode" in decode.new_text


def test_minimal_covers_every_value_and_mesh_mode_pair(tmp_path):
    columns = ["mesh_shape", "mode", "model_name", "w1_dtype"]
    rows = project(CASES, columns)
    kept, dropped = minimal_rows(rows, columns)
    assert len(kept) + len(dropped) == len(rows) and dropped
    for i in range(len(columns)):
        assert {r.values[i] for r in kept} == {r.values[i] for r in rows}
    assert {r.values[:2] for r in kept} == {r.values[:2] for r in rows}
    result = emit(CASES, T, tmp_path / "t.py", "CASES", columns=columns, minimal=True)
    id_of = dict(zip((r.values for r in rows), make_ids(rows, columns)))  # ids of the whole selection
    assert result.kept == len(kept) and result.dropped == [id_of[r.values] for r in dropped]
    assert result.dropped == ["1x8-prefill-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b"]
    assert "minimal" in result.new_text.split("CASES = [")[0]


def test_ids_are_unique_when_everything_but_an_unnamed_column_differs():
    a = mlp_case((1, 8), "decode", 32)
    b = mlp_case((1, 8), "decode", 32, up="bfloat8_b")
    rows = project([a, b], ["mesh_shape", "mode", "w1_dtype"])
    assert make_ids(rows, ["mesh_shape", "mode", "w1_dtype"]) == [
        "1x8-decode-w1_dtype=bfloat4_b",
        "1x8-decode-w1_dtype=bfloat8_b",
    ]


def test_ids_fall_back_to_numbers_when_no_column_tells_cases_apart():
    """Model names that differ only in characters an id cannot hold: -2, -3 in sort order, after the column."""
    cases = [mlp_case((1, 8), "decode", 32, model=name) for name in ("m:a", "m a", "m/a")]
    rows = project(cases, ["mesh_shape", "mode", "model_name"])
    assert [r.values[2] for r in rows] == ["m a", "m/a", "m:a"]
    assert make_ids(rows, ["mesh_shape", "mode", "model_name"]) == [
        "1x8-decode-m_a-model_name=m_a",
        "1x8-decode-m_a-model_name=m_a-2",
        "1x8-decode-m_a-model_name=m_a-3",
    ]


@pytest.mark.parametrize(
    "content, name, kwargs, message",
    [
        ("def broken(:\n", "CASES", {}, "does not parse"),
        ("CASES = {}\n", "CASES", {}, "it is a Dict, not a list"),
        ("import pytest\nCASES = []\nCASES = []\n", "CASES", {}, "assigned 2 times"),
        ("import pytest\nCASES = []\n", "CASES", {}, "binds no name 'ttnn'"),
        # R16: pytest.param entries need a module-level `pytest`, as ttnn.<dtype> values need `ttnn`
        ("from tttv2 import ttnn\nCASES = []\n", "CASES", {}, "binds no name 'pytest'"),
        # R15: a class, def or import of that name is not a list either; a list after it would shadow it
        ("import pytest\nimport ttnn\nclass Neg:\n    pass\n", "Neg", {}, "bound by a class \\(line 3\\)"),
        ("import pytest\nimport ttnn\nif True:\n    def CASES(): pass\n", "CASES", {}, "bound by a def"),
        ("import pytest\nimport ttnn\nfrom x import y as CASES\n", "CASES", {}, "bound by an import"),
        ("import pytest\nimport ttnn\nCASES, b = [], 1\n", "CASES", {}, "bound by an unpacking"),
        ("CASES = []\n", "CASES", {"columns": ["pcc"]}, "pcc is not recorded"),
        ("CASES = []\n", "1bad", {}, "expected a Python identifier"),
        (
            "import ttnn\n# collect-cases: target=a:B fields=mode\nCASES = []\n",
            "CASES",
            {},
            "holds cases of a:B",
        ),
        (
            "import pytest\nfrom tttv2 import ttnn\nCASES = []\n@pytest.mark.parametrize('mesh_shape, mode', CASES)\n"
            "def test_x(mesh_shape, mode): pass\n",
            "CASES",
            {"columns": ["mesh_shape", "mode", "model_name"]},
            "does not take the emitted fields",
        ),
    ],
)
def test_refusals(tmp_path, content, name, kwargs, message):
    target = tmp_path / "test_x.py"
    target.write_text(content)
    with pytest.raises(EmitError, match=message):
        emit(CASES, T, target, name, **kwargs)
    assert target.read_text() == content


def test_parametrize_argnames_pin_the_fields_of_an_empty_list(tmp_path):
    target = tmp_path / "test_x.py"
    target.write_text(
        "import pytest\n\nCASES = []\n\n\n@pytest.mark.parametrize(('mesh_shape', 'mode'), CASES)\n"
        "def test_x(mesh_shape, mode):\n    pass\n"
    )
    assert 'pytest.param((1, 1), "prefill", id=' in emit(CASES, T, target, "CASES").new_text


def test_a_list_that_is_the_first_statement_keeps_one_header(tmp_path):
    target = tmp_path / "t.py"
    target.write_text("# my note\nCASES = []\n\nimport pytest\n")
    with pytest.raises(EmitError, match="binds no name 'ttnn'"):
        emit(CASES, T, target, "CASES")
    first = emit(CASES, T, target, "CASES", columns=["mesh_shape", "mode"]).new_text
    assert first.startswith("# my note\n# collect-cases: target=") and first.count("# collect-cases:") == 1
    target.write_text(first)
    assert not emit(CASES, T, target, "CASES").changed
    target.write_text(first.replace("tttv1.tt.mlp:MLP", "a:B"))
    with pytest.raises(EmitError, match="holds cases of a:B"):
        emit(CASES, T, target, "CASES")


def test_no_cases_and_bad_paths_are_errors(tmp_path):
    with pytest.raises(EmitError, match="no recorded cases with mode decode"):
        emit(CASES[2:3], T, tmp_path / "t.py", "CASES", mode="decode")
    with pytest.raises(EmitError, match="is a directory"):
        emit(CASES, T, tmp_path, "CASES")
    with pytest.raises(EmitError, match="does not exist"):
        emit(CASES, T, tmp_path / "no" / "t.py", "CASES")


def _store(tmp_path, cases=CASES):
    path = tmp_path / "s.sqlite"
    with CaseStore(path, create=True) as store:
        store.add_cases(cases, "test")
    return path


def test_cli_check_diff_write_and_minimal(tmp_path, capsys):
    store, target = _store(tmp_path), tmp_path / "test_x.py"
    base = [
        "emit",
        "--fields",
        ",".join(RECORDED_COLUMNS),
    ]  # the recorded vocabulary (a new file: the tests')
    base += ["--store", str(store), "--target", T, "--into", str(target), "--name", "CASES"]
    assert main([*base, "--check"]) == 1 and not target.exists()
    assert "out of date" in capsys.readouterr().err
    assert main([*base, "--diff"]) == 0 and not target.exists()
    assert "+CASES = [" in capsys.readouterr().out
    assert main(base) == 0 and "created CASES" in capsys.readouterr().err
    assert main([*base, "--check"]) == 0 and "up to date (5 cases)" in capsys.readouterr().err
    assert main(base) == 0 and "up to date" in capsys.readouterr().err
    # the skeleton's parametrize pins the fields: other --fields are refused, not silently mismatched
    assert main([*base, "--fields", "mesh_shape,mode,w1_dtype", "--diff"]) == 2
    assert "does not take the emitted fields" in capsys.readouterr().err
    assert main([*base, "--minimal", "--diff"]) == 0
    # one dropped id per line, so a long sweep's list stays greppable
    assert (
        "--minimal kept 4 cases and dropped 1:\n  1x8-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b\n"
        in (capsys.readouterr().err)
    )
    assert main([*base[:-4], "--into", str(store), "--name", "CASES"]) == 2
    assert "is the store itself" in capsys.readouterr().err


def test_a_list_the_file_lacks_is_added_at_its_end(tmp_path):
    target = tmp_path / "test_mine.py"
    target.write_text(HAND_WRITTEN)
    result = emit(CASES[:2], T, target, "NEW_CASES")
    assert result.new_text.startswith(HAND_WRITTEN + "\n\n# collect-cases: target=")
    assert result.new_text.count("pytest.param(") == 3 and result.warnings == []
    target.write_text(result.new_text)
    assert not emit(CASES[:2], T, target, "NEW_CASES").changed


def test_a_byte_order_mark_and_crlf_line_ends_are_kept(tmp_path):
    """R34: only the list changes, also in a file with a UTF-8 BOM and CRLF line ends (and the list gets them)."""
    target = tmp_path / "test_crlf.py"
    before = '\ufeff"""Tést."""\r\nimport pytest\r\nfrom tttv2 import ttnn\r\n\r\nCASES: list = []\r\n\r\nTAIL = 1\r\n'
    target.write_bytes(before.encode("utf-8"))
    text = emit(CASES, T, target, "CASES").new_text
    assert text.startswith(
        '\ufeff"""Tést."""\r\nimport pytest\r\nfrom tttv2 import ttnn\r\n\r\n# collect-cases:'
    )
    assert text.endswith("]\r\n\r\nTAIL = 1\r\n") and "\n" not in text.replace("\r\n", "")
    write_text(target, text)
    assert target.read_bytes().startswith(b'\xef\xbb\xbf"""T') and not emit(CASES, T, target, "CASES").changed


def test_a_list_extended_or_sliced_elsewhere_is_still_the_list(tmp_path):
    """``+=`` and item assignment bind no new value to ``--name``: only class/def/import/unpacking ones refuse."""
    target = tmp_path / "test_x.py"
    target.write_text("import pytest\nfrom tttv2 import ttnn\n\nCASES = []\nCASES += []\nCASES[0:0] = []\n")
    text = emit(CASES, T, target, "CASES").new_text
    assert "pytest.param(" in text and text.endswith("]\nCASES += []\nCASES[0:0] = []\n")


def test_drop_unrecorded_replaces_emit_force_which_still_works_with_a_warning(tmp_path, capsys):
    """``--force`` means "replace a file" in every tool; emit's "drop hand-written entries" is --drop-unrecorded
    (the old --force still does it, with a one-line warning)."""
    store, target = _store(tmp_path), tmp_path / "test_x.py"
    base = ["emit", "--store", str(store), "--target", T, "--into", str(target), "--name", "CASES", "-q"]
    assert main(base) == 0 and capsys.readouterr().err == ""  # -q: no summary line
    text = target.read_text().replace("CASES = [\n", "CASES = [\n    (1, 2),\n")
    for flag, warning in (("--drop-unrecorded", False), ("--force", True)):
        target.write_text(text)
        assert main(base) == 0
        assert "--drop-unrecorded drops them" in capsys.readouterr().err and "(1, 2)" in target.read_text()
        assert main([*base, flag]) == 0 and "(1, 2)" not in target.read_text()
        err = capsys.readouterr().err
        assert ("collect-cases: warning: emit --force is now spelled --drop-unrecorded" in err) == warning, (
            err
        )


# --- one vocabulary with the generated tests (issue 23) -----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = Path(__file__).parent / "data" / "tttv1_catalogue_cases.csv"


def _catalogue_mlp(tmp_path, keep=lambda case: True):
    """A store of the MLP cases of the checked-in catalogue sweep (real recordings, not shaped for this test)."""
    from tttv2_tools.collect_cases.csvio import import_csv

    cases = [c for c in import_csv(CATALOGUE, T) if keep(c)]
    return _store(tmp_path, cases), cases


def _params(path: Path, name: str) -> set:
    """``(values, id)`` of every ``pytest.param`` of the list ``name`` in a test file."""
    tree = ast.parse(path.read_text())
    (value,) = [
        s.value for s in tree.body if isinstance(s, ast.Assign) and getattr(s.targets[0], "id", None) == name
    ]
    return {
        (
            tuple(ast.unparse(a) for a in call.args),
            next(k.value.value for k in call.keywords if k.arg == "id"),
        )
        for call in value.elts
    }


def test_emit_into_a_generated_test_writes_what_refactor_cases_wrote(tmp_path, capsys):
    """The columns of a generated test (its ``PARAMETERS``) are columns of every recorded case: emitting a store
    into ``tttv2-refactor --cases``' own list gives the same entries, values and ids (it was refused: no ttnn)."""
    from tttv2_tools.refactor.cli import main as refactor

    store, _ = _catalogue_mlp(tmp_path, lambda c: c.flat.get("model_name") == "Llama-3.2-1B-tiny")
    tests = tmp_path / "tests"
    argv = [str(ROOT / "tttv1" / "tt" / "mlp.py"), "--out", str(tmp_path / "out"), "--tests-out", str(tests)]
    assert refactor([*argv, "--cases", str(store), "-q"]) == 0
    generated = tests / "test_mlp_1d.py"
    written = _params(generated, "CASES")
    assert len(written) == 6  # 1x1, 1x2, 1x8 (N150, N300, T3K), decode and prefill
    command = ["emit", "--store", str(store), "--target", str(ROOT / "tttv1" / "tt" / "mlp.py")]
    command += ["--into", str(generated), "--name", "CASES", "--topology", "1d", "-q"]
    before = generated.read_bytes()
    assert main([*command, "--check"]) == 0  # refactor wrote emit's own layout and header
    assert main(command) == 0 and generated.read_bytes() == before
    assert _params(generated, "CASES") == written
    assert "# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_device,mode,seq_len,model_name,recorded" in (
        generated.read_text()
    )


def test_a_case_recorded_without_a_mode_has_the_generated_tests_mode_forward(tmp_path, capsys):
    """A forward that takes no mode records none: its case's `mode` column is "forward" (what the generated tests
    call it, docs/refactor.md), in the flat columns, an emitted mode column, the ids and `list`; a stored
    `mode: null` (an imported row) is no mode either; a recorded mode is kept."""
    from tttv2_tools.collect_cases.cases import NO_MODE

    fields = {"mesh_shape": [1, 8], "model_name": "Qwen2.5-7B-tiny"}
    fields["inputs"] = [["x", {"shape": [1, 1, 1, 32], "dtype": "uint32"}]]
    target = "tttv1.tt.embedding:Embedding"
    modeless, null_mode = Case(target, fields), Case(target, {**fields, "mode": None})
    assert modeless.mode == null_mode.mode == NO_MODE == "forward"
    assert Case(target, {**fields, "mode": "decode"}).flat["mode"] == "decode"
    store = _store(tmp_path, [modeless])
    test_file = tmp_path / "test_embedding.py"
    command = ["emit", "--store", str(store), "--target", target, "--into", str(test_file), "--name", "E"]
    assert main([*command, "--fields", "mesh_shape,mode,model_name", "-q"]) == 0
    assert '(1, 8), "forward", "Qwen2.5-7B-tiny", id="1x8-forward-Qwen2.5-7B-tiny"' in test_file.read_text()
    capsys.readouterr()
    assert main(["list", "--store", str(store), "--target", target]) == 0
    assert "forward" in capsys.readouterr().out


def test_a_new_files_skeleton_is_a_test_that_runs(tmp_path):
    """Without --fields a new file gets the generated tests' columns and a test that builds and calls the TTTv1
    class on each case from the fixtures (tttv1.testing's for a tttv1 target): it passes, where the skeleton
    used to call pytest.fail."""
    store, cases = _catalogue_mlp(
        tmp_path,
        lambda c: (
            c.mesh_shape == (1, 2) and c.mode == "decode" and c.flat.get("model_name") == "Qwen2.5-7B-tiny"
        ),
    )
    assert len(cases) == 1
    target = tmp_path / "test_recorded_mlp.py"
    command = [
        "emit",
        "--store",
        str(store),
        "--target",
        T,
        "--into",
        str(target),
        "--name",
        "MLP_CASES",
        "-q",
    ]
    assert main(command) == 0
    text = target.read_text()
    assert "pytest.fail" not in text and "from tttv1.testing import *" in text
    assert (
        "# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_device,mode,seq_len,model_name,recorded" in text
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(target)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert main([*command, "--check"]) == 0  # the skeleton's list is the store's


def test_a_new_files_skeleton_for_another_target_names_the_conftest():
    from tttv2_tools.collect_cases.emit import RUNNING_SKELETON

    assert (
        "conftest.py provides them"
        in emit(
            [Case("acme.feed_forward:FeedForward", {"mesh_shape": [1, 2], "mode": "decode"})],
            "acme.feed_forward:FeedForward",
            Path("/nonexistent-dir-is-not-read/test_ff.py").parent.parent / "test_ff.py",
            "FF_CASES",
        ).new_text
        and "{cls}" in RUNNING_SKELETON
    )
