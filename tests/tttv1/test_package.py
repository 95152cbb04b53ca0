"""The tttv1 package itself: `import ttnn` resolution, the model catalogue, ModelArgs' configuration patterns,
checkpoint loading, the tokenizer, and that PATTERNS.md only points at code that exists."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import ttnn

from tests.tttv1.conftest import MESHES, hf_reference
from tttv1 import catalogue
from tttv1.demo.simple_text_demo import random_weights
from tttv1.tokenizer import ByteTokenizer, load_tokenizer
from tttv1.tt.common import Mode, PagedAttentionConfig, get_padded_prefill_len
from tttv1.tt.generator import Generator
from tttv1.tt.model import Transformer
from tttv1.tt.model_config import (
    DecodersPrecision,
    MathFidelitySetting,
    ModelArgs,
    ModelOptimizations,
    OpGroup,
    PrecisionSetting,
    TensorGroup,
    parse_optimizations,
)
from tttv2.testing import pcc

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "TTTV2_BACKEND"}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=120
    )


# --- import ttnn ----------------------------------------------------------------------------------------------


def test_tttv1_modules_import_ttnn_through_the_hook():
    """Importing tttv1 changes nothing; its modules' plain `import ttnn` finds the emulator (no real ttnn here)."""
    result = _python(
        "import sys, tttv1\n"
        "assert 'ttnn' not in sys.modules and 'tttv2.ttnn' not in sys.modules\n"
        "import tttv1.tt.model, ttnn\n"
        "assert ttnn.IS_TTTV2_EMULATOR and sys.modules['ttnn'] is sys.modules['tttv2.ttnn']\n"
        "assert ttnn._ttnn.multi_device.MeshDevice is ttnn.MeshDevice\n"
        "print('ok')"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_backend_ttnn_leaves_import_ttnn_to_the_real_package():
    """TTTV2_BACKEND=ttnn: only Tenstorrent's ttnn will do; here (not installed) the model modules cannot import."""
    result = _python("import tttv1.tt.model_config", TTTV2_BACKEND="ttnn")
    assert result.returncode != 0
    assert "No module named 'ttnn'" in result.stderr and "TTTV2_BACKEND=ttnn" in result.stderr


# --- PATTERNS.md -----------------------------------------------------------------------------------------------

_REF = re.compile(r"`(tttv1/[\w/]+\.py)::([\w.]+)`")
_LITERAL = re.compile(r'`(tttv1/[\w/]+\.py):"((?:[^"\\]|\\.)+)"`')


def _qualnames(path: Path) -> set[str]:
    """Every class / function / method / nested function of a module, as dotted names."""
    names: set[str] = set()

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                names.add(name)
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text()), "")
    return names


def test_patterns_doc_points_at_existing_code():
    text = (ROOT / "tttv1" / "PATTERNS.md").read_text()
    refs = _REF.findall(text)
    literals = _LITERAL.findall(text)
    assert len(refs) > 60 and len(literals) > 20, (len(refs), len(literals))
    cache: dict[str, set[str]] = {}
    missing = []
    for path, qualname in refs:
        if path not in cache:
            cache[path] = _qualnames(ROOT / path)
        if qualname not in cache[path]:
            missing.append(f"{path}::{qualname}")
    for path, literal in literals:
        literal = literal.replace('\\"', '"').replace("\\n", "\n")
        if literal not in (ROOT / path).read_text():
            missing.append(f'{path}:"{literal}"')
    assert not missing, missing


# --- catalogue ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", catalogue.catalogue_names())
def test_catalogue_weights_match_the_hf_architecture(name):
    ref, state_dict = hf_reference(name)
    hf_shapes = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    ours = {k: tuple(v.shape) for k, v in state_dict.items()}
    if catalogue.config_dict(name).get("tie_word_embeddings"):
        hf_shapes.pop("lm_head.weight")
    assert ours == hf_shapes
    again = catalogue.random_state_dict(name, seed=0)
    other = catalogue.random_state_dict(name, seed=1)
    key = "model.layers.0.mlp.down_proj.weight"
    assert torch.equal(again[key], state_dict[key]) and not torch.equal(other[key], state_dict[key])


@pytest.mark.parametrize("name", catalogue.catalogue_names())
def test_catalogue_models_fit_every_mesh(mesh, name):
    """Heads, dims, padded hidden dim and padded vocab split into whole tiles on 1×1, 1×2, 1×8 and 8×4."""
    for shape in MESHES.values():
        args = ModelArgs(mesh(shape), max_batch_size=32, max_seq_len=256, model_name=name)
        split = 32 if args.is_galaxy else args.num_devices
        assert args.hidden_dim % (32 * split) == 0 and args.hidden_dim >= args.unpadded_hidden_dim
        assert args.padded_vocab_size % (32 * split) == 0 and args.padded_vocab_size >= args.vocab_size
        assert args.base_model_name in ModelArgs.LOCAL_HF_PARAMS[name].replace("-tiny", "")


