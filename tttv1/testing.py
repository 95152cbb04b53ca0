"""pytest fixtures for tests of tttv1's modules, in the convention of the tests ``tttv2-refactor --tests-out``
writes (docs/refactor.md, "Generated tests"): one fixture per parameter name of tttv1's constructors and
forwards, so a generated test of any tttv1 module (or of a user's copy of one) runs with no recipe of its own.

Use it from the ``conftest.py`` of the tests' folder::

    from tttv1.testing import *  # noqa: F403  (the fixtures)

What the fixtures receive: ``mesh_device`` its mesh shape by indirect parametrisation; ``model_name`` (a catalogue
model; None: ``DEFAULT_MODELS`` by mesh), ``mode``, ``seq_len`` and ``recorded`` are the generated tests' own
parameters; ``tttv1_class`` (the class under test, a fixture of each generated test file) says which module the
inputs are for: TTTv1 feeds its modules differently (the MLP a replicated or fractured row block in the memory
config the model gives it, the norms the gathered or fractured residual stream, attention a KV-cache position and
rotation matrices, the embedding token ids). Everything built per mesh and model is cached, so the same objects
come back and the pair of modules built from them is reused from one case to the next.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.testing.cases import DECODE_ROWS, pcc_threshold

__all__ = [
    "DEFAULT_MODELS",
    "TG",
    "args",
    "ccl_topology",
    "configuration",
    "current_pos",
    "device",
    "dim",
    "dtype",
    "eps",
    "hf_reference",
    "in_sharded",
    "is_distributed",
    "layer_num",
    "max_columns_per_device",
    "mesh_device",
    "model_config",
    "model_name",
    "norm",
    "out_sharded",
    "rot_mats",
    "sharded_output_config",
    "sharded_program_config",
    "state_dict",
    "state_dict_prefix",
    "transformation_mats",
    "tt_ccl",
    "weight_cache_path",
    "weight_key",
    "x",
]

#: The catalogue model of a case that names none: by mesh, so the default matrix covers two models.
DEFAULT_MODELS = {(1, 2): "Qwen2.5-7B-tiny"}
DEFAULT_MODEL = "Llama-3.1-8B-tiny"
#: Real tokens of an attention prefill; decode writes the next position.
PROMPT = 40
PREFILL_ROWS = 128


# --- cached per mesh and model ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _model(mesh, model: str):
    from tttv2.testing.legacy import catalogue_state_dicts, tttv1_model_args

    model_args = tttv1_model_args(mesh, model, max_batch_size=1, max_seq_len=256)
    _, converted = catalogue_state_dicts(model_args)
    return model_args, converted, model_args.get_model_config()


@functools.lru_cache(maxsize=8)
def _ccl(mesh):
    from tttv1.tt.ccl import TT_CCL

    return TT_CCL(mesh)


@functools.lru_cache(maxsize=8)
def _rope(mesh, model_args):
    from tttv1.tt.rope import RotarySetup

    return RotarySetup(
        mesh,
        model_args.max_batch_size,
        model_args.head_dim,
        model_args.max_seq_len,
        model_args.rope_theta,
        model_args.rope_scaling,
    )


@functools.lru_cache(maxsize=8)
def _norm(mesh, model: str):
    from tttv1.tt.rmsnorm import RMSNorm

    return RMSNorm(**_norm_kwargs(mesh, model))


@functools.lru_cache(maxsize=8)
def _norm_kwargs(mesh, model: str) -> dict:
    """TTTv1's decoder builds its norms this way (decoder.py); the same objects every time (the pair of modules
    built from them is reused)."""
    model_args, converted, _ = _model(mesh, model)
    return dict(
        device=mesh,
        dim=model_args.dim,
        eps=model_args.norm_eps,
        state_dict=converted,
        state_dict_prefix=model_args.get_state_dict_prefix("", 0),
        weight_key="attention_norm",
        is_distributed=model_args.is_distributed_norm,
        sharded_program_config=model_args.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
        sharded_output_config=model_args.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
        ccl_topology=model_args.ccl_topology(),
        tt_ccl=_ccl(mesh),
    )


def _name(tttv1_class) -> str:
    return tttv1_class.__name__


# --- the constructors' parameters -------------------------------------------------------------------------------
@pytest.fixture
def mesh_device(request, ttnn_mesh_pool):
    """The emulated mesh of the shape the test passes (indirect parametrisation; default 1x1), opened once per
    test module."""
    return ttnn_mesh_pool(getattr(request, "param", (1, 1)))


@pytest.fixture
def model_name():
    """None unless the test passes a model (the generated tests do: recorded, or None)."""
    return None


@pytest.fixture
def args(mesh_device, model_name):
    """tttv1's ModelArgs of the case's catalogue model on the mesh."""
    shape = tuple(int(d) for d in mesh_device.shape)
    return _model(mesh_device, model_name or DEFAULT_MODELS.get(shape, DEFAULT_MODEL))[0]


@pytest.fixture
def configuration(args):
    return args


@pytest.fixture
def state_dict(mesh_device, args):
    """The catalogue model's seeded random weights, in tttv1's (Meta) names."""
    return _model(mesh_device, args.model_name)[1]


@pytest.fixture
def model_config(mesh_device, args):
    return _model(mesh_device, args.model_name)[2]


@pytest.fixture
def tt_ccl(mesh_device):
    return _ccl(mesh_device)


@pytest.fixture
def weight_cache_path():
    return None


@pytest.fixture
def layer_num():
    return 0


@pytest.fixture
def dtype(tttv1_class):
    """Weights in bfloat8_b, as tttv1's model builds them; the embedding table stays bfloat16."""
    return ttnn.bfloat16 if _name(tttv1_class).startswith("Embedding") else ttnn.bfloat8_b


