"""Config dicts built per mode by a function (issue 21, item 3; the Falcon-40B / Llama-2-70B T3000 style):
``get_model_config(..., llm_mode, ...)`` builds one dict per mode, TTTv1 is built with one of them and switched
to the other by ``set_model_config``. Each mode's specialisation reads that mode's dict: ``from_model_args``
takes TTTv1's arguments plus ``decode_model_config`` / ``prefill_model_config``. Proven on ``inputs/rpm`` by
running the generated module against TTTv1's class, bit for bit, in both modes; where it cannot be sound, one
gap names why."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tools.refactor.conftest import assert_identical, load_generated, replicated
from tttv2_tools.refactor import generate

INPUTS = Path(__file__).parent / "inputs"


@pytest.fixture
def rpm(monkeypatch):
    """The inputs package ``rpm`` importable, as TTTv1 callers and the generated module need."""
    monkeypatch.syspath_prepend(str(INPUTS))
    yield lambda module, name: getattr(importlib.import_module(f"rpm.{module}"), name)
    for name in [n for n in sys.modules if n.split(".")[0] == "rpm"]:
        del sys.modules[name]


def _generated(tmp_path, path: Path):
    result = generate(path)
    assert result.gaps == []
    (generated,) = result.modules
    (tmp_path / generated.file_name).write_text(generated.code)
    return load_generated(str(tmp_path / "t.py"), generated.file_name, generated.class_name), generated.code


def _x(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, 64)).astype(np.float32)


def test_each_mode_reads_its_own_dict_bit_for_bit(rpm, tmp_path, ttnn_mesh_pool):
    """Before: one gap per key read (5), and the shared keys (``ACT_SCALE``, ``OUTPUT_MEMCFG``) were one field
    computed from the construction dict only, so prefill ran with decode's values."""
    import torch  # here, not at collection: torch must not be imported before the nested runs' session setup

    mlp1d, code = _generated(tmp_path, INPUTS / "rpm" / "mlp.py")
    assert "decode_act_scale=" in code and "prefill_act_scale=" in code  # one field per mode's dict
    get_model_config, mlp = rpm("model_config", "get_model_config"), rpm("mlp", "TtPerModeMLP")
    torch.manual_seed(0)
    state_dict = {f"m.3.mlp.{w}.weight": torch.randn(64, 64) * 0.1 for w in ("ff1", "ff2")}
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn_mesh_pool(shape)
        configs = {m: get_model_config("BFLOAT16-DRAM", m, 128, shape[1]) for m in ("decode", "prefill")}
        for built_with, other in (("decode", "prefill"), ("prefill", "decode")):
            old = mlp(mesh, state_dict, "m", 3, 64, configs[built_with])
            given = {f"{other}_model_config": configs[other]}
            new = mlp1d.from_model_args(mesh, state_dict, "m", 3, 64, configs[built_with], **given)
            for mode, rows in (("decode", 32), ("prefill", 128), ("decode", 32), ("prefill", 128)):
                old.set_model_config(configs[mode])  # how TTTv1 gives each mode its dict
                assert_identical(
                    old(replicated(_x(rows), mesh), mode),
                    new.forward(replicated(_x(rows), mesh), mode),
                    f"{shape} built with {built_with}, {mode}",
                )


def test_a_mode_without_its_dict_is_refused_by_name(rpm, tmp_path, ttnn_mesh_pool):
    mlp1d, _ = _generated(tmp_path, INPUTS / "rpm" / "mlp.py")
    get_model_config = rpm("model_config", "get_model_config")
    decode, prefill = (get_model_config("BFLOAT16-DRAM", m, 64, 1) for m in ("decode", "prefill"))
    state_dict = {f"m.0.mlp.{w}.weight": np.zeros((64, 64), np.float32) for w in ("ff1", "ff2")}
    mesh = ttnn_mesh_pool((1, 1))
    with pytest.raises(
        ValueError,
        match=r"the prefill fields read the prefill config dict, .* LLM_MODE='decode'; pass prefill_model_config=",
    ):
        mlp1d.from_model_args(mesh, state_dict, "m", 0, 64, decode)
    with pytest.raises(ValueError, match=r"the decode fields .* given for decode has LLM_MODE='prefill'"):
        mlp1d.from_model_args(mesh, state_dict, "m", 0, 64, decode, decode_model_config=prefill)


