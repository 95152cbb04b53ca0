"""Shadow verification is part of ``--tests-out`` runs (issue 21, item 5): after writing, tttv2-refactor runs the
generated equivalence and topology tests in a fresh interpreter. A case that differs or raises is a gap with a
location (exit 1; nothing kept without ``--partial``); a case that cannot run (a missing fixture, TTTv1 itself
raising) is a note; ``--no-verify`` skips the run.

Inputs: the built-in ``tttv1`` package (its fixtures come with it), and ``inputs/tmx`` (not tttv1: its own conftest),
whose ``args_expert.py`` calls a ModelArgs method only past ``prefill_len_cutoff`` (the tmx ModelArgs lacks it):
the generated module calls it at construction and fails where TTTv1 runs. (``expert.py``, which reads a config key
only past the cutoff as tt-metal's ``TtMixtralMLP`` does, passes since that read is computed only when present.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tttv2_tools.refactor import proof
from tttv2_tools.refactor.cli import main

ROOT = Path(__file__).resolve().parents[3]
TMX = Path(__file__).parent / "inputs" / "tmx"
CONFTEST = TMX / "tests" / "conftest.py"
MISSING = "AttributeError: 'ModelArgs' object has no attribute 'get_long_prompt_progcfg'"  # args_expert.py's call past the cutoff


def _tmx(tmp_path: Path, name: str, *more, conftest: bool = True) -> tuple[int, Path]:
    tests = tmp_path / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    if conftest:
        shutil.copy(CONFTEST, tests / "conftest.py")
    argv = [TMX / "tt" / f"{name}.py", "--out", tmp_path / "out", "--tests-out", tests, *more]
    return main([str(a) for a in argv]), tests


def test_a_builtin_module_is_verified_with_tttv1s_own_fixtures(tmp_path, capsys, monkeypatch):
    """No conftest in the tests folder: tttv1's fixtures come with the package (loaded as a pytest plugin)."""
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "r.json"
    argv = [ROOT / "tttv1" / "tt" / "rmsnorm.py", "--out", "o", "--tests-out", "t", f"--json={report}"]
    assert main([str(a) for a in argv]) == 0
    err = capsys.readouterr().err
    summary = [line for line in err.splitlines() if "shadow verification:" in line]
    assert len(summary) == 1 and " FAILED" not in summary[0], err
    passed, ran = (int(w) for w in summary[0].split("verification: ")[1].split(" case")[0].split(" of "))
    assert passed == ran and ran >= 8, summary  # 1D and 2D, every mesh and mode of the default matrix
    assert any("shadow verification" in n for n in json.loads(report.read_text())["notes"])


def test_a_case_the_generated_module_fails_is_a_gap_at_its_line_and_nothing_is_kept(tmp_path, capsys):
    code, _tests = _tmx(tmp_path, "args_expert")
    err = capsys.readouterr().err
    assert code == 1
    (line,) = [e for e in err.splitlines() if e.startswith("tttv2-refactor: verify failed:")]
    assert "args_expert_1d.py:" in line and MISSING in line, line
    assert "case test_args_expert_1d_matches_tttv1[1x1-decode-32] and 8 more" in line  # one gap for that line
    assert "nothing written" in err
    assert not (tmp_path / "out").exists()  # the folder the run created goes too
    assert sorted(p.name for p in (tmp_path / "tests").iterdir()) == ["conftest.py"]


def test_with_partial_the_files_are_kept_and_the_report_lists_the_gap(tmp_path, capsys):
    report = tmp_path / "r.json"
    code, tests = _tmx(tmp_path, "args_expert", "--partial", f"--json={report}")
    err = capsys.readouterr().err
    assert code == 1 and err.count(MISSING) == 1, err
    assert (tmp_path / "out" / "args_expert_1d.py").is_file() and (tests / "test_args_expert_1d.py").is_file()
    (gap,) = json.loads(report.read_text())["gaps"]
    assert gap["what"] == "verify" and gap["loc"].startswith("args_expert_1d.py:")


def test_a_config_key_read_only_past_the_cutoff_is_computed_only_when_present(tmp_path, capsys):
    """``expert.py`` reads ``PREFILL_EXPERT_PROGCFG`` only for prompts past ``prefill_len_cutoff``, and the tmx
    config never defines it (tt-metal's TtMixtralMLP with a config that lacks its long-prompt program configs):
    the field is computed only when the dict has the key, so every case up to the cutoff equals TTTv1 (it was
    a KeyError at construction, 0 of 9)."""
    code, _tests = _tmx(tmp_path, "expert")
    err = capsys.readouterr().err
    assert code == 0 and "shadow verification: 9 of 9 case(s) equal to TTTv1" in err, err
    generated = (tmp_path / "out" / "expert_1d.py").read_text()
    assert 'if "PREFILL_EXPERT_PROGCFG" in legacy.model_config else None' in generated