@pytest.fixture
def state_dict_prefix(tttv1_class, mesh_device, args):
    """The LM head reads top-level keys (""); a norm the first layer's; the other modules their own default."""
    if _name(tttv1_class) == "RMSNorm":
        return _norm_kwargs(mesh_device, args.model_name)["state_dict_prefix"]
    return "" if _name(tttv1_class) == "LMHead" else None


@pytest.fixture
def max_columns_per_device(args):
    return args.max_columns_per_device_lm_head


@pytest.fixture
def transformation_mats(mesh_device, args):
    return _rope(mesh_device, args).get_both_trans_mats()


@pytest.fixture
def TG(args):
    return args.is_galaxy


@pytest.fixture
def norm(mesh_device, args):
    """The RMSNorm a DistributedNorm wraps, built as tttv1's decoder builds it."""
    return _norm(mesh_device, args.model_name)


def _norm_fixture(key: str):
    def fixture(mesh_device, args):
        return _norm_kwargs(mesh_device, args.model_name)[key]

    fixture.__name__ = key
    fixture.__doc__ = f"RMSNorm's `{key}`, as tttv1's decoder builds its norms."
    return pytest.fixture(fixture)


device = _norm_fixture("device")
dim = _norm_fixture("dim")
eps = _norm_fixture("eps")
weight_key = _norm_fixture("weight_key")
is_distributed = _norm_fixture("is_distributed")
sharded_program_config = _norm_fixture("sharded_program_config")
sharded_output_config = _norm_fixture("sharded_output_config")
ccl_topology = _norm_fixture("ccl_topology")


# --- the forwards' parameters -----------------------------------------------------------------------------------
def _device(x: np.ndarray, mesh, *, memory_config=None, mapper=None):
    return ttnn.from_numpy(
        np.ascontiguousarray(x, dtype=np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config or ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=mapper or ttnn.ReplicateTensorToMesh(mesh),
    )


def _activations(model_args, rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 1, rows, model_args.dim)).astype(np.float32)


