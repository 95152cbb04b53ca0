"""Fixtures of the tttv1 tests: emulated meshes opened once per test module, and Hugging Face references
built from the catalogue's seeded random weights (nothing is downloaded)."""

from __future__ import annotations

import functools

import pytest
import torch

from tttv1 import catalogue
from tttv2 import ttnn

MESHES = {"N150": (1, 1), "N300": (1, 2), "T3K": (1, 8), "TG": (8, 4)}


@pytest.fixture(scope="module")
def mesh():
    """``mesh((rows, cols))`` opens an emulated mesh once per test module (closed at the end of the module)."""
    opened: dict[tuple[int, int], object] = {}

    def get(shape):
        shape = tuple(shape)
        if shape not in opened:
            opened[shape] = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        return opened[shape]

    yield get
    for m in opened.values():
        ttnn.close_mesh_device(m)


@functools.cache
def hf_reference(name: str, seed: int = 0):
    """(HF causal LM in float32 with the catalogue's random weights, those weights)."""
    state_dict = catalogue.random_state_dict(name, seed=seed)
    model = catalogue.hf_model_class(name)(catalogue.hf_config(name)).eval()
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing  # tied embeddings
    return model, state_dict


def margin_ok(ref_logits: torch.Tensor, tt_logits: torch.Tensor, min_gap: float = 0.02) -> torch.Tensor:
    """Per row: the argmax agrees, or the reference's top-2 gap is too small for a greedy choice to be stable."""
    top2 = torch.topk(ref_logits.float(), 2, dim=-1).values
    gap = top2[..., 0] - top2[..., 1]
    same = ref_logits.argmax(-1) == tt_logits.argmax(-1)
    return same | (gap < min_gap)
