"""``collect-cases verify`` of a module read per mode (issue 21): TTTv1 is built with one mode's config dict and
switched to the other's by its setter (``set_model_config``), so its twin needs both dicts (``from_model_args``'
``decode_model_config`` / ``prefill_model_config``). The shadow builds the twin once the program has run TTTv1
with each mode's dict, and replays the calls made before on it. The program: ``rcon/dict_mode_block.py`` (a
Llama-2-70B T3000 style block whose setter also switches its children), built with the prefill dict, run as a
demo would (prefill, then ``set_model_config(decode)`` and decode steps)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tttv2_tools.collect_cases import CaseStore
from tttv2_tools.collect_cases.cli import main

ROOT = Path(__file__).resolve().parents[3]
RCON = ROOT / "tests" / "tools" / "refactor" / "inputs" / "rcon"
PY = sys.executable

PROGRAM = """
import sys

import numpy as np
import torch

from tttv2 import ttnn
from rcon.dict_mode_block import TtDictModeBlock


def mode_dict(mode, rows=128):
    # as Falcon-40B's get_model_config: the prefill dict depends on the sequence length
    memcfg = ttnn.L1_MEMORY_CONFIG if mode == "decode" or rows <= 64 else ttnn.DRAM_MEMORY_CONFIG
    return {"LLM_MODE": mode, "OUT_MEMCFG": memcfg}


def rows(n):
    values = np.random.default_rng(n).standard_normal((1, 1, n, 64)).astype(np.float32)
    return ttnn.from_numpy(values, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh,
                           mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))


mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
state_dict = {"layers.0.w": torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) / 8}
block = TtDictModeBlock(mesh, state_dict, mode_dict("prefill"))
print("prefill", list(block(rows(128)).shape))
if sys.argv[1:] != ["prefill-only"]:
    block.set_model_config(mode_dict("decode"))
    for _ in range(2):
        print("decode", list(block(rows(32)).shape))
    block.set_model_config(mode_dict("prefill"))  # an equal dict again: the twin still checks it
    print("prefill", list(block(rows(128)).shape))
