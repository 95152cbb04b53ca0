"""Benchmark the TTTv2 modules against the tttv1 modules they replace, side by side in one run on the emulator.

For each row: the decode and prefill forward time of ours and of the tttv1 module built from the same ModelArgs
and state dict (median CPU time of this process over --repeats calls, and minimum wall time; ours and tttv1 alternate;
inputs are made outside the timed part), and their ratio (target <= 1.0: a flattened module must not be
slower). CPU time rather than wall time because the machine is shared: waiting for a core is not the module's. Then the construction (+ weight loading)
time of MLP1D.from_model_args with a cold and with a warm LazyWeight disk cache.

Run from the project root:  python benchmarks/bench_modules.py [--repeats 7] [--only MLP1D RMSNorm2D]
Prints the machine, the command and tables; nothing is written.

Adding a row (e.g. the attention modules): write ``def my_row(mesh) -> dict[mode, Pair]`` and add
``Row("Attention1D", (1, 8), "Llama-3.1-8B-tiny", my_row)`` to ROWS; a Pair holds the two forwards and a function
making a fresh input for them.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# a multi-threaded OpenBLAS spins its threads on this 2-core VM, which swamps small matmuls' timings (as in
# bench_train); set before numpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tttv1  # noqa: E402, F401 - installs the emulator as `ttnn` for tttv1's modules
from tttv2 import ttnn  # noqa: E402
from tttv2.modules import (  # noqa: E402
    MLP1D,
    MLP2D,
    Attention1D,
    Attention2D,
    Decoder1D,
    Decoder2D,
    Embedding1D,
    LMHead1D,
    RMSNorm1D,
    RMSNorm2D,
    RotarySetup1D,
    clear_tt_ccl_cache,
    get_tt_ccl,
)
from tttv2.testing.legacy import catalogue_state_dicts, tttv1_model_args  # noqa: E402


@dataclass
class Pair:
    """One mode of one row: ``ours(x)`` and ``legacy(x)`` each get a fresh ``make_input()``."""

    ours: Callable
    legacy: Callable
    make_input: Callable


@dataclass
class Row:
    name: str
    mesh_shape: tuple[int, int]
    model: str
    setup: Callable  # (mesh, args, state_dict) -> {"decode": Pair, "prefill": Pair}


def _activation(mesh, args, rows, memory_config=None, mapper=None):
    host = np.random.default_rng(rows).standard_normal((1, 1, rows, args.dim)).astype(np.float32)

    def make():
        return ttnn.from_numpy(
            host,
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            memory_config=memory_config,
            mesh_mapper=mapper or ttnn.ReplicateTensorToMesh(mesh),
        )

    return make


def mlp_row(mesh, args, state_dict):
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.mlp import MLP

    legacy = MLP(mesh, TT_CCL(mesh), args, state_dict, None, 0, ttnn.bfloat8_b, args.get_model_config())
    galaxy = args.is_galaxy
    cls = MLP2D if galaxy else MLP1D
    ours = cls.from_model_args(mesh, get_tt_ccl(mesh), args, state_dict, None, layer_num=0)
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=tuple(mesh.shape)) if galaxy else None
    decode_mem = args.model_config["MLP_ACT_MEMCFG" if galaxy else "SHARDED_MLP_INPUT_MEMCFG"]
    return {
        "decode": Pair(
            ours.decode_forward,
            lambda x: legacy(x, "decode"),
            _activation(mesh, args, 32, decode_mem, mapper),
        ),
        "prefill": Pair(
            ours.prefill_forward, lambda x: legacy(x, "prefill"), _activation(mesh, args, 128, None, mapper)
        ),
    }


def rmsnorm_1d_row(mesh, args, state_dict):
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.rmsnorm import RMSNorm

    program, memory = (
        args.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
        args.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
    )
    legacy = RMSNorm(
        device=mesh, dim=args.dim, eps=args.norm_eps, state_dict=state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", 0), weight_key="attention_norm",
        is_distributed=args.is_distributed_norm, sharded_program_config=program, sharded_output_config=memory,
        ccl_topology=args.ccl_topology(), tt_ccl=TT_CCL(mesh),
    )  # fmt: skip
    ours = RMSNorm1D.from_model_args(
        mesh, get_tt_ccl(mesh), args, state_dict, None, 0, "attention_norm",
        sharded_program_config=program, sharded_output_config=memory,
    )  # fmt: skip
    return {
        "decode": Pair(
            ours.decode_forward,
            lambda x: legacy(x, mode="decode", in_sharded=True, out_sharded=True),
            _activation(mesh, args, 32, memory),
        ),
        "prefill": Pair(
            ours.prefill_forward, lambda x: legacy(x, mode="prefill"), _activation(mesh, args, 128)
        ),
    }


def rmsnorm_2d_row(mesh, args, state_dict):
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.distributed_norm import DistributedNorm
    from tttv1.tt.rmsnorm import RMSNorm

    tt_ccl = TT_CCL(mesh)
    inner = RMSNorm(
        device=mesh, dim=args.dim, eps=args.norm_eps, state_dict=state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", 0), weight_key="attention_norm",
        is_distributed=args.is_distributed_norm, ccl_topology=args.ccl_topology(), tt_ccl=tt_ccl,
    )  # fmt: skip
    legacy = DistributedNorm(inner, args, tt_ccl, TG=True)
    ours = RMSNorm2D.from_model_args(mesh, tt_ccl, args, state_dict, None, 0, "attention_norm")
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=tuple(mesh.shape))
    return {
        mode: Pair(
            getattr(ours, f"{mode}_forward"),
            lambda x, m=mode: legacy(x, m),
            _activation(mesh, args, rows, None, mapper),
        )
        for mode, rows in (("decode", 32), ("prefill", 128))
    }


def embedding_row(mesh, args, state_dict):
    from tttv1.tt.embedding import Embedding

    legacy = Embedding(mesh, args, None, state_dict, ttnn.bfloat16)
    ours = Embedding1D.from_model_args(mesh, args, None, state_dict, ttnn.bfloat16)

    def ids(count):
        host = np.random.default_rng(count).integers(0, args.vocab_size, (1, 1, 1, count)).astype(np.uint32)
        return lambda: ttnn.from_numpy(
            host, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
        )

    return {
        "decode": Pair(ours.decode_forward, lambda x: ttnn.unsqueeze_to_4D(legacy(x)), ids(32)),
        "prefill": Pair(ours.prefill_forward, lambda x: ttnn.unsqueeze_to_4D(legacy(x)), ids(128)),
    }


def lm_head_row(mesh, args, state_dict):
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.lm_head import LMHead

    columns = args.max_columns_per_device_lm_head
    legacy = LMHead(args, mesh, TT_CCL(mesh), ttnn.bfloat8_b, state_dict, "", None, columns)
    ours = LMHead1D.from_model_args(mesh, args, state_dict, "", None, columns, dtype=ttnn.bfloat8_b)
    make = _activation(mesh, args, 32, args.model_config["LM_HEAD_INPUT_MEMCFG"])
    return {
        mode: Pair(getattr(ours, f"{mode}_forward"), lambda x, m=mode: legacy(x, mode=m), make)
        for mode in ("decode", "prefill")
    }


def rope_row(mesh, args, state_dict):
    from tttv1.tt.common import get_prefill_rot_mat
    from tttv1.tt.rope import RotarySetup

    legacy = RotarySetup(
        mesh, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )
    ours = RotarySetup1D.from_model_args(mesh, args)
    positions = torch.arange(args.max_batch_size) * 3
    return {
        "decode": Pair(
            ours.decode_forward, legacy.get_rot_mats, lambda: ours.get_rot_idxs(positions.numpy())
        ),
        "prefill": Pair(
            lambda start: ours.prefill_forward(start, 128),
            lambda start: get_prefill_rot_mat(
                args.head_dim, mesh, 128, args.rope_theta, args.rope_scaling, start
            ),
            lambda: 64,
        ),
    }


def attention_row(mesh, args, state_dict):
    """tttv1's Attention and ours (Attention1D / Attention2D.from_model_args): one prefill of 128 tokens, one
    decode step of all users; positions and rotary matrices are made outside the timed part."""
    from tttv1.tt.attention import Attention
    from tttv1.tt.ccl import TT_CCL
    from tttv1.tt.common import get_prefill_rot_mat
    from tttv1.tt.rope import RotarySetup

    rope = RotarySetup(
        mesh, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )
    mats = rope.get_both_trans_mats()
    legacy = Attention(mesh, TT_CCL(mesh), args, state_dict, None, 0, ttnn.bfloat8_b, mats, args)
    cls = Attention2D if args.is_galaxy else Attention1D
    ours = cls.from_model_args(mesh, get_tt_ccl(mesh), args, state_dict, None, 0, mats, dtype=ttnn.bfloat8_b)
    positions = torch.arange(args.max_batch_size) + 100
    split = args.is_galaxy and args.max_batch_size > 1
    current_pos = ttnn.from_torch(
        positions,
        device=mesh,
        dtype=ttnn.int32,
        mesh_mapper=ttnn.ShardTensor2dMesh(
            mesh, dims=(None, 0) if split else (None, None), mesh_shape=tuple(mesh.shape)
        ),
    )
    decode_rot = rope.get_rot_mats(positions)
    prefill_rot = get_prefill_rot_mat(args.head_dim, mesh, 128, args.rope_theta, args.rope_scaling)
    galaxy = args.is_galaxy
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=tuple(mesh.shape)) if galaxy else None
    decode_mem = None if galaxy else args.model_config["SHARDED_ATTN_INPUT_MEMCFG"]
    return {
        "decode": Pair(
            lambda x: ours.decode_forward(x, current_pos, decode_rot),
            lambda x: legacy(x, current_pos, decode_rot, mode="decode"),
            _activation(mesh, args, 32, decode_mem, mapper),
        ),
        "prefill": Pair(
            lambda x: ours.prefill_forward(x, prefill_rot),
            lambda x: legacy(x, None, prefill_rot, 0, "prefill"),
            _activation(mesh, args, 128, None, mapper),
        ),
    }


def decoder_row(mesh, args, state_dict):
    """The whole model, host side included: tttv1's Generator and Decoder1D / Decoder2D (same ModelArgs and
    weights). Prefill: one 40-token prompt (logits of its last token); decode: one step of all users."""
    from tttv1.tt.generator import Generator
    from tttv1.tt.model import Transformer

    generator = Generator(Transformer(args, ttnn.bfloat8_b, mesh, state_dict, None), args, mesh)
    ours = (Decoder2D if args.is_galaxy else Decoder1D).from_model_args(mesh, args, state_dict)
    users = args.max_batch_size
    tokens = torch.randint(3, args.vocab_size, (users, 40), generator=torch.Generator().manual_seed(0))
    positions = torch.full((users,), 40)
    return {
        "decode": Pair(
            lambda t: ours.decode(t.numpy(), positions.numpy()),
            lambda t: generator.decode_forward_text(t, positions),
            lambda: tokens[:, 0],
        ),
        "prefill": Pair(
            lambda t: ours.prefill(t[0].numpy()),
            lambda t: generator.prefill_forward_text(t[:1]),
            lambda: tokens,
        ),
    }


ROWS = [
    Row("MLP1D", (1, 8), "Llama-3.1-8B-tiny", mlp_row),
    Row("MLP2D", (8, 4), "Llama-3.1-8B-tiny", mlp_row),
    Row("RMSNorm1D", (1, 8), "Llama-3.1-8B-tiny", rmsnorm_1d_row),
    Row("RMSNorm2D", (8, 4), "Llama-3.1-8B-tiny", rmsnorm_2d_row),
    Row("Embedding1D", (1, 8), "Llama-3.1-8B-tiny", embedding_row),
    Row("LMHead1D", (1, 8), "Llama-3.1-8B-tiny", lm_head_row),
    Row("RotarySetup1D", (1, 8), "Llama-3.1-8B-tiny", rope_row),
    Row("Attention1D", (1, 8), "Llama-3.1-8B-tiny", attention_row),
    Row("Attention2D", (8, 4), "Llama-3.1-8B-tiny", attention_row),
    Row("Decoder1D", (1, 8), "Llama-3.1-8B-tiny", decoder_row),
    Row("Decoder2D", (8, 4), "Llama-3.1-8B-tiny", decoder_row),
]


def _time(fn, make_input) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process — all its threads) of one call on a fresh input."""
    x = make_input()
    gc.collect()
    gc.disable()  # a collection triggered by the other side's garbage must not land in this call
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        fn(x)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()