def test_a_dict_without_its_mode_must_be_given_for_each_mode(tmp_path, monkeypatch):
    """``rfx_fn``'s builders do not stamp ``LLM_MODE``: the constructor's dict cannot stand for a mode, so each
    mode's dict is required; given explicitly, it is taken as that mode's."""
    monkeypatch.syspath_prepend(str(INPUTS))
    result = generate(INPUTS / "rfx_fn" / "ffn.py")
    assert result.gaps == []
    code = result.modules[0].code
    assert "decode_model_config=None, prefill_model_config=None" in code
    assert "decode_scale=" in code and "prefill_scale=" in code


def _write(tmp_path, module: str) -> Path:
    (tmp_path / "model_config.py").write_text((INPUTS / "rfx_fn" / "model_config.py").read_text())
    path = tmp_path / "ffn.py"
    path.write_text(module)
    return path


def test_a_mode_taken_from_the_dict_itself_stays_a_gap(tmp_path):
    """Llama-2-70B's style: the forward takes no mode, ``self.model_config["LLM_MODE"]`` is the mode."""
    path = _write(
        tmp_path,
        "import ttnn\n\n\nclass PerMode:\n"
        "    def __init__(self, mesh_device, model_config):\n        self.model_config = model_config\n\n"
        "    def forward(self, x):\n        x = ttnn.mul(x, self.model_config['SCALE'])\n        return x\n",
    )
    gaps = generate(path).gaps
    assert (gaps[0].loc, gaps[0].what) == ("ffn.py", "PerMode.forward")
    assert "the forward takes no mode parameter" in gaps[0].reason
    assert [g.what for g in gaps[1:]] == ['model_config["SCALE"]']
    assert "PerMode.forward keeps it from giving each mode its own dict" in gaps[1].reason


def test_a_config_not_kept_from_the_constructor_stays_a_gap(tmp_path):
    """``self.model_config`` is not the argument itself (``model_config or {}``): the dict a mode's fields read
    would not be the one given for that mode."""
    path = _write(
        tmp_path,
        "import ttnn\n\n\nclass PerMode:\n"
        "    def __init__(self, mesh_device, model_config):\n        self.model_config = model_config or {}\n\n"
        "    def forward(self, x, llm_mode):\n        x = ttnn.mul(x, self.model_config['SCALE'])\n        return x\n",
    )
    gaps = generate(path).gaps
    assert gaps[0].what == "PerMode.__init__"
    assert "does not keep a `model_config` parameter as `self.model_config`" in gaps[0].reason
    assert [g.what for g in gaps[1:]] == ['model_config["SCALE"]']


def test_a_setter_that_rebuilds_state_stays_a_gap(tmp_path):
    """Falcon-40B's ``set_model_config`` also reallocates its output tensor for the new dict: that state would be
    per dict too, and is not transformed (one gap); the fields still read each mode's dict."""
    path = _write(
        tmp_path,
        "import ttnn\n\n\nclass PerMode:\n"
        "    def __init__(self, mesh_device, model_config):\n        self.model_config = model_config\n"
        "        self.rows = 0\n\n"
        "    def set_model_config(self, model_config):\n        '''Switch dicts.'''\n"
        "        self.model_config = model_config\n        self.rows = 1\n\n"
        "    def forward(self, x, llm_mode):\n        x = ttnn.mul(x, self.model_config['SCALE'])\n        return x\n",
    )
    result = generate(path)
    (gap,) = result.gaps  # the keys themselves are read per mode
    assert (gap.loc, gap.what) == ("ffn.py:12", "PerMode.set_model_config")
    assert "also runs `self.rows = 1`: what that rebuilds for the new dict is built once" in gap.reason
    assert "decode_model_config=None" in result.modules[0].code


def test_keyword_only_parameters_stay_and_a_mode_without_fields_needs_no_dict(tmp_path):
    path = _write(
        tmp_path,
        "import ttnn\n\n\nclass PerMode:\n"
        "    def __init__(self, mesh_device, model_config, *, tag=None):\n        self.model_config = model_config\n\n"
        "    def forward(self, x, llm_mode):\n        if llm_mode == 'decode':\n"
        "            x = ttnn.mul(x, self.model_config['SCALE'])\n        return x\n",
    )
    result = generate(path)
    assert result.gaps == []
    code = result.modules[0].code
    assert "model_config, *, tag=None, decode_model_config=None, prefill_model_config=None):" in code
    assert '_mode_config("decode", decode_model_config)' in code
    assert '_mode_config("prefill"' not in code
