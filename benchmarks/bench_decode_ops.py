"""Where a real-size decode step's time goes, op by op, apart from the matmul arithmetic (issue 24 item 2).

Builds one decoder layer at the real size of row (b) (Llama-3.1-8B on 1×8) or row (c) (Llama-3.1-70B on 8×4) of
``bench_scale.py`` (same config, same ``ModelFactory`` build), prefills 128 tokens, then times decode steps of the
layer with the main thread's CPU time (``time.thread_time``: on the shared 2-core machine wall time moves with the
other engineers' load, the CPU time a step takes much less).

``--matmul replay`` (default): each decode step's per-device products (``numerics.matmul_stored`` /
``matmul_accumulate``, the arithmetic another branch replaces with a native small-M kernel) are computed for real
once, then replayed from that record, so what is timed is everything else a step does: argument checks, memory
configs, output tensors (quantise, pack, allocate), reading inputs, CCL data movement, norms, rotary, attention, KV
cache updates. ``--matmul real`` times the whole step.

    python benchmarks/bench_decode_ops.py --row b --steps 20
    python benchmarks/bench_decode_ops.py --row c --steps 8 --matmul real

Prints one line per op (calls per step, CPU ms per step; ops called inside other ops count in their caller) and
the step's total; ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale

from tttv2 import ttnn
from tttv2.interfaces import ModelFactory
from tttv2.ttnn import numerics
from tttv2.ttnn.ops import matmul as matmul_ops

PROMPT = 128


class _Replay:
    """Record each product of one decode step, then give them back in the same order (copies)."""

    def __init__(self) -> None:
        self.mode, self.record, self.next = "off", [], 0

    def wrap(self, fn):
        @functools.wraps(fn)
        def product(*args, **kwargs):
            if self.mode == "record":
                out = fn(*args, **kwargs)
                self.record.append(out.copy())
                return out
            if self.mode == "replay":
                out = self.record[self.next % len(self.record)].copy()
                self.next += 1
                return out
            return fn(*args, **kwargs)

        return product


class _OpClock:
    """CPU time per public op, counted at the outermost op only."""

    def __init__(self) -> None:
        self.depth, self.per_op = 0, {}

    def wrap(self, fn, name: str):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                entry = self.per_op.setdefault(name, [0, 0.0])
                entry[0] += 1
                entry[1] += time.thread_time() - t0
                self.depth -= 1

        return op

    def install(self) -> None:
        seen = set()
        for namespace in (ttnn, ttnn.experimental, ttnn.transformer):
            for attr in dir(namespace):
                fn = getattr(namespace, attr, None)
                if callable(fn) and hasattr(fn, "op_name") and id(fn) not in seen:
                    seen.add(id(fn))
                    setattr(namespace, attr, self.wrap(fn, fn.op_name))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--row", choices=("b", "c"), default="b", help="b: 8B layer on 1x8; c: 70B layer on 8x4"
    )
    parser.add_argument("--steps", type=int, default=20, help="timed decode steps (after two untimed ones)")
    parser.add_argument("--matmul", choices=("replay", "real"), default="replay")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one timed step of a quarter-width layer: a smoke test (figures mean nothing)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 1
    if args.steps < 1:
        parser.error("--steps must be >= 1")

    _title, base, mesh_shape = bench_scale.LAYER_ROWS[args.row]
    config = dict(base, num_hidden_layers=1, vocab_size=bench_scale.LAYER_BENCH_VOCAB)
    if args.quick:  # the layer's structure at a quarter of its width (head_dim 128 kept, one head per device)
        config.update(hidden_size=1024, intermediate_size=3584, num_attention_heads=8, num_key_value_heads=8)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    model = ModelFactory.from_config(config, mesh, max_seq_len=2 * PROMPT, max_batch_size=1)
    decoder, layer = model.decoder, model.layers[0]
    prompt = np.arange(3, 3 + PROMPT) % bench_scale.LAYER_BENCH_VOCAB
    ttnn.deallocate(
        layer.prefill_forward(decoder.embed_prefill(prompt), decoder.rot_mats_prefill(0, PROMPT), user_id=0)
    )

    replay = _Replay()
    for module in (numerics, matmul_ops):
        for name in ("matmul_stored", "matmul_accumulate"):
            setattr(module, name, replay.wrap(getattr(module, name)))
    clock = _OpClock()
    clock.install()
    position = [PROMPT]

    def step() -> float:
        ids = np.zeros(32, dtype=np.int64)
        ids[0] = 7
        positions = np.array([position[0]])
        x = decoder.embed_decode(ids)
        current = decoder.prepare_positions(positions)
        rot = decoder.rot_mats_decode(positions)
        clock.per_op.clear()  # only the layer's ops: the inputs above are made outside the timed step
        t0 = time.thread_time()
        out = layer.decode_forward(x, current, rot)
        seconds = time.thread_time() - t0
        ttnn.deallocate(out)
        position[0] += 1
        return seconds

    step()
    if args.matmul == "replay":
        replay.mode = "record"
        step()
        replay.mode = "replay"
    else:
        step()
    totals: dict[str, list] = {}
    times = []
    for _ in range(args.steps):
        times.append(step())
        for name, (calls, seconds) in clock.per_op.items():
            entry = totals.setdefault(name, [0, 0.0])
            entry[0] += calls
            entry[1] += seconds
    per_step = {
        name: {"calls": calls / args.steps, "cpu_ms": seconds / args.steps * 1e3}
        for name, (calls, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1])
    }
    result = {
        "row": args.row,
        "mesh": list(mesh_shape),
        "matmul": args.matmul,
        "steps": args.steps,
        "step_cpu_ms_median": statistics.median(times) * 1e3,
        "step_cpu_ms_min": min(times) * 1e3,
        "ops": per_step,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"row ({args.row}) on {mesh_shape[0]}x{mesh_shape[1]}, matmul {args.matmul}, {args.steps} steps")
    print(f"{'op':55s} {'calls':>6s} {'CPU ms':>8s}")
    for name, entry in per_step.items():
        print(f"{name:55s} {entry['calls']:6.1f} {entry['cpu_ms']:8.2f}")
    print(
        f"decode step: median {result['step_cpu_ms_median']:.2f} ms CPU, min {result['step_cpu_ms_min']:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