def bench_forwards(rows, repeats: int):
    print(
        "| module | mesh | mode | ours CPU (ms) | tttv1 CPU (ms) | ours / tttv1 (CPU) | ours / tttv1 (min wall) |"
    )
    print("|---|---|---|---:|---:|---:|---:|")
    ratios = []
    meshes: dict = {}
    for row in rows:
        if row.mesh_shape not in meshes:
            meshes[row.mesh_shape] = ttnn.open_mesh_device(ttnn.MeshShape(*row.mesh_shape))
        mesh = meshes[row.mesh_shape]
        args = tttv1_model_args(mesh, row.model)
        _, state_dict = catalogue_state_dicts(args)
        for mode, pair in row.setup(mesh, args, state_dict).items():
            for _ in range(2):  # warm-up: weights converted, caches filled
                _time(pair.ours, pair.make_input)
                _time(pair.legacy, pair.make_input)
            ours, legacy = [], []
            for _ in range(repeats):
                ours.append(_time(pair.ours, pair.make_input))
                legacy.append(_time(pair.legacy, pair.make_input))
            o, t = (statistics.median(cpu for _, cpu in runs) for runs in (ours, legacy))
            wall = min(w for w, _ in ours) / min(w for w, _ in legacy)
            ratios.append(o / t)
            shape = "x".join(map(str, row.mesh_shape))
            print(
                f"| {row.name} | {shape} | {mode} | {o * 1e3:.2f} | {t * 1e3:.2f} | {o / t:.2f} | {wall:.2f} |"
            )
    for mesh in meshes.values():
        ttnn.close_mesh_device(mesh)
    clear_tt_ccl_cache()
    print(f"\ngeometric mean of ours / tttv1 (CPU): {statistics.geometric_mean(ratios):.3f}")


