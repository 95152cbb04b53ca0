"""The emulator at real model sizes, side by side with torch fp32 (issue 24, row (a)).

A Llama-3.2-1B-size model (the public meta-llama/Llama-3.2-1B config.json numbers, written here; nothing is
downloaded) with seeded random weights:
- emulator: through the tttv1 demo (``run_demo`` with ``config=``, weights streamed one tensor at a time) on an
  emulated 1×8 mesh, bfloat8_b weights (the demo's performance precision);
- torch: Hugging Face ``LlamaForCausalLM`` built from the same config (random init, float32), greedy decoding
  with its KV cache.
Each side runs in its own subprocess (so each peak RSS is its own) and prints one JSON line; this script prints
them side by side: parameters, construction time, bytes per parameter (the growth of the process's resident
memory during construction, per parameter; for the emulator also the devices' DRAM accounting per parameter),
peak RSS, prefill of ``--prompt-len`` tokens, decode per token (median of the steps after the first).

Run from the project root:  python benchmarks/bench_scale.py [--layers 2] [--new-tokens 6] [--only emulator]
``--layers`` cuts the 16 layers down so the benchmark runs quickly (the vocab and the widths stay real).
Rows (b) and (c) of the issue (Llama-3.1-8B, 70B layers) are not here yet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# facts from the public config.json of meta-llama/Llama-3.2-1B
LLAMA_3_2_1B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 16,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "torch_dtype": "bfloat16",
}


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def n_params(config: dict) -> int:
    from tttv2.interfaces import hf_param_shapes

    total = 0
    for shape in hf_param_shapes(config).values():
        size = 1
        for d in shape:
            size *= d
        total += size
    return total


def run_emulator(config: dict, prompt_len: int, new_tokens: int, mesh_shape) -> dict:
    sys.path.insert(0, str(ROOT))
    import tttv1  # noqa: F401 - the emulator as ttnn
    from tttv1.demo.simple_text_demo import make_prompts, run_demo
    from tttv2 import ttnn

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "Llama-3.2-1B" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(config))
        result = run_demo(
            mesh,
            config=str(path),
            prompts=make_prompts(1, None, prompt_len),
            max_new_tokens=new_tokens,
            max_seq_len=256 if prompt_len + new_tokens <= 256 else 2 * (prompt_len + new_tokens),
            verbose=False,
        )
    dram = sum(row["dram_peak"] for row in mesh.memory_report())
    ttnn.close_mesh_device(mesh)
    params = n_params(config)
    return {
        "side": "emulator",
        "params": params,
        "build_s": result.build_seconds,
        "host_bytes_per_param": result.build_rss_bytes / params,
        "device_dram_peak_bytes_per_param": dram / params,
        "peak_rss": peak_rss_bytes(),
        "prefill_s": result.prefill_seconds,
        "prompt_tokens": result.prompt_tokens,
        "decode_s": statistics.median(result.decode_seconds[1:] or result.decode_seconds),
    }


def run_torch(config: dict, prompt_len: int, new_tokens: int) -> dict:
    import torch
    import transformers

    kwargs = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "torch_dtype")}
    hf_config = transformers.LlamaConfig(**kwargs)
    torch.manual_seed(0)
    rss0, t0 = resident_bytes(), time.perf_counter()
    model = transformers.LlamaForCausalLM(hf_config).float().eval()
    build_s, grown = time.perf_counter() - t0, resident_bytes() - rss0
    params = sum(p.numel() for p in model.parameters())  # tied: the shared table once
    tokens = torch.randint(3, 259, (1, prompt_len), generator=torch.Generator().manual_seed(0))
    steps = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model(tokens, use_cache=True)
        prefill_s = time.perf_counter() - t0
        past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for _ in range(new_tokens - 1):
            t0 = time.perf_counter()
            out = model(token, past_key_values=past, use_cache=True)
            steps.append(time.perf_counter() - t0)
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    return {
        "side": "torch fp32",
        "params": params,
        "build_s": build_s,
        "host_bytes_per_param": grown / params,
        "device_dram_peak_bytes_per_param": None,
        "peak_rss": peak_rss_bytes(),
        "prefill_s": prefill_s,
        "prompt_tokens": prompt_len,
        "decode_s": statistics.median(steps[1:] or steps),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/bench_scale.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--layers", type=int, default=16, help="decoder layers (default 16, the real count)")
    parser.add_argument("--prompt-len", type=int, default=128, help="prefill tokens (default 128)")
    parser.add_argument(
        "--new-tokens", type=int, default=6, help="generated tokens (default 6: 5 decode steps)"
    )
    parser.add_argument("--only", choices=["emulator", "torch"], default=None, help="run one side only")
    parser.add_argument("--side", choices=["emulator", "torch"], default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.layers < 1 or args.new_tokens < 2 or args.prompt_len < 1:
        parser.error("--layers and --prompt-len must be >= 1, --new-tokens >= 2")
    config = dict(LLAMA_3_2_1B, num_hidden_layers=args.layers)

    if args.side == "emulator":
        print(json.dumps(run_emulator(config, args.prompt_len, args.new_tokens, (1, 8))))
        return 0
    if args.side == "torch":
        print(json.dumps(run_torch(config, args.prompt_len, args.new_tokens)))
        return 0

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"command: {' '.join(['python', 'benchmarks/bench_scale.py', *(argv or sys.argv[1:])])}")
    print(f"model: Llama-3.2-1B config, {args.layers} layers, random weights; emulator on 1x8")
    rows = []
    for side in ("emulator", "torch"):
        if args.only and args.only != side:
            continue
        cmd = [sys.executable, __file__, "--side", side, "--layers", str(args.layers)]
        cmd += ["--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens)]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            print(f"{side} side failed (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    header = (
        f"{'side':<11} {'params':>8} {'build':>8} {'host B/param':>12} {'DRAM B/param':>12} {'peak RSS':>9} "
        f"{'prefill':>9} {'decode/token':>12}"
    )
    print(header)
    for r in rows:
        dram = (
            "-"
            if r["device_dram_peak_bytes_per_param"] is None
            else f"{r['device_dram_peak_bytes_per_param']:.2f}"
        )
        print(
            f"{r['side']:<11} {r['params'] / 1e6:>7.1f}M {r['build_s']:>7.1f}s {r['host_bytes_per_param']:>12.2f} "
            f"{dram:>12} {r['peak_rss'] / 2**30:>7.2f}GB {r['prefill_s']:>8.2f}s {r['decode_s']:>11.3f}s"
        )
    if len(rows) == 2:
        print(f"decode: emulator / torch = {rows[0]['decode_s'] / rows[1]['decode_s']:.1f}x (goal <= 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
