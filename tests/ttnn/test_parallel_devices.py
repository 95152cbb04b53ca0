"""The devices of a mesh computed on the emulator's threads (issue 24 item 2): ``map_shards(parallel=True)``
through ``_threads.run_shared``. Each device's result is computed whole on one thread, so a program gives the
same bits with 1 and with N threads; every check compares bits, never tolerances."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import _threads, numerics
from tttv2.ttnn.ops import matmul as mm


def test_run_shared_keeps_item_order_and_uses_the_workers(monkeypatch):
    monkeypatch.setattr(_threads, "WORKERS", 2)
    names = {}
    release = threading.Barrier(2, timeout=10)

    def item(i):
        if i < 2:
            release.wait()  # items 0 and 1 can only both finish if two threads run them at the same time
        names[i] = threading.current_thread().name
        return i * i

    assert _threads.run_shared(item, 6) == [0, 1, 4, 9, 16, 25]
    assert len(set(names.values())) == 2 and not _threads.in_shared_work()


def test_run_shared_raises_the_lowest_failing_item(monkeypatch):
    monkeypatch.setattr(_threads, "WORKERS", 3)

    def item(i):
        if i in (2, 5):
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 2"):
        _threads.run_shared(item, 8)
    assert not _threads.in_shared_work()


def test_work_started_inside_shared_work_stays_on_its_thread(monkeypatch):
    """A product cut into pieces inside a device's work runs its pieces serially there (no pool thread waits
    for the pool), with the same bits as at top level."""
    monkeypatch.setattr(_threads, "WORKERS", 2)
    monkeypatch.setattr(numerics, "_MATMUL_MIN_WORK", 1)
    monkeypatch.setattr(numerics, "_MATMUL_ROW_BLOCK", 16)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 96, 48)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    inside = []

    def item(i):
        inside.append(_threads.in_shared_work())
        return numerics.matmul_f32(a[i], b)

    shared = _threads.run_shared(item, 4)
    assert all(inside) and len(inside) == 4
    for i in range(4):
        assert np.array_equal(shared[i].view(np.uint32), numerics.matmul_f32(a[i], b).view(np.uint32))


@pytest.mark.parametrize("fidelity", list(ttnn.MathFidelity), ids=lambda f: f.name)
def test_linear_on_a_mesh_same_bits_with_1_and_n_threads(open_mesh, monkeypatch, fidelity):
    """A weight split over 8 devices (column parallel, as tttv1's MLP) and a bias: 1, 2 and 8 threads."""
    mesh = open_mesh((1, 8))
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 1, 32, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 1024)) / 16).astype(np.float32)
    bias = rng.standard_normal((1, 1, 1, 1024)).astype(np.float32)
    tx = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    split = ttnn.ShardTensorToMesh(mesh, dim=-1)
    tw = ttnn.from_numpy(w, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=split)
    tb = ttnn.from_numpy(bias, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=split)
    config = ttnn.WormholeComputeKernelConfig(math_fidelity=fidelity, fp32_dest_acc_en=False)
    monkeypatch.setattr(mm, "_PARALLEL_MIN_WORK", 1)
    runs = []
    for workers in (1, 2, 8):
        monkeypatch.setattr(_threads, "WORKERS", workers)
        out = ttnn.linear(tx, tw, bias=tb, compute_kernel_config=config, dtype=ttnn.float32)
        runs.append(ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=-1)).view(np.uint32))
    assert runs[0].shape == (1, 1, 32, 1024)
    assert all(np.array_equal(run, runs[0]) for run in runs[1:])


def test_matmul_errors_on_a_device_are_raised_as_in_a_serial_loop(open_mesh, monkeypatch):
    """A device whose product fails inside the threads: the error is the one the first failing device gives."""
    mesh = open_mesh((1, 4))
    monkeypatch.setattr(mm, "_PARALLEL_MIN_WORK", 1)
    monkeypatch.setattr(_threads, "WORKERS", 4)
    real = mm.matmul_accumulate
    calls = []

    def fails_on_second(a, b, k_block, fp32_acc):
        calls.append(1)
        if len(calls) == 2:
            raise FloatingPointError("device product failed")
        return real(a, b, k_block, fp32_acc)

    monkeypatch.setattr(mm, "matmul_accumulate", fails_on_second)
    x = ttnn.from_numpy(np.ones((1, 1, 32, 64), np.float32), layout=ttnn.TILE_LAYOUT, device=mesh)
    w = ttnn.from_numpy(np.ones((64, 64), np.float32), layout=ttnn.TILE_LAYOUT, device=mesh)
    with pytest.raises(FloatingPointError, match="device product failed"):
        ttnn.matmul(x, w)


def test_tttv1_decode_same_bits_with_1_and_n_threads(tmp_path, open_mesh, monkeypatch):
    """tttv1's demo (prefill, then decode) on a config it was not shaped for, over a 1x4 mesh: the logits of
    every step are the same bits with one thread and with four (every product shared out over the threads)."""
    from tttv1.demo import simple_text_demo as demo

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1408,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "num_hidden_layers": 1,
        "vocab_size": 2000,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
    }
    folder = tmp_path / "Llama-small"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(mm, "_PARALLEL_MIN_WORK", 1)
    real = demo.Generator.decode_forward_text

    def logits_with(workers):
        monkeypatch.setattr(_threads, "WORKERS", workers)
        logits = []

        def keep(self, *args, **kwargs):
            out = real(self, *args, **kwargs)
            logits.append(np.asarray(out, dtype=np.float32).copy())
            return out

        monkeypatch.setattr(demo.Generator, "decode_forward_text", keep)
        result = demo.run_demo(
            open_mesh((1, 4)), config=str(folder), max_new_tokens=3, max_seq_len=128, verbose=False
        )
        return np.stack(logits).view(np.uint32), result.tokens

    one, tokens_one = logits_with(1)
    four, tokens_four = logits_with(4)
    assert one.shape[0] == 2 and np.array_equal(one, four) and tokens_one == tokens_four
