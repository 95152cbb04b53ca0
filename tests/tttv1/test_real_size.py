"""Real sizes without checkpoints (issue 24, item 3): the demo and ``ModelArgs`` take a Hugging Face config.json
alone, make seeded random weights one tensor at a time (``RandomWeights`` → ``StreamedMetaWeights``), check the
weights fit the devices before making any, and name the dimension that does not split over the mesh.

The config files are written here, in the form a Hugging Face checkpoint ships them (extra keys such as
``torch_dtype`` and ``transformers_version``, token ids, llama3 rope scaling), never downloaded."""

from __future__ import annotations

import json
import weakref

import numpy as np
import pytest
import torch
import ttnn

from tttv1.demo.simple_text_demo import DemoArgumentError, main, run_demo
from tttv1.tt.load_checkpoints import StreamedMetaWeights, convert_hf_to_meta
from tttv1.tt.model import Transformer
from tttv1.tt.model_config import ModelArgs
from tttv2.interfaces import RandomWeights
from tttv2.ttnn.device import _Allocator

# Llama-3.2-1B's config.json with its sizes cut down (8 heads of 32, a 1000-id vocab that is not a tile multiple)
SMALL_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "head_dim": 32,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 768,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 8,
    "num_hidden_layers": 2,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0",
    "use_cache": True,
    "vocab_size": 1000,
}


def write_config(tmp_path, name="Llama-3.2-1B-small", **changes):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**SMALL_LLAMA, **changes}, indent=2))
    return folder / "config.json"


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(SMALL_LLAMA, id="llama-tied"),
        pytest.param(
            {**SMALL_LLAMA, "model_type": "qwen2", "tie_word_embeddings": False, "num_key_value_heads": 4},
            id="qwen2-bias-gqa",
        ),
        pytest.param({**SMALL_LLAMA, "model_type": "phi3", "tie_word_embeddings": False}, id="phi3-fused"),
    ],
)
def test_streamed_weights_are_the_eager_conversion(config):
    """One tensor at a time gives the same Meta names and the same bits as converting the whole state dict."""
    source = RandomWeights(config, seed=3)
    streamed = StreamedMetaWeights(
        source,
        32,
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["tie_word_embeddings"],
    )
    eager = convert_hf_to_meta(
        {k: torch.from_numpy(v) for k, v in source.items()},
        32,
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["tie_word_embeddings"],
    )
    assert sorted(streamed) == sorted(eager) and len(streamed) == len(eager)
    for key in eager:
        assert torch.equal(streamed[key], eager[key]), key


def test_random_weights_are_seeded_per_name():
    a, b = RandomWeights(SMALL_LLAMA, seed=0), RandomWeights(SMALL_LLAMA, seed=0)
    names = list(a)
    # the same name gives the same bits whatever was asked for before it
    first = a[names[-1]]
    for name in names:
        b[name]
    assert np.array_equal(first, b[names[-1]])
    assert not np.array_equal(
        a["model.layers.0.mlp.up_proj.weight"],
        RandomWeights(SMALL_LLAMA, seed=1)["model.layers.0.mlp.up_proj.weight"],
    )
    assert a["model.norm.weight"].mean() == pytest.approx(1.0, abs=0.05)
    assert a["model.embed_tokens.weight"].std() == pytest.approx(1.0, abs=0.05)
    assert a["model.layers.1.self_attn.q_proj.weight"].std() == pytest.approx(0.08, abs=0.01)
    assert "lm_head.weight" not in a and a.shape("model.embed_tokens.weight") == (1000, 256)
    with pytest.raises(KeyError):
        a["lm_head.weight"]


