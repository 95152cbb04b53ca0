"""Benchmark training on the emulator against torch on the CPU (float32).

Run from the project root:  python benchmarks/bench_train.py [--steps 5] [--ops-only | --step-only | --threads-only | --rounds N | --parallel[=ddp,tp,...]]

1. NanoGPT (6 layers, 384 wide, 6 heads, block 128, batch 4, the sonnets' character vocabulary, dropout 0.2):
   the median time of a full training step — forward, cross-entropy, backward, AdamW — with ``ttnn.nn`` /
   ``ttnn.optim`` on the emulator and with the same architecture in plain torch.
2. Each fused training op at the model's shapes: median forward and backward time against torch's
   equivalent (autograd for the backward; the optimizer steps against ``torch.optim``'s single-tensor step).
3. Thread settings: the emulator's NanoGPT step in two fresh processes, one with no thread variables in its
   environment (how users start a script) and one with ``OPENBLAS_NUM_THREADS=1``. The library runs BLAS
   single-threaded inside its own ops (``tttv2/ttnn/_threads.py``), so both should take the same time.
4. ``--parallel [ddp,tp,pp,ddp+tp]``: the same NanoGPT step under each ``ttnn.nn.parallel`` strategy on emulated
   meshes, against one device: median step time and, per device, the parameter memory and the peak DRAM of a step
   (the emulator runs the devices one after another, so time is CPU time; memory per device is the figure that
   carries over to hardware).

Prints the machine and the tables. Times are wall-clock medians in milliseconds. The bench sets no thread
variables itself; torch runs with its default thread count and, for reference, with one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tttv2 import ttnn  # noqa: E402

TEXT = (ROOT / "examples" / "data" / "sonnets.txt").read_text()
VOCAB = sorted(set(TEXT))
LAYERS, WIDTH, HEADS, BLOCK, BATCH, DROPOUT = 6, 384, 6, 128, 4, 0.2


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # pragma: no cover - not Linux
        pass
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    return (
        f"{cpu}, {os.cpu_count()} logical cores, {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"numpy {np.__version__} (OPENBLAS_NUM_THREADS={threads}), torch {torch.__version__} ({torch.get_num_threads()} threads)"
    )


def median_ms(fn: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None) -> float:
    """Median of ``repeats`` timed calls of ``fn(setup())`` (``setup`` runs untimed before each call)."""
    times = []
    for i in range(repeats + 1):
        arg = setup() if setup is not None else None
        start = time.perf_counter()
        fn(arg) if setup is not None else fn()
        if i:  # the first call warms caches
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


# --- the training step ---------------------------------------------------------------------------------------------


class TorchGPT(torch.nn.Module):
    """The same NanoGPT in torch: pre-LN blocks, causal SDPA with dropout, tanh GELU, untied head."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, WIDTH)
        self.pos = torch.nn.Parameter(torch.zeros(1, BLOCK, WIDTH))
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict(
                {
                    "ln1": torch.nn.LayerNorm(WIDTH),
                    "qkv": torch.nn.Linear(WIDTH, 3 * WIDTH),
                    "out": torch.nn.Linear(WIDTH, WIDTH),
                    "ln2": torch.nn.LayerNorm(WIDTH),
                    "fc": torch.nn.Linear(WIDTH, 4 * WIDTH),
                    "proj": torch.nn.Linear(4 * WIDTH, WIDTH),
                }
            )
            for _ in range(LAYERS)
        )
        self.ln_f = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        b, s = idx.shape
        x = F.dropout(self.embed(idx) + self.pos[:, :s], DROPOUT, self.training)
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(WIDTH, dim=-1)
            q, k, v = (t.view(b, s, HEADS, WIDTH // HEADS).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(
                q, k, v, dropout_p=DROPOUT if self.training else 0.0, is_causal=True
            )
            x = x + F.dropout(blk["out"](a.transpose(1, 2).reshape(b, s, WIDTH)), DROPOUT, self.training)
            h = F.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh")
            x = x + F.dropout(blk["proj"](h), DROPOUT, self.training)
        return self.head(self.ln_f(x))


def batch(rng: np.random.Generator, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    start = rng.integers(0, len(ids) - BLOCK - 1, BATCH)
    return np.stack([ids[s : s + BLOCK] for s in start]), np.stack(
        [ids[s + 1 : s + BLOCK + 1] for s in start]
    )


def _emulator_stepper(mesh) -> tuple[Callable[..., None], int]:
    """The emulator's NanoGPT training step on ``mesh`` (its own batches), and the model's parameter count."""
    ids = np.array([VOCAB.index(c) for c in TEXT], dtype=np.uint32)
    rng = np.random.default_rng(0)
    ttnn.nn.manual_seed(0)
    config = ttnn.nn.GPTConfig(
        vocab_size=len(VOCAB), block_size=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH, dropout=DROPOUT
    )
    model = ttnn.nn.GPT(config, device=mesh)
    opt = ttnn.optim.AdamW(model.parameters(), lr=3e-4)

    def emulator_step(_=None) -> None:
        x, y = batch(rng, ids)
        tx = ttnn.from_numpy(x, dtype=ttnn.uint32, device=mesh)
        ty = ttnn.from_numpy(y, dtype=ttnn.uint32, device=mesh)
        loss = ttnn.cross_entropy_loss(model(tx), ty)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return emulator_step, model.num_parameters()


def _torch_stepper() -> Callable[..., None]:
    """The same training step in torch (its own batches)."""
    ids = np.array([VOCAB.index(c) for c in TEXT], dtype=np.uint32)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    ref = TorchGPT(len(VOCAB))
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-4)

    def torch_step(_=None) -> None:
        x, y = batch(rng, ids)
        logits = ref(torch.from_numpy(x.astype(np.int64)))
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y.astype(np.int64)).reshape(-1)
        )
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()

    return torch_step