def bench_construction(repeats: int):
    """MLP1D.from_model_args + load_device_weights: no cache, cold cache (convert + write), warm cache (read)."""
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    args = tttv1_model_args(mesh, "Llama-3.1-8B-tiny")
    args.dummy_weights = False  # a checkpoint: weights are cached
    _, state_dict = catalogue_state_dicts(args)

    def build(cache):
        start = time.perf_counter()
        MLP1D.from_model_args(
            mesh, get_tt_ccl(mesh), args, state_dict, cache, layer_num=0
        ).load_device_weights()
        return time.perf_counter() - start

    none, cold, warm = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            none.append(build(None))
            cold.append(build(Path(tmp)))
            warm.append(build(Path(tmp)))
    ttnn.close_mesh_device(mesh)
    n, c, w = (statistics.median(v) * 1e3 for v in (none, cold, warm))
    print("\n| MLP1D construction + load_device_weights (1x8, Llama-3.1-8B-tiny) | ms |")
    print("|---|---:|")
    print(
        f"| no cache | {n:.1f} |\n| cold cache (convert, fingerprint, write) | {c:.1f} |\n| warm cache (fingerprint, read) | {w:.1f} |"
    )
    print(f"\nwarm / cold: {w / c:.2f}, warm / no cache: {w / n:.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per module, mode and side")
    parser.add_argument("--only", nargs="*", help="row names to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="--repeats 1 --only MLP1D: a smoke test")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.repeats, opts.only = 1, opts.only or ["MLP1D"]
    if opts.repeats < 1:
        parser.error("--repeats must be >= 1")
    rows = [r for r in ROWS if not opts.only or r.name in opts.only]
    if opts.only and len(rows) != len(set(opts.only)):
        parser.error(f"--only: unknown rows {sorted(set(opts.only) - {r.name for r in ROWS})}")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, "
        f"load average {os.getloadavg()[0]:.1f}; python {platform.python_version()}"
    )
    print(
        f"command: python benchmarks/bench_modules.py {' '.join(argv if argv is not None else sys.argv[1:])}\n"
    )
    bench_forwards(rows, opts.repeats)
    bench_construction(max(1, opts.repeats // 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
