"""Benchmark the model-developer layer, side by side in one run on the emulator.

1. A model built by ``ModelFactory.from_spec`` (generic: spec → blocks → DecoderLayer → CausalLM) against tttv1's
   model (Transformer + Generator) built from the same catalogue model and weights: one decode step of every user
   and one 40-token prefill, host side included. Median CPU time of this process over --repeats calls per side,
   the sides alternating; the ratio's target is <= 1.0 (composing public blocks costs nothing).
2. The coverage recorder: an MLP1D decode forward with and without a ``CoverageRecorder`` active.
3. Reading a bfloat16 safetensors checkpoint into float32 numpy arrays: the library's torch-free, memory-mapped
   ``SafetensorsCheckpoint`` against ``safetensors.torch.load_file`` + ``.float().numpy()``.

Run from the project root:  python benchmarks/bench_library.py [--repeats 5] [--model Llama-3.1-8B-tiny]
Prints the machine, the command and tables; nothing is written except a temporary checkpoint.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault(
    "OPENBLAS_NUM_THREADS", "1"
)  # as bench_modules: spinning BLAS threads swamp small matmuls

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tttv1  # noqa: E402, F401 - installs the emulator as `ttnn` for tttv1's modules
from tttv2 import ttnn  # noqa: E402
from tttv2.interfaces import ModelFactory, SafetensorsCheckpoint  # noqa: E402
from tttv2.modules import MLP1D, LazyWeight, clear_tt_ccl_cache  # noqa: E402
from tttv2.testing import CoverageRecorder  # noqa: E402
from tttv2.testing.legacy import catalogue_state_dicts, tttv1_model_args  # noqa: E402


def _cpu(fn, *args) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        fn(*args)
        return time.process_time() - start
    finally:
        gc.enable()


def _side_by_side(ours, theirs, repeats: int) -> tuple[float, float]:
    mine, other = [], []
    ours(), theirs()  # warm up: weights converted, caches allocated
    for _ in range(repeats):
        mine.append(_cpu(ours))
        other.append(_cpu(theirs))
    return statistics.median(mine), statistics.median(other)


def factory_vs_tttv1(model: str, mesh_shape, repeats: int) -> list[tuple]:
    from tttv1.catalogue import config_dict
    from tttv1.tt.generator import Generator
    from tttv1.tt.model import Transformer

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    try:
        args = tttv1_model_args(mesh, model, max_batch_size=1, max_seq_len=256)
        hf_state, meta_state = catalogue_state_dicts(args)
        spec = ModelFactory.from_huggingface(config_dict(model))
        ours = ModelFactory.from_spec(spec, mesh, weights=hf_state, hw_mode="accuracy", max_seq_len=256)
        generator = Generator(Transformer(args, ttnn.bfloat8_b, mesh, meta_state, None), args, mesh)
        tokens = torch.randint(3, args.vocab_size, (1, 40), generator=torch.Generator().manual_seed(0))
        positions = torch.full((1,), 40)
        rows = []
        for mode, mine, theirs in (
            (
                "decode",
                lambda: ours.decode(tokens[:, 0].numpy(), positions.numpy()),
                lambda: generator.decode_forward_text(tokens[:, 0], positions),
            ),
            (
                "prefill",
                lambda: ours.prefill(tokens[0].numpy()),
                lambda: generator.prefill_forward_text(tokens),
            ),
        ):
            a, b = _side_by_side(mine, theirs, repeats)
            rows.append((f"from_spec vs tttv1 ({model})", f"{mesh_shape[0]}x{mesh_shape[1]}", mode, a, b))
        return rows
    finally:
        ttnn.close_mesh_device(mesh)
        clear_tt_ccl_cache()


def recorder_overhead(repeats: int) -> tuple:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        w = np.random.default_rng(0).standard_normal((512, 1792)).astype(np.float32) / 32
        mlp = MLP1D(LazyWeight(w, device=mesh), LazyWeight(w.T.copy()), LazyWeight(w))
        x = np.ones((1, 1, 32, 512), np.float32)

        def plain():
            mlp.decode_forward(LazyWeight(x))

        def recorded():
            with CoverageRecorder():
                mlp.decode_forward(LazyWeight(x))

        a, b = _side_by_side(recorded, plain, repeats * 4)
        return ("MLP1D decode, recorder on vs off", "1x1", "decode", a, b)
    finally:
        ttnn.close_mesh_device(mesh)


def safetensors_read(model: str, repeats: int) -> tuple:
    from safetensors.torch import load_file, save_file

    from tttv1.catalogue import random_state_dict

    state = {k: v.to(torch.bfloat16).contiguous() for k, v in random_state_dict(model).items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        save_file(state, path)

        def ours():
            checkpoint = SafetensorsCheckpoint(path)
            return [np.ascontiguousarray(checkpoint[name]) for name in checkpoint]

        def theirs():
            return [t.float().numpy() for t in load_file(path).values()]

        a, b = _side_by_side(ours, theirs, repeats)
        mb = path.stat().st_size / 2**20
    return (f"read a {mb:.1f} MiB bf16 checkpoint to float32", "-", "-", a, b)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="Llama-3.1-8B-tiny")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one call per side of Llama-3.2-1B-tiny, 1x8 only: a smoke test (figures mean nothing)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.model = 1, "Llama-3.2-1B-tiny"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} logical cores, Python {platform.python_version()}"
    )
    print(
        f"load average: {os.getloadavg()[0]:.1f}; command: python benchmarks/bench_library.py {' '.join(argv or sys.argv[1:])}"
    )
    rows = [
        *factory_vs_tttv1(args.model, (1, 8), args.repeats),
        *([] if args.quick else factory_vs_tttv1(args.model, (8, 4), args.repeats)),
        recorder_overhead(args.repeats),
        safetensors_read(args.model, args.repeats),
    ]
    print(f"{'what':<48} {'mesh':<5} {'mode':<8} {'ours CPU ms':>12} {'other CPU ms':>13} {'ratio':>6}")
    for what, mesh, mode, a, b in rows:
        print(f"{what:<48} {mesh:<5} {mode:<8} {a * 1000:>12.2f} {b * 1000:>13.2f} {a / b:>6.2f}")


if __name__ == "__main__":
    main()
