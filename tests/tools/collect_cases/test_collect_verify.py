"""``collect-cases verify``: shadow verification of TTTv1 modules by their generated twins, with no test recipe.

The twins are generated once per session (``tttv2-refactor`` on tttv1's eight modules, in one child process);
each test runs a real program under ``verify`` (the tttv1 demo, or a foreign fixture's script) in a child.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tttv2_tools.collect_cases import CaseStore, load_cases
from tttv2_tools.collect_cases.cli import main
from tttv2_tools.collect_cases.store import SCHEMA_VERSION
from tttv2_tools.collect_cases.verify import Shadow, check_generated, describe_exception, parse_layers
from tttv2_tools.refactor.files import parse_header, source_hash, with_header

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "tools" / "fixtures"
MODULES = ("mlp", "mlp_legacy", "rmsnorm", "distributed_norm", "embedding", "lm_head", "attention", "decoder")
PY = sys.executable
DEMO = [PY, "-m", "tttv1.demo.simple_text_demo", "--max-new-tokens", "2", "--prompt", "hi"]


@pytest.fixture(scope="session")
def twins(tmp_path_factory) -> Path:
    """tttv1's eight modules through tttv2-refactor, once (one child process: libcst is loaded once)."""
    out = tmp_path_factory.mktemp("twins")
    code = (
        "import sys\nfrom tttv2_tools.refactor.cli import main\n"
        f"for m in {MODULES!r}:\n"
        f"    assert main([f'tttv1/tt/{{m}}.py', '--out', {str(out)!r}, '--quiet']) == 0, m\n"
    )
    subprocess.run([PY, "-c", code], cwd=ROOT, check=True)
    return out


@pytest.fixture(scope="session")
def acme_twin(tmp_path_factory) -> Path:
    """The twin of the foreign fixture's FeedForward (tests/tools/fixtures/acme), generated once."""
    out = tmp_path_factory.mktemp("acme")
    _refactor(FIXTURES / "acme" / "feed_forward.py", out)
    return out / "feed_forward_1d.py"


def _refactor(module: Path, out: Path) -> None:
    """``tttv2-refactor MODULE --out OUT`` in a child (libcst is loaded once per process)."""
    code = f"from tttv2_tools.refactor.cli import main\nassert main([{str(module)!r}, '--out', {str(out)!r}, '--quiet']) == 0\n"
    subprocess.run([PY, "-c", code], cwd=ROOT, check=True)


def _files(twins: Path, *stems: str) -> list[str]:
    return sorted(str(p) for stem in stems for p in twins.glob(f"{stem}_[12]d.py"))


def _verify(store, generated, command, *options, cwd=None, monkeypatch=None):
    args = ["verify", "--store", str(store)]
    for g in generated:
        args += ["--generated", str(g)]
    if cwd is not None:
        monkeypatch.chdir(cwd)
    return main([*args, *options, "--", *command])


def _variant(original: Path, folder: Path, name: str, extra_code: str) -> Path:
    """A copy of a generated module with ``extra_code`` appended, carrying a valid header (as if tttv2-refactor
    had written it so): a twin that is wrong, not a file that was edited."""
    text = original.read_text()
    header = parse_header(text)
    source = (original.parent / header["source"].rsplit(" (class ", 1)[0]).resolve()
    label = f"{os.path.relpath(source, folder)} (class {header['source'].rsplit(' (class ', 1)[1][:-1]})"
    path = folder / name
    path.write_text(with_header(text.partition("\n")[2] + extra_code, label, header["source_hash"]))
    return path


