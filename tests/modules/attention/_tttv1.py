"""The tttv1 side of the attention tests: tttv1's Attention and RotarySetup next to ours built with
``from_model_args`` from the same ModelArgs and state dict, and the bit-for-bit comparison of the two."""

from __future__ import annotations

import importlib

import numpy as np

from tttv2 import ttnn
from tttv2.modules import get_tt_ccl
from tttv2.modules.attention import Attention1D, Attention2D
from tttv2.testing.host import to_host
from tttv2.testing.legacy import catalogue_hf_module, catalogue_state_dicts, tttv1_model_args

PROMPT = 128
BLOCK = 32


def hf_catalogue_attention(name: str):
    """(HF config, HF attention of layer 0) of a catalogue model with its catalogue weights, eager attention."""
    from tttv1 import catalogue

    config = catalogue.hf_config(name)
    config._attn_implementation = "eager"
    family = config.model_type
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    prefix = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "phi3": "Phi3"}[family]

    def factory(_):
        return getattr(modeling, f"{prefix}Attention")(config, layer_idx=0)

    return config, catalogue_hf_module(name, factory, "model.layers.0.self_attn.")


def _state_dict(args, qk_norm: bool):
    from tttv1 import catalogue

    if args.model_name in catalogue.CATALOGUE:
        _, state_dict = catalogue_state_dicts(args)
    else:  # a variant config: tttv1's own seeded random weights for it
        state_dict = args.load_state_dict()
    if qk_norm:  # per-head norms as Qwen3 has them (no catalogue model does)
        state_dict = dict(state_dict)
        rng = np.random.default_rng(5)
        for norm in ("q_norm", "k_norm"):
            import torch

            weight = 1.0 + 0.1 * rng.standard_normal(args.head_dim).astype(np.float32)
            state_dict[f"layers.0.attention.{norm}.weight"] = torch.from_numpy(weight)
    return state_dict


def tttv1_attention(mesh, name_or_args, *, ours: bool, batch: int = 1, paged_config=None, qk_norm=False):
    """(attention, tttv1 RotarySetup, args): tttv1's Attention or ours via from_model_args, layer 0."""
    from tttv1.tt.attention import Attention
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.rope import RotarySetup

    args = (
        tttv1_model_args(mesh, name_or_args, max_batch_size=batch)
        if isinstance(name_or_args, str)
        else name_or_args
    )
    state_dict = _state_dict(args, qk_norm)
    rope = RotarySetup(
        mesh, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )
    mats = rope.get_both_trans_mats()
    if ours:
        cls = Attention2D if args.is_galaxy else Attention1D
        module = cls.from_model_args(
            mesh,
            get_tt_ccl(mesh),
            args,
            state_dict,
            None,
            0,
            mats,
            paged_attention_config=paged_config,
            dtype=ttnn.bfloat8_b,
        )
    else:
        module = Attention(
            mesh,
            TT_CCL(mesh),
            args,
            state_dict,
            None,
            0,
            ttnn.bfloat8_b,
            mats,
            args,
            paged_attention_config=paged_config,
        )
    return module, rope, args


def fused_wide_args(mesh):
    """ModelArgs of a one-layer dim-2048 Llama: on a T3K ring tttv1 fuses the WO all-gather into the matmul."""
    from tttv1 import catalogue

    config = catalogue.config_dict("Llama-3.1-8B-tiny") | {
        "hidden_size": 2048,
        "intermediate_size": 256,  # the MLP is not built here: keep its random weights small
        "vocab_size": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_hidden_layers": 1,
        "_name_or_path": "Llama-3.1-8B-wide",
    }
    return tttv1_model_args(mesh, None, max_batch_size=1, hf_config=config)


def _device(x, args, mesh, memory_config=None):
    """Host activations → the mesh: fractured over the columns on a Galaxy, replicated on 1-D meshes."""
    import torch

    if args.is_galaxy:
        mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=args.cluster_shape)
    else:
        mapper = ttnn.ReplicateTensorToMesh(mesh)
    return ttnn.from_torch(
        torch.as_tensor(x),
        device=mesh,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=mapper,
        memory_config=memory_config,
    )


def _int32(table, mesh, mapper):
    import torch

    return ttnn.from_torch(torch.as_tensor(table), device=mesh, dtype=ttnn.int32, mesh_mapper=mapper)