def bench_side_by_side(rounds: int, steps: int) -> list[dict[str, list[tuple[float, float]]]]:
    """``rounds`` rounds, each timing ``steps`` steps of the emulator, of torch with its default threads and of
    torch with one thread, one after the other (so a change of load weighs on all three alike); per round and
    side, the (wall ms, CPU ms of the process, CPU ms of the calling thread) of each step. Two untimed warm-up
    steps each first. The emulator's calling thread runs the Python and its share of the products while its
    workers take the other pieces, so on free cores its CPU time is about the step's wall time: the figure to
    compare when the machine is shared and the walls are not."""
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        emulator, _ = _emulator_stepper(mesh)
        reference = _torch_stepper()
        threads = torch.get_num_threads()

        def torch_one(_=None) -> None:
            torch.set_num_threads(1)
            try:
                reference()
            finally:
                torch.set_num_threads(threads)

        sides = (
            ("emulator", emulator),
            (f"torch {threads} threads", reference),
            ("torch 1 thread", torch_one),
        )
        for _, fn in sides:
            fn()
            fn()
        out = []
        for _ in range(rounds):
            row: dict[str, list[tuple[float, ...]]] = {}
            for name, fn in sides:
                times = []
                for _ in range(steps):
                    wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
                    fn()
                    times.append(
                        (
                            1e3 * (time.perf_counter() - wall),
                            1e3 * (time.process_time() - cpu),
                            1e3 * (time.thread_time() - own),
                        )
                    )
                row[name] = times
            row["load average"] = [(os.getloadavg()[0],)]
            out.append(row)
        return out
    finally:
        ttnn.close_mesh_device(mesh)