def test_a_failed_run_puts_back_what_the_files_held(tmp_path, capsys):
    """Generated once without verification, then again with it: the failing run leaves the first run's files."""
    code, tests = _tmx(tmp_path, "args_expert", "--no-verify")
    assert code == 0
    before = (tmp_path / "out" / "args_expert_1d.py").read_text()
    test_text = (tests / "test_args_expert_1d.py").read_text()
    (tmp_path / "out" / "args_expert_1d.py").write_text(
        before.replace("\n", "\n\n", 1)
    )  # the tool's file, edited
    capsys.readouterr()
    assert _tmx(tmp_path, "args_expert", "--force")[0] == 1
    assert (tmp_path / "out" / "args_expert_1d.py").read_text() == before.replace("\n", "\n\n", 1)
    assert (tests / "test_args_expert_1d.py").read_text() == test_text


def test_no_fixture_is_a_note_not_a_gap_and_no_verify_skips_the_run(tmp_path, capsys):
    code, _tests = _tmx(tmp_path, "mlp", conftest=False)
    err = capsys.readouterr().err
    assert code == 0
    assert "not run: no fixture `mesh_device`" in err and "nothing was proven" in err
    assert _tmx(tmp_path, "mlp", "--no-verify", conftest=False)[0] == 0
    assert "shadow verification" not in capsys.readouterr().err


def test_a_module_that_matches_passes_with_its_packages_conftest_and_quiet_keeps_the_notes(tmp_path, capsys):
    code, _tests = _tmx(tmp_path, "mlp", "--quiet")
    assert code == 0
    # the summary is progress, and nothing was missing
    assert "shadow verification" not in capsys.readouterr().err
    assert _tmx(tmp_path / "bare", "mlp", "--quiet", conftest=False)[0] == 0
    assert "no fixture `mesh_device`" in capsys.readouterr().err


ONE_ULP = """

_exact = MLP1D.prefill_forward


def _prefill_forward(self, x):
    import torch

    out = _exact(self, x)
    parts = ttnn.get_device_tensors(out)
    values = ttnn.to_torch(parts[0]).reshape(-1).clone()
    values.view(torch.int16)[3] += 1  # the next bfloat16 after the 4th value
    parts[0] = ttnn.from_torch(
        values.reshape(list(parts[0].shape)), dtype=parts[0].dtype, layout=parts[0].layout,
        device=parts[0].device(), memory_config=parts[0].memory_config(),
    )
    return ttnn.combine_device_tensors(parts)


MLP1D.prefill_forward = _prefill_forward
"""


def test_a_difference_of_one_ulp_is_located_at_the_test_and_names_the_value(tmp_path, monkeypatch):
    """A difference raises in the comparison, not in the generated module: the gap is at the test case."""
    monkeypatch.chdir(tmp_path)
    code, tests = _tmx(tmp_path, "mlp", "--no-verify")
    assert code == 0
    module = tmp_path / "out" / "mlp_1d.py"
    module.write_text(module.read_text() + ONE_ULP)
    found = proof.verify_tests([tests / "test_mlp_1d.py"], [module], roots=[TMX.parent])
    assert len(found.passed) >= 4 and found.failed == 4, found  # 1x1, 1x2, 1x8 at 128 rows, 1x1 at 256
    (gap,) = found.gaps
    assert gap.loc.startswith("test_mlp_1d.py::test_mlp_1d_matches_tttv1[") and "prefill" in gap.loc, gap
    assert "MLP prefill: device 0, index [0, 0, 0, 3]: " in gap.reason and "and 3 more" in gap.reason, gap


def test_a_case_tttv1_itself_cannot_run_is_a_note(tmp_path, monkeypatch):
    """A conftest that gives TTTv1 an input it does not take: nothing to compare, said as such."""
    monkeypatch.chdir(tmp_path)
    code, tests = _tmx(tmp_path, "mlp", "--no-verify")
    assert code == 0
    narrow = (
        "\n\n@pytest.fixture\ndef x(mesh_device, seq_len):  # half the model's width\n"
        "    values = np.zeros((1, 1, seq_len, 32), np.float32)\n"
        "    return ttnn.from_numpy(values, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh_device,\n"
        "                           mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device))\n"
    )
    (tests / "conftest.py").write_text(CONFTEST.read_text() + narrow)
    module = tmp_path / "out" / "mlp_1d.py"
    found = proof.verify_tests([tests / "test_mlp_1d.py"], [module], roots=[TMX.parent])
    assert found.unsupported and not found.gaps, found
    assert any("TTTv1 itself raised" in n for n in found.notes())


def test_a_run_that_cannot_start_or_takes_too_long_is_a_gap(tmp_path):
    missing = proof.verify_tests([tmp_path / "test_none.py"], [])
    (gap,) = missing.gaps
    assert gap.loc == "test_none.py" and "did not run: pytest exited 4" in gap.reason
    (test := tmp_path / "test_slow.py").write_text(
        "import time\n\n\ndef test_slow_matches_tttv1():\n    time.sleep(30)\n"
    )
    (gap,) = proof.verify_tests([test], [], timeout=3).gaps
    assert "longer than 3 s" in gap.reason


