"""The emulator at real model sizes, side by side with torch fp32 (issue 24, rows (a), (b) and (c)).

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

Rows (b) and (c) (``--row b`` / ``--row c``): one decoder layer at the real size of Llama-3.1-8B on an emulated 1×8
mesh and of Llama-3.1-70B on 8×4, built by ``ModelFactory.from_config`` (seeded random weights streamed to the
devices; the model has that one layer and a 512-id vocab, whose embedding and LM head are not timed), against a
Hugging Face ``LlamaDecoderLayer`` from the same config (random init, float32) with its KV cache. Both sides
are built in their own processes (each peak RSS is its own), then the prefill of ``--prompt-len`` tokens and
``--steps`` decode steps run on one side and then the other, the order swapped every step, so the load of a
shared machine falls on both alike; the ratio printed is the median of the per-step ratios (first step not
counted).

Row (b)'s second half, the whole Llama-3.1-8B (``--row a --model 8b``): row (a)'s path (the tttv1 demo on 1×8, 32
layers, the real 128,256 vocab) with the 8B config. Its torch fp32 side does not fit this machine (8.0 B parameters
× 4 bytes = 32 GB of a 24 GB machine), so the run prints the emulator's figures and the one-layer row (b) is the
side-by-side ratio.
"""

from __future__ import annotations

import argparse
import json
import math
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


# facts from the public config.json files of meta-llama/Llama-3.1-8B and meta-llama/Llama-3.1-70B (rows b, c)
_LLAMA_3_1 = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "torch_dtype": "bfloat16",
}
LLAMA_3_1_8B = {
    **_LLAMA_3_1,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
}
LLAMA_3_1_70B = {
    **_LLAMA_3_1,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
}
# row -> (title, config, mesh)
LAYER_ROWS = {
    "b": ("one Llama-3.1-8B decoder layer", LLAMA_3_1_8B, (1, 8)),
    "c": ("one Llama-3.1-70B decoder layer", LLAMA_3_1_70B, (8, 4)),
}
# the layer benchmark builds the model with one layer and this vocab (the embedding and LM head are not timed;
# at the real 128,256 they would be 0.5 B (8B) and 1.1 B (70B) parameters each, more than the layer). Small: on
# 8x4 the embedding table is replicated over the 8 mesh rows, so a 4,096-id table alone held 1 GB of the host's
# float32 emulated storage and pushed the 70B layer's run over 6 GB
LAYER_BENCH_VOCAB = 512


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


# --model for row (a): name -> (config, the folder name the demo sees, whether torch fp32 fits 24 GB)
WHOLE_MODELS = {
    "1b": (LLAMA_3_2_1B, "Llama-3.2-1B", True),
    "8b": (LLAMA_3_1_8B, "Llama-3.1-8B", False),
}


def run_emulator(
    config: dict, prompt_len: int, new_tokens: int, mesh_shape, name: str = "Llama-3.2-1B"
) -> dict:
    sys.path.insert(0, str(ROOT))
    import tttv1  # noqa: F401 - the emulator as ttnn
    from tttv1.demo.simple_text_demo import make_prompts, run_demo
    from tttv2 import ttnn

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name / "config.json"
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


def layer_params(config: dict) -> int:
    from tttv2.interfaces import hf_param_shapes

    return sum(math.prod(shape) for name, shape in hf_param_shapes(config).items() if ".layers.0." in name)


