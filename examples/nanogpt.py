"""Train a character-level NanoGPT on Shakespeare's sonnets with ``ttnn.nn`` / ``ttnn.optim``, then generate.

    python examples/nanogpt.py                      # default run (a couple of minutes on a laptop CPU)
    python examples/nanogpt.py --steps 20 --n-layer 1 --n-embd 64 --block-size 32   # a quick smoke run
    python examples/nanogpt.py --parallel ddp --mesh 1x8 --steps 50     # data parallel over 8 devices
    python examples/nanogpt.py --parallel tp --mesh 1x8 --steps 50      # tensor parallel (heads, MLP, vocab)
    python examples/nanogpt.py --parallel pp --mesh 1x8 --stages 2      # pipeline: 2 stages of 4 devices, 1F1B
    python examples/nanogpt.py --parallel ddp+tp --mesh 2x4             # TP over each row, DP over the rows

Everything runs on the ttnn emulator: the model's parameters live on an emulated device, ``loss.backward()``
fills their ``.grad``, and AdamW updates them in place with a fused device op. ``--parallel`` trains the same
model on an emulated mesh with ``ttnn.nn.parallel`` (the printed loss is the mean over the data-parallel group).
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
    p.add_argument("--n-head", type=int, default=None, help="default 4, or the TP size if larger")
    p.add_argument("--n-embd", type=int, default=None, help="default 128, or 32 per head if larger")
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
    p.add_argument("--parallel", choices=("none", "ddp", "tp", "pp", "ddp+tp"), default="none")
    p.add_argument("--mesh", default=None, help="RxC, e.g. 1x8 or 2x4 (default 1x1, or 1x2 with --parallel)")
    p.add_argument("--stages", type=int, default=2, help="pipeline stages (--parallel pp)")
    p.add_argument("--micro-batches", type=int, default=4, help="micro-batches per step (--parallel pp)")
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default="1f1b", help="pipeline schedule")
    args = p.parse_args(argv)
    rows, _, cols = (args.mesh or ("1x1" if args.parallel == "none" else "1x2")).lower().partition("x")
    if not (rows.isdigit() and cols.isdigit()):
        p.error(f"--mesh: expected RxC such as 1x8 or 2x4, got {args.mesh!r}")
    args.mesh_shape = (int(rows), int(cols))
    tp = {"tp": int(rows) * int(cols), "ddp+tp": int(cols)}.get(args.parallel, 1)
    args.n_head = args.n_head or max(4, tp)
    args.n_embd = args.n_embd or max(128, 32 * args.n_head)
    return args


def parallelize(args, model, mesh):
    """The model wrapped for ``--parallel`` and how a batch is placed: ``(model, place(ids) -> tensor)``."""
    P = ttnn.nn.parallel
    if args.parallel == "ddp":
        return P.DistributedDataParallel(model, mesh), lambda ids: P.shard_batch(ids, mesh)
    if args.parallel == "tp":
        return P.TensorParallel(model, mesh), lambda ids: to_device(ids, mesh)
    if args.parallel == "ddp+tp":
        model = P.DistributedDataParallel(P.TensorParallel(model, mesh, cluster_axis=1), mesh, cluster_axis=0)
        return model, lambda ids: P.shard_batch(ids, mesh, cluster_axis=0)
    if args.parallel == "pp":
        stages = P.pipeline_stages(model, args.stages)
        pipe = P.Pipeline(stages, mesh, micro_batches=args.micro_batches, schedule=args.schedule)
        return pipe, None
    return model, lambda ids: to_device(ids, mesh)


def language_model(model):
    """The GPT inside the DDP / TP wrappers (a Pipeline generates through its stages itself)."""
    while isinstance(model, (ttnn.nn.parallel.DistributedDataParallel, ttnn.nn.parallel.TensorParallel)):
        model = model.module
    return model


def main(argv=None) -> dict:
    args = parse_args(argv)
    text = DATA.read_text()
    vocab = CharVocab(text)
    data = vocab.encode(text)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*args.mesh_shape))
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
        model, place = parallelize(args, model, mesh)
        if args.parallel != "none":
            print(
                f"parallel: {args.parallel} on a {args.mesh_shape[0]}x{args.mesh_shape[1]} mesh: {model.extra_repr()}"
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
            track = tracker is not None and step == min(1, args.steps - 1)
            opt.zero_grad()
            if place is None:  # a pipeline runs forward and backward per micro-batch in its schedule
                if track:
                    tracker.begin("forward+backward")
                value = model.forward_backward(xb, yb)
            else:
                if track:
                    tracker.begin("forward")
                loss = ttnn.cross_entropy_loss(model(place(xb)), place(yb))
                if hasattr(model, "reduce_loss"):
                    loss = model.reduce_loss(loss)  # the mean over the data-parallel group
                if track:
                    tracker.end()
                    tracker.begin("backward")
                loss.backward()
                value = ttnn.nn.utils.item(loss)
            if track:
                tracker.end()
                tracker.begin("optimizer")
            if args.clip > 0:
                ttnn.nn.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            sched.step()
            if track:
                tracker.end()
            losses.append(value)
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
            if place is None:
                logits = model(xb)
                target = ttnn.from_numpy(yb.astype(np.uint32), dtype=ttnn.uint32, device=logits.device())
                val_loss = ttnn.nn.utils.item(ttnn.cross_entropy_loss(logits, target))
            else:
                loss = ttnn.cross_entropy_loss(model(place(xb)), place(yb))
                val_loss = ttnn.nn.utils.item(
                    model.reduce_loss(loss) if hasattr(model, "reduce_loss") else loss
                )
        print(f"validation loss {val_loss:.4f}")

        sample = ""
        if args.generate > 0:
            prompt = vocab.encode(args.prompt)[None, :]
            out = (model if place is None else language_model(model)).generate(prompt, args.generate)
            sample = vocab.decode(out[0])
            print("---- greedy sample ----")
            print(sample)
        return {"losses": losses, "val_loss": val_loss, "sample": sample}
    finally:
        ttnn.close_mesh_device(mesh)


if __name__ == "__main__":
    main()
