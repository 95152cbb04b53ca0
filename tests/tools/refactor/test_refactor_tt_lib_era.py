"""A module of the tt_lib era (tt-metal's T3000 Mixtral MLP, ``mixtral_mlp.py@00f67cf4``), on
``inputs/rmm/t3k/expert_mlp.py``: one expert per device, ``ttnn.experimental.operations.primary.matmul_1d`` with
program configs built in ``__init__`` (the gate's SiLU fused as a ``FusibleActivation``) and
``ttnn.experimental.tensor.mul``. The generated module keeps the older calls and equals TTTv1 bit for bit on the
emulator, which accepts that API (docs/emulator.md, "The T3000 demos' older ops")."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tools.refactor.conftest import (
    InputPackage,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    replicated,
)
from tttv2 import ttnn
from tttv2.ttnn import ValidationError

PACKAGE = "rmm"
inputs_importable = importable_inputs(PACKAGE)
_inputs = InputPackage(PACKAGE)
DIM, HIDDEN = 64, 128


def _state_dict(n_experts):
    import torch

    torch.manual_seed(n_experts)
    shapes = {"w1": (HIDDEN, DIM), "w2": (DIM, HIDDEN), "w3": (HIDDEN, DIM)}
    return {
        f"layers.0.experts.{e}.{name}.weight": torch.randn(*shape) / 8
        for e in range(n_experts)
        for name, shape in shapes.items()
    }


def _rows(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((1, 1, rows, DIM)).astype(np.float32)


def test_the_older_calls_stay_and_their_configs_are_fields():
    result = _inputs.generate("t3k/expert_mlp")
    assert_no_static_branch(result)
    code = result.modules[0].code
    forward = code.split("    def forward")[1]
    assert forward.count("ttnn.experimental.operations.primary.matmul_1d(") == 3
    assert "ttnn.experimental.tensor.mul(gate, up)" in forward
    assert "program_config=self.config.gate_cfg" in forward
    assert "FusibleActivation.SILU" in code.split("def from_model_args")[1]
    # ``ttnn.to_device(upload("w1"), mesh)``, ``upload`` a lambda of ``ttnn.as_tensor``: the call gets the device
    # tensor TTTv1's as_tensor returned, not the LazyWeight the bridge's upload makes (it raised in to_device)
    assert 'legacy.w1 = ttnn.to_device(_on_device(upload("w1")), _on_device(device_mesh))' in code


@pytest.mark.parametrize("shape", [(1, 2), (1, 8)])
def test_the_expert_mlp_matches_tttv1_bit_for_bit(shape, inputs_importable, tmp_path):
    generated = generated_class(_inputs.generate("t3k/expert_mlp"), "1d", tmp_path)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    try:
        args = _inputs.tttv1("t3k.model_config", "ExpertArgs")()
        state_dict = _state_dict(mesh.get_num_devices())
        old = _inputs.tttv1("t3k.expert_mlp", "TtExpertMLP")(mesh, state_dict, args, 0)
        new = generated.from_model_args(mesh, state_dict, args, 0)
        for step in range(2):
            x = _rows(32 + step)[:, :, :32]
            expected = old.forward(replicated(x, mesh))
            got = new.forward(replicated(x, mesh))
            assert_identical(expected, got, f"{shape} step {step}")
            assert expected.memory_config() == ttnn.L1_MEMORY_CONFIG and expected.dtype is ttnn.bfloat8_b
        # a 64-row input does not fit the decode configs (one row tile of M per core): both refuse it alike
        for module in (old, new):
            with pytest.raises(ValidationError, match=r"matmul_1d: program_config.per_core_M: expected >= 2"):
                module.forward(replicated(_rows(64), mesh))
    finally:
        ttnn.close_mesh_device(mesh)
