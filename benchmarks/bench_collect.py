"""collect-cases overhead on the tttv1 T3K demo: the same demo plain and under ``collect-cases record``.

Side by side in one run, alternating plain / recorded so that the load of a shared machine hits both alike;
each recorded run writes a fresh store. Prints the wall times, their medians and the ratio (target <= 1.5x),
and the recorder's own cost per call on a toy module (wrapped vs plain ``forward``).

    python benchmarks/bench_collect.py [--repeats 3] [--max-new-tokens 16] [--mesh T3K]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _overhead import print_ratios, timed

from tttv2_tools.collect_cases.store import CaseStore
from tttv2_tools.collect_cases.targets import TTTV1_TARGETS


def per_call_cost(calls: int = 20000) -> tuple[float, float]:
    """Microseconds per call of a toy ``forward`` taking a ttnn tensor: plain, then recorded (seen case)."""
    import numpy as np

    from tttv2 import ttnn
    from tttv2_tools.collect_cases.recorder import Recorder
    from tttv2_tools.collect_cases.targets import Target

    class Args:
        cluster_shape = (1, 8)
        num_devices = 8
        arch_name = "wormhole_b0"
        model_name = "toy"

    class Toy:
        def __init__(self, mesh):
            self.args, self.layer_num = Args(), 0
            self.w1 = ttnn.from_numpy(np.zeros((64, 64), np.float32), dtype=ttnn.bfloat8_b,
                                      layout=ttnn.TILE_LAYOUT, device=mesh)  # fmt: skip

        def forward(self, x, mode):
            return x

    module = type(sys)("bench_collect_toy")
    module.Toy = Toy
    sys.modules[module.__name__] = module
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    x = ttnn.from_numpy(np.zeros((1, 1, 32, 64), np.float32), dtype=ttnn.bfloat16, device=mesh)
    toy = Toy(mesh)

    def loop() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            toy.forward(x, "decode")
        return (time.perf_counter() - start) / calls * 1e6

    plain = loop()
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder(Path(tmp) / "s.sqlite", [Target(module.__name__, "Toy")])
        recorder.install()
        recorded = loop()
        recorder.close()
    ttnn.close_mesh_device(mesh)
    return plain, recorded


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--mesh", default="T3K")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--quick", action="store_true", help="one run on N150, 2 new tokens, 200 toy calls")
    args = p.parse_args()
    if args.quick:
        args.repeats, args.mesh, args.max_new_tokens = 1, "N150", 2
    demo = [sys.executable, "-m", "tttv1.demo.simple_text_demo", "--mesh", args.mesh,
            "--max-new-tokens", str(args.max_new_tokens)]  # fmt: skip
    plain, recorded, calls = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            plain.append(timed(demo))
            record = [sys.executable, "-m", "tttv2_tools.collect_cases.cli", "record",
                      "--store", str(Path(tmp) / f"run{i}.sqlite")]  # fmt: skip
            for target in TTTV1_TARGETS:
                record += ["--target", target]
            recorded.append(timed([*record, "--", *demo]))
            with CaseStore(Path(tmp) / f"run{i}.sqlite") as store:
                calls.append(sum(hits for _, _, hits in store.targets()))
            print(
                f"run {i + 1}: plain {plain[-1][0]:.2f} s wall / {plain[-1][1]:.2f} s CPU, "
                f"recorded {recorded[-1][0]:.2f} s wall / {recorded[-1][1]:.2f} s CPU",
                flush=True,
            )
    print(f"demo: {' '.join(demo[1:])}")
    print(f"targets: {len(TTTV1_TARGETS)} ({', '.join(t.split(':')[1] for t in TTTV1_TARGETS)})")
    print_ratios(plain, recorded, "recorded", "target <= 1.5x")
    plain_us, recorded_us = per_call_cost(200 if args.quick else 20000)
    work = statistics.median(calls) * (recorded_us - plain_us) / 1e6
    print(
        f"recorded calls per run: {statistics.median(calls):.0f}; recorder work per run at the per-call cost "
        f"below: {work * 1000:.1f} ms"
    )
    print(
        f"per call (toy forward, case already seen): plain {plain_us:.2f} us, recorded {recorded_us:.2f} us"
    )


if __name__ == "__main__":
    main()