def test_mesh_fit_errors_name_the_problem(mesh):
    config = catalogue.config_dict("Mistral-7B-tiny") | {
        "num_key_value_heads": 4,
        "_name_or_path": "narrow-kv",
    }
    with pytest.raises(ValueError, match="do not split over 8 devices"):
        ModelArgs(mesh((1, 8)), hf_config=config)
    with pytest.raises(ValueError, match="neither a catalogue model"):
        ModelArgs(mesh((1, 1)), model_name="no-such-model")


# --- ModelArgs -----------------------------------------------------------------------------------------------------


def test_model_args_without_device_has_no_device_keys():
    args = ModelArgs(None, model_name="Llama-3.2-1B-tiny")
    assert args.device_name == "CPU" and args.num_devices == 0
    assert (
        "DECODE_RESIDUAL_MEMCFG" in args.model_config
    )  # generated by the comprehension, before the device block
    assert "ATTN_W_LAYOUT_TILE" in args.model_config
    assert "SDPA_PROGCFG" not in args.model_config and "FF1_3_TG_PROGCFG" not in args.model_config


def test_galaxy_only_keys_and_branch_definitions(mesh):
    tg = ModelArgs(mesh((8, 4)), max_batch_size=32, max_seq_len=256, model_name="Llama-3.1-8B-tiny")
    t3k = ModelArgs(mesh((1, 8)), max_batch_size=32, max_seq_len=256, model_name="Llama-3.1-8B-tiny")
    assert tg.is_galaxy and tg.device_name == "TG" and tg.cluster_shape == [8, 4]
    assert "FF1_3_TG_PROGCFG" in tg.model_config and "FF1_3_TG_PROGCFG" not in t3k.model_config
    assert tg.model_config["DECODE_RESIDUAL_MEMCFG"] == ttnn.L1_MEMORY_CONFIG
    assert t3k.model_config["DECODE_RESIDUAL_MEMCFG"].is_sharded()
    assert (
        tg.model_config["XQKV_DECODE_PROGCFG"] is None and t3k.model_config["XQKV_DECODE_PROGCFG"] is not None
    )
    # the same key defined in the galaxy and the non-galaxy branch, as a lambda of the mesh size
    assert tg.model_config["QKV_OUT_GATHERED_MEMCFG"](4).shard_spec.shape[0] == 128
    assert t3k.model_config["QKV_OUT_GATHERED_MEMCFG"](1).shard_spec.shape[0] == 32
    # the topology follows the system the emulator stands for (the default device, else the last mesh opened)
    ttnn.SetDefaultDevice(t3k.mesh_device)
    try:
        assert t3k.ccl_topology() == ttnn.Topology.Ring and tg.ccl_topology() == ttnn.Topology.Linear
    finally:
        ttnn.SetDefaultDevice(None)
    assert tg.is_distributed_norm("decode") and not t3k.is_distributed_norm("prefill")
    assert tg.hidden_dim == 2048 and tg.unpadded_hidden_dim == 1792  # padded for the 32-way split


