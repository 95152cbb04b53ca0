"""A small NanoGPT trained data-parallel, run by tests/distributed/test_ddp.py.

One process (``python -m tests.distributed.ddp_program OUT``): a 1x2 mesh, ``ttnn.nn.parallel
.DistributedDataParallel`` and ``shard_batch``, the single-process reference. Under ``tttv2-run --np 2``: each
rank opens a 1x1 mesh, takes its half of every batch and averages its gradients over the ranks with
``--sync`` (``tttv2.distributed.all_reduce_gradients_`` or TTML's ``ttml.core.distributed
.synchronize_gradients``). Each process writes, per step, its local loss and every parameter after the
optimizer step to ``OUT/<mode>-rank<r>.npz``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

from tttv2 import ttnn
from tttv2.ttnn._remote import local_shards

BATCH, BLOCK, VOCAB = 4, 32, 23


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--sync", choices=("tttv2", "ttml", "mesh"), default="tttv2")
    args = p.parse_args()
    ttnn.init_distributed_context()
    rank, size = int(ttnn.distributed_context_get_rank()), int(ttnn.distributed_context_get_size())
    mode = "single" if size == 1 else f"ranks-{args.sync}"
    # --sync mesh: the single-process program unchanged, its 1x2 mesh spread over the ranks (one device each)
    one_mesh = size == 1 or args.sync == "mesh"
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2 if one_mesh else 1))
    try:
        ttnn.nn.manual_seed(7)
        config = ttnn.nn.GPTConfig(
            vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=2, n_embd=64, dropout=0.0
        )
        model = ttnn.nn.GPT(config, device=mesh, dtype=ttnn.bfloat16)
        if one_mesh:
            model = ttnn.nn.parallel.DistributedDataParallel(model, mesh)
        opt = ttnn.optim.AdamW(model.named_parameters(), lr=3e-3, weight_decay=0.1)
        rng = np.random.default_rng(11)
        record: dict[str, np.ndarray] = {}
        start = time.perf_counter()
        for step in range(args.steps):
            ids = rng.integers(0, VOCAB, size=(BATCH, BLOCK + 1))
            x, y = ids[:, :-1], ids[:, 1:]
            opt.zero_grad()
            if one_mesh:
                xb, yb = ttnn.nn.parallel.shard_batch(x, mesh), ttnn.nn.parallel.shard_batch(y, mesh)
            else:
                half = slice(rank * BATCH // size, (rank + 1) * BATCH // size)
                xb = ttnn.from_numpy(x[half].astype(np.uint32), dtype=ttnn.uint32, device=mesh)
                yb = ttnn.from_numpy(y[half].astype(np.uint32), dtype=ttnn.uint32, device=mesh)
            loss = ttnn.cross_entropy_loss(model(xb), yb)
            loss.backward()
            if size > 1 and args.sync == "tttv2":
                from tttv2.distributed import all_reduce_gradients_

                all_reduce_gradients_(model.parameters())
            elif size > 1 and args.sync == "ttml":
                import ttml

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    ttml.core.distributed.synchronize_gradients(dict(model.named_parameters()))
            opt.step()
            mine = set(mesh.local_device_ids())
            for d, shard in enumerate(loss.shards()):
                if d in mine:  # this rank's devices (a spread mesh's others hold remote stand-ins)
                    record[f"loss/{step}/{rank if not one_mesh else d}"] = np.array(shard, dtype=np.float32)
            for name, param in model.named_parameters():
                record[f"param/{step}/{name.removeprefix('module.')}"] = np.array(
                    local_shards(param, "record")[0], dtype=np.float32
                )
        record["seconds"] = np.array(time.perf_counter() - start)
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez(args.out / f"{mode}-rank{rank}.npz", **record)
        ttnn.distributed_context_barrier()
        print(
            f"{mode}: {args.steps} steps, rank {rank} loss {float(np.mean(record[f'loss/{args.steps - 1}/{rank}'])):.4f}"
        )
    finally:
        ttnn.close_mesh_device(mesh)


if __name__ == "__main__":
    main()
