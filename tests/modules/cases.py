"""The configurations tttv1 really runs, as the module tests' parameter lists.

Every ``*_CASES`` list is written by ``collect-cases emit`` from the tttv1 catalogue sweep kept in
``tests/tools/collect_cases/data/tttv1_catalogue_cases.csv``; ``EMITTED`` says with which options, and
``test_recorded_cases.py`` runs ``emit --check`` on each list, so the suite fails when a list is out of date with
the recordings. Never edit a list by hand: re-run the commands in docs/collect_cases.md ("The module tests' case
lists").

Selection rule (keeps the module tests fast): each list is emitted with ``--minimal`` over the columns its test
reads, so it still shows every recorded value of those columns and every (mesh, mode) pair — every catalogue
model, every mesh, both modes, every weight dtype — in the fewest cases.

How a test runs a recorded case (``family_of``, ``rows_of``): the mesh, the mode, the rows of the input (prefill
length, or the padded decode batch) and the weight dtypes are the recorded ones; the model runs as its family
(``model_type`` in the catalogue: llama, qwen2, mistral, phi3) at the tests' tiny sizes
(``tttv2.testing.references``), against the Hugging Face module of that family.
"""

from __future__ import annotations

import pytest

from tttv2 import ttnn

# the sweep's export: `collect-cases import --csv` turns it into the store the lists are emitted from
RECORDINGS = "tests/tools/collect_cases/data/tttv1_catalogue_cases.csv"

# list name, target, emit options (the columns are pinned by each list's header comment)
EMITTED = [
    ("MLP_1D_CASES", "tttv1.tt.mlp:MLP", ["--topology", "1d", "--minimal"]),
    ("MLP_2D_CASES", "tttv1.tt.mlp:MLP", ["--topology", "2d", "--minimal"]),
    ("RMSNORM_1D_CASES", "tttv1.tt.rmsnorm:RMSNorm", ["--topology", "1d", "--minimal"]),
    ("RMSNORM_2D_CASES", "tttv1.tt.distributed_norm:DistributedNorm", ["--topology", "2d", "--minimal"]),
    ("EMBEDDING_1D_CASES", "tttv1.tt.embedding:Embedding", ["--topology", "1d", "--minimal"]),
    ("LM_HEAD_1D_CASES", "tttv1.tt.lm_head:LMHead", ["--topology", "1d", "--minimal"]),
    ("ATTENTION_1D_CASES", "tttv1.tt.attention:Attention", ["--topology", "1d", "--minimal"]),
    ("ATTENTION_2D_CASES", "tttv1.tt.attention:Attention", ["--topology", "2d", "--minimal"]),
    ("ROPE_1D_CASES", "tttv1.tt.attention:Attention", ["--topology", "1d", "--minimal"]),
    ("DECODER_CASES", "tttv1.tt.attention:Attention", ["--mode", "prefill", "--minimal"]),
]

# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_shape,mode,model_name,x_shape,w1_dtype,w2_dtype topology=1d minimal
MLP_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="1x1-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Mistral-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="1x1-prefill-128-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="1x2-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x2-prefill-128-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 512),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="1x8-decode-32-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="1x8-prefill-128-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
]

# collect-cases: target=tttv1.tt.mlp:MLP fields=mesh_shape,mode,model_name,x_shape,w1_dtype,w2_dtype topology=2d minimal
MLP_2D_CASES = [
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Llama-3.1-8B-tiny-w1_dtype=bfloat4_b",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 128),
        ttnn.bfloat4_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 128),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-prefill-128-Qwen2.5-7B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.rmsnorm:RMSNorm fields=mesh_shape,mode,model_name,x_shape topology=1d minimal
RMSNORM_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        id="1x1-decode-32-Llama-3.1-8B-tiny",
    ),
    pytest.param((1, 1), "prefill", "Phi-3-mini-tiny", (1, 1, 32, 512), id="1x1-prefill-32-Phi-3-mini-tiny"),
    pytest.param((1, 2), "decode", "Qwen2.5-7B-tiny", (1, 1, 32, 512), id="1x2-decode-32-Qwen2.5-7B-tiny"),
    pytest.param(
        (1, 2),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 512),
        id="1x2-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param((1, 8), "decode", "Mistral-7B-tiny", (1, 1, 32, 512), id="1x8-decode-32-Mistral-7B-tiny"),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        id="1x8-prefill-32-Llama-3.1-8B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.distributed_norm:DistributedNorm fields=mesh_shape,mode,model_name,x_shape topology=2d minimal
