"""Shared pieces of the ttnn.nn.parallel tests: tiny model configs, fixed batches, and one training loop that runs a
model single-device or under DDP / TP / DP×TP / PP, recording losses, first-step gradients and final weights.

Equality to single-device training is checked in float32 with SGD (lr 0.02, momentum 0.9): every update is linear
in the gradient, so the differences come from summation order (~1e-7 relative per step) — except for the token
table, whose gradient is bfloat16 (a float32 ``Embedding`` looks rows up through a bfloat16 copy): it differs by
bfloat16 roundings (~4e-3 relative), which also move the weights slightly apart over the steps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest

from tttv2 import ttnn

P = ttnn.nn.parallel
STEPS = 10
VOCAB = 64
SEQ = 32

# NanoGPT / Llama shapes: head_dim is a whole tile (32; 64 for rotary embedding)
GPT_SMALL = {"vocab_size": VOCAB, "block_size": SEQ, "n_layer": 2, "n_head": 2, "n_embd": 64, "dropout": 0.0}
GPT_MID = {"vocab_size": VOCAB, "block_size": SEQ, "n_layer": 1, "n_head": 4, "n_embd": 128, "dropout": 0.0}
GPT_WIDE = {"vocab_size": VOCAB, "block_size": SEQ, "n_layer": 1, "n_head": 8, "n_embd": 256, "dropout": 0.0}
LLAMA_SMALL = {
    "vocab_size": VOCAB,
    "max_seq_len": SEQ,
    "n_layer": 1,
    "n_head": 4,
    "n_kv_head": 2,
    "dim": 256,
    "hidden_dim": 128,
}
LLAMA_MID = {**LLAMA_SMALL, "n_kv_head": 4}
LLAMA_WIDE = {
    "vocab_size": VOCAB,
    "max_seq_len": SEQ,
    "n_layer": 1,
    "n_head": 8,
    "n_kv_head": 8,
    "dim": 512,
    "hidden_dim": 256,
}
CONFIGS = {
    "gpt": GPT_SMALL,
    "gpt-mid": GPT_MID,
    "gpt-wide": GPT_WIDE,
    "llama": LLAMA_SMALL,
    "llama-mid": LLAMA_MID,
    "llama-wide": LLAMA_WIDE,
}


def build(kind: str, mesh):
    ttnn.nn.manual_seed(0)
    config = CONFIGS[kind]
    if kind.startswith("gpt"):
        return ttnn.nn.GPT(ttnn.nn.GPTConfig(**config), device=mesh)
    return ttnn.nn.Llama(ttnn.nn.LlamaConfig(**config), device=mesh)


def batches(
    batch: int, steps: int = STEPS, seed: int = 0, distinct: int = 2
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` batches cycling through ``distinct`` random ones (so that the loss falls as they are learnt)."""
    rng = np.random.default_rng(seed)
    pool = [
        (rng.integers(0, VOCAB, (batch, SEQ)), rng.integers(0, VOCAB, (batch, SEQ))) for _ in range(distinct)
    ]
    return [pool[i % distinct] for i in range(steps)]


@dataclass
class Run:
    losses: list[float]
    first_grads: dict[str, np.ndarray]  # dense layout, named as in the single-device model
    final: dict[str, np.ndarray]
    model: object = None


def _dense_state(model, grads: bool) -> dict[str, np.ndarray]:
    if isinstance(model, P.Pipeline):  # stage-local names: keyed by position (the dense model's order)
        tensors = [p.grad if grads else p for p in model.parameters()]
        return {
            str(i): np.array(t.shards()[0], dtype=np.float32) for i, t in enumerate(tensors) if t is not None
        }
    if isinstance(model, P.TensorParallel | P.DistributedDataParallel):
        return model.dense_state_dict(grads=grads)
    return {
        name: np.array((p.grad if grads else p).shards()[0], dtype=np.float32)
        for name, p in model.named_parameters()
        if not grads or p.grad is not None
    }


def train(model, mesh, data, *, data_axis="replicated") -> Run:
    """SGD(momentum 0.9) over ``data``; ``data_axis``: "replicated" (every device the whole batch), None / 0 / 1
    (``shard_batch`` over that data-parallel group); a Pipeline runs its own schedule."""
    opt = ttnn.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    losses, first = [], None
    for x, y in data:
        opt.zero_grad()
        if isinstance(model, P.Pipeline):
            losses.append(model.forward_backward(x, y))
        else:
            if data_axis == "replicated":
                ids = ttnn.from_numpy(x.astype(np.uint32), dtype=ttnn.uint32, device=mesh)
                targets = ttnn.from_numpy(y.astype(np.uint32), dtype=ttnn.uint32, device=mesh)
            else:
                ids, targets = P.shard_batch(x, mesh, data_axis), P.shard_batch(y, mesh, data_axis)
            loss = ttnn.cross_entropy_loss(model(ids), targets)
            if hasattr(model, "reduce_loss"):
                loss = model.reduce_loss(loss)
            loss.backward()
            losses.append(ttnn.nn.utils.item(loss))
        if first is None:
            first = _dense_state(model, grads=True)
        opt.step()
    return Run(losses, first, _dense_state(model, grads=False), model)


@functools.cache
def reference(kind: str, batch: int) -> Run:
    """Single-device training of ``kind`` on ``batches(batch)`` (cached for the session)."""
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        run = train(build(kind, mesh), mesh, batches(batch))
        run.model = None
        return run
    finally:
        ttnn.close_mesh_device(mesh)


BF16_GRADIENTS = {"embed.weight"}  # the token table


def assert_same_training(run: Run, ref: Run, *, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Same losses, same first-step gradients (relative to each gradient's size) and same final weights; a
    pipeline's parameters are matched to the single-device model's by position."""
    np.testing.assert_allclose(run.losses, ref.losses, rtol=rtol, atol=atol)
    for grads, got, want in ((True, run.first_grads, ref.first_grads), (False, run.final, ref.final)):
        if isinstance(run.model, P.Pipeline):  # same order, stage-local names
            assert len(got) == len(want)
            got = dict(zip(want, got.values()))
        assert set(got) == set(want)
        for name, w in want.items():
            scale = float(np.abs(w).max()) or 1.0
            # a float32 Embedding looks up through a bfloat16 table, so its gradient is bfloat16 (docs/training.md);
            # those roundings differ with the summation order and carry into the weights over the steps
            if grads:
                tol = 1e-2 if name in BF16_GRADIENTS else 2e-5
            else:
                tol = 3e-3 if name in BF16_GRADIENTS else 1e-3
            np.testing.assert_allclose(got[name], w, rtol=0, atol=tol * scale, err_msg=name)


def assert_grads_close(got: dict, want: dict) -> None:
    """Gradients by name, relative to each one's size (bfloat16 ones to bfloat16 precision)."""
    assert set(got) == set(want)
    for name, w in want.items():
        scale = float(np.abs(w).max()) or 1.0
        tol = 1e-2 if name in BF16_GRADIENTS else 2e-5
        np.testing.assert_allclose(got[name], w, rtol=0, atol=tol * scale, err_msg=name)


@pytest.fixture
def mesh(open_mesh):
    """``mesh((rows, cols))``: an emulated mesh closed after the test."""
    return open_mesh
