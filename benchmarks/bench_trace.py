"""Benchmark trace-deps.

1. Whole process, side by side in one run: ``trace-deps --json`` on the built-in ``attention.py`` +
   ``model_config.py`` against a process that only runs ``ast.parse`` on the same files, as a ratio. The two run
   in pairs, --process-repeat times, the order inside each pair alternating (A B, B A, ...) so a drift in the
   machine's speed weighs on both. Reported: CPU time of the children (user + sys: the best of each, and the
   median of the per-pair ratios) and the median wall time. trace-deps runs as users run it: the installed
   console script (or --trace-deps SCRIPT), twice: with compiled bytecode (as pip installs a wheel) and in the
   environment as it is (where PYTHONDONTWRITEBYTECODE and an editable install mean the package's modules are
   compiled from source at every run).
   With --peer SCRIPT (tt-metal's own tracer, models/common/modules/mlp/trace_dependencies.py of a tt-metal
   checkout; not shipped here), also the user's command against the peer's, on the same real files:
   ``trace-deps MODULE CONFIG --json=OUT`` against ``python SCRIPT --json-file OUT MODULE CONFIG`` (MODULE and
   CONFIG default to the peer checkout's models/tt_transformers/tt/attention.py and model_config.py; the peer
   also reads ccl.py there). Without --peer that pairing is skipped with a printed note.
2. Lines analysed per second (one process, so per core) for the whole ``analyze()`` call (parse + index +
   dependency graph + classification + paths), on the built-in model, on every built-in TTTv1 module, and on
   large generated model_config-like modules; next to ``ast.parse`` alone on the same files in the same process
   (the ratio of the two is what a busy machine changes least).

Run from the project root:  python benchmarks/bench_trace.py [--lines 8000] [--repeat 5] [--process-repeat 20]
    [--trace-deps SCRIPT] [--peer SCRIPT [--peer-module FILE] [--peer-config FILE] [--peer-only]]
Prints the machine, the command and the tables. Nothing is written unless --doc FILE is given, in which case the
tables replace the "## Benchmark" section of that file (docs/trace_deps.md).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import gc
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tttv2_tools.trace_dependencies import TraceError, analyze  # noqa: E402
from tttv2_tools.trace_dependencies.export import to_json  # noqa: E402

GOAL = 60_000
PROCESS_GOAL = 2.0  # whole process <= 2x the parse-only process
PEER_GOAL = 1.0  # whole process <= tt-metal's own tracer on the same files (issue 26)

BLOCK = """
        # ---- block {i} ----
        grid_{i} = self.dram_shard_core_grid_for_k(self.dim // {d})
        rows_{i} = lambda seq_len: min(seq_len, 1024) // self.tile_size + {i}
        self.width_{i} = self.hidden_dim // ({d} * self.num_devices)
        if self.is_galaxy:
            self.model_config["BLOCK{i}_PROGCFG"] = self.matmul_config(m=32, k=self.dim // 4, n=self.width_{i},
                                                                       grid_size=(8, 2))
        else:
            self.model_config["BLOCK{i}_PROGCFG"] = self.dram_matmul_config(
                m=self.tile_padded_batch_rows, k=self.dim, n=self.width_{i}, num_cores=grid_{i}.num_cores
            )
        self.model_config[
            "BLOCK{i}_MEMCFG"
        ] = ttnn.DRAM_MEMORY_CONFIG if os.getenv("BLOCK{i}_DRAM") else ttnn.create_sharded_memory_config(
            (self.tile_padded_batch_rows, self.width_{i} // grid_{i}.num_cores), grid_{i}
        )
        self.model_config["BLOCK{i}_PREFILL"] = lambda seq_len: self.matmul_config(
            m=min(seq_len, self.prefill_len_cutoff), k=self.dim, n=self.width_{i}, grid_size=(8, rows_{i}(seq_len))
        )
        self.model_config["BLOCK{i}_FUSED"] = self.model_config["BLOCK{i}_MEMCFG"] if self.dim >= 4096 else None
"""

METHOD = """
    def helper_{i}(self, mode, seq_len=1):
        if mode == "decode":
            return self.model_config["BLOCK{j}_PROGCFG"]
        elif seq_len > {s}:
            return self.matmul_config(m=seq_len, k=self.dim, n=self.width_{j}, grid_size=(8, 8))
        return self.model_config["BLOCK{j}_PREFILL"](seq_len)
"""

HEADER = '''"""Generated model_config-like module for benchmarks/bench_trace.py."""

import math
import os

import ttnn


class ModelArgs:
    OP_KEYS = tuple(f"OP{{i}}" for i in range(8))

    def __init__(self, mesh_device, max_batch_size=1):
        self.num_devices = mesh_device.get_num_devices()
        self.cluster_shape = list(mesh_device.shape)
        self.is_galaxy = self.num_devices == 32
        self.tile_size = 32
        self.dim = int(os.getenv("DIM", "4096"))
        self.hidden_dim = 4 * self.dim
        self.tile_padded_batch_rows = 32 * math.ceil(max_batch_size / 32)
        self.prefill_len_cutoff = 512 if ttnn.get_arch_name() == "blackhole" else 1024
        self.model_config = {{}}
        self.model_config.update({{f"{{key}}_MEMCFG": ttnn.DRAM_MEMORY_CONFIG for key in self.OP_KEYS}})
'''

FOOTER = """
    def dram_shard_core_grid_for_k(self, k):
        cores = max(c for c in range(1, 65) if (k // self.tile_size) % c == 0)
        return ttnn.CoreGrid(x=min(cores, 8), y=max(cores // 8, 1))

    def matmul_config(self, m, k, n, grid_size):
        per_core_n = math.ceil(n / (self.tile_size * grid_size[0]))
        return ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(per_core_M=m // 32, per_core_N=per_core_n,
                                                               out_subblock_w=1 if self.is_galaxy else 4)

    def dram_matmul_config(self, m, k, n, num_cores):
        return ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(per_core_N=n // (32 * num_cores))
"""

CONSUMER = '''"""Generated consumer reading {n} keys through forward() (stress: every key is resolved)."""

import ttnn


class Block:
    def __init__(self, args, model_config):
        self.args = args
        self.model_config = model_config

    def forward(self, x, mode):
        seq_len = x.shape[-2]
        TG = self.args.is_galaxy
{body}
        return x
'''

READ = """        if mode == "decode" and not TG:
            x = ttnn.linear(x, x, program_config=self.model_config["BLOCK{i}_PROGCFG"],
                            memory_config=self.model_config["BLOCK{i}_MEMCFG"])
        else:
            x = ttnn.linear(x, x, program_config=self.model_config["BLOCK{i}_PREFILL"](seq_len))
        x = ttnn.to_memory_config(x, self.args.helper_{i}(mode, seq_len) or self.model_config["BLOCK{i}_FUSED"])
"""


def generate(folder: Path, target_lines: int, read_all: bool) -> tuple[Path, Path]:
    blocks, methods = [], []
    i = 0
    text = HEADER
    while (
        text.count("\n") + sum(b.count("\n") for b in blocks) + sum(m.count("\n") for m in methods)
        < target_lines
    ):
        blocks.append(BLOCK.format(i=i, d=1 + i % 7))
        methods.append(METHOD.format(i=i, j=i, s=128 * (1 + i % 8)))
        i += 1
    config = folder / "model_config.py"
    config.write_text(HEADER.format() + "".join(blocks) + "".join(methods) + FOOTER)
    n = i if read_all else 4
    body = "".join(READ.format(i=k) for k in range(n))
    consumer = folder / ("consumer_all.py" if read_all else "consumer.py")
    consumer.write_text(CONSUMER.format(n=n, body=body))
    return consumer, config


def measure(module: Path, config: Path | None, repeat: int) -> dict:
    return measure_many([(module, config)], repeat)


def measure_many(inputs: list[tuple[Path, Path | None]], repeat: int) -> dict:
    """CPU time (time.process_time: what one core spends, not time spent waiting for a core on a busy machine)
    and wall time of the analyze() calls on ``inputs`` (summed over the inputs, best / median of ``repeat``
    rounds); plus ast.parse alone on the files each analysis reads, as a calibration. Each file is counted
    once per analysis that reads it, as the analysis parses it once per analysis."""
    cpu, wall, analyses = [], [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        analyses = [analyze(module, config) for module, config in inputs]
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    lines = sum(a.stats["lines"] for a in analyses)
    texts = [
        Path(p).read_text()
        for (module, config), a in zip(inputs, analyses)
        for p in _files(module, config, a)
    ]
    parse = []
    gc.disable()  # as analyze() does, so the calibration is like for like
    try:
        for _ in range(repeat):
            c0 = time.process_time()
            for text in texts:
                ast.parse(text)
            parse.append(time.process_time() - c0)
    finally:
        gc.enable()
    json_cpu = []
    for _ in range(repeat):
        c0 = time.process_time()
        for a in analyses:
            to_json(a)
        json_cpu.append(time.process_time() - c0)
    return {
        "lines": lines,
        "files": sum(a.stats["files"] for a in analyses),
        "nodes": sum(a.stats["nodes"] for a in analyses),
        "keys": sum(a.stats["keys_read"] for a in analyses),
        "cpu": min(cpu),
        "wall": statistics.median(wall),
        "lps_cpu": lines / min(cpu),
        "lps_wall": lines / statistics.median(wall),
        "lps_parse": lines / max(min(parse), 1e-9),
        "vs_parse": min(cpu) / max(min(parse), 1e-9),
        "json_ms": min(json_cpu) * 1000,
    }


def builtin_modules(folder: Path) -> list[tuple[Path, Path]]:
    """Every module of the built-in TTTv1 model that trace-deps analyses (those with a class that has forward()
    or __call__), each with the model's model_config.py."""
    config = folder / "model_config.py"
    found = []
    for path in sorted(folder.glob("*.py")):
        try:
            analyze(path, config)
        except TraceError:
            continue
        found.append((path, config))
    return found


def _files(module: Path, config: Path | None, analysis) -> list[Path]:
    folders = {module.resolve().parent} | ({config.resolve().parent} if config else set())
    out = []
    for name in analysis.files:
        for folder in folders:
            candidate = folder / name
            if candidate.is_file():
                out.append(candidate)
                break
    return out


PARSE_ONLY = """
import ast, sys
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as handle:
        ast.parse(handle.read())
"""


def _child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds of the child: user + sys, wall seconds) of one process run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def trace_command(script: str | None) -> list[str]:
    """How a user runs the tool: the ``trace-deps`` console script the install put next to this interpreter (or
    ``script``, e.g. another environment's); ``python -m`` only where no script is installed (it compiles
    ``cli.py`` from source at every run, as ``-m`` runs a module as ``__main__``)."""
    if script is None:
        installed = Path(sys.executable).parent / "trace-deps"
        if installed.is_file():
            script = str(installed)
    if script is not None:
        return [script]
    return [sys.executable, "-m", "tttv2_tools.trace_dependencies.cli"]


def package_bytecode() -> str:
    """Whether the package's modules have bytecode next to their sources (what the second process row runs with:
    without it every run compiles them from source)."""
    import importlib.util

    import tttv2_tools.trace_dependencies.cli as cli

    folder = Path(cli.__file__).parent
    sources = sorted(folder.glob("*.py"))
    cached = [p for p in sources if Path(importlib.util.cache_from_source(str(p))).is_file()]
    return f"{len(cached)} of {len(sources)} modules of {folder} have bytecode next to them"


def measure_process(module: Path, config: Path, repeat: int, trace: list[str], cached: bool) -> dict:
    """``trace-deps --json`` (JSON on stdout, sent to /dev/null) vs an ast.parse-only process on the files
    trace-deps reads, run alternately. ``cached``: with compiled bytecode, as an installed tool runs (pip compiles
    a wheel's modules when it installs it), written to a temporary folder by one untimed run of each (the
    environment may set PYTHONDONTWRITEBYTECODE); else in the environment as it is."""
    files = [str(p) for p in _files(module, config, analyze(module, config))]
    trace = [*trace, "--json", str(module), str(config)]
    parse = [sys.executable, "-c", PARSE_ONLY, *files]
    runs: dict[str, list[tuple[float, float]]] = {"trace": [], "parse": []}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ)
        if cached:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        _child(trace, env)
        _child(parse, env)
        for i in range(repeat):  # pairs, the order alternating: A B, B A, A B, ...
            order = ("trace", "parse") if i % 2 == 0 else ("parse", "trace")
            for name in order:
                runs[name].append(_child(trace if name == "trace" else parse, env))
    best = {k: min(c for c, _ in v) for k, v in runs.items()}
    wall = {k: statistics.median(w for _, w in v) for k, v in runs.items()}
    pairs = [t[0] / p[0] for t, p in zip(runs["trace"], runs["parse"]) if p[0] > 0]
    return {
        "files": len(files),
        "runs": repeat,
        "trace_cpu": best["trace"],
        "parse_cpu": best["parse"],
        "trace_wall": wall["trace"],
        "parse_wall": wall["parse"],
        "ratio_cpu": best["trace"] / best["parse"],
        "ratio_pairs": statistics.median(pairs),
        "ratio_wall": wall["trace"] / wall["parse"],
    }


def peer_inputs(peer: Path, module: Path | None, config: Path | None) -> tuple[Path, Path]:
    """MODULE and CONFIG for the peer pairing: as given, else the peer checkout's tt_transformers files (the peer
    script sits in models/common/modules/mlp/ and reads models/tt_transformers/tt/ccl.py itself)."""
    parents = peer.resolve().parents
    folder = (parents[3] if len(parents) > 3 else parents[0]) / "tt_transformers" / "tt"
    return module or folder / "attention.py", config or folder / "model_config.py"


def measure_peer(peer: Path, module: Path, config: Path, repeat: int, trace: list[str]) -> dict:
    """``trace-deps MODULE CONFIG --json=OUT`` (A) against the peer ``python SCRIPT --json-file OUT MODULE CONFIG``
    (B): whole processes, in pairs whose order alternates, both with bytecode cached as an installed tool has it
    (the peer runs as a script, which Python compiles at every run: that is how it is run). CPU = user + sys."""
    runs: dict[str, list[tuple[float, float]]] = {"trace": [], "peer": []}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "cache")
        commands = {
            "trace": [*trace, str(module), str(config), f"--json={Path(tmp) / 'ours.json'}"],
            "peer": [
                sys.executable,
                str(peer),
                "--json-file",
                str(Path(tmp) / "peer.json"),
                str(module),
                str(config),
            ],
        }
        for argv in commands.values():
            _child(argv, env)
        for i in range(repeat):
            order = ("trace", "peer") if i % 2 == 0 else ("peer", "trace")
            for name in order:
                runs[name].append(_child(commands[name], env))
        sizes = {
            name: (Path(tmp) / f"{'ours' if name == 'trace' else 'peer'}.json").stat().st_size
            for name in runs
        }
    pairs = [t[0] / p[0] for t, p in zip(runs["trace"], runs["peer"]) if p[0] > 0]
    return {
        "runs": repeat,
        "trace_cpu": statistics.median(c for c, _ in runs["trace"]),
        "peer_cpu": statistics.median(c for c, _ in runs["peer"]),
        "trace_wall": statistics.median(w for _, w in runs["trace"]),
        "peer_wall": statistics.median(w for _, w in runs["peer"]),
        "ratio_pairs": statistics.median(pairs),
        "ratio_min": min(pairs),
        "ratio_max": max(pairs),
        "sizes": sizes,
    }


def peer_table(module: Path, config: Path, r: dict) -> str:
    return "\n".join(
        [
            f"Inputs: {module} + {config}; JSON written: trace-deps {r['sizes']['trace']:,} bytes, "
            f"peer {r['sizes']['peer']:,} bytes.\n",
            "| pairs | trace-deps --json=OUT CPU (ms, median) | peer --json-file OUT CPU (ms, median) | "
            "ratio (CPU, median of pairs; min-max) | trace-deps wall (ms, median) | peer wall (ms, median) | goal |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {r['runs']} | {r['trace_cpu'] * 1000:.0f} | {r['peer_cpu'] * 1000:.0f} | {r['ratio_pairs']:.2f} "
            f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) | {r['trace_wall'] * 1000:.0f} | "
            f"{r['peer_wall'] * 1000:.0f} | <= {PEER_GOAL:g} |",
        ]
    )


def process_table(rows: list[tuple[str, dict]]) -> str:
    out = [
        "| input | bytecode | files | pairs | trace-deps --json CPU (ms, best) | ast.parse-only CPU (ms, best) | "
        "ratio (best CPU) | ratio (CPU, median of pairs) | trace-deps wall (ms, median) | "
        "ast.parse-only wall (ms, median) | ratio (wall) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        out.append(
            f"| {name} | {r['files']} | {r['runs']} | {r['trace_cpu'] * 1000:.0f} | {r['parse_cpu'] * 1000:.0f} | "
            f"{r['ratio_cpu']:.2f} | {r['ratio_pairs']:.2f} | {r['trace_wall'] * 1000:.0f} | "
            f"{r['parse_wall'] * 1000:.0f} | {r['ratio_wall']:.2f} |"
        )
    return "\n".join(out)


def table(rows: list[tuple[str, dict]]) -> str:
    out = [
        "| input | files | lines | graph nodes | keys read | CPU (ms, best) | lines/s per core (CPU) | "
        "wall (ms, median) | lines/s (wall) | ast.parse alone (lines/s) | analysis / ast.parse (CPU) | "
        "--json (CPU ms, best) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        out.append(
            f"| {name} | {r['files']} | {r['lines']} | {r['nodes']} | {r['keys']} | {r['cpu'] * 1000:.1f} | "
            f"{r['lps_cpu']:,.0f} | {r['wall'] * 1000:.1f} | {r['lps_wall']:,.0f} | {r['lps_parse']:,.0f} | "
            f"{r['vs_parse']:.1f} | {r['json_ms']:.1f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=8000, help="size of the generated config (default 8000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each in-process measurement")
    parser.add_argument(
        "--process-repeat", type=int, default=20, help="pairs of whole processes (default 20)"
    )
    parser.add_argument(
        "--trace-deps",
        dest="script",
        metavar="SCRIPT",
        help="the trace-deps command to time (default: the console script next to this Python)",
    )
    parser.add_argument(
        "--peer", type=Path, metavar="SCRIPT", help="tt-metal's trace_dependencies.py, to time side by side"
    )
    parser.add_argument("--peer-module", type=Path, metavar="FILE", help="MODULE for the peer pairing")
    parser.add_argument("--peer-config", type=Path, metavar="FILE", help="CONFIG for the peer pairing")
    parser.add_argument("--peer-only", action="store_true", help="only the peer pairing (needs --peer)")
    parser.add_argument("--doc", type=Path, help="replace the '## Benchmark' section of this markdown file")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a 50-line config, one round, one process pair, one module in the all-modules row: a smoke test",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.repeat, args.process_repeat = 50, 1, 1
    rows = []
    builtin = ROOT / "tttv1" / "tt"
    trace = trace_command(args.script)
    peer_text = (
        "Against tt-metal's tracer: skipped (pass --peer SCRIPT, tt-metal's "
        "models/common/modules/mlp/trace_dependencies.py; it is not part of this project)."
    )
    if args.peer is not None:
        module, config = peer_inputs(args.peer, args.peer_module, args.peer_config)
        missing = [str(p) for p in (args.peer, module, config) if not p.is_file()]
        if missing:
            parser.error(f"--peer: not a file: {', '.join(missing)}")
        peer_text = "Against tt-metal's tracer (side by side in this run):\n\n" + peer_table(
            module, config, measure_peer(args.peer, module, config, args.process_repeat, trace)
        )
    elif args.peer_only:
        parser.error("--peer-only needs --peer SCRIPT")
    print(peer_text + "\n", flush=True)
    if args.peer_only:
        return 0
    name = "built-in tttv1/tt/attention.py + model_config.py"
    processes = [
        (
            f"{name} | compiled (as installed from a wheel)",
            measure_process(
                builtin / "attention.py", builtin / "model_config.py", args.process_repeat, trace, True
            ),
        ),
        (
            f"{name} | as this environment runs it" + ("" if args.script else f" ({package_bytecode()})"),
            measure_process(
                builtin / "attention.py", builtin / "model_config.py", args.process_repeat, trace, False
            ),
        ),
    ]
    for name in ("mlp.py", "attention.py"):
        if (builtin / name).is_file():
            rows.append(
                (
                    f"built-in tttv1/tt/{name} + model_config.py",
                    measure(builtin / name, builtin / "model_config.py", args.repeat),
                )
            )
    modules = (
        builtin_modules(builtin)[:1] if args.quick else builtin_modules(builtin)
    )  # --quick: one analysis
    rows.append(
        (
            f"every built-in tttv1/tt module with forward() ({len(modules)} analyses: "
            + ", ".join(m.name for m, _ in modules)
            + ")",
            measure_many(modules, args.repeat),
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        consumer, config = generate(folder, args.lines, read_all=False)
        rows.append(
            (
                f"generated model_config ({args.lines} lines), 4 keys read",
                measure(consumer, config, args.repeat),
            )
        )
        consumer, config = generate(folder, args.lines, read_all=True)
        rows.append(
            (
                f"generated model_config ({args.lines} lines), every key read",
                measure(consumer, config, args.repeat),
            )
        )
    header = (
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()} "
        f"({platform.platform()}); {datetime.date.today().isoformat()}\n"
        f"Command: python benchmarks/bench_trace.py --lines {args.lines} --repeat {args.repeat} "
        f"--process-repeat {args.process_repeat}"
        + (f" --trace-deps {args.script}" if args.script else "")
        + (f" --peer {args.peer}" if args.peer else "")
        + "\n"
        f"Load average at start: {os.getloadavg()[0]:.2f}\n"
        f"trace-deps command: {' '.join(trace)}\n"
        f"Goals: whole process <= {PROCESS_GOAL:g}x an ast.parse-only process on the same files; "
        f">= {GOAL:,} lines/s per core for the analysis (single process)."
    )
    text = (
        header
        + "\n\nWhole process (side by side in this run):\n\n"
        + process_table(processes)
        + "\n\n"
        + peer_text
        + "\n\nThe analysis in one process:\n\n"
        + table(rows)
    )
    print(text)
    if args.doc:
        doc = args.doc.read_text()
        section = "## Benchmark\n\n" + text + "\n"
        if "## Benchmark" in doc:
            doc = re.sub(r"## Benchmark\n.*?(?=\n## |\Z)", lambda _m: section, doc, count=1, flags=re.S)
        else:
            doc += "\n" + section
        args.doc.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