RMSNORM_2D_CASES = [
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 128),
        id="8x4-decode-32-Llama-3.1-8B-tiny",
    ),
    pytest.param((8, 4), "decode", "Mistral-7B-tiny", (1, 1, 32, 128), id="8x4-decode-32-Mistral-7B-tiny"),
    pytest.param((8, 4), "decode", "Phi-3-mini-tiny", (1, 1, 32, 128), id="8x4-decode-32-Phi-3-mini-tiny"),
    pytest.param((8, 4), "decode", "Qwen2.5-7B-tiny", (1, 1, 32, 128), id="8x4-decode-32-Qwen2.5-7B-tiny"),
    pytest.param(
        (8, 4),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 128),
        id="8x4-prefill-128-Llama-3.2-1B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.embedding:Embedding fields=mesh_shape,model_name,x_shape topology=1d minimal
EMBEDDING_1D_CASES = [
    pytest.param((1, 1), "Llama-3.1-8B-tiny", (1, 1, 1, 32), id="1x1-1-Llama-3.1-8B-tiny-x_shape=1x1x1x32"),
    pytest.param((1, 1), "Phi-3-mini-tiny", (1, 1, 1, 32), id="1x1-1-Phi-3-mini-tiny-x_shape=1x1x1x32"),
    pytest.param((1, 1), "Qwen2.5-7B-tiny", (1, 1, 1, 32), id="1x1-1-Qwen2.5-7B-tiny-x_shape=1x1x1x32"),
    pytest.param((1, 2), "Llama-3.2-1B-tiny", (1, 1, 1, 128), id="1x2-1-Llama-3.2-1B-tiny-x_shape=1x1x1x128"),
    pytest.param((1, 8), "Mistral-7B-tiny", (1, 1, 1, 32), id="1x8-1-Mistral-7B-tiny-x_shape=1x1x1x32"),
]

# collect-cases: target=tttv1.tt.lm_head:LMHead fields=mesh_shape,mode,model_name,x_shape topology=1d minimal
LM_HEAD_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        id="1x1-decode-32-Llama-3.1-8B-tiny",
    ),
    pytest.param((1, 1), "prefill", "Phi-3-mini-tiny", (1, 1, 32, 512), id="1x1-prefill-32-Phi-3-mini-tiny"),
    pytest.param((1, 2), "decode", "Qwen2.5-7B-tiny", (1, 1, 32, 512), id="1x2-decode-32-Qwen2.5-7B-tiny"),
    pytest.param(
        (1, 2),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 32, 512),
        id="1x2-prefill-32-Llama-3.2-1B-tiny",
    ),
    pytest.param((1, 8), "decode", "Mistral-7B-tiny", (1, 1, 32, 512), id="1x8-decode-32-Mistral-7B-tiny"),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        id="1x8-prefill-32-Llama-3.1-8B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.attention:Attention fields=mesh_shape,mode,model_name,x_shape,rot_mats_shape,current_pos_shape,wqkv_dtype,wo_dtype topology=1d minimal
