"""A NanoGPT trained two-stage pipeline-parallel, run by tests/distributed/test_pipeline_ranks.py.

One process (``python -m tests.distributed.pipeline_program OUT --schedule S``): ``ttnn.nn.parallel.Pipeline`` on
a 1x2 mesh (a stage per 1x1 submesh), the single-process reference. Under ``tttv2-run --np 2``: each rank opens
a 1x1 mesh and ``RankPipeline`` keeps its stage; activations and gradients cross over MeshSockets. Each process
writes, per step, the loss and every parameter of its stage(s) after the optimizer step to
``OUT/<mode><stages>-<schedule>-rank<r>.npz`` (parameters named ``stages.<i>.<name>`` in both modes), and the
seconds its steps took. ``--stages N`` (alone) / ``--np N`` (ranks): N stages, of a GPT of max(2, N) layers.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from tttv2 import ttnn

BATCH, BLOCK, VOCAB, MICRO = 4, 32, 29, 2


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default="gpipe")
    p.add_argument(
        "--stages", type=int, default=2, help="alone: the stages on a 1xSTAGES mesh (ranks: one each)"
    )
    args = p.parse_args()
    ttnn.init_distributed_context()
    rank, size = int(ttnn.distributed_context_get_rank()), int(ttnn.distributed_context_get_size())
    mode = "single" if size == 1 else "ranks"
    stages = args.stages if size == 1 else size
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, stages if size == 1 else 1))
    try:
        ttnn.nn.manual_seed(3)
        config = ttnn.nn.GPTConfig(
            vocab_size=VOCAB,
            block_size=BLOCK,
            n_layer=max(2, stages),
            n_head=2,
            n_embd=64,
            dropout=0.0,
            weight_tying=False,
        )
        model = ttnn.nn.GPT(config, device=mesh, dtype=ttnn.bfloat16)
        parts = ttnn.nn.parallel.pipeline_stages(model, stages)
        if size == 1:
            pipe = ttnn.nn.parallel.Pipeline(parts, mesh, micro_batches=MICRO, schedule=args.schedule)
        else:
            pipe = ttnn.nn.parallel.RankPipeline(parts, mesh, micro_batches=MICRO, schedule=args.schedule)
        opt = ttnn.optim.AdamW(pipe.named_parameters(), lr=3e-3, weight_decay=0.1)
        rng = np.random.default_rng(17)
        record: dict[str, np.ndarray] = {}
        start = time.perf_counter()
        for step in range(args.steps):
            ids = rng.integers(0, VOCAB, size=(BATCH, BLOCK + 1))
            opt.zero_grad()
            record[f"loss/{step}"] = np.array(pipe.forward_backward(ids[:, :-1], ids[:, 1:]))
            opt.step()
            for name, param in pipe.named_parameters():
                if size > 1:
                    name = name.replace("stage.", f"stages.{rank}.", 1)
                record[f"param/{step}/{name}"] = np.array(param.shards()[0], dtype=np.float32)
        record["seconds"] = np.array(time.perf_counter() - start)
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez(args.out / f"{mode}{stages}-{args.schedule}-rank{rank}.npz", **record)
        ttnn.distributed_context_barrier()
        print(
            f"{mode} {args.schedule}: {args.steps} steps, loss {float(record[f'loss/{args.steps - 1}']):.4f}"
        )
    finally:
        ttnn.close_mesh_device(mesh)


if __name__ == "__main__":
    main()
