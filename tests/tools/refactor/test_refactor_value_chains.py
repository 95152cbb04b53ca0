"""A local that an and/or chain on a topology fact yields is a *value*, not the fact: the codemod keeps its value on
each topology (``mem = is_galaxy and CFG or DRAM`` is CFG-or-DRAM on galaxy, DRAM elsewhere; never True/False).
Checked on the generated code and, bit for bit, on the emulator against the TTTv1 module."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import numpy as np
import pytest

from tests.tools.refactor.conftest import assert_identical, replicated
from tttv2 import ttnn
from tttv2_tools.refactor import generate

BLOCK = """
import ttnn


class Block:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        mem = self.args.is_galaxy and self.model_config["TG_OUT_MEMCFG"] or self.model_config["OUT_MEMCFG"]
        wide = self.args.is_galaxy and x.shape[-1] > 32
        if wide:
            x = ttnn.mul(x, 2.0)
        if mode == "decode":
            x = ttnn.add(x, 1.0)
        return ttnn.to_memory_config(x, mem)
"""

CONFIG = """
import ttnn


class ModelArgs:
    def __init__(self, mesh_device, tg_out=None):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.model_config = {"OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG, "TG_OUT_MEMCFG": tg_out}

    def get_model_config(self):
        return self.model_config
"""


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    folder = tmp_path_factory.mktemp("value_chains")
    (folder / "block.py").write_text(textwrap.dedent(BLOCK))
    (folder / "model_config.py").write_text(textwrap.dedent(CONFIG))
    result = generate(folder / "block.py")
    assert result.gaps == []
    modules = {}
    for generated in result.modules:
        (folder / generated.file_name).write_text(generated.code)
        modules[generated.topology] = _load(
            folder / generated.file_name, f"value_chains_{generated.topology}"
        )
    tttv1 = _load(folder / "block.py", "value_chains_tttv1")
    config = _load(folder / "model_config.py", "value_chains_config")
    yield result, modules, tttv1.Block, config.ModelArgs
    for name in ("value_chains_1d", "value_chains_2d", "value_chains_tttv1", "value_chains_config"):
        sys.modules.pop(name, None)


def test_the_chain_keeps_its_values_in_the_generated_code(chain):
    result = chain[0]
    codes = {m.topology: m.code for m in result.modules}
    for code in codes.values():
        assert "to_memory_config(x, True)" not in code and "to_memory_config(x, False)" not in code
        assert "if True:" not in code
    bridge_1d = codes["1d"].split("def from_model_args")[1]
    assert "TG_OUT_MEMCFG" not in bridge_1d  # decided on 1D: the chain is OUT_MEMCFG there
    assert 'legacy.model_config["TG_OUT_MEMCFG"] or legacy.model_config["OUT_MEMCFG"]' in codes["2d"]
    assert "x.shape[-1] > 32" in codes["2d"]  # galaxy and a run-time test: only the galaxy half is decided


@pytest.mark.parametrize(("shape", "topology"), [((1, 2), "1d"), ((8, 4), "2d")])
def test_the_generated_module_matches_tttv1_bit_for_bit(chain, shape, topology):
    _, modules, block, model_args = chain
    generated = getattr(modules[topology], f"Block{topology.upper()}")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    try:
        rng = np.random.default_rng(0)
        # the galaxy value: set (the chain yields it) and None (falsy: the chain yields OUT_MEMCFG)
        for tg_out in (ttnn.L1_MEMORY_CONFIG, None):
            args = model_args(mesh, tg_out=tg_out)
            old, new = block(mesh, args), generated.from_model_args(mesh, args)
            for mode in ("decode", "prefill"):
                for width in (32, 64):
                    x = rng.standard_normal((1, 1, 32, width)).astype(np.float32)
                    want = old.forward(replicated(x, mesh), mode)
                    assert_identical(want, new.forward(replicated(x, mesh), mode), f"{shape} {mode} {width}")
            if topology == "2d" and tg_out is not None:
                assert want.memory_config() == ttnn.L1_MEMORY_CONFIG  # the case really tells the arms apart
    finally:
        ttnn.close_mesh_device(mesh)