def test_prefill_lambdas_and_g3_methods(mesh):
    args = ModelArgs(mesh((1, 1)), max_batch_size=1, max_seq_len=4096, model_name="Llama-3.1-8B-tiny")
    assert args.prefill_len_cutoff == 512  # model × device override (Llama-3.1-8B on N150)
    for seq_len in (128, 256, 512, 1024, 2048, 4096):
        pc = args.model_config["PREFILL_MLP_W1_W3_PRG_CONFIG"](seq_len)
        assert (args.dim // 32) % pc.in0_block_w == 0
        assert args.model_config["XQKV_PREFILL_PROGCFG"](seq_len).fuse_batch == (
            seq_len <= args.MAX_QKV_MM_SEQ_LEN
        )
        assert args.model_config["WO_PREFILL_PROGCFG"](seq_len).fuse_batch == (seq_len <= 1024)
        assert args.get_mlp_ff1_3_prg_config(Mode.PREFILL, seq_len, None) == pc
    # chunk_start_idx's lowest set bit limits the K chunk of chunked prefill
    assert args.model_config["SDPA_PROGCFG"](128, 96).k_chunk_size == 32
    assert args.model_config["SDPA_PROGCFG"](4096).q_chunk_size == 256
    assert (
        args.get_mlp_ff1_3_prg_config(Mode.DECODE, 32, None)
        is args.model_config["DECODE_MLP_W1_W3_PRG_CONFIG"]
    )
    assert args.get_mlp_binary_mult_mem_config(Mode.DECODE) == args.model_config["SHARDED_MLP2_INPUT_MEMCFG"]
    assert args.model_config["MLP_RS_CONFIG"]["chunks_per_sync"] == 10
    assert args.model_config["MLP_ACT_MEMCFG"] is args.model_config["FULL_GRID_MEMCFG"]  # a key reading a key
    assert args.trace_prefill_supported_seq_lens == [128]
    assert get_padded_prefill_len(300) == 512 and get_padded_prefill_len(3000) == 4096


def test_environment_overrides(mesh, monkeypatch):
    monkeypatch.setenv("MAX_PREFILL_CHUNK_SIZE", "2")
    monkeypatch.setenv("PAD_MLP_CORES", "4")
    monkeypatch.setenv("PREFILL_LEN_CUTOFF", "256")
    monkeypatch.setenv("HF_MODEL", "Qwen2.5-7B-tiny")
    args = ModelArgs(mesh((1, 2)), max_batch_size=1, max_seq_len=8192)
    assert args.model_name == "Qwen2.5-7B-tiny"
    assert args.max_prefill_chunk_size == 2048 and args.prefill_len_cutoff == 256
    assert args.hidden_dim % (32 * 2 * 4) == 0
    monkeypatch.setenv("ACTUAL_DEVICE", "TG")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("TT_CACHE_PATH", "/nonexistent")
    args = ModelArgs(mesh((1, 8)), max_batch_size=1, max_seq_len=256, model_name="Llama-3.2-1B-tiny")
    assert args.model_config["USE_FUSED_ALL_GATHER_MATMUL"] is False and args.CACHE_PATH is None


def test_precision_presets_per_layer():
    perf = DecodersPrecision.performance(
        2, "Llama-3.1-8B-tiny"
    )  # model_params JSON: layer 0 keeps BFP8 FF1/FF3
    assert perf.get_tensor_dtype(0, TensorGroup.FF1_FF3) == ttnn.bfloat8_b
    assert perf.get_tensor_dtype(1, TensorGroup.FF1_FF3) == ttnn.bfloat4_b
    assert perf._full_name.startswith("mixed_")
    qwen = DecodersPrecision.accuracy(2, "Qwen2.5-7B-tiny")
    assert qwen.get_tensor_dtype(1, TensorGroup.WQKV) == ttnn.bfloat16
    parsed = parse_optimizations("precision_cfg = {ff1_3: bfp4, wqkv: bf16}, fidelity_cfg = {li_ff1_3: lofi}")
    assert parsed.tensor_dtype_settings[TensorGroup.WQKV] is PrecisionSetting.BF16
    assert parsed.op_fidelity_settings[OpGroup.LI_FF1_FF3] is MathFidelitySetting.LOFI
    assert "ff1_3-bfp4" in repr(ModelOptimizations.performance("Llama-3.2-1B"))
    custom = DecodersPrecision.from_string(2, "x", "precision_cfg = {wo: bfp4}")
    assert custom.get_tensor_dtype(0, TensorGroup.WO) == ttnn.bfloat4_b
    with pytest.raises(ValueError, match="unknown section"):
        parse_optimizations("nonsense = {a: b}")


# --- checkpoints and tokenizer -------------------------------------------------------------------------------------


def test_local_checkpoint_directory(tmp_path, mesh):
    """A Hugging Face checkpoint directory (config.json + safetensors) loads without any download."""
    ref, _ = hf_reference("Llama-3.2-1B-tiny")
    ckpt = tmp_path / "Llama-3.2-1B-local"
    ref.save_pretrained(ckpt, safe_serialization=True)
    assert json.loads((ckpt / "config.json").read_text())["hidden_size"] == 512
    m = mesh((1, 2))
    args = ModelArgs(m, max_batch_size=1, max_seq_len=256, model_name=str(ckpt))
    assert str(ckpt) == args.CKPT_DIR and not args.dummy_weights and args.tie_word_embeddings
    assert not random_weights(args)  # the demo says nothing about noise for real weights
    assert random_weights(ModelArgs(m, max_batch_size=1, max_seq_len=256))
    model = Transformer(
        args, ttnn.bfloat8_b, m, args.load_state_dict(), None, paged_attention_config=PagedAttentionConfig()
    )
    tokens = torch.randint(3, args.vocab_size, (1, 30), generator=torch.Generator().manual_seed(3))
    page_table = torch.arange(1024, dtype=torch.int32).reshape(1, 1024)
    logits = Generator(model, args, m).prefill_forward_text(tokens, page_table=page_table)
    with torch.no_grad():
        expected = ref(tokens).logits[:, -1:]
    assert pcc(expected, logits) >= 0.99
    assert isinstance(load_tokenizer(args), ByteTokenizer)


def test_byte_tokenizer_roundtrip():
    tok = ByteTokenizer(1024)
    ids = tok.encode("héllo, TT!", bos=True, eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id and max(ids) < 1024
    assert tok.decode(ids) == "héllo, TT!"
    assert tok.encode_chat("hi")[0] == tok.bos_id
    with pytest.raises(ValueError, match="at least 4"):
        ByteTokenizer(3)