def _fractured(x, model_args, mesh, memory_config=None):
    """The residual stream: split over the mesh columns along dim (replicated over galaxy rows)."""
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=model_args.cluster_shape)
    return _device(x, mesh, memory_config=memory_config, mapper=mapper)


def _padded(x, rows: int) -> np.ndarray:
    out = np.zeros((1, 1, rows, x.shape[-1]), np.float32)
    out[:, :, : x.shape[2]] = x
    return out


def _tokens(model_args, rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, model_args.vocab_size, size=(1, 1, 1, rows)).astype(np.uint32)


def _input(name: str, x: np.ndarray, model_args, mesh, mode: str):
    """``x`` (numpy) as TTTv1's model hands it to the module ``name`` in ``mode``."""
    decode = mode == "decode"
    config = model_args.model_config
    if name == "MLP":
        if model_args.is_galaxy:
            return _fractured(x, model_args, mesh, config["MLP_ACT_MEMCFG"] if decode else None)
        return _device(x, mesh, memory_config=config["SHARDED_MLP_INPUT_MEMCFG"] if decode else None)
    if name == "RMSNorm":
        if model_args.is_distributed_norm(mode):  # galaxy / wide prefill: the norm sees this device's slice
            return _fractured(x, model_args, mesh)
        return _device(x, mesh, memory_config=config["SHARDED_ATTN_INPUT_MEMCFG"] if decode else None)
    if name == "LMHead":
        head_input = config["LM_HEAD_INPUT_MEMCFG"]
        if model_args.is_galaxy:
            return _fractured(
                x, model_args, mesh, head_input if (not decode and head_input.is_sharded()) else None
            )
        return _device(x, mesh, memory_config=head_input)
    if name == "Attention":
        if model_args.is_galaxy:
            return _fractured(x, model_args, mesh)
        return _device(x, mesh, memory_config=config["SHARDED_ATTN_INPUT_MEMCFG"] if decode else None)
    # DistributedNorm, TransformerBlock and anything else: the fractured residual stream
    return _fractured(x, model_args, mesh, config["DECODE_RESIDUAL_MEMCFG"] if decode else None)


def _rows(name: str, mode: str, seq_len: int) -> int:
    if name == "LMHead":
        return DECODE_ROWS  # TTTv1's model feeds the head one tile (model.py)
    return seq_len


@pytest.fixture
def x(tttv1_class, mesh_device, args, mode, seq_len):
    """The module's input for the case: token ids for an embedding; for attention and a decoder block a prefill
    of ``PROMPT`` real rows padded to ``seq_len``, or one decode row padded to a tile; else ``seq_len`` rows."""
    name = _name(tttv1_class)
    if name.startswith("Embedding"):
        tokens = _tokens(args, seq_len, seq_len + 3)
        return ttnn.from_numpy(
            tokens, dtype=ttnn.uint32, device=mesh_device, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device)
        )
    rows = _rows(name, mode, seq_len)
    values = _activations(args, rows, seq_len + 7)
    if name in ("Attention", "TransformerBlock"):
        values = _padded(values[:, :, : PROMPT if mode == "prefill" else 1], rows)
    return _input(name, values, args, mesh_device, mode)


@pytest.fixture
def in_sharded(tttv1_class, args, mode):
    """RMSNorm's decode input is sharded on 1-D meshes (DistributedNorm's way), not where the norm is distributed."""
    return mode == "decode" and not args.is_distributed_norm(mode)


@pytest.fixture
def out_sharded(in_sharded):
    return in_sharded


@pytest.fixture
def current_pos(mesh_device, mode):
    """Decode writes position ``PROMPT`` of the KV cache (one user); prefill takes None."""
    if mode != "decode":
        return None
    import torch

    return ttnn.from_torch(
        torch.tensor([PROMPT]),
        device=mesh_device,
        dtype=ttnn.int32,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
    )