def print_side_by_side(result, steps: int) -> None:
    print(
        f"\nNanoGPT training step side by side ({LAYERS} layers, {WIDTH} wide, block {BLOCK}, batch {BATCH}): per "
        f"round {steps} steps of each, one after the other; medians, ms per step (wall / CPU of the process; "
        "'caller': CPU of the emulator's calling thread, its wall on free cores)"
    )
    names = [k for k in result[0] if k != "load average"]
    print(
        "| round | load | "
        + " | ".join(f"{n} wall / CPU" for n in names)
        + f" | emulator caller | emulator / {names[1]} (wall) | emulator caller / {names[1]} wall "
        + f"| emulator / {names[2]} (CPU) |"
    )
    print("|---|---:|" + "---:|" * (len(names) + 4))
    ratios = []
    for i, row in enumerate(result, 1):
        med = {n: [statistics.median(t[j] for t in row[n]) for j in range(3)] for n in names}
        emu, multi, single = (med[n] for n in names)
        ratios.append(emu[0] / multi[0])
        cells = " | ".join(f"{med[n][0]:.0f} / {med[n][1]:.0f}" for n in names)
        print(
            f"| {i} | {row['load average'][0][0]:.1f} | {cells} | {emu[2]:.0f} | {ratios[-1]:.2f} | "
            f"{emu[2] / multi[0]:.2f} | {emu[1] / single[1]:.2f} |"
        )
    print(f"median of the rounds' ratios (wall): {statistics.median(ratios):.2f}")


def bench_emulator_step(steps: int) -> tuple[float, int]:
    """Median ms of the emulator's training step, and the model's parameter count."""
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        emulator_step, params = _emulator_stepper(mesh)
        return median_ms(emulator_step, steps), params
    finally:
        ttnn.close_mesh_device(mesh)


def bench_step(steps: int) -> tuple[float, float, float, int]:
    emulator, params = bench_emulator_step(steps)
    torch_step = _torch_stepper()
    reference = median_ms(torch_step, steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = median_ms(torch_step, steps)
    finally:
        torch.set_num_threads(threads)
    return emulator, reference, single, params


# --- fused ops ------------------------------------------------------------------------------------------------------------


def _fused_cases(mesh, rng: np.random.Generator):
    """(name, shape text, ttnn forward, torch forward, input arrays, has backward) per fused op."""
    rows, vocab, hd = BATCH * BLOCK, len(VOCAB), WIDTH // HEADS
    x = rng.standard_normal((BATCH, 1, BLOCK, WIDTH)).astype(np.float32)
    w = np.ones((1, 1, 1, WIDTH), np.float32)
    b = np.zeros((1, 1, 1, WIDTH), np.float32)
    logits = rng.standard_normal((BATCH, 1, BLOCK, vocab)).astype(np.float32)
    target = rng.integers(0, vocab, (BATCH, BLOCK)).astype(np.uint32)
    hidden = 1024
    w1 = (rng.standard_normal((WIDTH, hidden)) / math.sqrt(WIDTH)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, WIDTH)) / math.sqrt(hidden)).astype(np.float32)
    w3 = (rng.standard_normal((WIDTH, hidden)) / math.sqrt(WIDTH)).astype(np.float32)
    q, k, v = (rng.standard_normal((BATCH, HEADS, BLOCK, hd)).astype(np.float32) for _ in range(3))
    tgt_t = torch.from_numpy(target.astype(np.int64)).reshape(-1)
    return [
        (
            "cross_entropy_loss",
            f"[{BATCH}, 1, {BLOCK}, {vocab}]",
            lambda a: ttnn.cross_entropy_loss(a[0], a[1]),
            lambda a: F.cross_entropy(a[0].reshape(rows, vocab), tgt_t),
            [logits, target],
        ),
        (
            "mse_loss",
            f"[{BATCH}, 1, {BLOCK}, {WIDTH}]",
            lambda a: ttnn.mse_loss(a[0], a[1]),
            lambda a: F.mse_loss(a[0], a[1]),
            [x, x[::-1].copy()],
        ),
        (
            "l1_loss",
            f"[{BATCH}, 1, {BLOCK}, {WIDTH}]",
            lambda a: ttnn.l1_loss(a[0], a[1]),
            lambda a: F.l1_loss(a[0], a[1]),
            [x, x[::-1].copy()],
        ),
        (
            "log_softmax",
            f"[{BATCH}, 1, {BLOCK}, {WIDTH}]",
            lambda a: ttnn.log_softmax(a[0]),
            lambda a: F.log_softmax(a[0], -1),
            [x],
        ),
        (
            "layer_norm_forward",
            f"[{BATCH}, 1, {BLOCK}, {WIDTH}]",
            lambda a: ttnn.layer_norm_forward(a[0], a[1], a[2])[0],
            lambda a: F.layer_norm(a[0], (WIDTH,), a[1].reshape(-1), a[2].reshape(-1)),
            [x, w, b],
        ),
        (
            "rms_norm_forward",
            f"[{BATCH}, 1, {BLOCK}, {WIDTH}]",
            lambda a: ttnn.rms_norm_forward(a[0], a[1])[0],
            lambda a: F.rms_norm(a[0], (WIDTH,), a[1].reshape(-1), 1e-6),
            [x, w],
        ),
        (
            "swiglu",
            f"x [{BATCH}, 1, {BLOCK}, {WIDTH}], hidden {hidden}",
            lambda a: ttnn.swiglu(a[0], a[1], a[2], a[3]),
            lambda a: (F.silu(a[0] @ a[1]) * (a[0] @ a[3])) @ a[2],
            [x, w1, w2, w3],
        ),
        (
            "sdpa_forward (causal, dropout 0.2)",
            f"[{BATCH}, {HEADS}, {BLOCK}, {hd}]",
            lambda a: ttnn.transformer.scaled_dot_product_attention_forward(
                a[0],
                a[1],
                a[2],
                is_causal=True,
                dropout_probability=DROPOUT,
                seed=1,
                return_intermediates=True,
            )[0],
            lambda a: F.scaled_dot_product_attention(a[0], a[1], a[2], is_causal=True, dropout_p=DROPOUT),
            [q, k, v],
        ),
        (
            "sample (greedy)",
            f"[{BATCH}, 1, {BLOCK}, {vocab}]",
            lambda a: ttnn.sample(a[0], temperature=0.0),
            lambda a: a[0].argmax(-1),
            [logits],
        ),
    ]