if sys.argv[1:] == ["two-lengths"]:  # a second prefill length, with its own dict
    block.set_model_config(mode_dict("prefill", rows=64))
    print("prefill", list(block(rows(64)).shape))
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """The rcon package, the program and the block's twin in one folder (the target is ``rcon.dict_mode_block``)."""
    folder = tmp_path_factory.mktemp("permode")
    shutil.copytree(RCON, folder / "rcon", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (folder / "run_block.py").write_text(PROGRAM)
    code = (
        "from tttv2_tools.refactor.cli import main\n"
        "assert main(['rcon/dict_mode_block.py', '--out', 'twins', '--quiet']) == 0\n"
    )
    subprocess.run([PY, "-c", code], cwd=folder, check=True)
    return folder


def _verify(folder: Path, *program: str, monkeypatch) -> int:
    monkeypatch.chdir(folder)
    generated = str(folder / "twins" / "dict_mode_block_1d.py")
    return main(
        ["verify", "--store", "v.sqlite", "--generated", generated, "--", PY, "run_block.py", *program]
    )


def test_a_module_switched_between_dicts_is_verified_after_both_modes_ran(package, monkeypatch, capsys):
    code = _verify(package, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "rcon.dict_mode_block:TtDictModeBlock: passed: 2 of 2 cases and 4 of 4 calls equal" in err, err
    with CaseStore(package / "v.sqlite") as store:
        assert sorted((r.checked, r.passed) for r in store.verifications()) == [(2, 2), (2, 2)]


def test_the_twin_follows_the_setter_to_a_second_prefill_length(package, monkeypatch, capsys):
    """Falcon-40B's prefill dict is one per sequence length: TTTv1 switched by ``set_model_config`` to the 64-row
    prefill dict (an L1 output) runs on, and the twin is rebuilt with that dict, so that call is checked too (a
    twin kept on the 128-row dict would return a DRAM output: a memory-config difference)."""
    code = _verify(package, "two-lengths", monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "passed: 3 of 3 cases and 5 of 5 calls equal (bit for bit)" in err, err
    assert "1 twin rebuild: the setter switched TTTv1 to another dict of one mode" in err, err


def test_a_twin_whose_decode_differs_fails_the_decode_case_only(package, monkeypatch, capsys):
    """A twin that doubles its decode output (carrying a valid header: a wrong twin, not an edited file): the
    replayed prefill call is equal, the first decode call differs, and the twin is then out of step."""
    from tttv2_tools.refactor.files import parse_header, with_header

    original = package / "twins" / "dict_mode_block_1d.py"
    text = original.read_text()
    header = parse_header(text)
    wrong = package / "twins_wrong" / "dict_mode_block_1d.py"
    wrong.parent.mkdir(exist_ok=True)
    extra = (
        "\n_decode = TtDictModeBlock1D.decode_forward\n"
        "TtDictModeBlock1D.decode_forward = lambda self, x: ttnn.multiply(_decode(self, x), 2.0)\n"
    )
    wrong.write_text(with_header(text.partition("\n")[2] + extra, header["source"], header["source_hash"]))
    monkeypatch.chdir(package)
    argv = ["verify", "--store", "w.sqlite", "--generated", str(wrong), "--", PY, "run_block.py"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "FAILED: 1 of 2 cases and 1 of 2 calls equal" in err and "2 calls ran TTTv1 only" in err, err
    assert "case 1x2 forward, x 1x1x32x64 bfloat16: output: device 0" in err, err


# --- the shadow in-process, on a toy per-mode module and hand-written twins: the paths a real program rarely takes
TOY_SOURCE = """
from tttv2 import ttnn


class Gain:
    def __init__(self, mesh, model_config):
        self.model_config = model_config

    def set_model_config(self, model_config):
        self.model_config = model_config

    def forward(self, x):
        return ttnn.multiply(x, self.model_config.get("GAIN", 1.0))
"""

TOY_TWIN = """from tttv2 import ttnn


class Gain1D:
    @classmethod
    def from_model_args(cls, mesh, model_config, *, decode_model_config=None, prefill_model_config=None):
        if prefill_model_config.get("GAIN") == 0.0:
            raise ValueError("no zero gain")
        twin = cls()
        twin.gains = {"decode": decode_model_config["GAIN"], "prefill": prefill_model_config["GAIN"]}
        return twin

    def forward(self, x, *, mode):
        gain = self.gains[mode] + (1.0 if self.gains[mode] == 3.0 else 0.0)  # wrong for a gain of 3
        return ttnn.multiply(x, gain)
"""


def _toy(tmp_path, monkeypatch):
    from tttv2_tools.collect_cases.verify import check_generated
    from tttv2_tools.refactor.files import source_hash, with_header

    pkg = tmp_path / "toypermode"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "gain.py").write_text(TOY_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    digest = source_hash((pkg / "gain.py").read_bytes())
    (out / "gain_1d.py").write_text(with_header(TOY_TWIN, "../toypermode/gain.py (class Gain)", digest))
    return check_generated([str(out / "gain_1d.py")])


def test_the_per_mode_shadow_fails_what_it_cannot_check_and_stops_at_a_difference(tmp_path, monkeypatch):
    import importlib

    import torch

    from tests.tools.collect_cases.test_collect_verify import _shadowed
    from tttv2 import ttnn

    generated = _toy(tmp_path, monkeypatch)
    recorder, shadow = _shadowed(tmp_path, generated)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        Gain = importlib.import_module("toypermode.gain").Gain

        def run(decode, prefill, rows, calls=("prefill", "decode", "decode")):
            # one case per instance: its own rows
            ones = torch.ones(1, 1, rows, 32)
            x = ttnn.from_torch(ones, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
            module = Gain(mesh, prefill)
            for mode in calls:
                module.set_model_config(prefill if mode == "prefill" else decode)
                module.forward(x)

        decode, prefill = {"LLM_MODE": "decode", "GAIN": 2.0}, {"LLM_MODE": "prefill", "GAIN": 0.5}
        run(decode, prefill, 32)  # equal: 3 calls
        run({"GAIN": 2.0}, {"GAIN": 0.5}, 64, calls=("prefill",))  # no LLM_MODE: a failed case
        run(decode, {**prefill, "GAIN": 0.0}, 96)  # the twin does not build
        run(
            {**decode, "GAIN": 3.0}, prefill, 128, ("decode", "decode", "prefill")
        )  # the first decode differs
        status = shadow.status()["toypermode.gain:Gain"]
    finally:
        recorder.close()
        ttnn.close_mesh_device(mesh)
    assert (status["instances"], status["twins"], status["build_failed"]) == (4, 2, 1), status
    # the 4th instance: its first decode call differs when replayed, the second is not checked, nor is the
    # prefill call after it (the twin is out of step)
    assert (status["unchecked_calls"], status["one_mode_only"]) == (2, 0), status
    results = list(shadow._results.values())
    failures = sorted(r.first_failure for r in results if r.first_failure)
    assert len(failures) == 3, failures
    assert failures[0].startswith("building the twin raised ValueError: no zero gain (at gain_1d.py:"), (
        failures
    )
    assert failures[1].startswith("output: device 0, index [0, 0, 0, 0]: 4.0 != 3.0 (expected)"), failures
    assert failures[2].startswith(
        "the twin reads one config dict per mode, but TTTv1's model_config has no"
    ), failures
    assert sum(r.passed for r in results) == 3


def test_the_twin_follows_the_setter_to_each_dict_of_one_mode(tmp_path, monkeypatch):
    """Several prefill dicts (Falcon-40B: one per length). Before the twin is built, a replayed call made with the
    second dict rebuilds it with that dict (and passes); after, a switch to a dict the twin gets wrong (gain 3)
    rebuilds it and fails, saying it was rebuilt and why; a rebuild that raises is a failed case naming both."""
    import importlib

    import torch

    from tests.tools.collect_cases.test_collect_verify import _shadowed
    from tttv2 import ttnn

    for name in ("toypermode", "toypermode.gain"):  # another test's copy of the toy may be imported
        monkeypatch.delitem(sys.modules, name, raising=False)
    generated = _toy(tmp_path, monkeypatch)
    recorder, shadow = _shadowed(tmp_path, generated)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    decode = {"LLM_MODE": "decode", "GAIN": 2.0}

    def prefill(gain):
        return {"LLM_MODE": "prefill", "GAIN": gain}

    try:
        Gain = importlib.import_module("toypermode.gain").Gain
        for rows, configs in (
            (32, (prefill(0.5), prefill(0.25), decode, decode, prefill(0.5))),  # 2 rebuilds, all equal
            (64, (prefill(0.5), decode, prefill(3.0), decode)),  # rebuilt wrong, then out of step
            (96, (prefill(0.5), decode, prefill(0.0))),  # the rebuild raises
        ):
            x = ttnn.from_torch(
                torch.ones(1, 1, rows, 32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
            )
            module = Gain(mesh, configs[0])
            for config in configs:
                module.set_model_config(config)
                module.forward(x)
        status = shadow.status()["toypermode.gain:Gain"]
    finally:
        recorder.close()
        ttnn.close_mesh_device(mesh)
    assert (status["twins"], status["rebuilt"], status["unchecked_calls"]) == (3, 4, 1), status
    results = sorted(shadow._results.values(), key=lambda r: r.fields_json)
    assert [(r.checked, r.passed) for r in results] == [(5, 5), (3, 2), (3, 2)]
    assert results[1].first_failure.startswith("output: device 0, index [0, 0, 0, 0]: 4.0 != 3.0 (expected)")
    assert results[1].first_failure.endswith(
        "(the twin was rebuilt after set_model_config switched TTTv1 to another prefill dict (keys that differ: "
        "GAIN): state it keeps itself started empty)"
    )
    assert results[2].first_failure.startswith(
        "set_model_config switched TTTv1 to another prefill dict (keys that differ: GAIN); rebuilding the twin with "
        "it: building the twin raised ValueError: no zero gain"
    ), results[2].first_failure


def test_switched_names_the_keys_the_setter_and_survives_a_comparison_that_raises():
    from tttv2_tools.collect_cases.verify import _setter, _switched

    class Odd:
        def __eq__(self, other):
            raise TypeError("no")

    built = {"LLM_MODE": "prefill", **{f"K{i}": i for i in range(6)}}
    assert _switched(built, {"prefill": built}, "prefill", "s") is None
    assert _switched(dict(built), {"prefill": built}, "prefill", "s") is None  # equal: the same dict
    many = _switched({"LLM_MODE": "prefill", "K9": 1}, {"prefill": built}, "prefill", "set_cfg")
    assert (
        many.startswith("set_cfg switched TTTv1 to another prefill dict")
        and "(keys that differ: K0, K1, K2, K3 and 3 more)" in many
    )
    odd = _switched({"A": Odd()}, {"prefill": {"A": Odd()}}, "prefill", "s")
    assert odd == "s switched TTTv1 to another prefill dict"  # the dicts could not be compared key by key
    assert _switched(built, {"prefill": built}, None, "s") is None  # no LLM_MODE: that call fails on its own
    assert _setter(object()) == "its setter"