@pytest.fixture
def rot_mats(mesh_device, args, mode, seq_len):
    """The rotation matrices of the prefill rows, or of decode position ``PROMPT``."""
    if mode == "decode":
        import torch

        return _rope(mesh_device, args).get_rot_mats(torch.tensor([PROMPT]))
    from tttv1.tt.common import get_prefill_rot_mat

    return get_prefill_rot_mat(args.head_dim, mesh_device, seq_len, args.rope_theta, args.rope_scaling)


# --- Hugging Face references ------------------------------------------------------------------------------------
def _rows_of(out, model_args, rows: int, fractured: bool) -> np.ndarray:
    """An output as [rows, dim]: the residual stream (split over the mesh columns, replicated over galaxy rows)
    or a replicated tensor (device 0)."""
    parts = [np.asarray(ttnn.to_numpy(p), np.float32) for p in ttnn.get_device_tensors(out)]
    if not fractured:
        parts = parts[:1]
    elif model_args.is_galaxy:
        parts = parts[: model_args.cluster_shape[1]]
    full = np.concatenate(parts, axis=-1)
    return full.reshape(-1, full.shape[-1])[:rows]


@pytest.fixture
def hf_reference(mesh_device, args):
    """``check(module, kind, mode)``: the module's output against the Hugging Face module of its kind with the
    catalogue weights (PCC, upstream's thresholds). Kinds: mlp, rmsnorm, distributed_norm, embedding, lm_head,
    attention."""

    def check(module, kind: str, mode: str) -> None:
        {
            "mlp": _hf_mlp,
            "rmsnorm": _hf_rmsnorm,
            "distributed_norm": _hf_rmsnorm,
            "embedding": _hf_embedding,
            "lm_head": _hf_lm_head,
            "attention": _hf_attention,
        }[kind](module, kind, mode, mesh_device, args)

    return check


def _hf_mlp(module, kind, mode, mesh, model_args):
    from tttv2.testing.legacy import catalogue_hf_module
    from tttv2.testing.references import hf_mlp, run_reference

    rows = DECODE_ROWS if mode == "decode" else PREFILL_ROWS
    values = _activations(model_args, rows, 5)
    out = module(_input("MLP", values, model_args, mesh, mode), mode)
    reference = catalogue_hf_module(model_args.model_name, hf_mlp, "model.layers.0.mlp.")
    expected = run_reference(reference, values).reshape(rows, -1)
    assert_pcc(expected, _rows_of(out, model_args, rows, True), pcc_threshold("mlp"))


def _hf_rmsnorm(module, kind, mode, mesh, model_args):
    from tttv2.testing.legacy import catalogue_hf_module
    from tttv2.testing.references import hf_rmsnorm, run_reference

    rows = DECODE_ROWS if mode == "decode" else PREFILL_ROWS
    values = _activations(model_args, rows, 9)
    if kind == "rmsnorm":
        sharded = mode == "decode" and not model_args.is_distributed_norm(mode)
        memory = model_args.model_config["SHARDED_ATTN_INPUT_MEMCFG"] if sharded else None
        out = module(
            _device(values, mesh, memory_config=memory), mode, in_sharded=sharded, out_sharded=sharded
        )
        fractured = False
    else:
        out = module(_input("DistributedNorm", values, model_args, mesh, mode), mode)
        fractured = model_args.is_galaxy
    reference = catalogue_hf_module(model_args.model_name, hf_rmsnorm, "model.layers.0.input_layernorm.")
    expected = run_reference(reference, values).reshape(rows, -1)
    assert_pcc(expected, _rows_of(out, model_args, rows, fractured), pcc_threshold("rmsnorm"))


