"""Per-module comparisons against Hugging Face on every mesh: norm, attention (prefill fills the KV cache, then a
decode step reads it), MLP (G3 and G1), decoder layer, embedding and LM head.

The inputs of each module are the activations the Hugging Face model itself produced (captured with forward
hooks on layer 0 while it prefills a 40-token prompt and decodes one token), so every module is checked in its
real operating range. Prefill pads the sequence to 128 rows (causal attention keeps the first 40 rows exact);
decode pads the batch to one 32-row tile.
"""

from __future__ import annotations

import pytest
import torch
import ttnn

from tests.tttv1.conftest import MESHES, hf_reference
from tttv1.tt.attention import Attention
from tttv1.tt.ccl import TT_CCL
from tttv1.tt.common import get_prefill_rot_mat
from tttv1.tt.decoder import TransformerBlock
from tttv1.tt.distributed_norm import DistributedNorm
from tttv1.tt.embedding import Embedding
from tttv1.tt.lm_head import LMHead
from tttv1.tt.mlp import MLP
from tttv1.tt.mlp_legacy import MLP as LegacyMLP
from tttv1.tt.model_config import ModelArgs
from tttv1.tt.rmsnorm import RMSNorm
from tttv1.tt.rope import RotarySetup
from tttv2.testing import pcc

PROMPT = 40
PADDED = 128
THRESHOLD = 0.99


def _capture(name):
    """Inputs/outputs of layer 0's modules (and the final norm / LM head) during a prefill and one decode step."""
    ref, hf_sd = hf_reference(name)
    layer = ref.model.layers[0]
    store = {"prefill": {}, "decode": {}}
    phase = {"now": "prefill"}

    def hook(key):
        def fn(module, args, kwargs, output):
            x = args[0] if args else kwargs["hidden_states"]
            y = output[0] if isinstance(output, tuple) else output
            store[phase["now"]][key] = (x.detach().clone(), y.detach().clone())

        return fn

    handles = [
        layer.input_layernorm.register_forward_hook(hook("norm"), with_kwargs=True),
        layer.self_attn.register_forward_hook(hook("attention"), with_kwargs=True),
        layer.mlp.register_forward_hook(hook("mlp"), with_kwargs=True),
        layer.register_forward_hook(hook("decoder"), with_kwargs=True),
        ref.model.norm.register_forward_hook(hook("final_norm"), with_kwargs=True),
        ref.lm_head.register_forward_hook(hook("lm_head"), with_kwargs=True),
    ]
    tokens = torch.randint(3, ref.config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(7))
    try:
        with torch.no_grad():
            out = ref(tokens, use_cache=True)
            phase["now"] = "decode"
            next_tok = out.logits[:, -1].argmax(-1, keepdim=True)
            ref(next_tok, past_key_values=out.past_key_values, use_cache=True)
    finally:
        for h in handles:
            h.remove()
    return hf_sd, tokens, next_tok, store


_CAPTURES: dict[str, tuple] = {}


def capture(name):
    if name not in _CAPTURES:
        _CAPTURES[name] = _capture(name)
    return _CAPTURES[name]


def make_args(mesh, name, **kw):
    return ModelArgs(mesh, max_batch_size=1, max_seq_len=256, model_name=name, **kw)


def tt_input(x, args, mesh, *, mode, fractured, memory_config=None):
    """Host activations [1, S, dim] → device [1, 1, S(padded), dim]: fractured over mesh columns (residual
    stream) or, on 1-D meshes, replicated (the gathered norm output attention and MLP take)."""
    x = x.reshape(1, 1, -1, x.shape[-1]).float()
    rows = PADDED if mode == "prefill" else 32
    x = torch.nn.functional.pad(x, (0, 0, 0, rows - x.shape[2]))
    if fractured or args.is_galaxy:
        mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=args.cluster_shape)
    else:
        mapper = ttnn.ReplicateTensorToMesh(mesh)
    if memory_config is None:
        memory_config = ttnn.DRAM_MEMORY_CONFIG
    return ttnn.from_torch(
        x,
        device=mesh,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=mapper,
        memory_config=memory_config,
    )


def fractured_output(t, args, mesh, rows):
    """Device output split over mesh columns along dim (replicated over rows on a Galaxy) → torch [rows, dim]."""
    if args.num_devices == 1:
        out = ttnn.to_torch(t)
    elif args.is_galaxy:
        out = ttnn.to_torch(
            t, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(1, 3), mesh_shape=args.cluster_shape)
        )[:, :1]
    else:
        out = ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=-1))
    return out.float().reshape(-1, out.shape[-1])[:rows]