def test_demo_runs_a_config_alone_holding_one_weight_at_a_time(tmp_path, monkeypatch, capsys):
    """``--config`` builds the model from the file alone; each random tensor is gone before the next is made
    (weak references), so the host never holds the model in float32."""
    made: list[weakref.ref] = []
    most_alive = 0
    original = RandomWeights.__getitem__

    def tracked(self, name):
        nonlocal most_alive
        most_alive = max(most_alive, sum(ref() is not None for ref in made))
        array = original(self, name)
        made.append(weakref.ref(array))
        return array

    monkeypatch.setattr(RandomWeights, "__getitem__", tracked)
    path = write_config(tmp_path)
    argv = [
        "--config",
        str(path),
        "--mesh",
        "1x8",
        "--max-new-tokens",
        "3",
        "--prompt",
        "hello",
        "--max-seq-len",
        "256",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Built ModelArgs(Llama-3.2-1B-small, dim=256, layers=2" in out and "[user 0] output:" in out
    assert len(made) > 12 and most_alive == 0


def test_demo_result_reports_the_build(tmp_path, mesh, monkeypatch):
    """The build's time and resident-memory growth (read before and after the build) reach the result."""
    import tttv1.demo.simple_text_demo as demo

    assert demo._resident_bytes() > 0  # /proc/self/statm on this Linux machine
    readings = iter([1_000_000, 5_000_000])
    monkeypatch.setattr(demo, "_resident_bytes", lambda: next(readings))
    result = run_demo(
        mesh((1, 2)), config=str(write_config(tmp_path)), max_new_tokens=2, max_seq_len=256, verbose=False
    )
    assert result.build_rss_bytes == 4_000_000 and result.build_seconds > 0
    assert len(result.decode_seconds) == 1 and result.prompt_tokens > 0


def test_planned_bytes_are_what_the_devices_hold(mesh, monkeypatch):
    """The plan the memory check reserves is, byte for byte and in order, the weight matrices the built model
    allocates on a device; what the plan leaves out is the KV caches and the small bfloat16 tables."""
    device_mesh = mesh((1, 8))
    config = {**SMALL_LLAMA, "tie_word_embeddings": False, "_name_or_path": "plan"}
    args = ModelArgs(device_mesh, max_batch_size=1, max_seq_len=256, hf_config=config, dummy_weights=True)
    before = device_mesh.memory_report()
    args.check_device_memory(ttnn.bfloat8_b)
    assert device_mesh.memory_report() == before  # a check leaves nothing behind, not even a peak
    plan = args.planned_weight_bytes(ttnn.bfloat8_b)
    assert [name for name, _ in plan[:3]] == [
        "tok_embeddings.weight",
        "layers.0.attention.wqkv",
        "layers.0.attention.wo",
    ]

    device = device_mesh.get_devices()[3]
    allocations = []
    original = _Allocator.allocate

    def spy(self, nbytes, what, device_id):
        if device_id == device.id() and self.kind.name == "DRAM":
            allocations.append((what, nbytes))
        return original(self, nbytes, what, device_id)

    monkeypatch.setattr(_Allocator, "allocate", spy)
    model = Transformer(
        args=args,
        dtype=ttnn.bfloat8_b,
        mesh_device=device_mesh,
        state_dict=args.load_state_dict(),
        weight_cache_path=None,
    )
    pending = [nbytes for _, nbytes in plan]
    unplanned = []
    for what, nbytes in allocations:
        if pending and nbytes == pending[0]:
            pending.pop(0)
        else:
            unplanned.append((what, nbytes))
    assert pending == []
    kv_cache = "[1, 1, 256, 32] BFLOAT8_B TILE"  # 256 positions × head_dim 32 of the device's one KV head
    assert [w for w, _ in unplanned if "BFLOAT8_B" in w] == [
        f"ttnn.from_torch {kv_cache}"
    ] * 4  # K and V, 2 layers
    assert all("BFLOAT16" in w and n < plan[0][1] for w, n in unplanned if "BFLOAT8_B" not in w)
    del model


def test_config_too_large_for_the_devices_fails_before_any_weight_is_made(tmp_path, monkeypatch, capsys):
    def refuse(self, name):
        raise AssertionError(f"weight {name} made before the memory check")

    monkeypatch.setattr(RandomWeights, "__getitem__", refuse)
    # a 405B-class layer stack at dim 16384 on one chip: about 2 GB of weights per layer (bfloat4_b MLP)
    path = write_config(
        tmp_path,
        "huge",
        hidden_size=16384,
        intermediate_size=53248,
        num_attention_heads=128,
        head_dim=128,
        num_hidden_layers=126,
    )
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "--config",
                str(path),
                "--mesh",
                "N150",
                "--max-new-tokens",
                "2",
                "--prompt",
                "hi",
                "--max-seq-len",
                "128",
            ]
        )
    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert (
        "error: device 0: out of DRAM memory allocating layers.5.attention.wqkv (planned before building huge)"
        in err
    )
    assert (
        f"needs {16384 * (128 + 2 * 8) * 128 * 17 // 16:,} bytes" in err
    )  # bfloat8_b: 17 bytes a 16 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_key_value_heads": 4}, "8 heads / 4 KV heads do not split over 8 devices"),
        ({"hidden_size": 320, "head_dim": 40}, "dim 320 does not split into tiles over [1, 8]"),
    ],
)
def test_config_that_does_not_split_over_the_mesh_names_the_dimension(tmp_path, capsys, changes, message):
    path = write_config(tmp_path, **changes)
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "--config",
                str(path),
                "--mesh",
                "T3K",
                "--max-new-tokens",
                "2",
                "--prompt",
                "hi",
                "--max-seq-len",
                "128",
            ]
        )
    assert exited.value.code == 2
    assert f"argument --config: {path}: Llama-3.2-1B-small: {message}" in capsys.readouterr().err


def test_unreadable_config_is_an_argument_error(tmp_path, mesh):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(DemoArgumentError, match=r"cannot read .*config.json: Expecting property name"):
        run_demo(mesh((1, 1)), config=str(tmp_path), verbose=False)
    bad.write_text("[1, 2]")
    with pytest.raises(DemoArgumentError, match="is not a JSON object"):
        run_demo(mesh((1, 1)), config=str(bad), verbose=False)


def test_streamed_weights_over_a_state_dict_and_no_mesh():
    """A plain state dict streams too (shapes read from its tensors); without a mesh there is nothing to check."""
    state = {k: torch.from_numpy(v) for k, v in RandomWeights(SMALL_LLAMA, seed=1).items()}
    streamed = StreamedMetaWeights(state, 32, 8, 8, True)
    assert torch.equal(streamed["output.weight"], state["model.embed_tokens.weight"])
    args = ModelArgs(None, max_seq_len=256, hf_config=SMALL_LLAMA, dummy_weights=True)
    args.check_device_memory(ttnn.bfloat8_b)  # no devices: returns
    assert [n for n, _ in args.planned_weight_bytes(ttnn.bfloat8_b)][-1] == "output.weight"