def _hf_embedding(module, kind, mode, mesh, model_args):
    from tttv2.testing.legacy import catalogue_state_dicts

    tokens = _tokens(model_args, PREFILL_ROWS, 13)
    ids = ttnn.from_numpy(
        tokens, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )
    out = ttnn.unsqueeze_to_4D(module(ids))
    hf, _ = catalogue_state_dicts(model_args)
    table = np.asarray(hf["model.embed_tokens.weight"].float().numpy(), np.float32)
    expected = table[tokens.reshape(-1)]
    assert_pcc(expected, _rows_of(out, model_args, PREFILL_ROWS, True), pcc_threshold("embedding"))


def _hf_lm_head(module, kind, mode, mesh, model_args):
    from tttv2.testing.legacy import catalogue_state_dicts

    values = _activations(model_args, DECODE_ROWS, 17)
    out = module(_input("LMHead", values, model_args, mesh, mode), mode=mode)
    hf, _ = catalogue_state_dicts(model_args)
    weight = hf.get("lm_head.weight", hf["model.embed_tokens.weight"])
    expected = values.reshape(DECODE_ROWS, -1) @ np.asarray(weight.float().numpy(), np.float32).T
    parts = [np.asarray(ttnn.to_numpy(p), np.float32) for p in ttnn.get_device_tensors(out)]
    if model_args.is_galaxy:
        parts = parts[:: model_args.cluster_shape[1]]  # mesh column 0: the vocab is split over the rows
    got = np.concatenate(parts, axis=-1).reshape(-1, parts[0].shape[-1] * len(parts))
    assert_pcc(expected, got[:DECODE_ROWS, : model_args.vocab_size], pcc_threshold("lm_head"))


def _hf_attention(module, kind, mode, mesh, model_args):
    """HF's attention of the whole sequence, causal: the prefill rows, or (decode, after the prefill) the row of
    the new token."""
    import torch

    from tttv1 import catalogue
    from tttv1.tt.common import get_prefill_rot_mat
    from tttv2.testing.legacy import _hf_state_dict
    from tttv2.testing.references import _modeling, hf_rotary

    values = _activations(model_args, PROMPT + 1, 23)
    config = catalogue.hf_config(model_args.model_name)
    config._attn_implementation = "sdpa"
    modeling, prefix = _modeling(config)
    reference = getattr(modeling, f"{prefix}Attention")(config, layer_idx=0)
    weights = {
        k[len("model.layers.0.self_attn.") :]: v
        for k, v in _hf_state_dict(model_args.model_name, 0).items()
        if k.startswith("model.layers.0.self_attn.")
    }
    reference.load_state_dict(weights, strict=True)
    reference = reference.float().eval()
    hidden = torch.as_tensor(values.reshape(1, PROMPT + 1, model_args.dim))
    with torch.no_grad():
        cos_sin = hf_rotary(config)(hidden, torch.arange(PROMPT + 1).reshape(1, -1))
        expected = reference(hidden, position_embeddings=cos_sin, attention_mask=None)[0][0].float().numpy()
    rot = get_prefill_rot_mat(
        model_args.head_dim, mesh, PREFILL_ROWS, model_args.rope_theta, model_args.rope_scaling
    )
    prefill = _input("Attention", _padded(values[:, :, :PROMPT], PREFILL_ROWS), model_args, mesh, "prefill")
    out = module(prefill, None, rot, 0, "prefill")
    if mode == "prefill":
        got, want = _rows_of(out, model_args, PROMPT, True), expected[:PROMPT]
    else:
        step = _input("Attention", _padded(values[:, :, PROMPT:], DECODE_ROWS), model_args, mesh, "decode")
        position = ttnn.from_torch(
            torch.tensor([PROMPT]),
            device=mesh,
            dtype=ttnn.int32,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
        )
        rot = _rope(mesh, model_args).get_rot_mats(torch.tensor([PROMPT]))
        got = _rows_of(module(step, position, rot, mode="decode"), model_args, 1, True)
        want = expected[PROMPT:]
    assert_pcc(want, got, pcc_threshold("attention"))