def _outputs(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[user")]


# --- the tttv1 demo, every module, every mesh -------------------------------------------------------------------
# On the galaxy the decoder norms take the distributed path, which never calls RMSNorm.forward: RMSNorm's twin
# is left out there (nothing to check would exit 1). The legacy MLP is built only with TTTV1_MLP_GENERATION=G1.
@pytest.mark.parametrize("mesh", ["1x1", "1x2", "1x8", "8x4"])
@pytest.mark.parametrize("generation", ["G3", "G1"])
def test_the_demo_is_proven_on_every_mesh(twins, tmp_path, mesh, generation, monkeypatch, capsys):
    stems = [m for m in MODULES if m != "mlp_legacy"] if generation == "G3" else ["mlp_legacy"]
    if mesh == "8x4":
        stems = [m for m in stems if m != "rmsnorm"]
    monkeypatch.setenv("TTTV1_MLP_GENERATION", generation)
    store = tmp_path / "v.sqlite"
    code = _verify(store, _files(twins, *stems), [*DEMO, "--mesh", mesh], cwd=ROOT, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 0, err
    with CaseStore(store) as s:
        results = s.verifications()
        recorded = {
            (c.target, json.dumps(c.fields, sort_keys=True, separators=(",", ":"))) for c in s.cases()
        }
    verified = {(r.target, r.fields_json) for r in results}
    assert verified == recorded and recorded  # every recorded case was checked
    assert all(r.checked >= 1 and r.passed == r.checked and r.first_failure is None for r in results)
    targets = {r.target for r in results}
    assert len(targets) == len(stems)
    topology = "2D" if mesh == "8x4" else "1D"
    assert {r.twin_class[-2:] for r in results if "embedding" not in r.target} == {topology}
    assert "every checked call was equal" in err


# --- failures are caught and named ------------------------------------------------------------------------------
ONE_ULP = """

def _one_ulp_on_device_1(out):
    import torch

    parts = ttnn.get_device_tensors(out)
    part = parts[1]
    values = ttnn.to_torch(part).reshape(-1).clone()
    values.view(torch.int16)[5] += 1  # the next bfloat16 after the 6th value
    parts[1] = ttnn.from_torch(
        values.reshape(list(part.shape)), dtype=part.dtype, layout=part.layout, device=part.device(),
        memory_config=part.memory_config(),
    )
    return ttnn.combine_device_tensors(parts)


_exact_decode = MLP1D.decode_forward


def _decode_forward(self, x):
    return _one_ulp_on_device_1(_exact_decode(self, x))


MLP1D.decode_forward = _decode_forward
"""

BROKEN = """

def _broken(cls, *args, **kwargs):
    raise RuntimeError("broken on purpose")


MLP1D.from_model_args = classmethod(_broken)
"""


def test_a_twin_one_ulp_off_on_one_device_is_caught_with_device_and_index(
    twins, tmp_path, monkeypatch, capsys
):
    wrong = _variant(twins / "mlp_1d.py", tmp_path, "mlp_1d_ulp.py", ONE_ULP)
    store = tmp_path / "v.sqlite"
    code = _verify(store, [wrong], [*DEMO, "--mesh", "1x2"], cwd=ROOT, monkeypatch=monkeypatch)
    captured = capsys.readouterr()
    assert code == 1
    failed = [line for line in captured.err.splitlines() if line.startswith("  FAILED")]
    assert len(failed) == 1  # decode fails, prefill passes
    assert "mlp_1d_ulp.py (MLP1D), case 1x2 decode Llama-3.2-1B-tiny, x 1x1x32x512 bfloat16" in failed[0]
    assert re.search(r"output: device 1, index \[0, 0, 0, 5\]: \S+ != \S+ \(expected\)$", failed[0]), failed[
        0
    ]
    assert "FAILED: 1 of 2 cases and 2 of 4 calls equal" in captured.err and "a case failed" in captured.err
    with CaseStore(store) as s:
        (decode,) = [r for r in s.verifications() if r.first_failure]
    assert decode.checked == 2 and decode.passed == 0  # both layers' decode calls differ
    assert json.loads(decode.fields_json)["mode"] == "decode"


def test_a_twin_whose_construction_raises_is_a_failed_case_and_the_program_is_unchanged(
    twins, tmp_path, monkeypatch, capfd
):
    plain = subprocess.run([*DEMO, "--mesh", "1x2"], cwd=ROOT, capture_output=True, text=True, check=True)
    broken = _variant(twins / "mlp_1d.py", tmp_path, "mlp_1d_broken.py", BROKEN)
    store = tmp_path / "v.sqlite"
    code = _verify(store, [broken], [*DEMO, "--mesh", "1x2"], cwd=ROOT, monkeypatch=monkeypatch)
    captured = capfd.readouterr()
    assert code == 1
    assert _outputs(captured.out) == _outputs(plain.stdout) and _outputs(plain.stdout)
    assert "the command exited with" not in captured.err  # the program exited 0; the verdict is the twin's
    assert (
        "building the twin raised RuntimeError: broken on purpose (at mlp_1d_broken.py:" in captured.err
        and "in _broken)" in captured.err
    )
    assert "2 twins failed to build" in captured.err
    with CaseStore(store) as s:
        results = s.verifications()
    assert len(results) == 2 and all(r.passed == 0 and r.twin_class == "" for r in results)


def test_a_failing_program_keeps_its_exit_code_and_its_cases(acme_twin, tmp_path, monkeypatch, capsys):
    store = tmp_path / "v.sqlite"
    twin = acme_twin
    code = _verify(store, [twin], [PY, "run_acme.py", "1x1", "7"], cwd=FIXTURES, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 7 and "the command exited with 7" in err
    with CaseStore(store) as s:
        assert {r.checked for r in s.verifications()} == {2}  # prefill and decode, two layers each
        assert len(s.cases("acme.feed_forward:FeedForward")) == 2


# --- a foreign model (not tttv1): its own hyper-parameters, constructor and script ------------------------------
@pytest.mark.parametrize("mesh", ["1x1", "1x2"])
def test_a_foreign_model_is_verified_with_no_recipe(acme_twin, tmp_path, mesh, monkeypatch, capsys):
    store = tmp_path / "v.sqlite"
    twin = acme_twin
    code = _verify(store, [twin], [PY, "run_acme.py", mesh], cwd=FIXTURES, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "acme.feed_forward:FeedForward: passed: 2 of 2 cases and 4 of 4 calls equal (bit for bit)" in err
    (case,) = [c for c in load_cases(store, "acme.feed_forward:FeedForward") if c.mode == "decode"]
    assert case.mesh_shape == tuple(int(n) for n in mesh.split("x"))
    assert main(["list", "--store", str(store)]) == 0
    assert capsys.readouterr().out.count("2/2 equal") == 2  # the list shows each case's result


@pytest.mark.parametrize("locked", [False, True])
def test_a_stateful_constructor_argument_is_the_twins_own_copy(
    acme_twin, tmp_path, locked, monkeypatch, capfd
):
    """The Galaxy demo's pattern: each block registers its weights in a prefetcher setup object as it is built, and
    the program checks the count before running. The twin is built from its own copy of that object (taken before
    TTTv1's ``__init__``), so TTTv1's prefetcher holds exactly TTTv1's 4 weights, and the twin's copy its 2 per
    block: the program's count check passes under verify, and every call is still checked. A lock in it cannot
    be copied: the lock is shared (and named in the summary), the prefetcher is still copied."""
    store = tmp_path / "v.sqlite"
    command = [PY, "run_acme.py", "1x2", "0", "prefetch", *(["locked"] if locked else [])]
    code = _verify(store, [acme_twin], command, cwd=FIXTURES, monkeypatch=monkeypatch)
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "prefetcher: 4 weights" in out
    assert "FeedForward: passed: 2 of 2 cases and 4 of 4 calls equal (bit for bit)" in err
    shared = (
        "2 constructor argument objects shared with the twin, not copyable (first: lock (TypeError: cannot "
    )
    assert (shared in err) is locked


@pytest.fixture(scope="session")
def acme_head_twin(tmp_path_factory) -> Path:
    """The twin of the foreign fixture's OutputHead (tests/tools/fixtures/acme/output_head.py), generated once."""
    out = tmp_path_factory.mktemp("acme_head")
    _refactor(FIXTURES / "acme" / "output_head.py", out)
    return out / "output_head_1d.py"


def test_what_the_program_stages_on_a_copied_argument_between_calls_reaches_the_twin(
    acme_head_twin, tmp_path, monkeypatch, capfd
):
    """The Galaxy demo's LM head: before each decode call the model stages a buffer on the CCL helper the head was
    built with (``tt_ccl.tt_lm_head_buffer_l1``), which the call's reduction reads and frees. The twin holds its own
    copy of the helper, taken at construction, so it never saw the buffer (``AttributeError``, 0 of 1 cases before).
    Now an attribute the program binds on such an argument between calls is handed to the twin's copy, cloned (TTTv1
    frees its own), before TTTv1 runs; a different value each step, so the twin's output shows it got each one."""
    store = tmp_path / "v.sqlite"
    code = _verify(
        store, [acme_head_twin], [PY, "run_acme_head.py", "1x2"], cwd=FIXTURES, monkeypatch=monkeypatch
    )
    out, err = capfd.readouterr()
    assert code == 0, err
    assert out.count("step ") == 3
    assert "acme.output_head:OutputHead: passed: 1 of 1 cases and 3 of 3 calls equal (bit for bit)" in err


def test_hand_over_binds_removes_and_reports():
    """``_hand_over``: bound or rebound attributes are set on the copy (a tensor cloned), removed ones removed,
    attributes the last call bound are not touched, and a copy that refuses an attribute is a failure, not a crash."""
    import types

    from tttv2_tools.collect_cases.verify import _hand_over, _Handover, _held

    original = types.SimpleNamespace(kept=1, staged=None, dropped="x", own=0)
    twin_copy = types.SimpleNamespace(kept=1, staged=None, dropped="x", own=5)
    handover = _Handover(original, twin_copy, {**vars(original), "never_copied": 0})
    original.staged = [1, 2]  # the program stages a value
    del original.dropped
    assert _hand_over([handover]) is None
    assert twin_copy.staged == [1, 2] and twin_copy.staged is not original.staged  # a copy of the list
    assert not hasattr(twin_copy, "dropped") and twin_copy.own == 5 and twin_copy.kept == 1

    class Frozen:
        def __setattr__(self, name, value):
            raise AttributeError(f"{name} is read-only")

    original.other = 3
    failure = _hand_over([_Handover(original, Frozen(), {})])
    assert failure.startswith(
        "handing the twin what the program set on its SimpleNamespace raised AttributeError"
    )
    # an object that takes a weak reference is held weakly; once the program drops it, nothing is handed over

    class Helper:
        pass

    helper, helper_copy = Helper(), Helper()
    weak = _Handover(_held(helper), helper_copy, {})
    helper.staged = 1
    assert weak.original is helper and _hand_over([weak]) is None and helper_copy.staged == 1
    del helper
    assert weak.original is None and _hand_over([weak]) is None


def test_the_twins_arguments_are_copies_with_devices_tensors_and_configs_shared():
    """``own_arguments``: containers and the user's objects are copied (aliasing kept), ttnn / torch objects and
    devices are handed over as is, and an object that cannot be copied is shared and named."""
    import threading

    import torch

    from tttv2 import ttnn
    from tttv2_tools.collect_cases.verify import own_arguments

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))

    class Registry:
        def __init__(self, device):
            self.device, self.items, self.mode = device, [], Mode.A

    class Guarded:
        def __init__(self):
            self.lock = threading.Lock()

    class Slotted:
        __slots__ = ("values",)

        def __init__(self):
            self.values = [1]

    import enum

    class Mode(enum.Enum):
        A = 1

    registry, weights, guarded, slotted = Registry(mesh), {"w": torch.zeros(3)}, Guarded(), Slotted()
    config = {"OUT": ttnn.L1_MEMORY_CONFIG, "fn": len, "pair": (registry, [1])}
    args, kwargs, uncopied = own_arguments(
        (mesh, registry, weights),
        {"config": config, "again": registry, "guarded": guarded, "slotted": slotted},
    )
    device, copied, state = args
    assert device is mesh and copied is not registry and copied.device is mesh and copied.mode is Mode.A
    assert copied.items == [] and copied.items is not registry.items
    assert state is not weights and state["w"] is weights["w"]
    assert kwargs["again"] is copied and kwargs["config"]["pair"][0] is copied  # one object stays one object
    assert kwargs["config"]["OUT"] is ttnn.L1_MEMORY_CONFIG and kwargs["config"]["fn"] is len
    assert kwargs["slotted"] is not slotted and kwargs["slotted"].values == [1]
    assert kwargs["slotted"].values is not slotted.values
    assert kwargs["guarded"] is not guarded and kwargs["guarded"].lock is guarded.lock
    assert uncopied == ["lock (TypeError: cannot pickle '_thread.lock' object)"]
    copied.items.append(1)
    assert registry.items == []


class _OwnCopy:
    def __init__(self):
        self.copies = 0

    def __deepcopy__(self, memo):
        made = _OwnCopy()
        made.copies = self.copies + 1
        return made


class _ByName:
    def __reduce__(self):
        return "BY_NAME"


BY_NAME = _ByName()


def test_the_twins_arguments_follow_each_objects_own_copy_rules():
    """An object's ``__deepcopy__`` is used; one pickled by name (``__reduce__`` returning a string) is itself; a
    copyreg-registered type (a compiled pattern) goes through its reductor; sets and tuples are copied, a module
    and a function are shared."""
    import re

    from tttv2_tools.collect_cases.verify import own_arguments

    own, pattern, tags = _OwnCopy(), re.compile("w[0-9]"), {"a", "b"}
    (copied, named, pat, got_tags, pair, module, fn), _, uncopied = own_arguments(
        (own, BY_NAME, pattern, tags, (tags, [1]), re, re.compile), {}
    )
    assert copied.copies == 1 and named is BY_NAME and pat.pattern == "w[0-9]"
    assert got_tags == tags and got_tags is not tags and pair[0] is got_tags and pair[1] == [1]
    assert module is re and fn is re.compile and uncopied == []


# --- options: --sample, --layers, tolerances -------------------------------------------------------------------
def test_sample_and_layers_limit_what_is_checked(twins, tmp_path, monkeypatch, capsys):
    store = tmp_path / "v.sqlite"
    files = _files(twins, "mlp")
    command = [*DEMO, "--mesh", "1x2", "--max-new-tokens", "3"]
    assert _verify(store, files, command, "--sample", "1", cwd=ROOT, monkeypatch=monkeypatch) == 0
    err = capsys.readouterr().err
    with CaseStore(store) as s:
        assert sorted(r.checked for r in s.verifications()) == [1, 1]  # one call per case
    assert re.search(r"\d+ calls? ran TTTv1 only", err)
    store2 = tmp_path / "v2.sqlite"
    assert (
        _verify(store2, files, command, "--layers", "1", "--atol", "0.01", cwd=ROOT, monkeypatch=monkeypatch)
        == 0
    )
    err = capsys.readouterr().err
    assert "1 instance not shadowed" in err and "atol=0.01" in err
    with CaseStore(store2) as s:
        assert sorted(r.checked for r in s.verifications()) == [
            1,
            2,
        ]  # layer 1 only: prefill once, decode twice
    store3 = tmp_path / "v3.sqlite"
    assert _verify(store3, files, command, "--layers", "7", cwd=ROOT, monkeypatch=monkeypatch) == 1
    assert "nothing was checked for tttv1.tt.mlp:MLP" in capsys.readouterr().err


# --- bad input: exit 2, one line naming the file ----------------------------------------------------------------
def _fake_generated(tmp_path: Path, source_text="class Mod:\n    def forward(self, x):\n        return x\n"):
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    source = pkg / "mod.py"
    source.write_text(source_text)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    body = "class Mod1D:\n    @classmethod\n    def from_model_args(cls):\n        return cls()\n"
    path = out / "mod_1d.py"
    path.write_text(with_header(body, "../pkg/mod.py (class Mod)", source_hash(source.read_bytes())))
    return source, path


def test_the_target_is_derived_from_the_header(tmp_path):
    _, path = _fake_generated(tmp_path)
    (found,) = check_generated([str(path)])
    assert found.target == "pkg.mod:Mod" and found.source == (tmp_path / "pkg" / "mod.py").resolve()
    (forced,) = check_generated([str(path)], "other.place:Mod")
    assert forced.target == "other.place:Mod"


def test_the_target_of_a_namespace_package_file_is_named_from_sys_path(tmp_path, monkeypatch):
    """tt-metal's ``models/…`` folders have no ``__init__.py`` (PEP 420 namespace packages): the target is the name
    Python gives the file from the deepest folder of ``sys.path`` above it, not the bare file name."""
    folder = tmp_path / "repo" / "models" / "demos" / "x" / "tt"
    folder.mkdir(parents=True)
    source = folder / "mod.py"
    source.write_text("class Mod:\n    def forward(self, x):\n        return x\n")
    path = tmp_path / "mod_1d.py"
    body = "class Mod1D:\n    @classmethod\n    def from_model_args(cls):\n        return cls()\n"
    path.write_text(
        with_header(body, "repo/models/demos/x/tt/mod.py (class Mod)", source_hash(source.read_bytes()))
    )
    monkeypatch.chdir(folder)  # the current folder is the file's own: no package path from it
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), str(tmp_path / "my-root")])
    assert check_generated([str(path)])[0].target == "mod:Mod"  # nothing above it on sys.path
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "repo"), str(folder.parent)])
    # tmp_path gives repo.models.…, repo gives models.demos.x.tt.mod (deepest), tt's parent gives tt.mod; the
    # deepest entry wins unless it is the file's own folder
    assert check_generated([str(path)])[0].target == "tt.mod:Mod"
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "repo")])
    assert check_generated([str(path)])[0].target == "models.demos.x.tt.mod:Mod"
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    (tmp_path / "repo").rename(tmp_path / "my-repo")  # a folder that is no identifier names no module
    source = tmp_path / "my-repo" / "models" / "demos" / "x" / "tt" / "mod.py"
    path.write_text(
        with_header(body, "my-repo/models/demos/x/tt/mod.py (class Mod)", source_hash(source.read_bytes()))
    )
    monkeypatch.chdir(source.parent)
    assert check_generated([str(path)])[0].target == "mod:Mod"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "no such file"),
        ("edited", "edited since tttv2-refactor wrote it"),
        ("stale", "stale: its source"),
        ("source gone", "does not exist"),
        ("no header", "not written by tttv2-refactor"),
        ("old header", "has no source hash"),
        ("no class", "names no source class"),
        ("folder", "cannot read it"),
    ],
)
def test_a_missing_edited_or_stale_generated_file_is_refused(tmp_path, damage, message, capsys):
    source, path = _fake_generated(tmp_path)
    text = path.read_text()
    if damage == "missing":
        path.unlink()
    elif damage == "edited":
        path.write_text(text + "x = 1\n")
    elif damage == "stale":
        source.write_text(source.read_text() + "# changed\n")
    elif damage == "source gone":
        source.unlink()
    elif damage == "no header":
        path.write_text(text.partition("\n")[2])
    elif damage == "old header":
        path.write_text(with_header(text.partition("\n")[2], "../pkg/mod.py (class Mod)"))
    elif damage == "folder":
        path.unlink()
        path.mkdir()
    else:
        path.write_text(
            with_header(text.partition("\n")[2], "../pkg/mod.py", source_hash(source.read_bytes()))
        )
    marker = tmp_path / "ran"
    store = tmp_path / "v.sqlite"
    code = main(
        [
            "verify",
            "--store",
            str(store),
            "--generated",
            str(path),
            "--",
            PY,
            "-c",
            f"open({str(marker)!r}, 'w')",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and not marker.exists() and not store.exists()
    (line,) = err.strip().splitlines()
    assert f"--generated {path}:" in line and message in line


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--layers", "a,b"], "--layers: expected"),
        (["--sample", "0"], "--sample"),
        (["--atol", "-1"], "--atol"),
        (["--sample", "x"], "--sample"),
        (["--rtol", "nan"], "--rtol"),
    ],
)
def test_bad_options_are_refused(tmp_path, option, message, capsys):
    _, path = _fake_generated(tmp_path)
    argv = ["verify", "--store", str(tmp_path / "v"), "--generated", str(path), *option, "--", PY, "-c", "1"]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "v").exists()


