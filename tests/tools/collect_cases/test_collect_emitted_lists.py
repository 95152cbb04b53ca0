"""Case lists written by ``collect-cases emit`` from the tttv1 catalogue sweep, and the test that they are current.

The lists below come from ``data/tttv1_catalogue_cases.csv``, the export of the sweep documented in
docs/collect_cases.md ("The tttv1 catalogue sweep"); their header comments say how each was emitted. The tests
check every recorded case against the catalogue and tttv1's own precision table, and that ``emit --check``
finds each list up to date with the data (and finds it out of date when the data changes).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tttv2 import ttnn

DATA = Path(__file__).parent / "data" / "tttv1_catalogue_cases.csv"
MLP_FIELDS = "mesh_shape, mode, model_name, x_shape, x_dtype, w1_dtype, w2_dtype, w3_dtype"

# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_shape,mode,model_name,x_shape,x_dtype,w1_dtype,w2_dtype,w3_dtype topology=1d
MLP_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x1-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-decode-32-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 1),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 1),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 1),
        "decode",
        "Qwen2.5-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x1-decode-32-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x1-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Mistral-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-prefill-128-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Phi-3-mini-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x1-prefill-128-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x1-prefill-128-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x2-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-decode-32-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Qwen2.5-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x2-decode-32-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x2-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Mistral-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-prefill-128-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Phi-3-mini-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x2-prefill-128-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x2-prefill-128-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x8-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-decode-32-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Qwen2.5-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x8-decode-32-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x8-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Mistral-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-prefill-128-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Phi-3-mini-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="1x8-prefill-128-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x8-prefill-128-Qwen2.5-7B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_shape,mode,model_name,x_shape,x_dtype,w1_dtype,w2_dtype,w3_dtype topology=2d
MLP_2D_CASES = [
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-decode-32-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Qwen2.5-7B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat8_b",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Mistral-7B-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-prefill-128-Mistral-7B-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Phi-3-mini-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat16,
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        ttnn.bfloat4_b,
        id="8x4-prefill-128-Phi-3-mini-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat16,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-prefill-128-Qwen2.5-7B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.attention:Attention fields=mesh_shape,mode,model_name,x_shape,x_dtype,rot_mats_shape,rot_mats_dtype,current_pos_shape,current_pos_dtype,layer_past_dtype,wo_dtype,wqkv_dtype,wqkv_bias_decode_dtype,wqkv_bias_prefill_dtype topology=1d minimal
ATTENTION_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        (ttnn.bfloat16, ttnn.bfloat16),
        (1,),
        ttnn.int32,
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        None,
        None,
        id="1x1-decode-32-Llama-3.1-8B-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        (ttnn.bfloat16, ttnn.bfloat16),
        None,
        None,
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        None,
        None,
        id="1x1-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        (ttnn.bfloat16, ttnn.bfloat16),
        (1,),
        ttnn.int32,
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        None,
        None,
        id="1x2-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ((1, 1, 128, 64), (1, 1, 128, 64)),
        (ttnn.bfloat16, ttnn.bfloat16),
        None,
        None,
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        ttnn.bfloat16,
        ttnn.bfloat16,
        (ttnn.bfloat8_b,),
        ttnn.bfloat8_b,
        id="1x2-prefill-128-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat16,
        ((1, 1, 1, 64), (1, 1, 1, 64)),
        (ttnn.bfloat16, ttnn.bfloat16),
        (1,),
        ttnn.int32,
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        None,
        None,
        id="1x8-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat16,
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        (ttnn.bfloat16, ttnn.bfloat16),
        None,
        None,
        (ttnn.bfloat8_b, ttnn.bfloat8_b),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        None,
        None,
        id="1x8-prefill-128-Llama-3.1-8B-tiny",
    ),
]

EMITTED = [
    ("MLP_1D_CASES", "tttv1.tt.mlp:MLP", ["--topology", "1d"]),
    ("MLP_2D_CASES", "tttv1.tt.mlp:MLP", ["--topology", "2d"]),
    ("ATTENTION_1D_CASES", "tttv1.tt.attention:Attention", ["--topology", "1d", "--minimal"]),
]


def _expected_mlp_dtypes(model_name):
    from tttv1.catalogue import config_dict
    from tttv1.tt.model_config import DecodersPrecision, TensorGroup

    layers = config_dict(model_name)["num_hidden_layers"]
    precision = DecodersPrecision.performance(layers, model_name)
    return {
        (precision.get_tensor_dtype(i, TensorGroup.FF1_FF3), precision.get_tensor_dtype(i, TensorGroup.FF2))
        for i in range(layers)
    }


def _check_mlp_case(
    mesh_shape, mode, model_name, x_shape, x_dtype, w1_dtype, w2_dtype, w3_dtype, columns_split
):
    from tttv1.catalogue import config_dict

    dim = config_dict(model_name)["hidden_size"]
    rows = x_shape[-2]
    assert x_shape[:2] == (1, 1) and x_shape[-1] == dim // columns_split
    assert rows == 32 if mode == "decode" else rows % 128 == 0
    assert x_dtype == ttnn.bfloat16 and w1_dtype == w3_dtype
    assert (w1_dtype, w2_dtype) in _expected_mlp_dtypes(model_name)


@pytest.mark.parametrize(MLP_FIELDS, MLP_1D_CASES)
def test_mlp_1d_case_matches_the_model(
    mesh_shape, mode, model_name, x_shape, x_dtype, w1_dtype, w2_dtype, w3_dtype
):
    assert min(mesh_shape) == 1
    # on 1×N meshes every device sees the whole residual
    _check_mlp_case(mesh_shape, mode, model_name, x_shape, x_dtype, w1_dtype, w2_dtype, w3_dtype, 1)


@pytest.mark.parametrize(MLP_FIELDS, MLP_2D_CASES)
def test_mlp_2d_case_matches_the_model(
    mesh_shape, mode, model_name, x_shape, x_dtype, w1_dtype, w2_dtype, w3_dtype
):
    assert mesh_shape == (8, 4)
    # on the galaxy the residual is split over the 4 mesh columns
    _check_mlp_case(mesh_shape, mode, model_name, x_shape, x_dtype, w1_dtype, w2_dtype, w3_dtype, 4)


def test_attention_1d_minimal_list_covers_every_mesh_and_mode():
    pairs = {(case.values[0], case.values[1]) for case in ATTENTION_1D_CASES}
    meshes = {mesh for mesh, _ in pairs}
    assert meshes == {(1, 1), (1, 2), (1, 8)}
    assert pairs == {(mesh, mode) for mesh in meshes for mode in ("decode", "prefill")}


def test_case_ids_are_readable_and_unique():
    for cases in (MLP_1D_CASES, MLP_2D_CASES, ATTENTION_1D_CASES):
        ids = [case.id for case in cases]
        assert len(set(ids)) == len(ids) == len(cases) > 0
        assert all(case_id.split("-")[0] in {"1x1", "1x2", "1x8", "8x4"} for case_id in ids)


def _store_from_data(tmp_path, data=DATA):
    from tttv2_tools.collect_cases.cli import main

    store = tmp_path / "cases.sqlite"
    assert main(["import", "--store", str(store), "--csv", str(data)]) == 0
    return store


@pytest.fixture(scope="module")
def data_store(tmp_path_factory):
    return _store_from_data(tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize("name, target, options", EMITTED, ids=[e[0] for e in EMITTED])
def test_emitted_lists_are_up_to_date(data_store, name, target, options):
    from tttv2_tools.collect_cases.cli import main

    store = data_store
    args = ["emit", "--store", str(store), "--target", target, "--into", __file__, "--name", name, *options]
    assert main([*args, "--check"]) == 0


def test_emit_check_fails_when_the_recordings_change(tmp_path):
    from tttv2_tools.collect_cases.cli import main

    lines = DATA.read_text().splitlines(keepends=True)
    kept = [lines[0]] + [line for line in lines[1:] if not ("tttv1.tt.mlp:MLP" in line and ",8,4," in line)]
    assert len(kept) < len(lines)  # the data has galaxy MLP rows: drop them
    changed = tmp_path / "changed.csv"
    changed.write_text("".join(kept))
    store = _store_from_data(tmp_path, changed)
    copy = tmp_path / "test_copy.py"
    shutil.copy(__file__, copy)
    args = ["emit", "--store", str(store), "--target", "tttv1.tt.mlp:MLP", "--into", str(copy)]
    assert main([*args, "--name", "MLP_1D_CASES", "--topology", "1d", "--check"]) == 0
    # the galaxy list is now all hand-written as far as the store knows: kept, with a warning, not rewritten
    assert main([*args, "--name", "MLP_2D_CASES", "--topology", "2d", "--check"]) == 2  # no 2d cases left
    assert main([*args, "--name", "MLP_2D_CASES", "--check"]) == 1  # every case: the list would change
    assert copy.read_text() == Path(__file__).read_text()  # --check wrote nothing