ATTENTION_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 512),
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        (1,),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x1-decode-32-Llama-3.1-8B-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 512),
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        None,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x1-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 512),
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        (1,),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x2-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 512),
        ((1, 1, 128, 64), (1, 1, 128, 64)),
        None,
        ttnn.bfloat16,
        ttnn.bfloat16,
        id="1x2-prefill-128-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 512),
        ((1, 1, 1, 64), (1, 1, 1, 64)),
        (1,),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x8-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        (1, 1, 128, 512),
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        None,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="1x8-prefill-128-Llama-3.1-8B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.attention:Attention fields=mesh_shape,mode,model_name,x_shape,rot_mats_shape,current_pos_shape,wqkv_dtype,wo_dtype topology=2d minimal
ATTENTION_2D_CASES = [
    pytest.param(
        (8, 4),
        "decode",
        "Llama-3.1-8B-tiny",
        (1, 1, 32, 128),
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        (1,),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Llama-3.1-8B-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Mistral-7B-tiny",
        (1, 1, 32, 128),
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        (1,),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Mistral-7B-tiny",
    ),
    pytest.param(
        (8, 4),
        "decode",
        "Phi-3-mini-tiny",
        (1, 1, 32, 128),
        ((1, 1, 1, 64), (1, 1, 1, 64)),
        (1,),
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-decode-32-Phi-3-mini-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Llama-3.2-1B-tiny",
        (1, 1, 128, 128),
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        None,
        ttnn.bfloat8_b,
        ttnn.bfloat8_b,
        id="8x4-prefill-128-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (8, 4),
        "prefill",
        "Qwen2.5-7B-tiny",
        (1, 1, 128, 128),
        ((1, 1, 128, 64), (1, 1, 128, 64)),
        None,
        ttnn.bfloat16,
        ttnn.bfloat16,
        id="8x4-prefill-128-Qwen2.5-7B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.attention:Attention fields=mesh_shape,mode,model_name,rot_mats_shape topology=1d minimal
ROPE_1D_CASES = [
    pytest.param(
        (1, 1),
        "decode",
        "Llama-3.1-8B-tiny",
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        id="1x1-decode-Llama-3.1-8B-tiny",
    ),
    pytest.param(
        (1, 1),
        "prefill",
        "Qwen2.5-7B-tiny",
        ((1, 1, 128, 64), (1, 1, 128, 64)),
        id="1x1-prefill-Qwen2.5-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "decode",
        "Mistral-7B-tiny",
        ((1, 1, 1, 32), (1, 1, 1, 32)),
        id="1x2-decode-Mistral-7B-tiny",
    ),
    pytest.param(
        (1, 2),
        "prefill",
        "Llama-3.2-1B-tiny",
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        id="1x2-prefill-Llama-3.2-1B-tiny",
    ),
    pytest.param(
        (1, 8),
        "decode",
        "Phi-3-mini-tiny",
        ((1, 1, 1, 64), (1, 1, 1, 64)),
        id="1x8-decode-Phi-3-mini-tiny",
    ),
    pytest.param(
        (1, 8),
        "prefill",
        "Llama-3.1-8B-tiny",
        ((1, 1, 128, 32), (1, 1, 128, 32)),
        id="1x8-prefill-Llama-3.1-8B-tiny",
    ),
]

# collect-cases: target=tttv1.tt.attention:Attention fields=mesh_shape,model_name mode=prefill minimal
DECODER_CASES = [
    pytest.param((1, 1), "Llama-3.1-8B-tiny", id="1x1-Llama-3.1-8B-tiny"),
    pytest.param((1, 1), "Qwen2.5-7B-tiny", id="1x1-Qwen2.5-7B-tiny"),
    pytest.param((1, 2), "Llama-3.2-1B-tiny", id="1x2-Llama-3.2-1B-tiny"),
    pytest.param((1, 8), "Mistral-7B-tiny", id="1x8-Mistral-7B-tiny"),
    pytest.param((8, 4), "Phi-3-mini-tiny", id="8x4-Phi-3-mini-tiny"),
]


# --- from a recorded case to what a test builds ---------------------------------------------------------------


def recorded(params, to_args) -> list:
    """``params`` (an emitted list) as the test's own arguments: ``to_args(*values)`` returns them as a tuple; the
    emitted ids and marks are kept."""
    return [pytest.param(*to_args(*p.values), id=p.id, marks=p.marks) for p in params]


def model_config(model_name: str) -> dict:
    from tttv1.catalogue import config_dict

    return config_dict(model_name)


def family_of(model_name: str) -> str:
    """The catalogue model's family (its ``model_type``): the Hugging Face reference the test builds."""
    return model_config(model_name)["model_type"]


def rows_of(x_shape) -> int:
    """The rows of a recorded [1, 1, rows, width] input: the prefill length, or the padded decode batch."""
    return int(x_shape[-2])


def precision_of(w1_dtype, w2_dtype) -> str:
    """The MLP precision (``tttv2.testing.cases.PRECISIONS``) with these recorded weight dtypes; an unknown pair is
    an error, so a new precision in the recordings is never run as another one."""
    from tttv2.testing.cases import PRECISIONS

    for name, dtypes in PRECISIONS.items():
        if (dtypes["w1_w3"], dtypes["w2"]) == (w1_dtype, w2_dtype):
            return name
    raise ValueError(
        f"no test precision has MLP weights w1/w3 {w1_dtype} and w2 {w2_dtype}; add one to PRECISIONS"
    )


def module_case(mesh_shape, mode, model_name, x_shape, w1_dtype=None, w2_dtype=None):
    """An upstream-style ``ModuleCase`` (mesh × family × mode × rows × precision) of a recorded case."""
    from tttv2.testing.cases import ModuleCase

    precision = "uniform" if w1_dtype is None else precision_of(w1_dtype, w2_dtype)
    return ModuleCase(tuple(mesh_shape), family_of(model_name), mode, rows_of(x_shape), precision)


def module_case_args(*values) -> tuple:
    return (module_case(*values),)


def attention_case(
    mesh_shape, mode, model_name, x_shape, rot_mats_shape, current_pos_shape, wqkv_dtype, wo_dtype
):
    """An ``AttentionCase`` of a recorded case: the catalogue model's dim and heads, the head dim of its rotary
    tables, its QKV / WO dtypes; prefill of the recorded length, or decode from position 0 of its users (one per
    recorded position)."""
    from .attention._harness import DTYPES, AttentionCase

    config = model_config(model_name)
    names = {dtype: name for name, dtype in DTYPES.items()}
    decode = mode == "decode"
    return AttentionCase(
        tuple(mesh_shape),
        family_of(model_name),
        config["num_attention_heads"],
        config["num_key_value_heads"],
        mode,
        0 if decode else rows_of(x_shape),
        wqkv_dtype=names[wqkv_dtype],
        batch=current_pos_shape[0] if decode else 1,
        head_dim=rot_mats_shape[0][-1],
        dim=config["hidden_size"],
        options=() if wo_dtype == ttnn.bfloat8_b else (("wo_dtype", wo_dtype),),
    )


def attention_case_args(*values) -> tuple:
    return (attention_case(*values),)
