"""Train a character-level NanoGPT on Shakespeare's sonnets with ``ttnn.nn`` / ``ttnn.optim``, then generate.

    python examples/nanogpt.py                      # default run (a couple of minutes on a laptop CPU)
    python examples/nanogpt.py --steps 20 --n-layer 1 --n-embd 64 --block-size 32   # a quick smoke run

Everything runs on the ttnn emulator: the model's parameters live on an emulated device, ``loss.backward()``
fills their ``.grad``, and AdamW updates them in place with a fused device op.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from tttv2 import ttnn
from tttv2.ttnn.memory_tracker import MemoryTracker

DATA = Path(__file__).with_name("data") / "sonnets.txt"


class CharVocab:
    """Characters of the text in sorted order; id = position."""

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.ids[c] for c in text], dtype=np.uint32)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def batches(data: np.ndarray, block: int, batch: int, rng: np.random.Generator):
    """Random windows: inputs ``[batch, block]`` and next-character targets (shifted by one)."""
    while True:
        start = rng.integers(0, len(data) - block - 1, size=batch)
        x = np.stack([data[s : s + block] for s in start])
        y = np.stack([data[s + 1 : s + block + 1] for s in start])
        yield x, y


def to_device(ids: np.ndarray, mesh) -> ttnn.Tensor:
    return ttnn.from_numpy(
        ids.astype(np.uint32), dtype=ttnn.uint32, layout=ttnn.ROW_MAJOR_LAYOUT, device=mesh
    )


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1200, help="training steps")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--block-size", type=int, default=64, help="context length (a multiple of 32)")
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=20, help="warm-up steps of the cosine schedule")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (0: off)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--checkpointing", action="store_true", help="recompute each block in backward")
    p.add_argument("--generate", type=int, default=200, help="characters to generate greedily at the end")
    p.add_argument("--prompt", default="Shall I compare thee")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--memory", action="store_true", help="print device memory by phase for one step")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    text = DATA.read_text()
    vocab = CharVocab(text)
    data = vocab.encode(text)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        ttnn.nn.manual_seed(args.seed)
        config = ttnn.nn.GPTConfig(
            vocab_size=len(vocab),
            block_size=args.block_size,
            n_layer=args.n_layer,
            n_head=args.n_head,
            n_embd=args.n_embd,
            dropout=args.dropout,
            checkpointing=args.checkpointing,
        )
        model = ttnn.nn.GPT(config, device=mesh, dtype=getattr(ttnn, args.dtype))
        print(
            f"NanoGPT: {model.num_parameters():,} parameters, vocab {len(vocab)}, {len(train):,} training characters"
        )
        opt = ttnn.optim.AdamW(model.named_parameters(), lr=args.lr, weight_decay=args.weight_decay)
        sched = ttnn.optim.CosineScheduler(
            opt, total_steps=max(args.steps, args.warmup + 1), eta_min=args.lr / 10, warmup_steps=args.warmup
        )
        stream = batches(train, args.block_size, args.batch_size, np.random.default_rng(args.seed))
        tracker = MemoryTracker(mesh) if args.memory else None

        losses = []
        start = time.perf_counter()
        for step in range(args.steps):
            xb, yb = next(stream)
            x, y = to_device(xb, mesh), to_device(yb, mesh)
            track = tracker is not None and step == min(1, args.steps - 1)
            if track:
                tracker.begin("forward")
            loss = ttnn.cross_entropy_loss(model(x), y)
            if track:
                tracker.end()
                tracker.begin("backward")
            opt.zero_grad()
            loss.backward()
            if track:
                tracker.end()
                tracker.begin("optimizer")
            if args.clip > 0:
                ttnn.nn.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            sched.step()
            if track:
                tracker.end()
            losses.append(ttnn.nn.utils.item(loss))
            if step % args.log_every == 0 or step == args.steps - 1:
                rate = (step + 1) / (time.perf_counter() - start)
                print(
                    f"step {step:5d}  loss {losses[-1]:.4f}  lr {sched.get_last_lr()[0]:.2e}  {rate:.1f} steps/s"
                )
        if tracker is not None:
            tracker.print()

        model.eval()
        with ttnn.autograd.no_grad():
            xb, yb = next(batches(val, args.block_size, args.batch_size, np.random.default_rng(1)))
            val_loss = ttnn.nn.utils.item(
                ttnn.cross_entropy_loss(model(to_device(xb, mesh)), to_device(yb, mesh))
            )
        print(f"validation loss {val_loss:.4f}")

        sample = ""
        if args.generate > 0:
            prompt = vocab.encode(args.prompt)[None, :]
            out = model.generate(prompt, args.generate)
            sample = vocab.decode(out[0])
            print("---- greedy sample ----")
            print(sample)
        return {"losses": losses, "val_loss": val_loss, "sample": sample}
    finally:
        ttnn.close_mesh_device(mesh)


if __name__ == "__main__":
    main()