def _to_ttnn(mesh, arrays, grad: bool):
    out = []
    for a in arrays:
        if a.dtype == np.uint32:
            out.append(ttnn.from_numpy(a, dtype=ttnn.uint32, device=mesh))
        else:
            t = ttnn.from_numpy(a, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh)
            t.requires_grad = grad
            out.append(t)
    return out


def _to_torch(arrays, grad: bool):
    return [
        torch.from_numpy(a.astype(np.int64)) if a.dtype == np.uint32 else torch.tensor(a, requires_grad=grad)
        for a in arrays
    ]


def _bench_one(mesh, name, shape, tt_fn, th_fn, arrays, repeats):
    differentiable = name != "sample (greedy)"
    tt_in, th_in = _to_ttnn(mesh, arrays, differentiable), _to_torch(arrays, differentiable)
    with ttnn.autograd.no_grad():
        tt_fwd = median_ms(lambda: tt_fn(tt_in), repeats)
    with torch.no_grad():
        th_fwd = median_ms(lambda: th_fn(th_in), repeats)
    if not differentiable:
        return name, shape, tt_fwd, th_fwd, None, None

    def tt_setup():
        y = tt_fn(tt_in)
        return y, ttnn.ones_like(y)

    def th_setup():
        y = th_fn(th_in)
        return y, torch.ones_like(y)

    tt_bwd = median_ms(lambda yg: yg[0].backward(yg[1]), repeats, tt_setup)
    th_bwd = median_ms(lambda yg: yg[0].backward(yg[1]), repeats, th_setup)
    return name, shape, tt_fwd, th_fwd, tt_bwd, th_bwd