def test_a_collection_error_is_a_gap_at_the_test_file(tmp_path):
    (test := tmp_path / "test_broken.py").write_text("raise ImportError('the generated module is gone')\n")
    (gap,) = proof.verify_tests([test], []).gaps
    assert gap.loc == "test_broken.py::collecting", gap
    assert gap.reason.endswith("ImportError: the generated module is gone"), gap
    assert proof._read_junit(tmp_path / "test_broken.py") is None  # not XML
    assert proof.plugins_for("tttv1.tt.mlp") == ["tttv1.testing"] and proof.plugins_for("models.tt.mlp") == []


def test_a_conftest_that_raises_is_a_gap_and_a_skipped_case_proves_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conftest.py").write_text("raise RuntimeError('the conftest is broken')\n")
    (test := tmp_path / "test_skip.py").write_text(
        "import pytest\n\n\ndef test_skip_matches_tttv1():\n    pytest.skip('not on this machine')\n"
    )
    (gap,) = proof.verify_tests([test], []).gaps
    assert gap.loc == "test_skip.py" and gap.reason.endswith("RuntimeError: the conftest is broken"), gap
    (tmp_path / "conftest.py").unlink()
    skipped = proof.verify_tests([test], [])
    assert not skipped.gaps and not skipped.passed
    assert skipped.notes() == ["shadow verification: no case ran, so nothing was proven"]


def test_a_report_without_file_attributes_names_the_test_file_from_the_class(tmp_path):
    """A report whose test cases carry no ``file`` attribute (pytest wrote none for some versions and formats)."""
    (report := tmp_path / "r.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.test_mlp_1d" name="test_mlp_1d_matches_tttv1[1x1]">'
        '<failure message="AssertionError: MLP decode: device 0">trace</failure></testcase>'
        '<testcase classname="" name=""/></testsuite></testsuites>'
    )
    cases = proof._read_junit(report)
    assert cases == [
        (
            "test_mlp_1d_matches_tttv1[1x1]",
            "test_mlp_1d.py",
            "failed",
            "AssertionError: MLP decode: device 0",
            "trace",
        ),
        ("", "", "passed", "", ""),
    ]


def test_ctrl_c_during_the_verification_puts_the_files_back(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(proof, "verify_tests", interrupted)
    code, tests = _tmx(tmp_path, "mlp", "--partial")
    assert code == 130 and "interrupted; nothing written" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tests.iterdir()) == ["conftest.py"]


def test_the_recorded_cases_of_a_store_are_the_ones_verified(tmp_path, monkeypatch):
    """With ``--cases STORE`` the verification runs the recorded cases (the catalogue's RMSNorm records)."""
    from tests.tools.refactor.test_refactor_cases import RMSNORM, _expected_from_csv, _store

    monkeypatch.chdir(tmp_path)
    store = _store(tmp_path / "cases.sqlite", RMSNORM)
    report = tmp_path / "r.json"
    argv = [ROOT / "tttv1" / "tt" / "rmsnorm.py", "--out", "o", "--tests-out", "t", "--cases", store]
    assert main([*map(str, argv), f"--json={report}", "--quiet"]) == 0
    (summary,) = [n for n in json.loads(report.read_text())["notes"] if n.startswith("shadow verification:")]
    recorded = len(_expected_from_csv(RMSNORM))
    rejections = sum("rejects_a_" in p.read_text() for p in (tmp_path / "t").glob("test_*.py"))
    every = recorded + rejections
    assert summary.startswith(f"shadow verification: {every} of {every} case"), (summary, recorded)


def test_restoring_removes_only_the_folders_the_run_created_and_left_empty(tmp_path):
    """A folder that existed before stays, even empty; a created one that now holds a user's file stays."""
    from tttv2_tools.refactor.cli import _NEW_FOLDERS, _missing_folders, _restore

    (kept := tmp_path / "kept").mkdir()
    made, shared = tmp_path / "a" / "b" / "m.py", tmp_path / "c" / "t.py"
    previous = {_NEW_FOLDERS: _missing_folders([kept / "x.py", made, shared])}
    assert previous[_NEW_FOLDERS][0] == tmp_path / "a" / "b"  # deepest first
    for path in (kept / "x.py", made, shared):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("generated\n")
    (tmp_path / "c" / "mine.py").write_text("user\n")
    _restore(previous, [kept / "x.py", made, shared])
    assert kept.is_dir() and not (tmp_path / "a").exists()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["mine.py"]


def test_a_test_file_that_cannot_be_imported_is_not_called_a_difference(tmp_path, capsys, monkeypatch):
    """tt-metal's own modules import ``models.…``: with tt-metal off the path the tests cannot be collected, and
    the refusal says nothing was compared (not that the module differs)."""
    broken = proof.Proof(gaps=[proof.Gap("test_mlp_1d.py::collecting", "verify", "case collecting of x: E")])
    monkeypatch.setattr(proof, "verify_tests", lambda *a, **k: broken)
    code, tests = _tmx(tmp_path, "mlp")
    err = capsys.readouterr().err
    assert (
        code == 1 and "nothing written: the generated tests could not run, so nothing was compared" in err
    ), err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tests.iterdir()) == ["conftest.py"]
