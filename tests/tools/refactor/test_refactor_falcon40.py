"""What the real Falcon-40B T3000 modules needed (issue 21, helper ``falcon40``), on the ``inputs/rfalcon``
package: a module built with an empty state dict loads its weights from its own tt cache, and so must the
generated ``from_model_args`` (the generated Falcon-40B MLP raised ``AttributeError`` in ``preprocess(None)``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.tools.refactor.conftest import (
    InputPackage,
    assert_identical,
    assert_no_static_branch,
    generated_class,
    importable_inputs,
    replicated,
)
from tttv2 import ttnn

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rfalcon"

inputs_importable = importable_inputs(PACKAGE)
_inputs = InputPackage(PACKAGE)


def _config():
    return {
        "UP_WEIGHTS_DTYPE": ttnn.bfloat8_b,
        "DOWN_WEIGHTS_DTYPE": ttnn.bfloat16,
        "HIDDEN_DTYPE": ttnn.bfloat16,
    }


def _state_dict():
    import torch

    g = torch.Generator().manual_seed(5)
    return {
        "blocks.0.ffn.up.weight": torch.randn(256, 64, generator=g) / 8,
        "blocks.0.ffn.down.weight": torch.randn(64, 256, generator=g) / 16,
    }


def test_a_module_built_from_its_tt_cache_alone_matches_tttv1(tmp_path):
    result = _inputs.generate("cached_ffn")
    assert_no_static_branch(result)
    generated = generated_class(result, "1d", tmp_path)
    tttv1 = _inputs.tttv1("cached_ffn", "TtCachedFeedForward")
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 64)).astype(np.float32)
    for shape in ((1, 1), (1, 2)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        cache = tmp_path / f"cache_{shape[1]}"
        cache.mkdir()
        tttv1(mesh, _state_dict(), "blocks", 0, 64, _config(), cache)  # the first run writes the cache
        old = tttv1(mesh, {}, "blocks", 0, 64, _config(), cache)
        new = generated.from_model_args(mesh, {}, "blocks", 0, 64, _config(), cache)
        assert_identical(old(replicated(x, mesh)), new(replicated(x, mesh)), f"{shape}")
        with_weights = generated.from_model_args(mesh, _state_dict(), "blocks", 0, 64, _config(), cache)
        assert_identical(
            old(replicated(x, mesh)), with_weights(replicated(x, mesh)), f"{shape}, host weights"
        )
        ttnn.close_mesh_device(mesh)