def bench_ops(repeats: int) -> list[tuple[str, str, float, float, float | None, float | None]]:
    """Per-op figures, torch on one thread like the emulator (its multi-threaded small ops are noisy on a
    shared machine)."""
    rng = np.random.default_rng(0)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = [_bench_one(mesh, *case, repeats) for case in _fused_cases(mesh, rng)]
        rows.extend(_bench_optimizer_steps(mesh, rng, repeats))
    finally:
        torch.set_num_threads(threads)
        ttnn.close_mesh_device(mesh)
    return rows


def _bench_optimizer_steps(mesh, rng, repeats):
    shape = (WIDTH, 4 * WIDTH)
    p0 = rng.standard_normal(shape).astype(np.float32)
    g0 = rng.standard_normal(shape).astype(np.float32)
    out = []
    for name, make_ttnn, make_torch in (
        (
            "sgd_step_ (momentum 0.9)",
            lambda ps: ttnn.optim.SGD(ps, lr=1e-2, momentum=0.9),
            lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, foreach=False),
        ),
        (
            "adamw_step_",
            lambda ps: ttnn.optim.AdamW(ps, lr=1e-3),
            lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=False),
        ),
    ):
        p = ttnn.nn.module.make_parameter(p0, device=mesh)
        p.grad = ttnn.from_numpy(g0, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh)
        opt = make_ttnn([p])
        tp = torch.tensor(p0, requires_grad=True)
        tp.grad = torch.tensor(g0)
        topt = make_torch([tp])
        out.append(
            (
                name,
                f"param {list(shape)}",
                median_ms(opt.step, repeats),
                median_ms(topt.step, repeats),
                None,
                None,
            )
        )
    return out


# --- thread settings ---------------------------------------------------------------------------------------------