def test_twins_of_one_target_from_two_sources_are_refused(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, first = _fake_generated(tmp_path / "a")
    _, second = _fake_generated(tmp_path / "b")
    argv = ["verify", "--store", str(tmp_path / "v"), "--target", "pkg.mod:Mod", "--generated", str(first)]
    assert main([*argv, "--generated", str(second), "--", PY, "-c", "1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"--generated {second}: generated from" in line and "but another file for pkg.mod:Mod from" in line


def test_a_target_imported_from_another_file_than_the_source_is_refused(tmp_path, capsys, monkeypatch):
    source, path = _fake_generated(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "pkg"
    elsewhere.mkdir(parents=True)
    shutil.copy(source, elsewhere / "mod.py")
    (elsewhere / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", f"{elsewhere.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    code = main(
        ["verify", "--store", str(tmp_path / "v.sqlite"), "--generated", str(path), "--", PY, "-c", "1"]
    )
    assert code == 2
    assert "pkg.mod:Mod is imported from" in capsys.readouterr().err


def test_a_generated_module_that_does_not_load_fails_each_instance(tmp_path, monkeypatch, capsys):
    source_text = "class Mod:\n    def __init__(self, n):\n        self.n = n\n\n    def forward(self, x):\n        return x\n"
    source, path = _fake_generated(tmp_path, source_text)
    path.write_text(
        with_header(
            "import no_such_module_here\n", "../pkg/mod.py (class Mod)", source_hash(source.read_bytes())
        )
    )
    script = "from pkg.mod import Mod\nm = Mod(1)\nprint(m.forward(3))\n"
    code = _verify(tmp_path / "v.sqlite", [path], [PY, "-c", script], cwd=tmp_path, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 1
    assert f"loading {path} raised ModuleNotFoundError" in err


# --- the store: schema 2 and the list ---------------------------------------------------------------------------
def test_a_version_1_store_is_read_as_is_and_migrated_by_a_writer(tmp_path):
    path = tmp_path / "s.sqlite"
    CaseStore(path, create=True).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE verifications")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with CaseStore(path) as store:
        assert store.verifications() == []
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    CaseStore(path, create=True).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert db.execute("SELECT COUNT(*) FROM verifications").fetchone()[0] == 0


def test_list_shows_the_latest_verification(twins, tmp_path, monkeypatch, capsys):
    store = tmp_path / "v.sqlite"
    assert (
        _verify(
            store, _files(twins, "embedding"), [*DEMO, "--mesh", "1x1"], cwd=ROOT, monkeypatch=monkeypatch
        )
        == 0
    )
    capsys.readouterr()
    assert main(["list", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "verified" in out and "1/1 equal" in out
    assert main(["list", "--store", str(store), "--json"]) == 0
    cases = json.loads(capsys.readouterr().out)
    assert len(cases) == 2  # the embedding has no mode: the two cases are its two input shapes
    assert all(
        c["verification"]["checked"] == 1 and c["verification"]["first_failure"] is None for c in cases
    )


# --- pieces -----------------------------------------------------------------------------------------------------
def test_parse_layers():
    assert parse_layers(None) is None
    assert parse_layers("3,0,3") == [0, 3]


def test_describe_exception_names_the_frame_in_a_generated_file(tmp_path):
    def inner():
        raise ValueError("x" * 500 + "\nmore")

    try:
        inner()
    except ValueError as exc:
        text = describe_exception(exc, "doing it")
    assert text.startswith("doing it raised ValueError: " + "x" * 400 + "...")
    assert "in inner)" in text


def test_a_shadow_without_twins_passes_calls_through():
    shadow = Shadow({"run": "r", "generated": []})
    assert shadow.call("a:B", object(), None, lambda self, x: x + 1, (1,), {}) == 2
    shadow.constructed("a:B", object, object(), (), {}, None)  # not a target of this shadow: nothing happens
    assert shadow.status() == {}


# --- the shadow in-process (what the child does), on a toy module and a hand-written twin -----------------------
TOY_SOURCE = '''
from tttv2 import ttnn


class Scale:
    def __init__(self, mesh, factor, layer_num=0):
        self.mesh = mesh
        self.factor = factor
        self.layer_num = layer_num

    def forward(self, x, mode="decode"):
        if mode == "tttv1-raises":
            raise ValueError("TTTv1 raised")
        return ttnn.multiply(x, self.factor)


class SubScale(Scale):
    pass


class Slotted:
    """Takes no weak reference (``__slots__``), called through ``__call__``."""

    __slots__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return ttnn.multiply(x, self.factor)
'''

TOY_TWIN = """from tttv2 import ttnn


class Scale1D:
    @classmethod
    def from_model_args(cls, mesh, factor, layer_num=0):
        if factor < 0:
            raise RuntimeError("no negative factors")
        twin = cls()
        twin.factor = factor
        return twin

    def forward(self, x, mode="decode"):
        if mode == "twin-raises":
            raise KeyError("twin")
        out = ttnn.multiply(x, self.factor)
        return ttnn.add(out, 1.0) if mode == "differ" else out
"""

SLOTTED_TWIN = """from tttv2 import ttnn


class Slotted1D:
    @classmethod
    def from_model_args(cls, factor):
        twin = cls()
        twin.factor = factor
        return twin

    def forward(self, x):
        return ttnn.multiply(x, self.factor)
"""


def _toy(tmp_path, monkeypatch):
    pkg = tmp_path / "toyverify"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(TOY_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    digest = source_hash((pkg / "layers.py").read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    (out / "scale_1d.py").write_text(with_header(TOY_TWIN, "../toyverify/layers.py (class Scale)", digest))
    (out / "slotted_1d.py").write_text(
        with_header(SLOTTED_TWIN, "../toyverify/layers.py (class Slotted)", digest)
    )
    return [g for g in check_generated([str(out / "scale_1d.py"), str(out / "slotted_1d.py")])]


def _shadowed(tmp_path, generated, **options):
    from tttv2_tools.collect_cases.recorder import Recorder
    from tttv2_tools.collect_cases.targets import parse_target

    config = {
        "run": options.pop("run", "r1"),
        "command": "in-process",
        "generated": [[str(Path(g.path).resolve()), g.target] for g in generated],
        "sources": {g.target: str(g.source) for g in generated},
        **options,
    }
    shadow = Shadow(config)
    targets = [parse_target(t) for t in dict.fromkeys(g.target for g in generated)]
    recorder = Recorder(tmp_path / "s.sqlite", targets, command="in-process", shadow=shadow)
    recorder.install()
    recorder.import_targets()
    shadow.prepare()
    return recorder, shadow


def test_the_shadow_checks_calls_and_turns_every_twin_failure_into_a_failed_case(tmp_path, monkeypatch, mesh):
    import torch

    from tttv2 import ttnn

    generated = _toy(tmp_path, monkeypatch)
    recorder, shadow = _shadowed(tmp_path, generated, sample=3, layers=[0, 1])
    try:
        layers = importlib.import_module("toyverify.layers")  # written by _toy into tmp_path
        Scale, Slotted, SubScale = layers.Scale, layers.Slotted, layers.SubScale

        x = ttnn.from_torch(
            torch.ones(1, 1, 32, 32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
        )
        good, bad, far, sub = (
            Scale(mesh, 2.0),
            Scale(mesh, -1.0),
            Scale(mesh, 2.0, layer_num=5),
            SubScale(mesh, 2),
        )
        for _ in range(4):  # the 4th call is past --sample 3: TTTv1 only, and the twin is retired
            assert ttnn.to_torch(good.forward(x, "decode")).float().max() == 2.0
        assert good.forward(x, "decode") is not None  # retired: TTTv1 only
        bad.forward(x, "decode")  # the twin did not build
        far.forward(x, "decode")  # layer 5: not shadowed
        sub.forward(x, "decode")  # a subclass: not shadowed
        other = Scale(mesh, 3.0)
        other.forward(x, "differ")
        raising = Scale(mesh, 3.0)
        raising.forward(x, "twin-raises")
        raising.forward(x, "twin-raises")  # retired after its exception
        tttv1_raises = Scale(mesh, 3.0)
        with pytest.raises(ValueError, match="TTTv1 raised"):
            tttv1_raises.forward(x, "tttv1-raises")  # the program sees TTTv1's exception, as without verify
        Slotted(4.0)(x)  # no layer number: outside --layers
        status = shadow.status()
    finally:
        recorder.close()
    scale = status["toyverify.layers:Scale"]
    assert scale["not_shadowed"] == 2 and scale["build_failed"] == 1 and scale["unchecked_calls"] == 3
    assert status["toyverify.layers:Slotted"] == {**status["toyverify.layers:Slotted"], "not_shadowed": 1}
    recorder, shadow = _shadowed(tmp_path, generated, run="r2")  # every layer
    try:
        assert ttnn.to_torch(Slotted(4.0)(x)).float().max() == 4.0
    finally:
        recorder.close()
    assert shadow.status()["toyverify.layers:Slotted"]["twins"] == 1
    with CaseStore(tmp_path / "s.sqlite") as store:
        results = store.verifications(run="r1")
    by_mode = {}
    for r in results:
        by_mode.setdefault(json.loads(r.fields_json).get("mode"), []).append(r)
    # good's three checked calls and bad's failure: one case, one generated file
    (decode,) = by_mode["decode"]
    assert decode.twin_class == "Scale1D" and decode.checked == 4 and decode.passed == 3
    assert decode.first_failure.startswith("building the twin raised RuntimeError: no negative factors")
    (differ,) = by_mode["differ"]
    assert differ.first_failure.startswith("output: device 0, index [0, 0, 0, 0]: 4.0 != 3.0 (expected)")
    (twin_raises,) = by_mode["twin-raises"]
    assert twin_raises.checked == 1 and "the twin's forward raised KeyError: 'twin' (at scale_1d.py:" in (
        twin_raises.first_failure
    )
    assert "tttv1-raises" not in by_mode  # a call TTTv1 itself failed checks nothing
    assert not [r for r in results if r.target == "toyverify.layers:Slotted"]
    with CaseStore(tmp_path / "s.sqlite") as store:
        (slotted_row,) = store.verifications("toyverify.layers:Slotted", run="r2")
    assert slotted_row.twin_class == "Slotted1D" and slotted_row.checked == slotted_row.passed == 1