def compare_with_tttv1(
    mesh,
    name_or_args,
    *,
    batch: int,
    paged: bool,
    qk_norm: bool,
    steps: int = 2,
    prefill_users: int | None = None,
) -> None:
    """Prefill the first ``prefill_users`` users (all by default), then decode ``steps`` tokens for every user
    through both; assert equal outputs and KV caches."""
    import torch

    from tttv1.tt.common import PagedAttentionConfig, get_prefill_rot_mat

    blocks = 256 // BLOCK
    paged_config = PagedAttentionConfig(block_size=BLOCK, max_num_blocks=blocks * batch) if paged else None
    kwargs = dict(batch=batch, paged_config=paged_config, qk_norm=qk_norm)
    legacy, rope, args = tttv1_attention(mesh, name_or_args, ours=False, **kwargs)
    ours, _, _ = tttv1_attention(mesh, args, ours=True, **kwargs)
    table = None
    if paged:
        perm = np.random.default_rng(1).permutation(blocks * batch)
        table = np.argsort(perm).reshape(batch, blocks).astype(np.int32)
    replicate = ttnn.ReplicateTensorToMesh(mesh)
    rng = np.random.default_rng(2)

    rot = get_prefill_rot_mat(args.head_dim, mesh, PROMPT, args.rope_theta, args.rope_scaling)
    for user in range(batch if prefill_users is None else min(prefill_users, batch)):
        x = rng.standard_normal((1, 1, PROMPT, args.dim)).astype(np.float32)
        kwargs = {"page_table": None, "user_id": user}
        if paged:
            kwargs = {"page_table": _int32(table[user : user + 1], mesh, replicate), "user_id": 0}
        expected = legacy(_device(x, args, mesh), None, rot, mode="prefill", **kwargs)
        got = ours(_device(x, args, mesh), None, rot, mode="prefill", **kwargs)
        assert got.memory_config() == expected.memory_config() and got.dtype == expected.dtype
        np.testing.assert_array_equal(to_host(got), to_host(expected), err_msg=f"prefill user {user}")

    split = args.is_galaxy and batch > 1  # a Galaxy deals the users out over its columns
    users = ttnn.ShardTensor2dMesh(
        mesh, dims=(None, 0) if split else (None, None), mesh_shape=args.cluster_shape
    )
    rows = ttnn.ShardTensor2dMesh(
        mesh, dims=(None, -2) if split else (None, None), mesh_shape=args.cluster_shape
    )
    memory = None if args.is_galaxy else args.model_config["SHARDED_ATTN_INPUT_MEMCFG"]
    positions = PROMPT - 1 - 7 * (np.arange(batch) % 8)
    # a Galaxy with fewer than 32 users computes the spare rows of its tiles from other rows: compare users only
    valid = batch if args.is_galaxy else 32
    for step in range(steps):
        x = rng.standard_normal((1, 1, 32, args.dim)).astype(np.float32)
        pos = _int32(positions, mesh, users)
        rot = rope.get_rot_mats(torch.as_tensor(positions))
        page_table = None if table is None else _int32(table, mesh, rows)
        expected = legacy(_device(x, args, mesh, memory), pos, rot, mode="decode", page_table=page_table)
        got = ours(_device(x, args, mesh, memory), pos, rot, mode="decode", page_table=page_table)
        assert got.memory_config() == expected.memory_config() and got.dtype == expected.dtype
        np.testing.assert_array_equal(
            to_host(got)[..., :valid, :], to_host(expected)[..., :valid, :], err_msg=f"decode step {step}"
        )
        positions = positions + 1
    # the caches of the devices that serve real users (on a Galaxy with one user: its first mesh column)
    columns = mesh.shape[1] if batch == 32 or not args.is_galaxy else 1
    for mine, theirs in zip(ours.kv_cache, legacy.layer_past):
        pairs = list(zip(ttnn.get_device_tensors(mine), ttnn.get_device_tensors(theirs)))
        for device, (a, b) in enumerate(pairs):
            if device % mesh.shape[1] < columns:
                np.testing.assert_array_equal(
                    ttnn.to_numpy(a), ttnn.to_numpy(b), err_msg=f"KV cache {device}"
                )