def _serve(side: str, start, prefill, decode) -> int:
    """A layer-benchmark child: build (``start`` → its JSON facts), then answer the parent's commands on stdin
    one line each ("prefill", "decode", "quit") with one JSON line, so the parent can alternate the two sides."""
    facts = start()
    print(json.dumps({"side": side, **facts}), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "prefill":
            print(json.dumps({"prefill_s": prefill()}), flush=True)
        elif command == "decode":
            print(json.dumps({"decode_s": decode()}), flush=True)
        else:
            print(json.dumps({"peak_rss": peak_rss_bytes()}), flush=True)
            return 0
    return 0


def serve_emulator_layer(row: str, prompt_len: int) -> int:
    """One decoder layer built by ``ModelFactory.from_config`` (seeded random weights streamed to the devices,
    bfloat8_b weights as its performance mode sets them); only the layer's ``prefill_forward`` /
    ``decode_forward`` calls are timed (the embedding, rotary tables and positions are made before)."""
    import numpy as np

    from tttv2 import ttnn
    from tttv2.interfaces import ModelFactory

    _title, base, mesh_shape = LAYER_ROWS[row]
    config = dict(base, num_hidden_layers=1, vocab_size=LAYER_BENCH_VOCAB)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    state = {}

    def start():
        rss0, t0 = resident_bytes(), time.perf_counter()
        model = ModelFactory.from_config(config, mesh, max_seq_len=max(256, 2 * prompt_len), max_batch_size=1)
        build_s, grown = time.perf_counter() - t0, resident_bytes() - rss0
        state["model"] = model
        params = layer_params(config)
        dram = sum(row["dram_peak"] for row in mesh.memory_report())
        return {
            "params": params,
            "build_s": build_s,
            "host_bytes_per_param": grown / params,
            "device_dram_peak_bytes_per_param": dram / params,
        }

    def prefill():
        model = state["model"]
        decoder, layer = model.decoder, model.layers[0]
        prompt = np.arange(3, 3 + prompt_len) % LAYER_BENCH_VOCAB
        x, rot = decoder.embed_prefill(prompt), decoder.rot_mats_prefill(0, prompt_len)
        t0 = time.perf_counter()
        out = layer.prefill_forward(x, rot, user_id=0)
        seconds = time.perf_counter() - t0
        ttnn.deallocate(out)
        state["position"] = prompt_len
        return seconds

    def decode():
        model = state["model"]
        decoder, layer = model.decoder, model.layers[0]
        ids = np.zeros(32, dtype=np.int64)
        ids[0] = 7
        positions = np.array([state["position"]])
        x = decoder.embed_decode(ids)
        current = decoder.prepare_positions(positions)
        rot = decoder.rot_mats_decode(positions)
        t0 = time.perf_counter()
        out = layer.decode_forward(x, current, rot)
        seconds = time.perf_counter() - t0
        ttnn.deallocate(out)
        state["position"] += 1
        return seconds

    return _serve("emulator", start, prefill, decode)


def serve_torch_layer(row: str, prompt_len: int) -> int:
    """Hugging Face ``LlamaDecoderLayer`` from the same config (random init, float32) with its KV cache; the
    rotary embeddings are made before each timed call, as on the emulator side."""
    import torch
    import transformers
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    _title, base, _mesh = LAYER_ROWS[row]
    kwargs = {k: v for k, v in base.items() if k not in ("architectures", "model_type", "torch_dtype")}
    hf_config = transformers.LlamaConfig(
        **kwargs, attn_implementation="sdpa"
    )  # a layer alone has no model to pick it
    state = {}

    def start():
        torch.manual_seed(0)
        rss0, t0 = resident_bytes(), time.perf_counter()
        layer = LlamaDecoderLayer(hf_config, layer_idx=0).float().eval()
        build_s, grown = time.perf_counter() - t0, resident_bytes() - rss0
        state.update(layer=layer, rotary=LlamaRotaryEmbedding(hf_config), cache=transformers.DynamicCache())
        params = sum(p.numel() for p in layer.parameters())
        return {
            "params": params,
            "build_s": build_s,
            "host_bytes_per_param": grown / params,
            "device_dram_peak_bytes_per_param": None,
        }

    def step(length: int) -> float:
        start_pos = state.get("position", 0)
        hidden = torch.randn(
            1, length, hf_config.hidden_size, generator=torch.Generator().manual_seed(start_pos)
        )
        ids = torch.arange(start_pos, start_pos + length)[None]
        with torch.inference_mode():
            rotary = state["rotary"](hidden, ids)
            t0 = time.perf_counter()
            state["layer"](
                hidden, position_ids=ids, cache=state["cache"], use_cache=True, position_embeddings=rotary
            )
            seconds = time.perf_counter() - t0
        state["position"] = start_pos + length
        return seconds

    return _serve("torch fp32", start, lambda: step(prompt_len), lambda: step(1))


def run_layer_row(row: str, prompt_len: int, steps: int, only: str | None = None) -> int:
    """Both sides built in their own processes, then the prefill and each decode step run on one side and then
    the other (the order swapped every step), so the machine's load falls on both alike; ratios per step."""
    title, _base, mesh = LAYER_ROWS[row]
    print(
        f"row ({row}): {title}, emulator on {mesh[0]}x{mesh[1]}; torch fp32 LlamaDecoderLayer; prompt {prompt_len}"
    )
    sides = {}
    for side in ("emulator", "torch"):
        if only and only != side:
            continue
        cmd = [sys.executable, __file__, "--serve", side, "--row", row, "--prompt-len", str(prompt_len)]
        sides[side] = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, bufsize=1
        )

    def ask(side: str, command: str | None) -> dict:
        proc = sides[side]
        if command is not None:
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            raise RuntimeError(
                f"{side} side ended (exit {proc.returncode}) before answering {command or 'start'}"
            )
        return json.loads(line)

    try:
        facts = {side: ask(side, None) for side in sides}
        prefill = {side: ask(side, "prefill")["prefill_s"] for side in sides}
        decode = {side: [] for side in sides}
        for step in range(steps):
            for side in list(sides) if step % 2 == 0 else list(sides)[::-1]:
                decode[side].append(ask(side, "decode")["decode_s"])
        for side in sides:
            facts[side].update(ask(side, "quit"))
    except (RuntimeError, json.JSONDecodeError) as exc:
        for proc in sides.values():
            proc.kill()
        print(f"row ({row}) failed: {exc}", file=sys.stderr)
        return 1
    for proc in sides.values():
        proc.wait()
    header = (
        f"{'side':<11} {'params':>8} {'build':>8} {'host B/param':>12} {'DRAM B/param':>12} {'peak RSS':>9} "
        f"{'prefill':>9} {'decode/token':>12}"
    )
    print(header)
    for side in sides:
        r = facts[side]
        dram = (
            "-"
            if r["device_dram_peak_bytes_per_param"] is None
            else f"{r['device_dram_peak_bytes_per_param']:.2f}"
        )
        print(
            f"{r['side']:<11} {r['params'] / 1e6:>7.1f}M {r['build_s']:>7.1f}s {r['host_bytes_per_param']:>12.2f} "
            f"{dram:>12} {r['peak_rss'] / 2**30:>7.2f}GB {prefill[side]:>8.3f}s "
            f"{statistics.median(decode[side][1:]):>11.3f}s"
        )
    for side in sides:
        print(f"decode steps (s): {side:<8} " + " ".join(f"{t:.3f}" for t in decode[side]))
    if len(sides) < 2:
        return 0
    ratios = [e / t for e, t in zip(decode["emulator"][1:], decode["torch"][1:], strict=True)]
    print(
        f"decode: emulator / torch = {statistics.median(ratios):.2f}x (median of {len(ratios)} alternated steps, "
        f"range {min(ratios):.2f}-{max(ratios):.2f}; goal <= 2x); prefill {prefill['emulator'] / prefill['torch']:.2f}x"
    )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/bench_scale.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--layers", type=int, default=None, help="row a: decoder layers (default: the model's real count)"
    )
    parser.add_argument(
        "--model",
        choices=sorted(WHOLE_MODELS),
        default="1b",
        help="row a: the whole model, Llama-3.2-1B (default) or Llama-3.1-8B (emulator only: torch fp32 needs 32 GB)",
    )
    parser.add_argument("--prompt-len", type=int, default=128, help="prefill tokens (default 128)")
    parser.add_argument(
        "--new-tokens", type=int, default=6, help="generated tokens (default 6: 5 decode steps)"
    )
    parser.add_argument("--only", choices=["emulator", "torch"], default=None, help="run one side only")
    parser.add_argument(
        "--row",
        choices=["a", "b", "c"],
        default="a",
        help="a: Llama-3.2-1B-size model through the tttv1 demo on 1x8 (default); b: one Llama-3.1-8B decoder "
        "layer on 1x8; c: one Llama-3.1-70B decoder layer on 8x4",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=7,
        help="rows b, c: alternated decode steps (default 7; the first is not counted)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="row a with 1 quarter-width layer, a 512-token vocab, 32 prompt tokens and 2 new ones: a smoke test",
    )
    parser.add_argument("--side", choices=["emulator", "torch"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=["emulator", "torch"], default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.row, args.layers, args.prompt_len, args.new_tokens = "a", 1, 32, 2
    if args.serve == "emulator":
        return serve_emulator_layer(args.row, args.prompt_len)
    if args.serve == "torch":
        return serve_torch_layer(args.row, args.prompt_len)
    if args.row != "a":
        if args.steps < 2 or args.prompt_len < 1 or args.prompt_len % 32:
            parser.error("--steps must be >= 2 and --prompt-len a positive multiple of 32 for rows b and c")
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"command: {' '.join(['python', 'benchmarks/bench_scale.py', *(argv or sys.argv[1:])])}")
        return run_layer_row(args.row, args.prompt_len, args.steps, args.only)
    base, name, torch_fits = WHOLE_MODELS[args.model]
    layers = base["num_hidden_layers"] if args.layers is None else args.layers
    if layers < 1 or args.new_tokens < 2 or args.prompt_len < 1:
        parser.error("--layers and --prompt-len must be >= 1, --new-tokens >= 2")
    config = dict(base, num_hidden_layers=layers)
    if args.quick:  # a quarter of the width too: 8 heads of the model's 64, one per device
        config.update(vocab_size=LAYER_BENCH_VOCAB, hidden_size=512, intermediate_size=2048)
        config.update(num_attention_heads=8, num_key_value_heads=8)

    if args.side == "emulator":
        print(json.dumps(run_emulator(config, args.prompt_len, args.new_tokens, (1, 8), name)))
        return 0
    if args.side == "torch":
        print(json.dumps(run_torch(config, args.prompt_len, args.new_tokens)))
        return 0

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"command: {' '.join(['python', 'benchmarks/bench_scale.py', *(argv or sys.argv[1:])])}")
    print(f"model: {name} config, {layers} layers, random weights; emulator on 1x8")
    rows = []
    for side in ("emulator", "torch"):
        if args.only and args.only != side:
            continue
        if side == "torch" and not torch_fits:
            print(
                f"torch fp32: not run ({n_params(config) / 1e9:.1f} B parameters x 4 bytes do not fit this machine)"
            )
            continue
        cmd = [sys.executable, __file__, "--side", side, "--layers", str(layers), "--model", args.model]
        cmd += ["--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens)]
        cmd += ["--quick"] if args.quick else []
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