_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def bench_thread_settings(steps: int) -> tuple[float, float]:
    """Median emulator step (ms) in a fresh process with no thread variables, then in one with
    ``OPENBLAS_NUM_THREADS=1`` (run one after the other, never side by side)."""
    clean = {k: v for k, v in os.environ.items() if k not in _THREAD_VARIABLES and k != "TTTV2_NUM_THREADS"}
    times = []
    for env in (clean, {**clean, "OPENBLAS_NUM_THREADS": "1"}):
        out = subprocess.run(
            [sys.executable, __file__, "--emulator-step-ms", "--steps", str(steps)]
            + (["--quick"] if LAYERS != 6 else []),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        times.append(json.loads(out.stdout.strip().splitlines()[-1])["emulator_ms"])
    return times[0], times[1]


# --- parallel strategies ------------------------------------------------------------------------------------------

# (label, strategy, mesh, options): TP needs the 6 heads to divide by its size; PP cuts the 6 layers in 2 stages
PARALLEL_RUNS = [
    ("1 device", "none", (1, 1), {}),
    ("DDP 1x2", "ddp", (1, 2), {}),
    ("DDP 1x4", "ddp", (1, 4), {}),
    ("TP 1x2", "tp", (1, 2), {}),
    ("TP 1x3", "tp", (1, 3), {}),
    ("TP 1x6", "tp", (1, 6), {}),
    ("PP 1x2 GPipe M=4", "pp", (1, 2), {"schedule": "gpipe"}),
    ("PP 1x2 1F1B M=4", "pp", (1, 2), {"schedule": "1f1b"}),
    ("DDP x TP 2x3", "ddp+tp", (2, 3), {}),
]


def _parallel_step(strategy: str, mesh, options: dict):
    """Build the NanoGPT for ``strategy`` on ``mesh``; returns ``step(x, y)`` (one training step)."""
    P = ttnn.nn.parallel
    ttnn.nn.manual_seed(0)
    config = ttnn.nn.GPTConfig(
        vocab_size=len(VOCAB), block_size=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH, dropout=DROPOUT
    )
    model = ttnn.nn.GPT(config, device=mesh)
    if strategy == "pp":
        model = P.Pipeline(P.pipeline_stages(model, 2), mesh, micro_batches=4, schedule=options["schedule"])
    elif strategy == "ddp":
        model = P.DistributedDataParallel(model, mesh)
    elif strategy == "tp":
        model = P.TensorParallel(model, mesh)
    elif strategy == "ddp+tp":
        model = P.DistributedDataParallel(P.TensorParallel(model, mesh, cluster_axis=1), mesh, cluster_axis=0)
    opt = ttnn.optim.AdamW(model.parameters(), lr=3e-4)

    def place(a):
        if strategy in ("ddp", "ddp+tp"):
            return P.shard_batch(a, mesh, cluster_axis=0 if strategy == "ddp+tp" else None)
        return ttnn.from_numpy(a, dtype=ttnn.uint32, device=mesh)

    def step(x, y) -> None:
        opt.zero_grad()
        if strategy == "pp":
            model.forward_backward(x, y)
        else:
            loss = ttnn.cross_entropy_loss(model(place(x)), place(y))
            loss.backward()
        opt.step()

    return step


def bench_parallel(strategies: set[str], steps: int) -> list[tuple[str, float, float, float]]:
    """(label, ms / step, parameter MiB per device, peak DRAM MiB per device during a step) per run."""
    from tttv2.ttnn.memory_tracker import MemoryTracker

    ids = np.array([VOCAB.index(c) for c in TEXT], dtype=np.uint32)
    rows = []
    for label, strategy, shape, options in PARALLEL_RUNS:
        if strategy not in strategies and strategy != "none":
            continue
        rng = np.random.default_rng(0)
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        try:
            before = max(r["dram_used"] for r in mesh.memory_report())
            step = _parallel_step(strategy, mesh, options)
            params = max(r["dram_used"] for r in mesh.memory_report()) - before
            tracker = MemoryTracker(mesh)
            times = []
            for i in range(steps + 1):
                x, y = batch(rng, ids)
                with tracker.phase("step"):
                    start = time.perf_counter()
                    step(x, y)
                    if i:  # the first step allocates the optimizer state
                        times.append(time.perf_counter() - start)
            peak = max(s.dram_peak for s in tracker.snapshots[-mesh.get_num_devices() :])
            rows.append((label, 1e3 * statistics.median(times), params / 2**20, peak / 2**20))
        finally:
            ttnn.close_mesh_device(mesh)
    return rows


def print_parallel(rows, steps: int) -> None:
    print(
        f"\nNanoGPT step by parallel strategy ({LAYERS} layers, {WIDTH} wide, {HEADS} heads, block {BLOCK}, batch "
        f"{BATCH}, AdamW, median of {steps} steps; memory: the device with the most, MiB)"
    )
    _, base_time, base_params, base_peak = rows[0]  # one device
    print(
        f"| {'strategy':18} | {'ms / step':>9} | {'x 1 dev':>7} | {'params':>7} | {'x 1 dev':>7} | {'peak':>7} | "
        f"{'x 1 dev':>7} |"
    )
    print("|" + "|".join("-" * n for n in (20, 11, 9, 9, 9, 9, 9)) + "|")
    for label, ms, params, peak in rows:
        print(
            f"| {label:18} | {ms:9.0f} | {ms / base_time:7.2f} | {params:7.2f} | {params / base_params:7.2f} | "
            f"{peak:7.2f} | {peak / base_peak:7.2f} |"
        )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5, help="timed training steps per framework")
    p.add_argument("--repeats", type=int, default=10, help="timed calls per fused op")
    p.add_argument("--step-only", action="store_true")
    p.add_argument("--ops-only", action="store_true")
    p.add_argument("--threads-only", action="store_true", help="only the thread-settings row (3.)")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="only the step, side by side: this many rounds of --steps steps of the emulator, torch and torch on "
        "one thread, alternating (wall and CPU per step, load average)",
    )
    p.add_argument("--emulator-step-ms", action="store_true", help=argparse.SUPPRESS)  # a child of (3.)
    p.add_argument(
        "--quick",
        action="store_true",
        help="a 2-layer, 192-wide NanoGPT (block 32), one step and one call: a smoke test (its figures mean nothing)",
    )
    p.add_argument(
        "--parallel",
        nargs="?",
        const="ddp,tp,pp,ddp+tp",
        default=None,
        help="only the parallel-strategy table, for these strategies (comma-separated; default all)",
    )
    args = p.parse_args(argv)
    if args.quick:
        global LAYERS, WIDTH, BLOCK
        # 6 heads of 32 (TP 1x6; heads move as whole tiles), 2 layers for 2 pipeline stages
        LAYERS, WIDTH, BLOCK = 2, 192, 32
        args.steps, args.repeats = 1, 1
    if args.emulator_step_ms:
        print(json.dumps({"emulator_ms": bench_emulator_step(args.steps)[0]}))
        return
    print(f"Machine: {machine()}")
    if args.rounds is not None:
        if args.rounds < 1 or args.steps < 1:
            p.error("--rounds and --steps: expected positive integers")
        print_side_by_side(bench_side_by_side(args.rounds, args.steps), args.steps)
        return
    if args.parallel is not None:
        strategies = {s.strip() for s in args.parallel.split(",")}
        unknown = strategies - {"ddp", "tp", "pp", "ddp+tp"}
        if unknown:
            p.error(f"--parallel: expected strategies among ddp, tp, pp, ddp+tp, got {sorted(unknown)}")
        print_parallel(bench_parallel(strategies, args.steps), args.steps)
        return
    if not args.ops_only and not args.step_only:
        default, single = bench_thread_settings(args.steps)
        print(
            f"\nThread settings: the emulator's NanoGPT step, median of {args.steps} steps, one process each"
        )
        print(f"| {'environment':33} | {'ms / step':>10} |")
        print(f"|{'-' * 35}|{'-' * 12}|")
        print(f"| {'no thread variables':33} | {default:10.1f} |")
        print(f"| {'OPENBLAS_NUM_THREADS=1':33} | {single:10.1f} |")
        print(f"| {'ratio (no variables / =1)':33} | {default / single:10.2f} |")
        if args.threads_only:
            return
    if not args.ops_only:
        emulator, reference, single, params = bench_step(args.steps)
        print(
            f"\nNanoGPT training step ({LAYERS} layers, {WIDTH} wide, {HEADS} heads, block {BLOCK}, batch {BATCH}, "
            f"vocab {len(VOCAB)}, {params:,} parameters, float32, median of {args.steps} steps)"
        )
        print(f"| {'':25} | {'ms / step':>10} |")
        print(f"|{'-' * 27}|{'-' * 12}|")
        print(f"| {'emulator (ttnn.nn)':25} | {emulator:10.1f} |")
        print(f"| {f'torch CPU ({torch.get_num_threads()} threads)':25} | {reference:10.1f} |")
        print(f"| {'torch CPU (1 thread)':25} | {single:10.1f} |")
        print(f"| {'emulator / torch':25} | {emulator / reference:10.2f} |")
        print(f"| {'emulator / torch 1 thread':25} | {emulator / single:10.2f} |")
    if not args.step_only:
        rows = bench_ops(args.repeats)
        print(
            f"\nFused training ops (median of {args.repeats} calls, ms, torch on 1 thread; "
            "bwd = the autograd backward of the op alone)"
        )
        header = f"| {'op':36} | {'shape':34} | {'fwd':>7} | {'torch':>7} | {'ratio':>5} | {'bwd':>7} | {'torch':>7} | {'ratio':>5} |"
        print(header)
        print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
        for name, shape, f_tt, f_th, b_tt, b_th in rows:
            bwd = (
                f"{b_tt:7.2f} | {b_th:7.2f} | {b_tt / b_th:5.1f}"
                if b_tt is not None
                else f"{'—':>7} | {'—':>7} | {'—':>5}"
            )
            print(f"| {name:36} | {shape:34} | {f_tt:7.2f} | {f_th:7.2f} | {f_tt / f_th:5.1f} | {bwd} |")


if __name__ == "__main__":
    main()
