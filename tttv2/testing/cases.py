"""Upstream-style test cases: mesh × model family × mode × seq_len × weight precision, with readable ids
(``1x8-llama-prefill-128-mixed``) and the PCC thresholds upstream's module tests use.

``case_params(...)`` returns ``pytest.param`` objects (pytest is imported lazily), so a test writes
``@pytest.mark.parametrize("case", case_params(MESH_1D, FAMILIES, ...))``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tttv2 import ttnn
from tttv2.testing.meshes import mesh_id

__all__ = ["DECODE_ROWS", "PCC_THRESHOLDS", "PRECISIONS", "ModuleCase", "case_params", "pcc_threshold"]

# decode runs one 32-row tile of users (batch 32)
DECODE_ROWS = 32

# weight dtypes of each precision: "uniform" bfloat8_b everywhere, "mixed" bfloat4_b for the large up/gate
# projections (what TTTv1's performance preset does) and bfloat8_b elsewhere
PRECISIONS: dict[str, dict[str, object]] = {
    "uniform": {"w1_w3": ttnn.bfloat8_b, "w2": ttnn.bfloat8_b, "wqkv": ttnn.bfloat8_b, "wo": ttnn.bfloat8_b},
    "mixed": {"w1_w3": ttnn.bfloat4_b, "w2": ttnn.bfloat8_b, "wqkv": ttnn.bfloat8_b, "wo": ttnn.bfloat8_b},
}

# upstream's thresholds: MLP 0.99 uniform / 0.98 mixed, RMSNorm 0.999, attention 0.99, LM head and embedding 0.999
PCC_THRESHOLDS: dict[str, dict[str, float]] = {
    "mlp": {"uniform": 0.99, "mixed": 0.98},
    "rmsnorm": {"uniform": 0.999, "mixed": 0.999},
    "attention": {"uniform": 0.99, "mixed": 0.99},
    "lm_head": {"uniform": 0.999, "mixed": 0.999},
    "embedding": {"uniform": 0.999, "mixed": 0.999},
    "rope": {"uniform": 0.9999, "mixed": 0.9999},
}


def pcc_threshold(module_kind: str, precision: str = "uniform") -> float:
    return PCC_THRESHOLDS[module_kind][precision]


@dataclass(frozen=True)
class ModuleCase:
    mesh_shape: tuple[int, int]
    family: str
    mode: str
    seq_len: int
    precision: str = "uniform"

    @property
    def id(self) -> str:
        return f"{mesh_id(self.mesh_shape)}-{self.family}-{self.mode}-{self.seq_len}-{self.precision}"

    @property
    def dtypes(self) -> dict[str, object]:
        return PRECISIONS[self.precision]


def case_params(meshes, families, *, prefill_seq_lens=(128,), decode=True, precisions=("uniform",), marks=()):
    """Every combination as ``pytest.param(ModuleCase, id=...)``; decode cases use ``DECODE_ROWS`` rows."""
    import pytest

    modes = [("prefill", s) for s in prefill_seq_lens] + ([("decode", DECODE_ROWS)] if decode else [])
    cases = [
        ModuleCase(tuple(mesh), family, mode, seq_len, precision)
        for mesh, family, (mode, seq_len), precision in itertools.product(meshes, families, modes, precisions)
    ]
    return [pytest.param(case, id=case.id, marks=marks) for case in cases]