def replicated_output(t, rows):
    out = ttnn.to_torch(ttnn.get_device_tensors(t)[0])
    return out.float().reshape(-1, out.shape[-1])[:rows]


def check(what, expected, got, threshold=THRESHOLD):
    """Assert PCC >= threshold; prints the value (visible with ``pytest -s``)."""
    value = pcc(expected.reshape(got.shape), got)
    print(f"{what}: PCC {value:.5f}")
    assert value >= threshold, f"{what}: PCC {value:.5f} < {threshold}"


def rot_mats_decode(rope, pos):
    return rope.get_rot_mats(torch.tensor([pos]))


MESH_IDS = list(MESHES)


@pytest.mark.parametrize("mesh_name", MESH_IDS)
def test_norm(mesh, mesh_name):
    """DistributedNorm(RMSNorm): gathers (1-D) or normalises distributed (Galaxy); decode runs sharded."""
    name = "Llama-3.1-8B-tiny"
    m = mesh(MESHES[mesh_name])
    hf_sd, _, _, store = capture(name)
    args = make_args(m, name)
    sd = args.load_state_dict(hf_sd)
    tt_ccl = TT_CCL(m)
    norm = DistributedNorm(
        RMSNorm(
            device=m,
            dim=args.dim,
            eps=args.norm_eps,
            state_dict=sd,
            state_dict_prefix=args.get_state_dict_prefix("", 0),
            weight_key="attention_norm",
            is_distributed=args.is_distributed_norm,
            sharded_program_config=args.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
            sharded_output_config=args.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
            ccl_topology=args.ccl_topology(),
            tt_ccl=tt_ccl,
        ),
        args,
        tt_ccl,
        TG=args.is_galaxy,
    )
    for mode, rows in (("prefill", PROMPT), ("decode", 1)):
        x, y = store[mode]["norm"]
        residual_mem = (
            args.model_config["DECODE_RESIDUAL_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
        )
        out = norm(tt_input(x, args, m, mode=mode, fractured=True, memory_config=residual_mem), mode)
        got = fractured_output(out, args, m, rows) if args.is_galaxy else replicated_output(out, rows)
        check(f"norm {mesh_name} {mode}", y, got)


@pytest.mark.parametrize("mlp_class", [MLP, LegacyMLP], ids=["G3", "G1"])
@pytest.mark.parametrize("mesh_name", MESH_IDS)
def test_mlp(mesh, mesh_name, mlp_class):
    """The MLP in prefill and decode (Llama-3.1-8B's hidden dim is zero-padded on a Galaxy)."""
    name = "Llama-3.1-8B-tiny"
    m = mesh(MESHES[mesh_name])
    hf_sd, _, _, store = capture(name)
    args = make_args(m, name)
    sd = args.load_state_dict(hf_sd)
    mlp = mlp_class(
        mesh_device=m,
        tt_ccl=TT_CCL(m),
        args=args,
        state_dict=sd,
        weight_cache_path=None,
        layer_num=0,
        dtype=ttnn.bfloat8_b,
        model_config=args.get_model_config(),
    )
    decode_in_mem = (
        args.model_config["MLP_ACT_MEMCFG"]
        if args.is_galaxy
        else args.model_config["SHARDED_MLP_INPUT_MEMCFG"]
    )
    for mode, rows, mem in (("prefill", PROMPT, None), ("decode", 1, decode_in_mem)):
        x, y = store[mode]["mlp"]
        out = mlp(tt_input(x, args, m, mode=mode, fractured=False, memory_config=mem), mode)
        check(
            f"mlp {mlp_class.__module__.rsplit('.', 1)[-1]} {mesh_name} {mode}",
            y,
            fractured_output(out, args, m, rows),
        )


@pytest.mark.parametrize("mesh_name", MESH_IDS)
def test_attention(mesh, mesh_name):
    """Attention prefill (fills the KV cache) then one decode step that attends to it (Qwen: QKV bias, hd 64)."""
    name = "Qwen2.5-7B-tiny"
    m = mesh(MESHES[mesh_name])
    hf_sd, _, _, store = capture(name)
    args = make_args(m, name)
    sd = args.load_state_dict(hf_sd)
    rope = RotarySetup(
        m, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )
    attention = Attention(
        mesh_device=m,
        tt_ccl=TT_CCL(m),
        args=args,
        state_dict=sd,
        weight_cache_path=None,
        layer_num=0,
        dtype=ttnn.bfloat8_b,
        transformation_mats=rope.get_both_trans_mats(),
        configuration=args,
    )
    x, y = store["prefill"]["attention"]
    rot = get_prefill_rot_mat(args.head_dim, m, PADDED, args.rope_theta, args.rope_scaling)
    out = attention(tt_input(x, args, m, mode="prefill", fractured=False), None, rot, 0, "prefill")
    check(f"attention {mesh_name} prefill", y, fractured_output(out, args, m, PROMPT))

    x, y = store["decode"]["attention"]
    current_pos = ttnn.from_torch(
        torch.tensor([PROMPT]), device=m, dtype=ttnn.int32, mesh_mapper=ttnn.ReplicateTensorToMesh(m)
    )
    mem = None if args.is_galaxy else args.model_config["SHARDED_ATTN_INPUT_MEMCFG"]
    out = attention(
        tt_input(x, args, m, mode="decode", fractured=False, memory_config=mem),
        current_pos,
        rot_mats_decode(rope, PROMPT),
        mode="decode",
    )
    check(f"attention {mesh_name} decode", y, fractured_output(out, args, m, 1))


@pytest.mark.parametrize("mesh_name", MESH_IDS)
def test_decoder_layer(mesh, mesh_name):
    """A whole TransformerBlock (norms, attention, MLP, residual adds) on the fractured residual stream."""
    name = "Mistral-7B-tiny"
    m = mesh(MESHES[mesh_name])
    hf_sd, _, _, store = capture(name)
    args = make_args(m, name)
    sd = args.load_state_dict(hf_sd)
    rope = RotarySetup(
        m, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )
    block = TransformerBlock(
        args=args,
        mesh_device=m,
        tt_ccl=TT_CCL(m),
        dtype=ttnn.bfloat8_b,
        state_dict=sd,
        layer_num=0,
        weight_cache_path=None,
        transformation_mats=rope.get_both_trans_mats(),
    )
    x, y = store["prefill"]["decoder"]
    rot = get_prefill_rot_mat(args.head_dim, m, PADDED, args.rope_theta, args.rope_scaling)
    out = block(tt_input(x, args, m, mode="prefill", fractured=True), None, rot, 0, "prefill")
    check(f"decoder {mesh_name} prefill", y, fractured_output(out, args, m, PROMPT))

    x, y = store["decode"]["decoder"]
    current_pos = ttnn.from_torch(
        torch.tensor([PROMPT]), device=m, dtype=ttnn.int32, mesh_mapper=ttnn.ReplicateTensorToMesh(m)
    )
    x_tt = tt_input(
        x, args, m, mode="decode", fractured=True, memory_config=args.model_config["DECODE_RESIDUAL_MEMCFG"]
    )
    out = block(x_tt, current_pos, rot_mats_decode(rope, PROMPT), mode="decode")
    check(f"decoder {mesh_name} decode", y, fractured_output(out, args, m, 1))


@pytest.mark.parametrize("mesh_name", MESH_IDS)
def test_embedding_and_lm_head(mesh, mesh_name):
    """Embedding rows (split over columns along dim) and LM head logits (Phi-3: vocab 1000 padded per device)."""
    name = "Phi-3-mini-tiny"
    m = mesh(MESHES[mesh_name])
    hf_sd, tokens, _, store = capture(name)
    args = make_args(m, name)
    sd = args.load_state_dict(hf_sd)
    emb = Embedding(m, args, None, sd, ttnn.bfloat16)
    ids = ttnn.from_torch(
        tokens.reshape(1, 1, 1, -1), device=m, dtype=ttnn.uint32, mesh_mapper=ttnn.ReplicateTensorToMesh(m)
    )
    out = ttnn.unsqueeze_to_4D(emb(ids))
    expected = hf_sd["model.embed_tokens.weight"][tokens[0]]
    check(f"embedding {mesh_name}", expected, fractured_output(out, args, m, PROMPT), threshold=0.999)

    lm_head = LMHead(args, m, TT_CCL(m), ttnn.bfloat8_b, sd, "", None, args.max_columns_per_device_lm_head)
    x, y = store["decode"]["lm_head"]
    mem = ttnn.DRAM_MEMORY_CONFIG if args.is_galaxy else args.model_config["LM_HEAD_INPUT_MEMCFG"]
    out = lm_head(tt_input(x, args, m, mode="decode", fractured=False, memory_config=mem), mode="decode")
    if args.is_galaxy:
        got = ttnn.to_torch(
            out, mesh_composer=ttnn.ConcatMesh2dToTensor(m, dims=(3, 1), mesh_shape=args.cluster_shape)
        )[:, :1]
    elif args.num_devices > 1:
        got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(m, dim=-1))
    else:
        got = ttnn.to_torch(out)
    got = got.float().reshape(-1, got.shape[-1])[:1, : args.vocab_size]
    check(f"lm_head {mesh_name}", y, got)
